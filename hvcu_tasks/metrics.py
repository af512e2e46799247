"""The paper's metrics over per-level outcomes: level accuracy, full-chain accuracy, error attribution.

A ratio with an empty denominator (a level never asked, no complete chain, no failed chain) is NA, a NaN
meaning "not available", never 0; the Overall Score is NA when any family's full-chain accuracy is.

Every outcome is read under two answer-parsing rules: ours (`pred`, `hvcu_tasks.parsing`) and the
authors' (`pred_official`, `hvcu_tasks.official_parsing`), which gives the paper-comparable `*_official`
accuracies. This module is the one place that names the metrics a family task and a group report:
`TaskScores.as_metrics` makes every name with its value, and `metric_names` is the list it gives.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace

from hvcu_tasks.families import LEVEL_NAMES, LEVELS
from hvcu_tasks.official_parsing import parse_official

NA = float("nan")
"""The value of a metric that has nothing to measure (an empty denominator)."""


def is_na(value: object) -> bool:
    """Whether a metric value is "not available" (NaN or None)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


OFFICIAL_SUFFIX = "_official"
"""Suffix of a metric computed with the authors' parsing rule instead of ours."""
FULL_METRIC = "acc_full"
"""Full-chain accuracy: the family's part of the Overall Score."""
OFFICIAL_FULL_METRIC = FULL_METRIC + OFFICIAL_SUFFIX
"""Full-chain accuracy under the authors' rule: the family's part of the paper-comparable Score."""


def acc_metric(level_name: str) -> str:
    """Return the name of a level's accuracy (acc_perc, acc_bridge, acc_conn)."""
    return f"acc_{level_name}"


def invalid_metric(level_name: str) -> str:
    """Return the name of a level's share of replies that commit to no option."""
    return f"invalid_{level_name}"


def errors_at_metric(level_name: str) -> str:
    """Return the name of the count of failed chains whose first wrong level is this one."""
    return f"errors_at_{level_name}"


def error_share_metric(level_name: str) -> str:
    """Return the name of the share (percent) of failed chains whose first wrong level is this one."""
    return f"error_share_{level_name}"


def aspect_metric(aspect: str) -> str:
    """Return the name of an aspect's full-chain accuracy."""
    return f"full_{aspect}"


LEVEL_ACC_METRICS = tuple(acc_metric(n) for n in LEVEL_NAMES.values())
"""acc_perc, acc_bridge, acc_conn."""
ACCURACY_METRICS = (*LEVEL_ACC_METRICS, FULL_METRIC)
"""The accuracies reported under both parsing rules."""
OFFICIAL_METRICS = tuple(m + OFFICIAL_SUFFIX for m in ACCURACY_METRICS)
"""acc_perc_official, acc_bridge_official, acc_conn_official, acc_full_official."""
GROUP_METRICS = (FULL_METRIC, OFFICIAL_FULL_METRIC)
"""What a group of the three family tasks reports: the Overall Score under our rule and under the authors'."""
PERCENT_PREFIXES = ("acc_", "invalid_", "error_share_", "full_")
"""Every metric named with one of these is a percentage (0-100, or NA)."""
COUNT_PREFIXES = ("n_", "errors_at_")
"""Every metric named with one of these is a count (a number >= 0, never NA)."""

LOWER_IS_BETTER_PREFIXES = ("invalid_", "errors_at_", "error_share_", "n_")
"""Metrics named with one of these are better when lower (the YAMLs' `higher_is_better: false`)."""


def higher_is_better(name: str) -> bool:
    """Whether a larger value of this metric is better (what a task YAML declares for it)."""
    return not name.startswith(LOWER_IS_BETTER_PREFIXES)


_FROM_RESPONSE = "\0parse the response"
"""Default of `Outcome.pred_official`: the authors' rule applied to `response` when the outcome is built."""


def metric_names(aspects: Sequence[str]) -> list[str]:
    """Return every metric a family task with these aspects reports, in table order (what `TaskScores` names)."""
    return list(score_task(()).as_metrics(aspects))


@dataclass(frozen=True)
class Outcome:
    """The scored answer to one (sample, level) question, parsed by our rule (`pred`) and the authors' one."""

    sample_id: str
    family: str
    aspect: str
    level: int
    gold: str
    pred: str | None
    response: str = ""
    pred_official: str | None = _FROM_RESPONSE
    failed: bool = False
    """No usable reply came (missing, empty, or the request failed): scored wrong, counted in n_failed_requests."""
    data: str | None = None
    """The fingerprint of the data the question came from (`provenance`), None when not recorded."""

    def __post_init__(self) -> None:
        """Parse `response` with the authors' rule unless `pred_official` was given."""
        if self.pred_official == _FROM_RESPONSE:
            object.__setattr__(self, "pred_official", parse_official(self.response))

    @property
    def correct(self) -> bool:
        """Whether the parsed answer equals the gold key (unparseable is wrong)."""
        return self.pred is not None and self.pred == self.gold

    @property
    def correct_official(self) -> bool:
        """Whether the authors' parse of the reply equals the gold key (unparseable is wrong)."""
        return self.pred_official is not None and self.pred_official == self.gold

    def under_official_rule(self) -> Outcome:
        """Return this outcome with the authors' parse in place of ours (to score it the paper's way)."""
        return replace(self, pred=self.pred_official)

    @property
    def invalid(self) -> bool:
        """Whether the reply committed to no option."""
        return self.pred is None

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (the harness logs it per document without `response`, which lmms-eval keeps)."""
        record = asdict(self)
        failed, data = record.pop("failed"), record.pop("data")
        verdicts = {"correct": self.correct, "correct_official": self.correct_official}
        return {**record, **verdicts, "failed": failed, "data": data}

    @classmethod
    def from_dict(cls, d: dict) -> Outcome:
        """Rebuild an outcome from `to_dict` output."""
        return cls(
            sample_id=str(d["sample_id"]),
            family=str(d["family"]),
            aspect=str(d["aspect"]),
            level=int(d["level"]),
            gold=str(d["gold"]),
            pred=None if d.get("pred") is None else str(d["pred"]),
            response=str(d.get("response", "")),
            pred_official=_FROM_RESPONSE
            if "pred_official" not in d
            else (None if d["pred_official"] is None else str(d["pred_official"])),
            failed=bool(d.get("failed", False)),
            data=None if d.get("data") is None else str(d["data"]),
        )


@dataclass
class FamilyScores:
    """Every metric of one task family, in percent (0-100) unless named n_*/count; NA where nothing was measured."""

    acc: dict[str, float]
    invalid: dict[str, float]
    asked: dict[str, int]
    acc_full: float
    n_samples: int
    n_incomplete: int
    error_counts: dict[str, int]
    error_share: dict[str, float]
    aspect_acc_full: dict[str, float] = field(default_factory=dict)
    aspect_n: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Return a flat JSON-ready dict."""
        return asdict(self)

    def accuracies(self) -> dict[str, float]:
        """Return the level and full-chain accuracies by reported name (ACCURACY_METRICS)."""
        return {**{acc_metric(n): v for n, v in self.acc.items()}, FULL_METRIC: self.acc_full}


@dataclass
class TaskScores:
    """Everything one family task reports: the scores under our rule and the authors', and the failed requests."""

    ours: FamilyScores
    official: FamilyScores
    n_failed_requests: int = 0

    def as_metrics(self, aspects: Sequence[str]) -> dict[str, float | int]:
        """Return every reported metric by name, in table order (the one place metric names are made)."""
        ours = self.ours
        return {
            **ours.accuracies(),
            **{name + OFFICIAL_SUFFIX: v for name, v in self.official.accuracies().items()},
            **{invalid_metric(n): v for n, v in ours.invalid.items()},
            **{errors_at_metric(n): v for n, v in ours.error_counts.items()},
            **{error_share_metric(n): v for n, v in ours.error_share.items()},
            "n_chains": ours.n_samples,
            "n_incomplete": ours.n_incomplete,
            "n_failed_requests": self.n_failed_requests,
            **{aspect_metric(a): ours.aspect_acc_full.get(a, NA) for a in aspects},
        }


def _pct(num: int, den: int) -> float:
    """Return num/den in percent, NA for an empty denominator."""
    return 100.0 * num / den if den else NA


def group_chains(outcomes: Iterable[Outcome]) -> dict[tuple[str, str], dict[int, Outcome]]:
    """Group outcomes by (family, sample id) into level -> outcome, refusing a level given twice."""
    by_sample: dict[tuple[str, str], dict[int, Outcome]] = defaultdict(dict)
    for o in outcomes:
        key = (o.family, o.sample_id)
        if o.level in by_sample[key]:
            raise ValueError(f"duplicate outcome for sample {o.sample_id!r} level {o.level} in {o.family}")
        by_sample[key][o.level] = o
    return dict(by_sample)


def is_complete(chain: dict[int, Outcome]) -> bool:
    """Whether a chain holds every level."""
    return set(chain) == set(LEVELS)


def chains(outcomes: Iterable[Outcome]) -> tuple[dict[tuple[str, str], dict[int, Outcome]], int]:
    """Group outcomes by (family, sample id) and return complete chains plus the count of incomplete ones."""
    by_sample = group_chains(outcomes)
    complete = {k: v for k, v in by_sample.items() if is_complete(v)}
    return complete, len(by_sample) - len(complete)


def first_error_level(chain: dict[int, Outcome]) -> int | None:
    """Return the first level (in L1, L2, L3 order) answered wrongly, or None if all are right."""
    for level in LEVELS:
        if not chain[level].correct:
            return level
    return None


def score_family(outcomes: Sequence[Outcome]) -> FamilyScores:
    """Compute all metrics for the outcomes of one family."""
    asked = {LEVEL_NAMES[lv]: 0 for lv in LEVELS}
    right = dict.fromkeys(asked, 0)
    bad = dict.fromkeys(asked, 0)
    for o in outcomes:
        name = LEVEL_NAMES[o.level]
        asked[name] += 1
        right[name] += o.correct
        bad[name] += o.invalid
    complete, n_incomplete = chains(outcomes)
    errors = dict.fromkeys(asked, 0)
    aspect_total: dict[str, int] = defaultdict(int)
    aspect_right: dict[str, int] = defaultdict(int)
    full_right = 0
    for chain in complete.values():
        aspect = chain[1].aspect
        aspect_total[aspect] += 1
        first = first_error_level(chain)
        if first is None:
            full_right += 1
            aspect_right[aspect] += 1
        else:
            errors[LEVEL_NAMES[first]] += 1
    failed = sum(errors.values())
    return FamilyScores(
        acc={k: _pct(right[k], asked[k]) for k in asked},
        invalid={k: _pct(bad[k], asked[k]) for k in asked},
        asked=asked,
        acc_full=_pct(full_right, len(complete)),
        n_samples=len(complete),
        n_incomplete=n_incomplete,
        error_counts=errors,
        error_share={k: _pct(v, failed) for k, v in errors.items()},
        aspect_acc_full={a: _pct(aspect_right[a], n) for a, n in sorted(aspect_total.items())},
        aspect_n=dict(sorted(aspect_total.items())),
    )


def overall_score(acc_full_by_family: Sequence[float]) -> float:
    """Return the Overall Score: the unweighted mean of the families' full-chain accuracies, 2 decimals (or NA)."""
    if not acc_full_by_family:
        raise ValueError("the Overall Score needs at least one family's full-chain accuracy")
    if any(is_na(v) for v in acc_full_by_family):
        return NA
    return round(sum(acc_full_by_family) / len(acc_full_by_family), 2)


def score_task(outcomes: Sequence[Outcome]) -> TaskScores:
    """Score one family task's outcomes under both parsing rules and count the requests that got no reply."""
    return TaskScores(
        ours=score_family(outcomes),
        official=score_family([o.under_official_rule() for o in outcomes]),
        n_failed_requests=sum(o.failed for o in outcomes),
    )


def family_metrics(outcomes: Sequence[Outcome], aspects: Sequence[str]) -> dict[str, float | int]:
    """Return every metric of `metric_names(aspects)` for these outcomes."""
    return score_task(outcomes).as_metrics(aspects)
