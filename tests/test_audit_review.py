"""The flagging rule and round statistics: which items go to the team, and why."""

from __future__ import annotations

import pytest

from generation.audit.review import check_threshold, review_item, round_statistics
from generation.audit.verdicts import Verdict

KEY = ("implication", "metaphor_001")


def votes(pattern: dict[str, str], key: tuple[str, str] = KEY) -> list[Verdict]:
    """Verdicts of a1..aN; pattern maps a question to one 'y'/'n' per annotator (others all yes)."""
    n = len(next(iter(pattern.values()))) if pattern else 5
    out = []
    for i in range(n):
        answers = {q: pattern.get(q, "y" * n)[i] == "y" for q in ("l1_supported", "l2_supported", "l3_supported")}
        answers["coherent"] = pattern.get("coherent", "y" * n)[i] == "y"
        out.append(Verdict(f"a{i + 1}", key[0], key[1], **answers))
    return out


def test_unanimous_yes_is_accepted_without_discussion() -> None:
    review = review_item(KEY, votes({}), 0.8)
    assert not review.flagged
    assert review.yes == {"l1_supported": 5, "l2_supported": 5, "l3_supported": 5, "coherent": 5}


def test_four_of_five_yes_reaches_eighty_percent() -> None:
    assert not review_item(KEY, votes({"l2_supported": "yyyyn"}), 0.8).flagged


def test_three_of_five_is_no_clear_majority() -> None:
    review = review_item(KEY, votes({"l2_supported": "yynyn"}), 0.8)
    assert review.reasons == ("l2_supported: no clear majority (3/5 yes, below 80%)",)
    assert review.majority_share("l2_supported") == pytest.approx(0.6)


def test_majority_no_is_flagged_as_such() -> None:
    review = review_item(KEY, votes({"l3_supported": "nnnny", "coherent": "nnnnn"}), 0.8)
    assert review.reasons == (
        "l3_supported: majority says no (4/5 no)",
        "coherent: majority says no (5/5 no)",
    )


def test_threshold_is_compared_exactly() -> None:
    # 3 of 5 is exactly 60%: accepted at threshold 0.6 despite 0.6 * 5 = 3.0000000000000004 in floats.
    assert not review_item(KEY, votes({"l1_supported": "yynyn"}), 0.6).flagged


def test_comments_are_kept_with_their_annotator() -> None:
    vs = votes({})
    vs[2] = Verdict("a3", *KEY, True, True, True, True, comment="option C is also right")
    assert review_item(KEY, vs, 0.8).comments == (("a3", "option C is also right"),)


@pytest.mark.parametrize("bad", [0.5, 0.3, 1.2])
def test_threshold_must_be_a_majority_share(bad: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        check_threshold(bad)


def test_round_statistics_need_the_minimum_number_of_annotators() -> None:
    by_annotator = {v.annotator: [v] for v in votes({})[:4]}
    with pytest.raises(ValueError, match=r"4 annotator\(s\).*need at least 5"):
        round_statistics(1, [KEY], by_annotator)


def test_round_statistics_per_question_and_flags() -> None:
    # Two items, five annotators. Item 1 unanimous yes; item 2 splits 3/2 on L2 and is otherwise yes.
    other = ("aesthetic", "color_001")
    by_annotator: dict[str, list[Verdict]] = {f"a{i}": [] for i in range(1, 6)}
    for v in votes({}) + votes({"l2_supported": "yyynn"}, other):
        by_annotator[v.annotator].append(v)
    stats, reviews = round_statistics(1, [KEY, other], by_annotator)
    assert [r.flagged for r in reviews] == [False, True]
    assert stats["n_flagged"] == 1
    assert stats["flagged"] == [
        {"family": "aesthetic", "id": "color_001", "reasons": ["l2_supported: no clear majority (3/5 yes, below 80%)"]}
    ]
    # L2 counts [[5, 0], [3, 2]]: P-bar = (1 + 8/20) / 2 = 0.7; shares 8/10, 2/10 -> P-bar-e = 0.68;
    # kappa = (0.7 - 0.68) / 0.32 = 0.0625.
    # alpha: n = 10, n_yes = 8, n_no = 2, o_cc = 20/4 + (6 + 2)/4 = 7 -> 1 - 9 * 3 / (100 - 64 - 4) = 5/32.
    l2 = stats["agreement"]["l2_supported"]
    assert l2["fleiss_kappa"] == pytest.approx(0.0625)
    assert l2["krippendorff_alpha"] == pytest.approx(5 / 32)
    assert l2["observed_agreement"] == pytest.approx(0.7)
    assert l2["yes_share"] == pytest.approx(0.8)
    # L1 is yes from everyone: no variation, so kappa and alpha are undefined (None), agreement is 1.
    assert stats["agreement"]["l1_supported"] == {
        "fleiss_kappa": None,
        "krippendorff_alpha": None,
        "observed_agreement": 1.0,
        "yes_share": 1.0,
    }
    # Pooled over the four questions: 8 units, only one of them split -> alpha over 40 values.
    # n_no = 2, n_yes = 38; o_cc = 7 * 5 + 2 = 37; alpha = 1 - 39 * 3 / (1600 - 1444 - 4) = 1 - 117/152
    assert stats["agreement"]["pooled"]["krippendorff_alpha"] == pytest.approx(1 - 117 / 152, abs=1e-6)
    assert stats["items"][1]["majority_share"]["l2_supported"] == 0.6
