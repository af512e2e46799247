"""The interval methods behind `hvcu report`, all computed from counts (no resampling, no seed).

- A Score (the mean of the families' Acc_full) gets the MOVER interval of its families' exact Clopper–Pearson
  intervals: never zero-width, conservative at small n and at shares of 0 or 1.
- A difference of two Scores gets an adjusted Wald interval and the z-test that inverts it (so the two never
  disagree about significance): Agresti–Caffo per family for two independent rows, Bonett–Price per family for two
  runs on the same samples (paired); the families' variances add up.
- Many comparisons on one board are adjusted together by Holm's step-down rule (familywise error at most 5%).
- Rank ranges and letter groups are read off the adjusted comparisons, so they agree with them on every pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

LEVEL = 0.95
ALPHA = 1 - LEVEL
POWER = 0.8
"""The power at which the detectable difference is quoted (with a two-sided test at 1 - LEVEL)."""
P_FLOOR = 1e-300
"""The smallest p-value stored: a smaller one (beyond float precision) is given as this upper bound."""
ADJUSTMENT = "Holm"


def z_value(level: float = LEVEL) -> float:
    """Return the two-sided normal quantile of a confidence level (1.959964 at 95%)."""
    return NormalDist().inv_cdf(1 - (1 - level) / 2)


def exact_interval(right: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Return the Clopper–Pearson interval (percent) of `right` successes in `n` trials (beta quantiles)."""
    from scipy.stats import beta

    if n < 1 or not 0 <= right <= n:
        raise ValueError(f"an exact interval needs 0 <= right <= n and n >= 1, got {right} of {n}")
    tail = (1 - level) / 2
    low = 0.0 if right == 0 else float(beta.ppf(tail, right, n - right + 1))
    high = 1.0 if right == n else float(beta.ppf(1 - tail, right + 1, n - right))
    return 100 * low, 100 * high


def _checked(right: Mapping[str, int], sizes: Mapping[str, int]) -> list[str]:
    """Return the families of a count set, refusing an empty one or one whose families disagree with its sizes."""
    if not right or set(right) != set(sizes):
        raise ValueError("a Score needs the same non-empty set of families in its counts and sizes")
    return sorted(right)


def score_of(right: Mapping[str, int], sizes: Mapping[str, int]) -> float:
    """Return the Score (percent) of per-family counts: the mean of the families' shares right."""
    families = _checked(right, sizes)
    return 100 * sum(right[f] / sizes[f] for f in families) / len(families)


def score_interval(right: Mapping[str, int], sizes: Mapping[str, int], level: float = LEVEL) -> tuple[float, float]:
    """Return the interval (percent) of a Score: the MOVER combination of its families' exact intervals.

    With shares p_f, exact bounds l_f, u_f and k families: Score ± sqrt(sum of (p_f - l_f)^2, resp. (u_f - p_f)^2)/k.
    """
    families = _checked(right, sizes)
    k = len(families)
    score = score_of(right, sizes)
    below, above = 0.0, 0.0
    for f in families:
        share = 100 * right[f] / sizes[f]
        low, high = exact_interval(right[f], sizes[f], level)
        below += (share - low) ** 2
        above += (high - share) ** 2
    # within 0-100 by construction: sqrt(sum (p_f - l_f)^2) <= sum (p_f - l_f) <= sum p_f, and likewise above
    return score - math.sqrt(below) / k, score + math.sqrt(above) / k


@dataclass(frozen=True)
class Difference:
    """Score(B) - Score(A) in points: the observed difference, its 95% interval and the two-sided p-value."""

    delta: float
    interval: tuple[float, float]
    p_value: float

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval lies wholly on one side of 0 (exactly when p < 1 - LEVEL)."""
        return self.interval[0] > 0 or self.interval[1] < 0


def _z_difference(delta: float, centre: float, se: float, level: float) -> Difference:
    """Return the difference with the interval centre ± z * se (clipped to ±100) and the z-test's p-value.

    `se` is never 0: the adjusted counts keep every share strictly between 0 and 1.
    """
    z = z_value(level)
    interval = (max(-100.0, centre - z * se), min(100.0, centre + z * se))
    return Difference(delta, interval, max(P_FLOOR, 2 * NormalDist().cdf(-abs(centre) / se)))


def unpaired_difference(
    a_right: Mapping[str, int],
    a_sizes: Mapping[str, int],
    b_right: Mapping[str, int],
    b_sizes: Mapping[str, int],
    level: float = LEVEL,
) -> Difference:
    """Return Score(B) - Score(A) of two independent rows: per family Agresti–Caffo (one success and one failure
    added to each row), the families' variances summed."""
    families = _checked(a_right, a_sizes)
    if families != _checked(b_right, b_sizes):
        raise ValueError("two Scores are compared over the same families")
    k = len(families)
    centre, variance = 0.0, 0.0
    for f in families:
        pa = (a_right[f] + 1) / (a_sizes[f] + 2)
        pb = (b_right[f] + 1) / (b_sizes[f] + 2)
        centre += (pb - pa) / k
        variance += (pa * (1 - pa) / (a_sizes[f] + 2) + pb * (1 - pb) / (b_sizes[f] + 2)) / k**2
    delta = score_of(b_right, b_sizes) - score_of(a_right, a_sizes)
    return _z_difference(delta, 100 * centre, 100 * math.sqrt(variance), level)


def paired_difference(
    a: Mapping[str, Mapping[str, bool]], b: Mapping[str, Mapping[str, bool]], level: float = LEVEL
) -> Difference:
    """Return Score(B) - Score(A) of two runs on their common samples: per family Bonett–Price (one sample added to
    each discordant cell), the families' variances summed."""
    families = sorted(set(a) & set(b))
    common = {f: sorted(set(a[f]) & set(b[f])) for f in families}
    if not families or set(families) != set(a) | set(b) or not all(common.values()):
        raise ValueError("the two runs share no sample of a family: a paired comparison needs the same samples")
    k = len(families)
    delta, centre, variance = 0.0, 0.0, 0.0
    for f in families:
        n = len(common[f])
        b_only = sum(b[f][s] and not a[f][s] for s in common[f])
        a_only = sum(a[f][s] and not b[f][s] for s in common[f])
        p_b, p_a = (b_only + 1) / (n + 2), (a_only + 1) / (n + 2)
        delta += (b_only - a_only) / n / k
        centre += (p_b - p_a) / k
        variance += (p_b + p_a - (p_b - p_a) ** 2) / (n + 2) / k**2
    return _z_difference(100 * delta, 100 * centre, 100 * math.sqrt(variance), level)


def holm(p_values: Sequence[float]) -> list[float]:
    """Return Holm's step-down adjusted p-values (familywise error control), in the order given."""
    m = len(p_values)
    adjusted: dict[int, float] = {}
    running = 0.0
    for step, i in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - step) * p_values[i]))
        adjusted[i] = running
    return [adjusted[i] for i in range(m)]


def rank_ranges(count: int, above: Callable[[int, int], bool]) -> list[tuple[int, int]]:
    """Return each row's best and worst rank (1 = best) from the significant comparisons: best = 1 + the rows
    significantly above it, worst = `count` - the rows significantly below it (`above(i, j)`: i above j)."""
    ranges = []
    for i in range(count):
        better = sum(above(j, i) for j in range(count) if j != i)
        worse = sum(above(i, j) for j in range(count) if j != i)
        ranges.append((1 + better, count - worse))
    return ranges


def letters(count: int, differs: Callable[[int, int], bool]) -> list[str]:
    """Return a compact letter display of rows 0..count-1 (best first): two rows share a letter exactly when
    `differs` says their difference is not significant (insert-and-absorb)."""
    columns = [frozenset(range(count))]
    for i in range(count):
        for j in range(i + 1, count):
            if not differs(i, j):
                continue
            # a column holding both splits in two; one without both gives itself and a subset, absorbed below
            split = [part for column in columns for part in (column - {i}, column - {j})]
            unique = list(dict.fromkeys(split))
            columns = [c for c in unique if not any(c < other for other in unique)]
    columns.sort(key=lambda c: sorted(c))
    names = [_letter(n) for n in range(len(columns))]
    joiner = "" if len(columns) <= 26 else " "
    return [joiner.join(name for name, c in zip(names, columns, strict=True) if i in c) for i in range(count)]


def _letter(n: int) -> str:
    """Return the n-th letter name: a..z, then aa, ab, ..."""
    name = ""
    n += 1
    while n:
        n, rest = divmod(n - 1, 26)
        name = chr(ord("a") + rest) + name
    return name


def detectable_difference(
    sizes: Mapping[str, int], variance_per_sample: Mapping[str, float], level: float = LEVEL, power: float = POWER
) -> float:
    """Return the smallest true Score difference (points) a two-sided test at 1 - `level` finds with `power`.

    `variance_per_sample`: per family, the variance of one sample's difference of verdicts (2 p (1 - p) for two
    independent models at accuracy p; the share of samples where the two disagree for a paired comparison).
    """
    return (z_value(level) + NormalDist().inv_cdf(power)) * _difference_se(sizes, variance_per_sample) * 100


def significant_difference(
    sizes: Mapping[str, int], variance_per_sample: Mapping[str, float], level: float = LEVEL
) -> float:
    """Return the smallest observed Score difference (points) that is significant on its own at 1 - `level`."""
    return z_value(level) * _difference_se(sizes, variance_per_sample) * 100


def _difference_se(sizes: Mapping[str, int], variance_per_sample: Mapping[str, float]) -> float:
    """Return the standard error of a Score difference (share) from per-sample variances and family sizes."""
    k = len(sizes)
    return math.sqrt(sum(variance_per_sample[f] / sizes[f] for f in sizes) / k**2)


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


def p_text(p_value: float) -> str:
    """Format a p-value for a table: three significant digits, '< 0.0001' below that."""
    if p_value < 1e-4:
        return "< 0.0001"
    return f"{p_value:.3g}"


def p_phrase(p_value: float) -> str:
    """Format a p-value for a sentence: 'p = 0.012', or 'p < 0.0001'."""
    text = p_text(p_value)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def kendall_tau(
    x: Sequence[float], y: Sequence[float], level: float = LEVEL
) -> tuple[float, float, tuple[float, float] | None]:
    """Return Kendall's τ-b of two sets of scores (scipy), its two-sided p-value and its interval: atanh(τ) ± z ·
    sqrt(0.437 / (n − 4)) turned back by tanh (Fieller, Hartley and Pearson, 1957), for n >= 5 (None below); a τ of ±1
    is first moved in by half a discordant pair (1 / the number of pairs) so the interval keeps a width."""
    from scipy.stats import kendalltau

    found = kendalltau(x, y)
    tau, p, n = float(found.statistic), float(found.pvalue), len(x)
    if n < 5 or math.isnan(tau):
        return tau, p, None
    bound = 1 - 2 / (n * (n - 1))
    centre, half = math.atanh(max(-bound, min(bound, tau))), z_value(level) * math.sqrt(0.437 / (n - 4))
    return tau, p, (math.tanh(centre - half), math.tanh(centre + half))
