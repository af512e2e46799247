"""The leaderboard's uncertainty: each model's Score interval, every comparison of two models (adjusted together),
the rank ranges and letter groups read off those comparisons, and the smallest difference the board can detect.

A run with sample logs is known by its chain verdicts, a row without them (a [paper] row, a run without
--log_samples) by its families' correct counts. Two runs logged on the same samples are compared paired; any other
two rows unpaired. The comparisons of the ranked rows form one family adjusted by Holm's rule; the rank ranges and
letters come from its adjusted verdicts. Unranked runs on the same samples (smoke-sample runs, say) are compared
among themselves, one family per set of samples.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hvcu_tasks.report import stats

CHAINS = "chains"
"""An interval from a run's chain verdicts (its comparisons with runs on the same samples are paired)."""
COUNTS = "counts"
"""An interval from the families' accuracies alone (no sample logs: every comparison is unpaired)."""
BOARD_FAMILY = "ranked rows"


@dataclass(frozen=True)
class Verdicts:
    """One setting's full-chain verdicts of a run: per family, sample id -> right, on data with a fingerprint."""

    chains: Mapping[str, Mapping[str, bool]]
    fingerprint: str = ""

    def frame(self) -> tuple[str, tuple[tuple[str, tuple[str, ...]], ...]]:
        """Return what identifies the samples these verdicts are on (runs with the same frame are paired)."""
        return self.fingerprint, tuple((f, tuple(sorted(c))) for f, c in sorted(self.chains.items()))

    def right(self) -> dict[str, int]:
        """Return each family's number of chains right."""
        return {f: sum(map(bool, c.values())) for f, c in self.chains.items()}

    def sizes(self) -> dict[str, int]:
        """Return each family's number of chains."""
        return {f: len(c) for f, c in self.chains.items()}


@dataclass(frozen=True)
class Contender:
    """One model on the board as the uncertainty sees it: a key, whether it ranks, and what it is known by."""

    key: str
    rankable: bool
    base: Verdicts | None = None
    context: Verdicts | None = None
    acc_full: Mapping[str, float] | None = None
    """Per family, the base Acc_full (percent): its counts when `base` is absent."""
    sizes: Mapping[str, int] | None = None


@dataclass
class Assessment:
    """What the board shows of one model's uncertainty (percent; None where it cannot be said)."""

    method: str | None = None
    score: tuple[float, float] | None = None
    context: tuple[float, float] | None = None
    gain: tuple[float, float] | None = None
    rank_range: tuple[int, int] | None = None
    letters: str | None = None


@dataclass(frozen=True)
class Pair:
    """A comparison of two rows: Score(b) - Score(a), its 95% interval, raw and adjusted p-values."""

    a: str
    b: str
    delta: float
    interval: tuple[float, float]
    p_value: float
    p_adjusted: float
    paired: bool
    family: str
    """The family of comparisons the adjustment ran over (the ranked rows, or unranked runs on one sample set)."""
    family_size: int

    @property
    def significant(self) -> bool:
        """Whether the adjusted p-value is below 1 - LEVEL."""
        return self.p_adjusted < stats.ALPHA


@dataclass
class Uncertainty:
    """The board's uncertainty: per contender key its assessment, every comparison, and the detectable differences."""

    assessments: dict[str, Assessment] = field(default_factory=dict)
    pairs: list[Pair] = field(default_factory=list)
    detectable_independent: float | None = None
    """The smallest true Score difference two independent models at 50% Acc_full show at 80% power (α = 0.05)."""
    significant_independent: float | None = None
    """The smallest observed difference of two such models that is significant on its own (before adjustment)."""
    detectable_paired: float | None = None
    """The detectable difference of the paired runs here: the median over pairs of their disagreement."""
    unranked: list[str] = field(default_factory=list)
    """Rankable contenders with nothing to count (no logs, no family sizes): left out of the comparisons."""


@dataclass(frozen=True)
class _Known:
    """A contender's counts per family, and its verdicts when it has them."""

    right: dict[str, int]
    sizes: dict[str, int]
    verdicts: Verdicts | None


def _complete(verdicts: Verdicts | None, families: Sequence[str]) -> bool:
    """Whether verdicts cover every family with at least one sample."""
    return verdicts is not None and set(verdicts.chains) == set(families) and all(verdicts.chains.values())


def _known(c: Contender, families: Sequence[str]) -> _Known | None:
    """Return what a contender's base Score is known by, None when nothing can be counted."""
    if _complete(c.base, families):
        assert c.base is not None
        return _Known(c.base.right(), c.base.sizes(), c.base)
    if c.acc_full is not None and c.sizes is not None and set(c.acc_full) == set(families):
        right = {f: round(c.acc_full[f] / 100 * c.sizes[f]) for f in families}
        return _Known(right, {f: c.sizes[f] for f in families}, None)
    return None


def _compare(a: _Known, b: _Known) -> tuple[stats.Difference, bool]:
    """Return Score(b) - Score(a), paired when both are verdicts on the same samples."""
    if a.verdicts is not None and b.verdicts is not None and a.verdicts.frame() == b.verdicts.frame():
        return stats.paired_difference(a.verdicts.chains, b.verdicts.chains), True
    return stats.unpaired_difference(a.right, a.sizes, b.right, b.sizes), False


def assess(contenders: Sequence[Contender], families: Sequence[str], benchmark_sizes: Mapping[str, int]) -> Uncertainty:
    """Return the board's uncertainty; `contenders` come best first (the order of rank ranges and letters)."""
    out = Uncertainty()
    known: dict[str, _Known] = {}
    for c in contenders:
        a = out.assessments.setdefault(c.key, Assessment())
        k = _known(c, families)
        if k is None:
            continue
        known[c.key] = k
        a.method = CHAINS if k.verdicts is not None else COUNTS
        a.score = stats.score_interval(k.right, k.sizes)
        if _complete(c.context, families) and c.context is not None:
            a.context = stats.score_interval(c.context.right(), c.context.sizes())
            if k.verdicts is not None and c.context.frame() == k.verdicts.frame():
                a.gain = stats.paired_difference(k.verdicts.chains, c.context.chains).interval
    ranked = [c.key for c in contenders if c.rankable and c.key in known]
    out.unranked = [c.key for c in contenders if c.rankable and c.key not in known]
    out.pairs = _family(ranked, known, BOARD_FAMILY)
    frames: dict[object, list[str]] = {}
    for c in contenders:
        k = known.get(c.key)
        if not c.rankable and k is not None and k.verdicts is not None:
            frames.setdefault(k.verdicts.frame(), []).append(c.key)
    for n, keys in enumerate(frames.values(), start=1):
        out.pairs += _family(keys, known, f"unranked runs on sample set {n}")  # one run alone: no pair
    _ranks(ranked, out)
    half = {f: 2 * 0.5 * 0.5 for f in benchmark_sizes}
    out.detectable_independent = stats.detectable_difference(benchmark_sizes, half)
    out.significant_independent = stats.significant_difference(benchmark_sizes, half)
    out.detectable_paired = _detectable_paired(out.pairs, known)
    return out


def _family(keys: Sequence[str], known: Mapping[str, _Known], name: str) -> list[Pair]:
    """Compare every two of `keys` (best first: b above a) and adjust their p-values together by Holm's rule."""
    found = []
    for i, upper in enumerate(keys):
        for lower in keys[i + 1 :]:
            difference, paired = _compare(known[lower], known[upper])
            found.append((lower, upper, difference, paired))
    adjusted = stats.holm([d.p_value for _a, _b, d, _p in found])
    return [
        Pair(a, b, d.delta, d.interval, d.p_value, adj, paired, name, len(found))
        for (a, b, d, paired), adj in zip(found, adjusted, strict=True)
    ]


def _ranks(ranked: Sequence[str], out: Uncertainty) -> None:
    """Set each ranked row's rank range and letters from the adjusted comparisons of the ranked rows."""
    significant = {(p.a, p.b): p for p in out.pairs if p.family == BOARD_FAMILY and p.significant}

    def above(i: int, j: int) -> bool:
        pair = significant.get((ranked[j], ranked[i])) or significant.get((ranked[i], ranked[j]))
        if pair is None:
            return False
        higher = pair.b if pair.interval[0] > 0 else pair.a  # significant: the interval lies on one side of 0
        return higher == ranked[i]

    def differs(i: int, j: int) -> bool:
        return (ranked[i], ranked[j]) in significant or (ranked[j], ranked[i]) in significant

    ranges = stats.rank_ranges(len(ranked), above)
    for key, bounds, text in zip(ranked, ranges, stats.letters(len(ranked), differs), strict=True):
        out.assessments[key].rank_range = bounds
        out.assessments[key].letters = text


def _detectable_paired(pairs: Sequence[Pair], known: Mapping[str, _Known]) -> float | None:
    """Return the median detectable difference of the paired comparisons, None when there is none."""
    found = []
    for p in pairs:
        if not p.paired:
            continue
        va, vb = known[p.a].verdicts, known[p.b].verdicts
        assert va is not None and vb is not None
        disagree = {
            f: sum(va.chains[f][s] != vb.chains[f][s] for s in va.chains[f]) / len(va.chains[f]) for f in va.chains
        }
        found.append(stats.detectable_difference(va.sizes(), disagree))
    return statistics.median(found) if found else None
