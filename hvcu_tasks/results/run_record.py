"""How one results file's run was made: model, recorded command line, versions and data, as lmms-eval wrote them
(secrets redacted, URLs made public, recorded paths shown from the runs folders).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from hvcu_tasks.data import provenance
from hvcu_tasks.data.provenance import CONFIG_KEY, LMMS_EVAL_KEY, MODEL_KEY, VERSION_KEY, location_text
from hvcu_tasks.data.public import is_secret_name, name_problem, public_urls
from hvcu_tasks.results.diagnostics import family_of
from hvcu_tasks.results.errors import ReportError, checked_text

REDACTED = "[REDACTED]"
OUTSIDE = "<outside the runs folder>"
"""How a path that has no base name of its own (`/`) or is the home folder is shown."""
ABSOLUTE_PATH = re.compile(r"(?<![^\s=,:'\"(\[])/(?!/)[^\s,:'\"()\[\]<>]+")
"""An absolute path inside a text: a `/` at the start or after a space, `=`, `,`, `:`, a quote or a bracket (so
never the `//` of a URL), up to a space, comma, colon, quote or bracket."""
NOISE_PREFIXES = ("wandb_", "swanlab_", "hf_hub_")
"""Recorded arguments of logging integrations: they do not change what is asked or scored, so they are not shown."""
COMMAND_OPTIONS = tuple(
    "model model_args tasks num_fewshot batch_size limit gen_kwargs system_instruction include_path".split()
)
"""The options of the rebuilt command line, in this order, when recorded and set."""
COMMAND_FLAGS = ("apply_chat_template", "fewshot_as_multiturn", "predict_only", "log_samples")
"""Switches of the rebuilt command line, given when recorded as true."""
DEFAULT_SEED = [0, 1234, 1234, 1234]
"""lmms-eval's default --seed: the rebuilt command names another one only."""


@dataclasses.dataclass(frozen=True)
class TaskData:
    """One HVCU task's data as its results file recorded it (None: not recorded, an older file)."""

    task: str
    family: str | None
    kind: str | None
    """Where the data came from: hub, local or smoke (only the hub has a revision)."""
    fingerprint: str | None
    source: str | None
    revision: str | None
    samples: int | None


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """How one results file's run was made; None where the file does not record it."""

    file: Path
    model: str | None
    """lmms-eval's --model (the backend)."""
    model_args: str | None
    """--model_args as recorded, secrets redacted."""
    model_name: str | None
    model_backend: str | None
    tasks: tuple[str, ...]
    cli_args: tuple[tuple[str, str], ...]
    """The recorded command-line arguments (resolved_cli_args) as text, unset ones and logging integrations left out."""
    command: str | None
    """An lmms-eval command line rebuilt from the recorded arguments (None without a model)."""
    lmms_eval_version: str | None
    git_hash: str | None
    date: str | None
    toolkit_version: str | None
    data: tuple[TaskData, ...]
    model_identity: dict[str, Any] | None = None
    """The identity of the model hvcu_context served the tasks with, secrets redacted (None: no wrapper)."""
    lmms_eval_release: str | None = None
    """The installed lmms-eval release the toolkit recorded (lmms_eval_version is its folder's `branch@commit`)."""
    roots: tuple[Path, ...] = ()
    """The runs folders given to `hvcu report`: the paths above are shown from them (shown_path)."""

    def shown_file(self) -> str:
        """Return the results file's path as a published page shows it (from the runs folder)."""
        return shown_path(os.path.abspath(self.file), self.roots) if self.roots else str(self.file)


def redacted(text: str) -> str:
    """Return `key=value,...` text with secret-named values replaced by [REDACTED] and every URL made public."""
    parts = []
    for part in text.split(","):
        name, eq, value = part.partition("=")
        if eq and is_secret_name(name) and value:
            part = f"{name}={REDACTED}"
        parts.append(public_urls(part))
    return ",".join(parts)


def shown_path(path: str, roots: Sequence[Path]) -> str:
    """Return an absolute path as a published page shows it: from the innermost runs folder holding it (by that
    folder's name), else its base name (OUTSIDE for `/` or the home folder); relative paths as they are."""
    if not roots or not path.startswith("/"):
        return path
    normal = PurePosixPath(os.path.normpath(path))
    holders = []
    for root in roots:
        base = Path(os.path.abspath(root))
        base = base.parent if base.is_file() else base  # a results file given: its folder
        for folder in {PurePosixPath(base), PurePosixPath(os.path.realpath(base))}:
            if normal == folder or folder in normal.parents:
                holders.append((len(folder.parts), base.name or OUTSIDE, normal.relative_to(folder).as_posix()))
    if holders:
        _depth, name, rest = max(holders)
        return name if rest == "." else f"{name}/{rest}"
    if not normal.name or normal == PurePosixPath(os.path.expanduser("~")):
        return OUTSIDE
    return normal.name


def shown_paths(text: str, roots: Sequence[Path]) -> str:
    """Return a text with every absolute path in it shown as shown_path shows it (unchanged without runs folders)."""
    return ABSOLUTE_PATH.sub(lambda found: shown_path(found.group(), roots), text) if roots else text


def _placed(value: Any, roots: Sequence[Path]) -> Any:
    """Return a JSON value with the absolute paths in its texts shown as shown_path shows them."""
    if isinstance(value, str):
        return shown_paths(value, roots)
    if isinstance(value, Mapping):
        return {k: _placed(v, roots) for k, v in value.items()}
    if isinstance(value, list):
        return [_placed(v, roots) for v in value]
    return value


def _text(value: Any, where: str, field: str) -> str | None:
    """Return a recorded text field (None when absent), refused unless it is one line of text."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ReportError(f"{where}: field {field}: expected text, got {type(value).__name__}")
    return checked_text(value, f"{where}: field {field}", "recorded value")


def _object(value: Any, where: str, field: str) -> Mapping[str, Any]:
    """Return a recorded object field ({} when absent), refused when it is not an object."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ReportError(f"{where}: field {field}: expected an object, got {type(value).__name__}")
    return value


def _is_set(value: Any) -> bool:
    """Whether a recorded argument was given: not null, empty or false."""
    return value is not None and value is not False and value != "" and value != []


def _arg_text(value: Any) -> str:
    """Return a recorded argument's value as text: one-line text as it is (redacted), anything else as JSON."""
    if isinstance(value, str) and name_problem(value) is None:
        return redacted(value)
    return json.dumps(redacted(value) if isinstance(value, str) else value, ensure_ascii=False)


def shown_args(cli: Mapping[str, Any], where: str) -> tuple[tuple[str, str], ...]:
    """Return the recorded arguments worth showing, as (name, text): unset ones and logging integrations left out."""
    return tuple(
        (_text(name, where, "config.resolved_cli_args") or "", _arg_text(value))
        for name, value in cli.items()
        if _is_set(value) and not str(name).startswith(NOISE_PREFIXES)
    )


def _option_text(value: Any) -> str:
    """Return an option's value as a command line takes it (a list of seeds comma-joined)."""
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # lmms-eval records --limit 2 as 2.0
    return redacted(value) if isinstance(value, str) else str(value)


def command_line(options: Mapping[str, Any]) -> str | None:
    """Return the lmms-eval command line of the recorded options (None without a model), shell-quoted."""
    if not options.get("model"):
        return None
    argv = ["lmms-eval"]
    for name in COMMAND_OPTIONS:
        if _is_set(options.get(name)):
            argv += [f"--{name}", _option_text(options[name])]
    if options.get("offset"):
        argv += ["--offset", _option_text(options["offset"])]
    if options.get("seed") not in (None, DEFAULT_SEED):
        argv += ["--seed", _option_text(options["seed"])]
    argv += [f"--{flag}" for flag in COMMAND_FLAGS if options.get(flag) is True]
    if _is_set(options.get("output_path")):
        argv += ["--output_path", str(options["output_path"])]
    return shlex.join(argv)


def task_data(task: str, config: Any, where: str) -> TaskData:
    """Return one task's recorded data: fingerprint, source and revision (None where not recorded)."""
    try:
        identity = provenance.config_identity(config)
    except ValueError as exc:
        raise ReportError(f"{where}: {task}: {exc}") from exc
    if identity is None:
        return TaskData(task, family_of(task), None, None, None, None, None)
    field = f"configs.{task}.metadata.{CONFIG_KEY}"
    samples = identity.get("samples")
    return TaskData(
        task=task,
        family=_text(identity.get("family"), where, f"{field}.family") or family_of(task),
        kind=_text(identity.get("kind"), where, f"{field}.kind"),
        fingerprint=_text(identity["fingerprint"], where, f"{field}.fingerprint"),
        source=checked_text(location_text(identity), f"{where}: field {field}.location", "recorded value"),
        revision=_text(identity.get("revision"), where, f"{field}.revision"),
        samples=samples if isinstance(samples, int) and not isinstance(samples, bool) else None,
    )


def recorded_metadata(configs: Mapping[str, Any], key: str, where: str) -> str | None:
    """Return what the tasks' configs recorded under `metadata.<key>`, several tasks' values joined (None: none)."""
    values = {
        _text(config["metadata"].get(key), where, f"configs.{task}.metadata.{key}")
        for task, config in configs.items()
        if isinstance(config, Mapping) and isinstance(config.get("metadata"), Mapping)
    } - {None}
    return ", ".join(sorted(values)) or None  # type: ignore[arg-type]


def _json_value(value: Any, where: str, field: str) -> Any:
    """Return a recorded JSON value with secret-named fields redacted and URLs made public; refuse text over lines."""
    if isinstance(value, str):
        return public_urls(checked_text(value, f"{where}: field {field}", "recorded value"))
    if isinstance(value, Mapping):
        return {
            checked_text(str(k), f"{where}: field {field}", "recorded name"): (
                REDACTED if is_secret_name(str(k)) and v not in (None, "") else _json_value(v, where, f"{field}.{k}")
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_json_value(v, where, f"{field}[{i}]") for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    raise ReportError(f"{where}: field {field}: expected a JSON value, got {type(value).__name__}")


def recorded_model_identity(configs: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """Return the model identity the tasks' configs recorded (None without one); tasks that disagree are refused."""
    found: dict[str, dict[str, Any]] = {}
    for task, config in sorted(configs.items()):
        metadata = config.get("metadata") if isinstance(config, Mapping) else None
        if not isinstance(metadata, Mapping) or metadata.get(MODEL_KEY) is None:
            continue
        field = f"configs.{task}.metadata.{MODEL_KEY}"
        found[task] = _json_value(dict(_object(metadata[MODEL_KEY], where, field)), where, field)
    if not found:
        return None
    (first, identity), *others = found.items()
    for task, other in others:
        if other != identity:
            raise ReportError(
                f"{where}: {first} and {task} recorded different model identities ({MODEL_KEY}); "
                "one results file is one model's run: fix the file"
            )
    return identity


def run_record(results: Mapping[str, Any], file: Path, roots: Sequence[Path] = ()) -> RunRecord:
    """Return how the run of a parsed results file was made (paths shown from `roots`), refusing a mistyped field."""
    where = str(file)
    config = _object(results.get("config"), where, "config")
    cli = _object(config.get("resolved_cli_args"), where, "config.resolved_cli_args")
    configs = _object(results.get("configs"), where, "configs")
    tasks = tuple(sorted(configs)) or tuple(sorted(_object(results.get("results"), where, "results")))
    model_args = _text(config.get("model_args"), where, "config.model_args")
    cli_model_args = _text(cli.get("model_args"), where, "config.resolved_cli_args.model_args")
    options = dict(cli) or {
        "model": config.get("model"),
        "model_args": model_args,
        "tasks": ",".join(tasks),
        "batch_size": config.get("batch_size"),
        "limit": config.get("limit"),
        "gen_kwargs": config.get("gen_kwargs"),
    }
    if cli_model_args is not None:
        options["model_args"] = cli_model_args
    identity = recorded_model_identity(configs, where)
    date = results.get("date")  # older lmms-eval releases write it as a timestamp
    data = [task_data(t, configs[t], where) for t in tasks if t.startswith("hvcu_bench") and t in configs]
    return RunRecord(
        file=file,
        model=_text(config.get("model"), where, "config.model"),
        model_args=None if model_args is None else shown_paths(redacted(model_args), roots),
        model_name=_text(results.get("model_name"), where, "model_name"),
        model_backend=_text(config.get("model_backend"), where, "config.model_backend"),
        tasks=tuple(_text(t, where, "configs") or "" for t in tasks),
        cli_args=tuple((name, shown_paths(text, roots)) for name, text in shown_args(cli, where)),
        command=command_line(_placed(options, roots)),
        lmms_eval_version=_text(results.get("lmms_eval_version"), where, "lmms_eval_version"),
        git_hash=_text(results.get("git_hash"), where, "git_hash"),
        date=_text(str(date) if isinstance(date, (int, float)) and not isinstance(date, bool) else date, where, "date"),
        toolkit_version=recorded_metadata(configs, VERSION_KEY, where),
        data=tuple(
            d if d.source is None else dataclasses.replace(d, source=shown_paths(d.source, roots)) for d in data
        ),
        model_identity=None if identity is None else _placed(identity, roots),
        lmms_eval_release=recorded_metadata(configs, LMMS_EVAL_KEY, where),
        roots=tuple(roots),
    )
