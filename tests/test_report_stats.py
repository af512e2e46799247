"""The paired tests behind `hvcu report --compare` (hand-checkable cases)."""

from __future__ import annotations

import pytest

from hvcu_tasks.report.stats import mcnemar, paired_difference
from hvcu_tasks.report.tables import compare_table
from hvcu_tasks.results.runs import FamilyResult, ModelResult

FAMS = ("implication", "aesthetic", "affective")


def test_mcnemar_counts_discordant_pairs_exactly() -> None:
    a = {str(i): i < 4 for i in range(10)}  # right on 0-3
    b = {str(i): i < 10 for i in range(10)}  # right on all
    result = mcnemar(a, b)
    assert (result.n, result.a_only, result.b_only) == (10, 0, 6)
    assert result.p_value == pytest.approx(2 * 0.5**6)
    assert mcnemar(a, a).p_value == 1.0
    with pytest.raises(ValueError, match=r"^the two models share no sample: a paired test needs the same samples$"):
        mcnemar({"x": True}, {"y": True})


def test_the_paired_difference_sees_a_consistent_gain() -> None:
    a = {f: {str(i): i < 5 for i in range(20)} for f in FAMS}
    b = {f: {str(i): i < 15 for i in range(20)} for f in FAMS}
    d = paired_difference(a, b)
    assert d.delta == 50.0 and 0 < d.interval[0] < 50.0 < d.interval[1] and d.p_value < 0.001


def _model(name: str, full: float, right: int, ours: float | None = None) -> ModelResult:
    """A run whose authors'-parser Acc_full is `full` (`right` of 20 chains); this toolkit's parser reads `ours`."""
    m = ModelResult(model=name, dataset={"HVCU-Bench"})
    official = {"acc_l1_perc": 90.0, "acc_l2_bridge": 80.0, "acc_l3_conn": 70.0, "acc_full": full}
    metrics = {**{k + "_official": v for k, v in official.items()}, **official, "acc_full": ours or full}
    m.settings["base"] = {f: FamilyResult(dict(metrics), f"hvcu_bench_{f}") for f in FAMS}
    m.chains_official["base"] = {f: {str(i): i < right for i in range(20)} for f in FAMS}
    m.chains["base"] = {f: {str(i): True for i in range(20)} for f in FAMS}  # ours: all right, never used here
    return m


def test_compare_table_has_deltas_and_tests() -> None:
    table = compare_table(_model("base", 25.0, 5), _model("tuned", 75.0, 15), "base")
    row = table.rows[0]
    assert row[0] == "Impl." and row[10:13] == [25.0, 75.0, 50.0]
    assert row[-1] == pytest.approx(2 * 0.5**10)
    assert table.notes[0].startswith("Score (official): A 25.00, B 75.00, Δ = B − A 50.00")
    assert any(n.startswith("Paired comparison of the Score (Bonett–Price") and "p < 0.0001" in n for n in table.notes)


def test_compare_uses_the_boards_parser_and_sign() -> None:
    # this toolkit's parser would say the tuned run is worse (ours 10 vs 90): the authors' parser, as ranked, wins
    table = compare_table(_model("base", 25.0, 5, ours=90.0), _model("tuned", 75.0, 15, ours=10.0), "base")
    assert table.rows[0][10:13] == [25.0, 75.0, 50.0] and "authors' parser" in table.title
    assert "Δ = B − A 50.00" in table.notes[1]
