"""lmms-eval's aggregations: one task's payloads -> each metric it reports (pure; `lmms/hook_table` adds a memo)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hvcu_tasks.core.metrics import TABLE_METRICS, Outcome, overall_score, score_circular, score_table
from hvcu_tasks.core.payloads import ROTATION_KEY, flatten

log = logging.getLogger("hvcu_tasks")

Aggregation = Callable[[Sequence[Mapping[str, Any]]], "float | int | None"]
Scores = Callable[[Sequence[Mapping[str, Any]]], Mapping[str, "float | int"]]
"""A task's payloads -> every metric it reports (`task_metrics`, `circular_task_metrics`, or a memo of one)."""


def task_metrics(items: Sequence[Mapping[str, Any]]) -> dict[str, float | int]:
    """Return what one family task reports (TABLE_METRICS) from its payloads."""
    return score_table([Outcome.from_dict(r) for r in flatten(items)])


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


INCOMPLETE_WARNING = (
    "HVCU-Bench: %d sample(s) lack one of their three levels (e.g. --limit) and are left out of "
    "acc_full, error attribution and per-aspect scores"
)
CIRCULAR_INCOMPLETE_WARNING = (
    "HVCU-Bench circular: %d sample(s) lack a rotation of one of their levels (e.g. --limit); such a level "
    "is left out of the circular accuracy and the sample out of acc_full"
)


def _metric(scores: Scores, name: str) -> Aggregation:
    """Make the lmms-eval aggregation of one named metric: the task's scores, that number."""

    def aggregate(items: Sequence[Mapping[str, Any]]) -> float | int | None:
        """Aggregate per-document payloads into one metric value."""
        return scores(items)[name]

    return aggregate


def _incomplete(scores: Scores, warning: str) -> Aggregation:
    """Make the n_incomplete aggregation: the count, with a warning that names what leaves such samples out."""

    def incomplete(items: Sequence[Mapping[str, Any]]) -> int:
        """Count the samples missing a level (or a rotation of one), warning when there are any."""
        n = int(scores(items)["n_incomplete"])
        if n:
            log.warning(warning, n)
        return n

    return incomplete


def aggregations(scores: Scores, warning: str) -> dict[str, Aggregation]:
    """Return one aggregation per reported metric (TABLE_METRICS), each reading `scores(items)` (the counts warn)."""
    counted = {"n_incomplete": _incomplete(scores, warning), "n_failed_requests": failed_requests}
    return {name: counted.get(name) or _metric(scores, name) for name in TABLE_METRICS}


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
    """Return what one circular task reports (TABLE_METRICS) from its payloads (all ranks' records)."""
    return score_circular(rotated_outcomes(flatten(items)))
