"""Every metric of a family or circular task, the diagnostics `hvcu report` computes from the sample logs included.

A task reports to lmms-eval only `metrics.TABLE_METRICS` (the core's scores, which an exported task folder ships as
well). The rest are diagnostics, named and computed here from the same outcomes: invalid replies, error attribution
and per-aspect full-chain accuracy (read off the core's `FamilyScores`), answer-position bias, error propagation,
and the circular tasks' plain accuracy and invalid replies. `TaskScores.as_metrics` and `circular_metrics` name every
metric in table order (the reported ones first, the counts after the per-level diagnostics); `metric_names` and
`circular_metric_names` are those lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from hvcu_tasks.core.families import LEVEL_NAMES, LEVELS, OPTION_KEYS
from hvcu_tasks.core.metrics import (
    COUNT_METRICS,
    NA,
    FamilyScores,
    Outcome,
    acc_metric,
    chains,
    percent,
    reported,
    score_circular,
    score_family,
)


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


def pred_share_metric(key: str) -> str:
    """Return the name of the share (percent of parsed replies) of replies choosing this option key."""
    return f"pred_share_{key}"


def gold_share_metric(key: str) -> str:
    """Return the name of the share (percent of the replies with a parsed letter) whose gold answer is this key."""
    return f"gold_share_{key}"


POSITION_BIAS_METRIC = "position_bias"
"""Total variation distance (percent) between the parsed letters' distribution and their questions' gold letters'."""
PLAIN_PREFIX = "plain_"
"""Prefix of a circular task's accuracy counting every rotated question on its own (no circular rule)."""


def wrong_after_metric(level_name: str, previous: str) -> str:
    """Return the name of P(this level wrong | the level before it `previous`, 'wrong' or 'right'), in percent."""
    return f"wrong_{level_name}_after_{previous}"


@dataclass(frozen=True)
class PositionScores:
    """Answer-position bias over the replies with a parsed letter: where their letters and their golds fall (percent).

    Both distributions are taken over the same questions (those whose reply named a letter), so a reply
    that names none moves neither; with no such reply every value is NA.
    """

    pred_share: dict[str, float]
    """Per key: replies choosing it / replies with a parsed letter."""
    gold_share: dict[str, float]
    """Per key: of those same replies' questions, the ones whose gold is this key."""
    bias: float
    """Their total variation distance: half the summed absolute share differences, 0-100 (0: spread like the golds)."""

    def as_metrics(self) -> dict[str, float]:
        """Return the position metrics by name: pred_share_A-D, gold_share_A-D, position_bias."""
        return {
            **{pred_share_metric(k): v for k, v in self.pred_share.items()},
            **{gold_share_metric(k): v for k, v in self.gold_share.items()},
            POSITION_BIAS_METRIC: self.bias,
        }


def score_positions(outcomes: Iterable[Outcome]) -> PositionScores:
    """Return the parsed letters' distribution against their questions' gold letters, and its distance (percent)."""
    parsed = [o for o in outcomes if o.pred is not None]
    n = len(parsed)
    preds = {k: sum(o.pred == k for o in parsed) for k in OPTION_KEYS}
    golds = {k: sum(o.gold == k for o in parsed) for k in OPTION_KEYS}
    # One division of exact integer counts: the distance is never above 100 by a rounding step.
    bias = 100.0 * sum(abs(preds[k] - golds[k]) for k in OPTION_KEYS) / (2 * n) if n else NA
    return PositionScores(
        {k: percent(v, n) for k, v in preds.items()}, {k: percent(v, n) for k, v in golds.items()}, bias
    )


@dataclass(frozen=True)
class PropagationScores:
    """Error propagation over complete chains: P(level k wrong | level k-1 wrong / right), k = 2, 3, in percent."""

    after_wrong: dict[str, float]
    after_right: dict[str, float]

    def as_metrics(self) -> dict[str, float]:
        """Return wrong_<level>_after_wrong and wrong_<level>_after_right for L2 and L3, by name."""
        metrics: dict[str, float] = {}
        for name in self.after_wrong:
            metrics[wrong_after_metric(name, "wrong")] = self.after_wrong[name]
            metrics[wrong_after_metric(name, "right")] = self.after_right[name]
        return metrics


def error_propagation(complete: Iterable[dict[int, Outcome]]) -> PropagationScores:
    """Return P(level k wrong | level k-1 wrong) and P(level k wrong | level k-1 right) over complete chains.

    A probability whose condition no chain meets (e.g. no chain with L1 wrong) is NA, never 0.
    """
    chains_ = list(complete)
    after_wrong: dict[str, float] = {}
    after_right: dict[str, float] = {}
    for previous, level in zip(LEVELS, LEVELS[1:], strict=False):
        wrong_before = [c for c in chains_ if not c[previous].correct]
        right_before = [c for c in chains_ if c[previous].correct]
        name = LEVEL_NAMES[level]
        after_wrong[name] = percent(sum(not c[level].correct for c in wrong_before), len(wrong_before))
        after_right[name] = percent(sum(not c[level].correct for c in right_before), len(right_before))
    return PropagationScores(after_wrong, after_right)


def _in_order(table: Mapping[str, float | int], per_level: dict, rest: dict) -> dict[str, float | int]:
    """Return every metric in table order: the reported accuracies, the per-level diagnostics, the counts, the rest."""
    accuracies = {n: v for n, v in table.items() if n not in COUNT_METRICS}
    return {**accuracies, **per_level, **{n: table[n] for n in COUNT_METRICS}, **rest}


@dataclass
class TaskScores:
    """Everything one family task measures: the scores under our rule and the authors', and the failed requests."""

    ours: FamilyScores
    official: FamilyScores
    n_failed_requests: int = 0
    position: PositionScores = field(default_factory=lambda: score_positions(()))
    """Answer-position bias of every reply (our parse); NA when not computed (e.g. the human baseline)."""
    propagation: PropagationScores = field(default_factory=lambda: error_propagation(()))
    """Error propagation between consecutive levels (our parse); NA when not computed."""

    def as_metrics(self, aspects: Sequence[str]) -> dict[str, float | int]:
        """Return every metric by name, in table order (the one place the family metrics' names are made)."""
        ours = self.ours
        per_level = {
            **{invalid_metric(n): v for n, v in ours.invalid.items()},
            **{errors_at_metric(n): v for n, v in ours.error_counts.items()},
            **{error_share_metric(n): v for n, v in ours.error_share.items()},
        }
        rest = {
            **{aspect_metric(a): ours.aspect_acc_full.get(a, NA) for a in aspects},
            **self.position.as_metrics(),
            **self.propagation.as_metrics(),
        }
        return _in_order(reported(ours, self.official, self.n_failed_requests), per_level, rest)


def score_task(outcomes: Sequence[Outcome]) -> TaskScores:
    """Score one family task's outcomes under both parsing rules, with every diagnostic."""
    return TaskScores(
        ours=score_family(outcomes),
        official=score_family([o.under_official_rule() for o in outcomes]),
        n_failed_requests=sum(o.failed for o in outcomes),
        position=score_positions(outcomes),
        propagation=error_propagation(chains(outcomes)[0].values()),
    )


def family_metrics(outcomes: Sequence[Outcome], aspects: Sequence[str]) -> dict[str, float | int]:
    """Return every metric of `metric_names(aspects)` for these outcomes."""
    return score_task(outcomes).as_metrics(aspects)


def metric_names(aspects: Sequence[str]) -> list[str]:
    """Return every metric of a family with these aspects, in table order (what `TaskScores` names)."""
    return list(family_metrics((), aspects))


def circular_metrics(rotated: Sequence[tuple[int, Outcome]]) -> dict[str, float | int]:
    """Return every metric of a circular task (the reported ones, plain accuracy, invalid replies, positions)."""
    table = score_circular(rotated)  # also refuses a repeated or impossible rotation
    outcomes = [o for _rotation, o in rotated]
    asked = {LEVEL_NAMES[lv]: [o for o in outcomes if o.level == lv] for lv in LEVELS}
    per_level = {
        **{PLAIN_PREFIX + acc_metric(n): percent(sum(o.correct for o in os_), len(os_)) for n, os_ in asked.items()},
        **{invalid_metric(n): percent(sum(o.invalid for o in os_), len(os_)) for n, os_ in asked.items()},
    }
    return _in_order(table, per_level, score_positions(outcomes).as_metrics())


def circular_metric_names() -> list[str]:
    """Return every metric of a circular family task, in table order (what `circular_metrics` names)."""
    return list(circular_metrics(()))
