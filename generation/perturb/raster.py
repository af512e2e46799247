"""Colour and composition operations on RGB images, each changing exactly one factor.

Colour operations work in HSV (matplotlib's conversion, float64) and round once back to 8 bits:
`hue_rotate` adds degrees to every pixel's hue and leaves saturation and value; `scale_saturation` and
`scale_brightness` multiply S or V (clipped to [0, 1]) and leave the other two. Composition operations
move content: `crop` keeps a sub-rectangle, `reframe` shifts the content inside the same canvas, `scale`
zooms the content about the canvas centre. Uncovered canvas takes a pad colour (default `border_color`).
"""

from __future__ import annotations

import numpy as np
from PIL import Image

RESAMPLE = Image.Resampling.LANCZOS


def to_rgb(image: Image.Image) -> Image.Image:
    """Return an RGB copy of any PIL image, transparent parts composited over white."""
    if image.mode == "RGB":
        return image.copy()
    rgba = image.convert("RGBA")
    base = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    base.alpha_composite(rgba)
    return base.convert("RGB")


def to_hsv(image: Image.Image) -> np.ndarray:
    """Return an image's HSV values as floats in [0, 1], shape (height, width, 3)."""
    from matplotlib.colors import rgb_to_hsv  # imported on use: `hvcu` builds every parser at start-up

    return rgb_to_hsv(np.asarray(to_rgb(image), dtype=np.float64) / 255.0)


def from_hsv(hsv: np.ndarray) -> Image.Image:
    """Return the RGB image for HSV floats in [0, 1]."""
    from matplotlib.colors import hsv_to_rgb

    rgb = hsv_to_rgb(np.clip(hsv, 0.0, 1.0))
    return Image.fromarray(np.rint(rgb * 255.0).astype(np.uint8))


def hue_rotate(image: Image.Image, degrees: float) -> Image.Image:
    """Rotate every pixel's hue by `degrees` (positive: red -> yellow -> green); S and V stay as they are."""
    hsv = to_hsv(image)
    hsv[..., 0] = np.mod(hsv[..., 0] + degrees / 360.0, 1.0)
    return from_hsv(hsv)


def scale_saturation(image: Image.Image, factor: float) -> Image.Image:
    """Multiply every pixel's HSV saturation by `factor` (clipped to 1); hue and value stay."""
    if factor < 0:
        raise ValueError(f"saturation factor must be >= 0, got {factor}")
    hsv = to_hsv(image)
    hsv[..., 1] = np.clip(hsv[..., 1] * factor, 0.0, 1.0)
    return from_hsv(hsv)


def scale_brightness(image: Image.Image, factor: float) -> Image.Image:
    """Multiply every pixel's HSV value (brightness) by `factor` (clipped to 1); hue and saturation stay."""
    if factor < 0:
        raise ValueError(f"brightness factor must be >= 0, got {factor}")
    hsv = to_hsv(image)
    hsv[..., 2] = np.clip(hsv[..., 2] * factor, 0.0, 1.0)
    return from_hsv(hsv)


def border_color(image: Image.Image) -> tuple[int, int, int]:
    """Return the per-channel median colour of the image's outermost pixel ring (the padding colour)."""
    a = np.asarray(to_rgb(image))
    ring = np.concatenate([a[0], a[-1], a[1:-1, 0], a[1:-1, -1]])
    return tuple(int(v) for v in np.median(ring, axis=0).round())


def crop(image: Image.Image, box: tuple[float, float, float, float]) -> Image.Image:
    """Keep the sub-rectangle `box` = (left, top, right, bottom) as fractions of width and height.

    The output is the cropped region at its own resolution (smaller than the input).
    """
    left, top, right, bottom = box
    if not (0 <= left < right <= 1 and 0 <= top < bottom <= 1):
        raise ValueError(f"crop box must satisfy 0 <= left < right <= 1 and 0 <= top < bottom <= 1, got {box}")
    w, h = image.size
    pixels = (round(left * w), round(top * h), round(right * w), round(bottom * h))
    return to_rgb(image).crop(pixels)


def reframe(image: Image.Image, dx: float, dy: float, pad: tuple[int, int, int] | None = None) -> Image.Image:
    """Shift the content by (dx * width, dy * height) px inside the same canvas (positive: right, down).

    Content pushed past an edge is lost; the uncovered strip takes `pad` (default: `border_color`).
    """
    if not (-1 < dx < 1 and -1 < dy < 1):
        raise ValueError(f"reframe shifts must be fractions in (-1, 1), got dx={dx}, dy={dy}")
    w, h = image.size
    out = Image.new("RGB", image.size, pad or border_color(image))
    out.paste(to_rgb(image), (round(dx * w), round(dy * h)))
    return out


def scale(image: Image.Image, factor: float, pad: tuple[int, int, int] | None = None) -> Image.Image:
    """Resize the content by `factor` about the canvas centre, keeping the canvas size.

    factor < 1 shrinks the content and pads with `pad` (default: `border_color`); factor > 1 enlarges it
    and crops the edges.
    """
    if factor <= 0:
        raise ValueError(f"scale factor must be > 0, got {factor}")
    w, h = image.size
    sw, sh = max(1, round(w * factor)), max(1, round(h * factor))
    resized = to_rgb(image).resize((sw, sh), RESAMPLE)
    out = Image.new("RGB", image.size, pad or border_color(image))
    out.paste(resized, ((w - sw) // 2, (h - sh) // 2))
    return out
