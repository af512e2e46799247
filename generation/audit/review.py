"""Judge one audit round from its verdicts: per-question agreement, per-item majorities, and the flags.

Flagging rule: an item passes a question when at least `threshold` (default 80%) of its annotators
answered yes. It is flagged when any of its four questions (L1, L2, L3 supported; chain coherent)
does not pass, either because most annotators said no ("majority says no") or because neither
answer reached the threshold ("no clear majority"). Items that pass all four are accepted without
discussion; flagged items go to the team, who keep, discard or send them to the next round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from generation.audit.agreement import count_matrix, fleiss_kappa, krippendorff_alpha_nominal, observed_agreement
from generation.audit.verdicts import QUESTIONS, ItemKey, Verdict

DEFAULT_THRESHOLD = 0.8
DEFAULT_MIN_ANNOTATORS = 5
_DIGITS = 6  # floats in stats.json are rounded so the file is byte-stable


def check_threshold(threshold: float) -> float:
    """Return the agreement threshold if it is a share in (0.5, 1], else raise ValueError."""
    if not 0.5 < threshold <= 1:
        raise ValueError(f"threshold {threshold}: must be a share above 0.5 and at most 1 (e.g. 0.8)")
    return threshold


def rule_text(threshold: float) -> str:
    """Describe the flagging rule in one sentence, for stats.json and the CLI."""
    pct = f"{threshold:.0%}"
    return (
        f"an item is accepted when at least {pct} of its annotators answered yes to every question "
        f"({', '.join(QUESTIONS)}); otherwise it is flagged for the team: 'majority says no' when most "
        f"answered no, 'no clear majority' when neither answer reached {pct}"
    )


@dataclass(frozen=True)
class ItemReview:
    """The verdicts on one item summed up: yes counts, majority shares, comments and why it is flagged."""

    family: str
    id: str
    raters: int
    yes: Mapping[str, int]
    reasons: tuple[str, ...]
    comments: tuple[tuple[str, str], ...]

    @property
    def key(self) -> ItemKey:
        """The item reviewed."""
        return (self.family, self.id)

    @property
    def flagged(self) -> bool:
        """Whether the item needs a team decision."""
        return bool(self.reasons)

    def majority_share(self, question: str) -> float:
        """Share of the annotators in the majority answer of one question."""
        yes = self.yes[question]
        return max(yes, self.raters - yes) / self.raters


def review_item(key: ItemKey, verdicts: Sequence[Verdict], threshold: float) -> ItemReview:
    """Apply the flagging rule to the verdicts on one item."""
    if not verdicts:
        raise ValueError(f"item {key[0]}/{key[1]} has no verdicts")
    n = len(verdicts)
    needed = Fraction(repr(threshold)) * n  # exact: 0.6 * 5 is 3, not 3.0000000000000004
    yes = {q: sum(v.vote(q) for v in verdicts) for q in QUESTIONS}
    reasons = []
    for q in QUESTIONS:
        if yes[q] >= needed:
            continue
        if n - yes[q] > yes[q]:
            reasons.append(f"{q}: majority says no ({n - yes[q]}/{n} no)")
        else:
            reasons.append(f"{q}: no clear majority ({yes[q]}/{n} yes, below {threshold:.0%})")
    comments = tuple((v.annotator, v.comment) for v in verdicts if v.comment.strip())
    return ItemReview(key[0], key[1], n, yes, tuple(reasons), comments)


def _rounded(value: float | None) -> float | None:
    """Round a statistic for stable JSON; keep None (undefined) as is."""
    return None if value is None else round(value, _DIGITS)


def agreement(units: Sequence[Sequence[bool]]) -> dict[str, float | None]:
    """Fleiss' kappa, Krippendorff's alpha, observed pairwise agreement and yes share of yes/no units."""
    counts = count_matrix(units, (True, False))
    ratings = sum(sum(row) for row in counts)
    equal = len({sum(row) for row in counts}) <= 1
    return {
        "fleiss_kappa": _rounded(fleiss_kappa(counts)) if equal else None,
        "krippendorff_alpha": _rounded(krippendorff_alpha_nominal(units)),
        "observed_agreement": _rounded(observed_agreement(counts)) if equal else None,
        "yes_share": _rounded(sum(row[0] for row in counts) / ratings) if ratings else None,
    }


def round_statistics(
    round_no: int,
    candidates: Sequence[ItemKey],
    verdicts: Mapping[str, Sequence[Verdict]],
    threshold: float = DEFAULT_THRESHOLD,
    min_annotators: int = DEFAULT_MIN_ANNOTATORS,
) -> tuple[dict, list[ItemReview]]:
    """Return the JSON-ready statistics of a round and the per-item reviews, candidates in order."""
    check_threshold(threshold)
    if len(verdicts) < min_annotators:
        raise ValueError(
            f"round {round_no} has verdicts from {len(verdicts)} annotator(s) {sorted(verdicts)}; "
            f"need at least {min_annotators} (import the missing verdict files first)"
        )
    by_item: dict[ItemKey, list[Verdict]] = {k: [] for k in candidates}
    for name in sorted(verdicts):
        for v in verdicts[name]:
            if v.key not in by_item:
                raise ValueError(f"annotator {name}: verdict on {v.family}/{v.id}, not a candidate of round {round_no}")
            by_item[v.key].append(v)
    reviews = [review_item(k, by_item[k], threshold) for k in candidates]
    units = {q: [[v.vote(q) for v in by_item[k]] for k in candidates] for q in QUESTIONS}
    pooled = [unit for q in QUESTIONS for unit in units[q]]
    stats = {
        "round": round_no,
        "annotators": sorted(verdicts),
        "n_annotators": len(verdicts),
        "n_items": len(candidates),
        "threshold": threshold,
        "rule": rule_text(threshold),
        "agreement": {**{q: agreement(units[q]) for q in QUESTIONS}, "pooled": agreement(pooled)},
        "n_flagged": sum(r.flagged for r in reviews),
        "flagged": [{"family": r.family, "id": r.id, "reasons": list(r.reasons)} for r in reviews if r.flagged],
        "items": [
            {
                "family": r.family,
                "id": r.id,
                "raters": r.raters,
                "yes": dict(r.yes),
                "majority_share": {q: _rounded(r.majority_share(q)) for q in QUESTIONS},
                "flagged": r.flagged,
            }
            for r in reviews
        ],
    }
    return stats, reviews
