"""The interval methods behind `hvcu report`: seeded bootstrap over samples, binomial intervals, paired tests,
rank ranges and the smallest difference the benchmark can detect.

A resample is a set of sample indices per family (the Score is the mean of the families' Acc_full, so each
family is resampled within itself). Its random stream is seeded by the seed and a key naming the samples (their
ids and the data fingerprint), so every run on the same samples is resampled with the same indices: differences
between them are paired, and adding a model to a board never changes another model's draws.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

ITERATIONS = 2000
SEED = 0
LEVEL = 0.95
POWER = 0.8
"""The power at which the detectable difference is quoted (with a two-sided test at 1 - LEVEL)."""


@dataclass(frozen=True)
class Resampling:
    """How many bootstrap resamples every interval of a report draws, and their seed (`--resamples`, `--seed`)."""

    resamples: int = ITERATIONS
    seed: int = SEED


DEFAULT_RESAMPLING = Resampling()


def stream(seed: int, key: str) -> np.random.Generator:
    """Return the random stream of one resampling frame: the seed and a stable hash of the frame's key."""
    digest = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")
    return np.random.default_rng([seed, digest])


def frame_key(ids: Mapping[str, Sequence[str]], fingerprint: str = "") -> str:
    """Return the key of the samples a run answered: each family's sorted sample ids and the data fingerprint."""
    text = "\n".join(f"{family}:{','.join(sorted(map(str, ids[family])))}" for family in sorted(ids))
    return hashlib.sha256(f"{fingerprint}\n{text}".encode()).hexdigest()


def resample_indices(
    sizes: Mapping[str, int], key: str, iterations: int = ITERATIONS, seed: int = SEED
) -> dict[str, np.ndarray]:
    """Return `iterations` bootstrap resamples of each family's sample indices (rows), seeded by `seed` and `key`."""
    rng = stream(seed, key)
    return {family: rng.integers(0, sizes[family], size=(iterations, sizes[family])) for family in sorted(sizes)}


def score_draws(verdicts: Mapping[str, Sequence[bool]], indices: Mapping[str, np.ndarray]) -> np.ndarray:
    """Return the Score (percent) of each resample: the mean over families of the resampled Acc_full."""
    if not verdicts:
        raise ValueError("resampling a Score needs at least one family")
    per_family = []
    for family in sorted(verdicts):
        values = np.asarray(verdicts[family], dtype=float)
        if values.size == 0:
            raise ValueError(f"{family}: no verdict to resample")
        per_family.append(values[indices[family]].mean(axis=1))
    return np.mean(per_family, axis=0) * 100


def binomial_draws(
    acc: Mapping[str, float], sizes: Mapping[str, int], key: str, iterations: int = ITERATIONS, seed: int = SEED
) -> np.ndarray:
    """Return Score draws (percent) of a model known only by its families' Acc_full (percent) and sizes.

    Each family's correct count is drawn from Binomial(size, Acc_full): the parametric bootstrap of a row without
    sample logs, independent of every other model's draws.
    """
    rng = stream(seed, key)
    columns = []
    for family in sorted(acc):
        n = sizes[family]
        columns.append(rng.binomial(n, acc[family] / 100, size=iterations) / n)
    return np.mean(columns, axis=0) * 100


def percentile_interval(draws: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """Return the central `level` percentile interval of a set of draws."""
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def two_sided_p(draws: np.ndarray) -> float:
    """Return the bootstrap two-sided p-value of 'the difference is 0': twice the smaller tail at 0, at most 1."""
    return float(min(1.0, 2 * min((draws <= 0).mean(), (draws >= 0).mean())))


def wald_score_interval(
    acc: Mapping[str, float], sizes: Mapping[str, int], level: float = LEVEL
) -> tuple[float, float]:
    """Return the binomial (Wald) interval of a mean of independent family accuracies (percent), clipped to 0-100.

    Var(Score) = sum_f p_f (1 - p_f) / n_f / k^2 for k families of n_f samples at accuracy p_f.
    """
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    k = len(acc)
    variance = sum((p / 100) * (1 - p / 100) / sizes[f] for f, p in acc.items()) / k**2
    score = sum(acc.values()) / k
    half = z * variance**0.5 * 100
    return max(0.0, score - half), min(100.0, score + half)


def detectable_difference(
    sizes: Mapping[str, int], variance_per_sample: Mapping[str, float], level: float = LEVEL, power: float = POWER
) -> float:
    """Return the smallest true Score difference (points) a two-sided test at 1 - `level` finds with `power`.

    `variance_per_sample`: per family, the variance of one sample's difference of verdicts (2 p (1 - p) for two
    independent models at accuracy p; the share of samples where the two disagree for a paired comparison).
    """
    normal = NormalDist()
    z = normal.inv_cdf(1 - (1 - level) / 2) + normal.inv_cdf(power)
    k = len(sizes)
    se = (sum(variance_per_sample[f] / sizes[f] for f in sizes) / k**2) ** 0.5
    return z * se * 100


def rank_ranges(draws: np.ndarray, level: float = LEVEL) -> list[tuple[int, int]]:
    """Return each column's best and worst plausible rank (1 = best) over the rows of a resamples x models matrix.

    In each resample a model's rank is 1 + the number of models scoring strictly higher (ties share a rank); its
    range is the central `level` share of those ranks (lower and upper quantiles rounded outwards).
    """
    if draws.ndim != 2 or draws.shape[1] == 0:
        raise ValueError("rank ranges need a resamples x models matrix with at least one model")
    ranks = 1 + (draws[:, None, :] > draws[:, :, None]).sum(axis=2)
    tail = (1 - level) / 2
    low = np.quantile(ranks, tail, axis=0, method="lower")
    high = np.quantile(ranks, 1 - tail, axis=0, method="higher")
    return [(int(a), int(b)) for a, b in zip(low, high, strict=True)]


def rank_groups(order: Sequence[int], differs: Callable[[int, int], bool]) -> list[int]:
    """Return a group number (from 1) per model of `order` (best first): a group's first model leads it, and each
    next model joins the current group unless it is significantly worse than that leader (`differs`)."""
    groups: list[int] = []
    leader = None
    for model in order:
        if leader is None or differs(leader, model):
            leader = model
            groups.append(len(set(groups)) + 1)
        else:
            groups.append(groups[-1])
    return groups


def bootstrap_ci(
    correct: Mapping[str, bool], iterations: int = ITERATIONS, seed: int = SEED, fingerprint: str = ""
) -> tuple[float, float]:
    """Return the 95% percentile bootstrap interval of the accuracy (percent) of sample id -> verdict."""
    if not correct:
        raise ValueError("bootstrap of an empty sample")
    return score_ci({"": correct}, iterations, seed, fingerprint)


def score_ci(
    per_family: Mapping[str, Mapping[str, bool]], iterations: int = ITERATIONS, seed: int = SEED, fingerprint: str = ""
) -> tuple[float, float]:
    """Return the 95% bootstrap interval of the Score (mean of the families' Acc_full), resampling each family."""
    ids = {f: sorted(v) for f, v in per_family.items()}
    indices = resample_indices({f: len(v) for f, v in ids.items()}, frame_key(ids, fingerprint), iterations, seed)
    return percentile_interval(score_draws({f: [per_family[f][s] for s in ids[f]] for f in ids}, indices))


@dataclass(frozen=True)
class PairedResult:
    """A paired comparison of B against A on the same samples."""

    n: int
    a_only: int
    b_only: int
    p_value: float


def mcnemar(a: Mapping[str, bool], b: Mapping[str, bool]) -> PairedResult:
    """Exact McNemar test on the chains both models answered: who got which sample right alone."""
    from scipy.stats import binomtest

    common = sorted(set(a) & set(b))
    if not common:
        raise ValueError("the two models share no sample: a paired test needs the same samples")
    a_only = sum(a[s] and not b[s] for s in common)
    b_only = sum(b[s] and not a[s] for s in common)
    discordant = a_only + b_only
    p = 1.0 if discordant == 0 else float(binomtest(a_only, discordant, 0.5).pvalue)
    return PairedResult(len(common), a_only, b_only, p)


def paired_score_delta(
    a: Mapping[str, Mapping[str, bool]],
    b: Mapping[str, Mapping[str, bool]],
    iterations: int = ITERATIONS,
    seed: int = SEED,
) -> tuple[float, float, float]:
    """Return the paired-bootstrap 95% interval of Score(B) - Score(A) on their common samples, and its p-value."""
    ids = {f: sorted(set(a[f]) & set(b[f])) for f in sorted(set(a) & set(b))}
    if not ids or not all(ids.values()):
        raise ValueError("the two models share no sample of a family: a paired test needs the same samples")
    indices = resample_indices({f: len(v) for f, v in ids.items()}, frame_key(ids), iterations, seed)
    delta = score_draws({f: [b[f][s] for s in ids[f]] for f in ids}, indices) - score_draws(
        {f: [a[f][s] for s in ids[f]] for f in ids}, indices
    )
    low, high = percentile_interval(delta)
    return low, high, two_sided_p(delta)
