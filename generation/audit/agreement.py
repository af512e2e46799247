"""Inter-annotator agreement for nominal ratings: Fleiss' kappa, Krippendorff's alpha, majority shares.

Pure functions on plain sequences, computed with exact fractions and returned as floats. A statistic
that is undefined for the data (every rating in one category, or nothing to compare) is returned as
None, never NaN: with one category there is no chance-expected disagreement to compare against.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from fractions import Fraction

Unit = Sequence[Hashable | None]


def _check_counts(counts: Sequence[Sequence[int]]) -> int:
    """Return the raters per item of a count matrix, or raise ValueError when it is malformed."""
    widths = {len(row) for row in counts}
    if len(widths) > 1:
        raise ValueError(f"every item needs a count for each category; got rows of lengths {sorted(widths)}")
    if any(c < 0 for row in counts for c in row):
        raise ValueError("category counts must not be negative")
    totals = {sum(row) for row in counts}
    if len(totals) > 1:
        raise ValueError(f"Fleiss' kappa needs the same number of raters on every item; got {sorted(totals)}")
    raters = totals.pop()
    if raters < 2:
        raise ValueError(f"Fleiss' kappa needs at least 2 raters per item; got {raters}")
    return raters


def _fleiss_parts(counts: Sequence[Sequence[int]]) -> tuple[Fraction, Fraction] | None:
    """Return (mean observed agreement P-bar, chance agreement P-bar-e), or None for no items."""
    if not counts:
        return None
    n = _check_counts(counts)
    items = len(counts)
    observed = sum(Fraction(sum(c * c for c in row) - n, n * (n - 1)) for row in counts) / items
    totals = [sum(col) for col in zip(*counts, strict=True)]
    chance = sum(Fraction(t, items * n) ** 2 for t in totals)
    return observed, chance


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa of an items x categories count matrix (same rater count per item); None when undefined."""
    parts = _fleiss_parts(counts)
    if parts is None:
        return None
    observed, chance = parts
    if chance == 1:
        return None
    return float((observed - chance) / (1 - chance))


def observed_agreement(counts: Sequence[Sequence[int]]) -> float | None:
    """Mean share of agreeing rater pairs per item (Fleiss' P-bar); None for no items."""
    parts = _fleiss_parts(counts)
    return None if parts is None else float(parts[0])


def krippendorff_alpha_nominal(units: Sequence[Unit]) -> float | None:
    """Krippendorff's alpha for nominal values; each unit lists its ratings, None = missing; None when undefined.

    Units with fewer than two ratings are not pairable and are left out, as Krippendorff prescribes.
    alpha = 1 - (n - 1) * sum_{c!=k} o_ck / sum_{c!=k} n_c * n_k, with o the coincidence matrix.
    """
    within = Fraction(0)  # sum over c of o_cc
    totals: Counter[Hashable] = Counter()
    for unit in units:
        values = [v for v in unit if v is not None]
        m = len(values)
        if m < 2:
            continue
        counts = Counter(values)
        within += Fraction(sum(c * (c - 1) for c in counts.values()), m - 1)
        totals.update(counts)
    n = sum(totals.values())
    expected = n * n - sum(c * c for c in totals.values())  # sum over c != k of n_c * n_k
    if n == 0 or expected == 0:
        return None
    return float(1 - (n - 1) * (n - within) / expected)


def count_matrix(units: Sequence[Unit], categories: Sequence[Hashable]) -> list[list[int]]:
    """Turn per-unit ratings into an items x categories count matrix (missing ratings dropped)."""
    known = set(categories)
    rows = []
    for i, unit in enumerate(units):
        counts = Counter(v for v in unit if v is not None)
        unknown = set(counts) - known
        if unknown:
            raise ValueError(f"unit {i}: ratings {sorted(map(repr, unknown))} are not among {list(categories)}")
        rows.append([counts[c] for c in categories])
    return rows


def majority_share(ratings: Sequence[Hashable | None]) -> float | None:
    """Share of the ratings that fall in the most frequent category; None when there are none."""
    values = [v for v in ratings if v is not None]
    if not values:
        return None
    return Counter(values).most_common(1)[0][1] / len(values)
