"""Per-request reply cache of `hvcu_context`: a killed paid run, rerun as it was, pays only what was in flight.

Each reply is stored the moment it arrives, keyed by the model's identity and the exact request:

- Backends that send each request through a client object with `chat.completions.create` (`openai`,
  `async_openai`, `litellm`'s client shim: found by that shape, sync or async) are cached at that call, the
  one place where a single reply arrives while the backend runs many requests at once: the key is the
  request body itself (model, messages with each image's bytes, max_tokens, temperature, top_p, seed, ...)
  under the model identity and endpoint. Each reply is written and fsync'd before the backend gets it.
- Every other backend is cached by the wrapper: the key is the request's chat messages (each image by the
  SHA-256 of its file's bytes, never its path) and generation settings; the wrapper sends the requests not
  in the cache `chunk_size` at a time and stores each call's replies when the call returns (a kill during a
  call loses that call's replies: at most `chunk_size` per rank are asked again).

The model identity is the backend name, its model arguments (model_version, pretrained, base_url, ...; not
credentials nor knobs that do not change a reply, NEUTRAL_ARGS), the inner model's own resolved attributes
(IDENTITY_ATTRS) and, for client backends, the endpoint the client really talks to; URLs lose their user,
password and query before they enter it; the cache's own arguments (cache, reuse, run: WRAPPER_ARGS) never
do. One folder per identity, `<root>/<digest>/` (mode 0700), holds `identity.json` (what the digest stands
for) and the runs (cache_runs.py: which run a cache resumes or starts, what it may reuse, their manifests).
Each rank's share of a run, `runs/<id>/rank-<N>/`, holds append-only JSONL files, one per session of a
process (a new one each time a share is opened or reopened), so ranks and concurrent runs never share a file.

Each record is ASCII JSON (a reply cut inside an emoji, a lone surrogate, round-trips exactly) written with
one `os.write` and fsync'd; a process killed mid-write leaves at most its file's last line torn, which readers
skip with a warning. Only real replies are kept: an error, None, an empty or blank reply, or lmms-eval's
failure and budget markers are never stored, so a rerun asks again. The cache never changes what the backend
receives: a request it cannot key is sent uncached, a reply it cannot store goes back all the same (each with
one warning naming why).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import importlib.metadata
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

from hvcu_tasks.core.names import is_secret_name, public_url
from hvcu_tasks.data import jsonio
from hvcu_tasks.data.files import write_atomic
from hvcu_tasks.lmms.models import cache_runs as runs
from hvcu_tasks.lmms.models.cache_runs import (  # noqa: F401 - the run settings, re-exported for the wrapper and scripts
    LockUnsupported,
    command_signature,
    reuse_setting,
    run_name,
    write_manifest,
)

log = logging.getLogger("hvcu_tasks")

CACHE_FOLDER = "requests-v2"
"""Subfolder of the toolkit's cache folder ($HVCU_CACHE_DIR) that holds request caches (layout version in the name)."""

API_BACKENDS = frozenset({"openai", "async_openai", "litellm", "gemini", "claude", "gpt4v", "reka", "qwen_vl_api"})
"""lmms-eval backends that call a paid API: the cache is on by default for them (and for any `base_url`)."""

NEUTRAL_ARGS = frozenset(
    {
        "num_concurrent",
        "num_cpus",
        "timeout",
        "max_retries",
        "retry_backoff_s",
        "batch_size",
        "max_batch_size",
        "device",
        "httpx_trust_env",
        "work_dir",
        "prefix_aware_queue",
        "prefix_hash_chars",
        "adaptive_concurrency",
        "adaptive_min_concurrency",
        "adaptive_max_concurrency",
        "adaptive_target_latency_s",
        "adaptive_increase_step",
        "adaptive_decrease_factor",
        "adaptive_failure_threshold",
    }
)
"""Model arguments that change how requests are sent, never a reply: left out of the model identity."""

IDENTITY_ATTRS = ("model_version", "model", "model_name", "base_url", "pretrained")
"""Attributes of a built lmms-eval model that say which model answers (kept when they are plain values)."""

FAILURE_MARKERS = ("[LMMS_EVAL_REQUEST_FAILED", "[LMMS_EVAL_BUDGET_EXCEEDED]")
"""Texts lmms-eval backends return in place of a reply when a request failed or the token budget ran out."""

WRAPPER_ARGS = frozenset({"cache", "reuse", "run"})
"""The request cache's own model arguments: never part of the model identity."""

ON = frozenset({"on", "true", "yes", "1"})
OFF = frozenset({"off", "false", "no", "0", "none"})


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
    if isinstance(value, str) and value.strip():
        word = value.strip().lower()
        if word in ON:
            return "on"
        if word in OFF:
            return "off"
        if word == "auto":
            return "auto"
        return cache_folder(Path(value.strip()).expanduser())
    raise ValueError(f"hvcu_context: cache must be on, off or a folder, got {value!r}")


def cache_folder(path: Path) -> Path:
    """Return `cache=PATH` as given; ValueError (one line, naming it) when it or a folder above it is not a folder."""
    for at in (path, *path.parents):
        if at.is_dir():
            return path
        if at.exists() or at.is_symlink():
            where = "it" if at == path else str(at)
            raise ValueError(
                f"hvcu_context: cannot create the request cache {path}: Not a directory; {where} exists and is "
                "not a folder: give a cache=PATH folder (created when missing) or cache=off"
            )
    return path


def cache_location(setting: str | Path, api: bool) -> Path | None:
    """Return the root folder of the request cache for a setting, or None when it is off.

    'auto' is on for API backends and off for local models; 'on' and 'auto' use $HVCU_CACHE_DIR's
    CACHE_FOLDER subfolder. `cache=on` while $HVCU_CACHE_DIR turns caching off is an error.
    """
    from hvcu_tasks.data.validate import cache_root
    from hvcu_tasks.settings import CACHE_DIR_ENV

    if isinstance(setting, Path):
        return setting
    if setting == "off" or (setting == "auto" and not api):
        return None
    root = cache_root()
    if root is None:
        if setting == "on":
            raise ValueError(
                f"hvcu_context: cache=on, but {CACHE_DIR_ENV} turns the toolkit's caches off; give cache=PATH"
            )
        return None
    return root / CACHE_FOLDER


def is_api(backend: str, args: Mapping[str, Any], client: Any = None) -> bool:
    """Whether a backend calls a paid API: an OpenAI client, a known API backend name, or a `base_url` argument."""
    return client is not None or backend in API_BACKENDS or bool(args.get("base_url"))


# ---- identity and keys ----


def image_digest(image: Any) -> str:
    """Return the SHA-256 of a PIL image's content: its source file's bytes when it carries one, else its pixels."""
    from hvcu_tasks.data.images import SOURCE_ATTR, ImageSource

    source = getattr(image, SOURCE_ATTR, None)
    if isinstance(source, ImageSource):
        return _source_digest(source)
    digest = hashlib.sha256(f"{image.mode} {image.width}x{image.height}\n".encode())
    digest.update(image.tobytes())
    if image.mode in ("P", "PA"):  # the pixels are palette indices: the colours are in the palette
        digest.update(bytes(image.getpalette() or ()))
        digest.update(repr(image.info.get("transparency")).encode())
    return digest.hexdigest()


_SOURCE_DIGESTS: dict[tuple, str] = {}
_SOURCE_LOCK = threading.Lock()


def _source_digest(source: Any) -> str:
    """Return the SHA-256 of an image source's bytes, hashed once per file identity in this process."""
    key = source.key()
    with _SOURCE_LOCK:
        known = _SOURCE_DIGESTS.get(key)
    if known is None:
        known = hashlib.sha256(source.read()).hexdigest()
        with _SOURCE_LOCK:
            if len(_SOURCE_DIGESTS) > 65536:
                _SOURCE_DIGESTS.clear()
            _SOURCE_DIGESTS[key] = known
    return known


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
    endpoint = getattr(client, "base_url", None) if client is not None else None
    identity = model_identity(backend, args, None if endpoint is None else str(endpoint), resolved_attributes(model))
    if client is None:
        identity["lmms_eval"] = lmms_eval_version()
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


def lmms_eval_version() -> str:
    """Return the installed lmms-eval release ('unknown' when its package metadata is missing)."""
    try:
        return importlib.metadata.version("lmms_eval")
    except importlib.metadata.PackageNotFoundError:
        import lmms_eval

        return str(getattr(lmms_eval, "__version__", "unknown"))


def _public(value: Any) -> Any:
    """Return a model argument as JSON without credentials: secret-named keys dropped, URLs stripped."""
    if isinstance(value, Mapping):
        return {
            str(k): _public(v)
            for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
            if not is_secret_name(str(k))
        }
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
            if record is None:
                torn = number == len(lines)  # no newline after it: the writer was stopped mid-record
                log.warning(
                    "request cache: %s line %d: %s; ignored (that request will be asked again)",
                    path,
                    number,
                    "record cut short (a run killed while writing it)" if torn else "unreadable record",
                )
                continue
            replies.setdefault(record[0], record[1])
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


# ---- runs (cache_runs.py decides which run; this class holds its replies) ----

LEGACY_FOLDER = "requests-v1"
"""The default root of the layout without runs, next to CACHE_FOLDER."""

JOIN_WAIT_S = 120.0
"""How long a rank above 0 without torch.distributed waits for rank 0 to open the command's run."""

_EXITING = False
"""Set by an atexit hook that runs before any run ends at interpreter exit (an unhandled exception then counts)."""
_EXIT_HOOKED = False


def _mark_exiting() -> None:
    """Note that the interpreter is exiting (runs ending now check for an unhandled exception)."""
    global _EXITING
    _EXITING = True


class _Share:
    """This process's share of a run (one rank's folder): its lock, its record file, what it was asked and answered."""

    def __init__(self, folder: Path, manifest: dict[str, Any], lock_fd: int) -> None:
        self.folder = folder
        self.manifest = manifest
        self.lock_fd: int | None = lock_fd
        self.report = False
        self.fd: int | None = None
        self.lock = threading.Lock()
        self.given = 0
        self.missing = 0
        self.unstored = 0
        self.raised: str | None = None
        self.total = 0
        self.from_run = 0
        self.reused: dict[str, int] = {}
        self.sources: dict[str, str] = {}
        self.ended = False

    def write_manifest(self, **changes: Any) -> bool:
        """Update and durably rewrite the share's manifest; False (with a warning) when it cannot."""
        self.manifest.update(changes, updated=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        return write_manifest(self.folder, self.manifest)

    def why_unfinished(self) -> str | None:
        """Return why the model phase did not complete (a rerun of the command resumes the run), or None."""
        if self.raised is not None:
            return f"a call raised {self.raised}"
        last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        if _EXITING and last is not None:
            return f"the process ended with {type(last).__name__}"
        if not self.given:
            return "it was given no requests"
        return None

    def end(self) -> None:
        """End this process's share: finished when the model phase completed (failed replies or not)."""
        with self.lock:
            if self.ended:
                return
            self.ended = True
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
        why = self.why_unfinished()
        state = "unfinished" if why else "finished"
        written = self.write_manifest(
            state=state,
            why=why,
            requests=self.given,
            from_run=self.from_run,
            reused=dict(self.reused),
            failed=self.missing,
            unstored=self.unstored,
            replies=self.total,
        )
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None
        run = self.manifest["run"]
        if not written and state == "finished":
            log.warning(
                "request cache: run %s is not marked finished: the same command would resume it (delete %s)",
                run,
                self.folder,
            )
        if self.report:
            rank = f"rank {self.manifest.get('rank', 0)}: " if int(self.manifest.get("world_size", 1)) > 1 else ""
            for source, count in self.reused.items():
                print(f"hvcu_context: {rank}{count} replies reused from run {self.sources[source]}", file=sys.stderr)
            if why and self.given:
                print(
                    f"hvcu_context: {rank}run {run} left unfinished ({why}); the same command resumes it",
                    file=sys.stderr,
                )
            elif not why and self.missing:
                print(
                    f"hvcu_context: {rank}run {run} finished with {self.missing} requests without a reply; "
                    f"rerun with reuse={run} to ask only those",
                    file=sys.stderr,
                )


class RequestCache:
    """One rank's share of one run of one model identity under `root`; each new reply appended and fsync'd.

    A new cache resumes the newest unfinished run of the same identity and signature (cache_runs.py) that no
    live process holds, else starts a new run; it reads that run's replies (this rank's share) and, with
    `reuse`, those of the earlier runs named (every rank's share). The share ends with `end()`, the cache
    garbage-collected or the process exiting: finished unless a call raised (`failed`) or the process ended
    on an unhandled exception. Every rank of a data-parallel command opens the same run id.
    """

    def __init__(
        self,
        root: Path | str,
        identity: Mapping[str, Any],
        command: Mapping[str, Any] | None = None,
        reuse: Any = None,
        rank: int = 0,
        world_size: int = 1,
        report: bool = False,
    ) -> None:
        """Open (creating it, private) the folder of this identity, resume or start a run, read its replies."""
        global _EXIT_HOOKED
        self.identity = dict(identity)
        self.identity_digest = digest(self.identity)
        self.root = Path(root)
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
        self.command = runs.command_signature() if command is None else dict(command)
        self.rank, self.world_size = rank, world_size
        self.signature, self.ordinal = runs.run_signature(self.identity_digest, self.command, world_size)
        wanted = runs.reuse_setting(reuse)
        self.earlier = runs.list_runs(self.folder)
        self.source_names: dict[str, str] = {}
        sources = self._sources(wanted, reuse)
        share = self._open_share()
        self._report = report
        self.run_id: str = share.manifest["run"]
        self.resumed = share.manifest.get("sessions", 1) > 1
        self.replies = read_replies(share.folder)
        self.loaded = len(self.replies)
        self.reused: dict[str, tuple[Reply, str]] = {}
        for name, folders in sources:
            if name == self.run_id:
                continue
            for folder in folders:
                for key, reply in read_replies(folder).items():
                    if key not in self.replies:
                        self.reused.setdefault(key, (reply, name))
        self.hits = 0
        self.stored = 0
        self.sample = 0
        self._lock = threading.Lock()
        self._broken = False
        self._warned: set[str] = set()
        self._open(share)
        if not _EXIT_HOOKED:  # after weakref's own exit hook, so this one runs first (atexit is LIFO)
            atexit.register(_mark_exiting)
            _EXIT_HOOKED = True

    # -- runs --

    def _open(self, share: _Share) -> None:
        """Make `share` the one this cache writes to (a new record file), ended with the cache at the latest."""
        share.report = self._report
        share.sources = self.source_names
        share.total = len(self.replies)
        self._run = share
        self.run_id = share.manifest["run"]
        self.path = share.folder / f"{time.time_ns()}-{os.getpid()}-{secrets.token_hex(4)}.jsonl"
        self._finalizer = weakref.finalize(self, share.end)

    def _resumable(self) -> str | None:
        """Return the id of the newest unfinished run of this signature that no live process holds, or None."""
        for run in reversed(self.earlier):
            if run["signature"] != self.signature or run["status"] != "unfinished":
                continue
            if run["shares"][0]["folder"] == run["folder"]:  # the first layout (no rank folders): left alone
                continue
            return run["run"]
        return None

    def _joinable(self) -> str | None:
        """Return the newest run of this signature whose rank-0 share is open now (this command's, on rank 0)."""
        deadline = time.monotonic() + JOIN_WAIT_S
        while True:
            for run in reversed(runs.list_runs(self.folder)):
                if run["signature"] != self.signature:
                    continue
                by_rank = {s["manifest"].get("rank"): s for s in run["shares"]}
                if by_rank.get(0, {}).get("live") and not by_rank.get(self.rank, {}).get("live"):
                    return run["run"]
            if time.monotonic() > deadline:
                log.warning("request cache: rank %d found no run opened by rank 0; it starts its own", self.rank)
                return None
            time.sleep(0.2)

    def _open_share(self) -> _Share:
        """Lock and return this rank's share of the run to use: rank 0's choice (resumed or new) on every rank."""
        rank, world = self.rank, self.world_size
        if rank == 0 or world == 1:
            run_id = runs.agreed_run_id(self._resumable() or runs.new_run_id(), rank, world)
        else:
            run_id = runs.agreed_run_id(None, rank, world) or self._joinable() or self._resumable()
        for _attempt in range(8):
            folder = runs.share_folder(self.folder / runs.RUNS / (run_id or runs.new_run_id()), rank)
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = runs.lock(folder / "lock", retries=5)
            if fd is None:  # another process opened it first (two commands resuming one run): start afresh
                run_id = None
                continue
            current = runs.read_manifest(folder)
            if current is not None:
                share = _Share(folder, current, fd)
                share.write_manifest(state="running", pid=os.getpid(), sessions=int(current.get("sessions", 1)) + 1)
                return share
            manifest = {
                "run": folder.parent.name,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "created_s": time.time(),
                "state": "running",
                "signature": self.signature,
                "ordinal": self.ordinal,
                "command": runs.shown_command(self.command),
                "rank": rank,
                "world_size": world,
                "pid": os.getpid(),
                "sessions": 1,
            }
            share = _Share(folder, manifest, fd)
            if not share.write_manifest():
                os.close(fd)
                raise OSError(f"cannot write {folder / 'run.json'}")
            return share
        raise OSError(f"cannot open a run in {self.folder / runs.RUNS}: every candidate is held by another process")

    def start_lines(self) -> list[str]:
        """Return what the output says at start: the run resumed or started, and which earlier replies are used."""
        first = (
            f"resuming unfinished run {self.run_id} ({self.loaded} replies; only the requests not there are asked)"
            if self.resumed
            else f"new run {self.run_id} (earlier runs' replies are not used)"
        )
        lines = [f"hvcu_context: request cache {self.folder}: {first}; cache=off: no cache"]
        names = self.source_names
        if names:
            counts: dict[str, int] = {}
            for _reply, name in self.reused.values():
                counts[name] = counts.get(name, 0) + 1
            used = ", ".join(f"{names[n]}: {counts.get(n, 0)} replies" for n in names if n != self.run_id)
            lines.append(f"hvcu_context: reuse: requests this run has no reply for are answered from {used}")
        else:
            others = [m for m in self.earlier if m["run"] != self.run_id and m["status"] != "live"]
            legacy = self._legacy_folders()
            if others or legacy:
                parts = []
                if others:
                    parts.append(f"{len(others)} earlier runs of this model (newest: {runs.describe(others[-1])})")
                if legacy:
                    parts.append(f"replies stored before runs existed ({runs.LEGACY})")
                lines.append(
                    f"hvcu_context: {' and '.join(parts)} are NOT reused; reuse=all takes them, reuse=RUN[+RUN] "
                    f"some (list: hvcu cache list {self.root})"
                )
        return lines

    @property
    def ended(self) -> bool:
        """Whether this cache's share has ended (a call raised, or `end()`): `reopen()` continues it."""
        return self._run.ended

    def reopen(self) -> bool:
        """Continue this cache's ended share in a new session; False (nothing more is stored) when another holds it."""
        if not self._run.ended:
            return True
        folder = self._run.folder
        fd = runs.lock(folder / "lock", retries=5)
        current = runs.read_manifest(folder) if fd is not None else None
        if fd is None or current is None:
            if fd is not None:
                os.close(fd)
            self.warn("reopen", f"run {self.run_id} is open elsewhere now; later replies are not cached")
            return False
        share = _Share(folder, current, fd)
        share.write_manifest(state="running", pid=os.getpid(), sessions=int(current.get("sessions", 1)) + 1)
        self._open(share)
        return True

    def _legacy_folders(self) -> list[Path]:
        """Return the folders holding this identity's replies stored before runs existed."""
        folders = [self.folder]
        if self.root.name == CACHE_FOLDER:
            folders.append(self.root.parent / LEGACY_FOLDER / self.folder.name)
        return [f for f in folders if f.is_dir() and any(f.glob("*.jsonl"))]

    def _sources(self, wanted: tuple[str, ...], value: Any) -> list[tuple[str, list[Path]]]:
        """Return (name, folders) of the earlier replies `reuse` asks for, newest run first (its reply wins when
        several runs hold a request; the layout before runs comes last); an unknown name is a one-line error."""
        by_id = {m["run"]: m for m in reversed(self.earlier)}
        legacy = self._legacy_folders()
        named = [n for n in wanted if n != "all"]
        unknown = [n for n in named if n not in by_id and not (n == runs.LEGACY and legacy)]
        if unknown:
            known = [runs.describe(m) for m in reversed(self.earlier)]
            known += [f"{runs.LEGACY} (replies stored before runs existed)"] if legacy else []
            listed = f"its runs: {', '.join(known)}" if known else "it has no earlier runs"
            raise ValueError(
                f"hvcu_context: reuse={value}: no run {unknown[0]} of this model in {self.folder}; {listed}"
            )
        names = [*by_id, *([runs.LEGACY] if legacy else [])] if "all" in wanted else named
        sources = []
        order = list(by_id)
        for name in sorted(names, key=lambda n: order.index(n) if n in by_id else len(order)):
            if name == runs.LEGACY:
                sources.append((name, legacy))
                self.source_names[name] = f"{runs.LEGACY} (replies stored before runs existed)"
            else:
                sources.append((name, [Path(s["folder"]) for s in by_id[name]["shares"]]))
                self.source_names[name] = runs.describe(by_id[name])
        return sources

    # -- accounting --

    def tally(self, texts: list[Any]) -> None:
        """Count requests given to the model and those without a real reply (reported when the run ends)."""
        with self._lock:
            self._run.given += len(texts)
            self._run.missing += sum(1 for t in texts if not keepable(t))

    def failed(self, exc: BaseException) -> None:
        """End the share now as unfinished because a call raised: the same command (or `reopen()`) continues it."""
        self._run.raised = type(exc).__name__
        self.end()

    def end(self) -> None:
        """End this share now (also done when the cache is garbage-collected or the process exits)."""
        self._finalizer()

    @property
    def state(self) -> str:
        """The share's state on disk: running, finished or unfinished."""
        return str(self._run.manifest.get("state"))

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
        """Return the stored reply for a key (this run's, else a reused run's), or None."""
        if key is None:
            return None
        reply = self.replies.get(key)
        with self._lock:
            if reply is not None:
                self.hits += 1
                self._run.from_run += 1
                return reply
            found = self.reused.get(key)
            if found is None:
                return None
            self.hits += 1
            self._run.reused[found[1]] = self._run.reused.get(found[1], 0) + 1
        return found[0]

    def put(self, key: str | None, text: Any, finish_reason: str | None = None) -> bool:
        """Store a real reply durably (written and fsync'd before returning); return whether it was stored.

        Never raises: a reply that cannot be stored is reported once and left out.
        """
        if key is None or not keepable(text):
            return False
        stored = False
        if not self._broken:
            try:
                stored = self._append(key, text, finish_reason if isinstance(finish_reason, str) else None)
            except Exception as exc:  # noqa: BLE001 - the cache never changes what the backend receives
                self.warn(
                    type(exc).__name__,
                    f"a reply is not cached ({type(exc).__name__}: {exc}; file {self.path}); a rerun asks for it again",
                )
        if not stored:
            with self._lock:
                self._run.unstored += 1
        return stored

    def _append(self, key: str, text: str, finish_reason: str | None) -> bool:
        """Append one record (ASCII JSON: any text round-trips) and fsync it; a write error turns storing off."""
        line = json.dumps({"key": key, "reply": text, "finish_reason": finish_reason}, ensure_ascii=True) + "\n"
        data = line.encode("ascii")
        run = self._run
        try:
            with self._lock:
                if run.ended:
                    raise RuntimeError(f"run {self.run_id} has ended")
                if run.fd is None:
                    run.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                fd = run.fd
                while data:
                    data = data[os.write(fd, data) :]
                if key not in self.replies:
                    run.total += 1
                self.replies.setdefault(key, Reply(text, finish_reason))
                self.stored += 1
                os.fsync(fd)
        except OSError as exc:
            self._broken = True
            self.warn(
                "write",
                f"cannot write {self.path} ({exc.strerror or exc}); later replies are not cached "
                "(a killed run pays for them again)",
            )
            return False
        return True

    def __len__(self) -> int:
        return len(self.replies)

    def close(self) -> None:
        """End this run (see `end`)."""
        self.end()


# ---- OpenAI clients ----


_FINISH_REASONS = frozenset({"stop", "length", "content_filter"})
"""Finish reasons a replayed completion carries as stored (any other, e.g. a provider's own word, reads 'stop')."""


def stored_completion(reply: Reply, model: Any) -> Any:
    """Return a chat completion carrying a stored reply (no token usage: nothing was paid for it)."""
    from openai.types.chat import ChatCompletion

    return ChatCompletion.model_validate(
        {
            "id": "hvcu-request-cache",
            "object": "chat.completion",
            "created": 0,
            "model": str(model or ""),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": reply.finish_reason if reply.finish_reason in _FINISH_REASONS else "stop",
                    "message": {"role": "assistant", "content": reply.text},
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
    )


def _completion_reply(response: Any) -> tuple[Any, str | None]:
    """Return (text, finish reason) of a chat completion's first choice; (None, None) when it is not a plain reply."""
    try:
        choice = response.choices[0]
    except (AttributeError, IndexError, KeyError, TypeError):
        return None, None
    message = getattr(choice, "message", None)
    finish = getattr(choice, "finish_reason", None)
    if finish == "tool_calls" or getattr(message, "tool_calls", None):
        return None, None  # a tool call is answered by the backend's next request, not replayable as text
    return getattr(message, "content", None), finish if isinstance(finish, str) else None


def chat_client(model: Any) -> Any:
    """Return the client a backend sends each request through, or None.

    Any object with a `chat.completions.create` whose `create` can be replaced (checked by setting it to
    itself) qualifies: openai's clients, litellm's shim, ...
    """
    client = getattr(model, "client", None)
    completions = getattr(getattr(client, "chat", None), "completions", None)
    create = getattr(completions, "create", None)
    if not callable(create):
        return None
    try:
        completions.create = create
    except (AttributeError, TypeError):
        return None
    return client


def _is_async(client: Any, create: Callable[..., Any]) -> bool:
    """Whether a client's create is a coroutine function (an openai.AsyncOpenAI, or a shim's `async def`)."""
    try:
        import openai

        if isinstance(client, openai.AsyncOpenAI):
            return True
    except ImportError:  # pragma: no cover - lmms-eval depends on openai
        pass
    return inspect.iscoroutinefunction(inspect.unwrap(create))


def _cacheable_call(args: tuple, kwargs: dict) -> bool:
    """Whether a create call asks for one plain reply (keyword arguments only, no streaming, one choice)."""
    return not args and not kwargs.get("stream") and kwargs.get("n") in (None, 1)


def hook_client(client: Any, cache: RequestCache) -> bool:
    """Make `client.chat.completions.create` answer from the cache and store each real reply as it arrives.

    Return False (the client left as it was) when its `create` cannot be replaced.
    """
    completions = client.chat.completions
    create: Callable[..., Any] = completions.create

    def lookup(args: tuple, kwargs: dict) -> tuple[str | None, Any]:
        if not _cacheable_call(args, kwargs):
            return None, None
        key = cache.key(kwargs, cache.sample)
        reply = cache.get(key)
        if reply is None:
            return key, None
        try:
            return key, stored_completion(reply, kwargs.get("model"))
        except Exception as exc:  # noqa: BLE001 - the cache never stops a request: ask the server instead
            cache.warn("replay", f"a stored reply cannot be replayed ({type(exc).__name__}: {exc}); asked again")
            return key, None

    def store(key: str | None, response: Any) -> None:
        if key is None:
            return
        try:
            text, finish = _completion_reply(response)
        except Exception:  # noqa: BLE001 - a reply of an unknown shape is not stored
            return
        cache.put(key, text, finish)

    if _is_async(client, create):

        async def cached_create_async(*args: Any, **kwargs: Any) -> Any:
            """AsyncCompletions.create through the request cache (stored off the event loop)."""
            key, stored = lookup(args, kwargs)
            if stored is not None:
                return stored
            response = await create(*args, **kwargs)
            if key is not None:
                await asyncio.to_thread(store, key, response)
            return response

        replacement: Callable[..., Any] = cached_create_async
    else:

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

        replacement = cached_create
    try:
        completions.create = replacement
    except (AttributeError, TypeError):
        return False
    return True


def openai_client(model: Any) -> Any:
    """Return the `openai` client (sync or async) a backend sends its requests through, or None."""
    try:
        import openai
    except ImportError:  # pragma: no cover - lmms-eval depends on openai
        return None
    client = getattr(model, "client", None)
    return client if isinstance(client, (openai.OpenAI, openai.AsyncOpenAI)) else None
