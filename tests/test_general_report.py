"""`hvcu report` on general-benchmark results written by hand in lmms-eval's layout: what is marked, kept, refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import one_line_error, run
from scipy.stats import binomtest

from hvcu_tasks.cli import main

STAMP = "20260101_000000"
MMSTAR = {  # a subset: CP from two l2 categories (50), the other five from one each; lmms-eval's average is 5 / 7
    "coarse perception": 0.5,
    "fine-grained perception": 1.0,
    "instance reasoning": 1.0,
    "logical reasoning": 0.0,
    "science & technology": 1.0,
    "math": 1.0,
    "average": 5 / 7,
}
HVCU = {
    f"hvcu_bench_{s}": {
        "acc_l1_perc": 90.0,
        "acc_l2_bridge": 80.0,
        "acc_l3_conn": 70.0,
        "acc_full": 60.0,
        "n_incomplete": 0,
    }
    | {"acc_full_official": 60.0, "n_chains": 10}
    for s in ("impl", "aesth", "affect")
}


def write_run(folder: Path, tasks: dict[str, dict], model: str = "org/m", limit: int | None = None, **extra) -> Path:
    """Write an lmms-eval results file (`extra`: other top-level fields, e.g. n-samples) into `folder/model`."""
    results = {t: {f"{k},none": v for k, v in m.items()} | {"alias": t} for t, m in tasks.items()}
    data = {"results": results, "config": {"model": "vllm", "model_args": f"model={model}", "limit": limit}, **extra}
    out = folder / model.replace("/", "__")
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{STAMP}_results.json").write_text(json.dumps(data), encoding="utf-8")
    return out


def tables_of(tmp_path: Path, *args: str) -> dict[str, dict]:
    """Run `hvcu report ARGS --format json --out DIR`; return its tables by name."""
    out = tmp_path / "report"
    assert main(["report", *args, "--format", "json", "--out", str(out)]) == 0
    return {t["name"]: t for t in json.loads((out / "report.json").read_text())}


def row_of(table: dict, label: str) -> dict:
    """Return a table's row whose first cell is `label`, as {column: cell}."""
    (row,) = [r for r in table["rows"] if r[0] == label]
    return dict(zip(table["columns"], row, strict=True))


def test_a_limit_run_marks_its_general_benchmarks_partial(tmp_path: Path) -> None:
    runs = write_run(tmp_path / "runs", {"mmstar": MMSTAR, "mmmu_val": {"mmmu_acc": 0.5}}, limit=4)
    view = tables_of(tmp_path, str(runs))["per_model"]
    row = row_of(view, "org/m*")  # the label carries the mark; the notes say why
    assert row["MMMU Acc"] == 50.0
    assert "org/m*: general: mmstar ran on a subset (--limit 4); mmmu_val ran on a subset (--limit 4)" in view["notes"]


def test_a_full_run_of_the_general_benchmarks_is_not_marked(tmp_path: Path) -> None:
    runs = write_run(tmp_path / "runs", {"mmmu_val": {"mmmu_acc": 0.5}})
    view = tables_of(tmp_path, str(runs))["per_model"]
    assert row_of(view, "org/m")["MMMU Acc"] == 50.0


def test_a_published_board_keeps_every_models_general_numbers(tmp_path: Path) -> None:
    first = write_run(tmp_path / "runs", {"mmstar": MMSTAR, "mmbench_en_dev": {"gpt_eval_score": 62.5}} | HVCU)
    assert main(["report", str(first), "--format", "json", "--out", str(tmp_path / "pub")]) == 0
    second = write_run(tmp_path / "runs2", {"mmmu_val": {"mmmu_acc": 0.25}} | HVCU, model="org/n")
    view = tables_of(tmp_path, "--base", str(tmp_path / "pub" / "leaderboard.json"), str(second))["per_model"]
    kept = row_of(view, "org/m")
    assert kept["MMStar Avg."] == pytest.approx(500 / 7) and kept["MMBench EN(Dev)"] == 62.5
    assert kept["MMStar CP"] == 50.0 and row_of(view, "org/n")["MMMU Acc"] == 25.0


def test_the_mmstar_note_says_how_its_average_differs_from_the_papers_on_a_subset(tmp_path: Path) -> None:
    view = tables_of(tmp_path, str(write_run(tmp_path / "runs", {"mmstar": MMSTAR})))["per_model"]
    assert row_of(view, "org/m")["MMStar Avg."] == pytest.approx(71.43, abs=0.005)
    notes = "\n".join(view["notes"])
    assert "the paper's Table 7 Avg. is the mean of the six category columns" in notes
    assert "agree on the whole MMStar and differ on any subset" in notes
    assert (  # (50 + 100 + 100 + 0 + 100 + 100) / 6 = 75
        "org/m: MMStar Avg. 71.43 (lmms-eval's mean over its l2 categories); the mean of its six category columns, "
        "as the paper computes Table 7's, is 75.00." in view["notes"]
    )


def test_an_mmstar_average_equal_to_its_six_columns_gets_no_line_of_its_own(tmp_path: Path) -> None:
    even = dict.fromkeys(MMSTAR, 0.5)
    view = tables_of(tmp_path, str(write_run(tmp_path / "runs", {"mmstar": even})))["per_model"]
    assert not [n for n in view["notes"] if n.startswith("org/m: MMStar Avg.")]


def test_mmbenchs_own_results_files_beside_the_run_are_not_read_as_runs(tmp_path: Path) -> None:
    runs = write_run(tmp_path / "runs", {"mmbench_en_dev": {"gpt_eval_score": 50.0}})
    (tmp_path / "runs" / "submissions").mkdir()  # lmms-eval's MMBench aggregation writes its details here
    (tmp_path / "runs" / "submissions" / "mmbench_en_dev_results.json").write_text('{"overall_acc": 0.5}')
    view = tables_of(tmp_path, str(tmp_path / "runs"))["per_model"]
    assert row_of(view, "org/m")["MMBench EN(Dev)"] == 50.0 and runs.is_dir()


def test_without_sample_logs_mmmu_gets_the_exact_interval_of_its_document_count(tmp_path: Path) -> None:
    counts = {"n-samples": {"mmmu_val": {"original": 900, "effective": 20}}}
    view = tables_of(tmp_path, str(write_run(tmp_path / "runs", {"mmmu_val": {"mmmu_acc": 0.45}}, **counts)))
    ci = binomtest(9, 20).proportion_ci(0.95, "exact")  # 45% of 20 questions
    assert row_of(view["per_model"], "org/m")["MMMU Acc 95% CI"] == f"[{100 * ci.low:.2f}, {100 * ci.high:.2f}]"


def test_without_sample_logs_mmstar_has_no_interval(tmp_path: Path) -> None:
    counts = {"n-samples": {"mmstar": {"original": 1500, "effective": 1500}}}
    view = tables_of(tmp_path, str(write_run(tmp_path / "runs", {"mmstar": MMSTAR}, **counts)))
    assert row_of(view["per_model"], "org/m")["MMStar Avg. 95% CI"] is None  # its l2 categories' counts are unknown


def mmmu_line(doc_id: str, answer: str, reply: str) -> dict:
    """One mmmu_val samples line as lmms-eval 0.7.3 logs it."""
    record = {"id": doc_id, "subdomain": "Art", "question_type": "multiple-choice", "answer": answer}
    return {"doc_id": 0, "mmmu_acc": record | {"parsed_pred": [reply]}}


def test_a_sample_log_that_cannot_give_the_results_value_is_refused(tmp_path: Path, capsys) -> None:
    runs = write_run(tmp_path / "runs", {"mmmu_val": {"mmmu_acc": 0.75}})
    lines = [mmmu_line("validation_Art_1", "A", "A"), mmmu_line("validation_Art_2", "B", "C")]
    (runs / f"{STAMP}_samples_mmmu_val.jsonl").write_text("\n".join(map(json.dumps, lines)))
    code, _out, err = run("report", str(runs), capsys=capsys)
    assert code == 2
    assert "MMMU Acc is 75.00 in the results file, but its sample logs give 50.00 (2 units)" in one_line_error(err)


def test_a_hallusionbench_log_judged_on_another_runs_replies_is_refused(tmp_path: Path, capsys) -> None:
    """lmms-eval keeps the judge's verdicts in OUTPUT_PATH/gpt_response/ and reuses them for the next model."""
    runs = write_run(tmp_path / "runs", {"hallusion_bench_image": {"aAcc": 100.0, "qAcc": 100.0, "fAcc": 100.0}})
    record = {"category": "VD", "subcategory": "illusion", "set_id": "0", "figure_id": "0", "question_id": "0"}
    (runs / f"{STAMP}_samples_hallusion_bench_image.jsonl").write_text(
        json.dumps({"doc_id": 0, "aAcc": record | {"model_prediction": "No."}}) + "\n"
    )
    (tmp_path / "runs" / "gpt_response").mkdir()
    earlier = [record | {"model_prediction": "Yes.", "gpt4v_output_gpt_check": "1"}]
    (tmp_path / "runs" / "gpt_response" / "hallusion_output_vd_model.json").write_text(json.dumps(earlier))
    code, _out, err = run("report", str(runs), capsys=capsys)
    assert code == 2
    line = one_line_error(err)
    assert (
        "_samples_hallusion_bench_image.jsonl:1: the judge's verdict is on another reply than this run's ('No.')"
        in line
    )
    assert "rerun hallusion_bench_image with an --output_path of its own" in line


def test_a_general_only_run_is_on_the_board_without_a_rank(tmp_path: Path) -> None:
    tables = tables_of(tmp_path, str(write_run(tmp_path / "runs", {"mmmu_val": {"mmmu_acc": 0.5}})))
    board = [dict(zip(tables["leaderboard"]["columns"], r, strict=True)) for r in tables["leaderboard"]["rows"]]
    (ours,) = [r for r in board if r["Model"] == "org/m"]
    assert ours["Rank"] == "–" and ours["Score (official)"] is None  # kept in leaderboard.json with its numbers


def test_a_published_board_with_a_general_value_outside_0_100_is_refused(tmp_path: Path, capsys) -> None:
    runs = write_run(tmp_path / "runs", {"mmmu_val": {"mmmu_acc": 0.5}})
    assert main(["report", str(runs), "--format", "json", "--out", str(tmp_path / "pub")]) == 0
    board = tmp_path / "pub" / "leaderboard.json"
    data = json.loads(board.read_text())
    n = next(i for i, e in enumerate(data["entries"]) if e["model"] == "org/m")
    data["entries"][n]["general"]["MMMU Acc"] = 140
    board.write_text(json.dumps(data))
    code, _out, err = run("report", str(runs), "--base", str(board), capsys=capsys)
    assert code == 2
    assert f"entries[{n}].general.MMMU Acc: 140 is outside 0-100 (a percentage)" in one_line_error(err)


def test_compare_without_sample_logs_compares_the_counts_unpaired(tmp_path: Path) -> None:
    counts = {"n-samples": {"mmmu_val": {"original": 900, "effective": 20}}}
    a = write_run(tmp_path / "runs", {"mmmu_val": {"mmmu_acc": 0.45}} | HVCU, model="org/base", **counts)
    b = write_run(tmp_path / "runs", {"mmmu_val": {"mmmu_acc": 0.6}} | HVCU, model="org/tuned", **counts)
    rows = tables_of(tmp_path, str(a), str(b), "--compare")["compare_general"]
    mmmu = row_of(rows, "MMMU Acc")
    # Agresti–Caffo: (12 + 1) / 22 - (9 + 1) / 22 = 13.64 points ± 1.96 * sqrt(pa qa / 22 + pb qb / 22)
    pa, pb = 10 / 22, 13 / 22
    half = 1.959964 * (pa * (1 - pa) / 22 + pb * (1 - pb) / 22) ** 0.5
    assert (mmmu["A"], mmmu["B"], mmmu["Δ (B − A)"]) == (45.0, 60.0, 15.0)
    assert mmmu["95% CI"] == f"[{100 * (pb - pa - half):.2f}, {100 * (pb - pa + half):.2f}]"
    assert mmmu["Method"] == "unpaired, from the counts"
    base = row_of(rows, "HVCU-Bench Score (official), base")  # 6 of 10 chains per family, from Acc_full and n_chains
    assert (base["Δ (B − A)"], base["Method"]) == (0.0, "unpaired, from the counts")
