"""The static HTML site: index.html (ranked leaderboard, the paper's tables, figures) and one page per model.

Everything is inlined (the style and the sorting script, assets/page.css and assets/page.js; the SVG figures):
the pages work from file:// and on any static host, with nothing fetched from a network.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hvcu_tasks.core.names import check_name
from hvcu_tasks.data.public import name_key
from hvcu_tasks.report.page_assets import asset
from hvcu_tasks.report.render import cell_text
from hvcu_tasks.report.run_html import runs_section
from hvcu_tasks.report.tables import CHANCE_NAME, OFFICIAL_SCORE, PAPER_MARK, PARTIAL_MARK, SCORE, SMOKE_MARK, Table
from hvcu_tasks.results.run_record import RunRecord

TITLE = "HVCU-Bench leaderboard"
LEAD_COLUMNS = (SCORE, f"Δ {SCORE}", OFFICIAL_SCORE, f"Δ {OFFICIAL_SCORE}")
"""Columns shown right after Model on the page (the data files keep the paper's layout, Scores last)."""
MARKS = "*†‡"
"""The marks a row label may end in (partial, smoke sample, parsers disagree): stripped, they leave the model."""

STYLE = asset("page.css")
"""The style of index.html and the model pages."""

# Click a header to sort by that column (numbers numerically, dashes last). A table with <tbody class="group">
# sections sorts whole groups by the first value the group has in that column. A URL hash
# "#sort=<table id>:<column index>:<asc|desc>" applies one sort on load.
SCRIPT = asset("page.js")


@dataclass
class ModelPage:
    """One model's page: its name, file name under models/, its tables, notes and how each of its runs was made."""

    model: str
    file: str
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    records: list[RunRecord] = field(default_factory=list)


def page_names(models: Sequence[str], taken: Iterable[str] = ()) -> dict[str, str]:
    """Return a safe, unique file name (models/<slug>.html) for each model name, none of the `taken` file names."""
    names: dict[str, str] = {}
    used = {name_key(name.removesuffix(".html")) for name in taken}
    for model in models:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-.")[:80] or "model"
        candidate, n = slug, 1
        while name_key(candidate) in used:
            n += 1
            candidate = f"{slug}-{n}"
        used.add(name_key(candidate))
        names[model] = check_name(f"{candidate}.html", "model page name")
    return names


def _view_order(table: Table) -> list[int]:
    """Return the column order on the page: Model, then the Score columns, then the rest in the table's order."""
    if table.name.endswith("leaderboard") or "Model" not in table.columns:
        return list(range(len(table.columns)))
    model = table.columns.index("Model")
    lead = [i for i, c in enumerate(table.columns) if c in LEAD_COLUMNS]
    rest = [i for i in range(len(table.columns)) if i != model and i not in lead]
    return [model, *lead, *rest]


def _row_class(label: str, source: str | None) -> str:
    """Return a row's CSS class from its label or Source cell: paper, human, chance, smoke, partial or run."""
    if source is not None:
        kind = source.split(" ")[0].strip("[]")
        if kind == "run" and "(smoke sample" in source:
            return "smoke"
        return "partial" if kind == "run" and source.endswith("partial)") else kind
    if PAPER_MARK in label:
        return "human" if label.startswith("Human ") else "paper"
    if label == CHANCE_NAME:
        return "chance"
    marks = label.removeprefix(label.rstrip(MARKS))
    return "smoke" if SMOKE_MARK in marks else "partial" if PARTIAL_MARK in marks else "run"


def table_html(table: Table, links: dict[str, str] | None = None) -> str:
    """Render one table as a sortable HTML table (grouped rows as one <tbody> each) with its notes."""
    order = _view_order(table)
    board = table.name.endswith("leaderboard")
    model_col = table.columns.index("Model") if "Model" in table.columns else None
    source_col = table.columns.index("Source") if "Source" in table.columns else None

    def th(i: int) -> str:
        css = " class='model'" if i == model_col else " class='headline'" if board and i == 2 else ""
        css = " class='text'" if i == source_col else css
        text = re.sub(r"(?<=\S )\S+ \S+$", r"<span class='keep'>\g<0></span>", html.escape(table.columns[i]))
        return f"<th scope='col'{css}>{text}</th>"  # of three words or more, the last two on one line

    def td(i: int, value: object, kind: str, continuation: bool = False) -> str:
        text = "" if continuation and value is None else html.escape(cell_text(value))  # type: ignore[arg-type]
        if i == model_col:
            href = (links or {}).get(str(value).rstrip(MARKS)) if value else None
            if href and kind in {"run", "smoke", "partial"}:  # a [paper] row of the same name is not that run
                text = f"<a href='{html.escape(href)}'>{text}</a>"
            return f"<td class='model'>{text}</td>"
        css = " class='rank'" if board and i == 0 else " class='headline'" if board and i == 2 else ""
        css = " class='text'" if i == source_col else css
        return f"<td{css}>{text}</td>"

    groups = table.groups or list(range(len(table.rows)))
    bodies: list[list[str]] = []
    last_group, css = None, ""
    for row, group in zip(table.rows, groups, strict=True):
        label = str(row[model_col]) if model_col is not None and row[model_col] else ""
        if label:
            css = _row_class(label, str(row[source_col]) if source_col is not None else None)
        continuation = table.groups is not None and not label  # a family row under its model's first row
        line = f"<tr class='{css}'>" + "".join(td(i, row[i], css, continuation) for i in order) + "</tr>"
        if group != last_group or table.groups is None:
            bodies.append([])
            last_group = group
        bodies[-1].append(line)
    if table.groups is None:
        body_html = "<tbody>" + "".join(line for body in bodies for line in body) + "</tbody>"
    else:
        body_html = "".join(f"<tbody class='group'>{''.join(body)}</tbody>" for body in bodies)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in table.notes)
    css_table = "sortable board" if board else "sortable"
    return (
        f"<section id='s-{html.escape(table.name)}'><h2>{html.escape(table.title)}</h2><div class='scroll'>"
        f"<table class='{css_table}' id='{html.escape(table.name)}'><thead><tr>{''.join(th(i) for i in order)}"
        f"</tr></thead>{body_html}</table></div><ul class='notes'>{notes}</ul></section>"
    )


def _inline_svg(path: Path) -> str:
    """Return an SVG file's <svg> element, without the XML prolog, for inlining."""
    text = path.read_text(encoding="utf-8")
    return text[re.search(r"<svg\b", text).start() :]  # type: ignore[union-attr]


def _page(title: str, body: str, nav: str) -> str:
    """Return a whole HTML document with the shared style and sorting script."""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>\n{STYLE}</style></head><body>"
        f"<nav>{nav}</nav><h1>{html.escape(title)}</h1>{body}<script>\n{SCRIPT}</script></body></html>\n"
    )


INTRO = (
    "The leaderboard ranks every model by its Overall Score in the base setting under the authors' answer "
    "parser (Score (official)), the number the paper reports, so the paper's rows ([paper]) and local runs share "
    "one scale. Click a column header to sort; click a model name for its page. † marks a run on the bundled "
    "smoke sample (a handful of items, not the benchmark), * a partial run, ‡ a model whose two parsers disagree "
    "by more than 1 point."
)


def render_index(
    tables: list[Table],
    figures: list[tuple[Path, str]],
    links: dict[str, str],
    chains: str | None = None,
    title: str = TITLE,
) -> str:
    """Return index.html: the leaderboard first, then every other table, then the figures with their captions."""
    nav = "<a href='#ranked'>Leaderboard</a><a href='#tables'>Tables</a>"
    nav += "<a href='#figures'>Figures</a>" if figures else ""
    nav += f"<a href='{html.escape(chains)}'>Chain browser</a>" if chains else ""
    board = [t for t in tables if t.name == "leaderboard"]
    rest = [t for t in tables if t.name != "leaderboard"]
    figure_html = "".join(
        f"<figure id='fig-{html.escape(p.stem)}'>{_inline_svg(p)}<figcaption>{html.escape(caption)}</figcaption>"
        "</figure>"
        for p, caption in figures
    )
    chains_html = (
        f"<p class='lead'>Every sample's chain, reply by reply: <a href='{html.escape(chains)}'>chain browser</a>.</p>"
        if chains
        else ""
    )
    body = (
        f"<p class='lead'>{html.escape(INTRO)}</p>{chains_html}<div id='ranked'>"
        + "".join(table_html(t, links) for t in board)
        + "</div><div id='tables'>"
        + "".join(table_html(t, links) for t in rest)
        + "</div>"
        + (f"<section id='figures'><h2>Figures</h2>{figure_html}</section>" if figure_html else "")
    )
    return _page(title, body, nav)


BOARD_SECTION = re.compile(r"<section id='s-leaderboard'>.*?</section>", re.S)
"""A model page's leaderboard section (no section nests inside it)."""


def page_model(text: str) -> str | None:
    """Return the model a page written by render_model_page belongs to (its title), None when it has none."""
    found = re.search(r"<title>(.*?)</title>", text, re.S)
    return html.unescape(found.group(1)) if found else None


def render_model_page(page: ModelPage, chains: str | None = None) -> str:
    """Return one model's page: its tables (leaderboard row, levels, aspects, errors, intervals, comparison), then
    how each of its runs was made."""
    nav = "<a href='../index.html'>← Leaderboard</a>"
    nav += f"<a href='../{html.escape(chains)}'>Chain browser</a>" if chains else ""
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in page.notes)
    body = (f"<ul class='notes'>{notes}</ul>" if notes else "") + "".join(table_html(t) for t in page.tables)
    body += runs_section(page.records)
    return _page(page.model, body, nav)
