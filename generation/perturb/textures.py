"""Texture masks for shape interiors: hatch, crosshatch, dots and seeded noise, as 8-bit PIL masks."""

from __future__ import annotations

import math
import random

import numpy as np
from PIL import Image, ImageDraw


def texture_mask(kind: str, size: tuple[int, int], spacing: float, width: float, seed: int = 0) -> Image.Image:
    """Return an "L" mask (255 = ink) of a texture tiled over `size`, in coordinates local to its top left.

    hatch: 45 degree lines `width` px thick, one every `spacing` px (measured across the lines);
    crosshatch: hatch plus the mirrored direction; dots: dots of diameter `width` on a `spacing` px grid;
    noise: as many dots as the grid would hold, at positions drawn from `seed`.
    """
    w, h = size
    if kind == "none" or w <= 0 or h <= 0:
        return Image.new("L", (max(w, 0), max(h, 0)), 0)
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64) + 0.5  # pixel centres
    if kind in ("hatch", "crosshatch"):
        cover = _band_cover(np.mod((xs + ys) / math.sqrt(2), spacing), spacing, width)
        if kind == "crosshatch":
            cover = np.maximum(cover, _band_cover(np.mod((xs - ys) / math.sqrt(2), spacing), spacing, width))
    elif kind == "dots":
        dx, dy = np.mod(xs, spacing) - spacing / 2, np.mod(ys, spacing) - spacing / 2
        cover = np.clip(width / 2 - np.hypot(dx, dy) + 0.5, 0.0, 1.0)
    elif kind == "noise":
        mask = Image.new("L", (w, h), 0)
        draw, rng, r = ImageDraw.Draw(mask), random.Random(seed), width / 2
        for _ in range(round(w * h / spacing**2)):
            cx, cy = rng.uniform(0, w), rng.uniform(0, h)
            draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=255)
        return mask
    else:
        raise ValueError(f"unknown texture {kind!r}")
    return Image.fromarray(np.rint(cover * 255).astype(np.uint8))


def _band_cover(u: np.ndarray, spacing: float, width: float) -> np.ndarray:
    """Return pixel coverage in [0, 1] of bands [0, width) repeating every `spacing`, given positions `u`.

    Coverage is the signed distance to the band edge plus half a pixel, clipped: a one-pixel linear ramp
    that anti-aliases the edges and keeps the mean coverage at width / spacing.
    """
    inside = np.minimum(u, width - u)
    outside = -np.minimum(u - width, spacing - u)
    signed = np.where(u < width, inside, outside)
    return np.clip(signed + 0.5, 0.0, 1.0)
