"""Report tables of the analyses beyond the paper: visual dependency, circular evaluation, position bias, propagation.

Reads lmms-eval results files holding the blind, circular and gold-context tasks (hvcu_tasks/analysis.py) and,
for the same models, the base and context tasks. Every table has a chance row: what a uniform random guesser
scores (hvcu_tasks.metrics: CHANCE_*).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hvcu_tasks.families import FAMILIES, LEVEL_NAMES, LEVELS, OPTION_KEYS
from hvcu_tasks.metrics import (
    CHANCE_FULL,
    CHANCE_LEVEL,
    CHANCE_WRONG,
    CIRCULAR_CHANCE_FULL,
    CIRCULAR_CHANCE_LEVEL,
    COUNT_PREFIXES,
    FULL_METRIC,
    PERCENT_PREFIXES,
    POSITION_BIAS_METRIC,
    acc_metric,
    gold_share_metric,
    is_na,
    overall_score,
    pred_share_metric,
    wrong_after_metric,
)
from hvcu_tasks.report.runs import ReportError, _model_name, checked_value, results_files
from hvcu_tasks.report.tables import FAMILY_LABEL, Table

TASK_NAME = re.compile(
    r"^hvcu_bench(?:_(?P<setting>blind|circular|context_gold|context))?(?P<sample>_sample)?_(?P<short>impl|aesth|affect)$"
)
SHORT_TO_FAMILY = {short: family for family, (_split, _stem, short) in FAMILIES.items()}
ANALYSIS_SETTINGS = ("blind", "circular", "context_gold")
"""Settings whose presence makes a report have analysis tables."""
SETTING_LABEL = {
    "base": "base",
    "context": "context",
    "context_gold": "gold context",
    "blind": "blind",
    "circular": "circular",
}
LEVEL_COLUMNS = [acc_metric(n) for n in LEVEL_NAMES.values()] + [FULL_METRIC]
COLUMN_LABEL = {m: m.capitalize() for m in LEVEL_COLUMNS}
CHANCE_ROW = "chance (uniform guess)"
SMOKE_MARK = "†"
PARTIAL_MARK = "*"
MISSING = "–"
"""How a missing value (None) is shown: the results file has no such metric."""
NA_NOTE = "n/a: nothing to measure (e.g. no chain with the earlier level wrong); never counted as 0."


@dataclass
class AnalysisRun:
    """One model's HVCU-Bench results across settings: setting -> family -> metrics."""

    model: str
    settings: dict[str, dict[str, dict[str, float | int]]] = field(default_factory=dict)
    smoke: bool = False
    partial: set[str] = field(default_factory=set)

    def score(self, setting: str) -> float | None:
        """Return a setting's Score (unweighted mean of the families' acc_full), None unless all three are there."""
        fams = self.settings.get(setting, {})
        values = [fams.get(f, {}).get(FULL_METRIC) for f in FAMILIES]
        if any(v is None for v in values):
            return None
        return overall_score(values)  # type: ignore[arg-type]

    def label(self, setting: str) -> str:
        """Return the row label: † smoke sample, * partial (a family missing or a --limit run)."""
        partial = setting in self.partial or set(self.settings.get(setting, {})) != set(FAMILIES)
        return self.model + (SMOKE_MARK if self.smoke else "") + (PARTIAL_MARK if partial else "")


def _metrics(values: Any, where: str) -> dict[str, float | int]:
    """Return one task's metrics (lmms-eval's 'name,none' keys), each checked like the main report's."""
    if not isinstance(values, dict):
        raise ReportError(f"{where}: expected an object of metrics, got {type(values).__name__}")
    out: dict[str, float | int] = {}
    for key, value in values.items():
        if not key.endswith(",none") or "_stderr" in key or isinstance(value, dict):
            continue
        name = key.split(",")[0]
        percent, count = name.startswith(PERCENT_PREFIXES), name.startswith(COUNT_PREFIXES)
        out[name] = checked_value(value, f"{where}: {name}", percent, count=count)
    return out


def read_analysis_runs(run_paths: list[Path]) -> list[AnalysisRun]:
    """Read every HVCU-Bench family task (all settings) from the results files under the paths, one entry per model."""
    runs: dict[str, AnalysisRun] = {}
    for root in map(Path, run_paths):
        if not root.exists():
            raise ReportError(f"{root}: no such file or folder")
        for path in results_files(root):
            try:
                results = json.loads(path.read_text(encoding="utf-8"))
                per_task = results["results"]
                config = results.get("config") or {}
            except (OSError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
                raise ReportError(f"{path}: not an lmms-eval results file ({exc})") from exc
            if not isinstance(per_task, dict) or not isinstance(config, dict):
                raise ReportError(f"{path}: not an lmms-eval results file ('results' or 'config' is not an object)")
            for task, values in per_task.items():
                m = TASK_NAME.match(task)
                if not m:
                    continue
                name = _model_name(results)
                run = runs.setdefault(name, AnalysisRun(name))
                setting, family = m.group("setting") or "base", SHORT_TO_FAMILY[m.group("short")]
                if family in run.settings.get(setting, {}):
                    raise ReportError(f"{path}: {name} has {setting} {family} results twice ({task}); pass one run")
                metrics = _metrics(values, f"{path}: {task}")
                run.settings.setdefault(setting, {})[family] = metrics
                run.smoke |= bool(m.group("sample"))
                if config.get("limit") is not None or metrics.get("n_incomplete", 0) != 0:
                    run.partial.add(setting)
    return list(runs.values())


def _gain(run: AnalysisRun) -> float | None:
    """Return the multi-modal gain: Score with the image minus Score blind (None unless both are known)."""
    with_image, blind = run.score("base"), run.score("blind")
    if with_image is None or blind is None:
        return None
    if is_na(with_image) or is_na(blind):
        return float("nan")
    return round(with_image - blind, 2)


def _family_cells(run: AnalysisRun, setting: str) -> list[float | int | None]:
    """Return per family Acc_perc, Acc_bridge, Acc_conn, Acc_full of a setting (None where absent)."""
    fams = run.settings.get(setting, {})
    return [fams[f].get(m) if f in fams else None for f in FAMILIES for m in LEVEL_COLUMNS]


def _family_columns(suffix: str) -> list[str]:
    """Return the per-family level columns, labelled like the paper's Table 2 with a suffix."""
    return [f"{FAMILY_LABEL[f]} {COLUMN_LABEL[m]}{suffix}" for f in FAMILIES for m in LEVEL_COLUMNS]


def _mean(values: list[Any]) -> float | None:
    """Return the mean of the values (NaN when one is NaN), None when one is missing."""
    if not values or any(v is None for v in values):
        return None
    if any(is_na(v) for v in values):
        return float("nan")
    return sum(values) / len(values)


def blind_table(runs: list[AnalysisRun]) -> Table:
    """Visual dependency: blind accuracies, Score blind, Score with the image and the multi-modal gain."""
    columns = ["Model", *_family_columns(" (blind)"), "Score (blind)", "Score (image)", "Multi-modal gain"]
    table = Table("analysis_blind", "Visual dependency: every level asked without the image", columns)
    chance = [CHANCE_LEVEL] * 3 + [CHANCE_FULL]
    table.rows.append([CHANCE_ROW, *chance * len(FAMILIES), CHANCE_FULL, CHANCE_FULL, None])
    for run in (r for r in runs if "blind" in r.settings):
        table.rows.append(
            [run.label("blind"), *_family_cells(run, "blind"), run.score("blind"), run.score("base"), _gain(run)]
        )
    table.notes += [
        "Blind: the base setting's system prompt and text with no image. Acc_perc/bridge/conn (blind) is the share "
        "of a level's questions answered right from the text alone; well above chance (25%) flags questions that "
        "need no image (L1 perception questions should not be among them).",
        f"Multi-modal gain = Score (image) - Score (blind), when the same model has both runs ({MISSING} otherwise).",
        f"Chance: 25% per level, 1/64 = {CHANCE_FULL:.4f}% full chain and Score.",
        NA_NOTE,
    ]
    return table


def circular_table(runs: list[AnalysisRun]) -> Table:
    """Circular evaluation: per family circular accuracies, the circular Score and the position bias."""
    columns = ["Model", *_family_columns(" (circular)"), "Score (circular)", "Position bias"]
    table = Table("analysis_circular", "Circular evaluation: a level counts only if right in all 4 rotations", columns)
    chance = [CIRCULAR_CHANCE_LEVEL] * 3 + [CIRCULAR_CHANCE_FULL]
    table.rows.append([CHANCE_ROW, *chance * len(FAMILIES), CIRCULAR_CHANCE_FULL, None])
    for run in (r for r in runs if "circular" in r.settings):
        fams = run.settings["circular"]
        bias = _mean([fams[f].get(POSITION_BIAS_METRIC) if f in fams else None for f in FAMILIES])
        table.rows.append([run.label("circular"), *_family_cells(run, "circular"), run.score("circular"), bias])
    table.notes += [
        "Each level is asked once per rotation of its option texts (keys A-D kept): 4x the base setting's requests.",
        "Chance, for a guesser picking uniformly and independently per request: (1/4)^4 = 1/256 = "
        f"{CIRCULAR_CHANCE_LEVEL:.4f}% per level, (1/256)^3 = 1/16,777,216 (about {CIRCULAR_CHANCE_FULL:.6f}%) "
        "full chain and Score; a model that always answers the same letter scores 0.",
        "Position bias: mean over the families of half the summed differences between the shares of predicted and "
        "gold letters (0 = replies spread like the golds; see analysis_position).",
        NA_NOTE,
    ]
    return table


def position_table(runs: list[AnalysisRun]) -> Table:
    """Answer-position bias of every run: predicted vs gold letter shares per setting and family."""
    columns = ["Model", "Setting", "Family"]
    columns += [f"Pred {k}" for k in OPTION_KEYS] + [f"Gold {k}" for k in OPTION_KEYS] + ["Bias"]
    table = Table("analysis_position", "Answer-position bias: shares of predicted vs gold letters (%)", columns)
    table.rows.append([CHANCE_ROW, None, None, *[CHANCE_LEVEL] * len(OPTION_KEYS), *[None] * len(OPTION_KEYS), None])
    for run in runs:
        for setting in (s for s in SETTING_LABEL if s in run.settings):
            for family in (f for f in FAMILIES if f in run.settings[setting]):
                m = run.settings[setting][family]
                cells = [m.get(pred_share_metric(k)) for k in OPTION_KEYS] + [
                    m.get(gold_share_metric(k)) for k in OPTION_KEYS
                ]
                table.rows.append(
                    [
                        run.label(setting),
                        SETTING_LABEL[setting],
                        FAMILY_LABEL[family],
                        *cells,
                        m.get(POSITION_BIAS_METRIC),
                    ]
                )
    table.notes += [
        "Pred: share of the replies with a parsed letter; Gold: share of the questions asked. Bias: half the summed "
        "absolute differences (0 = no preference beyond the golds'). Circular runs have 25% gold at every key.",
        f"{MISSING}: the results file predates these metrics (rerun to get them).",
        NA_NOTE,
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
    for run in runs:
        for setting in (s for s in PROPAGATION_SETTINGS if s in run.settings):
            for family in (f for f in FAMILIES if f in run.settings[setting]):
                m = run.settings[setting][family]
                table.rows.append(
                    [
                        run.label(setting),
                        SETTING_LABEL[setting],
                        FAMILY_LABEL[family],
                        *[m.get(n) for n in metric_names],
                    ]
                )
    table.notes += [
        "Over complete chains. Gold context shows the gold answers before each level, own-answer context the model's "
        "own: comparing them splits the context setting's gain into help from the bridge and damage from the model's "
        "own earlier errors.",
        "Chance: a uniform guesser's levels are independent, so each conditional probability is 75%.",
        f"{MISSING}: the results file predates these metrics (rerun to get them).",
        NA_NOTE,
    ]
    return table


def analysis_tables(run_paths: list[Path]) -> list[Table]:
    """Return the analysis tables for the runs under the paths; [] when none holds a blind, circular or gold run."""
    runs = read_analysis_runs(run_paths)
    if not any(s in r.settings for r in runs for s in ANALYSIS_SETTINGS):
        return []
    tables = []
    if any("blind" in r.settings for r in runs):
        tables.append(blind_table(runs))
    if any("circular" in r.settings for r in runs):
        tables.append(circular_table(runs))
    tables.append(position_table(runs))
    if any(s in r.settings for r in runs for s in PROPAGATION_SETTINGS):
        tables.append(propagation_table(runs))
    return tables
