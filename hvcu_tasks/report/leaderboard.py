"""The ranked headline table: one entry per model (runs, the paper's rows, human, chance), and leaderboard.json."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.core.metrics import OFFICIAL_FULL_METRIC
from hvcu_tasks.data import jsonio
from hvcu_tasks.report.reference import reference_rows, rows_for
from hvcu_tasks.report.tables import (
    CHANCE_FULL,
    CHANCE_NAME,
    DISAGREE_MARK,
    FAMILY_LABEL,
    PAPER_MARK,
    PARTIAL_MARK,
    SMOKE_MARK,
    Table,
    disagreement,
)
from hvcu_tasks.results.runs import SMOKE, ModelResult, ReportError, checked_text, is_nan

SCHEMA = "hvcu-leaderboard"
SCHEMA_VERSION = 1
SOURCES = ("paper", "human", "chance", "run")
"""Where an entry comes from: a row of the paper's tables, the paper's human baseline, random guessing, a local run."""
RANKED_SOURCES = ("paper", "run")
"""The sources whose entries can be ranked (human and chance are references, not models)."""
REFERENCE_SOURCES = ("paper", "human", "chance")
RANK_COLUMN = "Score (official)"
LEADERBOARD_COLUMNS = [
    "Rank",
    "Model",
    RANK_COLUMN,
    "Context (official)",
    "Δ",
    "Score",
    *[f"{FAMILY_LABEL[f]} full" for f in FAMILIES],
    "95% CI",
    "Source",
]
LEADERBOARD_NOTES = [
    f"Ranked by {RANK_COLUMN}: the Overall Score of the base setting (mean of the three families' Acc_full) under "
    "the authors' answer parser, the number the paper reports, so [paper] rows and runs rank on one scale.",
    "Context (official): the same in the context setting; Δ: context minus base. Score: the base Overall Score "
    "under this toolkit's parser (– for [paper] rows, never measured with it).",
    "Impl./Aesth./Affect. full: Acc_full of each family, base setting, authors' parser. 95% CI: percentile "
    "bootstrap interval of Score (official) (2000 resamples, seed 0), for runs made with --log_samples.",
    "No rank (–): the human baseline and chance (references, not models), smoke-sample runs (†, not the "
    "benchmark), runs whose base setting is partial (*, a family missing or --limit) and models without a base "
    "Score (official).",
    "Partial runs (* after the name, Source run (partial)): a setting ran on a subset or lacks a family; Context "
    "(official) and Δ are – when the context setting is partial (a ranked * row: only its context setting is).",
    f"{DISAGREE_MARK}: the two parsers' base Scores (Score and Score (official)) differ by more than 1 point.",
]


@dataclass
class Entry:
    """One leaderboard row before ranking: what `leaderboard.json` stores per model."""

    model: str
    label: str
    source: str
    data: str
    rankable: bool
    score_base: float | None
    score_context: float | None
    score_base_hvcu: float | None
    score_context_hvcu: float | None
    acc_full: dict[str, float | None] = field(default_factory=dict)
    interval_base: list[float] | None = None
    notes: list[str] = field(default_factory=list)

    def delta(self) -> float | None:
        """Return context minus base Score (official), None unless both are known."""
        if self.score_base is None or self.score_context is None:
            return None
        return self.score_context - self.score_base

    def marks(self) -> str:
        """Return the marks after the model name in the label (†, *, ‡), '' when the label is not model + marks."""
        return self.label.removeprefix(self.model) if self.label.startswith(self.model) else ""

    def partial(self) -> bool:
        """Whether the label marks the entry partial (*: a setting ran on a subset or lacks a family)."""
        return PARTIAL_MARK in self.marks()


def _known(value: float | None) -> float | None:
    """Return a number, None when missing or not available (n/a is null in the leaderboard)."""
    return None if value is None or is_nan(value) else float(value)


def run_entry(model: ModelResult) -> Entry:
    """Return the leaderboard entry of a local run (base-setting columns, authors' parser unless said)."""
    from hvcu_tasks.report.stats import score_ci

    smoke = model.dataset == {SMOKE}
    partial = {s: s in model.settings and model.partial(s) for s in ("base", "context")}
    disagree = DISAGREE_MARK if disagreement(model, "base") else ""
    label = model.model + (SMOKE_MARK if smoke else "") + (PARTIAL_MARK if any(partial.values()) else "") + disagree
    base = model.settings.get("base", {})
    chains = model.chains_official.get("base", {})
    interval = (
        list(score_ci({f: list(v.values()) for f, v in chains.items()})) if set(chains) == set(FAMILIES) else None
    )
    score_base = _known(model.official_score("base"))
    notes = [f"{s}: {'; '.join(n)}" for s, n in model.notes.items() if n]
    return Entry(
        model=model.model,
        label=label,
        source="run",
        data=model.data_label(),
        rankable=not smoke and not partial["base"] and score_base is not None,
        score_base=score_base,
        score_context=None if partial["context"] else _known(model.official_score("context")),
        score_base_hvcu=_known(model.score("base")),
        score_context_hvcu=None if partial["context"] else _known(model.score("context")),
        acc_full={f: _known(base[f].get(OFFICIAL_FULL_METRIC)) if f in base else None for f in FAMILIES},
        interval_base=interval,
        notes=notes,
    )


def reference_entries() -> list[Entry]:
    """Return the paper's rows (base and context paired by model), the human baseline, and chance."""
    context = {r.model: r for r in rows_for("context")}
    human = {r.model for r in reference_rows() if r.human}
    entries = []
    for row in rows_for("base"):
        ctx = context.get(row.model)
        entries.append(
            Entry(
                model=row.model,
                label=row.model,
                source="human" if row.model in human else "paper",
                data="HVCU-Bench",
                rankable=row.model not in human,
                score_base=row.score,
                score_context=ctx.score if ctx else None,
                score_base_hvcu=None,
                score_context_hvcu=None,
                acc_full={f: row.families[f]["acc_full"] for f in FAMILIES},
                notes=[row.source] + ([ctx.source] if ctx else []),
            )
        )
    entries.append(chance_entry())
    return entries


def with_reference(published: list[Entry], reference: bool = True) -> list[Entry]:
    """Return a published board's entries for `--base`: without reference rows when `reference` is off; with the
    current paper, human and chance rows added when it has none (a board written with --no-reference)."""
    if not reference:
        return [e for e in published if e.source not in REFERENCE_SOURCES]
    if any(e.source in REFERENCE_SOURCES for e in published):
        return list(published)
    return reference_entries() + list(published)


def board_entries(models: list[ModelResult], reference: bool = True) -> list[Entry]:
    """Return the entries of a board: the paper's rows, human and chance (unless `reference` is off), then the runs."""
    runs = [run_entry(m) for m in models if m.settings]
    return (reference_entries() if reference else []) + runs


def chance_entry() -> Entry:
    """Return the chance row: a uniform random guess among four options at every level."""
    return Entry(
        model=CHANCE_NAME,
        label=CHANCE_NAME,
        source="chance",
        data="HVCU-Bench",
        rankable=False,
        score_base=CHANCE_FULL,
        score_context=CHANCE_FULL,
        score_base_hvcu=CHANCE_FULL,
        score_context_hvcu=CHANCE_FULL,
        acc_full=dict.fromkeys(FAMILIES, CHANCE_FULL),
        notes=["25% per question (four options), 1/64 for a whole chain of three"],
    )


def ranked(entries: list[Entry]) -> list[tuple[int | None, Entry]]:
    """Return entries best first by base Score (official) with their rank (ties share one; unranked get None)."""
    source_order = {s: i for i, s in enumerate(SOURCES)}
    order = sorted(
        entries,
        key=lambda e: (
            e.score_base is None,
            -(e.score_base or 0.0),
            source_order.get(e.source, len(SOURCES)),
            e.label,
        ),
    )
    out: list[tuple[int | None, Entry]] = []
    count, last, last_rank = 0, None, 0
    for e in order:
        if not e.rankable or e.score_base is None:
            out.append((None, e))
            continue
        count += 1
        if e.score_base != last:
            last, last_rank = e.score_base, count
        out.append((last_rank, e))
    return out


def _source_text(entry: Entry) -> str:
    """Return the Source cell: [paper], human, chance, run, or run (smoke sample / custom data / partial, ...)."""
    if entry.source == "paper":
        return PAPER_MARK
    if entry.source != "run":
        return entry.source
    what = [entry.data] if entry.data != "HVCU-Bench" else []
    what += ["partial"] if entry.partial() else []
    return f"run ({', '.join(what)})" if what else "run"


def _interval_text(interval: list[float] | None) -> str | None:
    """Format a 95% interval, None when absent."""
    return None if interval is None else f"[{interval[0]:.2f}, {interval[1]:.2f}]"


def leaderboard_table(entries: list[Entry], name: str = "leaderboard") -> Table:
    """Return the ranked headline table (best base Score (official) first)."""
    table = Table(name, "HVCU-Bench leaderboard (ranked by the base Score (official))", list(LEADERBOARD_COLUMNS))
    for rank, e in ranked(entries):
        table.rows.append(
            [
                "–" if rank is None else rank,
                e.label,
                e.score_base,
                e.score_context,
                e.delta(),
                e.score_base_hvcu,
                *[e.acc_full.get(f) for f in FAMILIES],
                _interval_text(e.interval_base),
                _source_text(e),
            ]
        )
    table.notes += LEADERBOARD_NOTES
    table.notes += [f"{e.label}: {'; '.join(e.notes)}" for e in entries if e.partial() and e.notes]
    return table


SUMMARY_COLUMNS = ["Rank", "Model", RANK_COLUMN, "Context (official)", "Score", "Source"]
SUMMARY_PAPER_ROWS = 3


def summary_table(entries: list[Entry], paper_rows: int = SUMMARY_PAPER_ROWS) -> Table:
    """Return the short leaderboard: every run beside the best `paper_rows` [paper] rows, human and chance."""
    board = ranked(entries)  # ranks of the whole board, not of the rows shown
    papers = [e for _rank, e in board if e.source == "paper"]
    shown = {id(e) for e in papers[:paper_rows]}
    table = Table(
        "leaderboard_summary",
        f"HVCU-Bench leaderboard: your runs beside the best {min(paper_rows, len(papers))} [paper] rows",
        list(SUMMARY_COLUMNS),
    )
    for rank, e in board:
        if e.source == "paper" and id(e) not in shown:
            continue
        row = [
            "–" if rank is None else rank,
            e.label,
            e.score_base,
            e.score_context,
            e.score_base_hvcu,
            _source_text(e),
        ]
        table.rows.append(row)
    table.notes.append(
        f"{RANK_COLUMN}: the Overall Score of the base setting under the authors' parser (the paper's number, the "
        "ranking); Context (official): the same in the context setting; Score: the base Overall Score under this "
        "toolkit's parser."
    )
    if len(papers) > paper_rows:
        table.notes.append(f"{len(papers) - paper_rows} more [paper] rows on the full leaderboard.")
    runs = [e for _rank, e in board if e.source == "run"]
    if any(e.data == SMOKE for e in runs):
        table.notes.append(
            f"{SMOKE_MARK} smoke sample: not the benchmark, never ranked; its numbers prove the path, not a score."
        )
    if any(e.partial() for e in runs):
        table.notes.append(f"{PARTIAL_MARK} partial: a family missing or --limit; no rank for a partial base setting.")
    return table


def leaderboard_json(entries: list[Entry]) -> str:
    """Return `leaderboard.json`: schema name and version, what ranks, and every entry best first (rank included)."""
    data = {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "ranked_by": "score_base: Overall Score, base setting, authors' parser (Score (official))",
        "entries": [{"rank": rank, **asdict(e)} for rank, e in ranked(entries)],
    }
    from hvcu_tasks.data.jsonio import json_safe

    return json.dumps(json_safe(data), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


_NUMBER_FIELDS = ("score_base", "score_context", "score_base_hvcu", "score_context_hvcu")
_TEXT_FIELDS = ("model", "label", "data")


def _percent(value: Any, where: str) -> float | None:
    """Return a percentage or None (null: n/a or not measured); refuse anything else naming the field."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ReportError(f"{where}: {value!r} is not a number or null")
    if not 0 <= value <= 100:
        raise ReportError(f"{where}: {value} is outside 0-100 (a percentage)")
    return float(value)


def _entry_from_json(raw: Any, where: str) -> Entry:
    """Return one checked entry of leaderboard.json."""
    if not isinstance(raw, dict):
        raise ReportError(f"{where}: expected an object, got {type(raw).__name__}")
    for key in (*_TEXT_FIELDS, "source", "rankable", *_NUMBER_FIELDS, "acc_full", "interval_base", "notes"):
        if key not in raw:
            raise ReportError(f"{where}.{key}: missing")
    for key in _TEXT_FIELDS:
        if not isinstance(raw[key], str) or not raw[key]:
            raise ReportError(f"{where}.{key}: expected a non-empty string, got {raw[key]!r}")
        checked_text(raw[key], f"{where}.{key}", "text")
    if raw["source"] not in SOURCES:
        raise ReportError(f"{where}.source: {raw['source']!r} is not one of {', '.join(SOURCES)}")
    if not isinstance(raw["rankable"], bool):
        raise ReportError(f"{where}.rankable: expected true or false, got {raw['rankable']!r}")
    numbers = {key: _percent(raw[key], f"{where}.{key}") for key in _NUMBER_FIELDS}
    acc = raw["acc_full"]
    if not isinstance(acc, dict) or set(acc) != set(FAMILIES):
        raise ReportError(f"{where}.acc_full: expected an object with keys {', '.join(FAMILIES)}")
    if raw["rankable"] and numbers["score_base"] is None:
        raise ReportError(f"{where}.rankable: true, but score_base is null (only a model with a base Score ranks)")
    if raw["rankable"] and raw["source"] not in RANKED_SOURCES:
        raise ReportError(
            f"{where}.rankable: true, but source is {raw['source']!r} (only {' and '.join(RANKED_SOURCES)} rank)"
        )
    interval = raw["interval_base"]
    if interval is not None and not (isinstance(interval, list) and len(interval) == 2):
        raise ReportError(f"{where}.interval_base: expected [low, high] or null, got {interval!r}")
    bounds = None if interval is None else [_percent(v, f"{where}.interval_base[{i}]") for i, v in enumerate(interval)]
    if bounds is not None and None in bounds:
        raise ReportError(f"{where}.interval_base: expected [low, high] or null, got {interval!r}")
    if bounds is not None and bounds[0] > bounds[1]:  # type: ignore[operator]
        raise ReportError(f"{where}.interval_base: low {bounds[0]} is above high {bounds[1]}")
    if not isinstance(raw["notes"], list) or not all(isinstance(n, str) for n in raw["notes"]):
        raise ReportError(f"{where}.notes: expected a list of strings")
    for i, note in enumerate(raw["notes"]):
        checked_text(note, f"{where}.notes[{i}]", "note")
    return Entry(
        model=raw["model"],
        label=raw["label"],
        source=raw["source"],
        data=raw["data"],
        rankable=raw["rankable"],
        **numbers,
        acc_full={f: _percent(acc[f], f"{where}.acc_full.{f}") for f in FAMILIES},
        interval_base=bounds,  # type: ignore[arg-type]
        notes=list(raw["notes"]),
    )


def read_leaderboard(path: Path) -> list[Entry]:
    """Read and check a published leaderboard.json; a wrong schema, version or field stops naming file and field."""
    try:
        data = jsonio.read_json(path)
    except OSError as exc:
        raise ReportError(f"{path}: cannot read it ({exc})") from exc
    except jsonio.JsonReadError as exc:
        raise ReportError(f"{path}: not JSON ({exc.reason})") from exc
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a leaderboard object, got {type(data).__name__}")
    if data.get("schema") != SCHEMA:
        raise ReportError(f"{path}: schema: expected {SCHEMA!r}, got {data.get('schema')!r} (not a leaderboard.json)")
    if data.get("version") != SCHEMA_VERSION:
        raise ReportError(
            f"{path}: version: expected {SCHEMA_VERSION}, got {data.get('version')!r} (written by another release)"
        )
    if not isinstance(data.get("entries"), list):
        raise ReportError(f"{path}: entries: expected a list")
    entries = [_entry_from_json(raw, f"{path}: entries[{i}]") for i, raw in enumerate(data["entries"])]
    seen: dict[tuple[str, str], int] = {}
    for i, e in enumerate(entries):
        key = (e.source, e.model)
        if key in seen:
            raise ReportError(f"{path}: entries[{i}].model: {e.model!r} ({e.source}) is also entries[{seen[key]}]")
        seen[key] = i
    return entries


def merge(published: list[Entry], runs: list[Entry], where: Path) -> list[Entry]:
    """Add new runs to a published board; a model already on it as a run is refused (never overwritten silently)."""
    on_board = {e.model: i for i, e in enumerate(published) if e.source == "run"}
    for e in runs:
        if e.model in on_board:
            raise ReportError(
                f"{where}: entries[{on_board[e.model]}].model: {e.model!r} is on the published board and in the "
                "new runs; remove it from one (a published row is never replaced silently)"
            )
    return published + runs
