"""The paper's metrics over per-level outcomes: level accuracy, full-chain accuracy, error attribution.

A ratio with an empty denominator (a level never asked, no complete chain, no failed chain) is NA, a NaN
meaning "not available", never 0; the Overall Score is NA when any family's full-chain accuracy is.

Every outcome is read under two answer-parsing rules: ours (`pred`, `hvcu_tasks.core.parsing`) and the
authors' (`pred_official`, `hvcu_tasks.core.official_parsing`), which gives the paper-comparable `*_official`
accuracies. What a task reports to lmms-eval is TABLE_METRICS (`score_table`, `score_circular`); the diagnostics
`hvcu report` computes from the sample logs are named and scored in `hvcu_tasks.results.scores`.
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
    """Return the name of a level's accuracy, numbered so lmms-eval's sorted rows follow the chain (acc_l1_perc)."""
    (level,) = [lv for lv, name in LEVEL_NAMES.items() if name == level_name]
    return f"acc_l{level}_{level_name}"


LEVEL_ACC_METRICS = tuple(acc_metric(n) for n in LEVEL_NAMES.values())
"""acc_l1_perc, acc_l2_bridge, acc_l3_conn."""
ACCURACY_METRICS = (*LEVEL_ACC_METRICS, FULL_METRIC)
"""The accuracies reported under both parsing rules."""
OFFICIAL_METRICS = tuple(m + OFFICIAL_SUFFIX for m in ACCURACY_METRICS)
"""acc_l1_perc_official, acc_l2_bridge_official, acc_l3_conn_official, acc_full_official."""
COUNT_METRICS = ("n_chains", "n_incomplete", "n_failed_requests")
"""Chains scored, chains missing a level (a partial run) and requests that got no usable reply."""
TABLE_METRICS = (*ACCURACY_METRICS, *OFFICIAL_METRICS, *COUNT_METRICS)
"""What a family task reports to lmms-eval (the rows of its printed table and results file): the paper's
accuracies under both rules and the counts that tell a complete run from a partial one. Every other metric is a
diagnostic that `hvcu report` computes from the sample logs (hvcu_tasks.results.scores, .diagnostics)."""


_FROM_RESPONSE = "\0parse the response"
"""Default of `Outcome.pred_official`: the authors' rule applied to `response` when the outcome is built."""


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


def percent(num: int, den: int) -> float:
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
        acc={k: percent(right[k], asked[k]) for k in asked},
        invalid={k: percent(bad[k], asked[k]) for k in asked},
        asked=asked,
        acc_full=percent(full_right, len(complete)),
        n_samples=len(complete),
        n_incomplete=n_incomplete,
        error_counts=errors,
        error_share={k: percent(v, failed) for k, v in errors.items()},
        aspect_acc_full={a: percent(aspect_right[a], n) for a, n in sorted(aspect_total.items())},
        aspect_n=dict(sorted(aspect_total.items())),
    )


def overall_score(acc_full_by_family: Sequence[float]) -> float:
    """Return the Overall Score: the unweighted mean of the families' full-chain accuracies, 2 decimals (or NA)."""
    if not acc_full_by_family:
        raise ValueError("the Overall Score needs at least one family's full-chain accuracy")
    if any(is_na(v) for v in acc_full_by_family):
        return NA
    return round(sum(acc_full_by_family) / len(acc_full_by_family), 2)


def reported(ours: FamilyScores, official: FamilyScores, n_failed_requests: int) -> dict[str, float | int]:
    """Return what a family task reports to lmms-eval (TABLE_METRICS, in order) from its scores under both rules."""
    accuracies = {**ours.accuracies(), **{n + OFFICIAL_SUFFIX: v for n, v in official.accuracies().items()}}
    counts = {"n_chains": ours.n_samples, "n_incomplete": ours.n_incomplete, "n_failed_requests": n_failed_requests}
    return {**accuracies, **counts}


def score_table(outcomes: Sequence[Outcome]) -> dict[str, float | int]:
    """Score one family task's outcomes under both parsing rules into what it reports to lmms-eval (TABLE_METRICS)."""
    official = score_family([o.under_official_rule() for o in outcomes])
    return reported(score_family(outcomes), official, sum(o.failed for o in outcomes))


# --- Circular evaluation (MMBench's CircularEval) -------------------------------------------------------

ROTATIONS = len(OPTION_KEYS)
"""Rotations of a level's options in circular evaluation: one per option key (4)."""


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


def score_circular(rotated: Sequence[tuple[int, Outcome]]) -> dict[str, float | int]:
    """Score circular evaluation (TABLE_METRICS): a level counts only when all its rotations are right, a chain
    when all its levels are; a level not asked in every rotation is left out, a chain missing one is incomplete."""
    grouped = group_rotations(rotated)
    done = [{lv: r for lv, r in levels.items() if len(r) == ROTATIONS} for levels in grouped.values()]
    whole = [d for d in done if set(d) == set(LEVELS)]
    metrics: dict[str, float | int] = {}
    for official, suffix in ((False, ""), (True, OFFICIAL_SUFFIX)):
        for lv in LEVELS:
            asked = [d[lv] for d in done if lv in d]
            right = sum(_circular_right(r, official) for r in asked)
            metrics[acc_metric(LEVEL_NAMES[lv]) + suffix] = percent(right, len(asked))
        right = sum(all(_circular_right(r, official) for r in d.values()) for d in whole)
        metrics[FULL_METRIC + suffix] = percent(right, len(whole))
    counts = {"n_chains": len(whole), "n_incomplete": len(grouped) - len(whole)}
    return {**metrics, **counts, "n_failed_requests": sum(o.failed for _rotation, o in rotated)}
