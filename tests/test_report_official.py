"""`hvcu report`: the paper-comparable Score (authors' parser) beside ours, the [paper] rows in its column,
and a flag on a model whose two Scores differ by more than 1 point.

Results files are hand-made in lmms-eval's layout ("metric,none" keys, stderr entries, the group's own entry).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from test_report import FULL, write_results

from hvcu_tasks.cli import main
from hvcu_tasks.report.html import render_index
from hvcu_tasks.report.render import to_csv, to_json, to_latex, to_markdown
from hvcu_tasks.report.tables import all_tables, base_vs_context_table, setting_table
from hvcu_tasks.results.runs import read_runs

SHORTS = ("impl", "aesth", "affect")
MISSES = "its answers are in a format the authors' parser misses"


def tasks(prefix: str, full: float, official: float | None, stderr: bool = True) -> dict[str, dict]:
    """The three family tasks and their group, as lmms-eval writes them (official keys first, stderr too)."""
    out: dict[str, dict] = {}
    for short in SHORTS:
        metrics: dict = {}
        if official is not None:
            metrics |= {"acc_full_official": official, "acc_l1_perc_official": 90.0, "acc_l3_conn_official": 70.0}
        metrics |= {**FULL, "acc_full": full}
        if stderr:
            metrics |= {"acc_full_stderr": "N/A", "acc_full_official_stderr": "N/A"}
        out[f"{prefix}_{short}"] = metrics
    group = {"acc_full": full} | ({"acc_full_official": official} if official is not None else {})
    out[prefix] = group
    return out


def _write(folder: Path, tasks_: dict[str, dict], model: str = "Qwen/X") -> Path:
    """Write a results file whose stderr entries keep lmms-eval's own key ('acc_full_stderr,none')."""
    write_results(folder, tasks_, model_args=f"model={model}")
    return folder


def _row(table, name: str) -> dict:
    (row,) = [r for r in table.rows if r[0] == name]
    return dict(zip(table.columns, row, strict=True))


def test_acc_full_and_acc_full_official_are_read_as_two_metrics(tmp_path: Path) -> None:
    (model,) = read_runs([_write(tmp_path, tasks("hvcu_bench", full=60.0, official=45.0))])
    impl = model.settings["base"]["implication"]
    assert impl.get("acc_full") == 60.0 and impl.get("acc_full_official") == 45.0
    assert model.score("base") == 60.0 and model.official_score("base") == 45.0


def test_table2_shows_the_official_score_beside_ours(tmp_path: Path) -> None:
    (model,) = read_runs([_write(tmp_path, tasks("hvcu_bench", full=60.0, official=59.5))])
    table = setting_table([model], "base")
    assert table.columns[-2:] == ["Score", "Score (official)"]
    row = _row(table, "Qwen/X")
    assert row["Score"] == 60.0 and row["Score (official)"] == 59.5


def test_paper_rows_fill_only_the_official_score(tmp_path: Path) -> None:
    (model,) = read_runs([_write(tmp_path, tasks("hvcu_bench", full=60.0, official=60.0))])
    table = setting_table([model], "base")
    human = _row(table, "Human [paper]")
    assert human["Score"] is None and human["Score (official)"] == 87.18
    assert human["Impl. Acc_full"] == 86.0
    paper_note = next(n for n in table.notes if n.startswith("[paper] rows"))
    assert "authors' parser" in paper_note and "Score (official)" in paper_note


def test_a_model_whose_scores_differ_by_more_than_one_point_is_flagged(tmp_path: Path) -> None:
    (model,) = read_runs([_write(tmp_path, tasks("hvcu_bench", full=60.0, official=58.5))])
    table = setting_table([model], "base", reference=False)
    assert table.rows[0][0] == "Qwen/X‡"
    (flag,) = [n for n in table.notes if n.startswith("‡")]
    assert "Qwen/X (base)" in flag and "60.00" in flag and "58.50" in flag and MISSES in flag


@pytest.mark.parametrize("official", [59.5, 59.0, 61.0])
def test_a_difference_of_at_most_one_point_is_not_flagged(tmp_path: Path, official: float) -> None:
    (model,) = read_runs([_write(tmp_path, tasks("hvcu_bench", full=60.0, official=official))])
    table = setting_table([model], "base", reference=False)
    assert table.rows[0][0] == "Qwen/X"
    assert not any("‡" in n for n in table.notes)


def test_an_official_score_above_ours_is_flagged_with_the_other_reason(tmp_path: Path) -> None:
    (model,) = read_runs([_write(tmp_path, tasks("hvcu_bench", full=60.0, official=62.0))])
    table = setting_table([model], "base", reference=False)
    (flag,) = [n for n in table.notes if n.startswith("‡")]
    assert table.rows[0][0] == "Qwen/X‡" and MISSES not in flag and "62.00" in flag


def test_a_difference_in_the_context_setting_flags_table8_and_table3_not_table2(tmp_path: Path) -> None:
    _write(tmp_path / "a", tasks("hvcu_bench", full=60.0, official=60.0))
    _write(tmp_path / "b", tasks("hvcu_bench_context", full=70.0, official=50.0))
    (model,) = read_runs([tmp_path / "a", tmp_path / "b"])
    assert setting_table([model], "base", reference=False).rows[0][0] == "Qwen/X"
    table8 = setting_table([model], "context", reference=False)
    assert table8.rows[0][0] == "Qwen/X‡"
    assert any("Qwen/X (context)" in n and "70.00" in n and "50.00" in n and MISSES in n for n in table8.notes)
    table3 = base_vs_context_table([model], reference=False)
    labels = [r[0] for r in table3.rows if r[0]]
    assert labels == ["Qwen/X", "Qwen/X‡"]  # the base row, then the context row


def test_a_results_file_without_official_keys_shows_a_dash_not_zero(tmp_path: Path) -> None:
    (model,) = read_runs([_write(tmp_path, tasks("hvcu_bench", full=60.0, official=None))])
    assert model.official_score("base") is None
    table = setting_table([model], "base")
    row = _row(table, "Qwen/X")
    assert row["Score"] == 60.0 and row["Score (official)"] is None
    assert row["Model"] == "Qwen/X"  # no flag: nothing to compare
    assert any("no acc_full_official" in n for n in table.notes)
    line = next(x for x in to_markdown(table).splitlines() if x.startswith("| Qwen/X |"))
    assert line.endswith("| 60.00 | – |")
    ours = list(csv.reader(io.StringIO(to_csv(table))))[-1]
    assert ours[-2:] == ["60.0", ""]
    assert json.loads(to_json([table]))[0]["rows"][-1][-1] is None


def test_an_official_score_not_available_is_na(tmp_path: Path) -> None:
    (model,) = read_runs([_write(tmp_path, tasks("hvcu_bench", full=60.0, official=float("nan")))])
    table = setting_table([model], "base", reference=False)
    assert to_markdown(table).splitlines()[4].endswith("| 60.00 | n/a |")
    assert table.rows[0][0] == "Qwen/X"


def test_table3_has_both_scores_and_both_gains(tmp_path: Path) -> None:
    _write(tmp_path / "a", tasks("hvcu_bench", full=60.0, official=50.0))
    _write(tmp_path / "b", tasks("hvcu_bench_context", full=70.0, official=55.0))
    (model,) = read_runs([tmp_path / "a", tmp_path / "b"])
    table = base_vs_context_table([model])
    assert table.columns[-4:] == ["Score", "Δ Score", "Score (official)", "Δ Score (official)"]
    gpt = [dict(zip(table.columns, r, strict=True)) for r in table.rows if r[0] == "GPT-4o [paper]"]
    assert [(r["Score"], r["Δ Score"], r["Score (official)"]) for r in gpt] == [
        (None, None, 52.24),
        (None, None, 68.18),
    ]
    assert gpt[1]["Δ Score (official)"] == 15.94
    ours = [dict(zip(table.columns, r, strict=True)) for r in table.rows if r[0].startswith("Qwen/X")]
    assert [(r["Score"], r["Score (official)"]) for r in ours] == [(60.0, 50.0), (70.0, 55.0)]
    assert (ours[1]["Δ Score"], ours[1]["Δ Score (official)"]) == (10.0, 5.0)


def test_every_format_shows_the_official_column_and_the_flag(tmp_path: Path) -> None:
    _write(tmp_path / "a", tasks("hvcu_bench", full=60.0, official=58.0))
    _write(tmp_path / "b", tasks("hvcu_bench_context", full=70.0, official=70.0))
    tables = all_tables(read_runs([tmp_path / "a", tmp_path / "b"]))
    wanted = {"table2_base", "table8_context", "table3_base_vs_context"}
    for table in (t for t in tables if t.name in wanted):
        md = to_markdown(table)
        assert "Score (official)" in md and "authors' parser" in md
        assert "Score (official)" in to_csv(table).splitlines()[0]
        assert "Score (official)" in to_latex(table)
    table2 = next(t for t in tables if t.name == "table2_base")
    assert "| Qwen/X‡ |" in to_markdown(table2) and r"Qwen/X\ddag{}" in to_latex(table2)
    page = render_index(tables, [], {})
    assert "<td class='model'>Qwen/X‡</td>" in page and "<th scope='col'>Score (official)</th>" in page
    assert "authors&#x27; parser" in page and MISSES.replace("'", "&#x27;") in page


def test_cli_json_report_carries_both_scores(tmp_path: Path) -> None:
    _write(tmp_path / "a", tasks("hvcu_bench", full=60.0, official=58.0))
    assert main(["report", str(tmp_path / "a"), "--format", "json", "--out", str(tmp_path / "o")]) == 0
    table2 = next(t for t in json.loads((tmp_path / "o" / "report.json").read_text()) if t["name"] == "table2_base")
    ours = dict(zip(table2["columns"], table2["rows"][-1], strict=True))
    assert (ours["Model"], ours["Score"], ours["Score (official)"]) == ("Qwen/X‡", 60.0, 58.0)


@pytest.mark.slow
def test_real_lmms_eval_run_whose_replies_the_authors_parser_misses_is_flagged(tmp_path: Path) -> None:
    """Replay replies '(B)' for the aesthetic family (the authors' parser rejects them), bare letters elsewhere."""
    from conftest import run_lmms_eval, smoke_predictions

    def reply(family: str, lv) -> str:
        return f"({lv.answer})" if family == "aesthetic" else lv.answer

    predictions = smoke_predictions(tmp_path / "p.jsonl", reply)
    model_args = f"model=model-p,predictions={predictions}"
    run_lmms_eval(
        ["--model", "hvcu_replay", "--model_args", model_args, "--tasks", "hvcu_bench_sample"], tmp_path / "r"
    )
    assert main(["report", str(tmp_path / "r"), "--format", "json", "--out", str(tmp_path / "o")]) == 0
    table2 = next(t for t in json.loads((tmp_path / "o" / "report.json").read_text()) if t["name"] == "table2_base")
    ours = dict(zip(table2["columns"], table2["rows"][-1], strict=True))
    assert (ours["Model"], ours["Score"], ours["Score (official)"]) == ("model-p†‡", 100.0, 66.67)
    assert any(n.startswith("‡ model-p (base): Score 100.00") and MISSES in n for n in table2["notes"])


def test_the_flag_is_only_on_tables_that_explain_it(tmp_path: Path) -> None:
    (model,) = read_runs([_write(tmp_path, tasks("hvcu_bench", full=60.0, official=50.0))])
    tables = {t.name: t for t in all_tables([model], reference=False)}
    assert tables["table2_base"].rows[0][0] == "Qwen/X‡"
    assert [r[0] for r in tables["aspects_base"].rows] == ["Qwen/X"]
    assert {r[0] for r in tables["errors_base"].rows} == {"Qwen/X"}
