"""`hvcu perturb` end to end: files and manifest written, reruns byte-identical, clear errors."""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from generation.perturb.cli import add_parser
from generation.perturb.design import load_design
from generation.perturb.render import render
from generation.perturb.run import MANIFEST, effective_seed
from generation.perturb.variants import sample_variants

EXAMPLES = Path(__file__).resolve().parents[1] / "generation" / "perturb" / "examples"


def hvcu(*argv: str | Path) -> int:
    parser = argparse.ArgumentParser(prog="hvcu")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args([str(a) for a in argv])
    return args.func(args)


@pytest.fixture
def poster(tmp_path: Path) -> Path:
    """A copy of the example design (and its image) in its own folder."""
    folder = tmp_path / "src"
    shutil.copytree(EXAMPLES, folder)
    return folder / "poster.json"


@pytest.fixture
def photo(tmp_path: Path) -> Path:
    ys, xs = np.mgrid[0:90, 0:120]
    rgb = np.stack([xs * 2, ys * 2, 255 - xs], axis=-1).astype(np.uint8)
    path = tmp_path / "photo.png"
    Image.fromarray(rgb).save(path)
    return path


def manifest(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / MANIFEST).read_text(encoding="utf-8").splitlines()]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_font_variants_of_a_design_write_images_designs_and_a_manifest(poster, tmp_path):
    out = tmp_path / "out"
    assert hvcu("perturb", poster, "--aspect", "font", "--n", "3", "--seed", "7", "--out", out) == 0
    records = manifest(out)
    assert [r["image"] for r in records] == [f"poster_font_0{i}.png" for i in range(3)]
    for r in records:
        assert (r["stem"], r["aspect"], r["seed"], r["source"]) == ("poster", "font", 7, poster.as_posix())
        assert r["factor"] in ("size", "weight", "tracking") and r["params"]["field"] in ("size", "weight", "tracking")
        changed = load_design(out / r["design"])
        assert getattr(changed.layers[r["params"]["layer"]], r["params"]["field"]) == r["params"]["to"]
        assert render(changed).tobytes() == Image.open(out / r["image"]).tobytes()
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [MANIFEST] + [r["image"] for r in records] + [r["design"] for r in records]
    )


def test_a_rerun_rewrites_identical_bytes(poster, tmp_path):
    out = tmp_path / "out"
    hvcu("perturb", poster, "--aspect", "graphics", "--n", "4", "--out", out)
    first = snapshot(out)
    hvcu("perturb", poster, "--aspect", "graphics", "--n", "4", "--out", out)
    assert snapshot(out) == first


def test_colour_variants_of_a_raster_image(photo, tmp_path, capsys):
    out = tmp_path / "out"
    assert hvcu("perturb", photo, "--aspect", "color", "--n", "3", "--out", out) == 0
    records = manifest(out)
    assert {r["factor"] for r in records} == {"hue", "saturation", "brightness"}
    assert all(r["design"] is None for r in records)
    for r in records:
        image = Image.open(out / r["image"])
        assert image.size == (120, 90) and image.tobytes() != Image.open(photo).tobytes()
    assert "3 color variant(s)" in capsys.readouterr().out


def test_composition_crop_output_has_the_box_size(photo, tmp_path):
    out = tmp_path / "out"
    hvcu("perturb", photo, "--aspect", "composition", "--n", "6", "--seed", "1", "--out", out)
    for r in manifest(out):
        if r["factor"] == "crop":
            left, top, right, bottom = r["params"]["box"]
            size = Image.open(out / r["image"]).size
            assert abs(size[0] - (right - left) * 120) <= 1 and abs(size[1] - (bottom - top) * 90) <= 1


def test_several_inputs_and_aspects_share_one_manifest(poster, photo, tmp_path):
    out = tmp_path / "out"
    hvcu("perturb", poster, "--aspect", "font", "--n", "2", "--out", out)
    hvcu("perturb", photo, "--aspect", "color", "--n", "2", "--out", out)
    hvcu("perturb", poster, "--aspect", "color", "--n", "1", "--out", out)
    keys = [(r["stem"], r["aspect"], r["index"]) for r in manifest(out)]
    assert keys == [("photo", "color", 0), ("photo", "color", 1), ("poster", "color", 0)] + [
        ("poster", "font", 0),
        ("poster", "font", 1),
    ]


def test_a_smaller_rerun_removes_the_files_it_no_longer_makes(poster, tmp_path):
    out = tmp_path / "out"
    hvcu("perturb", poster, "--aspect", "font", "--n", "4", "--out", out)
    big = snapshot(out)
    hvcu("perturb", poster, "--aspect", "font", "--n", "2", "--out", out)
    small = snapshot(out)
    assert sorted(small) == sorted([MANIFEST] + [f"poster_font_0{i}.{e}" for i in range(2) for e in ("png", "json")])
    assert all(small[name] == big[name] for name in small if name != MANIFEST)


def test_font_and_graphics_on_a_raster_fail_clearly(photo, tmp_path):
    for aspect in ("font", "graphics"):
        with pytest.raises(ValueError, match=f"photo.png: {aspect} variants need a layered design"):
            hvcu("perturb", photo, "--aspect", aspect, "--out", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_missing_and_unreadable_inputs_fail_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.png: input file not found"):
        hvcu("perturb", tmp_path / "nope.png", "--aspect", "color", "--out", tmp_path / "out")
    (tmp_path / "notes.txt").write_text("hello", encoding="utf-8")
    with pytest.raises(ValueError, match="notes.txt: not an image"):
        hvcu("perturb", tmp_path / "notes.txt", "--aspect", "color", "--out", tmp_path / "out")


def test_a_corrupt_manifest_is_reported_with_its_line(photo, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / MANIFEST).write_text('{"stem": "a", "aspect": "color", "index": 0, "image": "a.png"}\nnot json\n')
    with pytest.raises(ValueError, match="variants.jsonl: line 2: not JSON"):
        hvcu("perturb", photo, "--aspect", "color", "--n", "1", "--out", out)
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST]  # checked before any image is written


def gradient(path: Path, flip: bool = False) -> Path:
    """Write a 120x90 gradient image (mirrored when `flip`) to `path`."""
    ys, xs = np.mgrid[0:90, 0:120]
    rgb = np.stack([xs * 2, ys * 2, 255 - xs], axis=-1).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rgb[:, ::-1] if flip else rgb).save(path)
    return path


def test_a_second_input_with_the_same_stem_is_refused_naming_both(tmp_path):
    first, second = gradient(tmp_path / "d1" / "photo.png"), gradient(tmp_path / "d2" / "photo.png", flip=True)
    out = tmp_path / "out"
    hvcu("perturb", first, "--aspect", "color", "--n", "2", "--out", out)
    before = snapshot(out)
    with pytest.raises(ValueError, match="stem 'photo'") as info:
        hvcu("perturb", second, "--aspect", "color", "--n", "2", "--out", out)
    assert first.as_posix() in str(info.value) and second.as_posix() in str(info.value)
    assert "--replace" in str(info.value)
    assert snapshot(out) == before  # nothing overwritten


def test_replace_lets_the_second_input_take_the_stem_over(tmp_path):
    first, second = gradient(tmp_path / "d1" / "photo.png"), gradient(tmp_path / "d2" / "photo.jpg", flip=True)
    out = tmp_path / "out"
    hvcu("perturb", first, "--aspect", "color", "--n", "2", "--out", out)
    assert hvcu("perturb", second, "--aspect", "color", "--n", "2", "--out", out, "--replace") == 0
    assert {r["source"] for r in manifest(out)} == {second.as_posix()}


def test_the_same_content_from_another_folder_or_another_aspect_is_not_a_clash(tmp_path):
    first = gradient(tmp_path / "d1" / "photo.png")
    copy = tmp_path / "d2" / "photo.png"
    copy.parent.mkdir()
    shutil.copy(first, copy)
    other = gradient(tmp_path / "d3" / "photo.png", flip=True)
    out = tmp_path / "out"
    hvcu("perturb", first, "--aspect", "color", "--n", "2", "--out", out)
    assert hvcu("perturb", copy, "--aspect", "color", "--n", "2", "--out", out) == 0  # identical bytes: same variants
    assert hvcu("perturb", other, "--aspect", "composition", "--n", "2", "--out", out) == 0  # other file names


def test_different_inputs_get_different_variants_under_one_seed(tmp_path):
    a, b = gradient(tmp_path / "a.png"), gradient(tmp_path / "b.png", flip=True)
    out = tmp_path / "out"
    for path in (a, b):
        hvcu("perturb", path, "--aspect", "color", "--n", "3", "--seed", "5", "--out", out)
    params = {stem: [r["params"] for r in manifest(out) if r["stem"] == stem] for stem in ("a", "b")}
    assert params["a"] != params["b"]


def test_the_effective_seed_is_recorded_and_reproduces_the_variants(photo, tmp_path):
    out = tmp_path / "out"
    hvcu("perturb", photo, "--aspect", "composition", "--n", "3", "--seed", "5", "--out", out)
    records = manifest(out)
    digest = hashlib.sha256(photo.read_bytes()).hexdigest()
    assert {(r["seed"], r["effective_seed"]) for r in records} == {(5, effective_seed(5, digest))}
    redrawn = sample_variants("composition", 3, records[0]["effective_seed"])
    assert [(v.factor, v.params) for v in redrawn] == [(r["factor"], r["params"]) for r in records]


def test_the_same_input_and_seed_give_the_same_variants_from_any_path(photo, tmp_path):
    moved = tmp_path / "elsewhere" / "renamed.png"
    moved.parent.mkdir()
    shutil.copy(photo, moved)
    hvcu("perturb", photo, "--aspect", "color", "--n", "3", "--seed", "2", "--out", tmp_path / "one")
    hvcu("perturb", moved, "--aspect", "color", "--n", "3", "--seed", "2", "--out", tmp_path / "two")
    assert [r["params"] for r in manifest(tmp_path / "one")] == [r["params"] for r in manifest(tmp_path / "two")]
