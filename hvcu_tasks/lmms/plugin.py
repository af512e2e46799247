"""lmms-eval entry point: registers this package's models and makes `--tasks hvcu_bench` work with no flag.

lmms-eval 0.7.3 discovers plugins only through the `lmms_eval.models` entry-point group, which it loads
before building its TaskManager. While loaded, this module wraps `TaskManager.initialize_tasks` so that
the package's task folder is indexed after lmms-eval's own tasks and any `--include_path` (those win a
name clash). Set HVCU_NO_AUTO_TASKS=1 to opt out and pass `--include_path $(hvcu tasks-dir)` instead.

It also wraps `ChatMessages.to_openai_messages` and `to_qwen3_vl_openai_messages` (the openai, async_openai
and vllm chat backends) so that an HVCU image is sent as its file's own bytes and media type instead of a
PNG re-encoding; any other message (video, audio, other tasks' images) goes through lmms-eval unchanged.
When lmms-eval loads this entry point while `lmms_eval.protocol` is still importing, the first
document image a hook asks for (`documents.document_image`, through `ensure_image_hook`) installs that hook instead.

It also wraps `ModelRegistryV2.get_model_class` (what `lmms_eval.models.get_model` calls when the evaluator
builds the model) so that the chat classes of `vllm`, `qwen2_5_vl`, `qwen3_vl` and `llava_hf` come back as
subclasses that run HVCU multi-round requests as whole rounds (models/routing.py); nothing is imported until a
model is resolved. Set HVCU_NO_ROUND_ROUTING=1 to opt out. Every resolution is recorded (`Resolution`: simple or
chat class, routed or why not) on the hook itself, where the context tasks' `require_native` reads it through
lmms-eval (`context.route_record`), so an exported task folder's copy of the context hooks reads the same record.

When every request of an `hvcu_context` run failed, `end_after_results` wraps lmms-eval's EvaluationTracker so the
command exits with status 1 and one line right after lmms-eval has written the run's results files (lmms-eval itself
exits 0 then); see docs/evaluation.md, "a run whose every request failed".

Supported lmms-eval releases: SUPPORTED_LMMS_EVAL (pyproject.toml's requirement). An older release, or a wrapped
method whose signature changed, is logged as an error that names the supported range and the installed release; a
release newer than the newest CI-tested one (TESTED_LMMS_EVAL) is logged once as a warning that says how to report it.
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
OPENAI_MESSAGE_METHODS: dict[str, tuple[str, ...]] = {
    "to_openai_messages": ("self", "video_kwargs", "pass_video_url"),
    "to_qwen3_vl_openai_messages": ("self", "video_kwargs"),
}
"""lmms-eval's ChatMessages methods that build OpenAI messages (openai, async_openai, vllm), with their parameters."""
"""Set to 1 to leave lmms-eval's backends unrouted (models/routing.py)."""
REGISTRY_SIGNATURE = ("self", "model_name", "force_simple")
"""Parameters of lmms-eval's ModelRegistryV2.get_model_class, which the route hook wraps."""

log = logging.getLogger("hvcu_tasks")


@dataclass(frozen=True)
class Resolution:
    """What lmms-eval's registry last resolved a model id to: simple or chat class, routed or why not."""

    model_id: str
    simple: bool
    routed: bool
    why: str = ""
    """Why the class is not routed ('' when it is)."""


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
        found = Version(installed)
    except InvalidVersion:
        return None
    if SpecifierSet(SUPPORTED_LMMS_EVAL).contains(found, prereleases=True):
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


def warn_once(message: str) -> None:
    """Log `message` as a warning the first time this process sees it."""
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)


def _with_our_tasks(include_path: str | list[str] | None) -> list[str]:
    """Return the include paths with this package's task folder appended once."""
    paths = [include_path] if isinstance(include_path, str) else list(include_path or [])
    if not any(Path(p).resolve() == TASKS_DIR for p in paths if p):
        paths.append(str(TASKS_DIR))
    return paths


def check_signature(original: Any, expected: tuple[str, ...], name: str, advice: str) -> None:
    """Raise IncompatibleLmmsEval naming `name`, its parameters and `advice` unless `original` takes `expected`."""
    params = tuple(inspect.signature(original).parameters) if callable(original) else None
    if params != expected:
        raise IncompatibleLmmsEval(f"lmms_eval {name}{params} no longer matches {expected}; {advice}")


def install_task_hook() -> None:
    """Wrap lmms-eval's TaskManager.initialize_tasks to also index TASKS_DIR (idempotent)."""
    from lmms_eval.tasks import TaskManager

    original = TaskManager.initialize_tasks
    if getattr(original, "_hvcu_hook", False):
        return
    check_signature(
        original,
        EXPECTED_SIGNATURE,
        "TaskManager.initialize_tasks",
        f"run lmms-eval with --include_path {TASKS_DIR} and set {settings.NO_AUTO_TASKS_ENV}=1",
    )

    def initialize_tasks(self, include_path=None, include_defaults=True):  # noqa: ANN001, ANN202
        return original(self, include_path=_with_our_tasks(include_path), include_defaults=include_defaults)

    initialize_tasks._hvcu_hook = True  # type: ignore[attr-defined]
    initialize_tasks.__wrapped__ = original  # type: ignore[attr-defined]
    TaskManager.initialize_tasks = initialize_tasks


SERVING: weakref.WeakSet = weakref.WeakSet()
"""The hvcu_context wrappers alive in this process (each registers itself when built; models/wrapper.py)."""


def serve(wrapper: Any) -> None:
    """Register a wrapper whose `task_dict` and `model_identity` the dump_config hook reads."""
    SERVING.add(wrapper)


def served_identity(task: str, dataset: Any) -> dict[str, Any] | None:
    """Return a copy of the model identity of the wrapper that serves a task's documents, or None.

    lmms-eval hands each task's dataset to the model's task_dict before it dumps the configs: the wrapper
    whose task_dict holds this very dataset under the task's name serves the task.
    """
    if dataset is None:
        return None
    for wrapper in list(SERVING):
        found = getattr(wrapper, "task_dict", {}).get(task)
        if found is dataset and getattr(wrapper, "model_identity", None):
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
    """Wrap lmms-eval's ConfigurableTask.dump_config so an HVCU task's config records the data it read.

    The config lands in the results file under `configs.<task>.metadata` (beside dataset_path and the
    rest of the task's definition), so the data identity never shows up as a row of lmms-eval's table.
    The toolkit's version goes beside it (`hvcu_toolkit_version`), so does the installed lmms-eval release
    (`hvcu_lmms_eval_version`: lmms-eval's own `lmms_eval_version` is the git state of its folder), and for a task
    served through hvcu_context the served model's identity (`hvcu_model_identity`: lmms-eval dumps the configs
    after building the model, before any request; under data parallelism rank 0's file holds rank 0's wrapper's).
    """
    from lmms_eval.api.task import ConfigurableTask

    from hvcu_tasks.data.provenance import (
        CONFIG_KEY,
        LMMS_EVAL_KEY,
        MODEL_KEY,
        VERSION_KEY,
        lmms_eval_release,
        toolkit_version,
    )

    original = ConfigurableTask.dump_config
    if getattr(original, "_hvcu_hook", False):
        return

    def dump_config(self):  # noqa: ANN001, ANN202
        config = original(self)
        dataset = getattr(self, "dataset", None)
        split = getattr(self.config, "test_split", None)
        try:
            docs = dataset[split] if dataset is not None and split is not None else None
        except (KeyError, TypeError):
            docs = None
        identity = dataset_identity(docs)
        if identity:
            metadata = dict(config.get("metadata") or {})
            metadata[CONFIG_KEY] = identity
            metadata[VERSION_KEY] = toolkit_version()
            metadata[LMMS_EVAL_KEY] = lmms_eval_release()
            model = served_identity(str(getattr(self.config, "task", "")), dataset)
            if model is not None:
                metadata[MODEL_KEY] = model
            config["metadata"] = metadata
        return config

    dump_config._hvcu_hook = True  # type: ignore[attr-defined]
    dump_config.__wrapped__ = original  # type: ignore[attr-defined]
    ConfigurableTask.dump_config = dump_config


RESULTS_METHODS: dict[str, tuple[str, ...]] = {
    "save_results_aggregated": ("self", "results", "samples", "datetime_str"),
    "save_results_samples": ("self", "task_name", "samples"),
    "recreate_metadata_card": ("self",),
}
"""lmms-eval's EvaluationTracker methods that write a run's files, with their parameters (the end-of-run hook)."""

_END_LINE: list[str] = []
"""The line this lmms-eval command ends with, exit status 1, once its results files are written (empty: none)."""


def end_after_results(line: str | None) -> bool:
    """Make this lmms-eval command exit with status 1 and `line` once it has written its results files (None: don't).

    False when lmms-eval's EvaluationTracker no longer has the methods the hook wraps (the caller decides then).
    Rank 0 writes the files, so only rank 0 exits there: it first waits at the barrier lmms-eval's command line would
    have waited at after writing them, so the other ranks, waiting there, go on and end normally (exit 0) while the
    launcher (accelerate launch, torchrun) reports rank 0's status.
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
    """Wrap lmms-eval's EvaluationTracker so a pending end line (end_after_results) ends the command after its files.

    The files: the results file, then with --log_samples one samples file per task, then with a hub push the
    metadata card; the command ends after the last of them that this run writes. Idempotent.
    """
    from lmms_eval.loggers.evaluation_tracker import EvaluationTracker

    todo = {}
    for name, expected in RESULTS_METHODS.items():
        original = getattr(EvaluationTracker, name, None)
        if getattr(original, "_hvcu_hook", False):
            continue
        check_signature(
            original,
            expected,
            f"EvaluationTracker.{name}",
            "a run of hvcu_context whose every request failed ends before lmms-eval writes its results until "
            "hvcu_tasks/lmms/plugin.py is updated",
        )
        todo[name] = original

    def pushes(tracker: Any) -> bool:
        return bool(getattr(tracker, "push_results_to_hub", False) or getattr(tracker, "push_samples_to_hub", False))

    def written(tracker: Any) -> None:
        if _END_LINE and not tracker._hvcu_pending and not pushes(tracker):
            _end_now()

    def hooked(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def method(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            got = original(self, *args, **kwargs)
            if name == "save_results_aggregated":
                bound = inspect.signature(original).bind(self, *args, **kwargs)
                results, samples = bound.arguments.get("results"), bound.arguments.get("samples")
                configs = results.get("configs", {}) if isinstance(results, dict) else {}
                self._hvcu_pending = set(configs) if samples is not None else set()
                written(self)
            elif name == "save_results_samples" and hasattr(self, "_hvcu_pending"):
                bound = inspect.signature(original).bind(self, *args, **kwargs)
                self._hvcu_pending.discard(bound.arguments.get("task_name"))
                written(self)
            return got

        @functools.wraps(original)
        def last(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            try:
                return original(self, *args, **kwargs)
            finally:
                if _END_LINE:
                    _end_now()

        chosen = last if name == "recreate_metadata_card" else method
        chosen._hvcu_hook = True  # type: ignore[attr-defined]
        return chosen

    for name, original in todo.items():
        setattr(EvaluationTracker, name, hooked(name, original))


def _sending_own_bytes(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap one ChatMessages → OpenAI messages method: HVCU images as their own bytes, else the original."""
    from hvcu_tasks.data.images import api_messages

    @functools.wraps(original)
    def method(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        built = api_messages(self.messages)
        return built if built is not None else original(self, *args, **kwargs)

    method._hvcu_hook = True  # type: ignore[attr-defined]
    return method


def install_image_hook() -> None:
    """Wrap lmms-eval's ChatMessages → OpenAI message methods so HVCU images travel as their own bytes (idempotent).

    Both methods give the same messages for text and images (the Qwen3-VL one differs only for video).
    """
    from lmms_eval.protocol import ChatMessages

    todo = {}
    for name, expected in OPENAI_MESSAGE_METHODS.items():
        original = getattr(ChatMessages, name, None)
        if getattr(original, "_hvcu_hook", False):
            continue
        check_signature(
            original,
            expected,
            f"ChatMessages.{name}",
            "API backends will get lmms-eval's own re-encoding of every HVCU image (larger requests, alpha "
            "dropped) until hvcu_tasks/lmms/plugin.py is updated",
        )
        todo[name] = original
    for name, original in todo.items():
        setattr(ChatMessages, name, _sending_own_bytes(original))


_IMAGE_HOOK_CHECKED = False


def ensure_image_hook() -> None:
    """Install the image hook once, if the entry point could not (lmms_eval.protocol was still importing)."""
    global _IMAGE_HOOK_CHECKED
    if _IMAGE_HOOK_CHECKED:
        return
    _IMAGE_HOOK_CHECKED = True
    try:
        install_image_hook()
    except IncompatibleLmmsEval as exc:
        log.error("%s", exc)


def token_line(task: str, dataset: str) -> str:
    """Return the one line that refuses a task whose hub dataset asks for a token when none is configured."""
    return (
        f"hvcu: error: lmms-eval task {task} reads the hub dataset {dataset} with a Hugging Face token (its YAML sets "
        "dataset_kwargs: token: True) and none is configured: run `hf auth login` or set HF_TOKEN, then rerun "
        "(nothing was asked of the model)"
    )


def install_token_hook() -> None:
    """Wrap lmms-eval's ConfigurableTask.download so a task whose hub dataset asks for a token none is configured
    for ends the command in one line (exit 1) before the model is asked anything (idempotent). Left alone, lmms-eval
    logs the hub client's LocalTokenNotFoundError and exits 0 without writing any result, other tasks' included; a
    dataset already in the cache still loads without a token, as before."""
    from huggingface_hub.errors import LocalTokenNotFoundError
    from lmms_eval.api.task import ConfigurableTask

    original = ConfigurableTask.download
    if getattr(original, "_hvcu_hook", False):
        return
    check_signature(original, ("self", "dataset_kwargs"), "ConfigurableTask.download", "set HF_TOKEN before a run")

    @functools.wraps(original)
    def download(self, dataset_kwargs=None):  # noqa: ANN001, ANN202
        try:
            return original(self, dataset_kwargs)
        except Exception as exc:  # lmms-eval retries the download: its RetryError holds the last attempt's error
            last = getattr(exc, "last_attempt", None)
            if isinstance(last.exception() if last is not None else exc, LocalTokenNotFoundError):
                raise SystemExit(token_line(str(self.config.task), str(self.config.dataset_path))) from None
            raise

    download._hvcu_hook = True  # type: ignore[attr-defined]
    ConfigurableTask.download = download


def install_route_hook() -> None:
    """Wrap lmms-eval's ModelRegistryV2.get_model_class so routed backends come back as routing.route's subclass.

    Idempotent. The routing module is imported only when a model is resolved, and HVCU_NO_ROUND_ROUTING=1
    also turns it off for models resolved after it is set. Every resolution is recorded in RESOLVED.
    """
    from lmms_eval.models.registry_v2 import ModelRegistryV2

    original = ModelRegistryV2.get_model_class
    if getattr(original, "_hvcu_hook", False):
        return
    check_signature(
        original,
        REGISTRY_SIGNATURE,
        "ModelRegistryV2.get_model_class",
        "--model vllm runs the context setting one document at a time and the Hugging Face backends need "
        "--model hvcu_context --model_args inner=<model>,... until hvcu_tasks/lmms/plugin.py is updated",
    )

    @functools.wraps(original)
    def get_model_class(self, model_name, force_simple=False):  # noqa: ANN001, ANN202
        cls = original(self, model_name, force_simple=force_simple)
        model_id = self.resolve(model_name, force_simple=force_simple).model_id
        simple = bool(getattr(cls, "is_simple", True))
        if settings.current().no_round_routing:
            why = f"{settings.NO_ROUND_ROUTING_ENV}=1 turns routing off"
            RESOLVED[model_id] = Resolution(model_id, simple, False, why)
            return cls
        from hvcu_tasks.lmms.models.routing import route, unrouted_reason

        got = route(cls, model_id)
        why = "" if getattr(got, "_hvcu_routed", False) else unrouted_reason(cls, model_id)
        RESOLVED[model_id] = Resolution(model_id, simple, not why, why)
        return got

    get_model_class._hvcu_hook = True  # type: ignore[attr-defined]
    get_model_class._hvcu_resolved = RESOLVED  # type: ignore[attr-defined]
    ModelRegistryV2.get_model_class = get_model_class


def manifests() -> list:
    """Entry point for `lmms_eval.models`: this package's model manifests (and the task hook)."""
    from lmms_eval.models.registry_v2 import ModelManifest

    installed = installed_lmms_eval()
    problem = version_problem(installed)
    if problem:
        log.error("%s", problem)
    elif note := untested_release(installed):
        warn_once(note)
    if not settings.current().no_auto_tasks:
        try:
            install_task_hook()
        except IncompatibleLmmsEval as exc:
            log.error("%s", exc)
    install_identity_hook()
    try:
        install_token_hook()
    except IncompatibleLmmsEval as exc:
        log.error("%s", exc)
    try:  # installed even when opted out: it then only records what was resolved (for require_native's message)
        install_route_hook()
    except IncompatibleLmmsEval as exc:
        log.error("%s", exc)
    try:
        install_image_hook()
    except IncompatibleLmmsEval as exc:
        log.error("%s", exc)
    except ImportError:  # lmms_eval.protocol is mid-import (it imports the models package): hooked at first use
        log.debug("HVCU-Bench: image hook deferred until the first document image", exc_info=True)
    return [
        ModelManifest(model_id="hvcu_replay", chat_class_path="hvcu_tasks.lmms.models.replay.ReplayModel"),
        ModelManifest(model_id="hvcu_context", chat_class_path="hvcu_tasks.lmms.models.wrapper.ContextWrapper"),
    ]
