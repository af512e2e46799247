"""The HTML leaderboard, rendered in headless Chromium: what a person sees, and the sort they click."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_report import families, write_results

from hvcu_tasks.cli import main

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("page")
    write_results(root / "a", families("hvcu_bench", acc_full=33.0, acc_full_official=33.0))
    write_results(root / "b", families("hvcu_bench_context", acc_full=44.0, acc_full_official=44.0))
    write_results(
        root / "c", families("hvcu_bench", acc_full=95.0, acc_full_official=95.0), model_args="model=Strong/Y"
    )
    out = root / "site"
    assert (
        main(["report", str(root / "a"), str(root / "b"), str(root / "c"), "--format", "html", "--out", str(out)]) == 0
    )
    return out / "leaderboard.html"


def chromium(*args: str, tmp: Path) -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "headless Chromium is required (make browser installs Debian's chromium)"
    proc = subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'profile'}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_page_is_self_contained(page: Path) -> None:
    text = page.read_text()
    assert "<svg" in text
    assert not re.search(r"""(?:src|href)=["'](?!#|data:)""", text)  # nothing fetched
    assert text.count("<table class='sortable'") >= 4


def test_dom_shows_the_tables_and_figures_a_reader_expects(page: Path, tmp_path: Path) -> None:
    dom = chromium("--dump-dom", page.as_uri(), tmp=tmp_path)
    assert "HVCU-Bench leaderboard" in dom
    assert '<th scope="col">Score</th>' in dom
    assert "Human [paper]" in dom and "Qwen/X" in dom and "Strong/Y" in dom
    assert dom.count("<figure") == 5  # degradation and aspects for 2 settings, scores base vs context


def test_sorting_by_score_puts_the_best_model_first(page: Path, tmp_path: Path) -> None:
    # Column 14 is Score (official), the one the [paper] rows fill (the last cell of each row).
    dom = chromium("--dump-dom", page.as_uri() + "#sort=table2_base:14:desc", tmp=tmp_path)
    table = dom[dom.index('id="table2_base"') :]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr[^>]*><td>([^<]*)</td>.*?<td>([^<]*)</td></tr>", table)
    names = [name for name, _score in rows]
    scores = [float(score) for _name, score in rows]
    assert names[:2] == ["Strong/Y", "Human [paper]"]
    assert scores == sorted(scores, reverse=True)
    assert (
        names.index("Deepseek-VL2 (MoE 4.5B/27B) [paper]") < names.index("Qwen/X") < names.index("Gemma3 (4B) [paper]")
    )
    assert 'aria-sort="descending"' in table


def test_screenshot_is_a_rendered_page(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "page.png"
    chromium("--window-size=1300,1600", f"--screenshot={shot}", page.as_uri(), tmp=tmp_path)
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert pixels.shape == (1600, 1300)
    assert pixels.std() > 10  # text and tables, not a blank page
    assert (pixels < 100).mean() > 0.005  # dark text is present
