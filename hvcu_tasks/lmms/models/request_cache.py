"""Per-request reply cache of `hvcu_context`: a killed paid run, rerun, pays only for what was in flight.

Each real reply is stored (fsync'd) as it arrives, keyed by the model identity and the exact request: at a client's
`chat.completions.create` (openai, async_openai, litellm), else by the wrapper. Every cache is a new run that
resumes the unfinished runs' replies no later finished run holds; a run that finishes seals the replies it used.
The rule, `reuse=` and `run=`: docs/evaluation.md, "A killed paid run resumes"; the runs on disk: cache_runs.py.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import inspect
import json
import logging
import math
import os
import sys
import threading
import time
import weakref
from collections import Counter
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
    if word in ON | OFF | {"auto"}:
        return "on" if word in ON else "off" if word in OFF else "auto"
    path = Path(value.strip()).expanduser()
    at = next((a for a in (path, *path.parents) if a.exists() or a.is_symlink()), path)
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


def _content(value: Any) -> Any:
    """Return what stands for a non-JSON request part in its key: an image's {'image_sha256': ...}; else Uncacheable."""
    if hasattr(value, "tobytes") and hasattr(value, "mode") and hasattr(value, "width"):
        return {"image_sha256": image_digest(value)}
    raise Uncacheable(f"no content identity for a {type(value).__name__}")


def digest(value: Any) -> str:
    """Return the SHA-256 (hex) of a value's canonical JSON (sorted keys, exact text, images by their content)."""
    text = json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_content
    )
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
    if value is None or isinstance(value, (bool, int)) or (isinstance(value, float) and math.isfinite(value)):
        return value
    return public_url(str(value))


def keepable(text: Any) -> bool:
    """Whether a reply is worth storing: real, non-blank text that is not an lmms-eval failure marker."""
    return isinstance(text, str) and bool(text.strip()) and not text.startswith(FAILURE_MARKERS)


# ---- the store ----


def read_replies(*folders: Path | str) -> dict[str, Reply]:
    """Return every readable record of the folders' JSONL files (the first wins a tie); a bad line is skipped with a
    warning."""
    replies: dict[str, Reply] = {}
    for path in [p for folder in folders for p in sorted(Path(folder).glob("*.jsonl"))]:
        try:
            lines = path.read_bytes().split(b"\n")
        except OSError as exc:
            log.warning("request cache: cannot read %s (%s); its replies will be asked again", path, exc.strerror)
            continue
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                data = jsonio.loads(raw)
            except jsonio.JsonReadError:
                data = None
            record = data if isinstance(data, dict) else {}
            key, text, finish = record.get("key"), record.get("reply"), record.get("finish_reason")
            if isinstance(key, str) and keepable(text) and isinstance(finish, (str, type(None))):
                replies.setdefault(key, Reply(text, finish))
                continue
            torn = number == len(lines)  # no newline after it: the writer was stopped mid-record
            why = "record cut short (a run killed while writing it)" if torn else "unreadable record"
            log.warning("request cache: %s line %d: %s; ignored (that request will be asked again)", path, number, why)
    return replies


def _replies_of(run: Mapping[str, Any]) -> dict[str, Reply]:
    """Return the replies of a run (a `list_runs` row): every rank's share."""
    return read_replies(*(share["folder"] for share in run["shares"]))


_OPEN: weakref.WeakSet[RequestCache] = weakref.WeakSet()
"""The caches whose share is open in this process (ended at exit if not before)."""


@atexit.register
def _end_at_exit() -> None:
    """End every share still open at interpreter exit (unfinished when the process ends on an unhandled exception)."""
    for cache in list(_OPEN):
        cache.end(at_exit=True)


class RequestCache:
    """One rank's share of a new run of one model identity under `root`; each new reply appended and fsync'd.

    It resumes what the rule allows (module docstring) and, with `reuse`, the named earlier runs (every rank's
    share). The share ends with `end()`, the cache garbage-collected or the process exiting: finished unless a
    call raised (`failed`) or the process ended on an unhandled exception. `run_id` names the run the ranks of
    a launch share (default: cache_runs.agreed_run); `name` (run=) keeps its runs apart from the unnamed ones.
    """

    ended = True  # until the share is opened

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
        self.root, self.name, self.sample, self.report = Path(root), name, 0, report
        self.folder = self.root / self.identity_digest[:32]
        (self.folder / runs.RUNS).mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            self.folder.chmod(0o700)  # private even when an earlier run made it with another mode
        except OSError as exc:
            log.warning("request cache: cannot make %s private (%s)", self.folder, exc.strerror or exc)
        card = self.folder / "identity.json"
        if not card.exists():
            write_atomic(card, json.dumps(self.identity, indent=2, sort_keys=True) + "\n")
        self.earlier = runs.list_runs(self.folder)
        chosen = self._chosen(runs.reuse_setting(reuse))
        self.replies, self.origin = self._resumable()
        self.resumed, self.resumed_runs = bool(self.origin), [*dict.fromkeys(self.origin.values())]
        self.reused: dict[str, tuple[Reply, str]] = {}
        for run in chosen:  # oldest first: the newest run's reply wins
            self.reused |= {k: (r, run["run"]) for k, r in _replies_of(run).items() if k not in self.replies}
        self.sources = {run["run"]: runs.describe(run) for run in reversed(chosen)}
        self.run_id, shares = (run_id, world_size) if run_id else runs.agreed_run(rank, world_size)
        self.share = self.folder / runs.RUNS / self.run_id / f"rank-{rank}"
        self.share.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path, self.manifest = self.share / "replies.jsonl", {"run": self.run_id, "created_s": time.time()}
        self.manifest |= {"name": name, "rank": rank, "world_size": world_size, "ranks": shares, "sessions": 0}
        self._lock, self._io = threading.Lock(), threading.Lock()  # counts and lookups; the file (held while fsync'd)
        self._fd, self._warned, self.broken = None, set(), False
        self.given = self.missing = self.stored = 0
        self.carried: dict[str, tuple[Reply, str]] = {}  # resumed replies this run used, with their run
        self.taken: Counter[str] = Counter()  # replies taken from each reused run
        if not self._open():
            raise OSError(f"cannot open {self.share}: another process holds it")

    def _resumable(self) -> tuple[dict[str, Reply], dict[str, str]]:
        """Return the replies this run resumes and each one's run: those of unfinished runs of its name (the newest
        wins) that no run finished after them holds."""
        replies: dict[str, tuple[Reply, str]] = {}
        for run in self.earlier:  # oldest first
            if run["status"] == "unfinished" and run["name"] == self.name:
                replies |= {key: (reply, run["run"]) for key, reply in _replies_of(run).items()}
            elif run["status"] == "finished" and replies:
                for key in _replies_of(run).keys() & replies.keys():
                    del replies[key]
        return {k: r for k, (r, _run) in replies.items()}, {k: run for k, (_r, run) in replies.items()}

    def _chosen(self, wanted: tuple[str, ...]) -> list[dict[str, Any]]:
        """Return the earlier runs `reuse` names, oldest first; an unknown name is a one-line error naming the runs."""
        unknown = [n for n in wanted if n != "all" and n not in {run["run"] for run in self.earlier}]
        if unknown:
            listed = ", ".join(runs.describe(run) for run in reversed(self.earlier)) or "none"
            raise ValueError(
                f"hvcu_context: reuse={'+'.join(wanted)}: no run {unknown[0]} of this model in {self.folder}; "
                f"its runs: {listed}"
            )
        return [run for run in self.earlier if "all" in wanted or run["run"] in wanted]

    def start_lines(self) -> list[str]:
        """Return what the output says at start: the run, what it resumes, and (without reuse) what it does not use."""
        first = f"new run {self.run_id} (earlier runs' replies are not used)"
        if self.resumed:
            first = (
                f"run {self.run_id} resumes unfinished run {', '.join(self.resumed_runs)} ({len(self.origin)} "
                "replies; only the requests not there are asked)"
            )
        lines = [f"hvcu_context: request cache {self.folder}: {first}; cache=off: no cache"]
        others = [run for run in self.earlier if run["status"] != "live" and run["run"] not in self.resumed_runs]
        if others and not self.sources:
            lines.append(
                f"hvcu_context: {len(others)} earlier runs of this model (newest: {runs.describe(others[-1])}) are "
                f"NOT reused; reuse=all takes them, reuse=RUN[+RUN] some (list: hvcu cache list {self.root})"
            )
        return lines

    # -- the share: open, write, end --

    def _open(self) -> bool:
        """Lock the share and start a session of it; False when another process holds it."""
        self._lock_fd = runs.lock(self.share / "lock")
        if self._lock_fd is None:
            return False
        self.manifest["sessions"] += 1
        if not self._write_manifest(state="running") and self.manifest["sessions"] == 1:
            os.close(self._lock_fd)
            raise OSError(f"cannot write {self.share / 'run.json'}")
        self.raised, self.ended = None, False
        _OPEN.add(self)
        return True

    def reopen(self) -> bool:
        """Continue this cache's ended share in a new session; False (nothing more is stored) when it cannot."""
        if self.ended and not self._open():
            self.warn("reopen", f"run {self.run_id} is open elsewhere now; later replies are not cached")
            return False
        return True

    def _write(self, records: list[tuple[str, Reply]]) -> None:
        """Append records as ASCII JSON lines with one os.write and fsync them (the caller holds _io); once a write
        failed (a partial line may be there) nothing more is written."""
        if self.broken:
            raise OSError(f"an earlier write to {self.path} failed")
        lines = [json.dumps({"key": key, "reply": r.text, "finish_reason": r.finish_reason}) for key, r in records]
        data = "".join(line + "\n" for line in lines).encode()
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            while data:
                data = data[os.write(self._fd, data) :]
            os.fsync(self._fd)
        except OSError:
            self.broken = True
            raise

    def _write_manifest(self, **changes: Any) -> bool:
        """Update and durably rewrite the share's manifest (`run.json`); False (with a warning) when it cannot."""
        self.manifest.update(changes)
        try:
            write_atomic(self.share / "run.json", json.dumps(self.manifest, indent=2) + "\n", durable=True)
        except OSError as exc:
            log.warning("request cache: cannot write %s (%s)", self.share / "run.json", exc.strerror or exc)
            return False
        return True

    def _why_unfinished(self, at_exit: bool) -> str | None:
        """Return why the model phase did not complete (a rerun resumes the run's replies), or None."""
        last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        if self.raised is not None:
            return f"a call raised {self.raised}"
        if at_exit and last is not None:
            return f"the process ended with {type(last).__name__}"
        return None if self.given else "it was given no requests"

    def tally(self, texts: list[Any]) -> None:
        """Count requests given to the model and those without a real reply (reported when the run ends)."""
        with self._lock:
            self.given += len(texts)
            self.missing += sum(1 for t in texts if not keepable(t))

    def failed(self, exc: BaseException) -> None:
        """End the share now as unfinished because a call raised: a rerun (or `reopen()`) continues it."""
        self.raised = type(exc).__name__
        self.end()

    def end(self, at_exit: bool = False) -> None:
        """End the share's session (also at garbage collection and exit): finished, writing the resumed replies it
        used (it holds them now), or unfinished."""
        if self.ended:  # (also a cache whose __init__ raised)
            return
        with self._io:
            if self.ended:
                return
            self.ended, why = True, self._why_unfinished(at_exit)
            with self._lock:
                carried = dict(self.carried)
            try:
                if why is None and carried:
                    self._write([(k, reply) for k, (reply, _run) in carried.items()])
                    self.stored += len(carried)
            except OSError as exc:
                why = f"the resumed replies it used cannot be written ({exc.strerror or exc})"
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
        _OPEN.discard(self)
        counts = {"requests": self.given, "replies": self.stored, "failed": self.missing, "reused": self.taken}
        counts["resumed"] = Counter(run for _reply, run in carried.values())
        if not self._write_manifest(state="unfinished" if why else "finished", why=why, **counts) and not why:
            log.warning("request cache: %s is not marked finished: a rerun would resume it (delete it)", self.share)
        os.close(self._lock_fd)
        run, rank = self.run_id, f"rank {self.manifest['rank']}: " if self.manifest["world_size"] > 1 else ""
        lines = [f"{count} replies reused from run {self.sources[source]}" for source, count in self.taken.items()]
        if why and self.given:
            lines.append(f"run {run} left unfinished ({why}); a rerun resumes its replies")
        elif not why and self.missing:
            without = f"{self.missing} requests without a reply"
            lines.append(f"run {run} finished with {without}; rerun with reuse={run} to ask only those")
        for line in lines if self.report else ():
            print(f"hvcu_context: {rank}{line}", file=sys.stderr)

    __del__ = close = end

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
        reply, found = self.replies.get(key), None if key in self.replies else self.reused.get(key)
        with self._lock:
            if key in self.origin:
                self.carried.setdefault(key, (reply, self.origin[key]))
            if found is not None:
                self.taken[found[1]] += 1
        return reply if found is None else found[0]

    def put(self, key: str | None, text: Any, finish_reason: str | None = None) -> bool:
        """Store a real reply durably (written and fsync'd before returning); return whether it was stored.

        Never raises: a reply that cannot be stored is reported once and left out.
        """
        if key is None or not keepable(text):
            return False
        reply = Reply(text, finish_reason if isinstance(finish_reason, str) else None)
        try:
            with self._io:
                if self.ended:
                    raise RuntimeError(f"run {self.run_id} has ended")
                self._write([(key, reply)])
                self.stored += key not in self.replies
                self.replies.setdefault(key, reply)
                return True
        except OSError as exc:
            why = f"cannot write {self.path} ({exc.strerror or exc}); later replies are not cached"
            self.warn("write", f"{why} (a killed run pays for them again)")
        except Exception as exc:  # noqa: BLE001 - the cache never changes what the backend receives
            why = f"{type(exc).__name__}: {exc}; file {self.path}"
            self.warn(type(exc).__name__, f"a reply is not cached ({why}); a rerun asks for it again")
        return False


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


def hook_client(client: Any, cache: RequestCache) -> None:
    """Make a chat_client's `chat.completions.create` answer from the cache and store each real reply as it arrives."""
    import openai

    create: Callable[..., Any] = client.chat.completions.create

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

    async def cached_create_async(*args: Any, **kwargs: Any) -> Any:
        """AsyncCompletions.create through the request cache (stored off the event loop)."""
        key, stored = lookup(args, kwargs)
        if stored is None:
            stored = await create(*args, **kwargs)
            await asyncio.to_thread(cache.put, key, *_completion_reply(stored))
        return stored

    def cached_create(*args: Any, **kwargs: Any) -> Any:
        """Completions.create through the request cache."""
        key, stored = lookup(args, kwargs)
        if stored is not None:
            return stored
        response = create(*args, **kwargs)
        if inspect.isawaitable(response):  # an async create we could not tell from its signature
            cache.warn("awaitable", "the client's create returns an awaitable; its replies are not cached")
        else:
            cache.put(key, *_completion_reply(response))
        return response

    is_async = isinstance(client, openai.AsyncOpenAI) or inspect.iscoroutinefunction(inspect.unwrap(create))
    client.chat.completions.create = cached_create_async if is_async else cached_create
