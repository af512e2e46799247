"""The on-disk cache of image verdicts (issue 13): a second load of the same images does not decode them again.

A "fresh process" is simulated by emptying validate's in-memory verdicts and digests; the cache folder is the
per-test $HVCU_CACHE_DIR that conftest's autouse fixture sets.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, item
from PIL import Image

from hvcu_tasks.cli import main
from hvcu_tasks.core.schema import DataError
from hvcu_tasks.data import files, validate

IDS = ["metaphor_001", "metaphor_002", "symbolism_001"]
FOLDER = "Image/Implication-Understanding"
COLORS = {"metaphor_001": "red", "metaphor_002": "green", "symbolism_001": "blue"}


@pytest.fixture
def family(write_dataset) -> Path:
    """An implication family of three samples with three different (valid) PNG images."""
    root = write_dataset({"implication": [item(sid) for sid in IDS]})
    for sid, color in COLORS.items():
        Image.new("RGB", (16, 16), color).save(root / FOLDER / f"{sid}.png")
    return root


@pytest.fixture
def decoded(monkeypatch) -> list[str]:
    """The file names validate decodes, in any order (validate's decode function counted)."""
    names: list[str] = []
    real = validate._decode

    def counting(ref, data=None):
        names.append(ref.path.name if ref.path is not None else "<bytes>")
        return real(ref, data)

    monkeypatch.setattr(validate, "_decode", counting)
    return names


def fresh_process(monkeypatch) -> None:
    """Forget this process's verdicts and digests, as a new run (or another data-parallel rank) starts with none."""
    monkeypatch.setattr(validate, "_VERDICTS", {})
    monkeypatch.setattr(validate, "_DIGESTS", {})
    monkeypatch.setattr(validate, "_UNWRITABLE", set())


def load(root: Path) -> list[str]:
    """Load the implication family as a task does and return the sample ids."""
    return [s.id for s in validate.load_family(str(root), "implication")]


def truncate(path: Path) -> None:
    """Cut a PNG with noisy pixels in half: its header opens, its pixels do not decode."""
    Image.frombytes("RGB", (64, 64), os.urandom(64 * 64 * 3)).save(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def markers(cache: Path) -> set[str]:
    """The names of every marker file under the cache folder."""
    return {p.name for p in cache.rglob("*") if p.is_file()}


def test_a_second_load_of_the_same_images_decodes_none(family, decoded, monkeypatch) -> None:
    assert load(family) == IDS
    assert sorted(decoded) == sorted(f"{sid}.png" for sid in IDS)
    fresh_process(monkeypatch)
    decoded.clear()
    assert load(family) == IDS
    assert decoded == []


def test_one_marker_per_image_content_named_by_its_sha256(family, hvcu_cache) -> None:
    load(family)
    expected = {f"{sha256(family / FOLDER / f'{sid}.png')}.ok" for sid in IDS}
    assert markers(hvcu_cache) == expected


def test_the_cache_lies_under_xdg_cache_home_when_hvcu_cache_dir_is_unset(family, monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("HVCU_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    load(family)
    digest = sha256(family / FOLDER / "metaphor_001.png")
    found = list((tmp_path / "xdg" / "hvcu" / "image-checks-v1").glob(f"*/{digest[:2]}/{digest}.ok"))
    assert len(found) == 1


def test_a_file_with_new_content_at_the_same_path_is_decoded_again(family, decoded, monkeypatch) -> None:
    load(family)
    Image.new("RGB", (16, 16), "yellow").save(family / FOLDER / "metaphor_002.png")
    fresh_process(monkeypatch)
    decoded.clear()
    load(family)
    assert decoded == ["metaphor_002.png"]


def test_a_file_replaced_by_a_truncated_one_is_refused(family, monkeypatch) -> None:
    load(family)
    truncate(family / FOLDER / "metaphor_002.png")
    fresh_process(monkeypatch)
    with pytest.raises(DataError) as caught:
        load(family)
    assert [(p.record, p.field) for p in caught.value.problems] == [("metaphor_002", "image")]


def test_a_copy_of_the_images_elsewhere_is_not_decoded_again(family, decoded, monkeypatch, tmp_path) -> None:
    load(family)
    copy = tmp_path / "copy"
    family.rename(copy)  # other paths, same content
    fresh_process(monkeypatch)
    decoded.clear()
    assert load(copy) == IDS
    assert decoded == []


def test_a_truncated_image_is_refused_at_every_load(family, decoded, monkeypatch) -> None:
    truncate(family / FOLDER / "metaphor_002.png")
    for _ in range(3):
        fresh_process(monkeypatch)
        decoded.clear()
        with pytest.raises(DataError) as caught:
            load(family)
        assert [(p.record, p.field) for p in caught.value.problems] == [("metaphor_002", "image")]
        assert decoded.count("metaphor_002.png") == 1


def test_a_truncated_image_is_never_remembered(family, hvcu_cache) -> None:
    truncate(family / FOLDER / "metaphor_002.png")
    with pytest.raises(DataError):
        load(family)
    assert markers(hvcu_cache) == {
        f"{sha256(family / FOLDER / f'{sid}.png')}.ok" for sid in ("metaphor_001", "symbolism_001")
    }


@pytest.mark.parametrize("value", ["off", "OFF", "0"])
def test_the_cache_can_be_turned_off(family, decoded, monkeypatch, hvcu_cache, value: str) -> None:
    monkeypatch.setenv("HVCU_CACHE_DIR", value)
    load(family)
    fresh_process(monkeypatch)
    decoded.clear()
    load(family)
    assert len(decoded) == 3
    assert markers(hvcu_cache) == set()
    assert not (Path.cwd() / value).exists()


@pytest.fixture
def unwritable_cache(monkeypatch, tmp_path) -> Path:
    """$HVCU_CACHE_DIR below a file, so that no folder can be created there."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("HVCU_CACHE_DIR", str(blocker / "cache"))
    return blocker


def test_an_unwritable_cache_still_loads_with_one_warning(family, unwritable_cache, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="hvcu_tasks.data.validate"):
        assert load(family) == IDS
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1
    assert str(unwritable_cache / "cache") in warned[0].getMessage()


def test_an_unwritable_cache_still_refuses_a_truncated_image(family, unwritable_cache) -> None:
    truncate(family / FOLDER / "symbolism_001.png")
    with pytest.raises(DataError) as caught:
        load(family)
    assert [(p.record, p.field) for p in caught.value.problems] == [("symbolism_001", "image")]


def test_a_full_disk_loads_and_leaves_no_temporary_file(family, monkeypatch, hvcu_cache) -> None:
    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_bytes", full)
    assert load(family) == IDS
    assert markers(hvcu_cache) == set()


def test_a_new_version_of_the_rules_does_not_reuse_verdicts(family, decoded, monkeypatch) -> None:
    load(family)
    monkeypatch.setattr(files, "IMAGE_CHECK_RULES", files.IMAGE_CHECK_RULES + 1)
    fresh_process(monkeypatch)
    decoded.clear()
    load(family)
    assert len(decoded) == 3


def test_an_image_remembered_as_fine_is_refused_under_a_lower_pixel_limit(family, monkeypatch) -> None:
    load(family)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # 16 x 16 = 256 pixels: over twice the limit
    fresh_process(monkeypatch)
    with pytest.raises(DataError) as caught:
        load(family)
    assert sorted(p.record for p in caught.value.problems) == sorted(IDS)
    assert all("decompression bomb" in p.message for p in caught.value.problems)


@pytest.fixture
def dataset(write_dataset) -> Path:
    """A dataset of one sample per family (three image files)."""
    return write_dataset(
        {"implication": [item("metaphor_001")], "aesthetic": [item("color_001")], "affective": [item("joy_001")]}
    )


def test_validate_no_cache_decodes_every_image(dataset, decoded, monkeypatch, capsys) -> None:
    assert main(["data", "validate", str(dataset)]) == 0
    fresh_process(monkeypatch)
    decoded.clear()
    assert main(["data", "validate", str(dataset), "--no-cache"]) == 0
    assert len(decoded) == 3


def test_validate_uses_the_cache_by_default(dataset, decoded, monkeypatch, capsys) -> None:
    assert main(["data", "validate", str(dataset), "--no-cache"]) == 0
    fresh_process(monkeypatch)
    decoded.clear()
    assert main(["data", "validate", str(dataset)]) == 0
    assert decoded == []


LOAD_IN_CHILD = "from hvcu_tasks.data.validate import load_family; import sys; load_family(sys.argv[1], 'implication')"


def test_processes_loading_at_once_share_one_cache(family, hvcu_cache) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    children = [
        subprocess.Popen([sys.executable, "-c", LOAD_IN_CHILD, str(family)], env=env, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    errors = [child.communicate(timeout=120)[1].decode() for child in children]
    assert [child.returncode for child in children] == [0, 0, 0], errors
    assert markers(hvcu_cache) == {f"{sha256(family / FOLDER / f'{sid}.png')}.ok" for sid in IDS}
