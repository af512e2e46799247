"""lmms-eval's aggregations: one task's payloads -> every metric, scored once per distinct set of records."""

from __future__ import annotations

import logging
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hvcu_tasks.core.families import ASPECTS
from hvcu_tasks.core.metrics import (
    Outcome,
    circular_metric_names,
    family_metrics,
    metric_names,
    overall_score,
    score_circular,
)
from hvcu_tasks.core.payloads import ROTATION_KEY, flatten

log = logging.getLogger("hvcu_tasks")

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


def rotated_outcomes(records: Sequence[Mapping[str, Any]]) -> list[tuple[int, Outcome]]:
    """Return (rotation, outcome) per record, refusing a record that names no rotation."""
    out = []
    for index, record in enumerate(records):
        rotation = record.get(ROTATION_KEY)
        if isinstance(rotation, bool) or not isinstance(rotation, int):
            raise ValueError(
                f"HVCU-Bench circular aggregation: record {index} ({record.get('family')}/{record.get('sample_id')} "
                f"L{record.get('level')}) has no integer '{ROTATION_KEY}'; it is not a circular-task outcome"
            )
        out.append((rotation, Outcome.from_dict(dict(record))))
    return out


def circular_task_metrics(items: Sequence[Mapping[str, Any]]) -> dict[str, float | int]:
    """Return every circular metric of one task's payloads (all ranks' records), scored once per distinct set."""
    return scored_once(
        "rotations", flatten(items), lambda records: score_circular(rotated_outcomes(records)).as_metrics()
    )


def _circular_metric(name: str) -> Aggregation:
    """Make the lmms-eval aggregation of one circular metric."""

    def aggregate(items: Sequence[Mapping[str, Any]]) -> float | int | None:
        """Aggregate rotated-question payloads into one circular metric value."""
        return circular_task_metrics(items)[name]

    return aggregate


def circular_incomplete(items: Sequence[Mapping[str, Any]]) -> int:
    """Count samples lacking a rotation of some level (e.g. --limit), warning that circular verdicts leave them out."""
    n = int(circular_task_metrics(items)["n_incomplete"])
    if n:
        log.warning(
            "HVCU-Bench circular: %d sample(s) lack a rotation of one of their levels (e.g. --limit); such a level "
            "is left out of the circular accuracy and the sample out of acc_full",
            n,
        )
    return n


CIRCULAR_AGGREGATIONS: dict[str, Aggregation] = {
    name: {"n_incomplete": circular_incomplete, "n_failed_requests": failed_requests}.get(name)
    or _circular_metric(name)
    for name in circular_metric_names()
}
"""One aggregation per metric a circular family task reports (names from `metrics.circular_metric_names`)."""
