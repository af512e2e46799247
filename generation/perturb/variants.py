"""Seeded variant sampling and application: each variant changes one factor of one aesthetic aspect.

Aspects and their factors (FACTORS); the parameter ranges are data (RANGES), each a list of intervals
that a value is drawn from uniformly (an interval picked at random first):

- color (any image): hue rotation in degrees, saturation factor, brightness factor (see `raster`);
- composition (any image): crop box, reframe shift, scale factor about the centre;
- font (designs): one text layer's size (factor on px), weight (regular <-> bold), tracking (px added,
  drawn as a fraction of the font size);
- graphics (designs): one shape's stroke width (factor on px; 2-8 px if it had none), texture kind
  (another of none/hatch/crosshatch/dots/noise), texture density (factor on the spacing; the record's
  `density_ratio` says how the marks' density changed, see `density_ratio`).

Font variants whose text would leave the canvas are redrawn, so only the font factor changes.
Variants are drawn in a seeded round-robin over the available factors (order shuffled by the seed), and
are all distinct; variant i depends only on the seed and i, so a smaller --n gives a prefix. (`hvcu perturb`
passes a seed mixed with the input's content hash, so each input gets its own variants; see `run`.)
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from PIL import Image, ImageColor

from generation.perturb import raster
from generation.perturb.design import TEXTURES, Design, ShapeLayer, TextLayer
from generation.perturb.fonts import has_bold
from generation.perturb.render import render, text_bounds

FACTORS: dict[str, tuple[str, ...]] = {
    "color": ("hue", "saturation", "brightness"),
    "composition": ("crop", "reframe", "scale"),
    "font": ("size", "weight", "tracking"),
    "graphics": ("stroke_width", "texture", "density"),
}
ASPECTS = tuple(FACTORS)
DESIGN_ASPECTS = ("font", "graphics")

Intervals = tuple[tuple[float, float], ...]
RANGES: dict[str, dict[str, Intervals]] = {
    "hue": {"degrees": ((-180.0, -20.0), (20.0, 180.0))},
    "saturation": {"factor": ((0.25, 0.7), (1.4, 2.2))},
    "brightness": {"factor": ((0.5, 0.8), (1.2, 1.5))},
    "crop": {"keep": ((0.6, 0.9),)},  # fraction of width and of height kept, drawn separately
    "reframe": {"shift": ((0.06, 0.2),)},  # distance as a fraction of the canvas, direction uniform
    "scale": {"factor": ((0.6, 0.85), (1.15, 1.5))},
    "size": {"factor": ((0.6, 0.8), (1.25, 1.6))},
    "tracking": {"em": ((-0.08, -0.03), (0.05, 0.3))},  # added tracking as a fraction of the font size
    "stroke_width": {"factor": ((0.3, 0.6), (1.8, 3.0)), "from_zero": ((2.0, 8.0),)},
    "density": {"spacing_factor": ((0.4, 0.7), (1.5, 2.5))},
}
ATTEMPTS_PER_FACTOR = 64


@dataclass(frozen=True)
class Variant:
    """One perturbation: its aspect, the single factor it changes, and the parameters (JSON-ready)."""

    aspect: str
    factor: str
    params: dict[str, Any]

    def key(self) -> str:
        """Return a canonical text form, used to keep variants distinct."""
        return json.dumps([self.aspect, self.factor, self.params], sort_keys=True)


def _draw(rng: random.Random, intervals: Intervals) -> float:
    lo, hi = intervals[rng.randrange(len(intervals))] if len(intervals) > 1 else intervals[0]
    return rng.uniform(lo, hi)


def _layer_params(design: Design, index: int, field: str, old: Any, new: Any, **extra: Any) -> dict[str, Any]:
    layer = design.layers[index]
    return {"layer": index, "layer_name": layer.name, "field": field, "from": old, "to": new, **extra}


def _texts(design: Design | None) -> list[int]:
    return [i for i, layer in enumerate(design.layers) if isinstance(layer, TextLayer)] if design else []


def _shapes(design: Design | None, test: Callable[[ShapeLayer], bool]) -> list[int]:
    if design is None:
        return []
    return [i for i, layer in enumerate(design.layers) if isinstance(layer, ShapeLayer) and test(layer)]


def _candidates(factor: str, design: Design | None) -> list[int]:
    """Return the layers a design-level factor can change (empty: the factor is unavailable)."""
    if factor in ("size", "tracking"):
        return _texts(design)
    if factor == "weight":
        return [i for i in _texts(design) if has_bold(design.layers[i].font, design.layers[i].font_bold)]
    if factor == "stroke_width":
        return _shapes(design, lambda s: s.stroke is not None)
    if factor == "texture":
        return _shapes(design, lambda s: s.kind != "line")
    if factor == "density":
        return _shapes(design, lambda s: s.texture != "none")
    raise ValueError(f"unknown design factor {factor!r}")


def density_ratio(texture: str, old_spacing: float, new_spacing: float) -> tuple[float, str]:
    """Return how much denser a texture's marks get when its spacing changes, and what that counts.

    hatch and crosshatch draw lines `spacing` px apart, so the lines per px across them (and a hatch's ink)
    scale as old/new spacing; for crosshatch that holds for each of its two directions (total ink grows a
    little less, where the directions cross). dots and noise place one dot per spacing^2 px^2, so the dots
    per px^2 (and their ink, while dots do not touch) scale as (old/new spacing)^2.
    """
    if texture in ("hatch", "crosshatch"):
        return round(old_spacing / new_spacing, 3), "lines per px"
    if texture in ("dots", "noise"):
        return round((old_spacing / new_spacing) ** 2, 3), "dots per px^2"
    raise ValueError(f"texture {texture!r} has no density")


def _sample_image_factor(factor: str, rng: random.Random) -> dict[str, Any]:
    """Draw the parameters of a colour or composition factor."""
    r = RANGES[factor]
    if factor == "hue":
        return {"degrees": round(_draw(rng, r["degrees"]), 1)}
    if factor in ("saturation", "brightness", "scale"):
        return {"factor": round(_draw(rng, r["factor"]), 3)}
    if factor == "crop":
        kw, kh = _draw(rng, r["keep"]), _draw(rng, r["keep"])
        left, top = rng.uniform(0, 1 - kw), rng.uniform(0, 1 - kh)
        return {"box": [round(left, 3), round(top, 3), round(left + kw, 3), round(top + kh, 3)]}
    if factor == "reframe":
        shift, angle = _draw(rng, r["shift"]), rng.uniform(0, 2 * math.pi)
        return {"dx": round(shift * math.cos(angle), 3), "dy": round(shift * math.sin(angle), 3)}
    raise ValueError(f"unknown factor {factor!r}")


def _text_fits(design: Design, index: int, changed: TextLayer) -> bool:
    """Tell whether a changed text layer stays inside the canvas (or no further out than the original)."""
    x0, y0, x1, y1 = text_bounds(changed)
    ox0, oy0, ox1, oy1 = text_bounds(design.layers[index])
    return (
        x0 >= min(0, ox0)
        and y0 >= min(0, oy0)
        and x1 <= max(design.canvas.width, ox1)
        and y1 <= max(design.canvas.height, oy1)
    )


def _sample_design_factor(factor: str, rng: random.Random, design: Design) -> dict[str, Any] | None:
    """Draw a font or graphics factor's parameters; None when the draw changes nothing or text leaves the canvas."""
    index = rng.choice(_candidates(factor, design))
    layer = design.layers[index]
    r = RANGES.get(factor, {})
    if factor == "size":
        new = round(layer.size * _draw(rng, r["factor"]))
        if new in (layer.size, 0) or not _text_fits(design, index, replace(layer, size=new)):
            return None
        return _layer_params(design, index, "size", layer.size, new)
    if factor == "weight":
        new = "regular" if layer.weight == "bold" else "bold"
        if not _text_fits(design, index, replace(layer, weight=new)):
            return None
        return _layer_params(design, index, "weight", layer.weight, new)
    if factor == "tracking":
        new = round(layer.tracking + _draw(rng, r["em"]) * layer.size, 1)
        if (
            new == layer.tracking
            or new <= -layer.size / 2
            or not _text_fits(design, index, replace(layer, tracking=new))
        ):
            return None
        return _layer_params(design, index, "tracking", layer.tracking, new)
    if factor == "stroke_width":
        old = layer.stroke_width
        new = round(_draw(rng, r["from_zero"])) if old == 0 else max(1, round(old * _draw(rng, r["factor"])))
        return None if new == old else _layer_params(design, index, "stroke_width", old, new)
    if factor == "texture":
        new = rng.choice([t for t in TEXTURES if t != layer.texture])
        return _layer_params(design, index, "texture", layer.texture, new)
    if factor == "density":
        old = layer.texture_spacing
        new = max(2.0, round(old * _draw(rng, r["spacing_factor"]), 1))
        if new == old:
            return None
        ratio, unit = density_ratio(layer.texture, old, new)
        return _layer_params(design, index, "texture_spacing", old, new, density_ratio=ratio, density_of=unit)
    raise ValueError(f"unknown factor {factor!r}")


def available_factors(aspect: str, design: Design | None) -> list[str]:
    """Return the factors of an aspect that apply to this source (designs may lack text or shapes)."""
    if aspect not in FACTORS:
        raise ValueError(f"unknown aspect {aspect!r} (known: {', '.join(ASPECTS)})")
    if aspect not in DESIGN_ASPECTS:
        return list(FACTORS[aspect])
    if design is None:
        raise ValueError(f"{aspect} variants need a layered design (.json), not a raster image")
    return [f for f in FACTORS[aspect] if _candidates(f, design)]


def sample_variants(aspect: str, n: int, seed: int, design: Design | None = None) -> list[Variant]:
    """Draw `n` distinct single-factor variants of an aspect, deterministically from `seed`."""
    if n < 1:
        raise ValueError(f"the number of variants must be >= 1, got {n}")
    factors = available_factors(aspect, design)
    if not factors:
        what = "text layers" if aspect == "font" else "shape layers"
        raise ValueError(f"{aspect} variants need {what}; the design has none that can change")
    rng = random.Random(seed)
    rng.shuffle(factors)
    variants: list[Variant] = []
    seen: set[str] = set()
    for i in range(n):
        found = None
        for k in range(len(factors)):
            factor = factors[(i + k) % len(factors)]
            for _ in range(ATTEMPTS_PER_FACTOR):
                if aspect in DESIGN_ASPECTS:
                    params = _sample_design_factor(factor, rng, design)
                else:
                    params = _sample_image_factor(factor, rng)
                if params is not None and (v := Variant(aspect, factor, params)).key() not in seen:
                    found = v
                    break
            if found:
                break
        if found is None:
            raise ValueError(f"only {i} distinct {aspect} variant(s) are possible for this source; asked for {n}")
        seen.add(found.key())
        variants.append(found)
    return variants


def apply_to_image(variant: Variant, image: Image.Image, pad: tuple[int, int, int] | None = None) -> Image.Image:
    """Apply a colour or composition variant to an image; `pad` fills uncovered canvas (default: border colour)."""
    p = variant.params
    ops: dict[str, Callable[[], Image.Image]] = {
        "hue": lambda: raster.hue_rotate(image, p["degrees"]),
        "saturation": lambda: raster.scale_saturation(image, p["factor"]),
        "brightness": lambda: raster.scale_brightness(image, p["factor"]),
        "crop": lambda: raster.crop(image, tuple(p["box"])),
        "reframe": lambda: raster.reframe(image, p["dx"], p["dy"], pad),
        "scale": lambda: raster.scale(image, p["factor"], pad),
    }
    if variant.factor not in ops:
        raise ValueError(f"{variant.aspect}/{variant.factor} is not an image-level variant")
    return ops[variant.factor]()


def apply_to_design(variant: Variant, design: Design) -> Design:
    """Apply a font or graphics variant: the design with one field of one layer changed."""
    p = variant.params
    layer = design.layers[p["layer"]]
    if getattr(layer, p["field"]) != p["from"]:
        raise ValueError(
            f"layer {p['layer']} field {p['field']!r} is {getattr(layer, p['field'])!r}, not {p['from']!r}"
        )
    layers = list(design.layers)
    layers[p["layer"]] = replace(layer, **{p["field"]: p["to"]})
    return replace(design, layers=tuple(layers))


def make_variant(variant: Variant, source: Design | Image.Image) -> tuple[Image.Image, Design | None]:
    """Produce a variant's image (and, for font/graphics, its perturbed design) from a design or an image."""
    if variant.aspect in DESIGN_ASPECTS:
        if not isinstance(source, Design):
            raise ValueError(f"{variant.aspect} variants need a layered design (.json), not a raster image")
        changed = apply_to_design(variant, source)
        return render(changed), changed
    if isinstance(source, Design):
        background = ImageColor.getcolor(source.canvas.background, "RGB")
        return apply_to_image(variant, render(source), background), None
    return apply_to_image(variant, source), None
