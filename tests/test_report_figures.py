"""Report figures: the paper's models beside local runs, smoke-sample runs marked, captions in words."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report import families, write_results

from hvcu_tasks.report.figures import _bar_rows, all_figures, caption, run_style
from hvcu_tasks.results.runs import ModelResult, read_runs


@pytest.fixture
def models(tmp_path: Path) -> list[ModelResult]:
    """Ours/A: 50 base, 60 context (official); Tiny/S: 45 base on the smoke sample."""
    write_results(tmp_path / "a", families("hvcu_bench", acc_full=50.0, acc_full_official=50.0), "model=Ours/A")
    write_results(tmp_path / "b", families("hvcu_bench_context", acc_full_official=60.0), "model=Ours/A")
    write_results(tmp_path / "s", families("hvcu_bench_sample", acc_full_official=45.0), "model=Tiny/S")
    return read_runs([tmp_path / "a", tmp_path / "b", tmp_path / "s"])


def test_score_bars_put_the_runs_among_the_papers_models_best_first(models) -> None:
    rows = _bar_rows(models, reference=True)
    labels = [r[0] for r in rows]
    assert labels[:4] == ["Human [paper]", "GPT-4o [paper]", "Ours/A", "Qwen3-VL-Instruct (8B) [paper]"]
    assert rows[2][1:4] == (50.0, 60.0, "run")
    assert len(rows) == 14 + 2  # the paper's 14 base rows and the two runs


def test_a_smoke_sample_run_is_labelled_and_drawn_apart(models) -> None:
    rows = _bar_rows(models, reference=True)
    smoke = [r for r in rows if r[3] == "smoke"]
    assert [r[0] for r in smoke] == ["Tiny/S (smoke sample)"]  # hatched bars, its legend says so
    assert [r[0] for r in rows].index("Tiny/S (smoke sample)") == 4  # 45.0: after 47.58, before 44.23


def test_captions_are_sentences_that_name_the_smoke_run(models, tmp_path: Path) -> None:
    paths = all_figures(models, tmp_path / "figures")
    stems = sorted({p.stem for p in paths})
    assert stems == [
        "aspects_base",
        "aspects_context",
        "degradation_base",
        "degradation_context",
        "scores_base_vs_context",
    ]
    for stem in stems:
        text = caption(stem, models)
        assert stem not in text and text.endswith(".") and len(text.split()) > 20
        assert "Tiny/S ran on the bundled smoke sample" in text
    assert "paper's models are drawn in grey" in caption("degradation_base", models)
    assert "chance (25% per level, 1.56% per chain)" in caption("degradation_base", models)


def test_without_reference_the_bars_show_only_the_runs(models) -> None:
    assert [r[0] for r in _bar_rows(models, reference=False)] == ["Ours/A", "Tiny/S (smoke sample)"]


@pytest.fixture
def partial(tmp_path: Path) -> list[ModelResult]:
    """Five/P: 99 base on five samples (--limit 5), 40 context on the whole benchmark."""
    write_results(tmp_path / "p", families("hvcu_bench", acc_full_official=99.0), "model=Five/P", limit=5)
    write_results(tmp_path / "q", families("hvcu_bench_context", acc_full_official=40.0), "model=Five/P")
    return read_runs([tmp_path / "p", tmp_path / "q"])


def test_a_partial_runs_bars_are_labelled_and_only_its_partial_setting_hatched(partial) -> None:
    (row,) = [r for r in _bar_rows(partial, reference=True) if r[3] != "paper"]
    assert row[0] == "Five/P (partial)" and row[1:4] == (99.0, 40.0, "partial")
    assert row[4] == {"base"}  # the base bar is hatched, the context one (the whole benchmark) is not


def test_a_partial_setting_is_dashed_and_labelled_in_the_level_curves(partial) -> None:
    (model,) = partial
    assert run_style(model, "base") == {"linestyle": "--", "label": "Five/P (partial)"}
    assert run_style(model, "context") == {"linestyle": "-", "label": "Five/P"}


def test_captions_name_the_partial_run_where_it_is_drawn_partial(partial) -> None:
    said = "Five/P ran on a subset (--limit) or lacks a family"
    for stem in ("degradation_base", "aspects_base", "scores_base_vs_context"):
        assert said in caption(stem, partial), stem
    assert said not in caption("degradation_context", partial)  # its context run is the whole benchmark
