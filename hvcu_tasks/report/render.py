"""Render report tables as Markdown, CSV, LaTeX or JSON text."""

from __future__ import annotations

import csv
import io
import json
import re
import textwrap

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
from hvcu_tasks.report.tables import CHANCE_NAME, MISSING, NA_TEXT, PAPER_MARK, Cell, Table, all_tables, cell_text
from hvcu_tasks.results.runs import CUSTOM, NO_IDENTITY_NOTE, ModelResult, is_nan

TEXT_COLUMNS = ("Model", "Source", "Method", "parser", "Rank moves most (HVCU-Bench → benchmark)")
"""Columns of words, left-aligned wherever they stand (the first column always is)."""


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
    if value is None or is_nan(value):
        return "" if value is None else NA_TEXT
    return csv_cell(round(value, CSV_DECIMALS) if isinstance(value, float) else value)


def to_csv(table: Table) -> str:
    """Return the table as CSV (missing values empty, n/a as n/a, numbers rounded to 2 decimals, no formula)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in table.columns])
    for row in table.rows:
        writer.writerow([csv_value(c) for c in row])
    return buffer.getvalue()


_LATEX_ESCAPES = {c: "\\" + c for c in "&%_#${}"} | {"~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_LATEX_ESCAPES |= {"\\": r"\textbackslash{}", "Δ": r"$\Delta$", "–": "--", "†": r"\dag{}", "‡": r"\ddag{}"}
_LATEX_ESCAPES |= {"<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}


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


WIDTH = 120
"""The terminal's columns: `hvcu report` without --out and --format fits its tables and notes in them."""
MAX_ROWS = 12
"""The terminal shows at most this many of the user's rows of a table; every row is in the files."""
REFERENCE_ROWS = 4
"""...and at most this many reference rows (or groups of rows, Table 3's) after them: human and the best paper rows."""
KEY_COLUMNS = ("Rank", "Model", "Setting", "Task", "A", "B", "Run", "[paper] row")
"""Leading columns that name a row: repeated in each block of a table too wide for the terminal."""


def is_reference(row: list[Cell]) -> bool:
    """Whether a row is the paper's, the human baseline or chance (a reference, not the user's run)."""
    return any(c in (PAPER_MARK, "human", "chance", CHANCE_NAME) or str(c).endswith(f" {PAPER_MARK}") for c in row)


def terminal_rows(table: Table, limit: int = REFERENCE_ROWS) -> tuple[list[list[Cell]], int]:
    """Return the rows a terminal shows (the user's first, at most MAX_ROWS, then REFERENCE_ROWS reference groups)
    and how many rows it leaves out; `limit`: reference groups shown; a group of rows (Table 3's) stays whole."""
    groups = table.groups or list(range(len(table.rows)))
    refs = list(dict.fromkeys(g for g, row in zip(groups, table.rows, strict=True) if is_reference(row)))
    runs = [row for g, row in zip(groups, table.rows, strict=True) if g not in refs][:MAX_ROWS]
    shown = set(refs[:limit])
    runs += [row for g, row in zip(groups, table.rows, strict=True) if g in shown]
    return runs, len(table.rows) - len(runs)


def _blocks(widths: list[int], keys: int, width: int) -> list[list[int]]:
    """Split the columns after the `keys` leading ones into blocks that fit `width` with the key columns repeated."""
    blocks: list[list[int]] = []
    for i in range(keys, len(widths)):
        if not blocks or sum(widths[j] + 2 for j in [*range(keys), *blocks[-1], i]) > width:
            blocks.append([])
        blocks[-1].append(i)
    return blocks or [[]]


def to_terminal(table: Table, width: int = WIDTH, shown: set[str] | None = None, refs: int = REFERENCE_ROWS) -> str:
    """Return a table for a terminal `width` columns wide: the user's rows first, at most MAX_ROWS of them, too many
    columns split into blocks, headers and notes wrapped at words; a note in `shown` (printed before) left out."""
    from rich import box
    from rich.console import Console
    from rich.table import Table as Grid
    from rich.text import Text

    shown_rows, left_out = terminal_rows(table, refs)
    rows = [[cell_text(c) for c in row] for row in shown_rows]
    widths = [max([*map(len, h.split()), *(len(r[i]) for r in rows)], default=1) for i, h in enumerate(table.columns)]
    keys = next((i for i, c in enumerate(table.columns) if c not in KEY_COLUMNS), 1) or 1
    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False, emoji=False)
    console.print(Text(table.title))
    if not any(c != MISSING for r in rows for c in r[keys:]):  # nothing measured: no grid of dashes
        rows, left_out = [], 0
        console.print(Text(f"({'no values: see the notes' if table.rows else 'no rows'})"))
    for block in _blocks(widths, keys, width) if rows else []:
        grid = Grid(box=box.MARKDOWN, pad_edge=False, padding=(0, 1, 0, 0))
        for i in [*range(keys), *block]:
            left = "left" if i == 0 or table.columns[i] in TEXT_COLUMNS else "right"
            grid.add_column(Text(table.columns[i]), justify=left, min_width=widths[i], max_width=widths[i])
        for row in rows:
            grid.add_row(*(Text(row[i]) for i in [*range(keys), *block]))
        console.print(grid)
    if left_out:
        console.print(Text(f"… {left_out} more rows: every table in full is named at the end"))
    shown = set() if shown is None else shown
    for note in (n for n in table.notes if n not in shown):
        console.print(
            Text(textwrap.fill(note, width, initial_indent="- ", subsequent_indent="  ", break_on_hyphens=False))
        )
        shown.add(note)
    lines = (line.rstrip() for line in console.file.getvalue().splitlines())  # type: ignore[attr-defined]
    return "\n".join(line for line in lines if line) + "\n"


def report_tables(models: list[ModelResult], reference: bool = True, board: Board | None = None) -> list[Table]:
    """Return the leaderboard, the ranked tables (benchmark and smoke-sample runs beside the paper), then one section
    per custom data.

    `board` replaces the leaderboard (a published board merged with new runs, `--base`); the paired comparisons of
    its runs follow it when there are any. A run on data that is not the published benchmark never shares a table,
    and so never an Overall Score ranking, with it: its tables are named `custom<N>_<table>`, titled with its data.
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
    for table in tables if unrecorded else []:
        table.notes.append(f"{', '.join(unrecorded)}: {NO_IDENTITY_NOTE}.")
    for n, (label, group) in enumerate(custom_groups(models).items(), start=1):
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


def custom_groups(models: list[ModelResult]) -> dict[str, list[ModelResult]]:
    """Return the runs on data other than the benchmark and the smoke sample, by the data they ran on (sorted)."""
    sections: dict[str, list[ModelResult]] = {}
    for m in (m for m in models if CUSTOM in m.dataset):
        sections.setdefault(m.data_label(), []).append(m)
    return dict(sorted(sections.items()))


RENDERERS = {"md": to_markdown, "csv": to_csv, "latex": to_latex}
EXTENSIONS = {"md": "md", "csv": "csv", "latex": "tex", "json": "json"}
