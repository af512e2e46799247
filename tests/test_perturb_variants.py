"""Variant sampling and application: seeded, distinct, one factor each, and the change measured on the output."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from generation.perturb import raster
from generation.perturb.design import Canvas, Design, ShapeLayer, TextLayer, load_design
from generation.perturb.render import render, text_bounds
from generation.perturb.variants import (
    FACTORS,
    RANGES,
    Variant,
    apply_to_design,
    make_variant,
    sample_variants,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "generation" / "perturb" / "examples" / "poster.json"


@pytest.fixture(scope="module")
def poster() -> Design:
    return load_design(EXAMPLE)


def changed_fields(before: Design, after: Design) -> list[tuple[int, str]]:
    """(layer index, field) pairs that differ between two designs with the same layers."""
    assert before.canvas == after.canvas and len(before.layers) == len(after.layers)
    return [
        (i, f.name)
        for i, (a, b) in enumerate(zip(before.layers, after.layers, strict=True))
        for f in fields(a)
        if getattr(a, f.name) != getattr(b, f.name)
    ]


@pytest.mark.parametrize("aspect", list(FACTORS))
def test_same_seed_gives_the_same_variants_and_another_seed_different_ones(poster, aspect):
    first = sample_variants(aspect, 6, seed=3, design=poster)
    assert first == sample_variants(aspect, 6, seed=3, design=poster)
    assert first != sample_variants(aspect, 6, seed=4, design=poster)


@pytest.mark.parametrize("aspect", list(FACTORS))
def test_variants_are_distinct_and_cover_every_factor(poster, aspect):
    variants = sample_variants(aspect, 9, seed=0, design=poster)
    assert len({v.key() for v in variants}) == 9
    assert {v.factor for v in variants} == set(FACTORS[aspect])
    assert all(v.aspect == aspect for v in variants)


def test_a_smaller_n_gives_a_prefix(poster):
    assert sample_variants("font", 3, seed=5, design=poster) == sample_variants("font", 7, seed=5, design=poster)[:3]


def test_colour_parameters_stay_in_their_documented_ranges():
    for v in sample_variants("color", 60, seed=1):
        ((name, intervals),) = RANGES[v.factor].items()
        value = v.params["degrees" if v.factor == "hue" else "factor"]
        assert any(lo - 0.05 <= value <= hi + 0.05 for lo, hi in intervals), (v, name)


@pytest.mark.parametrize("aspect", ["font", "graphics"])
def test_design_variants_change_exactly_one_field_of_one_layer(poster, aspect):
    for v in sample_variants(aspect, 12, seed=2, design=poster):
        after = apply_to_design(v, poster)
        assert changed_fields(poster, after) == [(v.params["layer"], v.params["field"])]
        assert getattr(after.layers[v.params["layer"]], v.params["field"]) == v.params["to"]


def test_font_variants_keep_the_text_inside_the_canvas(poster):
    for v in sample_variants("font", 30, seed=9, design=poster):
        x0, y0, x1, y1 = text_bounds(apply_to_design(v, poster).layers[v.params["layer"]])
        assert x0 >= 0 and y0 >= 0 and x1 <= 600 and y1 <= 800


def test_a_size_variant_scales_the_rendered_text_by_its_ratio(poster):
    v = Variant("font", "size", {"layer": 7, "layer_name": "cta", "field": "size", "from": 26, "to": 39})
    image, design = make_variant(v, poster)
    ink = np.asarray(image.convert("L"))[700:761, 192:409] > 200  # white text on the ticket
    base = np.asarray(render(poster).convert("L"))[700:761, 192:409] > 200
    height = lambda m: np.ptp(np.nonzero(m.any(axis=1))[0]) + 1  # noqa: E731  (cap height of "TICKETS")
    assert height(ink) / height(base) == pytest.approx(39 / 26, rel=0.06)
    assert design.layers[7].size == 39


def test_a_stroke_width_variant_draws_the_new_width():
    box = ShapeLayer(kind="rect", points=((20, 20), (180, 120)), fill="#ffffff", stroke="#000000", stroke_width=3)
    design = Design(Canvas(200, 140), (box,))
    (v,) = [v for v in sample_variants("graphics", 3, seed=0, design=design) if v.factor == "stroke_width"][:1]
    image, _ = make_variant(v, design)
    row = np.asarray(image)[70]
    assert int((row == 0).all(axis=-1).sum()) == 2 * v.params["to"]


def texture_ink(texture: str, spacing: float, width: float) -> float:
    """Mean ink (0..1) of a black texture on white, over a square of whole texture cells (no partial cells)."""
    layer = ShapeLayer(
        kind="rect", points=((0, 0), (480, 480)), texture=texture, texture_spacing=spacing, texture_width=width
    )
    side = round(480 // spacing * spacing)
    gray = np.asarray(render(Design(Canvas(480, 480), (layer,))).convert("L"))[:side, :side]
    return float(255 - gray.mean()) / 255


def density_variants(texture: str, width: float) -> list[Variant]:
    layer = ShapeLayer(
        kind="rect", points=((0, 0), (300, 200)), texture=texture, texture_spacing=12, texture_width=width
    )
    design = Design(Canvas(300, 200), (layer,))
    found = [v for seed in range(4) for v in sample_variants("graphics", 3, seed, design) if v.factor == "density"]
    assert len(found) >= 3
    return found


@pytest.mark.parametrize(
    ("texture", "width", "measured", "unit", "tolerance"),
    [
        ("hatch", 2.0, "hatch", "lines per px", 0.03),  # ink of a hatch = lines per px x width
        ("crosshatch", 2.0, "hatch", "lines per px", 0.03),  # each of its two line directions is a hatch
        ("dots", 3.0, "dots", "dots per px^2", 0.03),  # dots that do not touch: ink = dots per px^2 x dot area
        ("noise", 1.0, "noise", "dots per px^2", 0.1),  # random dots overlap a little
    ],
)
def test_a_density_variant_records_the_measured_change_in_marks(texture, width, measured, unit, tolerance):
    for v in density_variants(texture, width):
        old, new = v.params["from"], v.params["to"]
        ratio = texture_ink(measured, new, width) / texture_ink(measured, old, width)
        assert v.params["density_ratio"] == pytest.approx(ratio, rel=tolerance), (v, ratio)
        assert v.params["density_of"] == unit


def test_colour_variants_on_a_design_are_the_raster_operation_on_its_render(poster):
    v = Variant("color", "hue", {"degrees": 60.0})
    image, design = make_variant(v, poster)
    assert design is None
    assert image.tobytes() == raster.hue_rotate(render(poster), 60.0).tobytes()


def test_composition_on_a_design_pads_with_the_canvas_background(poster):
    image, _ = make_variant(Variant("composition", "reframe", {"dx": 0.1, "dy": 0.0}), poster)
    assert image.getpixel((5, 5)) == (0xF4, 0xEF, 0xE6)


def test_font_and_graphics_variants_need_a_design():
    with pytest.raises(ValueError, match="layered design"):
        sample_variants("font", 2, seed=0)
    v = Variant("graphics", "texture", {"layer": 0, "layer_name": "", "field": "texture", "from": "none", "to": "dots"})
    with pytest.raises(ValueError, match="layered design"):
        make_variant(v, Image.new("RGB", (10, 10)))


def test_a_design_without_text_has_no_font_variants():
    design = Design(Canvas(100, 100), (ShapeLayer(kind="rect", points=((1, 1), (50, 50)), fill="#000000"),))
    with pytest.raises(ValueError, match="font variants need text layers"):
        sample_variants("font", 1, seed=0, design=design)


def test_asking_for_more_variants_than_exist_fails_clearly():
    plain = ShapeLayer(kind="rect", points=((1, 1), (50, 50)), fill="#000000")  # only its texture kind can change
    design = Design(Canvas(100, 100), (plain,))
    assert len(sample_variants("graphics", 4, seed=0, design=design)) == 4
    with pytest.raises(ValueError, match=r"only 4 distinct graphics variant\(s\)"):
        sample_variants("graphics", 5, seed=0, design=design)


def test_unknown_aspect_and_bad_counts_are_rejected():
    with pytest.raises(ValueError, match="unknown aspect 'layout'"):
        sample_variants("layout", 1, seed=0)
    with pytest.raises(ValueError, match=">= 1"):
        sample_variants("color", 0, seed=0)


def test_text_layers_without_a_bold_file_get_no_weight_variants(tmp_path):
    from generation.perturb.fonts import font_dir

    text = TextLayer(text="Hi", position=(10, 10), size=20, font=str(font_dir() / "DejaVuSerif.ttf"))
    design = Design(Canvas(200, 60), (text,))
    assert {v.factor for v in sample_variants("font", 8, seed=0, design=design)} == {"size", "tracking"}
