"""Bootstrap intervals and paired tests behind `hvcu report` (hand-checkable cases)."""

from __future__ import annotations

import pytest

from hvcu_tasks.report.stats import bootstrap_ci, mcnemar, paired_score_delta, score_ci
from hvcu_tasks.report.tables import compare_table
from hvcu_tasks.results.runs import FamilyResult, ModelResult

FAMS = ("implication", "aesthetic", "affective")


def test_bootstrap_interval_brackets_the_accuracy_and_is_seeded() -> None:
    verdicts = {f"s{i:03d}": i < 30 for i in range(100)}
    low, high = bootstrap_ci(verdicts)
    assert low < 30.0 < high and 18 < low and high < 42
    assert bootstrap_ci(verdicts) == (low, high)
    assert bootstrap_ci(verdicts, seed=1) != (low, high)
    assert bootstrap_ci({str(i): True for i in range(10)}) == (100.0, 100.0)


def test_score_interval_brackets_the_mean_of_families() -> None:
    low, high = score_ci({"a": {str(i): i < 50 for i in range(100)}, "b": {str(i): i < 80 for i in range(100)}})
    assert low < 65.0 < high


def test_mcnemar_counts_discordant_pairs_exactly() -> None:
    a = {str(i): i < 4 for i in range(10)}  # right on 0-3
    b = {str(i): i < 10 for i in range(10)}  # right on all
    result = mcnemar(a, b)
    assert (result.n, result.a_only, result.b_only) == (10, 0, 6)
    assert result.p_value == pytest.approx(2 * 0.5**6)
    assert mcnemar(a, a).p_value == 1.0
    with pytest.raises(ValueError, match=r"^the two models share no sample: a paired test needs the same samples$"):
        mcnemar({"x": True}, {"y": True})


def test_paired_score_delta_sees_a_consistent_gain() -> None:
    a = {f: {str(i): i < 5 for i in range(20)} for f in FAMS}
    b = {f: {str(i): i < 15 for i in range(20)} for f in FAMS}
    low, high, p = paired_score_delta(a, b)
    assert 0 < low < 50.0 < high and p < 0.001


def _model(name: str, full: float, right: int) -> ModelResult:
    m = ModelResult(model=name, dataset={"HVCU-Bench"})
    metrics = {"acc_perc": 90.0, "acc_bridge": 80.0, "acc_conn": 70.0, "acc_full": full}
    m.settings["base"] = {f: FamilyResult(dict(metrics), f"hvcu_bench_{f}") for f in FAMS}
    m.chains["base"] = {f: {str(i): i < right for i in range(20)} for f in FAMS}
    return m


def test_compare_table_has_deltas_and_tests() -> None:
    table = compare_table(_model("base", 25.0, 5), _model("tuned", 75.0, 15), "base")
    row = table.rows[0]
    assert row[0] == "Impl." and row[10:13] == [25.0, 75.0, 50.0]
    assert row[-1] == pytest.approx(2 * 0.5**10)
    assert "Score: A 25.00, B 75.00, Δ 50.00." in table.notes
    assert any(n.startswith("Paired bootstrap of the Score gain") for n in table.notes)
