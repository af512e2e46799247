"""Candidate and final benchmarks in the authors' layout: read with raw records and hashes, snapshot, write."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generation.audit.verdicts import ItemKey, write_text
from hvcu_tasks.families import FAMILIES
from hvcu_tasks.loaders import load_path
from hvcu_tasks.schema import DataError, Sample
from hvcu_tasks.validate import duplicate_problems


@dataclass(frozen=True)
class SourceItem:
    """One item of the source snapshot: the sample, its raw JSON record and a hash of record and image."""

    sample: Sample
    record: Mapping[str, Any]
    digest: str


def stem(family: str) -> str:
    """The authors' JSON stem of a family."""
    return FAMILIES[family][1]


def image_path(sample: Sample) -> Path:
    """The image file of a sample read from disk (the loader has already refused samples without one)."""
    if sample.image is None or sample.image.path is None:
        raise ValueError(f"{sample.source}: id={sample.id}: image: no image file")
    return sample.image.path


def content_digest(record: Mapping[str, Any], image: Path) -> str:
    """Hash an item's record and image bytes, to tell the reviewed version from a later edit."""
    h = hashlib.sha256(json.dumps(record, sort_keys=True, ensure_ascii=False).encode())
    h.update(image.read_bytes())
    return h.hexdigest()[:16]


def bench_families(bench: Path) -> tuple[str, ...]:
    """Return the families whose authors' JSON file is in a benchmark folder."""
    if not bench.is_dir():
        raise FileNotFoundError(f"{bench}: no such folder")
    found = tuple(f for f in FAMILIES if (bench / f"{stem(f)}.json").is_file())
    if not found:
        stems = [f"{stem(f)}.json" for f in FAMILIES]
        raise FileNotFoundError(f"{bench}: no benchmark file; expected one of {stems} (authors' layout)")
    return found


def read_bench(root: Path, families: Sequence[str]) -> dict[ItemKey, SourceItem]:
    """Load a benchmark folder in the authors' layout, in file order; raise DataError on any structural problem."""
    loaded = load_path(root, families)
    problems = loaded.problems + duplicate_problems(loaded.samples)
    if problems:
        raise DataError(problems)
    records: dict[ItemKey, Mapping[str, Any]] = {}
    for family in families:
        for record in json.loads((root / f"{stem(family)}.json").read_text(encoding="utf-8")):
            records[(family, str(record["id"]).strip())] = record
    items = {}
    for s in loaded.samples:
        record = records[(s.family, s.id)]
        items[(s.family, s.id)] = SourceItem(s, record, content_digest(record, image_path(s)))
    return items


def _copy_images(dest: Path, items: Sequence[SourceItem]) -> None:
    """Copy the items' images to `dest/Image/<stem>/`, keeping their file names."""
    for it in items:
        path = image_path(it.sample)
        target = dest / "Image" / stem(it.sample.family) / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def snapshot_bench(bench: Path, dest: Path, families: Sequence[str], items: Sequence[SourceItem]) -> None:
    """Copy a benchmark's JSON files byte for byte, and its samples' images, into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    for family in families:
        shutil.copyfile(bench / f"{stem(family)}.json", dest / f"{stem(family)}.json")
    _copy_images(dest, items)


def write_bench(dest: Path, families: Sequence[str], items: Sequence[SourceItem]) -> None:
    """Write items (in the order given) as a benchmark in the authors' layout: one JSON per family, images copied."""
    for family in families:
        records = [dict(it.record) for it in items if it.sample.family == family]
        write_text(dest / f"{stem(family)}.json", json.dumps(records, indent=2, ensure_ascii=False) + "\n")
    _copy_images(dest, items)
