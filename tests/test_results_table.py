"""The table lmms-eval prints fits one screen, the Overall Score first; `hvcu report` keeps every diagnostic.

The family tasks report to lmms-eval only the paper's accuracies (both parsers) and the counts n_chains,
n_incomplete, n_failed_requests; the diagnostics come from the --log_samples files. A run made the old way
(every metric reported, as before issue 27) and one made the new way on the same replies must give the same
report, cell for cell.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import lmms_worker
import pytest
from conftest import BIN, REPO, SMOKE_REPLIES, SMOKE_SCORE

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.data.loaders import load_source

pytestmark = pytest.mark.slow

# Written from the issue: what a family task prints (lmms-eval sorts a task's rows by name): the full chain first,
# then the levels in chain order, then the counts.
PRINTED_PER_FAMILY = [
    "acc_full",
    "acc_full_official",
    "acc_l1_perc",
    "acc_l1_perc_official",
    "acc_l2_bridge",
    "acc_l2_bridge_official",
    "acc_l3_conn",
    "acc_l3_conn_official",
    "n_chains",
    "n_failed_requests",
    "n_incomplete",
]
DEMO_TASKS = "hvcu_bench_sample,hvcu_bench_context_sample"  # the Makefile's demo target
UNPARSABLE = "I cannot tell from this picture."
TASKS = "hvcu_bench_sample,hvcu_bench_context_sample,hvcu_analysis_sample"


def write_predictions(path: Path) -> Path:
    """The replay file of SMOKE_REPLIES (conftest): one line per (family, sample, level)."""
    lines = []
    for family in FAMILIES:
        for s in load_source("smoke", family).raise_for_problems():
            for lv, reply in zip(s.levels, SMOKE_REPLIES[(family, s.id)], strict=True):
                line = {"family": family, "sample_id": s.id, "level": lv.level, "response": reply or UNPARSABLE}
                lines.append(json.dumps(line))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def lmms_eval(args: list[str], out: Path, pythonpath: str | None = None) -> tuple[str, Path]:
    """Run lmms-eval; return what it printed and its results file.

    With `pythonpath` (another copy of the package) the real CLI runs with it first on the path; without, this
    checkout's package runs in a forked child of the test worker's lmms-eval (tests/lmms_worker.py), as the CLI would.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [*args, "--output_path", str(out)]
    if pythonpath is None:
        proc = lmms_worker.POOL.run(argv, dict(os.environ), out.parent, timeout=900)
    else:
        env = {**os.environ, "PYTHONPATH": pythonpath}
        cmd = [str(BIN / "lmms-eval"), *argv]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, cwd=out.parent)
    found = sorted(out.rglob("*_results.json"))
    assert found, f"no results file (rc={proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout, found[0]


def printed_tables(stdout: str) -> list[list[list[str]]]:
    """Return the markdown tables lmms-eval printed: per table, its data rows as lists of cells."""
    tables: list[list[list[str]]] = []
    previous_was_table = False
    for line in stdout.splitlines():
        is_table = line.startswith("|")
        if is_table and not previous_was_table:
            tables.append([])
        if is_table:
            tables[-1].append([c.strip() for c in line.strip("|").split("|")])
        previous_was_table = is_table
    return [rows[2:] for rows in tables]  # header and separator lines off


@pytest.fixture(scope="module")
def old_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of hvcu_tasks whose family tasks report every metric to lmms-eval, as before issue 27."""
    root = tmp_path_factory.mktemp("old_package")
    shutil.copytree(REPO / "hvcu_tasks", root / "hvcu_tasks", ignore=shutil.ignore_patterns("__pycache__"))
    core = root / "hvcu_tasks" / "core"
    imports = "\n\nfrom hvcu_tasks.core.families import ASPECTS as _ASPECTS\n"
    imports += "from hvcu_tasks.results import scores as _s\n"
    old_way = {  # every metric a task's aggregations (then) reported, each family task its own aspects
        "metrics.py": "_ALL = [a for v in _ASPECTS.values() for a in v]\n"
        "TABLE_METRICS = tuple(dict.fromkeys((*TABLE_METRICS, *_s.metric_names(_ALL), *_s.circular_metric_names())))\n"
        "score_table = lambda outcomes: _s.family_metrics(outcomes, _ALL)\n"
        "score_circular = _s.circular_metrics\n",
        "payloads.py": "_payloads = payloads\n"
        "def payloads(outcomes, log_entry, identity, tag=None):\n"
        "    names = _s.circular_metric_names() if tag else _s.metric_names(_ASPECTS[outcomes[0].family])\n"
        "    return {n: v for n, v in _payloads(outcomes, log_entry, identity, tag).items() if n in names}\n",
    }
    for name, code in old_way.items():
        (core / name).write_text((core / name).read_text(encoding="utf-8") + imports + code, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "-m", "hvcu_tasks.lmms.taskgen"], check=True, env=env, cwd=root)
    return root


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, old_package: Path) -> dict[str, tuple[str, Path]]:
    """The same replies run the old way (every metric reported) and the new way, both with --log_samples."""
    root = tmp_path_factory.mktemp("old_and_new")
    predictions = write_predictions(root / "replies.jsonl")
    args = ["--model", "hvcu_context", "--model_args", f"inner=hvcu_replay,predictions={predictions}"]
    args += ["--tasks", TASKS, "--log_samples"]
    return {
        "old": lmms_eval(args, root / "old" / "out", str(old_package)),
        "new": lmms_eval(args, root / "new" / "out"),
    }


@pytest.fixture(scope="module")
def demo(runs: dict[str, tuple[str, Path]]) -> tuple[list[list[str]], list[list[str]]]:
    """The results and groups tables lmms-eval printed for the demo's tasks, from the new-way run (the demo's wrapper
    around the replay model): its hvcu_analysis_sample block prints first (by name), then the demo's two groups."""
    results_rows, group_rows = printed_tables(runs["new"][0])
    first = [i for i, r in enumerate(results_rows) if r[0].startswith(tuple(DEMO_TASKS.split(",")))][0]
    return results_rows[first:], [r for r in group_rows if r[0].startswith(tuple(DEMO_TASKS.split(",")))]


def test_hvcu_bench_sample_prints_at_most_40_rows_the_overall_score_first(tmp_path: Path) -> None:
    predictions = write_predictions(tmp_path / "replies.jsonl")
    args = ["--model", "hvcu_replay", "--model_args", f"predictions={predictions}", "--tasks", "hvcu_bench_sample"]
    stdout, _results = lmms_eval(args, tmp_path / "out")
    results_rows, group_rows = printed_tables(stdout)
    assert len(results_rows) + len(group_rows) <= 40
    first = results_rows[0]
    assert (first[0], first[3], float(first[5])) == ("hvcu_bench_sample: Overall Score", "acc_full", SMOKE_SCORE)
    assert [(r[0], r[3]) for r in group_rows] == [
        ("hvcu_bench_sample: Overall Score", "acc_full"),
        ("hvcu_bench_sample: Overall Score", "acc_full_official"),
    ]
    for short in ("impl", "aesth", "affect"):
        rows = [r[3] for r in results_rows if r[0] == f"- hvcu_bench_sample_{short}"]
        assert rows == PRINTED_PER_FAMILY, short


def test_the_demo_prints_each_settings_block_first_with_its_overall_score_named(demo) -> None:
    results_rows, group_rows = demo
    # lmms-eval orders the groups by name: the context setting's block first (README, "Reading the results")
    blocks = [(r[0], r[3], float(r[5])) for r in results_rows if not r[0].startswith("- ")]
    assert blocks == [
        ("hvcu_bench_context_sample: Overall Score", "acc_full", SMOKE_SCORE),  # the replay answers alike in both
        ("hvcu_bench_context_sample: Overall Score", "acc_full_official", SMOKE_SCORE),
        ("hvcu_bench_sample: Overall Score", "acc_full", SMOKE_SCORE),
        ("hvcu_bench_sample: Overall Score", "acc_full_official", SMOKE_SCORE),
    ]
    assert [(r[0], r[3], float(r[5])) for r in group_rows] == blocks
    assert results_rows[35][0] == "hvcu_bench_sample: Overall Score"  # its block: 2 rows and 3 families of 11


def test_the_demo_prints_each_familys_levels_in_chain_order_after_the_full_chain(demo) -> None:
    results_rows, _groups = demo
    for group in ("hvcu_bench_sample", "hvcu_bench_context_sample"):
        for short in ("impl", "aesth", "affect"):
            rows = [r[3] for r in results_rows if r[0] == f"- {group}_{short}"]
            assert rows == PRINTED_PER_FAMILY, (group, short)


def test_the_demo_prints_an_arrow_on_every_accuracy_and_none_on_a_count(demo) -> None:
    results_rows, group_rows = demo
    rows = results_rows + group_rows
    assert {r[4] for r in rows if r[3].startswith("acc_")} == {"↑"}
    assert {r[3] for r in rows if r[3].startswith("n_")} == {"n_chains", "n_failed_requests", "n_incomplete"}
    assert {r[4] for r in rows if r[3].startswith("n_")} == {""}  # a count has no better direction


def test_the_readme_names_the_rows_the_demo_prints_as_the_overall_scores(demo) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Reading the results") :].split("\n## ")[0]
    named = set(re.findall(r"`([a-z_]+_sample: Overall Score)`", section))
    assert named == {"hvcu_bench_sample: Overall Score", "hvcu_bench_context_sample: Overall Score"}
    assert named == {r[0] for r in demo[0] if not r[0].startswith("- ")}


def test_the_old_way_printed_every_metric(runs: dict[str, tuple[str, Path]]) -> None:
    """The old-way run is what lmms-eval printed before: 37-39 rows per family (the check that it is the old way)."""
    old_rows = printed_tables(runs["old"][0])[0]
    impl = [r for r in old_rows if r[0] == "- hvcu_bench_sample_impl"]
    assert len(impl) == 8 + 3 + 6 + 3 + 5 + 9 + 4  # accuracies, invalid, attribution, counts, aspects, position, prop.
    new_rows = printed_tables(runs["new"][0])[0]
    for group in ("hvcu_bench_sample", "hvcu_bench_context_sample", "hvcu_bench_blind_sample"):
        block = [r for r in new_rows if r[0] == group or r[0].startswith(f"- {group}_")]
        assert len(block) <= 40, group


def _same(a: object, b: object) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def report_of(results_file: Path) -> dict[str, dict]:
    """Every table `hvcu report` makes of a run: name -> columns, rows, notes."""
    from hvcu_tasks.report.analysis import analysis_tables
    from hvcu_tasks.report.render import report_tables
    from hvcu_tasks.results.runs import read_folders, read_runs

    folder = results_file.parent
    tables = report_tables(read_runs([folder])) + analysis_tables(read_folders([folder]).analysis)
    return {t.name: {"columns": t.columns, "rows": t.rows, "notes": t.notes} for t in tables}


def assert_same_report(old: dict[str, dict], new: dict[str, dict]) -> None:
    """Every table of two reports has the same columns, notes and cells (NaN equal to NaN)."""
    assert sorted(old) == sorted(new)
    for name in old:
        assert new[name]["columns"] == old[name]["columns"], name
        assert new[name]["notes"] == old[name]["notes"], name
        assert len(new[name]["rows"]) == len(old[name]["rows"]), name
        for i, (row_old, row_new) in enumerate(zip(old[name]["rows"], new[name]["rows"], strict=True)):
            for j, (a, b) in enumerate(zip(row_old, row_new, strict=True)):
                assert _same(a, b), (name, i, old[name]["columns"][j], a, b)


def test_hvcu_report_shows_the_same_numbers_as_before_cell_for_cell(runs: dict[str, tuple[str, Path]]) -> None:
    old_results, new_results = runs["old"][1], runs["new"][1]
    assert "errors_at_perc,none" in json.loads(old_results.read_text())["results"]["hvcu_bench_sample_impl"]
    assert "errors_at_perc,none" not in json.loads(new_results.read_text())["results"]["hvcu_bench_sample_impl"]
    old, new = report_of(old_results), report_of(new_results)
    assert {"aspects_base", "errors_base", "analysis_position", "analysis_propagation"} <= set(new)
    assert_same_report(old, new)


def test_a_run_written_with_the_old_level_accuracy_names_reports_the_same(
    runs: dict[str, tuple[str, Path]], tmp_path: Path
) -> None:
    """A run made before the levels' accuracies were numbered and the diagnostics left the results file: acc_perc,
    acc_bridge, acc_conn (and plain_acc_*) in its results file and sample logs; `hvcu report` reads it as today's."""
    results = runs["old"][1]
    folder = shutil.copytree(results.parent, tmp_path / "old_names")
    for path in folder.rglob("*.json*"):
        text = path.read_text(encoding="utf-8")
        for level, name in (1, "perc"), (2, "bridge"), (3, "conn"):
            text = text.replace(f"acc_l{level}_{name}", f"acc_{name}")
        path.write_text(text, encoding="utf-8")
    old_text = (folder / results.name).read_text(encoding="utf-8")
    assert '"acc_perc,none"' in old_text and '"acc_conn_official,none"' in old_text and "acc_l1" not in old_text
    assert '"plain_acc_bridge,none"' in old_text  # a circular task's diagnostic, then a metric
    assert_same_report(report_of(folder / results.name), report_of(runs["new"][1]))


def _row(table: dict, *first: str) -> dict[str, object]:
    (row,) = [r for r in table["rows"] if tuple(r[: len(first)]) == first]
    return dict(zip(table["columns"], row, strict=True))


def test_the_diagnostics_of_implication_are_the_hand_computed_numbers(runs: dict[str, tuple[str, Path]]) -> None:
    """SMOKE_REPLIES, implication (gold B A C, A D B, C A B, D B A, C C B):
    metaphor BAC all right; symbolism BDB L1 wrong; contrast CBB L2 wrong; exaggeration DBC L3 wrong;
    dislocation CC? L3 unparsable (wrong, invalid). Full chain 1/5; first wrong: perc 1, bridge 1, conn 2 of 4.
    """
    report = report_of(runs["new"][1])
    model = "hvcu_replay†"  # the smoke sample's mark
    aspects = _row(report["aspects_base"], model)
    assert [aspects[a] for a in ("metaphor", "symbolism", "contrast", "exaggeration", "dislocation")] == [
        100.0, 0.0, 0.0, 0.0, 0.0
    ]  # fmt: skip
    errors = _row(report["errors_base"], model, "Impl.")
    assert errors["Failed"] == 4
    assert [errors[f"first wrong: {n}"] for n in ("perc", "bridge", "conn")] == [
        "1 (25.00%)",
        "1 (25.00%)",
        "2 (50.00%)",
    ]
    assert [errors[f"invalid {n} %"] for n in ("perc", "bridge", "conn")] == [0.0, 0.0, 20.0]
    # 14 parsed replies: letters A 1, B 6, C 5, D 2; their golds A 4, B 4, C 4, D 2; bias (3 + 2 + 1 + 0) / 2 / 14.
    position = _row(report["analysis_position"], model, "base", "Impl.")
    pred = [position[f"Pred {k}"] for k in "ABCD"]
    gold = [position[f"Gold {k}"] for k in "ABCD"]
    assert pred == pytest.approx([100 / 14, 600 / 14, 500 / 14, 200 / 14])
    assert gold == pytest.approx([400 / 14, 400 / 14, 400 / 14, 200 / 14])
    assert position["Bias"] == pytest.approx(300 / 14)
    # L1 wrong: symbolism (its L2 right) -> 0%; L1 right: 4 chains, contrast's L2 wrong -> 25%.
    # L2 wrong: contrast (its L3 right) -> 0%; L2 right: 4 chains, exaggeration's and dislocation's L3 wrong -> 50%.
    propagation = _row(report["analysis_propagation"], model, "base", "Impl.")
    assert [propagation[c] for c in propagation if c.startswith("L")] == [0.0, 25.0, 0.0, 50.0]


def test_without_sample_logs_the_report_says_how_to_get_the_diagnostics(
    runs: dict[str, tuple[str, Path]], tmp_path: Path
) -> None:
    folder = tmp_path / "no_logs"
    folder.mkdir()
    shutil.copy(runs["new"][1], folder / runs["new"][1].name)
    report = report_of(folder / runs["new"][1].name)
    for name in ("aspects_base", "errors_base", "aspects_context", "errors_context"):
        (note,) = [n for n in report[name]["notes"] if "--log_samples" in n]
        assert note.startswith("hvcu_replay") and "implication, aesthetic, affective" in note, name
        assert "\n" not in note
    rows = report["aspects_base"]["rows"]
    assert all(cell is None for cell in rows[0][1:-1])  # shown as –, beside the note: never a 0
    for name in ("analysis_position", "analysis_propagation"):
        assert any("--log_samples" in n and "not available" in n for n in report[name]["notes"]), name
