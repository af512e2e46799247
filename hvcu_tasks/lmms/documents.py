"""The documents lmms-eval sees: a task's one-row stub -> its validated samples -> an Arrow document table."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from hvcu_tasks import settings
from hvcu_tasks.core.documents import level_rows
from hvcu_tasks.core.payloads import IDENTITY_KEY
from hvcu_tasks.core.schema import DataError, Problem, Sample, TaskLoadError
from hvcu_tasks.data import provenance
from hvcu_tasks.data.sources import resolve_source
from hvcu_tasks.data.validate import data_identity, load_family

log = logging.getLogger("hvcu_tasks")


def level_features() -> dict[str, Any]:
    """Return the column types of the base setting's document table (one row per level)."""
    import datasets

    return {
        "sample_id": datasets.Value("string"),
        "family": datasets.Value("string"),
        "aspect": datasets.Value("string"),
        "level": datasets.Value("int32"),
        "question": datasets.Value("string"),
        "option_keys": datasets.Sequence(datasets.Value("string")),
        "option_texts": datasets.Sequence(datasets.Value("string")),
        "answer": datasets.Value("string"),
        "image_path": datasets.Value("string"),
        "image_bytes": datasets.Value("binary"),
        IDENTITY_KEY: datasets.Value("string"),
    }


def level_dataset(samples: Sequence[Sample], identity: str = ""):  # -> datasets.Dataset
    """Build the lmms-eval document table (one row per level; the image as a path or encoded bytes, not decoded)."""
    import datasets

    features = datasets.Features(level_features())
    return document_table(list(level_rows(samples, identity)), features, "levels", identity)


def document_table(rows: list[dict[str, Any]], features: Any, kind: str, identity: str = ""):  # -> datasets.Dataset
    """Build a `datasets.Dataset` of documents straight from Arrow, fingerprinted by the data identity when given.

    `Dataset.from_list` encodes every cell in Python and hashes the whole table for its fingerprint (about
    0.2 s per 1,050 samples); the identity already names the content (its SHA-256 fingerprint), the source and
    the family, and `kind` tells the base and context tables apart.
    """
    import datasets
    import pyarrow as pa

    table = pa.Table.from_pylist(rows, schema=features.arrow_schema)
    fingerprint = hashlib.blake2b(f"{kind}\0{identity}".encode(), digest_size=16).hexdigest() if identity else None
    return datasets.Dataset(table, info=datasets.DatasetInfo(features=features), fingerprint=fingerprint)


def doc_identity(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Return the data identity a document carries ({} for a document built without one)."""
    text = doc.get(IDENTITY_KEY)
    return provenance.decode(text) if text else {}


def dataset_identity(docs: Any) -> dict[str, Any]:
    """Return the data identity of a task's document table ({} when it carries none, e.g. another task's)."""
    if docs is None or IDENTITY_KEY not in getattr(docs, "column_names", ()) or not len(docs):
        return {}
    identities = set(docs.select_columns([IDENTITY_KEY])[IDENTITY_KEY])
    if len(identities) > 1:  # one task reads one load; several would be a bug worth seeing in the file
        return {"error": "documents of one task carry different data identities"}
    return provenance.decode(identities.pop()) if identities and next(iter(identities)) else {}


def samples_for_stub(stub) -> list[Sample]:
    """Load the samples a task's one-row stub ({family, source}) names through the one validator, or raise DataError."""
    if len(stub) != 1 or not {"family", "source"} <= set(stub.column_names):
        raise ValueError(f"HVCU task stub must hold one row with 'family' and 'source', got {stub.column_names}")
    family, declared = stub[0]["family"], stub[0]["source"]
    source = resolve_source(declared)
    if source != declared:
        log.warning("HVCU-Bench %s: reading %s (from $%s) instead of %s", family, source, settings.DATA_ENV, declared)
    return load_family(source, family)


def task_samples(stub) -> list[Sample]:
    """Return a task's validated samples, or end the run (TaskLoadError) listing every problem, before any request."""
    return task_data(stub)[0]


def task_data(stub) -> tuple[list[Sample], str]:
    """Return a task's validated samples and their data identity (JSON text), or end the run (TaskLoadError)."""
    row = stub[0] if len(stub) else {}
    family, source = str(row.get("family", "?")), resolve_source(str(row.get("source", "?")))
    try:
        samples = samples_for_stub(stub)
        return samples, provenance.encode(data_identity(family, source, samples))
    except DataError as exc:
        raise TaskLoadError(family, source, exc.problems) from exc
    except Exception as exc:  # anything else would be retried for a minute, then swallowed by lmms-eval (exit 0)
        log.debug("HVCU-Bench %s: loading %s failed", family, source, exc_info=True)
        problem = Problem(source, "-", "load", f"unexpected {type(exc).__name__}: {exc}")
        raise TaskLoadError(family, source, [problem]) from exc


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a block (a data load allocates many small objects).

    With lmms-eval loaded, each collection the load's allocations trigger walks lmms-eval's large heap: that
    took 0.4 s of a 1.2 s load of 1,050 samples. The collector is back on (if it was) when the block ends.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
