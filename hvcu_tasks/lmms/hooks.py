"""The base setting's hooks (one document per level) and what every setting's hooks share: tables, identity, scoring.

`hvcu export-task` copies this file, context.py, analysis_tasks.py and hook_table.py as they are; each side brings
its own `documents` (samples and images): `lmms/documents.py` installed, `lmms/export_documents.py` exported.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from hvcu_tasks.core.documents import level_rows
from hvcu_tasks.core.metrics import Outcome
from hvcu_tasks.core.payloads import IDENTITY_KEY, ROTATION_KEY, payloads
from hvcu_tasks.core.prompts import base_messages, level_text
from hvcu_tasks.core.records import loads_unique
from hvcu_tasks.core.scoring import score_reply
from hvcu_tasks.lmms.documents import document_image as doc_image  # an RGB PIL image, a private copy
from hvcu_tasks.lmms.documents import task_data


def features(kind: str) -> Any:
    """Return the column types of one document table: 'levels', 'rotations', 'chains' or 'gold-context'."""
    import datasets

    text, strings = datasets.Value("string"), datasets.Sequence(datasets.Value("string"))
    head = {"sample_id": text, "family": text, "aspect": text}
    tail = {"image_path": text, "image_bytes": datasets.Value("binary"), IDENTITY_KEY: text}
    if kind in {"levels", "rotations"}:
        body = {"level": datasets.Value("int32"), "question": text, "option_keys": strings, "option_texts": strings}
        extra = {ROTATION_KEY: datasets.Value("int32")} if kind == "rotations" else {}
        return datasets.Features({**head, **body, "answer": text, **tail, **extra})
    body = {"levels": datasets.Sequence(datasets.Value("int32")), "questions": strings}
    body |= {"option_keys": datasets.Sequence(strings), "option_texts": datasets.Sequence(strings), "answers": strings}
    extra = {"level": datasets.Value("int32")} if kind == "gold-context" else {}
    return datasets.Features({**head, **body, **tail, **extra})


def document_table(rows: list[dict[str, Any]], kind: str, identity: str = "") -> Any:
    """Build a `datasets.Dataset` of documents straight from Arrow, fingerprinted by the data identity when given.

    `Dataset.from_list` encodes and hashes every cell (0.2 s per 1,050 samples); the identity names the content.
    """
    import datasets
    import pyarrow as pa

    columns = features(kind)
    table = pa.Table.from_pylist(rows, schema=columns.arrow_schema)
    fingerprint = hashlib.blake2b(f"{kind}\0{identity}".encode(), digest_size=16).hexdigest() if identity else None
    return datasets.Dataset(table, info=datasets.DatasetInfo(features=columns), fingerprint=fingerprint)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a block (a data load allocates many small objects).

    With lmms-eval loaded, each collection walks its large heap: 0.4 s of a 1.2 s load of 1,050 samples.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def loaded_table(stub: Any, kind: str, rows: Any) -> Any:
    """Replace a task's one-row stub with its documents: `rows(samples, identity)` of its validated samples."""
    with gc_paused():
        samples, identity = task_data(stub)
        return document_table(list(rows(samples, identity)), kind, identity)


def doc_identity(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Return the data identity a document carries ({} for a document built without one): JSON the load wrote."""
    text = doc.get(IDENTITY_KEY)
    return loads_unique(text) if text else {}


def doc_fingerprint(doc: Mapping[str, Any]) -> str | None:
    """Return the fingerprint of the data a document came from (None for a document built without one)."""
    return doc_identity(doc).get("fingerprint")


def doc_options(doc: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Return a level document's options as (key, text) pairs."""
    return tuple(zip(doc["option_keys"], doc["option_texts"], strict=True))


def family_payloads(doc: Mapping[str, Any], outcomes: Sequence[Outcome], entry: Mapping[str, Any]) -> dict:
    """Return process_results' value for a family task: the outcomes under its metrics, acc_full logging `entry`."""
    return payloads(outcomes, entry, doc_identity(doc))


def process_docs(stub: Any) -> Any:
    """Replace a base task's stub with that family's level documents (one per sample and level)."""
    return loaded_table(stub, "levels", level_rows)


def doc_to_text(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> str:
    """Return the protocol's user text for one level document."""
    return level_text(doc["question"], doc_options(doc))


def doc_to_visual(doc: Mapping[str, Any]) -> list[Any]:
    """Return the document's image as an RGB PIL image in a list."""
    return [doc_image(doc)]


def doc_to_messages(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> list[dict]:
    """Return the base-setting chat: the authors' system prompt, then user [text, image]."""
    return base_messages(doc_to_text(doc), doc_image(doc))


def outcome_of(doc: Mapping[str, Any], response: object) -> Outcome:
    """Score one reply against a level document (base, blind or circular)."""
    return score_reply(doc, int(doc["level"]), doc_options(doc), str(doc["answer"]), response, doc_fingerprint(doc))


def process_results(doc: Mapping[str, Any], results: Sequence[object]) -> dict[str, Mapping[str, Any]]:
    """Score a base-setting document: {"outcomes": [one level]} under every metric of its family.

    The `acc_full` entry also carries the question so that `--log_samples` files can be read without
    the dataset (the raw reply is lmms-eval's `resps`).
    """
    outcome = outcome_of(doc, results[0] if results else None)
    return family_payloads(doc, [outcome], {"question": doc_to_text(doc)})
