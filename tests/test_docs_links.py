"""README.md and the docs/ pages: every relative link leads somewhere, and the pages are scannable.

Links: the file exists, and a `#anchor` names a heading of that file under GitHub's slug rule (lower-case,
spaces -> '-', punctuation dropped except '-' and '_'; a repeated heading gets -1, -2, ...).

Scannable (issue 37): every line of a fenced code block fits 100 characters (a terminal or a GitHub code box
shows it without a scroll bar); no prose paragraph or list item is over 120 words (at the pages' ~110-character
lines that is about 7 lines, what a reader takes in before losing the thread; the walls the issue found ran
300-700 words; table rows are reference lines, not paragraphs, and are not counted); README states how many
requests a full run makes, and README and docs/evaluation.md state what tokens it costs and where lmms-eval's
run flags are listed (`lmms-eval --help` shows only subcommands).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\]\n]|\][^(\n])*?\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # https:, mailto:, ...
FENCE_LINE = re.compile(r"^\s*(```|~~~)")
ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s")
CODE_WIDTH = 100  # characters per code line
PARAGRAPH_WORDS = 120  # words per prose paragraph or list item (see the module docstring)


def prose(text: str) -> str:
    """Return Markdown text without its fenced code blocks (links and headings there are not Markdown)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """Return GitHub's anchor for a heading's text: lower-case, punctuation dropped but '-' and '_', spaces -> '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Return every anchor a Markdown file's headings give, repeated headings numbered as GitHub does."""
    seen: dict[str, int] = {}
    out = set()
    for m in HEADING.finditer(prose(path.read_text(encoding="utf-8"))):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


def links(path: Path) -> list[str]:
    """Return the relative link targets of a Markdown file (outside code), in order."""
    text = CODE_SPAN.sub("", prose(path.read_text(encoding="utf-8")))
    return [m.group(1) for m in LINK.finditer(text) if not EXTERNAL.match(m.group(1))]


def test_the_slug_rule_is_githubs() -> None:
    assert slug("The `hvcu` command") == "the-hvcu-command"
    assert slug("Benchmark construction (paper §3.2, App. B)") == "benchmark-construction-paper-32-app-b"
    assert slug("`hvcu build-bench`: top-down generation with validation") == (
        "hvcu-build-bench-top-down-generation-with-validation"
    )
    assert slug("Differences from the authors' evaluation code") == "differences-from-the-authors-evaluation-code"
    assert slug("A task_dir & more") == "a-task_dir--more"


def test_the_link_finder_reads_links_and_images_but_not_code(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "See [a](a.md#x) and ![img](img/b.png), [web](https://x.org).\n`[no](c.md)`\n```\n[no](d.md)\n```\n",
        encoding="utf-8",
    )
    assert links(page) == ["a.md#x", "img/b.png"]


def test_the_docs_tree_exists() -> None:
    assert len(PAGES) > 1, "README.md links a docs/ tree of pages"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        name, _, anchor = target.partition("#")
        file = (page.parent / unquote(name)).resolve() if name else page
        if not file.exists():
            broken.append(f"{target}: no such file {file.relative_to(REPO) if file.is_relative_to(REPO) else file}")
        elif anchor and file.suffix == ".md" and unquote(anchor) not in anchors(file):
            broken.append(f"{target}: no heading of {file.name} has the anchor #{anchor}")
    assert broken == [], f"{page.relative_to(REPO)}: " + "; ".join(broken)


def code_lines(text: str) -> list[tuple[int, str]]:
    """Return (line number, line) of every line inside a fenced code block."""
    out, inside = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE_LINE.match(line):
            inside = not inside
        elif inside:
            out.append((number, line))
    return out


def paragraphs(text: str) -> list[tuple[int, str]]:
    """Return (first line, text) of every prose paragraph and list item outside code, tables and headings."""
    out: list[tuple[int, str]] = []
    current: list[str] = []
    start, inside = 0, False

    def close() -> None:
        if current:
            out.append((start, " ".join(current)))
            current.clear()

    for number, line in enumerate(text.splitlines(), 1):
        if FENCE_LINE.match(line):
            close()
            inside = not inside
            continue
        if inside or not line.strip() or line.lstrip().startswith(("|", "#")):
            close()
            continue
        if ITEM.match(line):
            close()
        if not current:
            start = number
        current.append(line.strip())
    close()
    return out


def test_the_page_readers_split_code_paragraphs_items_and_skip_tables() -> None:
    text = "# T\n\none two\nthree\n\n- four\n- five\n  six\n\n| a | b |\n\n```bash\nseven\n```\n~~~\neight\n~~~\n"
    assert paragraphs(text) == [(3, "one two three"), (6, "- four"), (7, "- five six")]
    assert code_lines(text) == [(13, "seven"), (16, "eight")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_code_line_fits_100_characters(page: Path) -> None:
    lines = code_lines(page.read_text(encoding="utf-8"))
    wide = [f"line {n} ({len(line)})" for n, line in lines if len(line) > CODE_WIDTH]
    assert wide == [], f"{page.relative_to(REPO)}: code lines over {CODE_WIDTH} characters: {', '.join(wide)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_paragraph_is_a_wall(page: Path) -> None:
    walls = [
        f"line {n} ({len(text.split())} words)"
        for n, text in paragraphs(page.read_text(encoding="utf-8"))
        if len(text.split()) > PARAGRAPH_WORDS
    ]
    assert walls == [], f"{page.relative_to(REPO)}: paragraphs over {PARAGRAPH_WORDS} words: {', '.join(walls)}"


def test_the_readme_states_the_requests_of_a_full_run() -> None:
    # The authors' protocol: 1,050 samples, 3 levels each; one request per (sample, level) in each setting.
    text = " ".join(prose((REPO / "README.md").read_text(encoding="utf-8")).split())
    assert "3,150 requests" in text and "1,050 samples × 3 levels" in text
    assert "6,300" in text, "README: both settings together make 6,300 requests"


@pytest.mark.parametrize("name", ["README.md", "docs/evaluation.md"])
def test_the_cost_of_a_full_run_and_the_flag_list_are_stated(name: str) -> None:
    text = " ".join(prose((REPO / name).read_text(encoding="utf-8")).split())
    assert re.search(r"\d[\d.]* ?[–-] ?\d[\d.]* million input tokens", text), f"{name}: the tokens of a full run"
    assert "`lmms-eval eval --help`" in text, f"{name}: where the run flags are listed"
