"""process_results' value: one document's outcome records under every metric, and reading them back."""

from __future__ import annotations

from collections import UserDict
from collections.abc import Mapping, Sequence
from typing import Any

from hvcu_tasks.core.metrics import TABLE_METRICS, Outcome
from hvcu_tasks.core.scoring import outcome_payload

IDENTITY_KEY = "data_identity"
"""The key that carries the data identity in each document and in the acc_full entry of every sample-log line."""

ROTATION_KEY = "rotation"
"""The circular setting's column and record field: which rotation of a level's option texts was asked."""

SEE_FULL = "see acc_full"
"""What a sample-log line shows under every metric but acc_full: the line logs its outcomes once, under acc_full."""


class SharedOutcomes(UserDict):
    """One document's outcome records under a metric other than acc_full: {"outcomes": [...]} to the aggregations.

    It holds the very list the document's acc_full entry logs. It is not a dict, so lmms-eval's JSON fallback
    (`str()`) writes it into a sample-log line as SEE_FULL; it is a module-level class, so it pickles when
    lmms-eval gathers results across processes.
    """

    def __str__(self) -> str:
        return SEE_FULL


def payloads(
    outcomes: Sequence[Outcome],
    log_entry: Mapping[str, Any],
    identity: Mapping[str, Any],
    tag: Mapping[str, Any] | None = None,
) -> dict[str, Mapping[str, Any]]:
    """Return process_results' value: {"outcomes": [...]} under every metric; acc_full also gets `log_entry`.

    Only acc_full holds the records as a dict; every other metric gets a `SharedOutcomes` of the same list, so a
    sample-log line holds each record once. The acc_full entry also holds the document's data identity, so
    every sample-log line names its data (`identity`: the document's, {} for one built without). `tag` is added
    to every record (the circular setting's rotation).
    """
    records = [{**outcome_payload(o), **(tag or {})} for o in outcomes]
    result: dict[str, Mapping[str, Any]] = dict.fromkeys(TABLE_METRICS, SharedOutcomes(outcomes=records))
    result["acc_full"] = {"outcomes": records, **log_entry, IDENTITY_KEY: dict(identity)}
    return result


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
