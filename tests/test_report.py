"""`hvcu report`: paper-layout tables from lmms-eval run folders, partial runs flagged, bad input refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hvcu_tasks.cli import main
from hvcu_tasks.report.reference import rows_for
from hvcu_tasks.report.tables import all_tables, base_vs_context_table, setting_table
from hvcu_tasks.results.runs import ReportError, read_runs

FULL = {"acc_l1_perc": 90.0, "acc_l2_bridge": 80.0, "acc_l3_conn": 70.0, "acc_full": 60.0, "n_incomplete": 0}


def write_results(folder: Path, tasks: dict[str, dict], model_args: str = "model=Qwen/X", limit=None) -> Path:
    """Write a minimal lmms-eval results file in lmms-eval's own layout."""
    folder.mkdir(parents=True, exist_ok=True)
    results = {t: {f"{k},none": v for k, v in m.items()} | {"alias": t} for t, m in tasks.items()}
    data = {"results": results, "config": {"model": "vllm", "model_args": model_args, "limit": limit}}
    path = folder / "20260101_000000_results.json"
    path.write_text(json.dumps(data))
    return folder


def families(prefix: str, **overrides: float) -> dict[str, dict]:
    return {f"{prefix}_{s}": {**FULL, **overrides} for s in ("impl", "aesth", "affect")}


def test_reference_rows_are_the_papers_tables() -> None:
    base, context = rows_for("base"), rows_for("context")
    assert [r.model for r in base][:2] == ["Human", "GPT-4o"] and len(base) == 14 and len(context) == 13
    gpt = base[1]
    assert gpt.families["implication"]["acc_l3_conn"] == 62.75 and gpt.score == 52.24
    assert all("Table 2" in r.source for r in base) and all("Table 8" in r.source for r in context)


def test_base_and_context_runs_of_one_model_merge_into_one_row(tmp_path: Path) -> None:
    write_results(tmp_path / "a", families("hvcu_bench"))
    write_results(tmp_path / "b", families("hvcu_bench_context", acc_full=70.0), "inner=openai,model=Qwen/X")
    (model,) = read_runs([tmp_path / "a", tmp_path / "b"])
    assert model.model == "Qwen/X" and model.score("base") == 60.0 and model.score("context") == 70.0
    table = base_vs_context_table([model], reference=False)
    assert table.rows[3][:3] == ["Qwen/X", "context", "Impl."] and table.rows[3][-3] == 10.0  # Δ Score


def test_a_results_file_with_the_level_accuracies_old_names_reads_as_today(tmp_path: Path) -> None:
    """Runs made before the levels were numbered (and the authors' files) hold acc_perc, acc_bridge, acc_conn."""
    old = {"acc_perc": 90.0, "acc_bridge": 80.0, "acc_conn": 70.0, "acc_full": 60.0, "n_incomplete": 0}
    old |= {"acc_perc_official": 85.0, "acc_bridge_official": 75.0, "acc_conn_official": 65.0}
    (model,) = read_runs([write_results(tmp_path, {f"hvcu_bench_{s}": old for s in ("impl", "aesth", "affect")})])
    assert model.settings["base"]["implication"].metrics == {
        **{"acc_l1_perc": 90.0, "acc_l2_bridge": 80.0, "acc_l3_conn": 70.0, "acc_full": 60.0, "n_incomplete": 0},
        **{"acc_l1_perc_official": 85.0, "acc_l2_bridge_official": 75.0, "acc_l3_conn_official": 65.0},
    }
    row = setting_table([model], "base", reference=False).rows[0]
    assert row[:5] == ["Qwen/X", 90.0, 80.0, 70.0, 60.0]  # Impl. Acc_perc, Acc_bridge, Acc_conn, Acc_full


def test_table2_puts_paper_rows_first_and_marks_them(tmp_path: Path) -> None:
    write_results(tmp_path, families("hvcu_bench"))
    table = setting_table(read_runs([tmp_path]), "base")
    assert table.rows[0][0] == "Human [paper]" and table.rows[-1][0] == "Qwen/X"
    assert table.rows[-1][-2] == 60.0  # Score; the last column is Score (official)
    assert any("Table 2" in n for n in table.notes)


def test_a_missing_family_is_partial_and_has_no_score(tmp_path: Path) -> None:
    tasks = families("hvcu_bench")
    del tasks["hvcu_bench_affect"]
    (model,) = read_runs([write_results(tmp_path, tasks)])
    assert model.score("base") is None and model.partial("base")
    table = setting_table([model], "base", reference=False)
    assert table.rows[0][0] == "Qwen/X*" and table.rows[0][-2] is None
    assert any("missing affective (no Overall Score)" in n for n in table.notes)


def test_a_limited_run_is_partial(tmp_path: Path) -> None:
    (model,) = read_runs([write_results(tmp_path, families("hvcu_bench"), limit=20)])
    assert model.partial("base") and "--limit 20" in model.notes["base"][0]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: None, "no such file or folder"),
        (lambda p: p.mkdir(), "no lmms-eval results file"),
        (lambda p: write_results(p, {"textvqa_val": {"exact_match": 50.0}}), "hold no HVCU-Bench task"),
        (lambda p: (p.mkdir(), (p / "x_results.json").write_text("{")), "not an lmms-eval results file"),
    ],
)
def test_bad_input_is_refused_with_the_folder_named(tmp_path: Path, setup, message: str) -> None:
    run = tmp_path / "run"
    setup(run)
    with pytest.raises(ReportError, match=message):
        read_runs([run])


@pytest.mark.parametrize(
    ("metric", "message"),
    [
        ("n_chains", "n_chains: an integer of 401 digits is not a count (a number from 0 to 10^12)"),
        ("acc_full", "acc_full: an integer of 401 digits is outside 0-100 (a percentage)"),
    ],
)
def test_a_401_digit_integer_in_a_results_file_is_one_line_naming_file_and_field(
    tmp_path: Path, capsys, metric: str, message: str
) -> None:
    # Python reads the integer exactly; turned into a float it would overflow
    write_results(tmp_path / "run", families("hvcu_bench", **{metric: 10**400}))
    (path,) = (tmp_path / "run").glob("*_results.json")
    assert main(["report", str(tmp_path / "run")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {path}: hvcu_bench_impl: ") and line.endswith(message)


def test_smoke_and_benchmark_runs_of_one_model_are_not_mixed(tmp_path: Path) -> None:
    write_results(tmp_path / "a", families("hvcu_bench"))
    write_results(tmp_path / "b", families("hvcu_bench_context_sample"))
    with pytest.raises(ReportError, match="mixes the smoke sample and the benchmark"):
        read_runs([tmp_path / "a", tmp_path / "b"])


def test_the_same_family_twice_is_refused(tmp_path: Path) -> None:
    write_results(tmp_path / "a", families("hvcu_bench"))
    write_results(tmp_path / "b", families("hvcu_bench"))
    with pytest.raises(ReportError, match="has base implication results twice"):
        read_runs([tmp_path / "a", tmp_path / "b"])


def test_cli_reports_errors_without_a_traceback(tmp_path: Path, capsys) -> None:
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    write_results(tmp_path / "a", families("hvcu_bench"))
    assert main(["report", str(tmp_path / "a"), "--format", "html"]) == 2
    assert "give --out DIR" in capsys.readouterr().err


def test_cli_writes_one_file_per_table(tmp_path: Path) -> None:
    write_results(tmp_path / "a", families("hvcu_bench"))
    write_results(tmp_path / "b", families("hvcu_bench_context", acc_full=70.0))
    assert (
        main(["report", str(tmp_path / "a"), str(tmp_path / "b"), "--format", "csv", "--out", str(tmp_path / "o")]) == 0
    )
    names = sorted(p.name for p in (tmp_path / "o").iterdir() if p.is_file())
    tables = all_tables(read_runs([tmp_path / "a", tmp_path / "b"]))
    assert names == sorted(["leaderboard.csv", "leaderboard.json", *[f"{t.name}.csv" for t in tables]])
    assert "table3_base_vs_context.csv" in names
    figures = sorted(p.name for p in (tmp_path / "o" / "figures").iterdir())
    assert figures == sorted(
        f"{stem}.{ext}"
        for stem in (
            "degradation_base",
            "degradation_context",
            "aspects_base",
            "aspects_context",
            "scores_base_vs_context",
        )
        for ext in ("png", "svg")
    )
    json_out = tmp_path / "j"
    assert main(["report", str(tmp_path / "a"), "--format", "json", "--out", str(json_out)]) == 0
    tables = json.loads((json_out / "report.json").read_text())
    assert [t["name"] for t in tables[:2]] == ["leaderboard", "table2_base"] and tables[1]["rows"][-1][-2] == 60.0


def test_general_benchmarks_fill_the_per_model_view_in_percent(tmp_path: Path) -> None:
    from hvcu_tasks.report.render import report_tables

    mmstar = {
        "coarse perception": 0.77,
        "fine-grained perception": 0.6,
        "instance reasoning": 0.7,
        "logical reasoning": 0.5,
        "science & technology": 0.4,
        "math": 0.3,
        "average": 0.545,
    }
    tasks = {
        "mmstar": mmstar,
        "mmmu_val": {"mmmu_acc": 0.4856},
        "mmbench_en_dev": {"gpt_eval_score": 83.93},  # lmms-eval writes MMBench and HallusionBench in percent
        "hallusion_bench_image": {"aAcc": 60.25, "qAcc": 36.48, "fAcc": 36.7133},
        **families("hvcu_bench", acc_full_official=60.0),
    }
    (model,) = read_runs([write_results(tmp_path, tasks)])
    (table,) = [t for t in report_tables([model]) if t.name == "per_model"]
    rows = {r[0]: dict(zip(table.columns, r, strict=True)) for r in table.rows}
    paper = rows["Qwen3-VL-Instruct (4B)"]  # the paper's model named as on the leaderboard (Table 2)
    assert paper["Score (official)"] == 41.24 and paper["MMBench Avg."] == 77.88 and paper["Source"] == "[paper]"
    assert rows["Qwen3-VL-4B-Bridge"]["Score (official)"] == 47.41  # Table 6
    ours = rows["Qwen/X"]
    assert ours["Score (official)"] == 60.0 and ours["Context (official)"] is None
    assert ours["MMStar CP"] == pytest.approx(77.0) and ours["MMMU Acc"] == pytest.approx(48.56)
    assert ours["MMBench EN(Dev)"] == 83.93 and ours["MMBench CN(Dev)"] is None and ours["MMBench Avg."] is None
    assert ours["HallusionBench qAcc"] == 36.48 and ours["HallusionBench fAcc"] == 36.7133


def test_a_run_of_general_benchmarks_only_is_accepted(tmp_path: Path) -> None:
    (model,) = read_runs([write_results(tmp_path, {"mmmu_val": {"mmmu_acc": 0.5}})])
    assert model.general == {"mmmu_val": {"mmmu_acc": 0.5}} and not model.settings


def test_figures_are_written_as_png_and_reproducible_svg(tmp_path: Path) -> None:
    from PIL import Image

    from hvcu_tasks.report.figures import all_figures

    write_results(tmp_path / "a", families("hvcu_bench") | {"hvcu_bench_impl": {**FULL, "full_metaphor": 40.0}})
    write_results(tmp_path / "b", families("hvcu_bench_context", acc_full=70.0))
    models = read_runs([tmp_path / "a", tmp_path / "b"])
    first = all_figures(models, tmp_path / "f1")
    second = all_figures(models, tmp_path / "f2")
    svgs = [p for p in first if p.suffix == ".svg"]
    assert len(svgs) == 5
    for one, two in zip(first, second, strict=True):
        if one.suffix == ".svg":
            assert one.read_text() == two.read_text(), one.name
        else:
            with Image.open(one) as img:
                assert img.width > 300 and img.height > 200


def test_a_markdown_footnote_starting_with_the_partial_mark_is_not_a_nested_list() -> None:
    from hvcu_tasks.report.render import to_markdown
    from hvcu_tasks.report.tables import Table

    table = Table(name="t", title="T", columns=["Model", "Score"], rows=[["m*", 1.0]], notes=["* m (base): subset"])
    assert to_markdown(table).endswith("\n- \\* m (base): subset\n")


def test_each_file_of_a_run_folder_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_chains import BASE_LINES, BASE_TASK, write_lines

    from hvcu_tasks.results.runs import read_folders

    folder = write_results(tmp_path / "run", {BASE_TASK: {**FULL, "n_chains": 2}})
    samples = write_lines(folder / f"20260101_000000_samples_{BASE_TASK}.jsonl", BASE_LINES)
    read: list[Path] = []
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: read.append(self) or real(self, *a, **k))
    found = read_folders([folder])
    assert read == [samples]  # the results file is read through jsonio (open), the samples file once
    (log,) = found.logs
    assert log.path == samples and log.model == "Qwen/X"
    complete = {c["sample_id"]: c["chain_correct"] for c in log.chains if c["chain_correct"] is not None}
    assert found.models[0].chains["base"]["aesthetic"] == complete  # the board's verdicts: from that one read
