"""Uncertainty the paper does not report: bootstrap intervals for Acc_full and the Score, paired tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest

ITERATIONS = 2000
SEED = 0


def bootstrap_ci(correct: Sequence[bool], iterations: int = ITERATIONS, seed: int = SEED) -> tuple[float, float]:
    """Return the 95% percentile bootstrap interval of the accuracy (percent) of a list of verdicts."""
    values = np.asarray(correct, dtype=float)
    if values.size == 0:
        raise ValueError("bootstrap of an empty sample")
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(iterations, values.size))].mean(axis=1) * 100
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def _family_draws(per_family: Mapping[str, Sequence[bool]], iterations: int, seed: int) -> np.ndarray:
    """Return bootstrap Acc_full draws, one column per family, resampling within each family."""
    rng = np.random.default_rng(seed)
    columns = []
    for family in sorted(per_family):
        values = np.asarray(per_family[family], dtype=float)
        columns.append(values[rng.integers(0, values.size, size=(iterations, values.size))].mean(axis=1) * 100)
    return np.stack(columns, axis=1)


def score_ci(
    per_family: Mapping[str, Sequence[bool]], iterations: int = ITERATIONS, seed: int = SEED
) -> tuple[float, float]:
    """Return the 95% bootstrap interval of the Score (mean of the families' Acc_full)."""
    draws = _family_draws(per_family, iterations, seed).mean(axis=1)
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)


@dataclass(frozen=True)
class PairedResult:
    """A paired comparison of B against A on the same samples."""

    n: int
    a_only: int
    b_only: int
    p_value: float


def mcnemar(a: Mapping[str, bool], b: Mapping[str, bool]) -> PairedResult:
    """Exact McNemar test on the chains both models answered: who got which sample right alone."""
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
    """Return the paired-bootstrap 95% interval of Score(B) - Score(A) and its two-sided p-value."""
    rng = np.random.default_rng(seed)
    deltas = np.zeros(iterations)
    for family in sorted(set(a) & set(b)):
        common = sorted(set(a[family]) & set(b[family]))
        diff = np.asarray([float(b[family][s]) - float(a[family][s]) for s in common])
        idx = rng.integers(0, diff.size, size=(iterations, diff.size))
        deltas += diff[idx].mean(axis=1) * 100
    deltas /= len(set(a) & set(b))
    low, high = np.percentile(deltas, [2.5, 97.5])
    share = min((deltas <= 0).mean(), (deltas >= 0).mean())
    return float(low), float(high), float(min(1.0, 2 * share))
