"""Hostile names and images in `hvcu perturb`, `hvcu build-bench` and `hvcu train prepare` (issue 11).

A name that becomes part of a file path is refused where it enters; nothing is ever written outside the output
folder. A truncated image, a decompression bomb, an --out that is a file, an empty input or an out-of-range number
is one `error:` line naming the file (and row/line), with nothing half-written.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from PIL import Image

from hvcu_tasks.cli import main
from hvcu_tasks.core.families import FAMILIES

ABSOLUTE = "<absolute>"  # replaced by a path under the test's tmp_path, so a write there shows in the snapshot
HOSTILE_NAMES = ["../../x", ABSOLUTE, "a/b", "..", "a\x00b", "a\nb"]
HOSTILE_IDS = [*HOSTILE_NAMES, "../../../../outside/evil"]


# ---------------------------------------------------------------- helpers


def snapshot(root: Path, skip: Path | None = None) -> dict[str, bytes]:
    """Every file under `root` (except under `skip`) with its bytes."""
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not (skip is not None and (path == skip or skip in path.parents)):
            files[str(path.relative_to(root))] = path.read_bytes()
    return files


def error_lines(err: str) -> list[str]:
    """The non-empty lines of stderr."""
    return [line for line in err.splitlines() if line.strip()]


def png(path: Path, size: tuple[int, int] = (32, 24), color: tuple[int, int, int] = (200, 40, 60)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)
    return path


def truncated_png(path: Path) -> Path:
    """A real PNG with noisy pixels, cut in half: its header opens, its pixels do not decode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    full = path.with_name("full-" + path.name)
    Image.frombytes("RGB", (64, 64), os.urandom(64 * 64 * 3)).save(full)
    data = full.read_bytes()
    full.unlink()
    path.write_bytes(data[: len(data) // 2])
    return path


def truncated_jpeg(path: Path) -> Path:
    """A real JPEG cut in half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    full = path.with_name("full-" + path.name)
    Image.frombytes("RGB", (64, 64), os.urandom(64 * 64 * 3)).save(full, format="JPEG")
    data = full.read_bytes()
    full.unlink()
    path.write_bytes(data[: len(data) // 2])
    return path


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def bomb_png(path: Path, side: int = 50_000) -> Path:
    """A tiny PNG whose header claims side x side pixels (2.5 G pixels): a decompression bomb."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    rows = zlib.compress(b"\x00" * (1 + 3 * side) * 4)  # a few rows only; the claim is what matters
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", rows) + _chunk(b"IEND", b""))
    return path


HOSTILE_IMAGES: dict[str, Callable[[Path], Path]] = {
    "truncated-png": truncated_png,
    "truncated-jpeg": truncated_jpeg,
    "bomb": bomb_png,
}
SUFFIX = {"truncated-png": ".png", "truncated-jpeg": ".jpg", "bomb": ".png"}


# ---------------------------------------------------------------- train prepare


def chain_line(image: str) -> str:
    levels = [{"level": i, "question": f"Question {i}?", "answer": f"Answer {i}.", "score": 0.5} for i in (1, 2, 3)]
    return json.dumps({"image": image, "method": "mcts", "path_score": 0.5, "levels": levels}) + "\n"


def write_chains(root: Path, images: list[str]) -> Path:
    path = root / "chains.jsonl"
    path.write_text("".join(chain_line(i) for i in images), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_train_prepare_refuses_a_name_that_is_not_one_file_name(tmp_path: Path, capsys, name: str) -> None:
    name = name.replace(ABSOLUTE, str(tmp_path / "abs-evil"))
    work = tmp_path / "a" / "b" / "c"
    png(work / "img.png")
    chains = write_chains(work, ["img.png"])
    before = snapshot(tmp_path)
    out = work / "data"
    rc = main(
        ["train", "prepare", "--chains", str(chains), "--out", str(out), "--composition", "full-data"]
        + ["--image-root", str(work), "--name", name]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert snapshot(tmp_path) == before  # nothing written, inside --out or out of it
    (line,) = error_lines(err)
    assert line.startswith("error:") and "--name" in line and "Traceback" not in err


def test_train_prepare_name_too_long_with_its_suffix_writes_nothing(tmp_path: Path, capsys) -> None:
    png(tmp_path / "img.png")
    chains = write_chains(tmp_path, ["img.png"])
    out = tmp_path / "data"
    rc = main(
        ["train", "prepare", "--chains", str(chains), "--out", str(out), "--composition", "full-data"]
        + ["--image-root", str(tmp_path), "--name", "n" * 198]  # 198 bytes fit a name; 203 with ".json" do not
    )
    (line,) = error_lines(capsys.readouterr().err)
    assert rc == 2 and "--name" in line and "200 bytes" in line
    assert not out.exists()


def test_train_prepare_writes_a_good_name_inside_out(tmp_path: Path) -> None:
    png(tmp_path / "img.png")
    chains = write_chains(tmp_path, ["img.png"])
    out = tmp_path / "data"
    rc = main(
        ["train", "prepare", "--chains", str(chains), "--out", str(out), "--composition", "full-data"]
        + ["--image-root", str(tmp_path), "--name", "my_set-v1.2"]
    )
    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == ["dataset_info.json", "my_set-v1.2.json"]


def test_train_dataset_info_file_name_outside_the_dataset_dir_is_refused(tmp_path: Path) -> None:
    from training.prepare import dataset_files

    (tmp_path / "secret.json").write_text("[]")
    data = tmp_path / "data"
    data.mkdir()
    (data / "dataset_info.json").write_text(json.dumps({"evil": {"file_name": "../secret.json"}}))
    with pytest.raises(ValueError, match=r"dataset_info\.json.*evil.*outside"):
        dataset_files("evil", data)


@pytest.mark.parametrize("kind", sorted(HOSTILE_IMAGES))
def test_train_prepare_hostile_chain_image_is_one_line_naming_file_and_line(tmp_path: Path, capsys, kind) -> None:
    png(tmp_path / "ok.png")
    bad = HOSTILE_IMAGES[kind](tmp_path / f"bad{SUFFIX[kind]}")
    chains = write_chains(tmp_path, ["ok.png", bad.name])
    out = tmp_path / "data"
    rc = main(
        ["train", "prepare", "--chains", str(chains), "--out", str(out), "--composition", "full-data"]
        + ["--image-root", str(tmp_path)]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert not out.exists()
    (line,) = error_lines(err)
    assert f"{chains}:2: image:" in line and bad.name in line and "Traceback" not in err


def test_train_prepare_out_that_is_a_file_is_one_line(tmp_path: Path, capsys) -> None:
    png(tmp_path / "img.png")
    chains = write_chains(tmp_path, ["img.png"])
    out = tmp_path / "data"
    out.write_text("not a folder")
    rc = main(
        ["train", "prepare", "--chains", str(chains), "--out", str(out), "--composition", "full-data"]
        + ["--image-root", str(tmp_path)]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert out.read_text() == "not a folder"
    (line,) = error_lines(err)
    assert str(out) in line and "folder" in line


def test_train_prepare_empty_chains_file_is_an_error(tmp_path: Path, capsys) -> None:
    chains = tmp_path / "chains.jsonl"
    chains.write_text("")
    rc = main(["train", "prepare", "--chains", str(chains), "--out", str(tmp_path / "d"), "--composition", "l3-only"])
    assert rc == 2
    assert str(chains) in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_train_prepare_failed_write_leaves_old_files_and_no_temp(tmp_path: Path, capsys, monkeypatch) -> None:
    png(tmp_path / "img.png")
    chains = write_chains(tmp_path, ["img.png"])
    out = tmp_path / "data"
    args = ["train", "prepare", "--chains", str(chains), "--out", str(out), "--composition", "full-data"]
    assert main([*args, "--image-root", str(tmp_path)]) == 0
    before = snapshot(out)
    png(tmp_path / "img2.png", color=(1, 2, 3))
    write_chains(tmp_path, ["img.png", "img2.png"])

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    assert main([*args, "--image-root", str(tmp_path)]) == 1
    monkeypatch.undo()
    assert "No space left on device" in capsys.readouterr().err
    assert snapshot(out) == before  # old files intact, no temporary file left behind
    assert main([*args, "--image-root", str(tmp_path)]) == 0  # a rerun simply works
    assert len(json.loads((out / "hvcu_mcts_full_data.json").read_text())) == 2


@pytest.mark.parametrize(
    "option",
    [["--gpus", "0"], ["--nodes", "-1"], ["--global-batch", "0"], ["--per-device", "0"], ["--master-port", "70000"]],
)
def test_train_config_numbers_out_of_range_are_argparse_errors(tmp_path: Path, capsys, option) -> None:
    with pytest.raises(SystemExit) as exc:
        main(
            ["train", "config", "--model", "qwen3_vl_4b", "--dataset", "d", "--dataset-dir", str(tmp_path)]
            + ["--out", str(tmp_path / "o"), *option]
        )
    assert exc.value.code == 2
    assert option[0] in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- perturb


def perturb(*argv: str | Path) -> int:
    return main(["perturb", *(str(a) for a in argv)])


@pytest.mark.parametrize("kind", sorted(HOSTILE_IMAGES))
def test_perturb_hostile_input_image_is_one_line_and_writes_nothing(tmp_path: Path, capsys, kind) -> None:
    bad = HOSTILE_IMAGES[kind](tmp_path / f"in{SUFFIX[kind]}")
    out = tmp_path / "out"
    rc = perturb(bad, "--aspect", "color", "--n", "2", "--out", out)
    err = capsys.readouterr().err
    assert rc == 2
    assert not out.exists()
    (line,) = error_lines(err)
    assert str(bad) in line and "Traceback" not in err


def test_perturb_bomb_in_the_warning_range_is_refused_too(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 40 x 40 = 1600: over the limit, under twice it
    src = png(tmp_path / "in.png", size=(40, 40))
    rc = perturb(src, "--aspect", "color", "--n", "1", "--out", tmp_path / "out")
    (line,) = error_lines(capsys.readouterr().err)
    assert rc == 2 and str(src) in line and "pixels" in line
    assert not (tmp_path / "out").exists()


def test_perturb_hostile_image_layer_of_a_design_is_named(tmp_path: Path, capsys) -> None:
    truncated_png(tmp_path / "layer.png")
    design = {
        "canvas": {"width": 64, "height": 64},
        "layers": [{"type": "image", "path": "layer.png", "box": [0, 0, 64, 64]}],
    }
    (tmp_path / "d.json").write_text(json.dumps(design))
    rc = perturb(tmp_path / "d.json", "--aspect", "color", "--n", "1", "--out", tmp_path / "out")
    (line,) = error_lines(capsys.readouterr().err)
    assert rc == 2 and "layers[0]" in line and "layer.png" in line
    assert not (tmp_path / "out").exists()


def test_perturb_out_that_is_a_file_is_one_line(tmp_path: Path, capsys) -> None:
    src = png(tmp_path / "in.png")
    out = tmp_path / "out"
    out.write_text("keep me")
    rc = perturb(src, "--aspect", "color", "--n", "1", "--out", out)
    (line,) = error_lines(capsys.readouterr().err)
    assert rc == 2 and str(out) in line and "folder" in line
    assert out.read_text() == "keep me"


def test_perturb_a_folder_as_input_is_an_error(tmp_path: Path, capsys) -> None:
    (tmp_path / "images").mkdir()
    rc = perturb(tmp_path / "images", "--aspect", "color", "--out", tmp_path / "out")
    (line,) = error_lines(capsys.readouterr().err)
    assert rc == 2 and str(tmp_path / "images") in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("stem", ["a\nb", ".hidden"])
def test_perturb_input_whose_stem_is_not_a_safe_output_name_is_refused(tmp_path: Path, capsys, stem: str) -> None:
    src = png(tmp_path / f"{stem}.png")
    rc = perturb(src, "--aspect", "color", "--n", "1", "--out", tmp_path / "out")
    (line,) = error_lines(capsys.readouterr().err)
    assert rc == 2 and "stem" in line
    assert not (tmp_path / "out").exists()


def test_perturb_stem_too_long_for_its_output_names_writes_nothing(tmp_path: Path, capsys) -> None:
    src = png(tmp_path / f"{'p' * 195}.png")  # the stem fits; "<stem>_color_00" (204 bytes) does not
    rc = perturb(src, "--aspect", "color", "--n", "1", "--out", tmp_path / "out")
    (line,) = error_lines(capsys.readouterr().err)
    assert rc == 2 and "200 bytes" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("field", ["image", "design", "stem"])
@pytest.mark.parametrize("name", ["../victim.png", ABSOLUTE, "a/b.png", "..", "a\x00b.png"])
def test_perturb_hostile_manifest_record_is_refused_and_nothing_outside_is_touched(
    tmp_path: Path, capsys, field: str, name: str
) -> None:
    src = png(tmp_path / "photo.png")
    out = tmp_path / "out"
    assert perturb(src, "--aspect", "color", "--n", "2", "--out", out) == 0
    victim = png(tmp_path / "victim.png", color=(9, 9, 9))
    name = name.replace(ABSOLUTE, str(victim))
    records = [json.loads(line) for line in (out / "variants.jsonl").read_text().splitlines()]
    records[1][field] = name
    (out / "variants.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    capsys.readouterr()
    before = snapshot(tmp_path)
    rc = perturb(src, "--aspect", "color", "--n", "1", "--out", out)  # would remove index 1's files
    (line,) = error_lines(capsys.readouterr().err)
    assert rc == 2 and "variants.jsonl" in line and "line 2" in line and field in line
    assert snapshot(tmp_path) == before
    assert victim.is_file()


@pytest.mark.parametrize("n", ["0", "-1", "1000000"])
def test_perturb_n_out_of_range_is_an_argparse_error(tmp_path: Path, capsys, n: str) -> None:
    src = png(tmp_path / "in.png")
    with pytest.raises(SystemExit) as exc:
        perturb(src, "--aspect", "color", "--n", n, "--out", tmp_path / "out")
    assert exc.value.code == 2
    assert "--n" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_perturb_failed_write_leaves_old_files_and_no_temp(tmp_path: Path, capsys, monkeypatch) -> None:
    src = png(tmp_path / "photo.png")
    out = tmp_path / "out"
    assert perturb(src, "--aspect", "color", "--n", "2", "--out", out) == 0
    before = snapshot(out)
    calls = []

    def flaky(src_path, dst):
        calls.append(dst)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", flaky)
    assert perturb(src, "--aspect", "color", "--n", "3", "--out", out) == 1
    monkeypatch.undo()
    assert "No space left on device" in capsys.readouterr().err
    assert calls
    assert snapshot(out) == before
    assert perturb(src, "--aspect", "color", "--n", "3", "--out", out) == 0
    assert len((out / "variants.jsonl").read_text().splitlines()) == 3


# ---------------------------------------------------------------- build-bench


def fake_reply(request: dict) -> str:
    return '{"question": "Q?", "answer": "a", "distractors": ["b", "c", "d"]}'


def authors_item(sid: str, aspect: str) -> dict:
    """One item in the authors' layout, three levels of four options."""
    levels = [
        {
            "level": n,
            "question": f"Question at level {n}?",
            "options": [{"option_key": k, "option_text": f"option {k}"} for k in "ABCD"],
            "correct_answer_key": "A",
        }
        for n in (1, 2, 3)
    ]
    return {"id": sid, "aspect": aspect, "qa_levels": levels}


def build(server: FakeOpenAI, manifest: Path, out: Path, *extra: str | Path) -> int:
    args = ["build-bench", "--manifest", str(manifest), "--out", str(out), "--model", "fake"]
    return main([*args, "--base-url", server.base_url, "--api-key", "x", "--quiet", *(str(e) for e in extra)])


def jsonl_manifest(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("sid", HOSTILE_IDS)
def test_build_bench_manifest_id_that_is_not_a_file_name_is_refused(tmp_path: Path, capsys, sid: str) -> None:
    sid = sid.replace(ABSOLUTE, str(tmp_path / "abs-evil"))
    work = tmp_path / "a" / "b" / "c"
    png(work / "img.png")
    manifest = jsonl_manifest(
        work / "m.jsonl", [{"image": "img.png", "family": "affective", "aspect": "joy", "id": sid}]
    )
    before = snapshot(tmp_path)
    with FakeOpenAI(fake_reply) as server:
        rc = build(server, manifest, work / "out")
    err = capsys.readouterr().err
    assert rc == 2 and server.requests == []
    assert snapshot(tmp_path) == before
    assert "line 1" in err and "id" in err and "Traceback" not in err


def test_build_bench_base_with_an_escaping_id_writes_nothing_outside_out(tmp_path: Path, capsys) -> None:
    stem = FAMILIES["affective"][1]
    base = tmp_path / "a" / "b" / "base"
    (base / "Image" / stem).mkdir(parents=True)
    sid = "../../../../outside/evil"
    (base / f"{stem}.json").write_text(json.dumps([authors_item(sid, "joy")]))
    png((base / "Image" / stem / f"{sid}.png").resolve())  # the planted image the id points at
    png(tmp_path / "img.png")
    manifest = jsonl_manifest(tmp_path / "m.jsonl", [{"image": "img.png", "family": "affective", "aspect": "fear"}])
    out = tmp_path / "x" / "out"
    before = snapshot(tmp_path, skip=out)
    with FakeOpenAI(fake_reply) as server:
        rc = build(server, manifest, out, "--base", base)
    err = capsys.readouterr().err
    assert rc == 2 and server.requests == []
    assert snapshot(tmp_path, skip=out) == before
    assert not (tmp_path / "outside").exists()
    assert sid in err and "Traceback" not in err


@pytest.mark.parametrize("kind", sorted(HOSTILE_IMAGES))
def test_build_bench_hostile_manifest_image_names_row_and_file(tmp_path: Path, capsys, kind: str) -> None:
    png(tmp_path / "ok.png")
    bad = HOSTILE_IMAGES[kind](tmp_path / f"bad{SUFFIX[kind]}")
    (tmp_path / "m.csv").write_text(f"image,family,aspect\nok.png,affective,joy\n{bad.name},affective,fear\n")
    with FakeOpenAI(fake_reply) as server:
        rc = build(server, tmp_path / "m.csv", tmp_path / "out")
    err = capsys.readouterr().err
    assert rc == 2 and server.requests == []
    assert "row 3" in err and "image" in err and bad.name in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_build_bench_out_that_is_a_file_is_one_line(tmp_path: Path, capsys) -> None:
    png(tmp_path / "img.png")
    manifest = jsonl_manifest(tmp_path / "m.jsonl", [{"image": "img.png", "family": "affective", "aspect": "joy"}])
    out = tmp_path / "out"
    out.write_text("keep me")
    with FakeOpenAI(fake_reply) as server:
        rc = build(server, manifest, out)
    (line,) = error_lines(capsys.readouterr().err)
    assert rc == 2 and server.requests == []
    assert str(out) in line and "folder" in line and out.read_text() == "keep me"


@pytest.mark.parametrize("text", ["", "image,family,aspect\n"])
def test_build_bench_empty_manifest_is_an_error(tmp_path: Path, capsys, text: str) -> None:
    (tmp_path / "m.csv").write_text(text)
    with FakeOpenAI(fake_reply) as server:
        rc = build(server, tmp_path / "m.csv", tmp_path / "out")
    assert rc == 2 and server.requests == []
    assert str(tmp_path / "m.csv") in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("setting", ["max_attempts: 0", "max_attempts: 1000", "max_tokens: 0", "max_tokens: 10000000"])
def test_build_bench_config_numbers_out_of_range_are_refused(tmp_path: Path, capsys, setting: str) -> None:
    png(tmp_path / "img.png")
    manifest = jsonl_manifest(tmp_path / "m.jsonl", [{"image": "img.png", "family": "affective", "aspect": "joy"}])
    (tmp_path / "cfg.yaml").write_text(setting + "\n")
    with FakeOpenAI(fake_reply) as server:
        rc = build(server, manifest, tmp_path / "out", "--config", tmp_path / "cfg.yaml")
    err = capsys.readouterr().err
    assert rc == 2 and server.requests == []
    assert setting.split(":")[0] in err


def test_build_bench_manifest_ids_that_differ_only_by_case_are_refused(tmp_path: Path, capsys) -> None:
    from generation.bench.manifest import read_manifest
    from hvcu_tasks.core.schema import DataError

    image = tmp_path / "a.png"
    Image.new("RGB", (8, 8), "red").save(image)
    manifest = tmp_path / "m.jsonl"
    rows = [{"image": str(image), "family": "affective", "aspect": "joy", "id": sid} for sid in ("Joy_1", "joy_1")]
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match="'joy_1' repeats .*'Joy_1'"):
        read_manifest(manifest)
