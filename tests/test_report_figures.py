"""Report figures: the paper's models beside local runs, smoke-sample runs marked, captions in words."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report import families, write_results

from hvcu_tasks.report.figures import _bar_rows, all_figures, caption
from hvcu_tasks.report.runs import ModelResult, read_runs


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
    assert rows[2][1:] == (50.0, 60.0, "run")
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
