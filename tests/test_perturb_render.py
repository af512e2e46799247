"""Rendering layered designs: text re-rendered with real fonts and tracking, shapes with measured strokes/textures."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from generation.perturb.design import Canvas, Design, ImageLayer, ShapeLayer, TextLayer, load_design
from generation.perturb.fonts import font_dir, font_file
from generation.perturb.render import render, text_bounds
from generation.perturb.textures import texture_mask

EXAMPLE = Path(__file__).resolve().parents[1] / "generation" / "perturb" / "examples" / "poster.json"


def on_canvas(*layers, size=(800, 200), background="#ffffff") -> Design:
    return Design(Canvas(size[0], size[1], background), tuple(layers))


def headline(**changes) -> TextLayer:
    base = TextLayer(text="Perception", position=(40, 60), size=40, color="#1b4965")
    return replace(base, **changes)


def darkness(image: Image.Image) -> np.ndarray:
    """Per-pixel ink amount in [0, 255] on a white canvas."""
    return 255 - np.asarray(image.convert("L"), dtype=np.int32)


def ink_bbox(image: Image.Image, threshold: int = 40) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(darkness(image) > threshold)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def count(image: Image.Image, colour: tuple[int, int, int], row: int) -> int:
    """Number of pixels of exactly `colour` on one row."""
    return int((np.asarray(image)[row] == colour).all(axis=-1).sum())


def runs(values: np.ndarray) -> int:
    """Number of separate runs of True."""
    v = values.astype(np.int8)
    return int(((v[1:] - v[:-1]) == 1).sum() + v[0])


@pytest.mark.parametrize("tracking", [5.0, 12.5, -3.0])
def test_tracking_widens_text_by_the_glyph_gaps_and_keeps_height_and_colour(tracking):
    plain, tracked = render(on_canvas(headline())), render(on_canvas(headline(tracking=tracking)))
    (x0, y0, x1, y1), (tx0, ty0, tx1, ty1) = ink_bbox(plain), ink_bbox(tracked)
    assert abs((tx1 - tx0) - (x1 - x0) - 9 * tracking) <= 1.5  # 10 glyphs, 9 gaps
    assert (ty0, ty1) == (y0, y1)
    assert tx0 == x0
    assert set(map(tuple, np.asarray(tracked)[darkness(tracked) == darkness(tracked).max()])) == {(27, 73, 101)}


def test_bold_renders_more_ink_than_regular_from_the_real_bold_file():
    regular, bold = render(on_canvas(headline())), render(on_canvas(headline(weight="bold")))
    assert darkness(bold).sum() > 1.3 * darkness(regular).sum()
    assert font_file("DejaVu Sans", "bold") == font_dir() / "DejaVuSans-Bold.ttf"
    assert font_file("DejaVu Serif", "regular").is_file() and font_file("DejaVu Sans Mono", "bold").is_file()


def test_doubling_the_size_doubles_the_text_box():
    (x0, y0, x1, y1) = ink_bbox(render(on_canvas(headline(size=30))))
    (bx0, by0, bx1, by1) = ink_bbox(render(on_canvas(headline(size=60))))
    assert (bx1 - bx0) / (x1 - x0) == pytest.approx(2.0, abs=0.06)
    assert (by1 - by0) / (y1 - y0) == pytest.approx(2.0, abs=0.1)


def test_middle_anchor_centres_the_text_block_on_the_position():
    layer = headline(position=(400, 100), anchor="mm")
    x0, _, x1, _ = ink_bbox(render(on_canvas(layer)))
    assert abs((x0 + x1) / 2 - 400) <= 2
    bx0, by0, bx1, by1 = text_bounds(layer)
    assert (bx0 + bx1) / 2 == pytest.approx(400) and (by0 + by1) / 2 == pytest.approx(100)


def test_max_width_wraps_words_onto_lines_within_the_width():
    text = "Open-air cinema in the park every Friday in July"
    one_line = ink_bbox(render(on_canvas(headline(text=text, size=20))))
    wrapped = ink_bbox(render(on_canvas(headline(text=text, size=20, max_width=200), size=(800, 300))))
    assert wrapped[2] - wrapped[0] <= 200
    assert (wrapped[3] - wrapped[1]) > 2.5 * (one_line[3] - one_line[1])


@pytest.mark.parametrize("width", [1, 4, 9])
def test_rect_stroke_width_is_the_number_of_stroke_pixels_across_each_side(width):
    rect = ShapeLayer(kind="rect", points=((50, 40), (250, 160)), fill="#f6bd60", stroke="#264653", stroke_width=width)
    image = render(on_canvas(rect, size=(300, 200)))
    assert count(image, (0x26, 0x46, 0x53), row=100) == 2 * width
    assert count(image, (0xF6, 0xBD, 0x60), row=100) == 201 - 2 * width


@pytest.mark.parametrize("width", [2, 6])
def test_line_stroke_width_is_the_line_thickness(width):
    line = ShapeLayer(kind="line", points=((150, 20), (150, 180)), stroke="#000000", stroke_width=width)
    assert abs(count(render(on_canvas(line, size=(300, 200))), (0, 0, 0), row=100) - width) <= 1


@pytest.mark.parametrize("spacing", [8.0, 12.0, 20.0])
def test_hatch_spacing_sets_how_many_lines_cross_the_shape(spacing):
    rect = ShapeLayer(kind="rect", points=((0, 0), (399, 99)), texture="hatch", texture_spacing=spacing)
    ink = darkness(render(on_canvas(rect, size=(400, 100))))[50] > 127
    assert abs(runs(ink) - 400 / (spacing * np.sqrt(2))) <= 1


@pytest.mark.parametrize("kind", ["hatch", "crosshatch", "dots", "noise"])
def test_texture_ink_falls_as_the_spacing_grows(kind):
    coverage = [
        float(np.asarray(texture_mask(kind, (240, 160), spacing, 3.0, seed=1)).mean()) for spacing in (5, 8, 13, 21)
    ]
    assert coverage == sorted(coverage, reverse=True) and coverage[0] > 2 * coverage[-1]


def test_noise_texture_is_reproducible_from_its_seed():
    a, b, c = (texture_mask("noise", (120, 80), 6, 2, seed=s).tobytes() for s in (7, 7, 8))
    assert a == b and a != c


def test_texture_stays_inside_the_shape():
    disc = ShapeLayer(kind="ellipse", points=((50, 50), (150, 150)), texture="crosshatch", texture_spacing=6)
    image = darkness(render(on_canvas(disc, size=(200, 200))))
    ys, xs = np.mgrid[0:200, 0:200]
    outside = (xs + 0.5 - 100) ** 2 + (ys + 0.5 - 100) ** 2 > 52**2
    assert image[outside].max() == 0 and image[~outside].max() > 200


def test_layer_opacity_blends_with_what_is_below():
    square = ShapeLayer(kind="rect", points=((10, 10), (50, 50)), fill="#000000", opacity=0.5)
    assert render(on_canvas(square, size=(60, 60))).getpixel((30, 30)) == (127, 127, 127)


def test_image_layer_is_stretched_into_its_box(tmp_path):
    Image.new("RGB", (10, 10), (200, 0, 0)).save(tmp_path / "red.png")
    layer = ImageLayer(path=tmp_path / "red.png", box=(20, 30, 70, 60))
    image = render(on_canvas(layer, size=(100, 100)))
    assert ink_bbox(image) == (20, 30, 70, 60)


def test_image_layer_contain_keeps_the_aspect_ratio_and_centres(tmp_path):
    Image.new("RGB", (20, 10), (0, 0, 200)).save(tmp_path / "wide.png")
    layer = ImageLayer(path=tmp_path / "wide.png", box=(0, 0, 100, 100), fit="contain")
    assert ink_bbox(render(on_canvas(layer, size=(100, 100)))) == (0, 25, 100, 75)


def test_rendering_the_example_poster_is_deterministic():
    design = load_design(EXAMPLE)
    first, second = render(design), render(design)
    assert first.size == (600, 800) and first.mode == "RGB"
    assert first.tobytes() == second.tobytes()
