"""The lmms-eval side of HVCU-Bench: data sources, base-setting hooks, payloads and aggregations.

The functions here are pure over documents; `tasks/utils.py` only re-exports them for the YAMLs. The
context setting's hooks live in `context.py` and share the payloads and aggregations defined here.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import logging
import os
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from hvcu_tasks.core.families import ASPECTS
from hvcu_tasks.core.metrics import Outcome, family_metrics, metric_names, overall_score, table_metric_names
from hvcu_tasks.core.official_parsing import parse_official
from hvcu_tasks.core.parsing import parse_choice
from hvcu_tasks.core.prompts import base_messages, level_text
from hvcu_tasks.core.schema import DataError, Problem, Sample, TaskLoadError
from hvcu_tasks.data import provenance
from hvcu_tasks.data.images import document_image
from hvcu_tasks.data.validate import DATA_ENV, data_identity, load_family

log = logging.getLogger("hvcu_tasks")

FAILED_REQUEST_MARKER = "[LMMS_EVAL_REQUEST_FAILED"
"""Prefix lmms-eval's API backends put in place of a reply when every retry failed."""


def resolve_source(declared: str, environ: Mapping[str, str]) -> str:
    """Return the data source a task should read: the env override for hub tasks, else as declared.

    `HVCU_BENCH_REVISION` pins the hub revision of a hub source that names none (`hub:REPO@REV` wins).
    """
    override = environ.get(DATA_ENV, "").strip()
    return provenance.pinned_source(override if declared == "hub" and override else declared, environ)


def identity_of(family: str, source: str, samples: Sequence[Sample]) -> dict[str, Any]:
    """Return the data identity of one family load (source, resolved hub revision and layout, counts, fingerprint)."""
    return data_identity(family, source, samples)


def image_cell(sample: Sample) -> dict[str, Any]:
    """Return a document's image columns: `image_path` (its file) or `image_bytes` (its encoded cell), never pixels.

    Not a {"bytes": ...} dict: lmms-eval would inline such bytes as base64 into every --log_samples line.
    """
    if sample.image and sample.image.path:
        return {"image_path": str(sample.image.path), "image_bytes": None}
    return {"image_path": None, "image_bytes": sample.image.data if sample.image else None}


def level_rows(samples: Iterable[Sample], identity: str = "") -> Iterator[dict[str, Any]]:
    """Yield one document per (sample, level), sample-major, carrying the image reference and the data identity."""
    for s in samples:
        image = image_cell(s)
        for lv in s.levels:
            yield {
                "sample_id": s.id,
                "family": s.family,
                "aspect": s.aspect,
                "level": lv.level,
                "question": lv.question,
                "option_keys": [k for k, _ in lv.options],
                "option_texts": [t for _, t in lv.options],
                "answer": lv.answer,
                **image,
                provenance.IDENTITY_METRIC: identity,
            }


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
        provenance.IDENTITY_METRIC: datasets.Value("string"),
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


def samples_for_stub(stub) -> list[Sample]:
    """Load the samples a task's one-row stub ({family, source}) names through the one validator, or raise DataError."""
    if len(stub) != 1 or not {"family", "source"} <= set(stub.column_names):
        raise ValueError(f"HVCU task stub must hold one row with 'family' and 'source', got {stub.column_names}")
    family, declared = stub[0]["family"], stub[0]["source"]
    source = resolve_source(declared, os.environ)
    if source != declared:
        log.warning("HVCU-Bench %s: reading %s (from $%s) instead of %s", family, source, DATA_ENV, declared)
    return load_family(source, family)


def task_samples(stub) -> list[Sample]:
    """Return a task's validated samples, or end the run (TaskLoadError) listing every problem, before any request."""
    return task_data(stub)[0]


def task_data(stub) -> tuple[list[Sample], str]:
    """Return a task's validated samples and their data identity (JSON text), or end the run (TaskLoadError)."""
    row = stub[0] if len(stub) else {}
    family, source = str(row.get("family", "?")), resolve_source(str(row.get("source", "?")), os.environ)
    try:
        samples = samples_for_stub(stub)
        return samples, provenance.encode(identity_of(family, source, samples))
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


def process_docs(stub) -> Any:
    """Replace a base task's stub with that family's level documents (one per sample and level)."""
    with gc_paused():
        return level_dataset(*task_data(stub))


def doc_options(doc: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Return a document's options as (key, text) pairs."""
    return tuple(zip(doc["option_keys"], doc["option_texts"], strict=True))


def doc_to_text(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> str:
    """Return the protocol's user text for one level document."""
    return level_text(doc["question"], doc_options(doc))


def doc_to_visual(doc: Mapping[str, Any]) -> list[Any]:
    """Return the document's image as an RGB PIL image in a list (decoded once, see `images.document_image`)."""
    return [document_image(doc)]


def doc_to_messages(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> list[dict]:
    """Return the base-setting chat: the authors' system prompt, then user [text, image]."""
    return base_messages(doc_to_text(doc), document_image(doc))


def failed_reply(reply: object) -> bool:
    """Whether a reply is no answer at all: missing, None, not text, empty, or lmms-eval's failed-request marker.

    lmms-eval hands a base-setting task "" where the model gave None, so an empty reply counts as none.
    """
    return not isinstance(reply, str) or not reply.strip() or reply.startswith(FAILED_REQUEST_MARKER)


def score_reply(
    doc: Mapping[str, Any], level: int, options: tuple[tuple[str, str], ...], gold: str, reply: object
) -> Outcome:
    """Parse one reply to one level with both rules and score it (no reply: wrong under both, and marked failed)."""
    text = reply if isinstance(reply, str) else ""
    failed = failed_reply(reply)
    return Outcome(
        sample_id=str(doc["sample_id"]),
        family=str(doc["family"]),
        aspect=str(doc["aspect"]),
        level=int(level),
        gold=str(gold),
        pred=None if failed else parse_choice(text, dict(options)),
        response=text,
        pred_official=None if failed else parse_official(text),
        failed=failed,
        data=doc_identity(doc).get("fingerprint"),
    )


def outcome_of(doc: Mapping[str, Any], response: object) -> Outcome:
    """Score one reply against a base-setting (one level) document."""
    return score_reply(doc, int(doc["level"]), doc_options(doc), str(doc["answer"]), response)


def outcome_payload(outcome: Outcome) -> dict[str, Any]:
    """Return the compact, JSON-ready record of one scored level (no raw reply)."""
    record = outcome.to_dict()
    record["failed"] = outcome.failed or failed_reply(record.pop("response"))
    return record


SEE_FULL = "see acc_full"
"""What a sample-log line shows under every metric but acc_full: the line logs its outcomes once, under acc_full."""


class SharedOutcomes(Mapping[str, Any]):
    """One document's outcome records under a metric other than acc_full: {"outcomes": [...]} to the aggregations.

    It holds the very list the document's acc_full entry logs. It is not a dict, so lmms-eval's JSON fallback
    (`str()`) writes it into a sample-log line as SEE_FULL; it is a module-level class, so it pickles when
    lmms-eval gathers results across processes.
    """

    __slots__ = ("outcomes",)

    def __init__(self, outcomes: list[dict[str, Any]]) -> None:
        self.outcomes = outcomes

    def __getitem__(self, key: str) -> list[dict[str, Any]]:
        if key != "outcomes":
            raise KeyError(key)
        return self.outcomes

    def __iter__(self) -> Iterator[str]:
        return iter(("outcomes",))

    def __len__(self) -> int:
        return 1

    def __reduce__(self) -> tuple[type, tuple[list[dict[str, Any]]]]:
        return SharedOutcomes, (self.outcomes,)

    def __str__(self) -> str:
        return SEE_FULL

    def __repr__(self) -> str:
        return f"SharedOutcomes({len(self.outcomes)} outcome(s), {SEE_FULL})"


def payloads(
    family: str, outcomes: Sequence[Outcome], log_entry: Mapping[str, Any], doc: Mapping[str, Any] | None = None
) -> dict[str, Mapping[str, Any]]:
    """Return process_results' value: {"outcomes": [...]} under every metric; acc_full also gets `log_entry`.

    Only acc_full holds the records as a dict; every other metric gets a `SharedOutcomes` of the same list, so a
    sample-log line holds each record once. The acc_full entry also holds the document's data identity, so
    every sample-log line names its data.
    """
    records = [outcome_payload(o) for o in outcomes]
    shared = SharedOutcomes(records)
    result: dict[str, Mapping[str, Any]] = {name: shared for name in family_metric_names(family)}
    result["acc_full"] = {"outcomes": records, **log_entry, provenance.IDENTITY_METRIC: doc_identity(doc or {})}
    return result


def doc_identity(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Return the data identity a document carries ({} for a document built without one)."""
    text = doc.get(provenance.IDENTITY_METRIC)
    return provenance.decode(text) if text else {}


def dataset_identity(docs: Any) -> dict[str, Any]:
    """Return the data identity of a task's document table ({} when it carries none, e.g. another task's)."""
    if docs is None or provenance.IDENTITY_METRIC not in getattr(docs, "column_names", ()) or not len(docs):
        return {}
    identities = set(docs.select_columns([provenance.IDENTITY_METRIC])[provenance.IDENTITY_METRIC])
    if len(identities) > 1:  # one task reads one load; several would be a bug worth seeing in the file
        return {"error": "documents of one task carry different data identities"}
    return provenance.decode(identities.pop()) if identities and next(iter(identities)) else {}


def family_metric_names(family: str) -> list[str]:
    """Return the metrics a family task reports to lmms-eval, in table order (`metrics.TABLE_METRICS`)."""
    return table_metric_names(metric_names(ASPECTS[family]))


def process_results(doc: Mapping[str, Any], results: Sequence[object]) -> dict[str, dict]:
    """Score a base-setting document: {"outcomes": [one level]} under every metric of its family.

    The `acc_full` entry also carries the question so that `--log_samples` files can be read without
    the dataset (the raw reply is lmms-eval's `resps`).
    """
    outcome = outcome_of(doc, results[0] if results else None)
    return payloads(str(doc["family"]), [outcome], {"question": doc_to_text(doc)}, doc)


def flatten(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return the per-level records of every payload (an acc_full dict or a `SharedOutcomes`), or raise ValueError."""
    return [record for index, item in enumerate(items) for record in outcomes_in(item, index)]


def outcomes_in(item: object, index: int) -> list[dict[str, Any]]:
    """Return one payload's outcome records, refusing anything else (e.g. the SEE_FULL text of a sample log)."""
    records = item.get("outcomes") if isinstance(item, Mapping) else None
    if not isinstance(records, list):
        raise ValueError(
            f"HVCU-Bench aggregation: item {index} is {item!r:.60}, not an outcome payload; a sample log keeps "
            "each document's outcomes under acc_full only"
        )
    return records


Aggregation = Callable[[Sequence[Mapping[str, Any]]], "float | int | None"]
ALL_ASPECTS = tuple(a for aspects in ASPECTS.values() for a in aspects)


_SCORED: OrderedDict[bytes, dict[str, float | int]] = OrderedDict()
"""The metrics of the last few distinct sets of outcome records scored, by `content_key`."""
_SCORED_KEPT = 4
"""How many sets `_SCORED` keeps: lmms-eval aggregates a task's metrics one after another, so a few is plenty."""
_SCORED_LOCK = threading.Lock()


def content_key(records: list[dict[str, Any]]) -> bytes:
    """Return bytes equal for two record lists only if they are equal value for value and type for type.

    Equal pickles rebuild equal objects, so a copy of the records (lmms-eval pickles each metric's items
    separately when it gathers them across processes) gets the same key, and records differing in anything never do.
    """
    return pickle.dumps(records, protocol=5)


def task_metrics(items: Sequence[Mapping[str, Any]]) -> dict[str, float | int]:
    """Return every metric of one task's payloads; each distinct set of outcome records is scored only once."""
    return scored_once(
        "levels", flatten(items), lambda records: family_metrics([Outcome.from_dict(r) for r in records], ALL_ASPECTS)
    )


def scored_once(
    kind: str, records: list[dict[str, Any]], score: Callable[[list[dict[str, Any]]], Mapping[str, float | int]]
) -> dict[str, float | int]:
    """Return `score(records)`, computed once per distinct (kind, records) among the last few scored."""
    key = kind.encode() + b"\0" + content_key(records)
    with _SCORED_LOCK:
        scored = _SCORED.get(key)
        if scored is not None:
            _SCORED.move_to_end(key)
    if scored is None:
        scored = dict(score(records))
        with _SCORED_LOCK:
            _SCORED[key] = scored
            while len(_SCORED) > _SCORED_KEPT:
                _SCORED.popitem(last=False)
    return dict(scored)


def _metric(name: str) -> Aggregation:
    """Make the lmms-eval aggregation of one named metric: the task's scores (computed once), that number."""

    def aggregate(items: Sequence[Mapping[str, Any]]) -> float | int | None:
        """Aggregate per-document payloads into one metric value."""
        return task_metrics(items)[name]

    return aggregate


def failed_requests(items: Sequence[Mapping[str, Any]]) -> int:
    """Count levels that got no usable reply (scored wrong), warning with the documents they belong to."""
    failed = [r for r in flatten(items) if r["failed"]]
    if failed:
        names = [f"{r['family']}/{r['sample_id']} L{r['level']}" for r in failed]
        more = f" and {len(names) - 20} more" if len(names) > 20 else ""
        log.warning(
            "HVCU-Bench: %d request(s) got no usable reply (missing, None, empty, or failed after all retries) and "
            "are scored as wrong answers: %s%s",
            len(failed),
            ", ".join(names[:20]),
            more,
        )
    return len(failed)


def incomplete_chains(items: Sequence[Mapping[str, Any]]) -> int:
    """Count samples missing a level (e.g. under --limit), warning that full-chain metrics leave them out."""
    n = int(task_metrics(items)["n_incomplete"])
    if n:
        log.warning(
            "HVCU-Bench: %d sample(s) lack one of their three levels (e.g. --limit) and are left out of "
            "acc_full, error attribution and per-aspect scores",
            n,
        )
    return n


_COUNTED_HERE: dict[str, Aggregation] = {"n_incomplete": incomplete_chains, "n_failed_requests": failed_requests}

AGGREGATIONS: dict[str, Aggregation] = {
    name: _COUNTED_HERE.get(name) or _metric(name) for name in metric_names(ALL_ASPECTS)
}
"""One aggregation per metric any family task reports (the names come from `metrics.metric_names`)."""


def overall_score_group(metrics: Sequence[float], sizes: Sequence[int], weight_by_size: bool = False) -> float:
    """lmms-eval group aggregation: the paper's Overall Score (unweighted mean, 2 decimals; NaN if any is NaN)."""
    if weight_by_size:
        raise ValueError("the Overall Score is an unweighted mean; set weight_by_size: false")
    return overall_score(list(metrics))
