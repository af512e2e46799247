"""Every `!function utils.<name>` of the task YAMLs -> its hook: what both task folders' utils.py hand lmms-eval.

lmms-eval calls one aggregation per metric (11 per task) on equal payloads: a memo here, at the edge, scores the
task once (18 ms per 1,200 outcomes, x11; the memo's pickle costs 1 ms). A YAML naming a diagnostic's aggregation
is refused when lmms-eval builds the task (`unknown_hook`).
"""

from __future__ import annotations

import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hvcu_tasks.core import aggregate
from hvcu_tasks.core.metrics import TABLE_METRICS
from hvcu_tasks.core.payloads import flatten
from hvcu_tasks.lmms import analysis_tasks, context, hooks


class Memo:
    """The scores of the last few distinct payload lists, keyed by their content (equal pickles: equal records)."""

    def __init__(self, scores: aggregate.Scores, kept: int = 4) -> None:
        self.scores, self.kept = scores, kept
        self.found: OrderedDict[bytes, dict[str, float | int]] = OrderedDict()
        self.lock = threading.Lock()

    def __call__(self, items: Sequence[Mapping[str, Any]]) -> dict[str, float | int]:
        """Return `scores(items)`, computed once per distinct content among the last `kept` scored."""
        key = pickle.dumps(flatten(items), protocol=5)
        with self.lock:
            found = self.found.get(key)
            if found is not None:
                self.found.move_to_end(key)
                return dict(found)
        found = dict(self.scores(items))
        with self.lock:
            self.found[key] = found
            while len(self.found) > self.kept:
                self.found.popitem(last=False)
        return dict(found)


AGGREGATIONS = aggregate.aggregations(Memo(aggregate.task_metrics), aggregate.INCOMPLETE_WARNING)
"""One aggregation per reported family metric (`agg_<metric>`), the task scored once for all of them."""
CIRCULAR_AGGREGATIONS = aggregate.aggregations(
    Memo(aggregate.circular_task_metrics), aggregate.CIRCULAR_INCOMPLETE_WARNING
)
"""One aggregation per reported circular metric (`agg_circular_<metric>`), the task scored once for all of them."""

_NAMED: tuple[tuple[str, Any, tuple[str, ...]], ...] = (
    ("", hooks, ("process_docs", "doc_to_text", "doc_to_visual", "doc_to_messages", "process_results")),
    ("context_", context, ("process_docs", "doc_to_text", "doc_to_messages", "process_results")),
    ("", analysis_tasks, ("blind_doc_to_visual", "blind_doc_to_messages", "circular_process_docs")),
    ("", analysis_tasks, ("circular_process_results", "gold_process_docs", "gold_doc_to_text")),
    ("", analysis_tasks, ("gold_doc_to_messages", "gold_process_results")),
)

HOOKS: dict[str, Callable] = {
    **{prefix + name: getattr(module, name) for prefix, module, names in _NAMED for name in names},
    "overall_score_group": aggregate.overall_score_group,
    **{f"agg_{name}": aggregation for name, aggregation in AGGREGATIONS.items()},
    **{f"agg_circular_{name}": aggregation for name, aggregation in CIRCULAR_AGGREGATIONS.items()},
}
"""`!function utils.<name>` -> hook."""


def unknown_hook(name: str) -> str:
    """Say why `!function utils.<name>` names no hook: the message of the AttributeError each utils.py raises."""
    if not name.startswith("agg_"):
        return f"utils.{name}: the HVCU-Bench task folder has no hook of that name"
    return (
        f"utils.{name}: an HVCU-Bench task reports only {', '.join(TABLE_METRICS)} (agg_<metric>, "
        "agg_circular_<metric>); the diagnostics (per aspect, error attribution, invalid replies, answer positions, "
        "propagation, plain_acc_*) are no task metrics: `hvcu report` computes them from a --log_samples run"
    )
