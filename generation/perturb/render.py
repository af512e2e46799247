"""Render a layered design to an RGB image with PIL: text glyph by glyph, shapes with stroke and texture."""

from __future__ import annotations

from dataclasses import dataclass

from PIL import Image, ImageChops, ImageColor, ImageDraw, ImageFont, ImageOps

from generation.perturb.design import MAX_SIDE, Design, ImageLayer, ShapeLayer, TextLayer
from generation.perturb.fonts import font_file, load_font
from generation.perturb.textures import texture_mask
from hvcu_tasks.data.files import open_image


@dataclass(frozen=True)
class Glyph:
    """One character at its pen position: `x` left edge of its advance, `y` baseline."""

    char: str
    x: float
    y: float


def _tracked_width(font: ImageFont.FreeTypeFont, line: str, tracking: float) -> float:
    return font.getlength(line) + tracking * max(len(line) - 1, 0)


def _wrap(font: ImageFont.FreeTypeFont, text: str, tracking: float, max_width: float | None) -> list[str]:
    """Split text into lines at newlines, and greedily at spaces when `max_width` is set."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        if max_width is None:
            lines.append(paragraph)
            continue
        current = ""
        for word in paragraph.split(" "):
            candidate = f"{current} {word}" if current else word
            if current and _tracked_width(font, candidate, tracking) > max_width:
                lines.append(current)
                current = word
            else:
                current = candidate
        lines.append(current)
    return lines


def layout_text(layer: TextLayer) -> list[Glyph]:
    """Place every glyph of a text layer; advances come from the font, plus `tracking` px between glyphs."""
    font = load_font(str(font_file(layer.font, layer.weight, layer.font_bold)), layer.size)
    lines = _wrap(font, layer.text, layer.tracking, layer.max_width)
    widths = [_tracked_width(font, line, layer.tracking) for line in lines]
    ascent, descent = font.getmetrics()
    step = layer.line_spacing * layer.size
    block_w, block_h = max(widths), ascent + descent + step * (len(lines) - 1)
    h, v = layer.anchor
    x, y = layer.position
    left = x - {"l": 0.0, "m": block_w / 2, "r": block_w}[h]
    top = y - {"t": 0.0, "m": block_h / 2, "b": block_h}[v]
    glyphs = []
    for n, (line, width) in enumerate(zip(lines, widths, strict=True)):
        line_left = left + {"l": 0.0, "m": (block_w - width) / 2, "r": block_w - width}[h]
        baseline = top + ascent + n * step
        for i, char in enumerate(line):
            if not char.isspace():
                glyphs.append(Glyph(char, line_left + font.getlength(line[:i]) + i * layer.tracking, baseline))
    return glyphs


def text_bounds(layer: TextLayer) -> tuple[float, float, float, float]:
    """Return the box (x0, y0, x1, y1) spanned by a text layer's glyph advances, ascent and descent."""
    font = load_font(str(font_file(layer.font, layer.weight, layer.font_bold)), layer.size)
    glyphs = layout_text(layer)
    if not glyphs:
        x, y = layer.position
        return (x, y, x, y)
    ascent, descent = font.getmetrics()
    return (
        min(g.x for g in glyphs),
        min(g.y for g in glyphs) - ascent,
        max(g.x + font.getlength(g.char) for g in glyphs),
        max(g.y for g in glyphs) + descent,
    )


def text_mask(layer: TextLayer, size: tuple[int, int]) -> Image.Image:
    """Return the "L" coverage mask of a text layer on a canvas of `size`."""
    font = load_font(str(font_file(layer.font, layer.weight, layer.font_bold)), layer.size)
    mask = Image.new("L", size, 0)
    draw = ImageDraw.Draw(mask)
    for glyph in layout_text(layer):
        draw.text((glyph.x, glyph.y), glyph.char, fill=255, font=font, anchor="ls")
    return mask


def shape_masks(layer: ShapeLayer, size: tuple[int, int]) -> tuple[Image.Image, Image.Image]:
    """Return the interior and stroke "L" masks of a shape layer on a canvas of `size`."""
    interior, stroke = Image.new("L", size, 0), Image.new("L", size, 0)
    inner, outer = ImageDraw.Draw(interior), ImageDraw.Draw(stroke)
    pts, w = list(layer.points), layer.stroke_width
    if layer.kind == "rect":
        inner.rectangle(pts, fill=255)
        if w:
            outer.rectangle(pts, outline=255, width=w)
    elif layer.kind == "ellipse":
        inner.ellipse(pts, fill=255)
        if w:
            outer.ellipse(pts, outline=255, width=w)
    elif layer.kind == "polygon":
        inner.polygon(pts, fill=255)
        if w:
            outer.polygon(pts, outline=255, width=w)
    else:
        outer.line(pts, fill=255, width=w, joint="curve")
    return interior, stroke


def _texture(layer: ShapeLayer, interior: Image.Image) -> Image.Image:
    """Return the texture mask clipped to the shape interior, tiled from the shape's bounding-box corner."""
    mask = Image.new("L", interior.size, 0)
    bbox = interior.getbbox()
    if layer.texture == "none" or bbox is None:
        return mask
    x0, y0, x1, y1 = bbox
    tile = texture_mask(
        layer.texture, (x1 - x0, y1 - y0), layer.texture_spacing, layer.texture_width, layer.texture_seed
    )
    mask.paste(tile, (x0, y0))
    return ImageChops.multiply(mask, interior)


def _paint(target: Image.Image, color: str, mask: Image.Image) -> None:
    """Composite a solid colour through a coverage mask onto an RGBA image, in place."""
    rgba = ImageColor.getcolor(color, "RGBA")
    alpha = mask if rgba[3] == 255 else mask.point(lambda a: a * rgba[3] // 255)
    paint = Image.new("RGBA", target.size, rgba)
    paint.putalpha(alpha)
    target.alpha_composite(paint)


def _image_layer(layer: ImageLayer, size: tuple[int, int]) -> Image.Image:
    """Return an image layer as a canvas-sized RGBA image."""
    with open_image(layer.path) as src:  # decoded fully: a file cut short or a bomb is one error naming it
        src = ImageOps.exif_transpose(src).convert("RGBA")
    x0, y0, x1, y1 = (round(v) for v in layer.box)
    box_w, box_h = x1 - x0, y1 - y0
    if layer.fit == "stretch":
        placed, offset = src.resize((box_w, box_h), Image.Resampling.LANCZOS), (x0, y0)
    elif layer.fit == "cover":
        placed, offset = ImageOps.fit(src, (box_w, box_h), Image.Resampling.LANCZOS), (x0, y0)
    else:
        placed = ImageOps.contain(src, (box_w, box_h), Image.Resampling.LANCZOS)
        offset = (x0 + (box_w - placed.width) // 2, y0 + (box_h - placed.height) // 2)
    out = Image.new("RGBA", size, (0, 0, 0, 0))
    out.paste(placed, offset)
    return out


def render_layer(layer: ImageLayer | TextLayer | ShapeLayer, size: tuple[int, int]) -> Image.Image:
    """Render one layer to a transparent canvas-sized RGBA image (before layer opacity)."""
    if isinstance(layer, ImageLayer):
        return _image_layer(layer, size)
    out = Image.new("RGBA", size, (0, 0, 0, 0))
    if isinstance(layer, TextLayer):
        _paint(out, layer.color, text_mask(layer, size))
        return out
    interior, stroke = shape_masks(layer, size)
    if layer.fill is not None:
        _paint(out, layer.fill, interior)
    if layer.texture != "none":
        _paint(out, layer.texture_color, _texture(layer, interior))
    if layer.stroke is not None and layer.stroke_width:
        _paint(out, layer.stroke, stroke)
    return out


def render(design: Design) -> Image.Image:
    """Render a design to an RGB image, layers composited bottom first with their opacity."""
    size = (design.canvas.width, design.canvas.height)
    if max(size) > MAX_SIDE:
        raise ValueError(f"canvas {size[0]}x{size[1]}: at most {MAX_SIDE} px (MAX_SIDE) a side")
    canvas = Image.new("RGBA", size, ImageColor.getcolor(design.canvas.background, "RGBA"))
    for layer in design.layers:
        image = render_layer(layer, size)
        if layer.opacity < 1:
            image.putalpha(image.getchannel("A").point(lambda a, o=layer.opacity: round(a * o)))
        canvas.alpha_composite(image)
    background = Image.new("RGBA", size, (255, 255, 255, 255))
    background.alpha_composite(canvas)
    return background.convert("RGB")
