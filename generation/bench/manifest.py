"""The build manifest: which images to turn into benchmark items, with family, aspect and an optional anchor.

A CSV (header row) or JSONL file with the fields `image`, `family`, `aspect` and optionally `anchor`
(the level-3 concept to build on, e.g. an II-Bench or EEmo-Bench label) and `id`. Relative image paths
are resolved against the manifest's folder. Every problem names the file, the row and the field. Each image is
decoded fully (a truncated file or a decompression bomb is refused here), and an id must be one plain file name.
"""

from __future__ import annotations

import csv
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from hvcu_tasks.core.families import ASPECTS, aspect_from_text
from hvcu_tasks.core.names import UnsafeNameError, check_name
from hvcu_tasks.core.schema import DataError, Problem
from hvcu_tasks.data import jsonio
from hvcu_tasks.data.files import check_image
from hvcu_tasks.data.loaders import family_from_name
from hvcu_tasks.data.public import name_key

FIELDS = ("image", "family", "aspect", "anchor", "id")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class ManifestRow:
    """One image to build an item for."""

    id: str
    image: Path
    family: str
    aspect: str
    anchor: str | None = None
    digest: str = ""
    """SHA-1 of the image bytes: ids and resume keys follow the content, not the path it was given by."""


def _raw_rows(path: Path) -> list[tuple[str, dict[str, object]]]:
    """Return (row label, fields) pairs from a CSV or JSONL manifest."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's byte-order mark is not part of a header
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text: {exc}") from exc
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        rows = []
        for i, r in enumerate(reader, start=2):  # row 1 is the header
            if None in r:
                raise DataError([Problem(str(path), f"row {i}", "-", "more cells than the header has columns")])
            rows.append((f"row {i}", dict(r)))
        return rows
    rows = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = jsonio.loads(line, source=path, line=i)
        except jsonio.JsonReadError as exc:
            raise DataError([Problem(str(path), f"line {i}", "-", f"not JSON: {exc.reason}")]) from exc
        if not isinstance(obj, dict):
            raise DataError([Problem(str(path), f"line {i}", "-", "expected a JSON object")])
        rows.append((f"line {i}", obj))
    return rows


def default_id(aspect: str, digest: str) -> str:
    """Return the id of an item whose manifest row names none: aspect plus a hash of the image's bytes."""
    return f"{aspect}_{digest[:10]}"


def image_digest(image: Path) -> str:
    """Return the SHA-1 of an image file after decoding it fully; raise ImageError (truncated, a bomb...) otherwise."""
    check_image(image)
    return hashlib.sha1(image.read_bytes()).hexdigest()


def read_manifest(path: Path) -> list[ManifestRow]:
    """Read and check a manifest; raise DataError listing every bad row and field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such manifest file")
    if path.suffix.lower() not in {".csv", ".jsonl"}:
        raise ValueError(f"{path}: a manifest is a .csv or .jsonl file")
    problems: list[Problem] = []
    rows: list[ManifestRow] = []
    seen: dict[str, str] = {}
    for label, raw in _raw_rows(path):

        def bad(field: str, message: str, label: str = label) -> None:
            problems.append(Problem(str(path), label, field, message))

        unknown = sorted(set(raw) - set(FIELDS))
        if unknown:
            bad(",".join(unknown), f"unknown field(s); known: {list(FIELDS)}")
        not_text = [k for k in FIELDS if raw.get(k) is not None and not isinstance(raw[k], str)]
        for k in not_text:
            bad(k, f"expected text, got {type(raw[k]).__name__} {raw[k]!r}")
        if not_text:
            continue
        values = {k: str(raw.get(k) or "").strip() for k in FIELDS}
        family = family_from_name(values["family"]) if values["family"] else None
        if family is None:
            bad("family", f"unknown family {values['family']!r}; expected one of {sorted(ASPECTS)}")
            continue
        aspect = aspect_from_text(values["aspect"], family) if values["aspect"] else None
        if aspect is None or aspect != values["aspect"].lower():
            bad("aspect", f"{values['aspect']!r} is not an aspect of {family}: {list(ASPECTS[family])}")
            continue
        if not values["image"]:
            bad("image", "empty image path")
            continue
        image = Path(values["image"])
        image = image if image.is_absolute() else path.parent / image
        if not image.is_file():
            bad("image", f"no such file {image}")
            continue
        try:
            digest = image_digest(image)
        except ValueError as exc:
            bad("image", str(exc))
            continue
        sid = values["id"] or default_id(aspect, digest)
        try:  # the id names the item's image file in the benchmark: one plain file name, nothing that escapes
            check_name(sid, "id")
        except UnsafeNameError as exc:
            bad("id", str(exc))
            continue
        if not _ID.fullmatch(sid):
            bad("id", f"{sid!r} cannot be a file name (letters, digits, '_', '-', '.'; a letter or digit first)")
            continue
        if name_key(sid) in seen:  # ids that differ only by case would share one image file on macOS/Windows
            bad("id", f"{sid!r} repeats {seen[name_key(sid)]} (ids are compared ignoring case)")
            continue
        seen[name_key(sid)] = f"{label} ({sid!r})"
        rows.append(ManifestRow(sid, image, family, aspect, values["anchor"] or None, digest))
    if problems:
        raise DataError(problems)
    if not rows:
        raise ValueError(f"{path}: the manifest lists no images")
    return rows
