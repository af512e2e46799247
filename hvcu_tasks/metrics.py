"""The paper's metrics over per-level outcomes: level accuracy, full-chain accuracy, error attribution.

A ratio with an empty denominator (a level never asked, no complete chain, no failed chain) is NA, a NaN
meaning "not available", never 0; the Overall Score is NA when any family's full-chain accuracy is.

Every outcome is read under two answer-parsing rules: ours (`pred`, `hvcu_tasks.parsing`) and the
authors' (`pred_official`, `hvcu_tasks.official_parsing`), which gives the paper-comparable `*_official`
accuracies. This module is the one place that names the metrics a family task and a group report.
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
ACCURACY_METRICS = (*(f"acc_{n}" for n in LEVEL_NAMES.values()), "acc_full")
"""The accuracies reported under both parsing rules."""
OFFICIAL_METRICS = tuple(m + OFFICIAL_SUFFIX for m in ACCURACY_METRICS)
"""acc_perc_official, acc_bridge_official, acc_conn_official, acc_full_official."""
GROUP_METRICS = ("acc_full", "acc_full" + OFFICIAL_SUFFIX)
"""What a group of the three family tasks reports: the Overall Score under our rule and under the authors'."""

_FROM_RESPONSE = "\0parse the response"
"""Default of `Outcome.pred_official`: the authors' rule applied to `response` when the outcome is built."""


def metric_names(aspects: Sequence[str]) -> list[str]:
    """Return every metric a family task with these aspects reports, in table order (the one list)."""
    levels = list(LEVEL_NAMES.values())
    return (
        [*ACCURACY_METRICS, *OFFICIAL_METRICS]
        + [f"invalid_{n}" for n in levels]
        + [f"errors_at_{n}" for n in levels]
        + [f"error_share_{n}" for n in levels]
        + ["n_chains", "n_incomplete", "n_failed_requests"]
        + [f"full_{a}" for a in aspects]
    )


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
        """Return a JSON-ready dict (what lmms-eval logs per document)."""
        return {**asdict(self), "correct": self.correct, "correct_official": self.correct_official}

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

    def as_metrics(self, aspects: Sequence[str]) -> dict[str, float | int]:
        """Return the metrics these scores give, by reported name (full_* for the given aspects; NA if unseen)."""
        return {
            **{f"acc_{n}": v for n, v in self.acc.items()},
            "acc_full": self.acc_full,
            **{f"invalid_{n}": v for n, v in self.invalid.items()},
            **{f"errors_at_{n}": v for n, v in self.error_counts.items()},
            **{f"error_share_{n}": v for n, v in self.error_share.items()},
            "n_chains": self.n_samples,
            "n_incomplete": self.n_incomplete,
            **{f"full_{a}": self.aspect_acc_full.get(a, NA) for a in aspects},
        }


def _pct(num: int, den: int) -> float:
    """Return num/den in percent, NA for an empty denominator."""
    return 100.0 * num / den if den else NA


def chains(outcomes: Iterable[Outcome]) -> tuple[dict[tuple[str, str], dict[int, Outcome]], int]:
    """Group outcomes by (family, sample id) and return complete chains plus the count of incomplete ones."""
    by_sample: dict[tuple[str, str], dict[int, Outcome]] = defaultdict(dict)
    for o in outcomes:
        key = (o.family, o.sample_id)
        if o.level in by_sample[key]:
            raise ValueError(f"duplicate outcome for sample {o.sample_id!r} level {o.level} in {o.family}")
        by_sample[key][o.level] = o
    complete = {k: v for k, v in by_sample.items() if set(v) == set(LEVELS)}
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


def family_metrics(outcomes: Sequence[Outcome], aspects: Sequence[str]) -> dict[str, float | int]:
    """Return every metric of `metric_names(aspects)` but n_failed_requests: ours, then the *_official accuracies."""
    metrics = score_family(outcomes).as_metrics(aspects)
    official = score_family([o.under_official_rule() for o in outcomes]).as_metrics(())
    metrics.update({name + OFFICIAL_SUFFIX: official[name] for name in ACCURACY_METRICS})
    return metrics
