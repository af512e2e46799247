"""Outputs and inputs of `hvcu score`, `hvcu report` and `hvcu chains`: refused input, n/a values, safe files.

Expected values are written from the issue's spec: a formula cell gets a "'" prefix, LaTeX escapes all ten
special characters, NaN/null metrics show as "n/a" (JSON null), files are whole or absent, errors are one line.
"""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import full_disk, one_line_error, run

FAMILY_TASKS = ("impl", "aesth", "affect")
GOOD = {
    "acc_l1_perc": 90.0,
    "acc_l2_bridge": 80.0,
    "acc_l3_conn": 70.0,
    "acc_full": 60.0,
    "invalid_perc": 0.0,
    "invalid_bridge": 0.0,
    "invalid_conn": 0.0,
    "errors_at_perc": 1,
    "errors_at_bridge": 1,
    "errors_at_conn": 2,
    "error_share_perc": 25.0,
    "error_share_bridge": 25.0,
    "error_share_conn": 50.0,
    "n_chains": 10,
    "n_incomplete": 0,
    "n_failed_requests": 0,
}


def write_run(folder: Path, per_task: dict[str, dict], model: str = "Qwen/X", limit=None) -> Path:
    """Write an lmms-eval results file as lmms-eval does (json.dumps, so NaN is the bare token NaN)."""
    folder.mkdir(parents=True, exist_ok=True)
    results = {
        task: {"alias": task, **{f"{k},none": v for k, v in metrics.items()}, "acc_full_stderr,none": "N/A"}
        for task, metrics in per_task.items()
    }
    data = {"results": results, "config": {"model": "vllm", "model_args": f"model={model}", "limit": limit}}
    (folder / "20260101_000000_results.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def tasks(setting: str = "", **by_short: dict) -> dict[str, dict]:
    """The three family tasks of a setting ('' or '_context'), each GOOD unless overridden per short name."""
    return {f"hvcu_bench{setting}_{s}": {**GOOD, **by_short.get(s, {})} for s in FAMILY_TASKS}


def md_row(text: str, label: str, title_part: str) -> dict[str, str]:
    """The Markdown row whose first cell is `label`, in the table whose title contains `title_part`."""
    block = next(b for b in text.split("### ") if b and title_part in b.splitlines()[0])
    lines = [line for line in block.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split(" | ")]
    for line in lines[1:]:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if cells[0] == label:
            return dict(zip(header, cells, strict=True))
    raise AssertionError(f"no row {label!r} in {title_part!r}")


# --- hvcu report: CSV formula injection and LaTeX escapes ---------------------------------------------


@pytest.mark.parametrize("name", ['=HYPERLINK("http://evil")', "@SUM(A1)", "+cmd", "-2+3"])
def test_report_csv_neutralises_a_model_name_that_is_a_formula(tmp_path: Path, capsys, name: str) -> None:
    write_run(tmp_path / "run", tasks(), model=name)
    code, out, _err = run("report", str(tmp_path / "run"), "--format", "csv", "--no-reference", capsys=capsys)
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    first_cells = [r[0] for r in rows if r]
    assert "'" + name in first_cells
    assert name not in first_cells


def test_report_csv_keeps_negative_numbers_as_numbers(tmp_path: Path, capsys) -> None:
    official = {"acc_l1_perc_official": 90.0}
    write_run(tmp_path / "a", tasks(impl=official, aesth=official, affect=official), model="A")
    write_run(tmp_path / "b", tasks(impl={"acc_l1_perc_official": 80.0}, aesth=official, affect=official), model="B")
    code, out, _ = run(
        "report", str(tmp_path / "a"), str(tmp_path / "b"), "--compare", "--format", "csv", capsys=capsys
    )
    assert code == 0
    assert "-10.0" in [cell for row in csv.reader(io.StringIO(out)) for cell in row]


def test_report_latex_escapes_every_special_character(tmp_path: Path, capsys) -> None:
    write_run(tmp_path / "run", tasks(), model="a&b%c$d#e_f{g}h~i^j\\k")
    code, out, _ = run("report", str(tmp_path / "run"), "--format", "latex", "--no-reference", capsys=capsys)
    assert code == 0
    escaped = r"a\&b\%c\$d\#e\_f\{g\}h\textasciitilde{}i\textasciicircum{}j\textbackslash{}k"
    assert escaped in out


# --- hvcu report: metric values ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "why"),
    [("sixty", "not a number"), (True, "not a number"), ([60.0], "not a number"), (115.0, "0"), (-0.5, "0")],
)
def test_report_refuses_a_bad_percentage_naming_the_file(tmp_path: Path, capsys, value, why: str) -> None:
    write_run(tmp_path / "run", tasks(aesth={"acc_full": value}))
    code, _out, err = run("report", str(tmp_path / "run"), capsys=capsys)
    assert code == 2
    line = one_line_error(err)
    assert "20260101_000000_results.json" in line and "acc_full" in line and why in line


def test_report_refuses_a_negative_count(tmp_path: Path, capsys) -> None:
    write_run(tmp_path / "run", tasks(impl={"errors_at_perc": -3}))
    code, _out, err = run("report", str(tmp_path / "run"), capsys=capsys)
    assert code == 2
    assert "errors_at_perc" in one_line_error(err)


@pytest.mark.parametrize("missing", [float("nan"), None], ids=["NaN", "null"])
def test_report_shows_n_a_for_an_unavailable_metric_and_score_in_markdown(tmp_path: Path, capsys, missing) -> None:
    write_run(tmp_path / "run", tasks(aesth={"acc_full": missing, "acc_l1_perc": missing}))
    code, out, _ = run("report", str(tmp_path / "run"), "--no-reference", "--format", "md", capsys=capsys)
    assert code == 0
    row = md_row(out, "Qwen/X", "Table 2")
    assert row["Aesth. Acc_full"] == "n/a" and row["Aesth. Acc_perc"] == "n/a"
    assert row["Score"] == "n/a"
    assert row["Impl. Acc_full"] == "60.00"
    assert "nan" not in out.lower().replace("n/a", "")


def test_report_n_a_in_csv_and_latex_and_json(tmp_path: Path, capsys) -> None:
    write_run(tmp_path / "run", tasks(aesth={"acc_full": float("nan")}))
    base = ["report", str(tmp_path / "run"), "--no-reference"]
    _, out_csv, _ = run(*base, "--format", "csv", capsys=capsys)
    table2_csv = next(b for b in out_csv.split("\n\n") if b.startswith("Model,Impl. Acc_perc"))
    rows = list(csv.DictReader(io.StringIO(table2_csv)))
    assert rows[0]["Aesth. Acc_full"] == "n/a" and rows[0]["Score"] == "n/a"
    _, out_tex, _ = run(*base, "--format", "latex", capsys=capsys)
    assert "n/a" in out_tex and "nan" not in out_tex.replace("n/a", "")
    _, out_json, _ = run(*base, "--format", "json", capsys=capsys)

    def refuse(token: str):
        raise AssertionError(f"{token} in JSON output")

    table = next(t for t in json.loads(out_json, parse_constant=refuse) if t["name"] == "table2_base")
    row = table["rows"][0]
    assert row[table["columns"].index("Aesth. Acc_full")] is None
    assert row[table["columns"].index("Score")] is None
    assert row[table["columns"].index("Impl. Acc_full")] == 60.0


def test_report_n_a_in_the_error_table_is_not_nan_percent(tmp_path: Path, capsys) -> None:
    nan = float("nan")
    no_failure = {"errors_at_perc": 0, "errors_at_bridge": 0, "errors_at_conn": 0}
    shares = {"error_share_perc": nan, "error_share_bridge": nan, "error_share_conn": nan}
    write_run(tmp_path / "run", tasks(aesth={**no_failure, **shares, "acc_full": 100.0}))
    code, out, _ = run("report", str(tmp_path / "run"), "--no-reference", "--format", "md", capsys=capsys)
    assert code == 0
    assert "| Qwen/X | Aesth. | 0 | 0 (n/a) | 0 (n/a) | 0 (n/a) |" in out
    assert "nan" not in out.lower().replace("n/a", "")
    code, terminal, _ = run("report", str(tmp_path / "run"), "--no-reference", capsys=capsys)
    assert code == 0 and "0 (n/a)" in terminal
    assert "nan" not in terminal.lower().replace("n/a", "")


def test_report_html_and_figures_survive_n_a_values_in_both_settings(tmp_path: Path, capsys) -> None:
    nan = float("nan")
    limited = {"acc_l1_perc": nan, "acc_l2_bridge": nan, "acc_l3_conn": nan, "acc_full": nan, "full_metaphor": nan}
    write_run(tmp_path / "base", tasks(impl=limited), limit=2)
    write_run(tmp_path / "ctx", tasks("_context", impl=limited), limit=2)
    out_dir = tmp_path / "page"
    code, _out, err = run(
        "report",
        str(tmp_path / "base"),
        str(tmp_path / "ctx"),
        "--format",
        "html",
        "--out",
        str(out_dir),
        capsys=capsys,
    )
    assert code == 0, err
    page = (out_dir / "index.html").read_text(encoding="utf-8")
    assert "<td>n/a</td>" in page
    assert ">nan<" not in page.lower()
    assert (out_dir / "figures" / "scores_base_vs_context.svg").is_file()


# --- hvcu score -------------------------------------------------------------------------------------------


def authors_file(tmp_path: Path, turns: list[dict], sid: str = "metaphor_007") -> Path:
    path = tmp_path / "Implication-Understanding_results.json"
    path.write_text(json.dumps({"predictions": [{"id": sid, "conversation_turns": turns}]}), encoding="utf-8")
    return path


def turn(level, gold="A", key="A", **extra) -> dict:
    return {"level": level, "correct_answer_key": gold, "model_response_key": key, **extra}


@pytest.mark.parametrize("bad_level", [4, 0, "-1"])
def test_score_refuses_a_level_outside_1_to_3(tmp_path: Path, capsys, bad_level) -> None:
    path = authors_file(tmp_path, [turn(1), turn(2), turn(bad_level)])
    code, _out, err = run("score", str(path), capsys=capsys)
    assert code == 2
    assert str(path) in err and "id=metaphor_007" in err and "level" in err
    assert "Traceback" not in err


def test_score_refuses_a_gold_key_outside_a_to_d(tmp_path: Path, capsys) -> None:
    path = authors_file(tmp_path, [turn(1), turn(2, gold="E"), turn(3)])
    code, _out, err = run("score", str(path), capsys=capsys)
    assert code == 2
    assert str(path) in err and "id=metaphor_007" in err and "correct_answer_key" in err


def test_score_refuses_a_gold_key_outside_the_turns_own_options(tmp_path: Path, capsys) -> None:
    options = [{"option_key": k, "option_text": f"text {k}"} for k in "ABC"]
    path = authors_file(tmp_path, [turn(1), turn(2), turn(3, gold="D", options=options)])
    code, _out, err = run("score", str(path), capsys=capsys)
    assert code == 2
    assert str(path) in err and "correct_answer_key" in err and "'D'" in err


def test_score_reparse_without_raw_replies_is_an_error(tmp_path: Path, capsys) -> None:
    path = authors_file(tmp_path, [turn(1), turn(2), turn(3)])  # the release's files: parsed keys only
    code, _out, err = run("score", str(path), "--reparse", capsys=capsys)
    assert code == 2
    assert str(path) in err and "--reparse" in err
    assert "Traceback" not in err


# --- hvcu chains: --out, half-written files, broken pipe -----------------------------------------------------


def samples_file(folder: Path, n: int, broken_at: int | None = None) -> Path:
    """Write a base-setting lmms-eval samples file: n samples x 3 levels (line `broken_at` is not JSON)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n):
        for lv in (1, 2, 3):
            outcome = {"sample_id": f"metaphor_{i:04d}", "family": "implication", "aspect": "metaphor", "level": lv}
            outcome |= {"gold": "A", "pred": "A", "response": "A", "correct": True}
            entry = {"outcomes": [outcome], "question": f"question {lv} of sample {i}: " + "x" * 80}
            lines.append(json.dumps({"doc_id": 3 * i + lv, "filtered_resps": ["A"], "acc_full": entry}))
    if broken_at is not None:
        lines[broken_at] = "{not json"
    path = folder / "20260101_000000_samples_hvcu_bench_impl.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_chains_out_that_is_a_folder_is_one_clear_line(tmp_path: Path, capsys) -> None:
    samples_file(tmp_path / "run", 2)
    (tmp_path / "taken").mkdir()
    code, _out, err = run("chains", str(tmp_path / "run"), "--out", str(tmp_path / "taken"), capsys=capsys)
    assert code == 2
    assert str(tmp_path / "taken") in one_line_error(err)


def test_chains_out_is_never_left_half_written(tmp_path: Path, capsys) -> None:
    samples_file(tmp_path / "run", 50, broken_at=120)
    out = tmp_path / "chains.jsonl"
    out.write_text("previous\n", encoding="utf-8")
    code, _out, err = run("chains", str(tmp_path / "run"), "--out", str(out), capsys=capsys)
    assert code == 2 and ":121:" in one_line_error(err)
    assert out.read_text(encoding="utf-8") == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chains.jsonl", "run"]


def test_chains_out_on_a_full_disk_leaves_no_file_and_a_rerun_works(tmp_path: Path, capsys, monkeypatch) -> None:
    samples_file(tmp_path / "run", 5)
    out = tmp_path / "chains.jsonl"
    full_disk(monkeypatch, at_call=1)
    code, _out, err = run("chains", str(tmp_path / "run"), "--out", str(out), capsys=capsys)
    monkeypatch.undo()
    assert code != 0
    assert "No space left on device" in one_line_error(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    code, _out, _err = run("chains", str(tmp_path / "run"), "--out", str(out), capsys=capsys)
    assert code == 0 and len(out.read_text(encoding="utf-8").splitlines()) == 5


def test_chains_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    samples_file(tmp_path / "run", 3000)  # ~1 MB of chains: far more than a pipe buffer
    hvcu = Path(sys.executable).with_name("hvcu")
    command = f"'{hvcu}' chains '{tmp_path / 'run'}' 2>'{tmp_path / 'err.txt'}' | head -1"
    proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["sample_id"] == "metaphor_0000"
    assert (tmp_path / "err.txt").read_text() == ""


# --- hvcu report --out --------------------------------------------------------------------------------------


def test_report_out_that_is_a_file_is_one_clear_line(tmp_path: Path, capsys) -> None:
    write_run(tmp_path / "run", tasks())
    (tmp_path / "taken").write_text("keep me", encoding="utf-8")
    code, _out, err = run("report", str(tmp_path / "run"), "--out", str(tmp_path / "taken"), capsys=capsys)
    assert code == 2
    assert str(tmp_path / "taken") in one_line_error(err)
    assert (tmp_path / "taken").read_text(encoding="utf-8") == "keep me"


def test_report_out_on_a_full_disk_leaves_whole_files_only_and_a_rerun_works(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    write_run(tmp_path / "run", tasks())
    out = tmp_path / "tables"
    full_disk(monkeypatch, at_call=3)
    code, _out, err = run("report", str(tmp_path / "run"), "--format", "csv", "--out", str(out), capsys=capsys)
    monkeypatch.undo()
    assert code != 0 and "No space left on device" in one_line_error(err)
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    for table in out.glob("*.csv"):  # the two written before the disk filled up are whole
        assert table.read_text(encoding="utf-8").endswith("\n")
    code, _out, _err = run("report", str(tmp_path / "run"), "--format", "csv", "--out", str(out), capsys=capsys)
    assert code == 0
    _code, printed, _err = run("report", str(tmp_path / "run"), "--format", "csv", capsys=capsys)
    assert "".join(p.read_text(encoding="utf-8") for p in sorted(out.glob("*.csv"))) != ""
    assert (out / "table2_base.csv").read_text(encoding="utf-8") in printed


def test_report_json_output_is_strict_json_for_nan_scores(tmp_path: Path, capsys) -> None:
    write_run(tmp_path / "run", tasks(impl={"acc_full": float("nan")}))
    code, out, _ = run("report", str(tmp_path / "run"), "--format", "json", capsys=capsys)
    assert code == 0
    assert "NaN" not in out
    assert not any(isinstance(v, float) and math.isnan(v) for t in json.loads(out) for r in t["rows"] for v in r)


def test_chains_line_without_a_level_is_one_clear_line(tmp_path: Path, capsys) -> None:
    path = samples_file(tmp_path / "run", 2)
    lines = path.read_text(encoding="utf-8").splitlines()
    line = json.loads(lines[3])
    del line["acc_full"]["outcomes"][0]["level"]
    lines[3] = json.dumps(line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _out, err = run("chains", str(tmp_path / "run"), capsys=capsys)
    assert code == 2
    assert f"{path}:4:" in one_line_error(err) and "level" in err


def test_report_results_file_with_a_config_that_is_not_an_object_is_refused(tmp_path: Path, capsys) -> None:
    write_run(tmp_path / "run", tasks())
    path = tmp_path / "run" / "20260101_000000_results.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["config"] = "vllm"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, _out, err = run("report", str(tmp_path / "run"), capsys=capsys)
    assert code == 2 and str(path) in one_line_error(err)


def test_score_shows_n_a_when_no_chain_is_complete(tmp_path: Path, capsys) -> None:
    path = authors_file(tmp_path, [turn(1), turn(2)])  # level 3 never asked: no complete chain
    code, out, _ = run("score", str(path), "--format", "json", capsys=capsys)
    assert code == 0 and "NaN" not in out
    family = json.loads(out)[0]["families_official"]["implication"]
    assert family["acc_full"] is None and family["acc"]["conn"] is None and family["acc"]["perc"] == 100.0
    code, out, _ = run("score", str(path), capsys=capsys)
    assert code == 0 and "n/a" in out and "nan" not in out.replace("n/a", "")


def test_report_compare_with_an_n_a_value_shows_n_a_deltas(tmp_path: Path, capsys) -> None:
    official = {"acc_full_official": 60.0}  # --compare reads the authors' parser, as the board ranks
    write_run(tmp_path / "a", tasks(impl=official, aesth=official, affect=official), model="A")
    nan = {"acc_full_official": float("nan")}
    write_run(tmp_path / "b", tasks(impl=nan, aesth=official, affect=official), model="B")
    code, out, err = run(
        "report", str(tmp_path / "a"), str(tmp_path / "b"), "--compare", "--format", "md", capsys=capsys
    )
    assert code == 0, err
    row = md_row(out, "Impl.", "(B) vs")
    assert row["Acc_full A"] == "60.00" and row["Acc_full B"] == "n/a" and row["Acc_full Δ"] == "n/a"
    assert "Score (official): A 60.00, B n/a, Δ = B − A n/a" in out
