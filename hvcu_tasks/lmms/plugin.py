"""lmms-eval entry point (`manifests`): this package's models, and small adapters over lmms-eval's own methods.

Each adapter wraps one lmms-eval class once, after checking the wrapped methods' parameters (else an error naming
the supported releases, and that adapter is left out). What each does: docs/lmms-eval.md and docs/evaluation.md.
"""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvcu_tasks import settings

TASKS_DIR: Path = Path(__file__).resolve().parent / "tasks"
SUPPORTED_LMMS_EVAL = ">=0.7.3"
"""The lmms-eval releases this package works with (pyproject.toml's requirement; tests/test_lmms_versions.py)."""
TESTED_LMMS_EVAL = ("0.7.3",)
"""The releases CI runs the end-to-end smoke against (the lowest and the highest supported on PyPI)."""
EXPECTED_SIGNATURE = ("self", "include_path", "include_defaults")
"""Parameters of lmms-eval's TaskManager.initialize_tasks, which the task hook wraps."""

log = logging.getLogger("hvcu_tasks")


@dataclass(frozen=True)
class Resolution:
    """What lmms-eval's registry last resolved a model id to: simple or chat class, routed or why not ('')."""

    model_id: str
    simple: bool
    routed: bool
    why: str = ""


RESOLVED: dict[str, Resolution] = {}
"""The latest Resolution per canonical model id, set by the route hook (also its `_hvcu_resolved` attribute)."""


class IncompatibleLmmsEval(RuntimeError):
    """Raised when lmms-eval no longer has a method this plugin wraps; the message names the supported releases."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"{problem}; {supported_line()}")


def installed_lmms_eval() -> str:
    """Return the installed lmms-eval version ("unknown" when its metadata cannot be read)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lmms_eval")
    except PackageNotFoundError:
        return "unknown"


def supported_line(installed: str | None = None) -> str:
    """Return `hvcu-toolkit supports lmms-eval >=X (CI-tested: ...); installed: V`."""
    tested = ", ".join(TESTED_LMMS_EVAL)
    return (
        f"hvcu-toolkit supports lmms-eval {SUPPORTED_LMMS_EVAL} (CI-tested: {tested}); "
        f"installed: {installed or installed_lmms_eval()}"
    )


def version_problem(installed: str) -> str | None:
    """Return why an lmms-eval version is outside the supported range, or None when it is inside (or unreadable)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        if SpecifierSet(SUPPORTED_LMMS_EVAL).contains(Version(installed), prereleases=True):
            return None
    except InvalidVersion:
        return None
    return (
        f"lmms-eval {installed} is older than this toolkit supports: its HVCU tasks cannot run (older releases "
        f"resolve task data paths from the working folder and cannot run the context setting's chat rounds); "
        f"{supported_line(installed)}. Install a supported release: pip install 'lmms-eval{SUPPORTED_LMMS_EVAL}'"
    )


def untested_release(installed: str) -> str | None:
    """Return a warning when lmms-eval `installed` is newer than every CI-tested release, else None."""
    from packaging.version import InvalidVersion, Version

    newest = TESTED_LMMS_EVAL[-1]
    try:
        if Version(installed) <= Version(newest):
            return None
    except InvalidVersion:
        return None
    return (
        f"lmms-eval {installed} is newer than the newest release hvcu-toolkit was tested with ({newest}); it is "
        f"expected to work. If an HVCU task fails or its numbers differ from a run on {newest}, pin the tested "
        f"release (pip install 'lmms-eval=={newest}') and report it as an hvcu-toolkit issue naming lmms-eval "
        f"{installed} (docs/lmms-eval.md, 'Supported lmms-eval releases', says how to run the release checks on it)"
    )


_warned: set[str] = set()
"""Warnings this process has logged already (the entry point may load more than once)."""


def _wrap(owner: type, methods: dict[str, tuple[tuple[str, ...], Callable]], advice: str) -> None:
    """Replace each `owner.NAME` once by a method calling `hook(original, self, ...)`, after checking every original
    takes its parameters.

    `methods`: NAME -> (the parameters the original must take, hook); a changed one raises IncompatibleLmmsEval
    naming it and `advice` (what the user gets until the plugin is updated), before anything is replaced.
    """
    todo = {}
    for name, (expected, hook) in methods.items():
        original = getattr(owner, name, None)
        if getattr(original, "_hvcu_hook", False):
            continue
        params = tuple(inspect.signature(original).parameters) if callable(original) else None
        if params != expected:
            raise IncompatibleLmmsEval(
                f"lmms_eval {owner.__name__}.{name}{params} no longer matches {expected}; {advice}"
            )
        todo[name] = (original, hook)
    for name, (original, hook) in todo.items():
        method = functools.wraps(original)(_calling(hook, original))
        method._hvcu_hook = True
        setattr(owner, name, method)


def _calling(hook: Callable, original: Callable) -> Callable:
    """Return a function that calls `hook(original, *args, **kwargs)`."""

    def method(*args: Any, **kwargs: Any) -> Any:
        return hook(original, *args, **kwargs)

    return method


def _with_our_tasks(include_path: str | list[str] | None) -> list[str]:
    """Return the include paths with this package's task folder appended once."""
    paths = [include_path] if isinstance(include_path, str) else list(include_path or [])
    if not any(Path(p).resolve() == TASKS_DIR for p in paths if p):
        paths.append(str(TASKS_DIR))
    return paths


def install_task_hook() -> None:
    """Make lmms-eval's TaskManager index TASKS_DIR after its own tasks and any --include_path (idempotent)."""
    from lmms_eval.tasks import TaskManager

    def initialize_tasks(original, self, include_path=None, include_defaults=True):  # noqa: ANN001, ANN202
        return original(self, include_path=_with_our_tasks(include_path), include_defaults=include_defaults)

    advice = f"run lmms-eval with --include_path {TASKS_DIR} and set {settings.NO_AUTO_TASKS_ENV}=1"
    _wrap(TaskManager, {"initialize_tasks": (EXPECTED_SIGNATURE, initialize_tasks)}, advice)


SERVING: weakref.WeakSet = weakref.WeakSet()
"""The hvcu_context wrappers alive in this process (each registers itself when built; models/wrapper.py)."""


def serve(wrapper: Any) -> None:
    """Register a wrapper whose `task_dict` and `model_identity` the dump_config hook reads."""
    SERVING.add(wrapper)


def served_identity(task: str, dataset: Any) -> dict[str, Any] | None:
    """Return a copy of the model identity of the wrapper whose task_dict holds this very dataset, or None."""
    if dataset is None:
        return None
    for wrapper in list(SERVING):
        if getattr(wrapper, "task_dict", {}).get(task) is dataset and getattr(wrapper, "model_identity", None):
            return copy.deepcopy(wrapper.model_identity)
    return None


def dataset_identity(docs: Any) -> dict[str, Any]:
    """Return the data identity of a task's document table ({} when it carries none, e.g. another task's)."""
    from hvcu_tasks.core.payloads import IDENTITY_KEY
    from hvcu_tasks.data.provenance import decode

    if docs is None or IDENTITY_KEY not in getattr(docs, "column_names", ()) or not len(docs):
        return {}
    identities = set(docs.select_columns([IDENTITY_KEY])[IDENTITY_KEY])
    if len(identities) > 1:  # one task reads one load; several would be a bug worth seeing in the file
        return {"error": "documents of one task carry different data identities"}
    return decode(identities.pop()) if identities and next(iter(identities)) else {}


def install_identity_hook() -> None:
    """Make an HVCU task's dumped config (`configs.<task>.metadata`) record its data, the versions and the model."""
    from lmms_eval.api.task import ConfigurableTask

    from hvcu_tasks.data import provenance as p

    def dump_config(original, self):  # noqa: ANN001, ANN202
        config = original(self)
        dataset, split = getattr(self, "dataset", None), getattr(self.config, "test_split", None)
        try:
            docs = dataset[split] if dataset is not None and split is not None else None
        except (KeyError, TypeError):
            docs = None
        identity = dataset_identity(docs)
        if identity:
            metadata = dict(config.get("metadata") or {})
            metadata[p.CONFIG_KEY] = identity
            metadata[p.VERSION_KEY] = p.toolkit_version()
            metadata[p.LMMS_EVAL_KEY] = installed_lmms_eval()
            model = served_identity(str(getattr(self.config, "task", "")), dataset)
            config["metadata"] = metadata if model is None else {**metadata, p.MODEL_KEY: model}
        return config

    advice = "results files will not record the data an HVCU task read until hvcu_tasks/lmms/plugin.py is updated"
    _wrap(ConfigurableTask, {"dump_config": (("self",), dump_config)}, advice)


_END_LINE: list[str] = []
"""The line this lmms-eval command ends with, exit status 1, once its results files are written (empty: none)."""


def end_after_results(line: str | None) -> bool:
    """Make this lmms-eval command exit with status 1 and `line` once it has written its results files (None: don't).

    False when lmms-eval's EvaluationTracker no longer has the methods the hook wraps (the caller decides then).
    Only rank 0, which writes the files, exits there, after the barrier the other ranks wait at (they end with 0).
    """
    _END_LINE.clear()
    if line is None:
        return True
    try:
        install_results_hook()
    except IncompatibleLmmsEval as exc:
        log.error("%s", exc)
        return False
    _END_LINE.append(line)
    return True


def _end_now() -> None:
    """Raise the SystemExit that ends the command with the pending line (after the barrier of a data-parallel run)."""
    line = _END_LINE.pop()
    _END_LINE.clear()
    for wrapper in list(SERVING):  # their request caches' end lines (else printed at exit) come before the line
        end = getattr(wrapper, "end_run", None)
        if callable(end):
            end()
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()
    for stream in (sys.stdout, sys.stderr):  # what lmms-eval printed stays above the line, even piped
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    raise SystemExit(line)


def install_results_hook() -> None:
    """Make a pending end line end the command after the last file lmms-eval writes (results, samples, hub card)."""
    from lmms_eval.loggers.evaluation_tracker import EvaluationTracker

    def written(tracker: Any) -> None:
        pushes = getattr(tracker, "push_results_to_hub", False) or getattr(tracker, "push_samples_to_hub", False)
        if _END_LINE and not tracker._hvcu_pending and not pushes:
            _end_now()

    def save_results_aggregated(original, self, results, samples, datetime_str):  # noqa: ANN001, ANN202
        got = original(self, results, samples, datetime_str)
        configs = results.get("configs", {}) if isinstance(results, dict) else {}
        self._hvcu_pending = set(configs) if samples is not None else set()
        written(self)
        return got

    def save_results_samples(original, self, task_name, samples):  # noqa: ANN001, ANN202
        got = original(self, task_name, samples)
        if hasattr(self, "_hvcu_pending"):
            self._hvcu_pending.discard(task_name)
            written(self)
        return got

    def recreate_metadata_card(original, self):  # noqa: ANN001, ANN202
        try:
            return original(self)
        finally:
            if _END_LINE:
                _end_now()

    methods = {
        "save_results_aggregated": (("self", "results", "samples", "datetime_str"), save_results_aggregated),
        "save_results_samples": (("self", "task_name", "samples"), save_results_samples),
        "recreate_metadata_card": (("self",), recreate_metadata_card),
    }
    advice = (
        "a run of hvcu_context whose every request failed ends before lmms-eval writes its results until "
        "hvcu_tasks/lmms/plugin.py is updated"
    )
    _wrap(EvaluationTracker, methods, advice)


def install_image_hook() -> None:
    """Make lmms-eval's ChatMessages → OpenAI messages methods send HVCU images as their own bytes (idempotent)."""
    from lmms_eval.protocol import ChatMessages

    from hvcu_tasks.data.images import api_messages

    def method(original, self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        built = api_messages(self.messages)
        return built if built is not None else original(self, *args, **kwargs)

    methods = {
        "to_openai_messages": (("self", "video_kwargs", "pass_video_url"), method),
        "to_qwen3_vl_openai_messages": (("self", "video_kwargs"), method),
    }
    advice = (
        "API backends will get lmms-eval's own re-encoding of every HVCU image (larger requests, alpha dropped) "
        "until hvcu_tasks/lmms/plugin.py is updated"
    )
    _wrap(ChatMessages, methods, advice)


_IMAGE_HOOK_CHECKED = False


def ensure_image_hook() -> None:
    """Install the image hook once, if the entry point could not (lmms_eval.protocol was still importing)."""
    global _IMAGE_HOOK_CHECKED
    if not _IMAGE_HOOK_CHECKED:
        _IMAGE_HOOK_CHECKED = True
        _logged(install_image_hook)


def install_token_hook() -> None:
    """Make a task whose hub dataset asks for a token none is configured for end the run in one line (exit 1).

    Left alone, lmms-eval logs the hub client's LocalTokenNotFoundError and exits 0 without writing any result.
    """
    from huggingface_hub.errors import LocalTokenNotFoundError
    from lmms_eval.api.task import ConfigurableTask

    def download(original, self, dataset_kwargs=None):  # noqa: ANN001, ANN202
        try:
            return original(self, dataset_kwargs)
        except Exception as exc:  # lmms-eval retries the download: its RetryError holds the last attempt's
            last = getattr(exc, "last_attempt", None)
            if isinstance(last.exception() if last is not None else exc, LocalTokenNotFoundError):
                task, dataset = self.config.task, self.config.dataset_path
                raise SystemExit(
                    f"hvcu: error: lmms-eval task {task} reads the hub dataset {dataset} with a Hugging Face "
                    "token (its YAML sets dataset_kwargs: token: True) and none is configured: run `hf auth "
                    "login` or set HF_TOKEN, then rerun (nothing was asked of the model)"
                ) from None
            raise

    _wrap(ConfigurableTask, {"download": (("self", "dataset_kwargs"), download)}, "set HF_TOKEN before a run")


def install_route_hook() -> None:
    """Make lmms-eval's registry hand out routing.route's subclasses, recording each resolution in RESOLVED."""
    from lmms_eval.models.registry_v2 import ModelRegistryV2

    def get_model_class(original, self, model_name, force_simple=False):  # noqa: ANN001, ANN202
        cls = original(self, model_name, force_simple=force_simple)
        model_id = self.resolve(model_name, force_simple=force_simple).model_id
        got, why = cls, f"{settings.NO_ROUND_ROUTING_ENV}=1 turns routing off"
        if not settings.current().no_round_routing:  # routing is imported only when it is on
            from hvcu_tasks.lmms.models.routing import route, unrouted_reason

            got = route(cls, model_id)
            why = "" if getattr(got, "_hvcu_routed", False) else unrouted_reason(cls, model_id)
        RESOLVED[model_id] = Resolution(model_id, bool(getattr(cls, "is_simple", True)), not why, why)
        return got

    advice = (
        "--model vllm runs the context setting one document at a time and the Hugging Face backends need "
        "--model hvcu_context --model_args inner=<model>,... until hvcu_tasks/lmms/plugin.py is updated"
    )
    _wrap(ModelRegistryV2, {"get_model_class": (("self", "model_name", "force_simple"), get_model_class)}, advice)
    ModelRegistryV2.get_model_class._hvcu_resolved = RESOLVED  # type: ignore[attr-defined]


def _logged(install: Callable[[], None]) -> None:
    """Run one hook's installer, logging an incompatible lmms-eval as an error instead of raising it."""
    try:
        install()
    except IncompatibleLmmsEval as exc:
        log.error("%s", exc)


def manifests() -> list:
    """Entry point for `lmms_eval.models`: this package's model manifests (and the hooks)."""
    from lmms_eval.models.registry_v2 import ModelManifest

    installed = installed_lmms_eval()
    if problem := version_problem(installed):
        log.error("%s", problem)
    elif (note := untested_release(installed)) and note not in _warned:
        _warned.add(note)
        log.warning("%s", note)
    if not settings.current().no_auto_tasks:
        _logged(install_task_hook)
    _logged(install_identity_hook)
    _logged(install_token_hook)
    _logged(install_route_hook)  # also when opted out: it then records what was resolved (require_native's message)
    try:
        _logged(install_image_hook)
    except ImportError:  # lmms_eval.protocol is mid-import (it imports the models package): hooked at first use
        log.debug("HVCU-Bench: image hook deferred until the first document image", exc_info=True)
    return [
        ModelManifest(model_id="hvcu_replay", chat_class_path="hvcu_tasks.lmms.models.replay.ReplayModel"),
        ModelManifest(model_id="hvcu_context", chat_class_path="hvcu_tasks.lmms.models.wrapper.ContextWrapper"),
    ]
