"""Candidate and final benchmarks in the authors' layout: read with raw records and hashes, snapshot, write."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generation.audit.verdicts import ItemKey, write_text
from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.core.schema import DataError, Sample
from hvcu_tasks.data import jsonio
from hvcu_tasks.data.loaders import load_path
from hvcu_tasks.data.validate import check_samples


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
    """Load a benchmark folder in the authors' layout, in file order; raise DataError on any problem.

    The problems are those `hvcu data validate` reports (the same validator): structure, duplicate ids, and
    images that do not decode.
    """
    loaded = load_path(root, families)
    problems = loaded.problems + check_samples(loaded.samples, decode_images=True)
    if problems:
        raise DataError(problems)
    records: dict[ItemKey, Mapping[str, Any]] = {}
    for family in families:
        for record in jsonio.read_json(root / f"{stem(family)}.json"):
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


def building_folder(target: Path) -> Path:
    """The temporary sibling in which a new version of folder `target` is built (this process's own)."""
    return target.with_name(f"{target.name}.tmp-{os.getpid()}")


def clear_leftovers(target: Path) -> None:
    """Remove the temporary siblings of folder `target` that a killed run left (`<name>.tmp-N`, `<name>.old-N`)."""
    pattern = re.compile(re.escape(target.name) + r"\.(tmp|old)-\d+")
    if not target.parent.is_dir():
        return
    for path in target.parent.iterdir():
        if pattern.fullmatch(path.name) and path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)


def swap_folder(new: Path, target: Path) -> Path | None:
    """Put the complete folder `new` in place of `target` by rename; return where the old one went (or None).

    The old folder is renamed aside, not deleted, so that the caller removes it only once everything that
    refers to the new one is written; a failure between the two renames puts the old one back.
    """
    old = None
    if target.exists():
        old = target.with_name(f"{target.name}.old-{os.getpid()}")
        if old.exists():
            shutil.rmtree(old)
        os.rename(target, old)
    try:
        os.rename(new, target)
    except BaseException:
        if old is not None and not target.exists():
            os.rename(old, target)
        raise
    return old


@contextmanager
def swapped_in(dest: Path) -> Iterator[Path]:
    """Yield an empty temporary sibling of folder `dest` to fill; on success it replaces `dest`, else it is removed.

    The old `dest` is deleted only after the swap, so at any moment `dest` is the old version or the new one.
    """
    new = building_folder(dest)
    try:
        new.mkdir(parents=True)
        yield new
        old = swap_folder(new, dest)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def replace_bench(dest: Path, families: Sequence[str], items: Sequence[SourceItem]) -> None:
    """Write items as a benchmark (like `write_bench`) in a temporary sibling of `dest`, then swap it in.

    At any moment `dest` is the old benchmark or the new one, whole: a failure (a full disk, a kill) leaves
    the old one, or, after a kill between the two renames, none; the next run clears the leftovers.
    """
    clear_leftovers(dest)
    with swapped_in(dest) as new:
        write_bench(new, families, items)
        if families:
            load_path(new, families).raise_for_problems()
