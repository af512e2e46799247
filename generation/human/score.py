"""Score the human baseline: chains per virtual annotator, averaged (see the package docstring).

Virtual annotator k answers level L with the k-th member of L's group. Each virtual annotator's
outcomes are scored with `score_family` like a model's; the Human metrics are the means over virtual
annotators (errors_at_* summed and error_share_* pooled over them), the Overall Score the paper's
unweighted mean of the three families' averaged Acc_full.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from generation.human.answers import Answers
from generation.human.assign import Assignment, item_digest
from hvcu_tasks.core.families import ASPECTS, FAMILIES, LEVEL_NAMES, LEVELS
from hvcu_tasks.core.metrics import FULL_METRIC, FamilyScores, Outcome, overall_score, score_family
from hvcu_tasks.core.schema import Sample
from hvcu_tasks.results.scores import TaskScores

Metrics = dict[str, float | int | None]


@dataclass(frozen=True)
class VirtualAnnotator:
    """One complete set of chains: who answered each level, and its scores per family."""

    members: dict[str, str]
    acc_full: dict[str, float]
    overall: float | None


@dataclass(frozen=True)
class AnnotatorScore:
    """One real annotator's accuracy on their level, per family and over all their items (percent)."""

    annotator: str
    level: str
    answered: int
    blank: int
    acc: dict[str, float]
    acc_all: float


@dataclass(frozen=True)
class HumanScores:
    """The Human row: averaged metrics per family (lmms-eval metric names), the Score and the detail."""

    families: dict[str, Metrics]
    overall: float | None
    virtual: list[VirtualAnnotator]
    annotators: list[AnnotatorScore]

    def to_dict(self) -> dict:
        """Return a JSON-ready dict."""
        return asdict(self)


def match_bench(assignment: Assignment, samples: Sequence[Sample], bench: str) -> dict[tuple[str, str], Sample]:
    """Return the bench's sample for every assigned item, refusing a bench whose questions changed."""
    by_key = {(s.family, s.id): s for s in samples}
    out = {}
    for item in assignment.items:
        sample = by_key.get(item.key)
        if sample is None:
            raise ValueError(f"{bench}: id={item.id}: {item.family}: on the sheets but not in this bench")
        if item_digest(sample) != item.digest:
            raise ValueError(
                f"{bench}: id={item.id}: qa_levels: questions or options differ from those on the sheets "
                "(digest mismatch); score against the bench the sheets were made from"
            )
        out[item.key] = sample
    return out


def virtual_outcomes(
    assignment: Assignment, samples: Mapping[tuple[str, str], Sample], answers: Answers, members: Mapping[int, str]
) -> list[Outcome]:
    """Return the outcomes of one virtual annotator: level L of every item answered by `members[L]`."""
    out = []
    for item in assignment.items:
        for lv in samples[item.key].levels:
            pred = answers[members[lv.level]][item.key]
            out.append(Outcome(item.id, item.family, item.aspect, lv.level, lv.answer, pred, pred or ""))
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    """Return the mean, None when any value is None (an aspect no chain has)."""
    if not values or any(v is None for v in values):
        return None
    return sum(values) / len(values)  # type: ignore[arg-type]


def average_family(runs: Sequence[FamilyScores], family: str) -> Metrics:
    """Average one family's scores over virtual annotators, under the family task's metric names."""
    levels = list(LEVEL_NAMES.values())
    errors = {n: sum(r.error_counts[n] for r in runs) for n in levels}
    failed = sum(errors.values())
    aspects = ASPECTS[family]
    averaged = FamilyScores(
        acc={n: _mean([r.acc[n] for r in runs]) for n in levels},  # type: ignore[misc]
        invalid={n: _mean([r.invalid[n] for r in runs]) for n in levels},  # type: ignore[misc]
        asked=runs[0].asked,
        acc_full=_mean([r.acc_full for r in runs]),  # type: ignore[arg-type]
        n_samples=runs[0].n_samples,
        n_incomplete=max(r.n_incomplete for r in runs),
        error_counts=errors,
        error_share={n: 100.0 * errors[n] / failed if failed else 0.0 for n in levels},
        aspect_acc_full={a: _mean([r.aspect_acc_full.get(a) for r in runs]) for a in aspects},  # type: ignore[misc]
    )
    # a human picks a letter: the authors' rule reads it as ours does; every request got an answer
    return dict(TaskScores(ours=averaged, official=averaged, n_failed_requests=0).as_metrics(aspects))


def annotator_scores(
    assignment: Assignment, samples: Mapping[tuple[str, str], Sample], answers: Answers
) -> list[AnnotatorScore]:
    """Return every real annotator's accuracy on their own level, in group order."""
    out = []
    for level in LEVELS:
        for name in assignment.groups[level]:
            right: dict[str, int] = {}
            asked: dict[str, int] = {}
            for item in assignment.items:
                gold = next(lv.answer for lv in samples[item.key].levels if lv.level == level)
                asked[item.family] = asked.get(item.family, 0) + 1
                right[item.family] = right.get(item.family, 0) + (answers[name][item.key] == gold)
            blank = sum(answers[name][i.key] is None for i in assignment.items)
            out.append(
                AnnotatorScore(
                    annotator=name,
                    level=LEVEL_NAMES[level],
                    answered=len(assignment.items) - blank,
                    blank=blank,
                    acc={f: 100.0 * right[f] / asked[f] for f in FAMILIES if f in asked},
                    acc_all=100.0 * sum(right.values()) / sum(asked.values()),
                )
            )
    return out


def score_human(assignment: Assignment, samples: Mapping[tuple[str, str], Sample], answers: Answers) -> HumanScores:
    """Score every virtual annotator and average them into the Human row."""
    families = [f for f in FAMILIES if any(i.family == f for i in assignment.items)]
    per_family: dict[str, list[FamilyScores]] = {f: [] for f in families}
    virtual = []
    for members in assignment.virtual_annotators():
        outcomes = virtual_outcomes(assignment, samples, answers, members)
        scores = {f: score_family([o for o in outcomes if o.family == f]) for f in families}
        for f in families:
            per_family[f].append(scores[f])
        complete = len(families) == len(FAMILIES)
        virtual.append(
            VirtualAnnotator(
                members={LEVEL_NAMES[lv]: name for lv, name in members.items()},
                acc_full={f: s.acc_full for f, s in scores.items()},
                overall=overall_score([s.acc_full for s in scores.values()]) if complete else None,
            )
        )
    averaged = {f: average_family(per_family[f], f) for f in families}
    overall = overall_score([averaged[f][FULL_METRIC] for f in FAMILIES]) if len(families) == len(FAMILIES) else None
    return HumanScores(averaged, overall, virtual, annotator_scores(assignment, samples, answers))
