"""The HTML site, rendered in headless Chromium at 1,280 × 800: what a person sees, and the sorts they click."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_general_report import HVCU, write_run
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
WINDOW = "--window-size=1280,800"


LONG = "/home/researcher/checkpoints/qwen2_5_vl_7b_lora_hvcu_chains_epoch3_lr1e-4_rank64_alpha128_seed0/merged"
"""A local checkpoint path as a model name: no space to break the line at."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Qwen/X (33 base, 44 context), Strong/Y (95 base), a smoke-sample run, a --limit run (50 base) and a model
    named by a long checkpoint path (12 base), beside the paper's rows."""
    root = tmp_path_factory.mktemp("page")
    write_results(root / "a", families("hvcu_bench", acc_full=33.0, acc_full_official=33.0))
    write_results(root / "b", families("hvcu_bench_context", acc_full=44.0, acc_full_official=44.0))
    write_results(
        root / "c", families("hvcu_bench", acc_full=95.0, acc_full_official=95.0), model_args="model=Strong/Y"
    )
    write_results(root / "d", families("hvcu_bench_sample", acc_full=20.0), model_args="model=Tiny/Z")
    write_results(
        root / "e", families("hvcu_bench", acc_full=50.0, acc_full_official=50.0), model_args="model=Part/P", limit=5
    )
    write_results(root / "f", families("hvcu_bench", acc_full=12.0, acc_full_official=12.0), model_args=f"model={LONG}")
    out = root / "site"
    runs = [str(root / n) for n in "abcdef"]
    assert main(["report", *runs, "--format", "html", "--out", str(out)]) == 0
    return out


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


DESKTOP, PHONE = (1280, 800), (390, 844)
SIZES = [pytest.param(DESKTOP, id="1280x800"), pytest.param(PHONE, id="390x844")]


def probed(page: Path, script: str, tmp: Path, size: tuple[int, int] = DESKTOP, fragment: str = "") -> dict:
    """Open a copy of `page` (+ `fragment`) with `script` appended (it sets document.title to JSON) in a viewport of
    `size` and return that JSON. The viewport is an iframe of exactly that size: headless Chromium keeps its window
    at least 500 px wide."""
    copy, frame = page.with_name(f"probe-{page.name}"), page.with_name("probe-frame.html")
    copy.write_text(page.read_text().replace("</body>", f"<script>{script}</script></body>"))
    width, height = size
    frame.write_text(
        f"<!DOCTYPE html><title></title><body style='margin:0'><iframe src='{copy.name}{fragment}' width={width} "
        f"height={height} style='border:0' onload='document.title = this.contentDocument.title'></iframe>"
    )
    window = f"--window-size={width + 40},{height + 40}"
    dom = chromium(window, "--allow-file-access-from-files", "--dump-dom", frame.as_uri(), tmp=tmp)
    copy.unlink()
    frame.unlink()
    title = re.search(r"<title>(.*?)</title>", dom, re.S).group(1)  # type: ignore[union-attr]
    return json.loads(html.unescape(title))


LAYOUT = r"""
const seen = {width: innerWidth, scroll: document.documentElement.scrollWidth, unboxed: [], wrapped: [], overlap: []};
const shown = e => e.getClientRects().length > 0;
const box = e => e.getBoundingClientRect();
const rects = node => { const r = document.createRange(); r.selectNodeContents(node);
  return [...r.getClientRects()].filter(q => q.width > 0); };
for (const table of [...document.querySelectorAll('table')].filter(shown)) {
  const scroller = table.parentElement;  // the table's own box: it scrolls, inside the window
  if (!scroller.classList.contains('scroll') || getComputedStyle(scroller).overflowX !== 'auto'
      || box(scroller).right > innerWidth + 0.5) seen.unboxed.push(table.id || table.className || 'table');
}
const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let node = walk.nextNode(); node; node = walk.nextNode()) {
  const text = node.textContent.trim(), words = text.split(/\s+/).length;
  const lines = new Set(rects(node).map(q => Math.round(q.bottom))).size, perLine = text.length / lines;
  const wordALine = words > 2 ? lines >= words && perLine < 12 : perLine < 4;  // or a few characters a line
  if (text && !node.parentElement.closest('script, style, svg') && lines > 1 && wordALine) {
    seen.wrapped.push(`${text.slice(0, 50)}: ${lines} lines`);
  }
}
const apart = (a, b) => a.right <= b.left + 0.5 || b.right <= a.left + 0.5 || a.bottom <= b.top + 0.5
  || b.bottom <= a.top + 0.5;
for (const th of [...document.querySelectorAll('th')].filter(shown)) {
  const cell = box(th);  // a header's text stays inside its cell, so it never runs into its neighbours
  if (rects(th).some(q => q.left < cell.left - 0.5 || q.right > cell.right + 0.5)) seen.overlap.push(th.textContent);
}
for (const heading of [...document.querySelectorAll('h1, h2, h3')].filter(shown)) {
  const parts = [...heading.children].filter(shown).map(box);
  const next = heading.nextElementSibling;
  if (parts.some((a, i) => parts.slice(i + 1).some(b => !apart(a, b)))
      || (next && shown(next) && !apart(box(heading), box(next)))) seen.overlap.push(heading.textContent);
}
document.title = JSON.stringify(seen);
"""
"""Measures a page as a reader sees it: the page's width and scroll width, the shown tables that are not in a box
of their own that scrolls sideways inside the window, the texts wrapped one word (or a few characters) per line,
and the headers that overlap: a table header whose text leaves its cell, a heading whose parts overlap each other
or the element after it."""


def table_rows(dom: str, table_id: str) -> list[list[str]]:
    """The text of every body cell of a table in a dumped DOM, row by row."""
    table = dom[dom.index(f'id="{table_id}"') :]
    table = table[: table.index("</table>")]
    body = table[table.index("</thead>") :]
    return [
        [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body)
    ]


def test_the_site_has_an_index_model_pages_and_figures(site: Path) -> None:
    assert (site / "index.html").is_file() and (site / "leaderboard.json").is_file()
    assert sorted(p.name for p in (site / "models").iterdir()) == [
        "Part-P.html",
        "Qwen-X.html",
        "Strong-Y.html",
        "Tiny-Z.html",
        "home-researcher-checkpoints-qwen2_5_vl_7b_lora_hvcu_chains_epoch3_lr1e-4_rank64_.html",
    ]
    text = (site / "index.html").read_text()
    assert "href='models/Strong-Y.html'" in text
    assert text.count("<figure") == 5  # degradation and aspects for 2 settings, scores base vs context


def test_the_pages_fetch_nothing(site: Path) -> None:
    for page in [site / "index.html", *sorted((site / "models").iterdir())]:
        text = page.read_text()
        links = re.findall(r"""(?:src|href)=["']([^"']*)""", text)
        assert all(not re.match(r"[a-z]+:", link) or link.startswith("data:") for link in links), page
        assert "<link" not in text and "@import" not in text and not re.search(r"url\((?!#)", text), page


def test_the_ranked_score_column_is_visible_at_1280_by_800_without_scrolling(site: Path, tmp_path: Path) -> None:
    script = """
    const th = [...document.querySelectorAll('#leaderboard th')].find(t => t.textContent === 'Score (official)');
    const r = th.getBoundingClientRect();
    document.title = JSON.stringify({left: r.left, right: r.right, bottom: r.bottom, width: innerWidth,
      height: innerHeight, scroll: document.documentElement.scrollWidth,
      board: document.getElementById('leaderboard').getBoundingClientRect().right});
    """
    seen = probed(site / "index.html", script, tmp_path)
    assert seen["width"] <= 1280 and seen["scroll"] <= seen["width"]  # no horizontal scrolling at all
    assert 0 <= seen["left"] and seen["right"] <= seen["width"] and seen["bottom"] <= seen["height"]
    assert seen["board"] <= seen["width"]  # the whole ranked table, Source included


def test_a_long_model_name_without_spaces_wraps_inside_its_cell(site: Path, tmp_path: Path) -> None:
    script = """
    const cell = [...document.querySelectorAll('#leaderboard td.model')].find(t => t.textContent.startsWith('/home'));
    document.title = JSON.stringify({text: cell.textContent, lines: Math.round(cell.getBoundingClientRect().height
      / parseFloat(getComputedStyle(cell).lineHeight)), right: cell.getBoundingClientRect().right,
      width: innerWidth, scroll: document.documentElement.scrollWidth});
    """
    seen = probed(site / "index.html", script, tmp_path)
    assert seen["text"] == LONG and seen["lines"] >= 2  # broken inside the name, not widening the table
    assert seen["right"] <= seen["width"] and seen["scroll"] <= seen["width"]


def test_a_model_page_with_a_long_name_needs_no_horizontal_scrolling(site: Path, tmp_path: Path) -> None:
    script = "document.title = JSON.stringify({width: innerWidth, scroll: document.documentElement.scrollWidth});"
    (page,) = (site / "models").glob("home-*.html")
    seen = probed(page, script, tmp_path)
    assert seen["scroll"] <= seen["width"] <= 1280


def test_a_partial_run_is_drawn_apart_from_the_results(site: Path, tmp_path: Path) -> None:
    script = """
    const row = name => [...document.querySelectorAll('#leaderboard tr')].find(r => r.cells[1] &&
      r.cells[1].textContent === name);
    const look = r => ({css: r.className, weight: getComputedStyle(r.cells[1]).fontWeight,
      style: getComputedStyle(r.cells[1]).fontStyle, rank: r.cells[0].textContent,
      source: r.cells[r.cells.length - 1].textContent});
    document.title = JSON.stringify({partial: look(row('Part/P*')), run: look(row('Qwen/X'))});
    """
    seen = probed(site / "index.html", script, tmp_path)
    assert seen["partial"] == {"css": "partial", "weight": "400", "style": "italic", "rank": "–",
                               "source": "run (partial)"}  # fmt: skip
    assert (seen["run"]["weight"], seen["run"]["style"], seen["run"]["source"]) == ("600", "normal", "run")


def test_the_first_row_is_the_highest_score(site: Path, tmp_path: Path) -> None:
    dom = chromium(WINDOW, "--dump-dom", (site / "index.html").as_uri(), tmp=tmp_path)
    rows = table_rows(dom, "leaderboard")
    assert rows[0][:3] == ["1", "Strong/Y", "95.00"]
    known = [r[2] != "–" for r in rows]
    assert known == sorted(known, reverse=True)  # rows without a Score (official) come last
    scores = [float(r[2]) for r in rows if r[2] != "–"]
    assert scores == sorted(scores, reverse=True)
    assert [r[1] for r in rows[1:3]] == ["Human", "GPT-4o"]
    tiny = next(r for r in rows if r[1].startswith("Tiny/Z"))
    assert tiny[0] == "–" and tiny[1] == "Tiny/Z†" and tiny[-1] == "run (smoke sample)"


def test_sorting_a_grouped_table_keeps_each_model_together(site: Path, tmp_path: Path) -> None:
    # Table 3 on the page: Model, Score, Δ Score, Score (official) (column 3), Δ Score (official), Setting, Task, ...
    dom = chromium(
        WINDOW, "--dump-dom", (site / "index.html").as_uri() + "#sort=table3_base_vs_context:3:desc", tmp=tmp_path
    )
    table = dom[dom.index('id="table3_base_vs_context"') :]
    table = table[: table.index("</table>")]
    assert 'aria-sort="descending"' in table
    groups = re.findall(r"<tbody[^>]*>(.*?)</tbody>", table, re.S)
    heads = []
    for group in groups:
        rows = [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)] for r in
                re.findall(r"<tr[^>]*>(.*?)</tr>", group)]  # fmt: skip
        assert [r[5] for r in rows] == ["base", "", "", "context", "", ""]
        assert [r[6] for r in rows] == ["Impl.", "Aesth.", "Affect."] * 2
        assert rows[0][0] == rows[3][0] and rows[1][0] == ""  # one model per group
        heads.append((rows[0][0], float(rows[0][3])))
    assert [name for name, _ in heads[:2]] == ["GPT-4o [paper]", "Qwen3-VL-Instruct (8B) [paper]"]
    base_scores = [score for _name, score in heads]
    assert base_scores == sorted(base_scores, reverse=True)  # groups ordered by their first (base) row
    assert heads[-1][0] == "Random guess (chance)"


def test_sorting_a_plain_table_by_score_puts_the_best_model_first(site: Path, tmp_path: Path) -> None:
    # Table 2 on the page: Model, Score, Score (official), then the family columns.
    dom = chromium(WINDOW, "--dump-dom", (site / "index.html").as_uri() + "#sort=table2_base:2:desc", tmp=tmp_path)
    rows = table_rows(dom, "table2_base")
    assert [r[0] for r in rows[:2]] == ["Strong/Y", "Human [paper]"]
    scores = [float(r[2]) for r in rows if r[2] != "–"]
    assert scores == sorted(scores, reverse=True)


def test_a_model_page_shows_aspects_errors_and_invalid_rates(site: Path, tmp_path: Path) -> None:
    dom = chromium(WINDOW, "--dump-dom", (site / "models" / "Qwen-X.html").as_uri(), tmp=tmp_path)
    for title in ("On the leaderboard", "Acc_full per aspect, base setting", "Error attribution, context setting"):
        assert title in dom
    assert "invalid perc %" in re.sub(r"<[^>]+>", "", dom) and 'href="../index.html"' in dom  # the text as shown
    assert table_rows(dom, "leaderboard")[0][:3] == ["10", "Qwen/X", "33.00"]  # its rank on the whole board


def test_screenshot_at_1280_by_800_is_a_rendered_page(site: Path, tmp_path: Path) -> None:
    shot = tmp_path / "page.png"
    chromium(WINDOW, f"--screenshot={shot}", (site / "index.html").as_uri(), tmp=tmp_path)
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert pixels.shape == (800, 1280)
    assert pixels.std() > 10  # text and tables, not a blank page
    assert (pixels < 100).mean() > 0.005  # dark text is present


def test_the_leaderboard_sorts_by_another_column_on_click(site: Path, tmp_path: Path) -> None:
    # column 7: Context (official), after Rank, Model, Score (official), 95% CI, Rank range, Group and Failed
    dom = chromium(WINDOW, "--dump-dom", (site / "index.html").as_uri() + "#sort=leaderboard:7:desc", tmp=tmp_path)
    rows = table_rows(dom, "leaderboard")
    assert [r[1] for r in rows[:2]] == ["GPT-4o", "Qwen3-VL-Instruct (8B)"]  # context 68.18, 62.28
    context = [float(r[7]) for r in rows if r[7] != "–"]
    assert context == sorted(context, reverse=True) and rows[-1][7] == "–"


MEASURED: dict[tuple[Path, tuple[int, int], str], dict] = {}


def layout(page: Path, size: tuple[int, int], tmp: Path, fragment: str = "") -> dict:
    """LAYOUT's measures of a page (+ `fragment`) in a window of `size`, taken once per test session."""
    key = (page, size, fragment)
    if key not in MEASURED:
        MEASURED[key] = probed(page, LAYOUT, tmp, size, fragment)
    return MEASURED[key]


@pytest.fixture(scope="module")
def compare_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`hvcu report A B --compare` of a base and a tuned model with HVCU-Bench and MMMU results: the Δ tables."""
    root = tmp_path_factory.mktemp("compare")
    counts = {"n-samples": {"mmmu_val": {"original": 900, "effective": 20}}}
    a = write_run(root / "runs", {"mmmu_val": {"mmmu_acc": 0.45}} | HVCU, model="org/base", **counts)
    b = write_run(root / "runs", {"mmmu_val": {"mmmu_acc": 0.6}} | HVCU, model="org/tuned", **counts)
    assert main(["report", str(a), str(b), "--compare", "--format", "html", "--out", str(root / "site")]) == 0
    return root / "site"


PAGES = ["index", "model page", "compare index", "compare model page"]


@pytest.fixture
def pages(site: Path, compare_site: Path) -> dict[str, Path]:
    """The index (the leaderboard and every table), the model page of the long checkpoint path, and the index and
    the tuned model's page of a --compare report."""
    return {
        "index": site / "index.html",
        "model page": next((site / "models").glob("home-*.html")),
        "compare index": compare_site / "index.html",
        "compare model page": compare_site / "models" / "org-tuned.html",
    }


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("size", SIZES)
def test_the_page_never_scrolls_sideways_each_table_scrolls_in_its_box(pages, tmp_path, page, size) -> None:
    seen = layout(pages[page], size, tmp_path)
    assert seen["width"] == size[0] and seen["scroll"] <= seen["width"]
    assert seen["unboxed"] == []


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("size", SIZES)
def test_text_wraps_at_words_never_a_word_per_line(pages, tmp_path, page, size) -> None:
    assert layout(pages[page], size, tmp_path)["wrapped"] == []


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("size", SIZES)
def test_no_header_overlaps_another(pages, tmp_path, page, size) -> None:
    assert layout(pages[page], size, tmp_path)["overlap"] == []
