"""Read lmms-eval output folders once (`read_folders`): per-model results, flagging anything partial, the analysis
runs and the sample logs, the records every table, page and the chain browser of `hvcu report` are made from."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hvcu_tasks.core import metrics as core_metrics
from hvcu_tasks.core.families import ASPECTS, FAMILIES, LEVEL_NAMES, LEVELS
from hvcu_tasks.core.metrics import ACCURACY_METRICS, FULL_METRIC, OFFICIAL_FULL_METRIC, Outcome, overall_score
from hvcu_tasks.data import jsonio, provenance
from hvcu_tasks.data.provenance import location_text, published_match
from hvcu_tasks.results.chains import chains_of_file, logged_chains, samples_files
from hvcu_tasks.results.diagnostics import SHORT_TO_FAMILY, SamplesFileError, samples_file, with_diagnostics
from hvcu_tasks.results.diagnostics import TASK as FAMILY_TASK
from hvcu_tasks.results.errors import ReportError, checked_text
from hvcu_tasks.results.general import COLUMNS, GENERAL_TASKS, Counts, Units, headline_counts, logged_units
from hvcu_tasks.results.run_record import RunRecord, run_record

PERCENT_PREFIXES = (
    "acc_",
    "invalid_",
    "error_share_",
    "full_",
    "pred_share_",
    "gold_share_",
    "position_bias",
    "wrong_",
    "plain_acc_",
)
"""Every metric named with one of these is a percentage (0-100, or NA)."""
COUNT_PREFIXES = ("n_", "errors_at_")
"""Every metric named with one of these is a count (a number >= 0, never NA)."""


TASK_NAME = re.compile(r"^hvcu_bench(?P<context>_context)?(?P<sample>_sample)?_(?P<short>impl|aesth|affect)$")
LEVEL_METRICS = list(ACCURACY_METRICS)
BENCHMARK = "HVCU-Bench"
SMOKE = "smoke sample"
CUSTOM = "custom data"
NO_IDENTITY_NOTE = (
    "data identity not recorded (results written before this toolkit recorded it): taken for HVCU-Bench as "
    "before; rerun the evaluation to have the data checked"
)
NA = float("nan")
"""A metric lmms-eval could not compute (NaN or null in its file, e.g. no complete chain under --limit): "n/a"."""


def is_nan(value: object) -> bool:
    """Whether a value is the report's not-available marker, a float NaN (None is not; core.metrics.is_na: both)."""
    return isinstance(value, float) and math.isnan(value)


@dataclass
class FamilyResult:
    """One family task's metrics from one results file (percent unless a count)."""

    metrics: dict[str, float | None]
    task: str

    def get(self, name: str) -> float | None:
        """Return a metric value, None when absent."""
        return self.metrics.get(name)


@dataclass
class ModelResult:
    """Everything known about one model: per setting, per family results and what is partial."""

    model: str
    settings: dict[str, dict[str, FamilyResult]] = field(default_factory=dict)
    dataset: set[str] = field(default_factory=set)
    notes: dict[str, list[str]] = field(default_factory=dict)
    general: dict[str, dict[str, float]] = field(default_factory=dict)
    """General-benchmark results (MMStar, MMMU, ...): task -> metric -> value as lmms-eval wrote it."""
    general_counts: dict[str, Counts] = field(default_factory=dict)
    """Per general benchmark's headline (results.general.HEADLINES): what it counts, from the sample logs."""
    chains: dict[str, dict[str, dict[str, bool]]] = field(default_factory=dict)
    """Per setting and family: sample id -> full-chain verdict, when the run logged samples."""
    chains_official: dict[str, dict[str, dict[str, bool]]] = field(default_factory=dict)
    """The same verdicts under the authors' parser (the one the paper's numbers and Score (official) use)."""
    identities: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """Per setting and family: the data identity its results file recorded (absent in older files)."""
    data_notes: list[str] = field(default_factory=list)
    """Notes on the data the model ran on (e.g. no identity recorded); they do not make a setting partial."""
    no_diagnostics: dict[str, set[str]] = field(default_factory=dict)
    """Per setting: the families whose diagnostics (per aspect, error attribution, ...) are unknown: the results
    file does not hold them (the tasks no longer report them to lmms-eval) and no sample log lies beside it."""
    records: list[RunRecord] = field(default_factory=list)
    """How each of the model's results files was made (command line, versions, data), in the order read."""

    def data_label(self) -> str:
        """Return what the model ran on: 'HVCU-Bench', 'smoke sample', or 'custom data: <where>, N samples'."""
        if self.dataset != {CUSTOM}:
            return next(iter(self.dataset), BENCHMARK)
        per_family: dict[str, dict[str, Any]] = {}
        for fams in self.identities.values():
            for family, identity in fams.items():
                per_family.setdefault(family, identity)
        places = sorted({location_text(i) for i in per_family.values()})
        total = sum(int(i.get("samples") or 0) for i in per_family.values())
        return f"{CUSTOM}: {', '.join(places)}, {total} samples"

    def data_fingerprint(self) -> str:
        """Return the fingerprints of the data the model ran on, one per family ('' when one was not recorded)."""
        per_family = {f: i.get("fingerprint") for fams in self.identities.values() for f, i in fams.items()}
        if set(per_family) != set(FAMILIES) or not all(isinstance(v, str) for v in per_family.values()):
            return ""
        return " ".join(f"{f}={per_family[f]}" for f in FAMILIES)

    def score(self, setting: str, metric: str = FULL_METRIC) -> float | None:
        """Return the Overall Score of a setting: None unless all three families have `metric`, NA if one is n/a."""
        fams = self.settings.get(setting, {})
        if set(fams) != set(FAMILIES):
            return None
        values = [fams[f].get(metric) for f in FAMILIES]
        if any(v is None for v in values):
            return None
        if any(is_nan(v) for v in values):
            return NA
        return overall_score(values)  # type: ignore[arg-type]

    def official_score(self, setting: str) -> float | None:
        """Return the paper-comparable Overall Score (authors' parser); None when the results files lack it."""
        return self.score(setting, OFFICIAL_FULL_METRIC)

    def failed_requests(self, setting: str) -> tuple[int, int, bool] | None:
        """Return a setting's (failed requests, requests, exact) from its results files; None if one lacks the count.

        A sample asks one request per level: complete chains count all three; a sample missing a level (a --limit
        run) counts three too, so the requests are then an upper bound (exact False).
        """
        fams = self.settings.get(setting, {})
        counts = [(r.get("n_failed_requests"), r.get("n_chains"), r.get("n_incomplete")) for r in fams.values()]
        if not counts or any(failed is None or chains is None for failed, chains, _incomplete in counts):
            return None
        failed = sum(int(f or 0) for f, _c, _i in counts)
        incomplete = sum(int(i or 0) for _f, _c, i in counts)
        requests = len(LEVELS) * (sum(int(c or 0) for _f, c, _i in counts) + incomplete)
        return failed, requests, incomplete == 0

    def partial(self, setting: str) -> bool:
        """Whether the setting lacks a family or was run on a subset."""
        return self.score(setting) is None or bool(self.notes.get(setting))

    def note(self, setting: str, text: str) -> None:
        """Record why a setting's numbers are partial."""
        self.notes.setdefault(setting, []).append(text)


def run_model_name(results: dict[str, Any], where: str = "results file") -> str:
    """Return a readable model name from an lmms-eval results file, refused when it is not one line of text.

    Every renderer gets model names from here: `where` (the file) is named when the name is refused.
    """
    config = results.get("config", {}) or {}
    args = dict(kv.split("=", 1) for kv in str(config.get("model_args") or "").split(",") if "=" in kv)
    for key in ("model_version", "model", "pretrained", "inner"):
        if args.get(key):
            return checked_text(str(args[key]), f"{where}: field config.model_args {key}", "model name")
    for field_name, value in (("model_name", results.get("model_name")), ("config.model", config.get("model"))):
        if value:
            return checked_text(str(value), f"{where}: field {field_name}", "model name")
    return "unknown"


def _metric_values(values: dict[str, Any]) -> dict[str, Any]:
    """Return a task's metrics as {name: value} (lmms-eval's 'name,none' keys; stderr and objects dropped)."""
    return {
        k.split(",")[0]: v
        for k, v in values.items()
        if k.endswith(",none") and "_stderr" not in k and not isinstance(v, dict)
    }


def recorded_identity(config: Any, where: str) -> dict[str, Any] | None:
    """Return the data identity a task's config recorded, None when absent (older files); refuse a damaged one."""
    try:
        return provenance.config_identity(config)
    except ValueError as exc:
        raise ReportError(f"{where}: {exc}") from exc


def data_kind(identity: dict[str, Any] | None, sample_task: bool) -> str:
    """Return what a task ran on: the smoke sample, the published benchmark, or custom data."""
    from hvcu_tasks.data.validate import PUBLISHED_COUNTS, PUBLISHED_FINGERPRINTS

    if sample_task or (identity is not None and identity.get("kind") == "smoke"):
        return SMOKE
    if identity is None or published_match(identity, PUBLISHED_COUNTS, PUBLISHED_FINGERPRINTS) is None:
        return BENCHMARK
    return CUSTOM


def checked_value(value: Any, where: str, percent: bool, count: bool = False) -> float | int:
    """Return a metric value as read (NaN or null as NA); refuse a non-number, or a percentage outside 0-100.

    A count is never NA: the harness always computes it, so a null or NaN count means a damaged file.
    """
    if value is None or is_nan(value):
        if count:
            shown = "null" if value is None else "NaN"
            raise ReportError(f"{where}: {shown} where a count is expected (counts are never n/a); the file is damaged")
        return NA
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReportError(f"{where}: {number_text(value)} is not a number")
    if percent and not 0 <= value <= 100:
        raise ReportError(f"{where}: {number_text(value)} is outside 0-100 (a percentage)")
    if not percent and not (finite(value) and 0 <= value <= MAX_COUNT):
        raise ReportError(f"{where}: {number_text(value)} is not a count (a number from 0 to 10^12)")
    return value


MAX_COUNT = 10**12
"""The largest count a results file may hold (a benchmark of this size has about 10^4 requests)."""


def finite(value: int | float) -> bool:
    """Whether a JSON number is finite (an integer always is, however long: it is never turned into a float)."""
    return isinstance(value, int) or math.isfinite(value)


def number_text(value: Any) -> str:
    """Return a value for an error message: a long integer as its number of digits, anything else as repr."""
    if isinstance(value, int) and not isinstance(value, bool) and len(str(abs(value))) > 20:
        return f"an integer of {len(str(abs(value)))} digits"
    return repr(value)


RENAMED = {
    f"{plain}acc_{n}{rule}": f"{plain}{core_metrics.acc_metric(n)}{rule}"
    for n in LEVEL_NAMES.values()
    for plain, rule in (("", ""), ("", core_metrics.OFFICIAL_SUFFIX), ("plain_", ""))
}
"""The levels' accuracies as results files written before they were numbered name them (acc_perc: acc_l1_perc)."""


def current_name(name: str) -> str:
    """Return a metric's name today: an older results file's level accuracy (acc_perc, ...) under its new name."""
    return RENAMED.get(name, name)


def _hvcu_metrics(values: dict[str, Any], where: str) -> dict[str, float | int]:
    """Return an HVCU-Bench task's metrics, each checked: percentages within 0-100, counts >= 0 and never n/a."""
    return {
        current_name(name): checked_value(
            value, f"{where}: {name}", name.startswith(PERCENT_PREFIXES), count=name.startswith(COUNT_PREFIXES)
        )
        for name, value in _metric_values(values).items()
    }


def _general_metrics(task: str, values: dict[str, Any], where: str) -> dict[str, Any]:
    """Return a general benchmark's metrics, the ones a Table 7 column reads checked (in percent, 0-100)."""
    metrics = _metric_values(values)
    for column in (c for c in COLUMNS if c.task == task and c.metric in metrics):
        value = checked_value(metrics[column.metric], f"{where}: {column.metric}", percent=False)
        checked_value(value * column.to_percent, f"{where}: {column.metric} (in percent)", percent=True)
        metrics[column.metric] = value
    return metrics


def completed_metrics(
    task: str, metrics: dict[str, Any], results_file: Path, outcomes: Sequence[Outcome] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Return a task's metrics, the diagnostics its file lacks computed from its sample log (or its `outcomes`, read
    already), and those still missing. A damaged sample log is refused in one line naming the file and line.
    """
    try:
        return with_diagnostics(task, metrics, results_file, outcomes)
    except (OSError, SamplesFileError) as exc:
        raise ReportError(str(exc)) from exc


def results_files(path: Path) -> list[Path]:
    """Return every lmms-eval results file under a folder (or the file itself); MMBench's own files (submissions/
    mmbench_*_results.json, its per-split details) are none."""
    path = Path(path)
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*_results.json") if p.parent.name != "submissions")


@dataclass
class AnalysisRun:
    """One model's HVCU-Bench results on one kind of data (`data`) across settings: setting -> family -> metrics."""

    model: str
    data: str = BENCHMARK
    """What the tasks read: BENCHMARK, SMOKE or CUSTOM (`data_kind`)."""
    settings: dict[str, dict[str, dict[str, float | int]]] = field(default_factory=dict)
    partial: set[str] = field(default_factory=set)
    """Settings run on a subset (--limit) or with incomplete chains."""
    fingerprints: dict[str, dict[str, str | None]] = field(default_factory=dict)
    """Per setting and family: the data fingerprint its results file recorded (None: not recorded)."""
    no_diagnostics: dict[str, set[str]] = field(default_factory=dict)
    """Per setting: the families whose diagnostics are unknown (not in the results file, no sample log beside it)."""

    def score(self, setting: str) -> float | None:
        """Return a setting's Score (unweighted mean of the families' acc_full), None unless all three are there."""
        fams = self.settings.get(setting, {})
        values = [fams.get(f, {}).get(FULL_METRIC) for f in FAMILIES]
        return None if any(v is None for v in values) else overall_score(values)  # type: ignore[arg-type]

    def is_partial(self, setting: str) -> bool:
        """Whether a setting lacks a family, ran under --limit or has incomplete chains."""
        return setting in self.partial or set(self.settings.get(setting, {})) != set(FAMILIES)


@dataclass
class SampleLog:
    """One `--log_samples` file of the base or context setting: its run folder, task, model and chains (with
    details: `results.chains.chains_of_file`)."""

    root: Path
    task: str
    path: Path
    model: str
    chains: list[dict[str, Any]]

    @property
    def setting(self) -> str:
        """Return the setting the file logged: base or context."""
        return "context" if self.task.startswith("hvcu_bench_context") else "base"


@dataclass
class RunFolders:
    """Everything `hvcu report` renders from its run folders, each file read once."""

    models: list[ModelResult]
    """One per model with base, context or general results (the paper's tables and the leaderboard)."""
    analysis: list[AnalysisRun]
    """One per model and kind of data, every family task's metrics in every setting (the analysis tables)."""
    logs: list[SampleLog]
    """The base and context sample logs (the chain browser)."""


def _model_beside(samples: Path) -> str:
    """Return the model of a samples file, named from the results file beside it (else its folder's name)."""
    stamp = samples.name.split("_samples_")[0]
    results = samples.with_name(f"{stamp}_results.json")
    if not results.is_file():  # lmms-eval's folder per model
        return checked_text(samples.parent.name, f"{samples.parent}: folder name", "model name")
    try:
        data = jsonio.read_json(results)
    except (OSError, jsonio.JsonReadError) as exc:
        raise ValueError(f"{results}: not an lmms-eval results file ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("config") or {}, dict):
        raise ValueError(f"{results}: not an lmms-eval results file (not an object with a 'config' object)")
    return run_model_name(data, str(results))


def sample_logs(paths: Sequence[Path], read: Mapping[Path, SampleLog] | None = None) -> list[SampleLog]:
    """Read the base and context samples files under the paths (`read`: samples file -> its log, read already)."""
    logs = []
    for root in map(Path, paths):
        stamp = root.name.removesuffix("_results.json")
        beside = sorted(root.parent.glob(f"{stamp}_samples_*.jsonl")) if stamp != root.name else [root]
        for task, path in samples_files(beside):
            if path in (read or {}):
                logs.append(read[path])  # type: ignore[index]
            elif TASK_NAME.match(task):  # a log whose results file does not list it, or without one
                base = root if root.is_dir() else root.parent
                logs.append(SampleLog(base, task, path, _model_beside(path), chains_of_file(task, path, details=True)))
    return logs


def read_runs(paths: list[Path]) -> list[ModelResult]:
    """Read run folders into one ModelResult per model, merging base and context runs of the same model."""
    return read_folders(paths).models


def _read_results(f: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Return a results file's parsed text, its `results` and its `configs`, refusing what is not one."""
    try:
        results = jsonio.read_json(f)
        per_task, config, configs = results["results"], results.get("config") or {}, results.get("configs") or {}
    except (OSError, jsonio.JsonReadError, KeyError, TypeError, AttributeError) as exc:
        raise ReportError(f"{f}: not an lmms-eval results file ({exc})") from exc
    for key, value in (("results", per_task), ("config", config), ("configs", configs)):
        if not isinstance(value, dict):
            raise ReportError(f"{f}: not an lmms-eval results file ('{key}' is not an object)")
    return results, per_task, configs


def read_folders(paths: Sequence[Path]) -> RunFolders:
    """Read run folders once: the models, the analysis runs and the sample logs, every file checked."""
    models: dict[str, ModelResult] = {}
    analysis: dict[tuple[str, str], AnalysisRun] = {}
    read: dict[Path, SampleLog] = {}
    units: dict[str, dict[str, Units]] = {}
    for root in map(Path, paths):
        if not root.exists():
            raise ReportError(f"{root}: no such file or folder")
        files = results_files(root)
        if not files:
            raise ReportError(f"{root}: no lmms-eval results file (*_results.json) in it")
        found_any = False
        for f in files:
            results, per_task, configs = _read_results(f)
            name = run_model_name(results, str(f))
            model = models.setdefault(name, ModelResult(model=name))
            limit = (results.get("config") or {}).get("limit")
            model.records.append(run_record(results, f, paths))
            for task, values in per_task.items():
                if not isinstance(values, dict):
                    raise ReportError(f"{f}: {task}: expected an object of metrics, got {type(values).__name__}")
                if task in GENERAL_TASKS:
                    found_any = True
                    if task in model.general:
                        raise ReportError(f"{f}: {name} has {task} results twice; pass one run per model")
                    model.general[task] = _general_metrics(task, values, f"{f}: {task}")
                    if limit is not None:
                        model.note("general", f"{task} ran on a subset (--limit {limit})")
                    logged, n = samples_file(f, task), results.get("n-samples")
                    n = n.get(task) if isinstance(n, dict) else None
                    n = n.get("effective") if isinstance(n, dict) else None
                    if logged is not None:
                        units.setdefault(name, {})[task] = logged_units(task, logged)
                    elif task in ("mmmu_val", "hallusion_bench_image") and isinstance(n, int):  # a share of n docs
                        units.setdefault(name, {})[task] = {"all": dict.fromkeys(map(str, range(n)))}
                m = FAMILY_TASK.match(task)
                if not m:
                    continue
                found_any = True
                setting, family = m.group("setting") or "base", SHORT_TO_FAMILY[m.group("short")]
                checked = _hvcu_metrics(values, f"{f}: {task}")
                logged = samples_file(f, task) if setting in ("base", "context") else None
                outcomes = None
                if logged is not None:  # read once: chains for the board and the browser, outcomes for diagnostics
                    chains, outcomes = logged_chains(task, logged)
                    read[logged] = SampleLog(root if root.is_dir() else root.parent, task, logged, name, chains)
                    for verdicts, rule in (
                        (model.chains, "chain_correct"),
                        (model.chains_official, "chain_correct_official"),
                    ):
                        if found := {c["sample_id"]: bool(c[rule]) for c in chains if c[rule] is not None}:
                            verdicts.setdefault(setting, {})[family] = found
                metrics, missing = completed_metrics(task, checked, f, outcomes)
                identity = recorded_identity(configs.get(task), f"{f}: {task}")
                kind = data_kind(identity, bool(m.group("sample")))
                run = analysis.setdefault((name, kind), AnalysisRun(name, kind))
                if family in run.settings.get(setting, {}):
                    raise ReportError(
                        f"{f}: {name} has {setting} {family} results twice ({task}); pass one run per model"
                    )
                run.settings.setdefault(setting, {})[family] = metrics
                run.fingerprints.setdefault(setting, {})[family] = None if identity is None else identity["fingerprint"]
                subset = limit is not None or metrics.get("n_incomplete", 0) != 0  # a count: checked, never NaN
                if subset:
                    run.partial.add(setting)
                if missing:
                    run.no_diagnostics.setdefault(setting, set()).add(family)
                if setting not in ("base", "context"):
                    continue
                if missing:
                    model.no_diagnostics.setdefault(setting, set()).add(family)
                if family in model.settings.get(setting, {}):
                    raise ReportError(
                        f"{f}: {name} has {setting} {family} results twice ({task}); pass one run per model"
                    )
                model.settings.setdefault(setting, {})[family] = FamilyResult(metrics, task)
                if identity is not None:
                    model.identities.setdefault(setting, {})[family] = identity
                elif not m.group("sample") and NO_IDENTITY_NOTE not in model.data_notes:
                    model.data_notes.append(NO_IDENTITY_NOTE)
                model.dataset.add(kind)
                if subset:
                    model.note(setting, f"{family} ran on a subset (--limit {limit})")
        if not found_any:
            raise ReportError(f"{root}: its results hold no HVCU-Bench task (hvcu_bench*) nor a general benchmark")
    logs = sample_logs(paths, read)  # with the logs no results file lists: the chain browser shows them too
    for model in models.values():
        if model.dataset == {SMOKE, BENCHMARK}:
            raise ReportError(f"{model.model}: mixes the smoke sample and the benchmark; report them separately")
        check_one_data(model)
        where = f"{model.model} ({', '.join(sorted({str(r.file) for r in model.records}))})"
        model.general_counts = headline_counts(model.general, units.get(model.model, {}), where)
        for setting, fams in model.settings.items():
            missing = [f for f in FAMILIES if f not in fams]
            if missing:
                model.note(setting, f"missing {', '.join(missing)} (no Overall Score)")
    shown = [m for m in models.values() if m.settings or m.general]
    return RunFolders(shown, list(analysis.values()), logs)


def check_one_data(model: ModelResult) -> None:
    """Refuse a model whose runs read different data; one whose families are partly custom is custom as a whole."""
    for family in FAMILIES:
        seen = {
            fams[family]["fingerprint"]: (setting, location_text(fams[family]))
            for setting, fams in model.identities.items()
            if family in fams
        }
        if len(seen) > 1:
            where = "; ".join(f"{s} on {loc} ({fp[:19]})" for fp, (s, loc) in seen.items())
            raise ReportError(
                f"{model.model}: {family} ran on different data ({where}); report them in separate `hvcu report` "
                "calls or run them under different model names"
            )
    if model.dataset == {BENCHMARK, CUSTOM}:
        model.dataset = {
            CUSTOM
        }  # e.g. a copy that lost a sample of one family: the run as a whole is not the benchmark
    if len(model.dataset) > 1:
        raise ReportError(
            f"{model.model}: mixes {' and '.join(sorted(model.dataset))}; report them in separate `hvcu report` "
            "calls or run them under different model names"
        )


def aspect_names() -> list[tuple[str, str]]:
    """Return (family, aspect) for the 15 aspects in the paper's order."""
    return [(f, a) for f, aspects in ASPECTS.items() for a in aspects]
