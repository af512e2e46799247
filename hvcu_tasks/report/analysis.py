"""Report tables of the analyses beyond the paper: visual dependency, circular evaluation, position bias, propagation.

From the blind, circular and gold-context tasks (hvcu_tasks/lmms/analysis_tasks.py) and, for the same models, the
base and context tasks, as `results.runs.read_folders` read them. A model's runs are kept apart by the data they read
(the published benchmark, the smoke sample, custom data: `results.runs.data_kind`), so a row never mixes them; the
multi-modal gain compares two settings only when both are complete and read the same data (the same
fingerprint per family where recorded). Every table has a chance row: what a uniform random guesser scores
(hvcu_tasks.report.tables: CHANCE_*).
"""

from __future__ import annotations

from typing import Any

from hvcu_tasks.core.families import FAMILIES, LEVEL_NAMES, LEVELS, OPTION_KEYS
from hvcu_tasks.core.metrics import acc_metric, is_na
from hvcu_tasks.report.tables import (
    CHANCE_FULL,
    CHANCE_LEVEL,
    CHANCE_WRONG,
    CIRCULAR_CHANCE_FULL,
    CIRCULAR_CHANCE_LEVEL,
    FAMILY_LABEL,
    LEVEL_METRICS,
    METRIC_LABEL,
    Table,
)
from hvcu_tasks.results.runs import BENCHMARK, CUSTOM, SMOKE, AnalysisRun
from hvcu_tasks.results.scores import (
    PLAIN_PREFIX,
    POSITION_BIAS_METRIC,
    gold_share_metric,
    pred_share_metric,
    wrong_after_metric,
)

ANALYSIS_SETTINGS = ("blind", "circular", "context_gold")
"""Settings whose presence makes a report have analysis tables."""
SETTING_LABEL = {
    "base": "base",
    "context": "context",
    "context_gold": "gold context",
    "blind": "blind",
    "circular": "circular",
}
CHANCE_ROW = "chance (uniform guess)"
SMOKE_MARK = "†"
PARTIAL_MARK = "*"
MISSING = "–"
"""How a missing value (None) is shown: the results file has no such metric."""
CUSTOM_LABEL = " (custom data)"
NA_NOTE = "n/a: nothing to measure (e.g. no chain with the earlier level wrong); never counted as 0."
DATA_TEXT = {BENCHMARK: "HVCU-Bench", SMOKE: "the smoke sample", CUSTOM: "custom data"}


def _label(run: AnalysisRun, setting: str) -> str:
    """Return the row label: † smoke sample, * partial (a family missing or a --limit run), (custom data)."""
    smoke = SMOKE_MARK if run.data == SMOKE else ""
    custom = CUSTOM_LABEL if run.data == CUSTOM else ""
    return run.model + smoke + (PARTIAL_MARK if run.is_partial(setting) else "") + custom


def _gain_gap(run: AnalysisRun, others: list[AnalysisRun]) -> str | None:
    """Return why the run has no multi-modal gain (None when it has one); `others`: every run of the report."""
    if "base" not in run.settings:
        elsewhere = sorted(DATA_TEXT[o.data] for o in others if o.model == run.model and "base" in o.settings)
        if not elsewhere:
            return None  # no base run at all: the table's general note says so
        return f"blind ran on {DATA_TEXT[run.data]}, base on {' and '.join(elsewhere)}"
    for setting in ("base", "blind"):
        if run.is_partial(setting):
            return f"{setting} is partial (a family missing, --limit or incomplete chains)"
    differ = [
        f
        for f in FAMILIES
        if None not in (run.fingerprints["base"][f], run.fingerprints["blind"][f])
        and run.fingerprints["base"][f] != run.fingerprints["blind"][f]
    ]
    if differ:
        return f"base and blind read different {', '.join(differ)} data (fingerprints differ)"
    return None


def _gain(run: AnalysisRun, others: list[AnalysisRun]) -> float | None:
    """Return the multi-modal gain: Score with the image minus Score blind, None unless comparable (`_gain_gap`)."""
    with_image, blind = run.score("base"), run.score("blind")
    if with_image is None or blind is None or _gain_gap(run, others) is not None:
        return None
    if is_na(with_image) or is_na(blind):
        return float("nan")
    return round(with_image - blind, 2)


def chance_text(value: float) -> str:
    """Return a chance percentage as text that stays readable where 2 decimals would round it away."""
    return f"{value:.2f}" if round(value, 2) >= 0.01 else f"{value:.1e}"


def _data_notes(runs: list[AnalysisRun]) -> list[str]:
    """Return the notes for the marks of the data the rows read (smoke sample, custom data)."""
    notes = []
    if any(r.data == SMOKE for r in runs):
        notes.append(f"{SMOKE_MARK} ran on the bundled smoke sample, not HVCU-Bench: not comparable to the paper.")
    if any(r.data == CUSTOM for r in runs):
        notes.append(f"{CUSTOM_LABEL.strip()}: ran on data that is not the published HVCU-Bench.")
    return notes


def _family_cells(run: AnalysisRun, setting: str) -> list[float | int | None]:
    """Return per family Acc_perc, Acc_bridge, Acc_conn, Acc_full of a setting (None where absent)."""
    fams = run.settings.get(setting, {})
    return [fams[f].get(m) if f in fams else None for f in FAMILIES for m in LEVEL_METRICS]


def _family_columns(suffix: str) -> list[str]:
    """Return the per-family level columns, labelled like the paper's Table 2 with a suffix."""
    return [f"{FAMILY_LABEL[f]} {METRIC_LABEL[m]}{suffix}" for f in FAMILIES for m in LEVEL_METRICS]


def _mean(values: list[Any]) -> float | None:
    """Return the mean of the values (NaN when one is NaN), None when one is missing."""
    if not values or any(v is None for v in values):
        return None
    if any(is_na(v) for v in values):
        return float("nan")
    return sum(values) / len(values)


def _diagnostic_notes(runs: list[AnalysisRun], settings: tuple[str, ...], what: str) -> list[str]:
    """Return one line per run and setting whose diagnostics (`what`) are unknown, saying how to get them."""
    return [
        f"{_label(run, s)} ({SETTING_LABEL[s]}): {what} of "
        f"{', '.join(f for f in FAMILIES if f in run.no_diagnostics[s])} not available: its results file does not "
        "hold them and no sample log lies beside it; rerun the evaluation with --log_samples to get them."
        for run in runs
        for s in settings
        if run.no_diagnostics.get(s) and s in run.settings
    ]


def _closing_notes(runs: list[AnalysisRun], settings: tuple[str, ...], what: str, missing: bool = True) -> list[str]:
    """Return a table's last notes: what a dash means, the unknown diagnostics (`what`), the data marks and n/a."""
    shown = [r for r in runs if any(s in r.settings for s in settings)]
    head = [f"{MISSING}: not in the results file and no sample log beside it (rerun with --log_samples to get them)."]
    return [*head * missing, *_diagnostic_notes(shown, settings, what), *_data_notes(shown), NA_NOTE]


def blind_table(runs: list[AnalysisRun]) -> Table:
    """Visual dependency: blind accuracies, Score blind, Score with the image and the multi-modal gain."""
    columns = ["Model", *_family_columns(" (blind)"), "Score (blind)", "Score (image)", "Multi-modal gain"]
    table = Table("analysis_blind", "Visual dependency: every level asked without the image", columns)
    chance = [CHANCE_LEVEL] * 3 + [CHANCE_FULL]
    table.rows.append([CHANCE_ROW, *chance * len(FAMILIES), CHANCE_FULL, CHANCE_FULL, None])
    blind_runs = [r for r in runs if "blind" in r.settings]
    gaps = []
    for run in blind_runs:
        gap = _gain_gap(run, runs)
        if gap is not None:
            gaps.append(f"{_label(run, 'blind')}: no multi-modal gain: {gap}")
        row = [_label(run, "blind"), *_family_cells(run, "blind")]
        table.rows.append([*row, run.score("blind"), run.score("base"), _gain(run, runs)])
    table.notes += [
        "Blind: the base setting's system prompt and text with no image. Acc_perc/bridge/conn (blind) is the share "
        "of a level's questions answered right from the text alone; well above chance (25%) flags questions that "
        "need no image (L1 perception questions should not be among them).",
        "Score (image): the same model's base run on the same data. Multi-modal gain = Score (image) - Score "
        f"(blind), when both runs are complete and read the same data ({MISSING} otherwise).",
        *gaps,
        f"Chance: 25% per level, 1/64 = {CHANCE_FULL:.4f}% full chain and Score.",
        *_data_notes(blind_runs),
        NA_NOTE,
    ]
    return table


def circular_table(runs: list[AnalysisRun]) -> Table:
    """Circular evaluation: per family circular accuracies, the circular Score and the position bias."""
    columns = ["Model", *_family_columns(" (circular)"), "Score (circular)", "Position bias"]
    table = Table("analysis_circular", "Circular evaluation: a level counts only if right in all 4 rotations", columns)
    chance = [chance_text(CIRCULAR_CHANCE_LEVEL)] * 3 + [chance_text(CIRCULAR_CHANCE_FULL)]
    table.rows.append([CHANCE_ROW, *chance * len(FAMILIES), chance_text(CIRCULAR_CHANCE_FULL), None])
    for run in (r for r in runs if "circular" in r.settings):
        fams = run.settings["circular"]
        bias = _mean([fams[f].get(POSITION_BIAS_METRIC) if f in fams else None for f in FAMILIES])
        table.rows.append([_label(run, "circular"), *_family_cells(run, "circular"), run.score("circular"), bias])
    table.notes += [
        "Each level is asked once per rotation of its option texts (keys A-D kept): 4x the base setting's requests.",
        "Chance, for a guesser picking uniformly and independently per request: (1/4)^4 = 1/256 = "
        f"{CIRCULAR_CHANCE_LEVEL:.4f}% per level, (1/256)^3 = 1/16,777,216 (about {CIRCULAR_CHANCE_FULL:.6f}%) "
        "full chain and Score; a model that always answers the same letter scores 0.",
        "Position bias: mean over the families of half the summed differences between the shares of predicted and "
        "gold letters, over the replies with a parsed letter (0 = replies spread like the golds; see "
        "analysis_position).",
        *_closing_notes(runs, ("circular",), "the position bias", missing=False),
    ]
    return table


def circular_questions_table(runs: list[AnalysisRun]) -> Table:
    """Circular evaluation question by question: every rotated question on its own, and the replies naming no key."""
    names = list(LEVEL_NAMES.values())
    columns = ["Model", "Family", *[f"Plain Acc_{n}" for n in names], *[f"invalid {n} %" for n in names]]
    table = Table("analysis_circular_questions", "Circular evaluation, every rotated question on its own (%)", columns)
    table.rows.append([CHANCE_ROW, None, *[CHANCE_LEVEL] * len(names), *[None] * len(names)])
    for run in (r for r in runs if "circular" in r.settings):
        for family in (f for f in FAMILIES if f in run.settings["circular"]):
            m = run.settings["circular"][family]
            cells = [m.get(PLAIN_PREFIX + acc_metric(n)) for n in names] + [m.get(f"invalid_{n}") for n in names]
            table.rows.append([_label(run, "circular"), FAMILY_LABEL[family], *cells])
    table.notes += [
        "Plain Acc: rotated questions right / rotated questions asked, each counted on its own (no circular rule); "
        "invalid: the share of those replies that name no option.",
        *_closing_notes(runs, ("circular",), "plain accuracies and invalid replies"),
    ]
    return table


def _family_rows(runs: list[AnalysisRun], settings: tuple[str, ...], names: list[str]) -> list[list[Any]]:
    """Return one row per run, setting (of `settings`) and family: its label, the setting, the family, the metrics."""
    return [
        [_label(run, s), SETTING_LABEL[s], FAMILY_LABEL[f], *[run.settings[s][f].get(n) for n in names]]
        for run in runs
        for s in settings
        if s in run.settings
        for f in FAMILIES
        if f in run.settings[s]
    ]


def position_table(runs: list[AnalysisRun]) -> Table:
    """Answer-position bias of every run: predicted vs gold letter shares per setting and family."""
    columns = ["Model", "Setting", "Family"]
    columns += [f"Pred {k}" for k in OPTION_KEYS] + [f"Gold {k}" for k in OPTION_KEYS] + ["Bias"]
    table = Table("analysis_position", "Answer-position bias: shares of predicted vs gold letters (%)", columns)
    table.rows.append([CHANCE_ROW, None, None, *[CHANCE_LEVEL] * len(OPTION_KEYS), *[None] * len(OPTION_KEYS), None])
    names = [*map(pred_share_metric, OPTION_KEYS), *map(gold_share_metric, OPTION_KEYS), POSITION_BIAS_METRIC]
    table.rows += _family_rows(runs, tuple(SETTING_LABEL), names)
    table.notes += [
        "Over the replies with a parsed letter: Pred, the share choosing each key; Gold, the share of those same "
        "questions whose gold is each key (a reply naming no letter counts in neither). Bias: half the summed "
        "absolute differences (0 = no preference beyond the golds'). In circular runs every key holds the gold "
        "equally often, so Gold is 25% each when every reply names a letter.",
        *_closing_notes(runs, tuple(SETTING_LABEL), "answer-position shares"),
    ]
    return table


PROPAGATION_SETTINGS = ("base", "context", "context_gold")


def propagation_table(runs: list[AnalysisRun]) -> Table:
    """Error propagation: P(level k wrong | level k-1 wrong) vs (| level k-1 right), base, context and gold context."""
    columns = ["Model", "Setting", "Family"]
    metric_names = []
    for k in LEVELS[1:]:
        for cond in ("wrong", "right"):
            metric_names.append(wrong_after_metric(LEVEL_NAMES[k], cond))
            columns.append(f"L{k} wrong after L{k - 1} {cond}")
    table = Table("analysis_propagation", "Error propagation between consecutive levels (%)", columns)
    table.rows.append([CHANCE_ROW, None, None, *[CHANCE_WRONG] * len(metric_names)])
    table.rows += _family_rows(runs, PROPAGATION_SETTINGS, metric_names)
    table.notes += [
        "Over complete chains. Gold context shows the gold answers before each level, own-answer context the model's "
        "own: comparing them splits the context setting's gain into help from the bridge and damage from the model's "
        "own earlier errors.",
        "Chance: a uniform guesser's levels are independent, so each conditional probability is 75%.",
        *_closing_notes(runs, PROPAGATION_SETTINGS, "error propagation"),
    ]
    return table


def analysis_tables(runs: list[AnalysisRun]) -> list[Table]:
    """Return the analysis tables of the runs (`RunFolders.analysis`); [] without a blind, circular or gold run."""
    if not any(s in r.settings for r in runs for s in ANALYSIS_SETTINGS):
        return []
    tables = []
    if any("blind" in r.settings for r in runs):
        tables.append(blind_table(runs))
    if any("circular" in r.settings for r in runs):
        tables.append(circular_table(runs))
        tables.append(circular_questions_table(runs))
    tables.append(position_table(runs))
    if any(s in r.settings for r in runs for s in PROPAGATION_SETTINGS):
        tables.append(propagation_table(runs))
    return tables
