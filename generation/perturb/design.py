"""The layered-design format: a canvas with image, text and shape layers, read from and written to JSON.

A design file is a JSON object ``{"canvas": {...}, "layers": [...]}``; each layer has a ``type``
(``image``, ``text`` or ``shape``) and the fields of the matching dataclass below. Coordinates are canvas
pixels, origin top left. File paths (image layers, font files) are relative to the JSON file. Unknown keys
and bad values raise ValueError naming the file, the layer (index and name) and the field. The canvas and
every image layer's box are at most MAX_SIDE px a side, so a typo cannot ask for gigabytes of memory.
Every image layer's file is decoded when the design is read: a truncated image or a decompression bomb
stops the run there, naming the layer.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from PIL import ImageColor, ImageFont

from generation.perturb.fonts import FONT_FAMILIES, WEIGHTS, font_file, is_font_path
from hvcu_tasks.data import jsonio
from hvcu_tasks.data.files import ImageError, check_image, write_atomic

ANCHORS = tuple(h + v for v in "tmb" for h in "lmr")
FITS = ("stretch", "contain", "cover")
SHAPE_KINDS = ("rect", "ellipse", "line", "polygon")
TEXTURES = ("none", "hatch", "crosshatch", "dots", "noise")
MAX_SIDE = 8192  # px: the largest canvas width/height and image-layer box width/height (an RGBA canvas <= 256 MiB)


@dataclass(frozen=True)
class Canvas:
    """Canvas size in pixels and its background colour (any PIL colour string)."""

    width: int
    height: int
    background: str = "#ffffff"


@dataclass(frozen=True)
class ImageLayer:
    """A raster placed into `box` (x0, y0, x1, y1); `fit` is stretch, contain (letterbox) or cover (crop)."""

    path: Path
    box: tuple[float, float, float, float]
    fit: str = "stretch"
    name: str = ""
    opacity: float = 1.0


@dataclass(frozen=True)
class TextLayer:
    """Text drawn glyph by glyph: `size` px, `tracking` extra px between glyphs, block anchored at `position`.

    `font` is a family from FONT_FAMILIES or a font file; `weight` picks the family's real regular or bold
    file (`font_bold` gives the bold file for a font file). `anchor` is two letters, horizontal l/m/r then
    vertical t/m/b, for the whole text block; lines are aligned by the horizontal letter. With `max_width`
    words wrap onto new lines; `line_spacing` is the baseline distance as a multiple of `size`.
    """

    text: str
    position: tuple[float, float]
    size: int
    font: str = "DejaVu Sans"
    font_bold: str | None = None
    weight: str = "regular"
    tracking: float = 0.0
    color: str = "#000000"
    anchor: str = "lt"
    max_width: float | None = None
    line_spacing: float = 1.2
    name: str = ""
    opacity: float = 1.0


@dataclass(frozen=True)
class ShapeLayer:
    """A rect/ellipse (points = two corners), line (2+ points) or polygon (3+ points) with fill, stroke, texture.

    The stroke (`stroke_width` px, inside the outline for rect/ellipse/polygon) is drawn over the fill and
    texture. Textures fill the shape's interior: `hatch` (45 degree lines), `crosshatch`, `dots` (a grid) or
    `noise` (the same number of dots at positions drawn from `texture_seed`); lines and dots repeat every
    `texture_spacing` px and are `texture_width` px wide, so lines per px go as 1 / spacing and dots per px^2
    as 1 / spacing^2.
    """

    kind: str
    points: tuple[tuple[float, float], ...]
    fill: str | None = None
    stroke: str | None = None
    stroke_width: int = 0
    texture: str = "none"
    texture_color: str = "#000000"
    texture_spacing: float = 10.0
    texture_width: float = 2.0
    texture_seed: int = 0
    name: str = ""
    opacity: float = 1.0


Layer = ImageLayer | TextLayer | ShapeLayer
LAYER_TYPES: dict[str, type] = {"image": ImageLayer, "text": TextLayer, "shape": ShapeLayer}


@dataclass(frozen=True)
class Design:
    """A canvas and its layers, bottom first."""

    canvas: Canvas
    layers: tuple[Layer, ...]


class _Ctx:
    """Where a value sits (file, layer) and the folder relative paths resolve against."""

    def __init__(self, source: str, base_dir: Path, where: str) -> None:
        self.source, self.base_dir, self.where = source, base_dir, where

    def error(self, field: str, message: str) -> ValueError:
        """Build the ValueError for one field."""
        return ValueError(f"{self.source}: {self.where}: field {field!r}: {message}")


Parser = Callable[[Any, _Ctx, str], Any]


def _number(value: Any, ctx: _Ctx, field: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ctx.error(field, f"must be a number, got {value!r}")
    return value


def _positive_int(value: Any, ctx: _Ctx, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ctx.error(field, f"must be a positive integer, got {value!r}")
    return value


def _side(value: Any, ctx: _Ctx, field: str) -> int:
    if _positive_int(value, ctx, field) > MAX_SIDE:
        raise ctx.error(field, f"must be at most {MAX_SIDE} px (MAX_SIDE), got {value}")
    return value


def _nonnegative_int(value: Any, ctx: _Ctx, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ctx.error(field, f"must be an integer >= 0, got {value!r}")
    return value


def _positive(value: Any, ctx: _Ctx, field: str) -> float | int:
    if _number(value, ctx, field) <= 0:
        raise ctx.error(field, f"must be > 0, got {value!r}")
    return value


def _at_least_one(value: Any, ctx: _Ctx, field: str) -> float | int:
    if _number(value, ctx, field) < 1:
        raise ctx.error(field, f"must be >= 1 px, got {value!r}")
    return value


def _at_least_two(value: Any, ctx: _Ctx, field: str) -> float | int:
    if _number(value, ctx, field) < 2:
        raise ctx.error(field, f"must be >= 2 px, got {value!r}")
    return value


def _opacity(value: Any, ctx: _Ctx, field: str) -> float | int:
    if not 0 <= _number(value, ctx, field) <= 1:
        raise ctx.error(field, f"must be between 0 and 1, got {value!r}")
    return value


def _string(value: Any, ctx: _Ctx, field: str) -> str:
    if not isinstance(value, str):
        raise ctx.error(field, f"must be a string, got {value!r}")
    return value


def _nonempty(value: Any, ctx: _Ctx, field: str) -> str:
    if not _string(value, ctx, field).strip():
        raise ctx.error(field, "must not be empty")
    return value


def _color(value: Any, ctx: _Ctx, field: str) -> str:
    try:
        ImageColor.getcolor(_string(value, ctx, field), "RGBA")
    except ValueError:
        raise ctx.error(field, f"not a colour: {value!r} (use e.g. '#1f77b4', '#1f77b480' or 'navy')") from None
    return value


def _optional(parser: Parser) -> Parser:
    def parse(value: Any, ctx: _Ctx, field: str) -> Any:
        return None if value is None else parser(value, ctx, field)

    return parse


def _choice(options: tuple[str, ...]) -> Parser:
    def parse(value: Any, ctx: _Ctx, field: str) -> str:
        if value not in options:
            raise ctx.error(field, f"must be one of {', '.join(options)}; got {value!r}")
        return value

    return parse


def _point(value: Any, ctx: _Ctx, field: str) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2:
        raise ctx.error(field, f"must be [x, y], got {value!r}")
    return (_number(value[0], ctx, field), _number(value[1], ctx, field))


def _points(value: Any, ctx: _Ctx, field: str) -> tuple[tuple[float, float], ...]:
    if not isinstance(value, list) or not value:
        raise ctx.error(field, f"must be a list of [x, y] points, got {value!r}")
    return tuple(_point(p, ctx, field) for p in value)


def _box(value: Any, ctx: _Ctx, field: str) -> tuple[float, float, float, float]:
    if not isinstance(value, list) or len(value) != 4:
        raise ctx.error(field, f"must be [x0, y0, x1, y1], got {value!r}")
    x0, y0, x1, y1 = (_number(v, ctx, field) for v in value)
    if not (x0 < x1 and y0 < y1):
        raise ctx.error(field, f"needs x0 < x1 and y0 < y1, got {value!r}")
    if max(x1 - x0, y1 - y0) > MAX_SIDE:
        raise ctx.error(field, f"the box must be at most {MAX_SIDE} px (MAX_SIDE) a side, got {value!r}")
    return (x0, y0, x1, y1)


def _file(value: Any, ctx: _Ctx, field: str) -> Path:
    path = (ctx.base_dir / _nonempty(value, ctx, field)).resolve()
    if not path.is_file():
        raise ctx.error(field, f"file not found: {path}")
    return path


def _image_file(value: Any, ctx: _Ctx, field: str) -> Path:
    path = _file(value, ctx, field)
    try:
        check_image(path)
    except ImageError as exc:
        raise ctx.error(field, str(exc)) from None
    return path


def _font_value(value: Any, ctx: _Ctx, field: str) -> str:
    value = _nonempty(value, ctx, field)
    if value in FONT_FAMILIES:
        return value
    if not is_font_path(value):
        raise ctx.error(field, f"unknown font family {value!r} (known: {', '.join(FONT_FAMILIES)}, or a font file)")
    path = _file(value, ctx, field)
    try:
        ImageFont.truetype(str(path), 12)
    except OSError:
        raise ctx.error(field, f"not a readable font file: {path}") from None
    return str(path)


PARSERS: dict[type, dict[str, Parser]] = {
    Canvas: {"width": _side, "height": _side, "background": _color},
    ImageLayer: {"path": _image_file, "box": _box, "fit": _choice(FITS), "name": _string, "opacity": _opacity},
    TextLayer: {
        "text": _nonempty,
        "position": _point,
        "size": _side,  # a glyph taller than the largest canvas is a typo, and FreeType would allocate it
        "font": _font_value,
        "font_bold": _optional(_font_value),
        "weight": _choice(WEIGHTS),
        "tracking": _number,
        "color": _color,
        "anchor": _choice(ANCHORS),
        "max_width": _optional(_positive),
        "line_spacing": _positive,
        "name": _string,
        "opacity": _opacity,
    },
    ShapeLayer: {
        "kind": _choice(SHAPE_KINDS),
        "points": _points,
        "fill": _optional(_color),
        "stroke": _optional(_color),
        "stroke_width": _nonnegative_int,
        "texture": _choice(TEXTURES),
        "texture_color": _color,
        "texture_spacing": _at_least_two,
        "texture_width": _at_least_one,
        "texture_seed": _nonnegative_int,
        "name": _string,
        "opacity": _opacity,
    },
}


def _build(cls: type, obj: Any, ctx: _Ctx, skip: tuple[str, ...] = ()) -> Any:
    """Parse a JSON object into dataclass `cls`: unknown keys, missing required fields and bad values fail."""
    if not isinstance(obj, dict):
        raise ValueError(f"{ctx.source}: {ctx.where}: must be a JSON object, got {type(obj).__name__}")
    parsers = PARSERS[cls]
    unknown = sorted(set(obj) - set(parsers) - set(skip))
    if unknown:
        raise ctx.error(unknown[0], f"unknown key (known: {', '.join(parsers)})")
    values: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in obj:
            values[f.name] = parsers[f.name](obj[f.name], ctx, f.name)
        elif f.default is MISSING:
            raise ctx.error(f.name, "missing (required)")
    return cls(**values)


def _check_text(layer: TextLayer, ctx: _Ctx) -> None:
    if layer.tracking <= -layer.size / 2:
        raise ctx.error("tracking", f"must be > -size/2 ({-layer.size / 2}), got {layer.tracking}")
    try:
        font_file(layer.font, layer.weight, layer.font_bold)
    except ValueError as exc:
        raise ctx.error("weight", str(exc)) from None


def _check_shape(layer: ShapeLayer, ctx: _Ctx) -> None:
    n = len(layer.points)
    if layer.kind in ("rect", "ellipse"):
        if n != 2:
            raise ctx.error("points", f"a {layer.kind} needs 2 corner points, got {n}")
        (x0, y0), (x1, y1) = layer.points
        if not (x0 < x1 and y0 < y1):
            raise ctx.error("points", f"a {layer.kind} needs [[x0, y0], [x1, y1]] with x0 < x1, y0 < y1")
    elif layer.kind == "line":
        if n < 2:
            raise ctx.error("points", f"a line needs at least 2 points, got {n}")
        if layer.fill is not None or layer.texture != "none":
            raise ctx.error("fill" if layer.fill is not None else "texture", "a line has no interior to fill")
        if layer.stroke is None or layer.stroke_width == 0:
            raise ctx.error("stroke", "a line needs a stroke colour and stroke_width >= 1")
    elif n < 3:
        raise ctx.error("points", f"a polygon needs at least 3 points, got {n}")


def design_from_dict(obj: Any, source: str = "<design>", base_dir: Path | None = None) -> Design:
    """Validate a parsed design JSON object; relative paths resolve against `base_dir` (default: cwd)."""
    base = (base_dir or Path.cwd()).resolve()
    top = _Ctx(source, base, "design")
    if not isinstance(obj, dict):
        raise ValueError(f"{source}: the design must be a JSON object with 'canvas' and 'layers'")
    unknown = sorted(set(obj) - {"canvas", "layers"})
    if unknown:
        raise top.error(unknown[0], "unknown key (known: canvas, layers)")
    for key in ("canvas", "layers"):
        if key not in obj:
            raise top.error(key, "missing (required)")
    canvas = _build(Canvas, obj["canvas"], _Ctx(source, base, "canvas"))
    if not isinstance(obj["layers"], list):
        raise top.error("layers", "must be a list of layer objects")
    layers: list[Layer] = []
    for i, raw in enumerate(obj["layers"]):
        name = raw.get("name") if isinstance(raw, dict) else None
        ctx = _Ctx(source, base, f"layers[{i}]" + (f" {name!r}" if isinstance(name, str) and name else ""))
        kind = raw.get("type") if isinstance(raw, dict) else None
        if kind not in LAYER_TYPES:
            raise ctx.error("type", f"must be one of {', '.join(LAYER_TYPES)}; got {kind!r}")
        layer = _build(LAYER_TYPES[kind], raw, ctx, skip=("type",))
        if isinstance(layer, TextLayer):
            _check_text(layer, ctx)
        elif isinstance(layer, ShapeLayer):
            _check_shape(layer, ctx)
        layers.append(layer)
    return Design(canvas=canvas, layers=tuple(layers))


def load_design(path: Path) -> Design:
    """Read and validate a design JSON file."""
    path = Path(path)
    try:
        obj = jsonio.read_json(path)
    except jsonio.JsonReadError as exc:
        raise ValueError(f"{path}: {exc.reason}") from None
    return design_from_dict(obj, str(path), path.parent)


def _relative(path: str | Path, base_dir: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), base_dir.resolve())).as_posix()


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def design_to_dict(design: Design, base_dir: Path) -> dict[str, Any]:
    """Turn a design into its JSON object, writing file paths relative to `base_dir`."""
    layers = []
    for layer in design.layers:
        kind = next(k for k, cls in LAYER_TYPES.items() if isinstance(layer, cls))
        obj: dict[str, Any] = {"type": kind}
        for f in fields(layer):
            value = getattr(layer, f.name)
            if f.name == "path" or (f.name in ("font", "font_bold") and value is not None and is_font_path(value)):
                value = _relative(value, base_dir)
            obj[f.name] = _jsonable(value)
        layers.append(obj)
    canvas = {f.name: getattr(design.canvas, f.name) for f in fields(design.canvas)}
    return {"canvas": canvas, "layers": layers}


def design_json(design: Design, base_dir: Path) -> str:
    """Serialise a design as stable JSON text (paths relative to `base_dir`, trailing newline)."""
    return json.dumps(design_to_dict(design, base_dir), indent=2, ensure_ascii=False) + "\n"


def save_design(design: Design, path: Path) -> None:
    """Write a design to a JSON file, file paths relative to the file's folder."""
    path = Path(path)
    write_atomic(path, design_json(design, path.parent))
