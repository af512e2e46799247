"""Agreement statistics of the human audit, checked against values worked out by hand."""

from __future__ import annotations

import pytest

from generation.audit.agreement import (
    count_matrix,
    fleiss_kappa,
    krippendorff_alpha_nominal,
    majority_share,
    observed_agreement,
)

# Small example, 4 items x 5 raters, yes/no:
#   item 1: 5 yes 0 no   item 2: 4 yes 1 no   item 3: 3 yes 2 no   item 4: 0 yes 5 no
SMALL = [[True] * 5, [True] * 4 + [False], [True] * 3 + [False] * 2, [False] * 5]
SMALL_COUNTS = [[5, 0], [4, 1], [3, 2], [0, 5]]


def test_count_matrix_counts_each_category_per_item() -> None:
    assert count_matrix(SMALL, (True, False)) == SMALL_COUNTS
    assert count_matrix([["a", None, "b", "a"]], ("a", "b", "c")) == [[2, 1, 0]]


def test_count_matrix_refuses_a_rating_outside_the_categories() -> None:
    with pytest.raises(ValueError, match="unit 1"):
        count_matrix([[True], ["maybe"]], (True, False))


def test_fleiss_kappa_of_the_small_example() -> None:
    # Per-item agreement P_i = (sum_j n_ij^2 - n) / (n (n - 1)) with n = 5, n (n - 1) = 20:
    #   (25 - 5)/20 = 1,  (16 + 1 - 5)/20 = 0.6,  (9 + 4 - 5)/20 = 0.4,  (25 - 5)/20 = 1  -> P-bar = 3/4
    # Category shares: yes 12/20 = 0.6, no 8/20 = 0.4 -> P-bar-e = 0.36 + 0.16 = 0.52
    # kappa = (0.75 - 0.52) / (1 - 0.52) = 0.23 / 0.48 = 23/48
    assert observed_agreement(SMALL_COUNTS) == pytest.approx(0.75)
    assert fleiss_kappa(SMALL_COUNTS) == pytest.approx(23 / 48)


def test_krippendorff_alpha_of_the_small_example() -> None:
    # n = 20 pairable values, n_yes = 12, n_no = 8.
    # Coincidences within a category, o_cc summed: each item adds sum_c n_uc (n_uc - 1) / (m_u - 1), m_u - 1 = 4:
    #   20/4 = 5,  (12 + 0)/4 = 3,  (6 + 2)/4 = 2,  20/4 = 5  -> 15
    # alpha = 1 - (n - 1) (n - 15) / (n^2 - sum n_c^2) = 1 - 19 * 5 / (400 - 144 - 64) = 1 - 95/192 = 97/192
    assert krippendorff_alpha_nominal(SMALL) == pytest.approx(97 / 192)


def test_majority_share_per_item_of_the_small_example() -> None:
    assert [majority_share(u) for u in SMALL] == [1.0, 0.8, 0.6, 1.0]
    assert majority_share([True, None, False, None]) == 0.5
    assert majority_share([None, None]) is None


def test_fleiss_kappa_of_fleiss_1971_table() -> None:
    # The worked example of Fleiss (1971) as reproduced in most textbooks: 10 items, 14 raters, 5 categories.
    counts = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    # Column sums 20, 28, 39, 21, 32 of N n = 140 ratings:
    #   P-bar-e = (20^2 + 28^2 + 39^2 + 21^2 + 32^2) / 140^2 = 4170 / 19600 = 417/1960
    # sum_j n_ij^2 - 14 per item: 182, 46, 56, 80, 60, 84, 44, 32, 52, 52 (sum 688), each over 14 * 13 = 182:
    #   P-bar = 688 / 1820 = 172/455
    # kappa = (172/455 - 417/1960) / (1 - 417/1960) = (9632 - 5421)/25480 / (20059/25480) = 4211/20059 ~ 0.2099
    assert observed_agreement(counts) == pytest.approx(172 / 455)
    assert fleiss_kappa(counts) == pytest.approx(4211 / 20059)
    assert round(fleiss_kappa(counts), 3) == 0.210


def test_krippendorff_alpha_of_krippendorffs_missing_data_example() -> None:
    # Krippendorff's "Computing Krippendorff's alpha-reliability" (2011), nominal data, 4 observers, 12 units,
    # missing values (None). Unit 12 has a single value and is not pairable.
    a = [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None]
    b = [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3]
    c = [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None]
    d = [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]
    units = [list(u) for u in zip(a, b, c, d, strict=True)]
    # Pairable values n = 3 + 8 * 4 + 3 + 2 = 40; n_c for values 1..5 = 9, 13, 10, 5, 3 (sum of squares 384).
    # o_cc summed over units: 3 + 2 + 4 + 4 + 4 + 0 + 4 + 2 + 4 + 3 + 2 = 32.
    # alpha = 1 - 39 * (40 - 32) / (1600 - 384) = 1 - 312/1216 ~ 0.743 (the published value)
    assert krippendorff_alpha_nominal(units) == pytest.approx(1 - 312 / 1216)
    assert round(krippendorff_alpha_nominal(units), 3) == 0.743


def test_perfect_agreement_with_both_categories_used_is_one() -> None:
    units = [[True] * 5, [False] * 5, [True] * 5]
    assert fleiss_kappa(count_matrix(units, (True, False))) == pytest.approx(1.0)
    assert krippendorff_alpha_nominal(units) == pytest.approx(1.0)


def test_every_rating_in_one_category_leaves_kappa_and_alpha_undefined() -> None:
    # No chance disagreement to compare with: both statistics are 0/0, reported as None rather than NaN.
    units = [[True] * 5] * 4
    counts = count_matrix(units, (True, False))
    assert fleiss_kappa(counts) is None
    assert krippendorff_alpha_nominal(units) is None
    assert observed_agreement(counts) == 1.0


def test_nothing_to_compare_gives_none() -> None:
    assert fleiss_kappa([]) is None
    assert observed_agreement([]) is None
    assert krippendorff_alpha_nominal([]) is None
    assert krippendorff_alpha_nominal([[True, None], [None, False]]) is None  # no unit has two ratings


def test_systematic_disagreement_gives_negative_values() -> None:
    # Each item split 1/1 between two raters: observed agreement 0, below chance.
    units = [[True, False], [False, True], [True, False], [False, True]]
    assert fleiss_kappa(count_matrix(units, (True, False))) == pytest.approx(-1.0)
    # alpha = 1 - (n - 1) * (n - 0) / (n^2 - 4^2 - 4^2) with n = 8: 1 - 7 * 8 / 32 = -0.75
    assert krippendorff_alpha_nominal(units) == pytest.approx(-0.75)


def test_fleiss_kappa_refuses_items_with_different_rater_counts() -> None:
    with pytest.raises(ValueError, match="same number of raters"):
        fleiss_kappa([[5, 0], [3, 1]])
    with pytest.raises(ValueError, match="at least 2 raters"):
        fleiss_kappa([[1, 0], [0, 1]])
