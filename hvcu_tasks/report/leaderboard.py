"""The ranked headline table: one entry per model (runs, the paper's rows, human, chance), and leaderboard.json."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from hvcu_tasks.core.families import ASPECTS, FAMILIES
from hvcu_tasks.core.metrics import OFFICIAL_FULL_METRIC
from hvcu_tasks.data import jsonio
from hvcu_tasks.report import stats
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
from hvcu_tasks.report.uncertainty import BOARD_FAMILY, CHAINS, COUNTS, Contender, Pair, Uncertainty, Verdicts, assess
from hvcu_tasks.results.runs import (
    BENCHMARK,
    SMOKE,
    ModelResult,
    ReportError,
    checked_text,
    finite,
    is_nan,
    number_text,
)

SCHEMA = "hvcu-leaderboard"
SCHEMA_VERSION = 3
READ_VERSIONS = (1, 2, 3)
"""Versions `--base` reads: 1 (before intervals: its runs carry no verdicts, so they are compared unpaired), 2 (its
bootstrap intervals and groups are recomputed) and 3."""
FAILED_LIMIT = 0.01
"""The largest share of a run's base-setting requests that may have failed for it to be ranked."""
REQUESTS_PER_CHAIN = 3
BENCHMARK_SIZES = {family: sum(aspects.values()) for family, aspects in ASPECTS.items()}
"""Samples per family of the published benchmark (the paper's Table 5): the sizes of its binomial intervals."""
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
    "95% CI",
    "Rank range",
    "Group",
    "Failed",
    "Context (official)",
    "Δ",
    "Δ 95% CI",
    "Score",
    *[f"{FAMILY_LABEL[f]} full" for f in FAMILIES],
    "Source",
]
LEADERBOARD_NOTES = [
    f"Ranked by {RANK_COLUMN}: the Overall Score of the base setting (mean of the three families' Acc_full) under "
    "the authors' answer parser, the number the paper reports, so [paper] rows and runs rank on one scale.",
    "Context (official): the same in the context setting; Δ: context minus base. Score: the base Overall Score "
    "under this toolkit's parser (– for [paper] rows, never measured with it).",
    "Impl./Aesth./Affect. full: Acc_full of each family, base setting, authors' parser.",
    "95% CI: each family's exact (Clopper–Pearson) 95% interval of its Acc_full, combined into the Score's by MOVER "
    "(Score ± the root of the summed squared distances to the families' bounds, over 3); from a run's chains or, "
    "without sample logs, from its families' Acc_full and sizes. Δ 95% CI: the paired interval of the context gain "
    "(Bonett–Price), for runs logged in both settings.",
    "Every two ranked rows are compared (leaderboard.json lists each pair): two runs logged on the same samples "
    "paired (Bonett–Price), any other two unpaired (Agresti–Caffo); the p-values are adjusted together by Holm's "
    "rule, so the chance of any false 'significant' on the board is at most 5%.",
    "Rank range: 1 + the rows significantly above a row, to the number of ranked rows minus those significantly "
    "below it; all rows' ranges hold their true ranks together whenever no comparison is falsely significant "
    "(probability at least 95%), ties included. Group: two rows share a letter exactly when their difference is "
    "not significant.",
    "Failed: the requests that got no reply (count and share of the base setting's; context's when any failed). A "
    f"run with more than {FAILED_LIMIT:.0%} of its base requests failed is not ranked: its Score counts every "
    "failure as a wrong answer.",
    "No rank (–): the human baseline and chance (references, not models), smoke-sample runs (†, not the "
    "benchmark), runs whose base setting is partial (*, a family missing or --limit), runs with too many failed "
    "requests and models without a base Score (official).",
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
    family_sizes: dict[str, int] | None = None
    """Samples per family of the base setting: the sizes of a binomial interval (None: the benchmark's)."""
    fingerprint: str = ""
    """The data fingerprint of the verdicts (its families' fingerprints), '' when the run did not record it."""
    verdicts: dict[str, dict[str, dict[str, bool]]] = field(default_factory=dict)
    """Per setting and family: sample id -> full chain right under the authors' parser (runs with sample logs)."""
    interval_context: list[float] | None = None
    interval_gain: list[float] | None = None
    interval_method: str | None = None
    rank_range: list[int] | None = None
    letters: str | None = None
    """The board's letter groups: two rows share a letter exactly when their difference is not significant."""
    failed_requests: dict[str, list[int]] = field(default_factory=dict)
    """Per setting of a run: [failed requests, requests] (requests: 3 per chain)."""
    unranked_because: str | None = None
    """Why a run that would rank has no rank (too many failed requests), in one line."""

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
    smoke = model.dataset == {SMOKE}
    partial = {s: s in model.settings and model.partial(s) for s in ("base", "context")}
    disagree = DISAGREE_MARK if disagreement(model, "base") else ""
    label = model.model + (SMOKE_MARK if smoke else "") + (PARTIAL_MARK if any(partial.values()) else "") + disagree
    base = model.settings.get("base", {})
    verdicts = {s: dict(fams) for s, fams in model.chains_official.items() if set(fams) == set(FAMILIES)}
    score_base = _known(model.official_score("base"))
    for setting, chains in verdicts.items():
        fams = model.settings.get(setting, {})
        recorded = {f: _known(fams[f].get(OFFICIAL_FULL_METRIC)) if f in fams else None for f in FAMILIES}
        problem = verdicts_problem(chains, per_family=recorded)
        if problem:
            files = ", ".join(sorted({str(r.file) for r in model.records})) or "its results files"
            raise ReportError(
                f"{model.model} ({setting}): the sample logs and the results file disagree: {problem} ({files}); "
                "keep each samples file beside the results file of its run"
            )
    notes = [f"{s}: {'; '.join(n)}" for s, n in model.notes.items() if n]
    failed = failed_requests(model)
    because = None
    base_failed = failed.get("base")
    if base_failed and base_failed[1] and base_failed[0] / base_failed[1] > FAILED_LIMIT:
        because = (
            f"{base_failed[0]:,} of {base_failed[1]:,} base requests failed ({base_failed[0] / base_failed[1]:.1%}, "
            f"above the {FAILED_LIMIT:.0%} limit): not ranked, its Score counts each failure as a wrong answer"
        )
    return Entry(
        model=model.model,
        label=label,
        source="run",
        data=model.data_label(),
        rankable=not smoke and not partial["base"] and score_base is not None and because is None,
        score_base=score_base,
        score_context=None if partial["context"] else _known(model.official_score("context")),
        score_base_hvcu=_known(model.score("base")),
        score_context_hvcu=None if partial["context"] else _known(model.score("context")),
        acc_full={f: _known(base[f].get(OFFICIAL_FULL_METRIC)) if f in base else None for f in FAMILIES},
        notes=notes,
        family_sizes=_run_sizes(model),
        fingerprint=model.data_fingerprint(),
        verdicts=verdicts,
        failed_requests=failed,
        unranked_because=because,
    )


def failed_requests(model: ModelResult) -> dict[str, list[int]]:
    """Return per setting [failed requests, requests] summed over the families that recorded both counts."""
    out = {}
    for setting, fams in model.settings.items():
        counted = [
            (f.get("n_failed_requests"), f.get("n_chains"))
            for f in fams.values()
            if isinstance(f.get("n_failed_requests"), (int, float)) and isinstance(f.get("n_chains"), (int, float))
        ]
        if counted:
            out[setting] = [int(sum(n for n, _ in counted)), REQUESTS_PER_CHAIN * int(sum(c for _, c in counted))]
    return out


def verdicts_problem(
    chains: dict[str, dict[str, bool]],
    score: float | None = None,
    per_family: dict[str, float | None] | None = None,
) -> str | None:
    """Return why chain verdicts cannot be the ones behind a Score (official) or the families' Acc_full (official)
    recorded beside them, None when they can (a value recorded as None is not checked)."""
    if not all(chains.values()):
        return None
    acc = {f: 100 * sum(v.values()) / len(v) for f, v in chains.items()}
    for family, value in (per_family or {}).items():
        if value is not None and family in acc and abs(acc[family] - value) > 0.01:
            return f"the {family} chains give an Acc_full (official) of {acc[family]:.2f}, the file records {value:.2f}"
    from_chains = sum(acc.values()) / len(acc)
    if score is not None and abs(from_chains - score) > 0.01:
        return f"the chains give a Score (official) of {from_chains:.2f}, the Score recorded is {score:.2f}"
    return None


def _run_sizes(model: ModelResult) -> dict[str, int] | None:
    """Return a run's chains per family in the base setting (its n_chains), None unless every family has one."""
    base = model.settings.get("base", {})
    sizes = {f: base[f].get("n_chains") for f in FAMILIES if f in base}
    if set(sizes) != set(FAMILIES) or not all(isinstance(n, (int, float)) and n > 0 for n in sizes.values()):
        return None
    return {f: int(n) for f, n in sizes.items()}  # type: ignore[arg-type]


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
                family_sizes=dict(BENCHMARK_SIZES),
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


@dataclass
class Board:
    """A leaderboard's entries with their intervals filled in, and the board's pairs and detectable differences."""

    entries: list[Entry]
    uncertainty: Uncertainty


def entry_key(entry: Entry) -> str:
    """Return an entry's key on the board: its source and model (unique on a board)."""
    return f"{entry.source}:{entry.model}"


def _sizes(entry: Entry) -> dict[str, int] | None:
    """Return the family sizes of a binomial interval: the entry's own, else the benchmark's for its rows."""
    if entry.family_sizes is not None:
        return entry.family_sizes
    return dict(BENCHMARK_SIZES) if entry.data == BENCHMARK and entry.source in ("paper", "human", "run") else None


def _contender(entry: Entry) -> Contender:
    """Return what the uncertainty can draw from for an entry (chance is exact: nothing)."""
    acc = {f: v for f, v in entry.acc_full.items() if v is not None}
    sizes = _sizes(entry) if entry.source != "chance" and set(acc) == set(FAMILIES) else None
    verdicts = {s: Verdicts(v, entry.fingerprint) for s, v in entry.verdicts.items()}
    return Contender(
        entry_key(entry),
        entry.rankable,
        verdicts.get("base"),
        verdicts.get("context"),
        acc or None,
        sizes,
    )


def make_board(entries: list[Entry]) -> Board:
    """Return the board of `entries` with every interval, comparison, rank range and letter computed from them."""
    order = [e for _rank, e in ranked(entries)]
    found = assess([_contender(e) for e in order], list(FAMILIES), BENCHMARK_SIZES)
    filled = []
    for e in entries:
        a = found.assessments[entry_key(e)]
        filled.append(
            replace(
                e,
                interval_base=None if a.score is None else list(a.score),
                interval_context=None if a.context is None else list(a.context),
                interval_gain=None if a.gain is None else list(a.gain),
                interval_method=a.method,
                rank_range=None if a.rank_range is None else list(a.rank_range),
                letters=a.letters,
            )
        )
    return Board(filled, found)


def _source_text(entry: Entry) -> str:
    """Return the Source cell: [paper], human, chance, run, or run (smoke sample / custom data / partial, ...)."""
    if entry.source == "paper":
        return PAPER_MARK
    if entry.source != "run":
        return entry.source
    what = [entry.data] if entry.data != "HVCU-Bench" else []
    what += ["partial"] if entry.partial() else []
    return f"run ({', '.join(what)})" if what else "run"


def _interval_text(interval: list[float] | tuple[float, float] | None) -> str | None:
    """Format a 95% interval, None when absent."""
    if interval is None:
        return None
    return f"[{interval[0]:.2f}, {interval[1]:.2f}]"


def failed_text(entry: Entry) -> str | None:
    """Format the Failed cell: '0', or each setting's failed count and share ('base 3150 (100%)'), None unknown."""
    if not entry.failed_requests:
        return None
    parts = [
        f"{setting} {n} ({n / total:.1%})".replace(".0%)", "%)")
        for setting, (n, total) in entry.failed_requests.items()
        if n
    ]
    if not parts:
        return "0"
    base = entry.failed_requests.get("base")
    return ", ".join(parts).removeprefix("base ") if base and base[0] and len(parts) == 1 else ", ".join(parts)


def _range_text(bounds: list[int] | None) -> str | None:
    """Format a rank range ('3' when it is one rank, '2–5' otherwise), None when absent."""
    if bounds is None:
        return None
    return str(bounds[0]) if bounds[0] == bounds[1] else f"{bounds[0]}–{bounds[1]}"


def detectable_note(board: Board) -> str:
    """Return the note on the smallest Score difference the board can detect."""
    u = board.uncertainty
    sizes = "/".join(str(BENCHMARK_SIZES[f]) for f in FAMILIES)
    text = (
        f"Detectable difference: with families of {sizes} samples, two independent models at 50% Acc_full that truly "
        f"differ by {u.detectable_independent:.2f} points in the Score are found different in 80% of evaluations "
        f"(two-sided, 5% level); an observed difference above {u.significant_independent:.2f} points is significant "
        "on its own, before the board's adjustment ([paper] rows are compared this way: the widest case)."
    )
    if u.detectable_paired is not None:
        text += (
            f" Paired runs here detect {u.detectable_paired:.2f} points (the median over their pairs: the share of "
            "samples on which two chains disagree sets it)."
        )
    return text


def _unranked_notes(board: Board) -> list[str]:
    """Return one line per run left unranked for its failed requests."""
    return [f"{e.label}: {e.unranked_because}." for e in board.entries if e.unranked_because]


def leaderboard_table(board: Board, name: str = "leaderboard") -> Table:
    """Return the ranked headline table (best base Score (official) first) with its intervals."""
    table = Table(name, "HVCU-Bench leaderboard (ranked by the base Score (official))", list(LEADERBOARD_COLUMNS))
    for rank, e in ranked(board.entries):
        table.rows.append(
            [
                "–" if rank is None else rank,
                e.label,
                e.score_base,
                _interval_text(e.interval_base),
                _range_text(e.rank_range),
                e.letters,
                failed_text(e),
                e.score_context,
                e.delta(),
                _interval_text(e.interval_gain),
                e.score_base_hvcu,
                *[e.acc_full.get(f) for f in FAMILIES],
                _source_text(e),
            ]
        )
    table.notes += _unranked_notes(board)
    table.notes += LEADERBOARD_NOTES
    table.notes.append(adjustment_note(board))
    table.notes.append(detectable_note(board))
    unranked = {entry_key(e): e.label for e in board.entries}
    if board.uncertainty.unranked:
        names = ", ".join(unranked[k] for k in board.uncertainty.unranked)
        table.notes.append(f"No interval or rank range for {names}: no sample logs and no family sizes to count.")
    table.notes += [f"{e.label}: {'; '.join(e.notes)}" for e in board.entries if e.partial() and e.notes]
    return table


def adjustment_note(board: Board) -> str:
    """Return the note naming the multiple-comparison adjustment and the size of each family it ran over."""
    families = dict.fromkeys((p.family, p.family_size) for p in board.uncertainty.pairs)
    sizes = "; ".join(f"{name}: {size} comparisons" for name, size in families) or "no comparison"
    return (
        f"Adjustment: {stats.ADJUSTMENT} over each family of comparisons ({sizes}). p: the z-test of the pair alone "
        "(its 95% CI excludes 0 exactly when p < 0.05); p (Holm): adjusted; Significant: p (Holm) < 0.05."
    )


COMPARISON_TAIL = ["95% CI", "p", "p (Holm)", "Significant"]
PAIR_COLUMNS = ["A", "B", "Score A", "Score B", "Δ (B − A)", *COMPARISON_TAIL]
VERSUS_COLUMNS = ["Run", "[paper] row", "Score (run)", "Score (paper)", "Δ (run − paper)", *COMPARISON_TAIL]


def _oriented(pair: Pair, b: str) -> Pair:
    """Return the pair with `b` as its B (the sign of Δ and of its interval flipped when it was A)."""
    if pair.b == b:
        return pair
    low, high = pair.interval
    return replace(pair, a=pair.b, b=pair.a, delta=-pair.delta, interval=(-high, -low))


def _comparison_rows(board: Board, pairs: list[Pair], b_first: bool = False) -> list[list[Any]]:
    """Return one table row per comparison: both labels and Scores, Δ, its 95% CI, raw and adjusted p, verdict."""
    by_key = {entry_key(e): e for e in board.entries}
    rows = []
    for pair in pairs:
        a, b = by_key[pair.a], by_key[pair.b]
        first, second = (b, a) if b_first else (a, b)
        names = [first.label, second.label, first.score_base, second.score_base]
        rows.append(
            [
                *names,
                round(pair.delta, 2),
                _interval_text(pair.interval),
                stats.p_text(pair.p_value),
                stats.p_text(pair.p_adjusted),
                "yes" if pair.significant else "no",
            ]
        )
    return rows


def run_pairs(board: Board) -> list[Pair]:
    """Return the comparisons of two runs (ranked or on one unranked sample set), as the board made them."""
    sources = {entry_key(e): e.source for e in board.entries}
    return [p for p in board.uncertainty.pairs if sources[p.a] == sources[p.b] == "run"]


def versus_pairs(board: Board) -> list[Pair]:
    """Return each ranked run against each [paper] row, the run as B (Δ = run − paper)."""
    sources = {entry_key(e): e.source for e in board.entries}
    found = []
    for p in board.uncertainty.pairs:
        kinds = {sources[p.a], sources[p.b]}
        if p.family == BOARD_FAMILY and kinds == {"run", "paper"}:
            found.append(_oriented(p, p.a if sources[p.a] == "run" else p.b))
    return found


def versus_table(board: Board) -> Table:
    """Return every ranked run against every [paper] row: Score (official) difference, interval, p-values."""
    table = Table("versus_paper", "Each run against the paper's rows (base Score (official))", list(VERSUS_COLUMNS))
    table.rows += _comparison_rows(board, versus_pairs(board), b_first=True)
    table.notes += [
        "Δ: the run's Score (official) minus the [paper] row's (B − A with the run as B, as in every comparison of "
        "this report). 95% CI and p: unpaired (Agresti–Caffo per family, the families' variances summed), since the "
        "paper published no per-sample answers; the run's counts from its chains, the row's from its families' "
        "Acc_full and the benchmark's family sizes.",
        adjustment_note(board),
        detectable_note(board),
    ]
    return table


def pairs_table(board: Board) -> Table:
    """Return every two runs compared on the board: Score (official) difference, interval, p-values."""
    table = Table("pairs", "Comparisons of the runs (base Score (official))", list(PAIR_COLUMNS))
    table.rows += _comparison_rows(board, run_pairs(board))
    table.notes += [
        "A, B: two runs, B ranked above A; Δ: Score (official) of B minus A (authors' parser, as the board ranks). "
        "Runs made with --log_samples on the same samples (same ids and data fingerprint) are compared paired "
        "(Bonett–Price per family: one sample added to each discordant cell), any other two unpaired "
        "(Agresti–Caffo); 95% CI: B − A ± 1.96 SE of the adjusted difference.",
        adjustment_note(board),
        detectable_note(board),
    ]
    return table


SUMMARY_COLUMNS = [
    "Rank",
    "Rank range",
    "Model",
    RANK_COLUMN,
    "95% CI",
    "Failed",
    "Context (official)",
    "Score",
    "Source",
]
SUMMARY_PAPER_ROWS = 3


def summary_table(whole: Board, paper_rows: int = SUMMARY_PAPER_ROWS) -> Table:
    """Return the short leaderboard: every run beside the best `paper_rows` [paper] rows, human and chance."""
    board = ranked(whole.entries)  # ranks of the whole board, not of the rows shown
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
            _range_text(e.rank_range),
            e.label,
            e.score_base,
            _interval_text(e.interval_base),
            failed_text(e),
            e.score_context,
            e.score_base_hvcu,
            _source_text(e),
        ]
        table.rows.append(row)
    table.notes += _unranked_notes(whole)
    table.notes.append(
        f"{RANK_COLUMN}: the Overall Score of the base setting under the authors' parser (the paper's number, the "
        "ranking); Context (official): the same in the context setting; Score: the base Overall Score under this "
        "toolkit's parser. 95% CI: exact per family, combined (MOVER); Rank range: from the Holm-adjusted "
        "comparisons of every two ranked rows; Failed: requests without a reply. The full leaderboard explains them."
    )
    table.notes.append(detectable_note(whole))
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


def _verdicts_json(verdicts: dict[str, dict[str, dict[str, bool]]]) -> dict[str, Any]:
    """Return an entry's verdicts as stored: per setting and family, the sorted ids and a string of 0/1."""
    return {
        setting: {
            family: {"ids": sorted(chains), "chains": "".join("1" if chains[s] else "0" for s in sorted(chains))}
            for family, chains in fams.items()
        }
        for setting, fams in verdicts.items()
    }


def _pair_json(pair: Pair, by_key: dict[str, Entry]) -> dict[str, Any]:
    """Return one comparison as stored in leaderboard.json."""
    a, b = by_key[pair.a], by_key[pair.b]
    return {
        "a": {"model": a.model, "source": a.source},
        "b": {"model": b.model, "source": b.source},
        "delta": pair.delta,
        "interval": list(pair.interval),
        "p_value": pair.p_value,
        "p_adjusted": pair.p_adjusted,
        "significant": pair.significant,
        "paired": pair.paired,
        "family": pair.family,
    }


METHODS = {
    "score_interval": "each family's exact (Clopper-Pearson) interval of its Acc_full, combined by MOVER",
    "paired": "two runs logged on the same samples: Bonett-Price adjusted Wald interval per family, variances summed",
    "unpaired": "any other two rows: Agresti-Caffo adjusted Wald interval per family, variances summed",
    "p_value": "two-sided z-test of the adjusted difference (the 95% interval excludes 0 exactly when p < 0.05); "
    f"p-values below {stats.P_FLOOR:g} are stored as {stats.P_FLOOR:g}",
    "adjustment": f"{stats.ADJUSTMENT}, over each family of comparisons; significant: p_adjusted < 0.05",
    "rank_range": "1 + rows significantly above, to the number of ranked rows - rows significantly below",
    "letters": "compact letter display: two rows share a letter exactly when their difference is not significant",
}


def leaderboard_json(board: Board) -> str:
    """Return `leaderboard.json`: schema and version, what ranks, how the intervals were made, every entry best
    first (rank and intervals included; runs with their chain verdicts, so a later `--base` pairs them again) and
    every comparison (Δ = Score(b) - Score(a), base setting, authors' parser)."""
    from hvcu_tasks.data.jsonio import json_safe

    u = board.uncertainty
    entries, compact = [], {}
    for n, (rank, e) in enumerate(ranked(board.entries)):
        token = f"\0verdicts-{n}\0"  # a NUL never survives a checked text field, so it is never a user's text
        compact[json.dumps(token)] = json.dumps(_verdicts_json(e.verdicts), ensure_ascii=False, separators=(",", ":"))
        entries.append({"rank": rank, **asdict(e), "verdicts": token})
    by_key = {entry_key(e): e for e in board.entries}
    data = {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "ranked_by": "score_base: Overall Score, base setting, authors' parser (Score (official))",
        "failed_limit": FAILED_LIMIT,
        "uncertainty": {
            "level": stats.LEVEL,
            "methods": METHODS,
            "detectable_difference": {
                "independent": u.detectable_independent,
                "significant_independent": u.significant_independent,
                "paired": u.detectable_paired,
                "family_sizes": dict(BENCHMARK_SIZES),
                "power": stats.POWER,
            },
        },
        "entries": entries,
        "pairs": [],
    }
    for n, pair in enumerate(u.pairs):  # one line per comparison: a board of 20 rows has 190
        token = f"\0pair-{n}\0"
        compact[json.dumps(token)] = json.dumps(json_safe(_pair_json(pair, by_key)), ensure_ascii=False)
        data["pairs"].append(token)
    text = json.dumps(json_safe(data), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return re.sub(r'"\\u0000(?:verdicts|pair)-\d+\\u0000"', lambda m: compact[m.group(0)], text)


_NUMBER_FIELDS = ("score_base", "score_context", "score_base_hvcu", "score_context_hvcu")
_TEXT_FIELDS = ("model", "label", "data")


def _percent(value: Any, where: str) -> float | None:
    """Return a percentage or None (null: n/a or not measured); refuse anything else naming the field."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not finite(value):
        raise ReportError(f"{where}: {number_text(value)} is not a number or null")
    if not 0 <= value <= 100:
        raise ReportError(f"{where}: {number_text(value)} is outside 0-100 (a percentage)")
    return float(value)


def _sizes_from_json(raw: Any, where: str) -> dict[str, int] | None:
    """Return checked family sizes (an object of the three families to counts >= 1) or None."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != set(FAMILIES):
        raise ReportError(f"{where}: expected null or an object with keys {', '.join(FAMILIES)}")
    for family, n in raw.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n > 10**9:
            raise ReportError(f"{where}.{family}: {number_text(n)} is not a number of samples (an integer 1 to 10^9)")
    return dict(raw)


def _verdicts_from_json(raw: Any, where: str) -> dict[str, dict[str, dict[str, bool]]]:
    """Return checked chain verdicts: per setting and family, ids and a 0/1 string of the same length."""
    if not isinstance(raw, dict) or not set(raw) <= {"base", "context"}:
        raise ReportError(f"{where}: expected an object with keys among base, context")
    out: dict[str, dict[str, dict[str, bool]]] = {}
    for setting, fams in raw.items():
        if not isinstance(fams, dict) or set(fams) != set(FAMILIES):
            raise ReportError(f"{where}.{setting}: expected an object with keys {', '.join(FAMILIES)}")
        for family, item in fams.items():
            at = f"{where}.{setting}.{family}"
            ids, chains = (item.get("ids"), item.get("chains")) if isinstance(item, dict) else (None, None)
            if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
                raise ReportError(f"{at}.ids: expected a non-empty list of sample ids")
            if len(set(ids)) != len(ids):
                raise ReportError(f"{at}.ids: a sample id appears twice")
            for i, sample in enumerate(ids):
                checked_text(sample, f"{at}.ids[{i}]", "sample id")
            if not isinstance(chains, str) or len(chains) != len(ids) or set(chains) - {"0", "1"}:
                raise ReportError(f"{at}.chains: expected a string of 0 and 1, one per id ({len(ids)})")
            out.setdefault(setting, {})[family] = {s: c == "1" for s, c in zip(ids, chains, strict=True)}
    return out


def _bounds(raw: Any, where: str, kind: type = float) -> list | None:
    """Return a checked [low, high] (percentages, or ranks >= 1 when `kind` is int) or None."""
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != 2:
        raise ReportError(f"{where}: expected [low, high] or null, got {raw!r}")
    if kind is int:
        if not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 10**9 for v in raw):
            shown = ", ".join(map(number_text, raw))
            raise ReportError(f"{where}: expected two ranks (integers 1 to 10^9), got {shown}")
        bounds = list(raw)
    else:
        bounds = [_percent(v, f"{where}[{i}]") for i, v in enumerate(raw)]
        if None in bounds:
            raise ReportError(f"{where}: expected [low, high] or null, got {raw!r}")
    if bounds[0] > bounds[1]:
        raise ReportError(f"{where}: low {bounds[0]} is above high {bounds[1]}")
    return bounds


V2_FIELDS = (
    "family_sizes",
    "fingerprint",
    "verdicts",
    "interval_context",
    "interval_gain",
    "interval_method",
    "rank_range",
)
"""The fields version 2 added to an entry (a version 1 entry has none: no verdicts, intervals recomputed)."""
V3_FIELDS = ("letters", "failed_requests", "unranked_because")
"""The fields version 3 added (version 2's rank_group is read and dropped: the letters are recomputed)."""
INTERVAL_METHODS = {2: ("paired bootstrap", "binomial"), 3: (CHAINS, COUNTS)}


def _v2_fields(raw: dict[str, Any], where: str, version: int) -> dict[str, Any]:
    """Return the checked version 2 (and 3) fields of an entry."""
    for key in (*V2_FIELDS, *(V3_FIELDS if version >= 3 else ("rank_group",))):
        if key not in raw:
            raise ReportError(f"{where}.{key}: missing")
    if not isinstance(raw["fingerprint"], str):
        raise ReportError(f"{where}.fingerprint: expected a string ('' when not recorded)")
    if raw["fingerprint"]:
        checked_text(raw["fingerprint"], f"{where}.fingerprint", "fingerprint")
    methods = INTERVAL_METHODS[min(version, 3)]
    if raw["interval_method"] not in (None, *methods):
        raise ReportError(f"{where}.interval_method: {raw['interval_method']!r} is not {', '.join(methods)} or null")
    if raw["verdicts"] and raw.get("source") != "run":
        raise ReportError(f"{where}.verdicts: only a run has chain verdicts (source is {raw.get('source')!r})")
    verdicts = _verdicts_from_json(raw["verdicts"], f"{where}.verdicts")
    for setting, key in (("base", "score_base"), ("context", "score_context")):
        problem = verdicts_problem(verdicts[setting], score=raw.get(key)) if setting in verdicts else None
        if problem:
            raise ReportError(f"{where}.verdicts.{setting}: {problem} ({key})")
    fields = {
        "family_sizes": _sizes_from_json(raw["family_sizes"], f"{where}.family_sizes"),
        "fingerprint": raw["fingerprint"],
        "verdicts": verdicts,
        "interval_context": _bounds(raw["interval_context"], f"{where}.interval_context"),
        "interval_gain": _gain(raw["interval_gain"], f"{where}.interval_gain"),
        "interval_method": raw["interval_method"] if version >= 3 else None,
        "rank_range": _bounds(raw["rank_range"], f"{where}.rank_range", int),
    }
    return fields | (_v3_fields(raw, where) if version >= 3 else {})


def _v3_fields(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """Return the checked version 3 fields of an entry: letters, failed requests and why it is not ranked."""
    letters = raw["letters"]
    if letters is not None and (not isinstance(letters, str) or not letters or len(letters) > 200):
        raise ReportError(f"{where}.letters: expected null or a non-empty string of letters, got {letters!r}")
    if letters is not None and not all(c.isascii() and (c.isalpha() or c == " ") for c in letters):
        raise ReportError(f"{where}.letters: {letters!r} is not letters")
    failed = raw["failed_requests"]
    if not isinstance(failed, dict) or not set(failed) <= {"base", "context"}:
        raise ReportError(f"{where}.failed_requests: expected an object with keys among base, context")
    for setting, counts in failed.items():
        ok = (
            isinstance(counts, list)
            and len(counts) == 2
            and all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 10**9 for c in counts)
        )
        if not ok or counts[0] > counts[1]:
            raise ReportError(f"{where}.failed_requests.{setting}: expected [failed, requests] with failed <= requests")
    because = raw["unranked_because"]
    if because is not None:
        if not isinstance(because, str) or not because:
            raise ReportError(f"{where}.unranked_because: expected null or a non-empty string")
        checked_text(because, f"{where}.unranked_because", "text")
        if raw.get("rankable"):
            raise ReportError(f"{where}.unranked_because: set, but rankable is true")
    return {"letters": letters, "failed_requests": {k: list(v) for k, v in failed.items()}, "unranked_because": because}


def _gain(raw: Any, where: str) -> list[float] | None:
    """Return a checked context-gain interval: [low, high] within -100 and 100, or None."""
    if raw is None:
        return None
    if (
        not isinstance(raw, list)
        or len(raw) != 2
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and finite(v) for v in raw)
    ):
        raise ReportError(f"{where}: expected [low, high] or null, got {', '.join(map(number_text, raw))}")
    if not all(-100 <= v <= 100 for v in raw) or raw[0] > raw[1]:
        raise ReportError(f"{where}: {raw!r} is not an interval of points between -100 and 100, low first")
    return [float(v) for v in raw]


def _entry_from_json(raw: Any, where: str, version: int = SCHEMA_VERSION) -> Entry:
    """Return one checked entry of leaderboard.json (of schema `version`)."""
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
    bounds = _bounds(raw["interval_base"], f"{where}.interval_base")
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
        interval_base=bounds,
        notes=list(raw["notes"]),
        **(_v2_fields(raw, where, version) if version >= 2 else {}),
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
    version = data.get("version")
    if version not in READ_VERSIONS or isinstance(version, bool):
        raise ReportError(
            f"{path}: version: expected one of {', '.join(map(str, READ_VERSIONS))}, got {version!r} (written by "
            "another release)"
        )
    if not isinstance(data.get("entries"), list):
        raise ReportError(f"{path}: entries: expected a list")
    entries = [_entry_from_json(raw, f"{path}: entries[{i}]", version) for i, raw in enumerate(data["entries"])]
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
