"""Checking a family's images on several threads: same verdicts, and PIL's process-wide switches left alone."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from conftest import item
from PIL import Image, ImageFile

from hvcu_tasks.data import validate
from hvcu_tasks.data.loaders import load_path

IDS = [f"metaphor_{i:03d}" for i in range(1, 13)]


@pytest.fixture
def family_with_bad_images(write_dataset) -> Path:
    """A 12-sample family whose images 4 (cut short) and 9 (not an image) cannot be decoded."""
    root = write_dataset({"implication": [item(sid) for sid in IDS]}, ext=".jpg")
    folder = root / "Image" / "Implication-Understanding"
    for sid in IDS:  # larger images than the fixture's, so a cut-off file is surely short of pixels
        Image.new("RGB", (64, 64), "blue").save(folder / f"{sid}.jpg", quality=95)
    whole = (folder / "metaphor_004.jpg").read_bytes()
    (folder / "metaphor_004.jpg").write_bytes(whole[: len(whole) // 2])
    (folder / "metaphor_009.jpg").write_bytes(b"not an image at all")
    return root


def test_every_undecodable_image_is_named_once(family_with_bad_images, monkeypatch) -> None:
    monkeypatch.setattr(validate, "DECODE_THREADS", 4)
    samples = load_path(family_with_bad_images, ["implication"]).raise_for_problems()
    problems = validate.image_problems(samples)
    assert [(p.record, p.field) for p in problems] == [("metaphor_004", "image"), ("metaphor_009", "image")]


def test_checking_leaves_the_truncated_images_switch_as_it_was(family_with_bad_images, monkeypatch) -> None:
    monkeypatch.setattr(validate, "DECODE_THREADS", 4)
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)  # as lmms-eval sets it at import
    samples = load_path(family_with_bad_images, ["implication"]).raise_for_problems()
    validate.image_problems(samples)
    assert ImageFile.LOAD_TRUNCATED_IMAGES is True


def test_checking_leaves_the_warning_filters_as_they_were(family_with_bad_images, monkeypatch) -> None:
    monkeypatch.setattr(validate, "DECODE_THREADS", 4)
    samples = load_path(family_with_bad_images, ["implication"]).raise_for_problems()
    with warnings.catch_warnings():
        before = list(warnings.filters)
        validate.image_problems(samples)
        assert warnings.filters == before
