"""A model page's "How this run was made" section: per results file, the model, command line, versions and data."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from hvcu_tasks.results.diagnostics import TASK as FAMILY_TASK
from hvcu_tasks.results.run_record import RunRecord, TaskData
from hvcu_tasks.results.runs import TASK_NAME

NOT_RECORDED = "not recorded"
WRAPPER = "hvcu_context"
"""The --model that records the model identity."""
SECTION_ID = "s-how-made"
INTRO = (
    "What each results file recorded about its run: the model, the command line lmms-eval recorded (rebuilt as "
    "one lmms-eval call; secrets redacted), the versions and the data each task read. Unset arguments and logging "
    "integrations (wandb, swanlab, hf_hub) are left out."
)


def _shown(value: object) -> str:
    """Return a recorded value escaped for the page, 'not recorded' when absent."""
    return html.escape(NOT_RECORDED if value is None or value == "" else str(value))


def settings_of(tasks: Sequence[str]) -> list[str]:
    """Return the settings a results file's tasks ran (base, context, analysis, general benchmarks), in order."""
    found: list[str] = []
    for task in tasks:
        m = TASK_NAME.match(task)
        if m:
            name = "context setting" if m.group("context") else "base setting"
        else:
            name = "analysis" if FAMILY_TASK.match(task) else "general benchmarks"
        if name not in found:
            found.append(name)
    return found


def _model_text(record: RunRecord) -> str:
    """Return the model's identity as recorded: backend (--model), model_name and the class lmms-eval built."""
    parts = [f"lmms-eval --model {_shown(record.model)}", f"model_name {_shown(record.model_name)}"]
    if record.model_backend:
        parts.append(f"class {_shown(record.model_backend)}")
    return " · ".join(parts)


def _value_text(value: Any) -> str:
    """Return a recorded identity value as text: text as it is, anything else as compact JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _pairs(values: Any) -> list[str]:
    """Return an identity's `name value` parts of one object field ([] when it is not an object)."""
    if not isinstance(values, Mapping):
        return []
    return [f"{name} {_value_text(value)}" for name, value in values.items()]


def _identity_text(record: RunRecord) -> str:
    """Return the model identity compactly: backend, what names the model, endpoint, lmms-eval, request cache run."""
    identity = record.model_identity
    if identity is None:
        why = (
            "written before the toolkit recorded it"
            if record.model == WRAPPER
            else f"the run did not go through {WRAPPER}"
        )
        return f"{NOT_RECORDED} ({why})"
    parts = [f"backend {_value_text(identity.get('backend'))}"]
    parts += _pairs(identity.get("resolved")) or _pairs(identity.get("args"))
    for key, name in (("endpoint", "endpoint"), ("lmms_eval", "lmms-eval")):
        if identity.get(key) is not None:
            parts.append(f"{name} {_value_text(identity[key])}")
    cache = identity.get("request_cache")
    if isinstance(cache, Mapping) and cache.get("run") is not None:
        parts.append(f"request cache run {_value_text(cache['run'])}")
    return " · ".join(html.escape(part) for part in parts)


def _revision(data: TaskData) -> str:
    """Return a task's data revision for the page: '–' for data that has none (a local copy, the smoke sample)."""
    return "–" if data.revision is None and data.kind not in (None, "hub") else _shown(data.revision)


def _data_table(data: Sequence[TaskData]) -> str:
    """Return the per-task data as a table: family, task, fingerprint, source, revision, samples."""
    head = "".join(
        f"<th scope='col' class='text'>{c}</th>"
        for c in ("Family", "Task", "Fingerprint", "Source", "Revision", "Samples")
    )
    rows = "".join(
        "<tr>"
        + "".join(f"<td class='text'>{_shown(v)}</td>" for v in (d.family, d.task, d.fingerprint, d.source))
        + f"<td class='text'>{_revision(d)}</td><td>{_shown(d.samples)}</td></tr>"
        for d in data
    )
    return f"<div class='scroll'><table class='data'><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>"


def _arguments(record: RunRecord) -> str:
    """Return every recorded command-line argument shown, folded under a summary."""
    if not record.cli_args:
        return f"<dt>Recorded arguments</dt><dd>{NOT_RECORDED}</dd>"
    rows = "".join(
        f"<tr><th scope='row' class='text'>{html.escape(k)}</th><td class='text'>{html.escape(v)}</td></tr>"
        for k, v in record.cli_args
    )
    return (
        f"<dt>Recorded arguments</dt><dd><details><summary>{len(record.cli_args)} set</summary>"
        f"<table class='args'><tbody>{rows}</tbody></table></details></dd>"
    )


def run_block(record: RunRecord) -> str:
    """Return one results file's block: its settings and file, then what its run recorded."""
    title = f"{', '.join(settings_of(record.tasks))}: {record.shown_file()}"
    command = (
        f"<pre class='command'><code>{html.escape(record.command)}</code></pre>" if record.command else NOT_RECORDED
    )
    release = "release not recorded" if record.lmms_eval_release is None else _shown(record.lmms_eval_release)
    versions = (
        f"lmms-eval {release} (recorded by lmms-eval: {_shown(record.lmms_eval_version)}, "
        f"git {_shown(record.git_hash)}) · HVCU toolkit {_shown(record.toolkit_version)}"
    )
    items = [
        ("Model", _model_text(record)),
        ("Model identity", _identity_text(record)),
        ("Model arguments", _shown(record.model_args)),
        ("Command line", command),
        ("Versions", versions),
        ("Date", _shown(record.date)),
        ("Tasks", _shown(", ".join(record.tasks))),
    ]
    listing = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in items) + _arguments(record)
    data = f"<h4>Data</h4>{_data_table(record.data)}" if record.data else ""
    return f"<article class='run'><h3>{html.escape(title)}</h3><dl>{listing}</dl>{data}</article>"


def runs_section(records: Sequence[RunRecord]) -> str:
    """Return the "How this run was made" section, one block per results file ('' without any)."""
    if not records:
        return ""
    blocks = "".join(run_block(r) for r in records)
    return f"<section id='{SECTION_ID}'><h2>How this run was made</h2><p class='lead'>{INTRO}</p>{blocks}</section>"
