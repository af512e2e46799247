"""The layered-design JSON format: loading, validation messages that name the field, and round trips."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from generation.perturb.design import (
    MAX_SIDE,
    Canvas,
    Design,
    ImageLayer,
    ShapeLayer,
    TextLayer,
    load_design,
    save_design,
)
from generation.perturb.fonts import font_dir
from generation.perturb.render import render

EXAMPLES = Path(__file__).resolve().parents[1] / "generation" / "perturb" / "examples"


def poster_obj() -> dict:
    return json.loads((EXAMPLES / "poster.json").read_text(encoding="utf-8"))


def write(tmp_path: Path, obj: dict, name: str = "design.json") -> Path:
    """Write a design next to a copy of the example's image."""
    shutil.copy(EXAMPLES / "sky.png", tmp_path / "sky.png")
    path = tmp_path / name
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def test_example_poster_has_image_text_and_shape_layers():
    design = load_design(EXAMPLES / "poster.json")
    kinds = {type(layer) for layer in design.layers}
    assert kinds == {ImageLayer, TextLayer, ShapeLayer}
    assert (design.canvas.width, design.canvas.height) == (600, 800)
    sky = design.layers[0]
    assert isinstance(sky, ImageLayer) and sky.path == (EXAMPLES / "sky.png").resolve()


def test_saving_elsewhere_rewrites_paths_relative_and_round_trips(tmp_path):
    design = load_design(EXAMPLES / "poster.json")
    target = tmp_path / "out" / "copy.json"
    target.parent.mkdir()
    save_design(design, target)
    saved = json.loads(target.read_text(encoding="utf-8"))
    assert Path(saved["layers"][0]["path"]).is_absolute() is False
    assert (target.parent / saved["layers"][0]["path"]).resolve() == (EXAMPLES / "sky.png").resolve()
    assert load_design(target) == design
    assert render(load_design(target)).tobytes() == render(design).tobytes()


def test_saving_writes_every_field_so_the_file_is_explicit(tmp_path):
    save_design(load_design(EXAMPLES / "poster.json"), tmp_path / "d.json")
    headline = json.loads((tmp_path / "d.json").read_text(encoding="utf-8"))["layers"][5]
    assert headline["tracking"] == 3 and headline["line_spacing"] == 1.2 and headline["max_width"] is None


@pytest.mark.parametrize(
    ("layer", "field", "value", "message"),
    [
        (5, "size", -3, "positive integer"),
        (5, "colour", "#264653", "unknown key"),
        (5, "color", "not-a-colour", "not a colour"),
        (5, "anchor", "xx", "must be one of"),
        (5, "weight", "heavy", "must be one of"),
        (5, "font", "Comic Sans", "unknown font family"),
        (5, "tracking", -30, "must be > -size/2"),
        (1, "texture", "zigzag", "must be one of"),
        (1, "opacity", 2, "between 0 and 1"),
        (1, "points", [[0, 0], [10, 10], [20, 0]], "needs 2 corner points"),
        (1, "stroke_width", 2.5, "integer >= 0"),
        (2, "texture_spacing", 1, ">= 2 px"),
        (0, "box", [10, 10, 5, 50], "x0 < x1"),
        (0, "box", [0, 0, 100000, 100000], "at most 8192 px"),
        (0, "path", "missing.png", "file not found"),
        (3, "fill", "#ff0000", "no interior"),
    ],
)
def test_bad_values_raise_naming_file_layer_and_field(tmp_path, layer, field, value, message):
    obj = poster_obj()
    obj["layers"][layer][field] = value
    path = write(tmp_path, obj)
    name = obj["layers"][layer]["name"]
    with pytest.raises(ValueError, match=message) as info:
        load_design(path)
    assert str(path) in str(info.value)
    assert f"layers[{layer}] '{name}'" in str(info.value)
    assert f"field '{field}'" in str(info.value)


def test_missing_required_field_is_named(tmp_path):
    obj = poster_obj()
    del obj["layers"][6]["text"]
    with pytest.raises(ValueError, match=r"layers\[6\] 'subtitle': field 'text': missing"):
        load_design(write(tmp_path, obj))


def test_unknown_layer_type_and_canvas_errors_are_named(tmp_path):
    obj = poster_obj()
    obj["layers"][2]["type"] = "sticker"
    with pytest.raises(ValueError, match=r"layers\[2\] 'hills': field 'type'"):
        load_design(write(tmp_path, obj))
    obj = poster_obj()
    obj["canvas"]["width"] = 0
    with pytest.raises(ValueError, match=r"canvas: field 'width'"):
        load_design(write(tmp_path, obj))
    obj = poster_obj()
    obj["title"] = "x"
    with pytest.raises(ValueError, match=r"design: field 'title': unknown key"):
        load_design(write(tmp_path, obj))


@pytest.mark.parametrize("field", ["width", "height"])
def test_a_canvas_larger_than_the_maximum_is_refused_before_any_allocation(tmp_path, field):
    obj = poster_obj()
    obj["canvas"][field] = 100000  # 100000 x 800 RGBA would already be 320 MB
    path = write(tmp_path, obj)
    with pytest.raises(ValueError, match=rf"design.json: canvas: field '{field}': must be at most 8192 px"):
        load_design(path)


def test_a_text_size_larger_than_the_maximum_is_refused(tmp_path):
    obj = poster_obj()
    text = next(layer for layer in obj["layers"] if layer["type"] == "text")
    text["size"] = 100000
    with pytest.raises(ValueError, match=r"field 'size': must be at most 8192 px"):
        load_design(write(tmp_path, obj))


def test_a_canvas_of_the_maximum_size_is_accepted(tmp_path):
    obj = poster_obj()
    obj["canvas"]["width"] = MAX_SIDE
    assert load_design(write(tmp_path, obj)).canvas.width == MAX_SIDE == 8192


def test_rendering_a_built_design_with_an_oversized_canvas_is_refused():
    with pytest.raises(ValueError, match="canvas 100000x100000: at most 8192 px"):
        render(Design(Canvas(100000, 100000), ()))


def test_invalid_json_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{ not json", encoding="utf-8")
    with pytest.raises(ValueError, match="broken.json: not valid JSON"):
        load_design(path)


def test_font_file_paths_resolve_relative_to_the_design_and_bold_needs_its_file(tmp_path):
    shutil.copy(font_dir() / "DejaVuSerif.ttf", tmp_path / "body.ttf")
    shutil.copy(font_dir() / "DejaVuSerif-Bold.ttf", tmp_path / "body-bold.ttf")
    layer = {"type": "text", "name": "t", "text": "Hi", "position": [5, 5], "size": 20, "font": "body.ttf"}
    obj = {"canvas": {"width": 100, "height": 40}, "layers": [dict(layer, weight="bold")]}
    with pytest.raises(ValueError, match=r"layers\[0\] 't': field 'weight': .*needs 'font_bold'"):
        load_design(write(tmp_path, obj))
    obj["layers"][0]["font_bold"] = "body-bold.ttf"
    design = load_design(write(tmp_path, obj))
    assert design.layers[0].font == str((tmp_path / "body.ttf").resolve())
    save_design(design, tmp_path / "again.json")
    assert json.loads((tmp_path / "again.json").read_text())["layers"][0]["font_bold"] == "body-bold.ttf"


def test_a_file_that_is_not_a_font_is_rejected(tmp_path):
    Image.new("RGB", (2, 2)).save(tmp_path / "fake.ttf", format="PNG")
    obj = {
        "canvas": {"width": 100, "height": 40},
        "layers": [{"type": "text", "text": "Hi", "position": [5, 5], "size": 20, "font": "fake.ttf"}],
    }
    with pytest.raises(ValueError, match=r"layers\[0\]: field 'font': not a readable font file"):
        load_design(write(tmp_path, obj))
