"""Paper-layout tables (Tables 2, 3, 8, per-aspect, error attribution) as plain data, before rendering."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hvcu_tasks.core.families import FAMILIES, LEVEL_NAMES, LEVELS, OPTION_KEYS
from hvcu_tasks.core.metrics import ACCURACY_METRICS, OFFICIAL_FULL_METRIC, OFFICIAL_SUFFIX, ROTATIONS
from hvcu_tasks.report.reference import rows_for
from hvcu_tasks.results.runs import ModelResult, aspect_names, is_nan
from hvcu_tasks.results.scores import aspect_metric, error_share_metric, errors_at_metric, invalid_metric

Cell = str | float | int | None
FAMILY_LABEL = {"implication": "Impl.", "aesthetic": "Aesth.", "affective": "Affect."}
LEVEL_METRICS = ACCURACY_METRICS
"""The per-family columns of Tables 2, 3 and 8: the level accuracies and the full-chain accuracy."""
METRIC_LABEL = {m: "Acc_" + m.rsplit("_", 1)[-1] for m in LEVEL_METRICS}
"""Column label of each accuracy, as in the paper: Acc_perc, Acc_bridge, Acc_conn, Acc_full."""
NA_TEXT = "n/a"
MISSING = "–"
NA_NOTE = (
    f"{NA_TEXT}: not available, nothing to measure (no complete chain, e.g. in a --limit run; no failed chain "
    "for an error share); never counted as 0."
)
PAPER_MARK = "[paper]"
PARTIAL_MARK = "*"
SMOKE_MARK = "†"
DISAGREE_MARK = "‡"
DISAGREE_POINTS = 1.0
"""A model whose Score and Score (official) differ by more than this many points is flagged."""
CHANCE_LEVEL = 100.0 / len(OPTION_KEYS)
"""Per-level accuracy of a uniform random guesser: 25%."""
CHANCE_FULL = 100.0 / len(OPTION_KEYS) ** len(LEVELS)
"""Full-chain accuracy (and Score) of a uniform random guesser: 1/64 = 1.5625%."""
CIRCULAR_CHANCE_LEVEL = 100.0 / len(OPTION_KEYS) ** ROTATIONS
"""Circular per-level accuracy of a guesser picking uniformly and independently per request: (1/4)^4 = 1/256."""
CIRCULAR_CHANCE_FULL = 100.0 / len(OPTION_KEYS) ** (ROTATIONS * len(LEVELS))
"""Circular full-chain accuracy (and Score) of that guesser: (1/256)^3 = 1/16,777,216 (about 0.000006%)."""
CHANCE_WRONG = 100.0 - CHANCE_LEVEL
"""P(level k wrong | anything before) of a uniform random guesser: 75% (its levels are independent)."""
CHANCE_NAME = "Random guess (chance)"
CHANCE_NOTE = (
    f"{CHANCE_NAME}: answering every question at random among its four options: {CHANCE_LEVEL:g}% per level, "
    f"1/64 = {CHANCE_FULL:g}% for a whole chain and the Score."
)
SCORE = "Score"
OFFICIAL_SCORE = "Score (official)"
SCORE_NOTE = (
    f"{SCORE}: the Overall Score with this toolkit's answer parser (it also reads replies such as "
    f"'The answer is (B).'); {OFFICIAL_SCORE}: the same replies under the authors' parser "
    f"({OFFICIAL_FULL_METRIC}), the one comparable with the paper's numbers."
)
PAPER_NOTE = (
    f"computed with the authors' parser, so they are comparable with {OFFICIAL_SCORE}; their "
    f"{SCORE} under this toolkit's parser is not known (–), and their per-family accuracies are the authors' too."
)


@dataclass
class Table:
    """A titled grid of cells with footnotes; `name` is its file stem."""

    name: str
    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    groups: list[int] | None = None
    """Group number of each row when rows belong together (Table 3: a model's base and context rows); sorts move
    whole groups."""


def cell_text(value: Cell) -> str:
    """Format one cell: numbers with 2 decimals (like the paper), missing values as a dash, NaN as n/a."""
    if value is None or is_nan(value):
        return MISSING if value is None else NA_TEXT
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def disagreement(model: ModelResult, setting: str) -> tuple[float, float] | None:
    """Return (Score, Score (official)) when both are known and differ by more than DISAGREE_POINTS, else None."""
    ours, official = model.score(setting), model.official_score(setting)
    if ours is None or official is None or is_nan(ours) or is_nan(official):
        return None
    return (ours, official) if round(abs(ours - official), 9) > DISAGREE_POINTS else None


def _label(model: ModelResult, setting: str, scores: bool = False) -> str:
    """Return a model's row label: * partial, † smoke sample, and in Score tables (`scores`) ‡ disagreeing Scores."""
    smoke = SMOKE_MARK if model.dataset == {"smoke sample"} else ""
    disagree = DISAGREE_MARK if scores and disagreement(model, setting) else ""
    return model.model + smoke + (PARTIAL_MARK if model.partial(setting) else "") + disagree


def _score_notes(models: list[ModelResult], settings: tuple[str, ...]) -> list[str]:
    """Return the footnotes on the two Scores: what each is, which rows lack the official one, which disagree."""
    notes = [SCORE_NOTE]
    for m in models:
        for s in (s for s in settings if s in m.settings):
            if m.score(s) is not None and m.official_score(s) is None:
                notes.append(
                    f"{OFFICIAL_SCORE} of {m.model} ({s}) is –: its results have no {OFFICIAL_FULL_METRIC} "
                    "(written before this toolkit reported it); rerun the evaluation to get it."
                )
    for m, s in ((m, s) for m in models for s in settings if disagreement(m, s)):
        ours, official = disagreement(m, s)  # type: ignore[misc]
        why = (
            "its answers are in a format the authors' parser misses"
            if official < ours
            else "the authors' parser takes a letter from replies this toolkit's parser refuses as ambiguous"
        )
        notes.append(
            f"{DISAGREE_MARK} {m.model} ({s}): {SCORE} {ours:.2f} with this toolkit's parser, {official:.2f} "
            f"with the authors' parser: {why}; only {OFFICIAL_SCORE} is comparable with the [paper] rows."
        )
    return notes


def _partial_notes(models: list[ModelResult], settings: tuple[str, ...]) -> list[str]:
    """Return the footnotes: one per partial model and setting, and the smoke-sample warning."""
    notes = [
        f"{PARTIAL_MARK} {m.model} ({s}): " + "; ".join(m.notes[s]) for m in models for s in settings if m.notes.get(s)
    ]
    if any(m.dataset == {"smoke sample"} and set(settings) & set(m.settings) for m in models):
        notes.append(f"{SMOKE_MARK} ran on the bundled smoke sample, not HVCU-Bench: not comparable to the paper.")
    return notes


def diagnostic_notes(models: list[ModelResult], setting: str, what: str) -> list[str]:
    """Return one line per model whose diagnostics (`what`) are unknown in a setting, saying how to get them."""
    return [
        f"{m.model} ({setting}): {what} of {', '.join(f for f in FAMILIES if f in m.no_diagnostics[setting])} not "
        "available: its results file does not hold them (lmms-eval reports only the accuracies and counts) and no "
        "sample log lies beside it; rerun the evaluation with --log_samples to get them."
        for m in models
        if m.no_diagnostics.get(setting) and setting in m.settings
    ]


def setting_table(models: list[ModelResult], setting: str, reference: bool = True) -> Table:
    """Table 2 (base) / Table 8 (context) layout: per family Acc_perc/bridge/conn/full, then both Scores.

    The paper's rows were computed with the authors' parser: their Score goes in the official column, and
    the column of this toolkit's parser stays empty (–) for them rather than suggest a number nobody measured.
    """
    number = {"base": 2, "context": 8}[setting]
    columns = ["Model"] + [f"{FAMILY_LABEL[f]} {METRIC_LABEL[m]}" for f in FAMILIES for m in LEVEL_METRICS]
    columns += [SCORE, OFFICIAL_SCORE]
    title = f"HVCU-Bench, {setting} setting (layout of the paper's Table {number})"
    table = Table(f"table{number}_{setting}", title, columns)
    if reference:
        for ref in rows_for(setting):
            cells = [ref.families[f][m] for f in FAMILIES for m in LEVEL_METRICS]
            table.rows.append([f"{ref.model} {PAPER_MARK}", *cells, None, ref.score])
        chance = [CHANCE_FULL if m == "acc_full" else CHANCE_LEVEL for _f in FAMILIES for m in LEVEL_METRICS]
        table.rows.append([CHANCE_NAME, *chance, CHANCE_FULL, CHANCE_FULL])
    for model, fams in ((m, m.settings[setting]) for m in models if m.settings.get(setting)):
        cells = [fams[f].get(m) if f in fams else None for f in FAMILIES for m in LEVEL_METRICS]
        table.rows.append([_label(model, setting, True), *cells, model.score(setting), model.official_score(setting)])
    paper = f"{PAPER_MARK} rows: {rows_for(setting)[0].source}, reported by the paper's authors and {PAPER_NOTE}"
    table.notes += [paper, CHANCE_NOTE] if reference else []
    table.notes += _score_notes(models, (setting,)) + _partial_notes(models, (setting,))
    return table


def base_vs_context_table(models: list[ModelResult], reference: bool = True) -> Table:
    """Table 3 layout: per model and family, base and context accuracies, and both Scores with their gains."""
    columns = ["Model", "Setting", "Task", *METRIC_LABEL.values(), SCORE, f"Δ {SCORE}", OFFICIAL_SCORE]
    columns.append(f"Δ {OFFICIAL_SCORE}")
    table = Table("table3_base_vs_context", "Base vs context setting (layout of the paper's Table 3)", columns)
    table.groups = []

    def add(name: str, setting: str, fams: dict[str, dict[str, float | None]], scores: list[Cell]) -> None:
        """Add one model's three family rows; the first carries the Scores and gains (score, Δ, official, Δ)."""
        group = len(table.rows) // (2 * len(FAMILIES))  # a model's base and context rows form one group
        for i, f in enumerate(FAMILIES):
            table.groups.append(group)  # type: ignore[union-attr]
            cells = [fams.get(f, {}).get(m) for m in LEVEL_METRICS]
            first = [name, setting] if i == 0 else ["", ""]
            table.rows.append([*first, FAMILY_LABEL[f], *cells, *(scores if i == 0 else [None] * len(scores))])

    if reference:
        context = {r.model: r for r in rows_for("context")}
        for base in rows_for("base"):
            if base.model in context:
                ctx = context[base.model]
                name = f"{base.model} {PAPER_MARK}"
                add(name, "base", base.families, [None, None, base.score, None])
                add(name, "context", ctx.families, [None, None, ctx.score, round(ctx.score - base.score, 2)])
        chance = {f: {m: CHANCE_FULL if m == "acc_full" else CHANCE_LEVEL for m in LEVEL_METRICS} for f in FAMILIES}
        add(CHANCE_NAME, "base", chance, [CHANCE_FULL, None, CHANCE_FULL, None])
        add(CHANCE_NAME, "context", chance, [CHANCE_FULL, 0.0, CHANCE_FULL, 0.0])
        table.notes.append(
            f"{PAPER_MARK} rows: the paper's Tables 2 (base) and 8 (context), reported by the paper's authors and "
            + PAPER_NOTE
        )
        table.notes.append(CHANCE_NOTE)

    def gain(values: dict[str, float | None]) -> float | None:
        """Return context minus base, None when either is missing (NaN stays n/a)."""
        return None if None in values.values() else round(values["context"] - values["base"], 2)  # type: ignore[operator]

    for model in models:
        if not {"base", "context"} <= set(model.settings):
            continue
        scores = {s: model.score(s) for s in ("base", "context")}
        official = {s: model.official_score(s) for s in ("base", "context")}
        for setting in ("base", "context"):
            fams = {f: r.metrics for f, r in model.settings[setting].items()}
            gains = [gain(scores), gain(official)] if setting == "context" else [None, None]
            name = _label(model, setting, scores=True)
            add(name, setting, fams, [scores[setting], gains[0], official[setting], gains[1]])
    both = [m for m in models if {"base", "context"} <= set(m.settings)]
    table.notes += _score_notes(both, ("base", "context")) + _partial_notes(models, ("base", "context"))
    return table


def aspect_table(models: list[ModelResult], setting: str) -> Table:
    """Per-aspect full-chain accuracy (15 aspects) of each model in one setting."""
    pairs = aspect_names()
    columns = ["Model", *[a for _f, a in pairs], SCORE]
    table = Table(f"aspects_{setting}", f"Acc_full per aspect, {setting} setting", columns)
    for model, fams in ((m, m.settings[setting]) for m in models if m.settings.get(setting)):
        aspects = [fams[f].get(aspect_metric(a)) if f in fams else None for f, a in pairs]
        table.rows.append([_label(model, setting), *aspects, model.score(setting)])
    table.notes += diagnostic_notes(models, setting, "per-aspect accuracies") + _partial_notes(models, (setting,))
    return table


def error_table(models: list[ModelResult], setting: str) -> Table:
    """Error attribution: failed samples by first wrong level (count and share), plus invalid replies."""
    levels = list(LEVEL_NAMES.values())
    columns = ["Model", "Task", "Failed", *[f"first wrong: {n}" for n in levels], *[f"invalid {n} %" for n in levels]]
    table = Table(f"errors_{setting}", f"Error attribution, {setting} setting (count, share of failed %)", columns)
    for model in models:
        fams = model.settings.get(setting, {})
        for f, result in ((f, fams[f]) for f in FAMILIES if f in fams):
            counts = [result.get(errors_at_metric(n)) for n in levels]
            shares = [result.get(error_share_metric(n)) for n in levels]
            known = [c for c in counts if c is not None and not is_nan(c)]
            failed: Cell = sum(int(c) for c in known) if len(known) == len(counts) else None
            cells = [_error_cell(c, s) for c, s in zip(counts, shares, strict=True)]
            invalid = [result.get(invalid_metric(n)) for n in levels]
            table.rows.append([_label(model, setting), FAMILY_LABEL[f], failed, *cells, *invalid])
    table.notes += diagnostic_notes(models, setting, "error attribution and invalid replies")
    table.notes += _partial_notes(models, (setting,))
    return table


def _error_cell(count: float | None, share: float | None) -> Cell:
    """Format 'count (share%)' for the error table; n/a parts stay n/a, a missing count stays missing."""
    if count is None or is_nan(count):
        return None if count is None else NA_TEXT
    return f"{int(count)} ({NA_TEXT if share is None or is_nan(share) else f'{share:.2f}%'})"


def all_tables(models: list[ModelResult], reference: bool = True) -> list[Table]:
    """Return every table the runs support, in reading order."""
    settings = [s for s in ("base", "context") if any(s in m.settings for m in models)]
    tables = [setting_table(models, s, reference) for s in settings]
    both = [base_vs_context_table(models, reference)] if settings == ["base", "context"] else []
    tables += [t for t in both if t.rows]
    for s in settings:
        tables += [aspect_table(models, s), error_table(models, s)]
        if any(m.chains.get(s) for m in models):
            tables.append(interval_table(models, s))
    for table in tables:
        na = (is_nan(c) or c == NA_TEXT or (isinstance(c, str) and f"({NA_TEXT})" in c) for r in table.rows for c in r)
        table.notes += [NA_NOTE] if any(na) else []
    return tables


def interval_text(low_high: Sequence[float] | None) -> str | None:
    """Format a 95% interval like the paper's numbers, None when absent."""
    return None if low_high is None else f"[{low_high[0]:.2f}, {low_high[1]:.2f}]"


def interval_table(models: list[ModelResult], setting: str) -> Table:
    """95% intervals of Acc_full per family and of the Score (needs --log_samples runs), this toolkit's parser."""
    from hvcu_tasks.report.stats import exact_interval, score_interval

    columns = ["Model", *[f"{FAMILY_LABEL[f]} Acc_full" for f in FAMILIES], "Score"]
    table = Table(f"intervals_{setting}", f"95% intervals, {setting} setting", columns)
    for model, chains in ((m, m.chains[setting]) for m in models if m.chains.get(setting)):
        right = {f: sum(c.values()) for f, c in chains.items() if c}
        sizes = {f: len(c) for f, c in chains.items() if c}
        cells: list[Cell] = [
            interval_text(exact_interval(right[f], sizes[f])) if f in right else None for f in FAMILIES
        ]
        score = interval_text(score_interval(right, sizes)) if set(right) == set(FAMILIES) else None
        table.rows.append([_label(model, setting), *cells, score])
    table.notes.append(
        "This toolkit's parser. Acc_full: the exact (Clopper–Pearson) 95% interval of each family's share of chains "
        "right; Score: those combined by MOVER (the leaderboard's method for Score (official)). Only runs made "
        "with --log_samples have intervals."
    )
    table.notes += _partial_notes(models, (setting,))
    return table


def compare_table(a: ModelResult, b: ModelResult, setting: str) -> Table:
    """Model B against model A (e.g. tuned vs base) under the authors' parser: per family and level, both values and
    Δ = B − A, with McNemar per family and the paired interval of the Score's difference."""
    from hvcu_tasks.report.stats import mcnemar, p_phrase, paired_difference

    official = [m + OFFICIAL_SUFFIX for m in LEVEL_METRICS]
    columns = ["Task", *[f"{METRIC_LABEL[m]} {x}" for m in LEVEL_METRICS for x in ("A", "B", "Δ")], "McNemar p"]
    title = f"{b.model} (B) vs {a.model} (A), {setting} setting, authors' parser (official)"
    table = Table(f"compare_{setting}", title, columns)
    fa, fb = a.settings.get(setting, {}), b.settings.get(setting, {})
    ca, cb = a.chains_official.get(setting, {}), b.chains_official.get(setting, {})
    for f in (f for f in FAMILIES if f in fa and f in fb):
        cells: list[Cell] = []
        for m in official:
            va, vb = fa[f].get(m), fb[f].get(m)
            cells += [va, vb, None if va is None or vb is None else round(vb - va, 2)]
        p = mcnemar(ca[f], cb[f]).p_value if f in ca and f in cb else None
        table.rows.append([FAMILY_LABEL[f], *cells, p])
    sa, sb = a.official_score(setting), b.official_score(setting)
    delta = None if sa is None or sb is None else round(sb - sa, 2)
    table.notes.append(
        f"Score (official): A {cell_text(sa)}, B {cell_text(sb)}, Δ = B − A {cell_text(delta)} (the "
        "sign convention of every comparison in this report; the leaderboard's parser)."
    )
    if set(ca) == set(cb) == set(FAMILIES) and all(set(ca[f]) & set(cb[f]) for f in FAMILIES):
        d = paired_difference(ca, cb)
        table.notes.append(
            f"Paired comparison of the Score (Bonett–Price per family, on the samples both answered): Δ = B − A "
            f"{d.delta:.2f}, 95% interval [{d.interval[0]:.2f}, {d.interval[1]:.2f}], {p_phrase(d.p_value)}."
        )
    else:
        table.notes.append("No paired test: both runs need --log_samples for all three families.")
    table.notes.append("McNemar: exact two-sided test on full-chain verdicts of the samples both models answered.")
    table.notes += _partial_notes([a, b], (setting,))
    return table
