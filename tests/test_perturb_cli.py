"""`hvcu perturb` end to end: files and manifest written, reruns byte-identical, clear errors."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from generation.perturb.cli import add_parser
from generation.perturb.design import load_design
from generation.perturb.render import render
from generation.perturb.run import MANIFEST

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
