"""The diagnostics a family task does not report to lmms-eval, computed from the run's `--log_samples` files.

Per aspect, error attribution, invalid replies, answer positions, propagation and plain_acc_* come from each
line's acc_full outcome records (results.scores); a results file's own values of them are kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hvcu_tasks.core.families import ASPECTS, FAMILIES
from hvcu_tasks.core.metrics import TABLE_METRICS, Outcome
from hvcu_tasks.core.payloads import ROTATION_KEY
from hvcu_tasks.data import jsonio
from hvcu_tasks.results.scores import circular_metric_names, circular_metrics, family_metrics, metric_names

TASK = re.compile(
    r"^hvcu_bench(?:_(?P<setting>blind|circular|context_gold|context))?(?P<sample>_sample)?_(?P<short>impl|aesth|affect)$"
)
"""Every HVCU-Bench family task: base, context, blind, circular, gold context, hub or sample data."""
SHORT_TO_FAMILY = {short: family for family, (_split, _stem, short) in FAMILIES.items()}


class SamplesFileError(ValueError):
    """A samples file that cannot be read into outcome records; the message names the file and line."""


def family_of(task: str) -> str | None:
    """Return the family of an HVCU-Bench family task, None for any other task (a group, another benchmark)."""
    m = TASK.match(task)
    return SHORT_TO_FAMILY.get(m.group("short")) if m else None


def is_circular(task: str) -> bool:
    """Whether a family task is a circular-evaluation task (its metrics are the circular ones)."""
    m = TASK.match(task)
    return bool(m and m.group("setting") == "circular")


def all_metric_names(task: str) -> list[str]:
    """Return every metric of a family task, reported or diagnostic, in table order."""
    family = family_of(task)
    if family is None:
        raise ValueError(f"{task}: not an HVCU-Bench family task")
    return circular_metric_names() if is_circular(task) else metric_names(ASPECTS[family])


def diagnostic_names(task: str) -> list[str]:
    """Return the metrics of a family task that lmms-eval does not print (computed from the sample logs)."""
    return diagnostic_metric_names(all_metric_names(task))


def diagnostic_metric_names(names: Sequence[str]) -> list[str]:
    """Return the names among `names` a task does not report to lmms-eval (computed from the sample logs)."""
    return [n for n in names if n not in TABLE_METRICS]


def samples_file(results_file: Path, task: str) -> Path | None:
    """Return the `--log_samples` file lmms-eval wrote for `task` beside a results file, None when there is none."""
    stamp = Path(results_file).name.removesuffix("_results.json")
    path = Path(results_file).with_name(f"{stamp}_samples_{task}.jsonl")
    return path if path.is_file() else None


def logged_records(path: Path) -> list[dict[str, Any]]:
    """Return the outcome records of every line of a samples file (each line's acc_full outcomes), or raise."""
    records: list[dict[str, Any]] = []
    for n, text in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            line = jsonio.loads(text, source=path, line=n)
        except jsonio.JsonReadError as exc:
            raise SamplesFileError(f"{path}:{n}: not an HVCU-Bench samples line ({exc.reason})") from None
        entry = line.get("acc_full") if isinstance(line, dict) else None
        found = entry.get("outcomes") if isinstance(entry, dict) else None
        if not isinstance(found, list) or not all(isinstance(r, dict) for r in found):
            raise SamplesFileError(
                f"{path}:{n}: field acc_full.outcomes: not a list of outcome records (not an HVCU-Bench samples line)"
            )
        records += found
    return records


def _outcome(record: Mapping[str, Any], where: str) -> Outcome:
    """Rebuild one logged outcome, refusing a record that lacks a field."""
    try:
        return Outcome.from_dict(dict(record))
    except (KeyError, TypeError, ValueError) as exc:
        raise SamplesFileError(f"{where}: outcome record {dict(record)!r:.80}: {type(exc).__name__}: {exc}") from None


def logged_metrics(task: str, path: Path, outcomes: Sequence[Outcome] | None = None) -> dict[str, float | int]:
    """Return every metric of a family task (reported and diagnostic) computed from its samples file (or from the
    `outcomes` already read from it: results.chains.logged_chains)."""
    family = family_of(task)
    if family is None:
        raise ValueError(f"{task}: not an HVCU-Bench family task")
    records = logged_records(path) if outcomes is None or is_circular(task) else []
    if is_circular(task):
        rotated = []
        for record in records:
            rotation = record.get(ROTATION_KEY)
            if isinstance(rotation, bool) or not isinstance(rotation, int):
                raise SamplesFileError(f"{path}: a circular record has no integer '{ROTATION_KEY}': {record!r:.80}")
            rotated.append((rotation, _outcome(record, str(path))))
        try:
            return circular_metrics(rotated)
        except ValueError as exc:
            raise SamplesFileError(f"{path}: {exc} (the file is damaged)") from None
    outcomes = [_outcome(r, str(path)) for r in records] if outcomes is None else outcomes
    try:
        return family_metrics(outcomes, ASPECTS[family])
    except ValueError as exc:
        raise SamplesFileError(f"{path}: {exc}; each level of a sample is logged once (the file is damaged)") from None


def with_diagnostics(
    task: str, metrics: Mapping[str, Any], results_file: Path, outcomes: Sequence[Outcome] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Return a task's metrics completed with the diagnostics its results file lacks, and the names still missing.

    The file's own values win (an earlier run's file holds every metric); the missing ones come from the task's
    samples file beside it (its `outcomes`, when already read). With no samples file the missing names are
    returned, for the report to say so.
    """
    missing = [n for n in diagnostic_names(task) if n not in metrics]
    if not missing:
        return dict(metrics), []
    path = samples_file(results_file, task)
    if path is None:
        return dict(metrics), missing
    logged = logged_metrics(task, path, outcomes)
    return {**metrics, **{n: logged[n] for n in missing}}, []
