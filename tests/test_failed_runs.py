"""Runs whose requests failed: their failures are shown in every format, and a run above the limit is not ranked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_lmms_eval

from hvcu_tasks.cli import main
from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.data.loaders import load_source
from hvcu_tasks.report.board import board_entries, make_board
from hvcu_tasks.report.board_file import leaderboard_json
from hvcu_tasks.report.board_tables import leaderboard_table, summary_table
from hvcu_tasks.report.render import to_markdown
from hvcu_tasks.results.runs import FamilyResult, ModelResult

SIZES = {"implication": 400, "aesthetic": 350, "affective": 300}


def _run(name: str, acc: float, failed: dict[str, int], context_failed: dict[str, int] | None = None) -> ModelResult:
    """A benchmark run without sample logs: Acc_full `acc` in every family, `failed[f]` requests failed."""
    m = ModelResult(model=name, dataset={"HVCU-Bench"})
    for setting, counts in (("base", failed), ("context", context_failed)):
        if counts is None:
            continue
        metrics = {
            f: {"acc_full": acc, "acc_full_official": acc, "n_chains": n, "n_failed_requests": counts[f]}
            for f, n in SIZES.items()
        }
        m.settings[setting] = {f: FamilyResult(metrics[f], f"hvcu_bench_{f}") for f in SIZES}
    return m


DEAD = {f: 3 * n for f, n in SIZES.items()}  # every one of the 3,150 requests failed
NONE = dict.fromkeys(SIZES, 0)


def _board(*runs: ModelResult, reference: bool = True):
    return make_board(board_entries(list(runs), reference))


def _rows(table) -> dict[str, dict]:
    return {r[1] if table.columns[1] == "Model" else r[2]: dict(zip(table.columns, r, strict=True)) for r in table.rows}


def test_a_run_whose_every_request_failed_is_not_ranked() -> None:
    rows = _rows(leaderboard_table(_board(_run("dead", 0.0, DEAD), _run("alive", 40.0, NONE))))
    assert rows["dead"]["Rank"] == "–" and rows["dead"]["Rank range"] is None and rows["dead"]["Group"] is None
    assert isinstance(rows["alive"]["Rank"], int)


def test_the_unranked_run_says_why_in_one_line() -> None:
    notes = leaderboard_table(_board(_run("dead", 0.0, DEAD))).notes
    assert notes[0] == (
        "dead: 3,150 of 3,150 base requests failed (100.0%, above the 1% limit): not ranked, its Score counts each "
        "failure as a wrong answer."
    )


def test_the_failed_column_shows_count_and_share() -> None:
    some = {"implication": 12, "aesthetic": 0, "affective": 0}  # 12 of 3,150: 0.38%, under the limit
    rows = _rows(leaderboard_table(_board(_run("dead", 0.0, DEAD), _run("some", 40.0, some), _run("ok", 30.0, NONE))))
    assert (rows["dead"]["Failed"], rows["some"]["Failed"], rows["ok"]["Failed"]) == ("3150 (100%)", "12 (0.4%)", "0")
    assert isinstance(rows["some"]["Rank"], int)  # under the limit: ranked, its failures shown
    assert rows["GPT-4o"]["Failed"] is None  # the paper's rows: not known


def test_failures_of_the_context_setting_are_shown_too() -> None:
    rows = _rows(leaderboard_table(_board(_run("m", 40.0, NONE, context_failed=DEAD))))
    assert rows["m"]["Failed"] == "context 3150 (100%)"


def test_just_above_the_limit_is_not_ranked() -> None:
    # 32 of 3,150 = 1.02% > 1%; 31 = 0.98% is ranked
    above = {"implication": 32, "aesthetic": 0, "affective": 0}
    below = {"implication": 31, "aesthetic": 0, "affective": 0}
    rows = _rows(leaderboard_table(_board(_run("above", 40.0, above), _run("below", 40.0, below))))
    assert rows["above"]["Rank"] == "–" and isinstance(rows["below"]["Rank"], int)


def test_the_markdown_board_shows_the_dead_run_unranked_with_its_failures() -> None:
    text = to_markdown(leaderboard_table(_board(_run("dead", 0.0, DEAD))))
    (line,) = [ln for ln in text.splitlines() if ln.startswith("| – | dead ")]
    assert "| 3150 (100%) |" in line
    assert "- dead: 3,150 of 3,150 base requests failed" in text


def test_the_summary_shows_the_failures_and_why_the_run_is_unranked() -> None:
    table = summary_table(_board(_run("dead", 0.0, DEAD)))
    row = _rows(table)["dead"]
    assert row["Rank"] == "–" and row["Failed"] == "3150 (100%)"
    assert any(n.startswith("dead: 3,150 of 3,150 base requests failed") for n in table.notes)


def test_the_json_board_records_the_failures_and_the_reason() -> None:
    data = json.loads(leaderboard_json(_board(_run("dead", 0.0, DEAD))))
    dead = next(e for e in data["entries"] if e["model"] == "dead")
    assert dead["rank"] is None and dead["rankable"] is False and dead["rank_range"] is None
    assert dead["failed_requests"] == {"base": [3150, 3150]}
    assert dead["unranked_because"].startswith("3,150 of 3,150 base requests failed")
    assert data["failed_limit"] == 0.01


def test_a_dead_run_is_not_compared_with_the_ranked_rows() -> None:
    board = _board(_run("dead", 0.0, DEAD), _run("alive", 40.0, NONE))
    assert not any("run:dead" in (p.a, p.b) for p in board.uncertainty.pairs)
    assert any("run:alive" in (p.a, p.b) for p in board.uncertainty.pairs)


@pytest.mark.slow
def test_a_real_run_whose_every_reply_is_empty_shows_its_failures_on_the_board(tmp_path: Path, capsys) -> None:
    # lmms-eval with the replay model answering "" to all 45 requests of the smoke sample (15 chains x 3)
    predictions = tmp_path / "empty.jsonl"
    with predictions.open("w") as out:
        for family in FAMILIES:
            for sample in load_source("smoke", family).raise_for_problems():
                for level in sample.levels:
                    record = {"family": family, "sample_id": sample.id, "level": level.level, "response": ""}
                    out.write(json.dumps(record) + "\n")
    args = ["--model", "hvcu_replay", "--model_args", f"model=dead,predictions={predictions}"]
    results = run_lmms_eval([*args, "--tasks", "hvcu_bench_sample"], tmp_path / "runs")
    assert (
        sum(v.get("n_failed_requests,none", 0) for t, v in results["results"].items() if t != "hvcu_bench_sample") == 45
    )
    assert main(["report", str(tmp_path / "runs"), "--summary"]) == 0
    out = capsys.readouterr().out
    (row,) = [
        [c.strip() for c in line.split("|")] for line in out.splitlines() if line.startswith("|") and "dead†" in line
    ]
    assert row[1:4] == ["–", "–", "dead†"] and "45 (100%)" in row
    # 0 of 5, 4 and 6 chains right: not a zero-width interval; the upper bound is sqrt of the families' squared
    # Clopper–Pearson upper bounds (1 - 0.025^(1/n)) summed, over 3
    high = sum((1 - 0.025 ** (1 / n)) ** 2 for n in (5, 4, 6)) ** 0.5 / 3 * 100
    assert f"[0.00, {high:.2f}]" in row
    assert "dead†: 45 of 45 base requests failed (100.0%, above the 1% limit): not ranked" in " ".join(out.split())
