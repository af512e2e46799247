"""What an exported task folder hands the shared hooks (hooks.py) in place of the toolkit's `lmms/documents.py`.

`hvcu export-task` ships it as `hvcu_lib/documents.py`: `task_data` and `document_image` over the authors' layouts
only (JSON + image folders, local or from the hub; a local parquet copy with their columns), plain RGB images.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hvcu_tasks.core.families import ASPECTS, FAMILIES, UNKNOWN_ASPECT
from hvcu_tasks.core.fingerprint import SCHEME, fingerprint
from hvcu_tasks.core.names import IMAGE_EXTENSIONS, UnsafeNameError, check_name
from hvcu_tasks.core.records import loads_unique, record_to_sample
from hvcu_tasks.core.schema import DataError, ImageRef, Problem, Sample, TaskLoadError
from hvcu_tasks.settings import DATA_ENV, hub_spec, resolve_source

log = logging.getLogger("hvcu_tasks")

SMOKE_DIR = Path(__file__).resolve().parent.parent / "data"
"""The bundled smoke sample: the export folder's `data/` (this file is `<export>/hvcu_lib/documents.py`)."""


def record_sample(
    record: Any, family: str, source: str, index: int, image: Callable[[str], ImageRef | None]
) -> tuple[Sample | None, list[Problem]]:
    """Map one authors'-format record to a Sample and its problems (the core's rules; `image` finds it by id)."""
    if not isinstance(record, Mapping):
        return None, [Problem(source, f"#{index}", "item", "expected a JSON object")]
    try:
        ref = image(check_name(record.get("id"), "id"))
    except UnsafeNameError:
        ref = None  # record_to_sample names what is wrong with the id
    return record_to_sample(record, family, source, ref, index, loads_unique)


def read_json_family(
    path: Path, family: str, image_dir: Path, label: str | None = None
) -> list[tuple[Sample | None, list[Problem]]]:
    """Read the authors' JSON file of one family, each id's image found as `image_dir/<id>.<ext>`."""
    source = label or str(path)
    try:
        records = loads_unique(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        return [(None, [Problem(source, "-", "file", f"cannot read JSON: {exc}")])]
    if not isinstance(records, list) or not records:
        return [(None, [Problem(source, "-", "file", "expected a non-empty JSON array of items")])]

    def image(sid: str) -> ImageRef | None:
        found = next(
            (image_dir / f"{sid}{ext}" for ext in IMAGE_EXTENSIONS if (image_dir / f"{sid}{ext}").is_file()), None
        )
        return ImageRef(path=found) if found else None

    return [record_sample(r, family, source, i, image) for i, r in enumerate(records)]


def read_parquet_family(paths: Sequence[Path], family: str) -> list[tuple[Sample | None, list[Problem]]]:
    """Read a local parquet copy of one family with the authors' columns (id, qa_levels, image: {bytes})."""
    import pyarrow.parquet as pq

    read = []
    for path in paths:
        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow raises many types for a bad file
            read.append((None, [Problem(str(path), "-", "file", f"cannot read parquet: {exc}")]))
            continue
        for i, row in enumerate(rows):
            cell = row.get("image") if isinstance(row, Mapping) else None
            data = cell.get("bytes") if isinstance(cell, Mapping) else cell
            ref = ImageRef(data=bytes(data)) if isinstance(data, (bytes, bytearray)) and data else None
            read.append(record_sample(row, family, str(path), i, lambda _sid, ref=ref: ref))
    return read


def read_local(root: Path, family: str) -> list[tuple[Sample | None, list[Problem]]]:
    """Read one family from a local copy: the authors' `<stem>.json` + `Image/<stem>/`, or `<split>*.parquet` files."""
    split, stem, _short = FAMILIES[family]
    if root.is_file():
        return read_json_family(root, family, root.parent / "Image" / root.stem)
    if (root / f"{stem}.json").is_file():
        return read_json_family(root / f"{stem}.json", family, root / "Image" / stem)
    shards = sorted(p for p in root.rglob("*.parquet") if split.lower() in p.name.lower().replace("-", "_"))
    if shards:
        return read_parquet_family(shards, family)
    what = "no such file or folder" if not root.exists() else f"no {stem}.json and no {split}*.parquet in it"
    return [(None, [Problem(str(root), "-", "files", f"no data for family {family!r}: {what}")])]


def read_hub(repo: str, revision: str | None, family: str) -> tuple[list[tuple[Sample | None, list[Problem]]], str]:
    """Read one family of the hub dataset in the authors' JSON layout; return it and the commit read."""
    from huggingface_hub import snapshot_download

    _split, stem, _short = FAMILIES[family]
    try:
        folder = Path(
            snapshot_download(
                repo, repo_type="dataset", revision=revision, allow_patterns=[f"{stem}.json", f"Image/{stem}/*"]
            )
        )
    except Exception as exc:  # the hub client raises many types (network, auth, missing revision)
        why = " ".join(f"{type(exc).__name__}: {exc}".split())
        hint = f"set {DATA_ENV}=/path/to/a/local/copy, or HF_HUB_OFFLINE=1 to read the Hugging Face cache"
        raise DataError(
            [Problem(f"{repo}@{revision or 'main'}", "-", "hub", f"cannot download {stem}.json ({why}); {hint}")]
        ) from None
    commit = folder.name
    return read_json_family(
        folder / f"{stem}.json", family, folder / "Image" / stem, f"{repo}@{commit}/{stem}.json"
    ), commit


def load_family(source: str, family: str) -> tuple[list[Sample], dict[str, Any]]:
    """Load and check one family; return the samples and where they came from, or raise DataError (every problem)."""
    _split, stem, _short = FAMILIES[family]
    if (spec := hub_spec(source)) is not None:
        repo, requested = spec
        read, commit = read_hub(repo, requested, family)
        where = {"kind": "hub", "location": repo, "requested_revision": requested, "revision": commit}
        where["layout"] = "json"
    elif source == "smoke":
        read = read_json_family(SMOKE_DIR / f"{stem}.json", family, SMOKE_DIR / "Image" / stem)
        where = {"kind": "smoke", "location": "smoke"}
    else:
        root = Path(source).expanduser()
        read, where = read_local(root, family), {"kind": "local", "location": str(root.resolve())}
    samples = [s for s, _ in read if s is not None]
    problems = [p for _, found in read for p in found]
    seen: dict[str, str] = {}
    for s in samples:
        if s.id.casefold() in seen:
            also = seen[s.id.casefold()]
            problems.append(Problem(s.source, s.id, "id", f"duplicate id in family {family!r} (also {also!r})"))
        seen.setdefault(s.id.casefold(), s.id)
    if not problems and not samples:
        problems.append(Problem(source, "-", "data", f"holds no items for family {family!r}"))
    if problems:
        raise DataError(problems)
    return samples, where


def image_sha256(sample: Sample) -> str:
    """Return the hex SHA-256 of a sample's encoded image bytes as stored."""
    ref = sample.image
    return hashlib.sha256(ref.path.read_bytes() if ref.path else ref.data or b"").hexdigest()


def identity_of(family: str, samples: Sequence[Sample], where: Mapping[str, Any]) -> str:
    """Return the data identity (the toolkit's scheme): source, counts, content fingerprint, as JSON."""
    aspects = {a: n for a in (*ASPECTS[family], UNKNOWN_ASPECT) if (n := sum(s.aspect == a for s in samples))}
    identity = {"scheme": SCHEME, "family": family, **where, "samples": len(samples), "aspects": aspects}
    identity["fingerprint"] = fingerprint(samples, image_sha256)
    return json.dumps(identity, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def task_data(stub: Any) -> tuple[list[Sample], str]:
    """Return a task's checked samples and data identity, or end the run (TaskLoadError) before any request."""
    if len(stub) != 1 or not {"family", "source"} <= set(stub.column_names):
        why = f"expected one row with family and source, got {stub.column_names}"
        raise TaskLoadError("?", "?", [Problem("task stub", "-", "rows", why)])
    family, declared = str(stub[0]["family"]), str(stub[0]["source"])
    source = resolve_source(declared)
    if source != declared:
        log.warning("HVCU-Bench %s: reading %s (from $%s) instead of %s", family, source, DATA_ENV, declared)
    try:
        samples, where = load_family(source, family)
        return samples, identity_of(family, samples, where)
    except DataError as exc:
        raise TaskLoadError(family, source, exc.problems) from exc
    except Exception as exc:  # anything else would be retried for a minute, then swallowed by lmms-eval (exit 0)
        problem = Problem(source, "-", "load", f"unexpected {type(exc).__name__}: {exc}")
        raise TaskLoadError(family, source, [problem]) from exc


@functools.lru_cache(maxsize=32)
def decoded(path: str | None, stamp: tuple[int, int] | None, data: bytes | None) -> Any:
    """Return one image file (as of its mtime and size) or image bytes as RGB: the last 32, so a chain decodes once."""
    from PIL import Image

    with Image.open(path or io.BytesIO(data)) as opened:
        return opened.convert("RGB") if opened.mode != "RGB" else opened.copy()


def document_image(doc: Mapping[str, Any]) -> Any:
    """Return a document's image as RGB (a private copy: backends may edit it), or raise ValueError naming it."""
    path, data = doc.get("image_path"), doc.get("image_bytes")
    label = f"sample {doc.get('family', '?')}/{doc.get('sample_id', '?')}"
    try:
        stat = os.stat(path) if path else None
        image = decoded(path, (stat.st_mtime_ns, stat.st_size) if stat else None, None if path else bytes(data))
    except Exception as exc:  # a missing file, no image at all, or bytes PIL cannot decode
        where = path or f"<{len(data or b'')} image bytes>"
        raise ValueError(f"HVCU-Bench {label}: image {where}: {type(exc).__name__}: {exc}") from None
    return image.copy()
