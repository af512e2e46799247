"""The leaderboard's uncertainty: each model's Score draws, its intervals, rank range and rank group, the paired
comparison of every two runs on the same samples, and the smallest difference the board can detect.

A run with sample logs is resampled over its samples (a paired bootstrap: runs on the same samples share the
resample indices); a model known only by its families' Acc_full (a [paper] row, a run without logs) is drawn from
binomials of its family sizes, independently of everyone else. Ranks and groups use the draws of every model
together, so a difference between two logged runs is paired and one involving a binomial row is not.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from hvcu_tasks.report import stats

BOOTSTRAP = "paired bootstrap"
BINOMIAL = "binomial"


@dataclass(frozen=True)
class Verdicts:
    """One setting's full-chain verdicts of a run: per family, sample id -> right, on data with a fingerprint."""

    chains: Mapping[str, Mapping[str, bool]]
    fingerprint: str = ""

    def ids(self) -> dict[str, list[str]]:
        """Return each family's sample ids, sorted (the order the verdicts are resampled in)."""
        return {family: sorted(chains) for family, chains in self.chains.items()}

    def frame(self) -> str:
        """Return the key of the samples these verdicts are on (runs with the same key are paired)."""
        return stats.frame_key(self.ids(), self.fingerprint)

    def values(self) -> dict[str, list[bool]]:
        """Return each family's verdicts in sample-id order."""
        return {family: [self.chains[family][s] for s in ids] for family, ids in self.ids().items()}


@dataclass(frozen=True)
class Contender:
    """One model on the board as the uncertainty sees it: a key, whether it ranks, and what can be resampled."""

    key: str
    rankable: bool
    base: Verdicts | None = None
    context: Verdicts | None = None
    acc_full: Mapping[str, float] | None = None
    """Per family, the base Acc_full (percent): drawn from binomials when `base` is absent."""
    sizes: Mapping[str, int] | None = None
    published: bool = False
    """A row published without sample logs (the paper's): every run is compared with it, unpaired."""


@dataclass
class Assessment:
    """What the board shows of one model's uncertainty (percent; None where it cannot be said)."""

    method: str | None = None
    score: tuple[float, float] | None = None
    context: tuple[float, float] | None = None
    gain: tuple[float, float] | None = None
    rank_range: tuple[int, int] | None = None
    rank_group: int | None = None


@dataclass(frozen=True)
class Pair:
    """Two runs on the same samples: Score(a) - Score(b), its paired 95% interval and p-value."""

    a: str
    b: str
    delta: float
    interval: tuple[float, float]
    p_value: float
    paired: bool = True
    """Whether both were resampled over the same samples (else independent draws: a published row's binomials)."""

    @property
    def significant(self) -> bool:
        """Whether the interval excludes 0."""
        return self.interval[0] > 0 or self.interval[1] < 0


@dataclass
class Uncertainty:
    """The board's uncertainty: per contender key its assessment, the pairs, and the detectable differences."""

    assessments: dict[str, Assessment] = field(default_factory=dict)
    pairs: list[Pair] = field(default_factory=list)
    against_published: list[Pair] = field(default_factory=list)
    """Each ranked run against each published row: Score(run) - Score(row), unpaired."""
    detectable_independent: float | None = None
    """The smallest Score difference two independent models at 50% Acc_full show at 80% power (α = 0.05)."""
    detectable_paired: float | None = None
    """The same for the paired runs here: the median over pairs of their disagreement."""
    unranked: list[str] = field(default_factory=list)
    """Rankable contenders with nothing to draw from (no logs, no family sizes): left out of the rank ranges."""
    resamples: int = stats.ITERATIONS
    seed: int = stats.SEED


def _complete(verdicts: Verdicts | None, families: Sequence[str]) -> bool:
    """Whether verdicts cover every family with at least one sample."""
    return verdicts is not None and set(verdicts.chains) == set(families) and all(verdicts.chains.values())


class _Draws:
    """Score draws per contender and setting, with one set of resample indices per frame."""

    def __init__(self, resamples: int, seed: int) -> None:
        self.resamples, self.seed = resamples, seed
        self._indices: dict[str, dict[str, np.ndarray]] = {}

    def of(self, verdicts: Verdicts) -> np.ndarray:
        """Return the bootstrap Score draws of one setting's verdicts."""
        frame = verdicts.frame()
        if frame not in self._indices:
            sizes = {f: len(ids) for f, ids in verdicts.ids().items()}
            self._indices[frame] = stats.resample_indices(sizes, frame, self.resamples, self.seed)
        return stats.score_draws(verdicts.values(), self._indices[frame])

    def binomial(self, contender: Contender) -> np.ndarray:
        """Return the binomial Score draws of a contender known by its families' Acc_full and sizes."""
        assert contender.acc_full is not None and contender.sizes is not None
        return stats.binomial_draws(contender.acc_full, contender.sizes, contender.key, self.resamples, self.seed)


def assess(
    contenders: Sequence[Contender],
    families: Sequence[str],
    benchmark_sizes: Mapping[str, int],
    resamples: int = stats.ITERATIONS,
    seed: int = stats.SEED,
) -> Uncertainty:
    """Return the board's uncertainty; `contenders` come best first (the board's order decides the rank groups)."""
    draws = _Draws(resamples, seed)
    out = Uncertainty(resamples=resamples, seed=seed)
    base: dict[str, np.ndarray] = {}
    for c in contenders:
        a = out.assessments.setdefault(c.key, Assessment())
        if _complete(c.base, families):
            assert c.base is not None
            base[c.key] = draws.of(c.base)
            a.method = BOOTSTRAP
            a.score = stats.percentile_interval(base[c.key])
            if _complete(c.context, families) and c.context is not None and c.context.frame() == c.base.frame():
                context = draws.of(c.context)
                a.context = stats.percentile_interval(context)
                a.gain = stats.percentile_interval(context - base[c.key])
        elif c.acc_full is not None and c.sizes is not None and set(c.acc_full) == set(families):
            base[c.key] = draws.binomial(c)
            a.method = BINOMIAL
            a.score = stats.wald_score_interval(c.acc_full, c.sizes)
    _rank(contenders, base, out)
    _pairs(contenders, base, families, out)
    _against_published(contenders, base, out)
    half = {f: 2 * 0.5 * 0.5 for f in benchmark_sizes}
    out.detectable_independent = stats.detectable_difference(benchmark_sizes, half)
    return out


def _rank(contenders: Sequence[Contender], base: Mapping[str, np.ndarray], out: Uncertainty) -> None:
    """Set the rank range and rank group of every rankable contender that has draws."""
    ranking = [c.key for c in contenders if c.rankable and c.key in base]
    out.unranked = [c.key for c in contenders if c.rankable and c.key not in base]
    if not ranking:
        return
    matrix = np.stack([base[k] for k in ranking], axis=1)
    for key, bounds in zip(ranking, stats.rank_ranges(matrix), strict=True):
        out.assessments[key].rank_range = bounds

    def differs(leader: str, other: str) -> bool:
        low, high = stats.percentile_interval(base[leader] - base[other])
        return low > 0 or high < 0

    for key, group in zip(ranking, stats.rank_groups(ranking, differs), strict=True):
        out.assessments[key].rank_group = group


def _pairs(
    contenders: Sequence[Contender], base: Mapping[str, np.ndarray], families: Sequence[str], out: Uncertainty
) -> None:
    """Compare every two logged runs on the same samples (paired), and quote their detectable difference."""
    logged = [c for c in contenders if out.assessments[c.key].method == BOOTSTRAP and c.base is not None]
    detectable = []
    for i, a in enumerate(logged):
        for b in logged[i + 1 :]:
            assert a.base is not None and b.base is not None
            if a.base.frame() != b.base.frame():
                continue
            delta = base[a.key] - base[b.key]
            point = _score(a.base) - _score(b.base)
            out.pairs.append(Pair(a.key, b.key, point, stats.percentile_interval(delta), stats.two_sided_p(delta)))
            va, vb = a.base.values(), b.base.values()
            disagree = {f: float(np.mean(np.asarray(va[f]) != np.asarray(vb[f]))) for f in families}
            sizes = {f: len(va[f]) for f in families}
            detectable.append(stats.detectable_difference(sizes, disagree))
    out.detectable_paired = statistics.median(detectable) if detectable else None


def _against_published(contenders: Sequence[Contender], base: Mapping[str, np.ndarray], out: Uncertainty) -> None:
    """Compare every ranked run that has draws with every published row that has them (independent: unpaired).

    Only a ranked run is compared: one on a smoke sample or a subset is not on the benchmark the rows were.
    """
    published = [c for c in contenders if c.published and c.key in base]
    for run in (c for c in contenders if not c.published and c.rankable and c.key in base):
        for row in published:
            delta = base[run.key] - base[row.key]
            point = _point(run, out.assessments[run.key].method) - _point(row, out.assessments[row.key].method)
            interval = stats.percentile_interval(delta)
            out.against_published.append(Pair(run.key, row.key, point, interval, stats.two_sided_p(delta), False))


def _point(contender: Contender, method: str | None) -> float:
    """Return a contender's Score (percent) as its draws see it: from its verdicts, or its families' Acc_full."""
    if method == BOOTSTRAP and contender.base is not None:
        return _score(contender.base)
    assert contender.acc_full is not None
    return statistics.fmean(contender.acc_full.values())


def _score(verdicts: Verdicts) -> float:
    """Return the Score (percent) of one setting's verdicts: the mean of the families' Acc_full."""
    return statistics.fmean(100 * sum(v) / len(v) for v in verdicts.values().values())
