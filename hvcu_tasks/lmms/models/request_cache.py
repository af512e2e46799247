"""Per-request reply cache of `hvcu_context`: a killed paid run, rerun, pays only for what was in flight.

Each real reply is stored the moment it arrives, keyed by the model identity and the exact request: at the
call of a client with `chat.completions.create` (`openai`, `async_openai`, litellm's shim: the request body
is the key, written and fsync'd before the backend gets the reply), else by the wrapper (the chat messages,
images by the SHA-256 of their bytes, and generation settings; stored as each call of `chunk_size` returns).
The identity (backend, model arguments without credentials or NEUTRAL_ARGS, resolved IDENTITY_ATTRS, the
endpoint without user, password or query) names a private folder `<root>/<digest>/` with `identity.json`.

The rule (no command line is read): every cache is a new run. It resumes the replies of the *unfinished*
runs of its identity and `run=` name that no live process holds, except those of requests a later run has
finished with; a run that finishes also holds the resumed replies it used, so it seals them. So a killed
run's rerun asks only what is missing, and a run after a finished one asks again (a new checkpoint served
under the same name). `reuse=` takes earlier runs' replies on purpose. Records are ASCII JSON lines, one
`os.write` each; a torn last line is skipped with a warning. Errors, blanks and lmms-eval's failure markers
are never stored, and the cache never changes what the backend receives.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import inspect
import json
import logging
import os
import secrets
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from hvcu_tasks.data import jsonio
from hvcu_tasks.data.files import write_atomic
from hvcu_tasks.data.public import is_secret_name, public_url
from hvcu_tasks.lmms.models import cache_runs as runs

log = logging.getLogger("hvcu_tasks")

CACHE_FOLDER = "requests-v2"
"""Subfolder of the toolkit's cache folder ($HVCU_CACHE_DIR) that holds request caches (layout version in the name)."""
LEGACY_FOLDER = "requests-v1"
"""The default root of the layout without runs, next to CACHE_FOLDER (read only with reuse=v1)."""
API_BACKENDS = frozenset({"openai", "async_openai", "litellm", "gemini", "claude", "gpt4v", "reka", "qwen_vl_api"})
"""lmms-eval backends that call a paid API: the cache is on by default for them (and for any `base_url`)."""
NEUTRAL_ARGS = frozenset(
    "num_concurrent num_cpus timeout max_retries retry_backoff_s batch_size max_batch_size device httpx_trust_env "
    "work_dir prefix_aware_queue prefix_hash_chars adaptive_concurrency adaptive_min_concurrency "
    "adaptive_max_concurrency adaptive_target_latency_s adaptive_increase_step adaptive_decrease_factor "
    "adaptive_failure_threshold".split()
)
"""Model arguments that change how requests are sent, never a reply: left out of the model identity."""
IDENTITY_ATTRS = ("model_version", "model", "model_name", "base_url", "pretrained")
"""Attributes of a built lmms-eval model that say which model answers (kept when they are plain values)."""
FAILURE_MARKERS = ("[LMMS_EVAL_REQUEST_FAILED", "[LMMS_EVAL_BUDGET_EXCEEDED]")
"""Texts lmms-eval backends return in place of a reply when a request failed or the token budget ran out."""
WRAPPER_ARGS = frozenset({"cache", "reuse", "run"})
"""The request cache's own model arguments: never part of the model identity."""
ON, OFF = frozenset({"on", "true", "yes", "1"}), frozenset({"off", "false", "no", "0", "none"})


class Uncacheable(TypeError):
    """A request holds something with no stable content identity (it is sent, never cached)."""


class Reply(NamedTuple):
    """A stored reply: its text and the server's finish reason (None when unknown)."""

    text: str
    finish_reason: str | None = None


# ---- settings ----


def cache_setting(value: Any) -> str | Path:
    """Return the `cache` model argument as 'auto' (not given), 'on', 'off' or a folder; raise ValueError otherwise."""
    if value is None:
        return "auto"
    if isinstance(value, bool) or value in (0, 1):
        return "on" if value else "off"
    if not (isinstance(value, str) and value.strip()):
        raise ValueError(f"hvcu_context: cache must be on, off or a folder, got {value!r}")
    word = value.strip().lower()
    if word in ON or word in OFF or word == "auto":
        return "on" if word in ON else "off" if word in OFF else "auto"
    path = Path(value.strip()).expanduser()
    at = next((a for a in (path, *path.parents) if a.is_dir() or a.exists() or a.is_symlink()), path)
    if not at.is_dir() and (at.exists() or at.is_symlink()):
        raise ValueError(
            f"hvcu_context: cannot create the request cache {path}: Not a directory; "
            f"{'it' if at == path else at} exists and is not a folder: give a cache=PATH folder (created when "
            "missing) or cache=off"
        )
    return path


def cache_location(setting: str | Path, api: bool) -> Path | None:
    """Return the request cache's root for a setting, or None when off ('auto': on for API backends only).

    'on' and 'auto' use $HVCU_CACHE_DIR's CACHE_FOLDER; `cache=on` while $HVCU_CACHE_DIR is off is an error.
    """
    from hvcu_tasks.data.validate import cache_root
    from hvcu_tasks.settings import CACHE_DIR_ENV

    if isinstance(setting, Path):
        return setting
    if setting == "off" or (setting == "auto" and not api):
        return None
    root = cache_root()
    if root is None and setting == "on":
        raise ValueError(f"hvcu_context: cache=on, but {CACHE_DIR_ENV} turns the toolkit's caches off; give cache=PATH")
    return None if root is None else root / CACHE_FOLDER


def is_api(backend: str, args: Mapping[str, Any], client: Any = None) -> bool:
    """Whether a backend calls a paid API: an OpenAI client, a known API backend name, or a `base_url` argument."""
    return client is not None or backend in API_BACKENDS or bool(args.get("base_url"))


# ---- identity and keys ----


def image_digest(image: Any) -> str:
    """Return the SHA-256 of a PIL image's content: its source file's bytes when it carries one, else its pixels."""
    from hvcu_tasks.core.schema import ImageRef
    from hvcu_tasks.data.images import SOURCE_ATTR, ImageSource
    from hvcu_tasks.data.validate import image_sha256

    source = getattr(image, SOURCE_ATTR, None)
    if isinstance(source, ImageSource):
        source.key()  # a file gone since the task loaded: an ImageError naming it
        found = image_sha256(ImageRef(None if source.path is None else Path(source.path), source.data))
        if not found:
            raise Uncacheable(f"cannot read {source.describe()}")
        return found
    digest = hashlib.sha256(f"{image.mode} {image.width}x{image.height}\n".encode())
    digest.update(image.tobytes())
    if image.mode in ("P", "PA"):  # the pixels are palette indices: the colours are in the palette
        digest.update(bytes(image.getpalette() or ()))
        digest.update(repr(image.info.get("transparency")).encode())
    return digest.hexdigest()


def canonical(value: Any) -> Any:
    """Return a JSON-ready form of a request part: images become {'image_sha256': ...}; raise Uncacheable otherwise."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise Uncacheable(f"non-finite number {value!r}")
        return value
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise Uncacheable("a mapping with non-text keys")
        return {k: canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if hasattr(value, "tobytes") and hasattr(value, "mode") and hasattr(value, "width"):
        return {"image_sha256": image_digest(value)}
    raise Uncacheable(f"no content identity for a {type(value).__name__}")


def digest(value: Any) -> str:
    """Return the SHA-256 (hex) of a value's canonical JSON (sorted keys, exact text)."""
    text = json.dumps(canonical(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate keeps its own key


def model_identity(
    backend: str, args: Mapping[str, Any], endpoint: str | None = None, resolved: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Return what identifies a model's replies: backend, reply-relevant arguments, resolved attributes, endpoint."""
    kept = {k: v for k, v in args.items() if k not in NEUTRAL_ARGS and k not in WRAPPER_ARGS}
    identity: dict[str, Any] = {"backend": backend, "args": _public(kept)}
    if resolved:
        identity["resolved"] = _public(resolved)
    if endpoint is not None:
        identity["endpoint"] = public_url(endpoint)
    return identity


def built_model_identity(backend: str, args: Mapping[str, Any], model: Any, client: Any = None) -> dict[str, Any]:
    """Return a built model's model_identity (endpoint from its client); a local one's adds the lmms-eval release."""
    from hvcu_tasks.lmms.plugin import installed_lmms_eval

    endpoint = getattr(client, "base_url", None) if client is not None else None
    identity = model_identity(backend, args, None if endpoint is None else str(endpoint), resolved_attributes(model))
    if client is None:
        identity["lmms_eval"] = installed_lmms_eval()
    return identity


def identifies(identity: Mapping[str, Any]) -> bool:
    """Whether an identity names a model beyond its backend (model arguments or resolved attributes)."""
    return bool(identity.get("args") or identity.get("resolved"))


def resolved_attributes(model: Any) -> dict[str, Any]:
    """Return the plain-valued IDENTITY_ATTRS a built model has (a torch module under `model` is left out)."""
    found: dict[str, Any] = {}
    for name in IDENTITY_ATTRS:
        try:
            value = getattr(model, name, None)
        except Exception:  # noqa: BLE001 - a property that fails says nothing about the model
            continue
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip():
            found[name] = value
    return found


def _public(value: Any) -> Any:
    """Return a model argument as JSON without credentials: secret-named keys dropped, URLs stripped."""
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: str(kv[0]))
        return {str(k): _public(v) for k, v in items if not is_secret_name(str(k))}
    if isinstance(value, (list, tuple)):
        return [_public(v) for v in value]
    if isinstance(value, str):
        return public_url(value)
    try:
        return canonical(value)
    except Uncacheable:
        return public_url(str(value))


def keepable(text: Any) -> bool:
    """Whether a reply is worth storing: real, non-blank text that is not an lmms-eval failure marker."""
    return isinstance(text, str) and bool(text.strip()) and not text.startswith(FAILURE_MARKERS)


# ---- the store ----


def read_replies(folder: Path) -> dict[str, Reply]:
    """Return every readable record of a folder's JSONL files; an unreadable line is skipped with a warning."""
    replies: dict[str, Reply] = {}
    for path in sorted(folder.glob("*.jsonl")):
        try:
            lines = path.read_bytes().split(b"\n")
        except OSError as exc:
            log.warning("request cache: cannot read %s (%s); its replies will be asked again", path, exc.strerror)
            continue
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            record = _record(raw)
            if record is not None:
                replies.setdefault(*record)
                continue
            torn = number == len(lines)  # no newline after it: the writer was stopped mid-record
            why = "record cut short (a run killed while writing it)" if torn else "unreadable record"
            log.warning("request cache: %s line %d: %s; ignored (that request will be asked again)", path, number, why)
    return replies


def _record(raw: bytes) -> tuple[str, Reply] | None:
    """Return (key, reply) from one JSONL line, or None when it is not a whole, well-formed record."""
    try:
        data = jsonio.loads(raw)
    except jsonio.JsonReadError:
        return None
    if not isinstance(data, dict):
        return None
    key, text, finish = data.get("key"), data.get("reply"), data.get("finish_reason")
    if not isinstance(key, str) or not keepable(text) or not (finish is None or isinstance(finish, str)):
        return None
    return key, Reply(text, finish)


_EXITING = threading.Event()
"""Set at interpreter exit by an atexit hook registered after the first share's finalizer (so it runs first)."""
_EXIT_HOOKED = threading.Event()


class _Share:
    """This process's share of a run (one rank's folder): its lock, its record file, its counts; ended once."""

    def __init__(self, folder: Path, manifest: dict[str, Any], report: bool) -> None:
        self.folder, self.manifest, self.report = folder, manifest, report
        self.lock = threading.Lock()
        self.lock_fd = self.fd = None
        self.given = self.missing = self.unstored = self.total = 0
        self.raised: str | None = None
        self.carried: dict[str, tuple[Reply, str]] = {}  # resumed replies this run used, with their run
        self.reused: dict[str, int] = {}
        self.sources: dict[str, str] = {}
        self.ended = True

    def open(self) -> bool:
        """Lock the share and start a session (a new record file); False when another process holds it."""
        self.lock_fd = runs.lock(self.folder / "lock")
        if self.lock_fd is None:
            return False
        self.path = self.folder / f"{time.time_ns()}-{os.getpid()}-{secrets.token_hex(4)}.jsonl"
        self.raised, self.ended = None, False
        sessions = int(self.manifest.get("sessions", 0)) + 1
        if self.write_manifest(state="running", pid=os.getpid(), sessions=sessions) or sessions > 1:
            return True
        os.close(self.lock_fd)
        raise OSError(f"cannot write {self.folder / 'run.json'}")

    def write(self, records: list[tuple[str, Reply]]) -> None:
        """Append records (ASCII JSON: any text round-trips) with one os.write and fsync them; the caller locks."""
        lines = [json.dumps({"key": k, "reply": r.text, "finish_reason": r.finish_reason}) + "\n" for k, r in records]
        data = "".join(lines).encode("ascii")
        if self.fd is None:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        while data:
            data = data[os.write(self.fd, data) :]
        os.fsync(self.fd)

    def write_manifest(self, **changes: Any) -> bool:
        """Update and durably rewrite the share's manifest; False (with a warning) when it cannot."""
        self.manifest.update(changes, updated=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        return runs.write_manifest(self.folder, self.manifest)

    def why_unfinished(self) -> str | None:
        """Return why the model phase did not complete (a rerun resumes the run's replies), or None."""
        last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        if self.raised is not None:
            return f"a call raised {self.raised}"
        if _EXITING.is_set() and last is not None:
            return f"the process ended with {type(last).__name__}"
        return None if self.given else "it was given no requests"

    def end(self) -> None:
        """End this share: finished (holding the resumed replies it used) when the model phase completed."""
        with self.lock:
            if self.ended:
                return
            self.ended = True
            why = self.why_unfinished()
            try:
                if why is None and self.carried:
                    self.write([(k, reply) for k, (reply, _run) in self.carried.items()])
                    self.total += len(self.carried)
            except OSError as exc:
                why = f"the resumed replies it used cannot be written ({exc.strerror or exc})"
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
        resumed: dict[str, int] = {}
        for _reply, run in self.carried.values():
            resumed[run] = resumed.get(run, 0) + 1
        counts = {"requests": self.given, "replies": self.total, "resumed": resumed, "reused": dict(self.reused)}
        counts |= {"failed": self.missing, "unstored": self.unstored}
        if not self.write_manifest(state="unfinished" if why else "finished", why=why, **counts) and not why:
            log.warning("request cache: %s is not marked finished: a rerun would resume it (delete it)", self.folder)
        os.close(self.lock_fd)
        run, rank = self.manifest["run"], f"rank {self.manifest['rank']}: " if self.manifest["world_size"] > 1 else ""
        lines = [f"{count} replies reused from run {self.sources[source]}" for source, count in self.reused.items()]
        if why and self.given:
            lines.append(f"run {run} left unfinished ({why}); a rerun resumes its replies")
        elif not why and self.missing:
            without = f"{self.missing} requests without a reply"
            lines.append(f"run {run} finished with {without}; rerun with reuse={run} to ask only those")
        for line in lines if self.report else ():
            print(f"hvcu_context: {rank}{line}", file=sys.stderr)


class RequestCache:
    """One rank's share of a new run of one model identity under `root`; each new reply appended and fsync'd.

    It resumes what the rule allows (module docstring) and, with `reuse`, the named earlier runs (every rank's
    share). The share ends with `end()`, the cache garbage-collected or the process exiting: finished unless a
    call raised (`failed`) or the process ended on an unhandled exception. `run_id` names the run the ranks of
    a launch share (default: agreed_run); `name` (run=) keeps its runs apart from the unnamed ones.
    """

    def __init__(
        self,
        root: Path | str,
        identity: Mapping[str, Any],
        reuse: Any = None,
        rank: int = 0,
        world_size: int = 1,
        report: bool = False,
        name: str | None = None,
        run_id: str | None = None,
    ) -> None:
        """Open (creating it, private) the folder of this identity, read what it resumes and reuses, start a run."""
        self.identity, self.identity_digest = dict(identity), digest(identity)
        self.root, self.name, self.sample = Path(root), name, 0
        self.folder = self.root / self.identity_digest[:32]
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            self.folder.chmod(0o700)  # private even when an earlier run made it with another mode
        except OSError as exc:
            log.warning("request cache: cannot make %s private (%s)", self.folder, exc.strerror or exc)
        card = self.folder / "identity.json"
        if not card.exists():
            write_atomic(card, json.dumps(self.identity, indent=2, sort_keys=True, ensure_ascii=True) + "\n")
        (self.folder / runs.RUNS).mkdir(exist_ok=True, mode=0o700)
        self.earlier = runs.list_runs(self.folder)
        self.source_names: dict[str, str] = {}
        sources = self._sources(runs.reuse_setting(reuse), reuse)
        self.replies, self.origin = self._resumable()
        self.loaded, self.resumed, self.resumed_runs = (
            len(self.replies),
            bool(self.replies),
            [*dict.fromkeys(self.origin.values())],
        )
        self.run_id, shares = (run_id, world_size) if run_id else runs.agreed_run(rank, world_size)
        folder = self.folder / runs.RUNS / self.run_id / f"rank-{rank}"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        manifest = {"run": self.run_id, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "created_s": time.time()}
        manifest |= {"name": name, "rank": rank, "world_size": world_size, "ranks": shares}
        self._share = _Share(folder, manifest, report)
        self._share.sources = self.source_names
        if not self._share.open():
            raise OSError(f"cannot open {folder}: another process holds it")
        self.path = self._share.path
        self.reused: dict[str, tuple[Reply, str]] = {}
        for source, folders in sources:
            for key, reply in _replies_of(folders).items():
                if key not in self.replies:
                    self.reused.setdefault(key, (reply, source))
        self._lock = threading.Lock()
        self._broken = False
        self._warned: set[str] = set()
        self._finalizer = weakref.finalize(self, self._share.end)
        if not _EXIT_HOOKED.is_set():  # after weakref's own exit hook, so this one runs first (atexit is LIFO)
            atexit.register(_EXITING.set)
            _EXIT_HOOKED.set()

    # -- runs --

    def _resumable(self) -> tuple[dict[str, Reply], dict[str, str]]:
        """Return the replies this run resumes and each one's run: those of unfinished runs of its name (newest
        first) that no run finished after them holds."""
        todo = [r for r in self.earlier if r["status"] == "unfinished" and r["name"] == self.name]
        replies: dict[str, Reply] = {}
        origin: dict[str, str] = {}
        later = [
            r for r in self.earlier if todo and r["status"] == "finished" and r["created_s"] > todo[0]["created_s"]
        ]
        answered = [(r["created_s"], _replies_of(r["shares"]).keys()) for r in later]
        for run in reversed(todo):
            sealed = set().union(*(keys for when, keys in answered if when > run["created_s"]))
            for key, reply in _replies_of(run["shares"]).items():
                if key not in sealed and key not in replies:
                    replies[key], origin[key] = reply, run["run"]
        return replies, origin

    def start_lines(self) -> list[str]:
        """Return what the output says at start: the run, what it resumes, which earlier replies it uses."""
        first = f"new run {self.run_id} (earlier runs' replies are not used)"
        if self.resumed:
            first = (
                f"run {self.run_id} resumes unfinished run {', '.join(self.resumed_runs)} ({self.loaded} replies; "
                "only the requests not there are asked)"
            )
        lines = [f"hvcu_context: request cache {self.folder}: {first}; cache=off: no cache"]
        if self.source_names:
            counts = {n: sum(1 for _r, source in self.reused.values() if source == n) for n in self.source_names}
            used = ", ".join(f"{shown}: {counts[n]} replies" for n, shown in self.source_names.items())
            return [*lines, f"hvcu_context: reuse: requests this run has no reply for are answered from {used}"]
        others = [m for m in self.earlier if m["status"] != "live" and m["run"] not in self.resumed_runs]
        parts = [f"{len(others)} earlier runs of this model (newest: {runs.describe(others[-1])})"] if others else []
        parts += [f"replies stored before runs existed ({runs.LEGACY})"] if self._legacy_folders() else []
        return lines + [
            f"hvcu_context: {' and '.join(parts)} are NOT reused; reuse=all takes them, reuse=RUN[+RUN] some "
            f"(list: hvcu cache list {self.root})"
        ] * bool(parts)

    def _legacy_folders(self) -> list[Path]:
        """Return the folders holding this identity's replies stored before runs existed."""
        folders = [self.folder] + [self.root.parent / LEGACY_FOLDER / self.folder.name] * (
            self.root.name == CACHE_FOLDER
        )
        return [f for f in folders if f.is_dir() and any(f.glob("*.jsonl"))]

    def _sources(self, wanted: tuple[str, ...], value: Any) -> list[tuple[str, list[Path]]]:
        """Return (name, folders) of the earlier replies `reuse` asks for, newest run first (its reply wins; the
        layout before runs last); an unknown name is a one-line error naming the runs there are."""
        by_id = {m["run"]: m for m in reversed(self.earlier)}
        legacy = self._legacy_folders()
        named = [n for n in wanted if n != "all"]
        unknown = [n for n in named if n not in by_id and not (n == runs.LEGACY and legacy)]
        if unknown:
            known = [runs.describe(m) for m in by_id.values()]
            known += [f"{runs.LEGACY} (replies stored before runs existed)"] if legacy else []
            listed = f"its runs: {', '.join(known)}" if known else "it has no earlier runs"
            raise ValueError(
                f"hvcu_context: reuse={value}: no run {unknown[0]} of this model in {self.folder}; {listed}"
            )
        names = [*by_id, *([runs.LEGACY] if legacy else [])] if "all" in wanted else named
        order = [*by_id, runs.LEGACY]
        for name in sorted(names, key=order.index):
            found = by_id.get(name, {"run": name, "status": "replies stored before runs existed"})
            self.source_names[name] = (
                f"{runs.LEGACY} ({found['status']})" if name not in by_id else runs.describe(found)
            )
        return [
            (n, legacy if n not in by_id else [Path(s["folder"]) for s in by_id[n]["shares"]])
            for n in self.source_names
        ]

    def reopen(self) -> bool:
        """Continue this cache's ended share in a new session; False (nothing more is stored) when it cannot."""
        share = self._share
        if not share.ended:
            return True
        if not share.open():
            self.warn("reopen", f"run {self.run_id} is open elsewhere now; later replies are not cached")
            return False
        self.path, self._finalizer = share.path, weakref.finalize(self, share.end)
        return True

    # -- accounting --

    def tally(self, texts: list[Any]) -> None:
        """Count requests given to the model and those without a real reply (reported when the run ends)."""
        with self._lock:
            self._share.given += len(texts)
            self._share.missing += sum(1 for t in texts if not keepable(t))

    def failed(self, exc: BaseException) -> None:
        """End the share now as unfinished because a call raised: a rerun (or `reopen()`) continues it."""
        self._share.raised = type(exc).__name__
        self.end()

    def end(self) -> None:
        """End this share now (also done when the cache is garbage-collected or the process exits)."""
        self._finalizer()

    close = end

    # -- replies --

    def key(self, request: Any, sample: int = 0) -> str | None:
        """Return the key of a request (its `sample`-th copy in a call) under this identity, or None (uncached)."""
        try:
            return digest([self.identity_digest, request] + ([{"sample": sample}] if sample else []))
        except Uncacheable as exc:
            log.debug("request cache: request not cached (%s)", exc)
        except Exception as exc:  # noqa: BLE001 - the cache never stops a request
            self.warn("key", f"a request is sent uncached: its key cannot be made ({type(exc).__name__}: {exc})")
        return None

    def warn(self, kind: str, message: str) -> None:
        """Log a warning about this cache once per kind of trouble."""
        with self._lock:
            if kind in self._warned:
                return
            self._warned.add(kind)
        log.warning("request cache %s: %s", self.folder, message)

    def get(self, key: str | None) -> Reply | None:
        """Return the stored reply for a key (this run's or one it resumes, else a reused run's), or None."""
        reply = self.replies.get(key) if key is not None else None
        with self._lock:
            if reply is not None and key in self.origin:
                self._share.carried.setdefault(key, (reply, self.origin[key]))
            found = self.reused.get(key) if key is not None and reply is None else None
            if found is not None:
                self._share.reused[found[1]] = self._share.reused.get(found[1], 0) + 1
        return reply if found is None else found[0]

    def put(self, key: str | None, text: Any, finish_reason: str | None = None) -> bool:
        """Store a real reply durably (written and fsync'd before returning); return whether it was stored.

        Never raises: a reply that cannot be stored is reported once and left out.
        """
        if key is None or not keepable(text):
            return False
        reply, share = Reply(text, finish_reason if isinstance(finish_reason, str) else None), self._share
        try:
            with share.lock:
                if share.ended:
                    raise RuntimeError(f"run {self.run_id} has ended")
                if not self._broken:
                    share.write([(key, reply)])
                    share.total += key not in self.replies
                    self.replies.setdefault(key, reply)
                    return True
        except OSError as exc:
            self._broken = True
            self.warn(
                "write",
                f"cannot write {share.path} ({exc.strerror or exc}); later replies are not cached "
                "(a killed run pays for them again)",
            )
        except Exception as exc:  # noqa: BLE001 - the cache never changes what the backend receives
            self.warn(
                type(exc).__name__,
                f"a reply is not cached ({type(exc).__name__}: {exc}; file {share.path}); a rerun asks for it again",
            )
        with self._lock:
            share.unstored += 1
        return False


def _replies_of(shares: list[Any]) -> dict[str, Reply]:
    """Return the replies of a run's shares (folders, or `list_runs` rows); the first share's reply wins a tie."""
    replies: dict[str, Reply] = {}
    for share in shares:
        for key, reply in read_replies(Path(share["folder"] if isinstance(share, Mapping) else share)).items():
            replies.setdefault(key, reply)
    return replies


# ---- client backends: cached at their client's call ----

_FINISH_REASONS = frozenset({"stop", "length", "content_filter"})
"""Finish reasons a replayed completion carries as stored (any other, e.g. a provider's own word, reads 'stop')."""


def stored_completion(reply: Reply, model: Any) -> Any:
    """Return a chat completion carrying a stored reply (no token usage: nothing was paid for it)."""
    from openai.types.chat import ChatCompletion

    finish = reply.finish_reason if reply.finish_reason in _FINISH_REASONS else "stop"
    choice = {"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": reply.text}}
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    head = {"id": "hvcu-request-cache", "object": "chat.completion", "created": 0, "model": str(model or "")}
    return ChatCompletion.model_validate({**head, "choices": [choice], "usage": usage})


def _completion_reply(response: Any) -> tuple[Any, str | None]:
    """Return (text, finish reason) of a completion's first choice; (None, None) for a tool call or another shape."""
    try:
        message, finish = response.choices[0].message, response.choices[0].finish_reason
        if finish == "tool_calls" or getattr(message, "tool_calls", None):
            return None, None  # answered by the backend's next request: not replayable as text
        return message.content, finish if isinstance(finish, str) else None
    except Exception:  # noqa: BLE001 - a reply of an unknown shape is not stored
        return None, None


def chat_client(model: Any) -> Any:
    """Return the client a backend sends each request through: any `chat.completions.create` that can be replaced."""
    client = getattr(model, "client", None)
    completions = getattr(getattr(client, "chat", None), "completions", None)
    create = getattr(completions, "create", None)
    try:
        completions.create = create  # replaceable? (set to itself)
    except (AttributeError, TypeError):
        return None
    return client if callable(create) else None


def hook_client(client: Any, cache: RequestCache) -> bool:
    """Make `client.chat.completions.create` answer from the cache and store each real reply as it arrives.

    Return False (the client left as it was) when its `create` cannot be replaced.
    """
    import openai

    completions = client.chat.completions
    create: Callable[..., Any] = completions.create

    def lookup(args: tuple, kwargs: dict) -> tuple[str | None, Any]:
        if args or kwargs.get("stream") or kwargs.get("n") not in (None, 1):
            return None, None  # only a call for one plain reply is cached
        key = cache.key(kwargs, cache.sample)
        reply = cache.get(key)
        try:
            return key, None if reply is None else stored_completion(reply, kwargs.get("model"))
        except Exception as exc:  # noqa: BLE001 - the cache never stops a request: ask the server instead
            cache.warn("replay", f"a stored reply cannot be replayed ({type(exc).__name__}: {exc}); asked again")
            return key, None

    def store(key: str | None, response: Any) -> None:
        if key is not None:
            cache.put(key, *_completion_reply(response))

    async def cached_create_async(*args: Any, **kwargs: Any) -> Any:
        """AsyncCompletions.create through the request cache (stored off the event loop)."""
        key, stored = lookup(args, kwargs)
        if stored is not None:
            return stored
        response = await create(*args, **kwargs)
        await asyncio.to_thread(store, key, response)
        return response

    def cached_create(*args: Any, **kwargs: Any) -> Any:
        """Completions.create through the request cache."""
        key, stored = lookup(args, kwargs)
        if stored is not None:
            return stored
        response = create(*args, **kwargs)
        if inspect.isawaitable(response):  # an async create we could not tell from its signature
            cache.warn("awaitable", "the client's create returns an awaitable; its replies are not cached")
            return response
        store(key, response)
        return response

    is_async = isinstance(client, openai.AsyncOpenAI) or inspect.iscoroutinefunction(inspect.unwrap(create))
    try:
        completions.create = cached_create_async if is_async else cached_create
    except (AttributeError, TypeError):
        return False
    return True
