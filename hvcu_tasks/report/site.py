"""`hvcu report --format html --out DIR`: the static site (index.html, models/<name>.html, the chain browser)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from hvcu_tasks.data.files import inside, write_atomic
from hvcu_tasks.report.browser import write_browser
from hvcu_tasks.report.figures import caption
from hvcu_tasks.report.html import (
    BOARD_SECTION,
    ModelPage,
    page_model,
    page_names,
    render_index,
    render_model_page,
    table_html,
)
from hvcu_tasks.report.tables import (
    Table,
    aspect_table,
    compare_table,
    error_table,
    interval_table,
    setting_table,
)
from hvcu_tasks.results.run_record import shown_paths
from hvcu_tasks.results.runs import SMOKE, ModelResult, SampleLog

MODELS_DIR = "models"
MODEL_COLUMNS = ("Model", "A", "B", "Run")
"""The columns whose cells name a model (kept as they are: pages are found and linked by the model's name)."""


def placed_table(table: Table, runs: Sequence[Path]) -> Table:
    """Return a table with the absolute paths in its title, notes and text cells (a custom data folder) shown as the
    model pages show them: from the runs folders, else by base name (results.run_record.shown_path)."""
    keep = {i for i, column in enumerate(table.columns) if column in MODEL_COLUMNS}
    rows = [
        [shown_paths(c, runs) if isinstance(c, str) and i not in keep else c for i, c in enumerate(row)]
        for row in table.rows
    ]
    notes = [shown_paths(n, runs) for n in table.notes]
    return dataclasses.replace(table, title=shown_paths(table.title, runs), rows=rows, notes=notes)


def _board_row(board: Table | None, model: str) -> Table | None:
    """Return the run's row of the leaderboard as a one-row table (its rank as on the board), None if absent.

    Only a row whose Source is a run counts: a [paper] row of a model with the same name is another result.
    """
    if board is None:
        return None
    label, source = board.columns.index("Model"), board.columns.index("Source")
    rows = [
        r
        for r in board.rows
        if (r[label] == model or str(r[label]).rstrip("*†‡") == model) and str(r[source]).startswith("run")
    ]
    if not rows:
        return None
    return Table("leaderboard", "On the leaderboard", list(board.columns), rows, list(board.notes))


COMPARISON_COLUMNS = {"pairs": ("A", "B"), "versus_paper": ("Run",), "per_model": ("Model",)}
"""The tables a model page shows its own rows of (comparisons, the per-model view), and the columns naming a run."""


def _rows_of(table: Table, model: str) -> Table | None:
    """Return the rows of a comparison table that name the model as a run (marks *, †, ‡ ignored), None if none."""
    columns = [table.columns.index(c) for c in COMPARISON_COLUMNS[table.name]]
    rows = [r for r in table.rows if any(str(r[i]).rstrip("*†‡") == model for i in columns)]
    if not rows:
        return None
    return Table(table.name, table.title, list(table.columns), rows, list(table.notes))


def model_tables(
    model: ModelResult,
    board: Table | None,
    pair: tuple[ModelResult, ModelResult] | None = None,
    comparisons: Sequence[Table] = (),
) -> list[Table]:
    """Return one model's tables: its leaderboard row, its rows of the `comparisons` (paired with other runs,
    against the paper's rows), per setting its levels, aspects, errors and intervals, and the comparison of `pair`
    (`--compare`: B against A, e.g. tuned against its base model) when given."""
    tables = [t for t in [_board_row(board, model.model)] if t is not None]
    tables += [t for t in (_rows_of(c, model.model) for c in comparisons) if t is not None]
    for setting in (s for s in ("base", "context") if s in model.settings):
        tables.append(setting_table([model], setting, reference=False))
        tables.append(aspect_table([model], setting))
        tables.append(error_table([model], setting))
        if model.chains.get(setting):
            tables.append(interval_table([model], setting))
        if pair is not None and all(setting in m.settings for m in pair):
            tables.append(compare_table(*pair, setting))
    return tables


def _share(part: int, whole: int) -> str:
    """Return part/whole in percent for a page: 0% and 100% only when exactly so, else one decimal (n/a of none)."""
    if whole <= 0:
        return "n/a" if part else "0%"
    if part == 0 or part == whole:
        return "0%" if part == 0 else "100%"
    share = 100 * part / whole
    return "<0.1%" if share < 0.1 else ">99.9%" if share > 99.9 else f"{share:.1f}%"


def failed_requests_note(model: ModelResult) -> str | None:
    """Return the model page's line on failed requests: per setting the count and share of its requests."""
    parts = []
    for setting in (s for s in ("base", "context") if s in model.settings):
        found = model.failed_requests(setting)
        if found is None:
            parts.append(f"{setting} not recorded")
            continue
        failed, requests, exact = found
        if exact:
            parts.append(f"{setting} {failed:,} of {requests:,} ({_share(failed, requests)})")
        else:
            parts.append(f"{setting} {failed:,} of at most {requests:,} (at least {_share(failed, requests)})")
    if not parts:
        return None
    return f"Failed requests: {' · '.join(parts)} (requests that got no usable reply: scored as wrong answers)"


def existing_pages(folder: Path) -> dict[str, str]:
    """Return model -> file name of the model pages already in `folder` (read from each page's title).

    Every .html file there is listed: one whose model cannot be read is listed under a key no model has (NUL and
    its file name), so its name is never handed to another model.
    """
    pages: dict[str, str] = {}
    for path in sorted(folder.glob("*.html")) if folder.is_dir() else []:
        try:
            model = page_model(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            model = None
        pages.setdefault(model if model is not None else f"\0{path.name}", path.name)
    return pages


def refresh_board_row(page: Path, board: Table | None, model: str) -> bool:
    """Rewrite the leaderboard row on a kept model page (a published model's) from the merged board; False (and a
    warning) when the page has no such row to rewrite."""
    row = _board_row(board, model)
    text = page.read_text(encoding="utf-8")
    if row is None or not BOARD_SECTION.search(text):
        print(
            f"warning: {page}: no leaderboard row on it to update; it shows the board it was written with",
            file=sys.stderr,
        )
        return False
    write_atomic(page, BOARD_SECTION.sub(lambda _m: table_html(row), text, count=1))
    return True


def write_site(
    out: Path,
    tables: list[Table],
    models: list[ModelResult],
    figures: list[Path],
    runs: Sequence[Path],
    compare: tuple[ModelResult, ModelResult] | None = None,
    reference: bool = True,
    published: Sequence[str] = (),
    data: Sequence[str] = (),
    logs: Sequence[SampleLog] = (),
) -> list[Path]:
    """Write index.html and one page per model into `out` (figures already under it); return the written pages.

    `published`: models of a published board (`--base`) not among the runs. A page an earlier report left under
    models/ keeps its file name (it is never handed to another model) and stays linked; on a published model's
    page only its leaderboard row is rewritten (from the merged board), the rest is as it was written. `data`: the
    data sources the chain browser may take images from (`hvcu report --data`); `logs`: the sample logs it shows.
    """
    page = write_browser(logs, out, data, runs)  # the chain browser (images from `data` only), None without logs
    chains = None if page is None else Path(page).resolve().relative_to(out.resolve()).as_posix()
    tables = [placed_table(t, runs) for t in tables]
    shown = [m for m in models if m.settings or m.general]
    current = {m.model for m in shown}
    existing = existing_pages(out / MODELS_DIR)
    kept = {model: name for model, name in existing.items() if model in current or model in published}
    names = kept | page_names(sorted(current - set(kept)), taken=existing.values())
    links = {model: f"{MODELS_DIR}/{name}" for model, name in names.items()}
    svgs = [(p, shown_paths(caption(p.stem, models, reference), runs)) for p in figures if p.suffix == ".svg"]
    board = next((t for t in tables if t.name == "leaderboard"), None)
    comparisons = [t for t in tables if t.name in COMPARISON_COLUMNS]
    written = [out / "index.html"]
    write_atomic(written[0], render_index(tables, svgs, links, chains))
    (out / MODELS_DIR).mkdir(exist_ok=True)
    for model in sorted(set(kept) - current):
        path = inside(out, MODELS_DIR, kept[model])
        if refresh_board_row(path, board, model):
            written.append(path)
    for model in shown:
        pair = compare if compare is not None and any(model is m for m in compare) else None
        tables_of = [placed_table(t, runs) for t in model_tables(model, board, pair, comparisons)]
        page = ModelPage(model.model, names[model.model], tables_of, records=model.records)
        data = f"Data: {model.data_label()}" + (
            " (a handful of items shipped for checking the pipeline): its numbers say nothing about the model"
            if model.dataset == {SMOKE}
            else ""
        )
        failed = failed_requests_note(model)
        partial = [f"{s}: {n}" for s, notes in model.notes.items() for n in notes]
        page.notes = [shown_paths(n, runs) for n in [data, *([failed] if failed else []), *partial, *model.data_notes]]
        path = inside(out, MODELS_DIR, page.file)
        write_atomic(path, render_model_page(page, chains))
        written.append(path)
    return written
