"""Render report tables as Markdown, CSV, LaTeX or JSON text."""

from __future__ import annotations

import csv
import io
import json
import re

from hvcu_tasks.data.files import csv_cell
from hvcu_tasks.data.jsonio import json_safe
from hvcu_tasks.report.board import Board, board_entries, make_board, per_model
from hvcu_tasks.report.board_tables import (
    leaderboard_table,
    pairs_table,
    per_model_table,
    run_pairs,
    versus_pairs,
    versus_table,
)
from hvcu_tasks.report.crossbench import cross_table
from hvcu_tasks.report.tables import NA_TEXT, Cell, Table, all_tables
from hvcu_tasks.results.runs import CUSTOM, NO_IDENTITY_NOTE, ModelResult, is_nan

MISSING = "–"
TEXT_COLUMNS = ("Model", "Source", "Method", "Rank moves most (HVCU-Bench → benchmark)")
"""Columns of words, left-aligned wherever they stand (the first column always is)."""


def cell_text(value: Cell) -> str:
    """Format one cell: numbers with 2 decimals (like the paper), missing values as a dash, NaN as n/a."""
    if value is None:
        return MISSING
    if is_nan(value):
        return NA_TEXT
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


LINE_BREAKS = frozenset(("\r\n", "\r", "\n", "\x0b", "\x0c", "\x85", "\u2028", "\u2029"))
_MARKDOWN_SPECIAL = re.compile(
    r"[\\|`*~$<>]|\r\n|[\r\n\x0b\x0c\x85\u2028\u2029]|\](?=[(\[:])|!(?=\[)|&(?=#?\w+;)"
    r"|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])"
)
"""What Markdown would read as markup in a cell or a footnote: the cell bar, escapes, code, emphasis, strikethrough,
math, raw HTML and autolinks, link and image brackets, entities, word-edge underscores; and line breaks."""


def markdown_text(text: str) -> str:
    """Return text as Markdown shows it literally on one line: markup backslash-escaped, a line break as `\\n`."""
    return _MARKDOWN_SPECIAL.sub(lambda m: "\\n" if m.group() in LINE_BREAKS else "\\" + m.group(), text)


def _markdown_note(note: str) -> str:
    """Return a footnote as literal Markdown; a leading list marker escaped (a note "* model" is not a nested list)."""
    text = markdown_text(note)
    return "\\" + text if text.startswith(("+", "-")) else text


def to_markdown(table: Table) -> str:
    """Return a GitHub-flavoured Markdown table with its title and footnotes, every text shown literally."""
    lines = [f"### {markdown_text(table.title)}", "", "| " + " | ".join(map(markdown_text, table.columns)) + " |"]
    lines.append(
        "|" + "|".join("---" if i == 0 or c in TEXT_COLUMNS else "---:" for i, c in enumerate(table.columns)) + "|"
    )
    lines += ["| " + " | ".join(markdown_text(cell_text(c)) for c in row) + " |" for row in table.rows]
    if table.notes:
        lines += [""] + [f"- {_markdown_note(n)}" for n in table.notes]
    return "\n".join(lines) + "\n"


CSV_DECIMALS = 2


def csv_value(value: Cell) -> str:
    """Format one CSV cell: missing empty, n/a as n/a, a float rounded to 2 decimals, never a formula."""
    if value is None:
        return ""
    if is_nan(value):
        return NA_TEXT
    if isinstance(value, float):
        return csv_cell(round(value, CSV_DECIMALS))
    return csv_cell(value)


def to_csv(table: Table) -> str:
    """Return the table as CSV (missing values empty, n/a as n/a, numbers rounded to 2 decimals, no formula)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in table.columns])
    for row in table.rows:
        writer.writerow([csv_value(c) for c in row])
    return buffer.getvalue()


_LATEX_ESCAPES = {
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\\": r"\textbackslash{}",
    "Δ": r"$\Delta$",
    "–": "--",
    "†": r"\dag{}",
    "‡": r"\ddag{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}


def latex_text(text: str) -> str:
    """Return text as LaTeX typesets it literally: special characters escaped, a line break as a space."""
    return "".join(_LATEX_ESCAPES.get(ch, " " if ch in LINE_BREAKS else ch) for ch in text)


def to_latex(table: Table) -> str:
    """Return a booktabs tabular with the title as caption and footnotes below."""
    spec = "l" + "r" * (len(table.columns) - 1)
    lines = [
        "\\begin{table}[t]",
        "\\centering",
        f"\\caption{{{latex_text(table.title)}}}",
        f"\\begin{{tabular}}{{{spec}}}",
        "\\toprule",
        " & ".join(latex_text(c) for c in table.columns) + " \\\\",
        "\\midrule",
        *[" & ".join(latex_text(cell_text(c)) for c in row) + " \\\\" for row in table.rows],
        "\\bottomrule",
        "\\end{tabular}",
    ]
    lines += [f"\\par{{\\footnotesize {latex_text(n)}}}" for n in table.notes]
    lines.append("\\end{table}")
    return "\n".join(lines) + "\n"


def to_json(tables: list[Table]) -> str:
    """Return every table as one JSON document (n/a values as null)."""
    data = [{"name": t.name, "title": t.title, "columns": t.columns, "rows": t.rows, "notes": t.notes} for t in tables]
    return json.dumps(json_safe(data), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def report_tables(
    models: list[ModelResult],
    reference: bool = True,
    board: Board | None = None,
) -> list[Table]:
    """Return the leaderboard, the ranked tables (benchmark and smoke-sample runs beside the paper), then one section
    per custom data.

    `board` replaces the leaderboard (a published board merged with new runs, `--base`); the paired comparisons
    of its runs follow it when there are any. A run on data
    that is not the published benchmark never shares a table, and so never an Overall Score ranking, with it: its
    tables are named `custom<N>_<table>` and titled with the data they ran on.
    """
    ranked = [m for m in models if CUSTOM not in m.dataset]
    if board is None:
        board = make_board(board_entries(ranked, reference))
    head = [leaderboard_table(board)] if board.entries else []
    head += [pairs_table(board)] if run_pairs(board) else []
    head += [versus_table(board)] if versus_pairs(board) else []
    rows = per_model(board.entries, reference)
    if any(e.general for e in rows if e.source == "run"):
        head += [per_model_table(rows)] + [t for t in [cross_table(rows)] if t.rows]
    tables = head + all_tables(ranked, reference)
    unrecorded = [m.model for m in ranked if m.data_notes and m.settings]
    for table in tables:
        if unrecorded:
            table.notes.append(f"{', '.join(unrecorded)}: {NO_IDENTITY_NOTE}.")
    sections: dict[str, list[ModelResult]] = {}
    for m in models:
        if CUSTOM in m.dataset:
            sections.setdefault(m.data_label(), []).append(m)
    for n, (label, group) in enumerate(sorted(sections.items()), start=1):
        custom = make_board(board_entries(group, reference=False))
        head = [leaderboard_table(custom)] + ([pairs_table(custom)] if run_pairs(custom) else [])
        head += [per_model_table(per_model(custom.entries, False))] if any(e.general for e in custom.entries) else []
        for table in [t for t in head if t.rows] + all_tables(group, False):
            table.name = f"custom{n}_{table.name}"
            table.title = f"[{label}] {table.title}"
            table.notes.append(
                f"{label}: not the published HVCU-Bench (its data identity differs from the dataset card); "
                "these Scores are not comparable with the paper's rows or the ranked tables."
            )
            tables.append(table)
    return tables


RENDERERS = {"md": to_markdown, "csv": to_csv, "latex": to_latex}
EXTENSIONS = {"md": "md", "csv": "csv", "latex": "tex", "json": "json"}
