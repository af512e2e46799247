"""One self-contained HTML leaderboard: sortable tables and the figures inlined as SVG."""

from __future__ import annotations

import html
import re
from pathlib import Path

from hvcu_tasks.report.render import cell_text
from hvcu_tasks.report.tables import Table

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; color: #1d1d1f; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.15rem; margin-top: 2.2rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border-bottom: 1px solid #ddd; padding: 0.3rem 0.55rem; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
th { background: #f3f4f6; cursor: pointer; user-select: none; }
th[aria-sort="descending"]::after { content: " ▼"; } th[aria-sort="ascending"]::after { content: " ▲"; }
tr.paper td { color: #6b7280; font-style: italic; }
.notes { font-size: 0.8rem; color: #4b5563; } .figure svg { max-width: 100%; height: auto; }
.scroll { overflow-x: auto; }
"""

# Click a header to sort by that column (numbers numerically, dashes last). A URL hash
# "#sort=<table id>:<column index>:<asc|desc>" applies one sort on load (used by the browser test).
SCRIPT = """
function cellValue(row, i) {
  const text = row.cells[i].textContent.trim();
  const number = parseFloat(text.replace(/[^0-9.+-]/g, ''));
  return isNaN(number) || /^[^0-9]/.test(text) && !/^[+-]?[0-9]/.test(text) ? text : number;
}
function sortTable(table, column, direction) {
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = cellValue(a, column), y = cellValue(b, column);
    const missing = v => v === '–' || v === '' || v === 'n/a';
    if (missing(x) !== missing(y)) return missing(x) ? 1 : -1;
    const order = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y));
    return direction === 'asc' ? order : -order;
  });
  rows.forEach(r => body.appendChild(r));
  Array.from(table.tHead.rows[0].cells).forEach((th, i) =>
    th.setAttribute('aria-sort', i === column ? (direction === 'asc' ? 'ascending' : 'descending') : 'none'));
}
document.querySelectorAll('table.sortable').forEach(table => {
  Array.from(table.tHead.rows[0].cells).forEach((th, i) => th.addEventListener('click', () =>
    sortTable(table, i, th.getAttribute('aria-sort') === 'descending' ? 'asc' : 'desc')));
});
const wanted = /^#sort=([\\w-]+):(\\d+):(asc|desc)$/.exec(decodeURIComponent(location.hash));
if (wanted) sortTable(document.getElementById(wanted[1]), Number(wanted[2]), wanted[3]);
"""


def _table_html(table: Table) -> str:
    """Render one table as a sortable HTML table with its notes."""
    head = "".join(f"<th scope='col'>{html.escape(c)}</th>" for c in table.columns)
    rows = []
    css = ""
    for row in table.rows:
        if row[0]:  # continuation rows (Table 3's Aesth./Affect. lines) keep their group's style
            css = " class='paper'" if isinstance(row[0], str) and "[paper]" in row[0] else ""
        rows.append(f"<tr{css}>" + "".join(f"<td>{html.escape(cell_text(c))}</td>" for c in row) + "</tr>")
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in table.notes)
    return (
        f"<section><h2>{html.escape(table.title)}</h2><div class='scroll'>"
        f"<table class='sortable' id='{table.name}'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody>"
        f"</table></div><ul class='notes'>{notes}</ul></section>"
    )


def _inline_svg(path: Path) -> str:
    """Return an SVG file's <svg> element, without the XML prolog, for inlining."""
    text = path.read_text(encoding="utf-8")
    return text[re.search(r"<svg\b", text).start() :]  # type: ignore[union-attr]


def render_page(tables: list[Table], figures: list[Path], title: str = "HVCU-Bench leaderboard") -> str:
    """Return the whole page: title, every table, then every SVG figure inlined."""
    svgs = [p for p in figures if p.suffix == ".svg"]
    figure_html = "".join(
        f"<figure class='figure' id='fig-{p.stem}'>{_inline_svg(p)}"
        f"<figcaption>{html.escape(p.stem)}</figcaption></figure>"
        for p in svgs
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        "<p class='notes'>Click a column header to sort. Rows marked [paper] are the paper's published numbers, "
        "computed with the authors' parser: compare them with the Score (official) column. "
        "‡ marks a model whose two Scores differ by more than 1 point (see the notes under its table).</p>"
        + "".join(_table_html(t) for t in tables)
        + (f"<section><h2>Figures</h2>{figure_html}</section>" if figure_html else "")
        + f"<script>{SCRIPT}</script></body></html>\n"
    )
