"""The paper's metrics over per-level outcomes: level accuracy, full-chain accuracy, error attribution.

A ratio with an empty denominator (a level never asked, no complete chain, no failed chain) is NA, a NaN
meaning "not available", never 0; the Overall Score is NA when any family's full-chain accuracy is.

Every outcome is read under two answer-parsing rules: ours (`pred`, `hvcu_tasks.core.parsing`) and the
authors' (`pred_official`, `hvcu_tasks.core.official_parsing`), which gives the paper-comparable `*_official`
accuracies. This module is the one place that names the metrics a family task and a group report:
`TaskScores.as_metrics` makes every name with its value, and `metric_names` is the list it gives.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace

from hvcu_tasks.core.families import LEVEL_NAMES, LEVELS, OPTION_KEYS
from hvcu_tasks.core.official_parsing import parse_official

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
COUNT_METRICS = ("n_chains", "n_incomplete", "n_failed_requests")
"""Chains scored, chains missing a level (a partial run) and requests that got no usable reply."""
TABLE_METRICS = (*ACCURACY_METRICS, *OFFICIAL_METRICS, *COUNT_METRICS)
"""What a family task reports to lmms-eval (the rows of its printed table and results file): the paper's
accuracies under both rules and the counts that tell a complete run from a partial one. Every other metric is a
diagnostic that `hvcu report` computes from the sample logs (hvcu_tasks.results.diagnostics)."""


_FROM_RESPONSE = "\0parse the response"
"""Default of `Outcome.pred_official`: the authors' rule applied to `response` when the outcome is built."""


def metric_names(aspects: Sequence[str]) -> list[str]:
    """Return every metric of a family with these aspects, in table order (what `TaskScores` names)."""
    return list(score_task(()).as_metrics(aspects))


def table_metric_names(names: Sequence[str]) -> list[str]:
    """Return the names among `names` a task reports to lmms-eval (TABLE_METRICS), in their order."""
    return [n for n in names if n in TABLE_METRICS]


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


def pred_share_metric(key: str) -> str:
    """Return the name of the share (percent of parsed replies) of replies choosing this option key."""
    return f"pred_share_{key}"


def gold_share_metric(key: str) -> str:
    """Return the name of the share (percent of the replies with a parsed letter) whose gold answer is this key."""
    return f"gold_share_{key}"


POSITION_BIAS_METRIC = "position_bias"
"""Total variation distance (percent) between the parsed letters' distribution and their questions' gold letters'."""


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
    return PositionScores({k: _pct(v, n) for k, v in preds.items()}, {k: _pct(v, n) for k, v in golds.items()}, bias)


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
        after_wrong[name] = _pct(sum(not c[level].correct for c in wrong_before), len(wrong_before))
        after_right[name] = _pct(sum(not c[level].correct for c in right_before), len(right_before))
    return PropagationScores(after_wrong, after_right)


def _no_positions() -> PositionScores:
    """Position scores of no outcome at all (every value NA)."""
    return score_positions(())


def _no_propagation() -> PropagationScores:
    """Propagation scores of no chain at all (every value NA)."""
    return error_propagation(())


@dataclass
class TaskScores:
    """Everything one family task reports: the scores under our rule and the authors', and the failed requests."""

    ours: FamilyScores
    official: FamilyScores
    n_failed_requests: int = 0
    position: PositionScores = field(default_factory=_no_positions)
    """Answer-position bias of every reply (our parse); NA when not computed (e.g. the human baseline)."""
    propagation: PropagationScores = field(default_factory=_no_propagation)
    """Error propagation between consecutive levels (our parse); NA when not computed."""

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
            **self.position.as_metrics(),
            **self.propagation.as_metrics(),
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
        position=score_positions(outcomes),
        propagation=error_propagation(chains(outcomes)[0].values()),
    )


def family_metrics(outcomes: Sequence[Outcome], aspects: Sequence[str]) -> dict[str, float | int]:
    """Return every metric of `metric_names(aspects)` for these outcomes."""
    return score_task(outcomes).as_metrics(aspects)


# --- Circular evaluation (MMBench's CircularEval) -------------------------------------------------------

ROTATIONS = len(OPTION_KEYS)
"""Rotations of a level's options in circular evaluation: one per option key (4)."""

PLAIN_PREFIX = "plain_"
"""Prefix of a circular task's accuracy counting every rotated question on its own (no circular rule)."""


@dataclass
class CircularScores:
    """Everything one family's circular task reports, in percent unless a count; NA where nothing was measured."""

    acc: dict[str, float]
    """Per level: levels right in every rotation / levels asked in every rotation (our parse)."""
    acc_full: float
    """Chains whose three levels are all circular-right / chains with every rotation of every level asked."""
    acc_official: dict[str, float]
    acc_full_official: float
    plain_acc: dict[str, float]
    """Per level: rotated questions right / rotated questions asked, each counted on its own."""
    invalid: dict[str, float]
    n_chains: int
    n_incomplete: int
    n_failed_requests: int
    position: PositionScores

    def as_metrics(self) -> dict[str, float | int]:
        """Return every circular metric by name, in table order (the one place these names are made)."""
        return {
            **{acc_metric(n): v for n, v in self.acc.items()},
            FULL_METRIC: self.acc_full,
            **{acc_metric(n) + OFFICIAL_SUFFIX: v for n, v in self.acc_official.items()},
            OFFICIAL_FULL_METRIC: self.acc_full_official,
            **{PLAIN_PREFIX + acc_metric(n): v for n, v in self.plain_acc.items()},
            **{invalid_metric(n): v for n, v in self.invalid.items()},
            "n_chains": self.n_chains,
            "n_incomplete": self.n_incomplete,
            "n_failed_requests": self.n_failed_requests,
            **self.position.as_metrics(),
        }


def group_rotations(rotated: Iterable[tuple[int, Outcome]]) -> dict[tuple[str, str], dict[int, dict[int, Outcome]]]:
    """Group (rotation, outcome) pairs by (family, sample id), level and rotation; refuse a repeat or a bad rotation."""
    grouped: dict[tuple[str, str], dict[int, dict[int, Outcome]]] = defaultdict(lambda: defaultdict(dict))
    for rotation, o in rotated:
        if rotation not in range(ROTATIONS):
            raise ValueError(
                f"rotation {rotation!r} of sample {o.sample_id!r} level {o.level}: expected 0-{ROTATIONS - 1}"
            )
        per_level = grouped[(o.family, o.sample_id)][o.level]
        if rotation in per_level:
            raise ValueError(f"duplicate outcome for sample {o.sample_id!r} level {o.level} rotation {rotation}")
        per_level[rotation] = o
    return {key: dict(levels) for key, levels in grouped.items()}


def _circular_right(rotations: dict[int, Outcome], official: bool) -> bool:
    """Whether every rotation of one level was answered right (under the authors' rule when `official`)."""
    return all(o.correct_official if official else o.correct for o in rotations.values())


def score_circular(rotated: Sequence[tuple[int, Outcome]]) -> CircularScores:
    """Score circular evaluation: a level counts only when all its rotations are right, a chain when all levels are."""
    grouped = group_rotations(rotated)
    outcomes = [o for _rotation, o in rotated]
    names = [LEVEL_NAMES[lv] for lv in LEVELS]
    complete_levels: dict[str, list[dict[int, Outcome]]] = {n: [] for n in names}
    n_chains = 0
    full = {False: 0, True: 0}
    for levels in grouped.values():
        done = {lv: r for lv, r in levels.items() if len(r) == ROTATIONS}
        for lv, r in done.items():
            complete_levels[LEVEL_NAMES[lv]].append(r)
        if set(done) == set(LEVELS):
            n_chains += 1
            for official in (False, True):
                full[official] += all(_circular_right(r, official) for r in done.values())
    asked = {n: [o for o in outcomes if LEVEL_NAMES[o.level] == n] for n in names}
    return CircularScores(
        acc={n: _pct(sum(_circular_right(r, False) for r in rs), len(rs)) for n, rs in complete_levels.items()},
        acc_full=_pct(full[False], n_chains),
        acc_official={n: _pct(sum(_circular_right(r, True) for r in rs), len(rs)) for n, rs in complete_levels.items()},
        acc_full_official=_pct(full[True], n_chains),
        plain_acc={n: _pct(sum(o.correct for o in os_), len(os_)) for n, os_ in asked.items()},
        invalid={n: _pct(sum(o.invalid for o in os_), len(os_)) for n, os_ in asked.items()},
        n_chains=n_chains,
        n_incomplete=len(grouped) - n_chains,
        n_failed_requests=sum(o.failed for o in outcomes),
        position=score_positions(outcomes),
    )


def circular_metric_names() -> list[str]:
    """Return every metric a circular family task reports, in table order (what `CircularScores` names)."""
    return list(score_circular(()).as_metrics())
