"""Every relative link of README.md and the docs/ pages leads somewhere: the file exists, and a `#anchor` names a
heading of that file under GitHub's slug rule (lower-case, spaces -> '-', punctuation dropped except '-' and '_';
a repeated heading gets -1, -2, ...)."""

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
