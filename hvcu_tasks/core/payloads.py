"""process_results' value: one document's outcome records under every metric, and reading them back."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from hvcu_tasks.core.families import ASPECTS
from hvcu_tasks.core.metrics import Outcome, circular_metric_names, metric_names, table_metric_names
from hvcu_tasks.core.scoring import outcome_payload

IDENTITY_KEY = "data_identity"
"""The key that carries the data identity in each document and in the acc_full entry of every sample-log line."""

ROTATION_KEY = "rotation"
"""The circular setting's column and record field: which rotation of a level's option texts was asked."""

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
    family: str, outcomes: Sequence[Outcome], log_entry: Mapping[str, Any], identity: Mapping[str, Any]
) -> dict[str, Mapping[str, Any]]:
    """Return process_results' value: {"outcomes": [...]} under every metric; acc_full also gets `log_entry`.

    Only acc_full holds the records as a dict; every other metric gets a `SharedOutcomes` of the same list, so a
    sample-log line holds each record once. The acc_full entry also holds the document's data identity, so
    every sample-log line names its data (`identity`: the document's, {} for one built without).
    """
    records = [outcome_payload(o) for o in outcomes]
    shared = SharedOutcomes(records)
    result: dict[str, Mapping[str, Any]] = {name: shared for name in family_metric_names(family)}
    result["acc_full"] = {"outcomes": records, **log_entry, IDENTITY_KEY: dict(identity)}
    return result


def rotation_payloads(
    outcome: Outcome, rotation: int, question: str, identity: Mapping[str, Any]
) -> dict[str, Mapping[str, Any]]:
    """Return process_results' value for one rotated question: its record (with the rotation) under every metric."""
    records = [{**outcome_payload(outcome), ROTATION_KEY: rotation}]
    shared = SharedOutcomes(records)
    result: dict[str, Mapping[str, Any]] = {name: shared for name in table_metric_names(circular_metric_names())}
    result["acc_full"] = {
        "outcomes": records,
        "question": question,
        ROTATION_KEY: rotation,
        IDENTITY_KEY: dict(identity),
    }
    return result


def family_metric_names(family: str) -> list[str]:
    """Return the metrics a family task reports to lmms-eval, in table order (`metrics.TABLE_METRICS`)."""
    return table_metric_names(metric_names(ASPECTS[family]))


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
