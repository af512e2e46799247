"""The leaderboard's tables: the ranked board, the short summary, the comparisons of runs and against the paper."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.report import stats
from hvcu_tasks.report.board import BENCHMARK_SIZES, FAILED_LIMIT, Board, Entry, entry_key, ranked
from hvcu_tasks.report.reference import general_reference, rows_for
from hvcu_tasks.report.tables import (
    DISAGREE_MARK,
    FAMILY_LABEL,
    PAPER_MARK,
    PARTIAL_MARK,
    SMOKE_MARK,
    Table,
    interval_text,
)
from hvcu_tasks.report.uncertainty import BOARD_FAMILY, Pair
from hvcu_tasks.results.general import HEADLINES, MMSTAR_CATEGORIES, TABLE_ORDER
from hvcu_tasks.results.runs import SMOKE

RANK_COLUMN = "Score (official)"
LEADERBOARD_COLUMNS = ["Rank", "Model", RANK_COLUMN, "95% CI", "Rank range", "Group", "Failed", "Context (official)"]
LEADERBOARD_COLUMNS += ["Δ", "Δ 95% CI", "Score", *[f"{FAMILY_LABEL[f]} full" for f in FAMILIES], "Source"]
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


def _source_text(entry: Entry) -> str:
    """Return the Source cell: [paper], human, chance, run, or run (smoke sample / custom data / partial, ...)."""
    if entry.source == "paper":
        return PAPER_MARK
    if entry.source != "run":
        return entry.source
    what = [entry.data] if entry.data != "HVCU-Bench" else []
    what += ["partial"] if entry.partial() else []
    return f"run ({', '.join(what)})" if what else "run"


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
                interval_text(e.interval_base),
                _range_text(e.rank_range),
                e.letters,
                failed_text(e),
                e.score_context,
                e.delta(),
                interval_text(e.interval_gain),
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
                interval_text(pair.interval),
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


SUMMARY_COLUMNS = ["Rank", "Rank range", "Model", RANK_COLUMN, "95% CI", "Failed", "Context (official)", "Score"]
SUMMARY_COLUMNS.append("Source")
SUMMARY_PAPER_ROWS = 3


def summary_table(whole: Board, custom: list[Board] | None = None, paper_rows: int = SUMMARY_PAPER_ROWS) -> Table:
    """Return the short leaderboard: every run (those on `custom` data boards unranked, after the rest), then the best
    `paper_rows` [paper] rows, human and chance; notes on every mark shown and on which runs differ significantly."""
    board = ranked(whole.entries)  # ranks of the whole board, not of the rows shown
    papers = [e for _rank, e in board if e.source == "paper"]
    refs = [(r, e) for r, e in board if e.source != "run" and (e.source != "paper" or e in papers[:paper_rows])]
    others = [replace(e, rank_range=None) for b in custom or [] for e in b.entries]  # unranked beside the benchmark
    title = f"HVCU-Bench leaderboard: your runs and the best {len(papers[:paper_rows])} [paper] rows"
    table = Table("leaderboard_summary", title, list(SUMMARY_COLUMNS))
    for rank, e in [(r, e) for r, e in board if e.source == "run"] + [(None, e) for e in others] + refs:
        cells = [_range_text(e.rank_range), e.label, e.score_base, interval_text(e.interval_base), failed_text(e)]
        table.rows.append(["–" if rank is None else rank, *cells, e.score_context, e.score_base_hvcu, _source_text(e)])
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
    labels = "".join(str(row[2]) for row in table.rows)
    table.notes += [note for mark, note in SUMMARY_MARKS.items() if mark in labels]
    table.notes += [f"{d}: not the published HVCU-Bench, never ranked with it." for d in {e.data: 0 for e in others}]
    table.notes += _differences([whole, *(custom or [])])
    return table


SUMMARY_MARKS = {
    SMOKE_MARK: f"{SMOKE_MARK} smoke sample: not the benchmark, never ranked; its numbers prove the path, not a score.",
    PARTIAL_MARK: f"{PARTIAL_MARK} partial: a family missing or --limit; no rank for a partial base setting.",
    DISAGREE_MARK: f"{DISAGREE_MARK}: the two parsers' base Scores (Score and {RANK_COLUMN}) differ by more than 1 "
    "point; only Score (official) is comparable with the [paper] rows.",
}


def _differences(boards: list[Board]) -> list[str]:
    """Return one line per two runs compared on the boards (B − A, 95% CI, Holm-adjusted p, significant or not)."""
    lines = [
        f"{b} − {a}: Δ {delta:.2f} {ci}, p (Holm) {p}: {'significant' if yes == 'yes' else 'not significant'}."
        for board in boards
        for a, b, _sa, _sb, delta, ci, _p, p, yes in _comparison_rows(board, run_pairs(board))
    ]
    if sum(e.source == "run" for board in boards for e in board.entries) < 2:
        return lines
    head = "Your runs compared (base Score (official), paired when logged on the same samples, Holm-adjusted)"
    return [f"{head}: none (runs on different data are not compared)." if not lines else f"{head}:", *lines]


PER_MODEL_NOTES = [
    f"One row per model: its HVCU-Bench {RANK_COLUMN} in the base and context settings (the leaderboard's, with its "
    "95% intervals) beside the general benchmarks in percent, each the metric lmms-eval's own task reports: MMBench "
    "gpt_eval_score per split (CircularEval; a reply without a letter is matched by lmms-eval's GPT judge) and MMBench "
    "Avg. their mean; HallusionBench qAcc, fAcc, aAcc (every reply judged by GPT); MMStar per category and "
    "'average'; MMMU mmmu_acc.",
    "MMStar Avg. is lmms-eval's 'average': the mean accuracy over the l2 categories (three per category, 18 on the "
    "whole MMStar); the paper's Table 7 Avg. is the mean of the six category columns. The two agree on the whole "
    "MMStar and differ on any subset (--limit, or a category missing an l2 category); runs where they differ are "
    "listed below.",
    "95% CI of a general benchmark: each stratum's exact (Clopper–Pearson) interval combined by MOVER, as for the "
    "Score: MMBench Avg. over its four splits (questions), HallusionBench aAcc and MMMU Acc over their questions, "
    "MMStar Avg. over its l2 categories; counted from the run's sample logs (for MMMU and HallusionBench also from "
    "the results file's document count); – without those counts, and for [paper] rows (the paper gives none).",
]


def per_model_table(rows: list[Entry]) -> Table:
    """Return the per-model view: HVCU-Bench's Scores (official) beside every general benchmark, one row per model."""
    columns = ["Model", RANK_COLUMN, "95% CI", "Context (official)", "Context 95% CI"]
    columns += [c for label in TABLE_ORDER for c in [label] + [f"{label} 95% CI"] * (label in HEADLINES)]
    table = Table("per_model", "Per model: HVCU-Bench beside the general benchmarks", [*columns, "Source"])
    for e in rows:
        cells = [e.label + PARTIAL_MARK * (e.general_partial and not e.partial()), e.score_base]
        cells += [interval_text(e.interval_base), e.score_context, interval_text(e.interval_context)]
        for label in TABLE_ORDER:
            cells += [e.general.get(label)] + [interval_text(e.general_ci.get(label))] * (label in HEADLINES)
        table.rows.append([*cells, _source_text(e)])
    table.notes += PER_MODEL_NOTES
    if any(e.source == "paper" for e in rows):
        table.notes.append(f"{PAPER_MARK} rows: {general_reference()[0]}; their Scores: {rows_for('base')[0].source}.")
    for e in (e for e in rows if e.source == "run" and e.general.get("MMStar Avg.") is not None):
        six = [e.general.get(c) for c in MMSTAR_CATEGORIES]
        if None not in six and abs(sum(six) / 6 - e.general["MMStar Avg."]) > 0.005:  # type: ignore[arg-type, operator]
            table.notes.append(
                f"{e.label}: MMStar Avg. {e.general['MMStar Avg.']:.2f} (lmms-eval's mean over its l2 categories); "
                f"the mean of its six category columns, as the paper computes Table 7's, is {sum(six) / 6:.2f}."  # type: ignore
            )
    subset = [e for e in rows if e.general_partial and not e.partial()]
    table.notes += [
        f"{e.label}{PARTIAL_MARK}: {'; '.join(n for n in e.notes if n.startswith('general:'))}" for e in subset
    ]
    table.notes += [f"{e.label}: {'; '.join(e.notes)}" for e in rows if e.partial() and e.notes]
    if any(e.data == SMOKE for e in rows):
        table.notes.append(f"{SMOKE_MARK} smoke sample: its HVCU-Bench numbers prove the path, not a score.")
    return table
