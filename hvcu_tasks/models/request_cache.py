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
for) and `runs/<run id>/`: `run.json` (the manifest: id, created, signature, command without credentials,
rank, world size, state, counts; rewritten atomically), `lock`, and append-only JSONL files, one per writing
process and session (so data-parallel ranks and concurrent runs never share a file).

Runs, so that a name cannot answer for another model (a new checkpoint served under the same name and URL):
a cache resumes the newest UNFINISHED run with the same signature (the command line without output options,
OUTPUT_ARGS, or an explicit `run=` name; plus rank and world size) that no live process holds (flock on its
`lock`, held until the run ends), else it starts a new run and reads nothing old. A run ends when the cache
is ended, garbage-collected or the process exits; it is `finished` only when it was given requests, every
one came back with a real, stored reply, no call raised and the process did not end on an unhandled
exception; otherwise (and after a kill -9, which ends nothing) the same command resumes it and pays only
what is missing. A call that raises ends the run at once (a new wrapper in the same process resumes it; the
same wrapper's next call continues it). lmms-eval's CLI catches exceptions outside the model and exits 0:
a crash after every reply came back (in scoring) leaves the run finished, so the rerun pays again - the safe
side. Replies of finished runs, of other commands, and of the layout before runs (requests-v1, loose JSONL
files: LEGACY) are used only on request: `reuse=all`, `reuse=RUN[+RUN]`, `reuse=v1` (newest run first when
several hold a request); the output then says how many replies came from which run.
`python -m hvcu_tasks.models.request_cache [ROOT]` lists every model's runs.

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
import contextlib
import hashlib
import importlib.metadata
import inspect
import io
import json
import logging
import os
import re
import secrets
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from hvcu_tasks.files import write_atomic

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks
    fcntl = None  # type: ignore[assignment]

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

_CREDENTIAL = re.compile(r"key|token|secret|passw|credential|auth|header", re.IGNORECASE)
"""Words that mark an argument name as holding credentials (anywhere in it): never in the identity, never on disk."""

_NOT_SECRET = re.compile(
    r"(?:max|min|num|budget|thinking|reasoning)_(?:[a-z]+_)*tokens|keyframes?|keypoints?|authors?", re.IGNORECASE
)
"""Parts of argument names that are settings although they hold a credential word (max_new_tokens, keyframes)."""

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
        return Path(value.strip()).expanduser()
    raise ValueError(f"hvcu_context: cache must be on, off or a folder, got {value!r}")


def cache_location(setting: str | Path, api: bool) -> Path | None:
    """Return the root folder of the request cache for a setting, or None when it is off.

    'auto' is on for API backends and off for local models; 'on' and 'auto' use $HVCU_CACHE_DIR's
    CACHE_FOLDER subfolder. `cache=on` while $HVCU_CACHE_DIR turns caching off is an error.
    """
    from hvcu_tasks.validate import CACHE_ENV, cache_root

    if isinstance(setting, Path):
        return setting
    if setting == "off" or (setting == "auto" and not api):
        return None
    root = cache_root()
    if root is None:
        if setting == "on":
            raise ValueError(f"hvcu_context: cache=on, but {CACHE_ENV} turns the toolkit's caches off; give cache=PATH")
        return None
    return root / CACHE_FOLDER


def is_api(backend: str, args: Mapping[str, Any], client: Any = None) -> bool:
    """Whether a backend calls a paid API: an OpenAI client, a known API backend name, or a `base_url` argument."""
    return client is not None or backend in API_BACKENDS or bool(args.get("base_url"))


# ---- identity and keys ----


def image_digest(image: Any) -> str:
    """Return the SHA-256 of a PIL image's content: its source file's bytes when it carries one, else its pixels."""
    from hvcu_tasks.images import SOURCE_ATTR, ImageSource

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


def is_secret_name(name: str) -> bool:
    """Whether an argument name says it holds a credential (api_keys, extra_headers, hf_token, auth, ...)."""
    return bool(_CREDENTIAL.search(_NOT_SECRET.sub("", name)))


def public_url(text: str) -> str:
    """Return a URL without its user, password, query and fragment (where keys hide); other text unchanged."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return text
    if not (parts.scheme and parts.netloc):
        return text
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


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
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    key, text, finish = data.get("key"), data.get("reply"), data.get("finish_reason")
    if not isinstance(key, str) or not keepable(text) or not (finish is None or isinstance(finish, str)):
        return None
    return key, Reply(text, finish)


# ---- runs ----

RUNS = "runs"
"""Subfolder of an identity folder: one folder per run (`run.json`, `lock`, the run's JSONL files)."""

LEGACY = "v1"
"""The name `reuse=` gives the replies stored before runs existed (requests-v1, loose JSONL files)."""

LEGACY_FOLDER = "requests-v1"
"""The default root of the layout without runs, next to CACHE_FOLDER."""

OUTPUT_ARGS = frozenset(
    {
        "output_path",
        "log_samples",
        "log_samples_suffix",
        "wandb_args",
        "wandb_log_samples",
        "swanlab_args",
        "swanlab_log_samples",
        "hf_hub_log_args",
        "verbosity",
        "show_config",
        "timezone",
        "write_out",
        "use_cache",
        "predict_only",
        "tui",
        "model_args",
    }
)
"""lmms-eval arguments left out of a run's signature: where and how results are written (`model_args` are the
model identity already, its sending knobs and `cache`/`reuse`/`run` never change which requests are sent)."""

_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_EXITING = False
"""Set by an atexit hook that runs before any run ends at interpreter exit (an unhandled exception then counts)."""
_EXIT_HOOKED = False


def _mark_exiting() -> None:
    """Note that the interpreter is exiting (runs ending now check for an unhandled exception)."""
    global _EXITING
    _EXITING = True


def _is_lmms_eval(program: str) -> bool:
    """Whether argv[0] is lmms-eval's CLI (the `lmms-eval` script or `python -m lmms_eval`)."""
    path = Path(program)
    return path.name in ("lmms-eval", "lmms_eval") or (path.name == "__main__.py" and path.parent.name == "lmms_eval")


def _lmms_eval_args(program: str, args: list[str]) -> dict[str, Any] | None:
    """Return lmms-eval's parsed arguments that decide the requests (None when they do not parse)."""
    if args and args[0] == "eval":
        args = args[1:]
    saved = sys.argv
    try:
        from lmms_eval.__main__ import parse_eval_args

        sys.argv = [program, *args]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            _parser, namespace = parse_eval_args()
    except (Exception, SystemExit):  # noqa: BLE001 - not an lmms-eval command line after all: use the raw one
        return None
    finally:
        sys.argv = saved
    values = {k: v for k, v in vars(namespace).items() if k not in OUTPUT_ARGS}
    if values.get("config"):
        try:
            values["config_sha256"] = hashlib.sha256(Path(values["config"]).read_bytes()).hexdigest()
        except OSError:
            pass
    return _public(values)


def command_signature(argv: list[str] | None = None, name: str | None = None) -> dict[str, Any]:
    """Return what makes two runs "the same command": `name` if given, else the command line minus output options.

    For lmms-eval's CLI that is its parsed arguments without OUTPUT_ARGS (so `--output_path`, `--log_samples`
    and the model arguments, already the identity, do not count; a `--config` file counts by its content).
    For any other program (a script calling simple_evaluate) it is the script's path and arguments.
    """
    if name is not None:
        return {"run": name}
    argv = list(sys.argv if argv is None else argv)
    program, args = (argv[0] if argv else ""), argv[1:]
    if _is_lmms_eval(program):
        parsed = _lmms_eval_args(program, args)
        if parsed is not None:
            return {"lmms_eval": parsed}
    return {"program": os.path.abspath(program) if program else "", "argv": args}


def _shown_command(command: Mapping[str, Any]) -> dict[str, Any]:
    """Return the part of a signature written to disk: never a raw command line (it may hold a key)."""
    if "argv" in command:
        return {"program": command.get("program", "")}
    return dict(command)


def reuse_setting(value: Any) -> tuple[str, ...]:
    """Return the `reuse` model argument as run names ('all', 'v1' or run ids, joined by '+'); () for none."""
    if value is None or (isinstance(value, str) and value.strip().lower() in OFF | {""}):
        return ()
    if isinstance(value, (list, tuple)):
        value = "+".join(str(v) for v in value)
    if not isinstance(value, str):
        raise ValueError(f"hvcu_context: reuse must be none, all, {LEGACY} or run ids joined by '+', got {value!r}")
    names = tuple(dict.fromkeys(part.strip() for part in value.split("+")))
    bad = [n for n in names if not _RUN_NAME.fullmatch(n)]
    if bad:
        raise ValueError(f"hvcu_context: reuse={value}: {bad[0]!r} is not a run id (none, all, {LEGACY} or RUN+RUN)")
    return ("all",) if "all" in names else names


def run_name(value: Any) -> str | None:
    """Return the `run` model argument (a name that stands for the command line in the run signature), or None."""
    if value is None:
        return None
    if isinstance(value, str) and _RUN_NAME.fullmatch(value.strip()):
        return value.strip()
    raise ValueError(f"hvcu_context: run must be a name of letters, digits, '.', '_' or '-', got {value!r}")


def _lock(path: Path) -> int | None:
    """Open and exclusively lock a run's lock file; None when another open run holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    if fcntl is None:  # pragma: no cover - no advisory locks (Windows): a live run is not told apart
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _live(folder: Path) -> bool:
    """Whether a run is open in some wrapper now (its lock is held)."""
    try:
        fd = _lock(folder / "lock")
    except OSError:
        return False
    if fd is None:
        return True
    os.close(fd)
    return False


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """Return a run folder's manifest (`run.json`), or None when it has none or it cannot be read."""
    try:
        data = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("request cache: cannot read %s (%s); that run is left alone", folder / "run.json", exc)
        return None
    return data if isinstance(data, dict) and isinstance(data.get("run"), str) else None


def list_runs(identity_folder: Path) -> list[dict[str, Any]]:
    """Return the manifests of an identity folder's runs, oldest first, each with its `status` now.

    status: `finished`; `live` (open in a wrapper now); `unfinished` (ended with requests missing, or killed).
    """
    found = []
    for folder in sorted((Path(identity_folder) / RUNS).glob("*")):
        manifest = read_manifest(folder) if folder.is_dir() else None
        if manifest is None:
            continue
        if manifest.get("state") == "finished":
            status = "finished"
        else:
            status = "live" if _live(folder) else "unfinished"
        found.append({**manifest, "status": status, "folder": str(folder)})
    return sorted(found, key=lambda m: (m.get("created_s", 0), m["run"]))


def describe(manifest: Mapping[str, Any]) -> str:
    """Return a run as people read it: `ID (finished, 2026-12-01 19:26)`."""
    created = manifest.get("created_s")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(created)) if isinstance(created, (int, float)) else "?"
    return f"{manifest['run']} ({manifest.get('status', manifest.get('state', '?'))}, {when})"


def _new_run_id() -> str:
    """Return a fresh run id: local start time and 4 random hex digits (20261201T192600-ab12)."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(2)}"


class _Run:
    """This process's part in a run: its lock, its record file, and what it was asked and answered."""

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
        """Update and atomically rewrite the run's manifest; warn (once) and return False when it cannot."""
        self.manifest.update(changes, updated=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        try:
            write_atomic(self.folder / "run.json", json.dumps(self.manifest, indent=2, ensure_ascii=True) + "\n")
        except OSError as exc:
            log.warning("request cache: cannot write %s (%s)", self.folder / "run.json", exc.strerror or exc)
            return False
        return True

    def why_unfinished(self) -> str | None:
        """Return why the run is not finished (a rerun of the command resumes it), or None when it is."""
        if self.raised is not None:
            return f"a call raised {self.raised}"
        if _EXITING and getattr(sys, "last_value", None) is not None:
            return f"the process ended with {type(sys.last_value).__name__}"
        if not self.given:
            return "it was given no requests"
        if self.missing:
            return f"{self.missing} of {self.given} requests got no real reply"
        if self.unstored:
            return f"{self.unstored} replies could not be stored"
        return None

    def end(self) -> None:
        """End this process's part: finished when every request got a stored reply, else left to resume."""
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
            for source, count in self.reused.items():
                print(f"hvcu_context: {count} replies reused from run {self.sources[source]}", file=sys.stderr)
            if why and self.given:
                print(f"hvcu_context: run {run} left unfinished ({why}); the same command resumes it", file=sys.stderr)


class RequestCache:
    """One run's replies of one model identity under `root`, each new one appended and fsync'd as it arrives.

    A new cache resumes the newest unfinished run of the same identity and signature (command line, rank,
    world size) that no live wrapper holds, else starts a new run; it reads that run's replies and, with
    `reuse`, those of the earlier runs named. The run ends (`end()`, the cache garbage-collected, or the
    process exiting): finished when every request tallied got a real, stored reply and no call raised.
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
        (self.folder / RUNS).mkdir(exist_ok=True, mode=0o700)
        self.command = command_signature() if command is None else dict(command)
        self.signature = digest({"command": self.command, "rank": rank, "world_size": world_size})
        wanted = reuse_setting(reuse)
        self.earlier = list_runs(self.folder)
        self.source_names: dict[str, str] = {}
        sources = self._sources(wanted, reuse)
        run = self._resume() or self._start(rank, world_size)
        self._report = report
        self.run_id: str = run.manifest["run"]
        self.resumed = run.manifest.get("sessions", 1) > 1
        self.replies = read_replies(run.folder)
        self.loaded = len(self.replies)
        run.total = self.loaded
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
        self._lock = threading.Lock()
        self._broken = False
        self._warned: set[str] = set()
        self._open(run)
        if not _EXIT_HOOKED:  # after weakref's own exit hook, so this one runs first (atexit is LIFO)
            atexit.register(_mark_exiting)
            _EXIT_HOOKED = True

    # -- runs --

    def _open(self, run: _Run) -> None:
        """Make `run` the one this cache writes to (a new record file), ended with the cache at the latest."""
        run.report = self._report
        run.sources = self.source_names
        run.total = len(self.replies)
        self._run = run
        self.run_id = run.manifest["run"]
        self.path = run.folder / f"{time.time_ns()}-{os.getpid()}-{secrets.token_hex(4)}.jsonl"
        self._finalizer = weakref.finalize(self, run.end)

    @property
    def ended(self) -> bool:
        """Whether this cache's run has ended (a call raised, or `end()`): `reopen()` continues it."""
        return self._run.ended

    def reopen(self) -> bool:
        """Continue this cache's ended run in a new session; False (nothing more is stored) when another holds it."""
        if not self._run.ended:
            return True
        folder = self._run.folder
        fd = _lock(folder / "lock")
        current = read_manifest(folder) if fd is not None else None
        if fd is None or current is None:
            if fd is not None:
                os.close(fd)
            self.warn("reopen", f"run {self.run_id} is open elsewhere now; later replies are not cached")
            return False
        run = _Run(folder, current, fd)
        run.write_manifest(state="running", pid=os.getpid(), sessions=int(current.get("sessions", 1)) + 1)
        self._open(run)
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
        names = [*by_id, *([LEGACY] if legacy else [])] if wanted == ("all",) else list(wanted)
        unknown = [n for n in names if n not in by_id and not (n == LEGACY and legacy)]
        if unknown:
            known = [describe(m) for m in reversed(self.earlier)]
            known += [f"{LEGACY} (replies stored before runs existed)"] if legacy else []
            listed = f"its runs: {', '.join(known)}" if known else "it has no earlier runs"
            raise ValueError(
                f"hvcu_context: reuse={value}: no run {unknown[0]} of this model in {self.folder}; {listed}"
            )
        sources = []
        order = list(by_id)
        for name in sorted(names, key=lambda n: order.index(n) if n in by_id else len(order)):
            if name == LEGACY:
                sources.append((name, legacy))
                self.source_names[name] = f"{LEGACY} (replies stored before runs existed)"
            else:
                sources.append((name, [Path(by_id[name]["folder"])]))
                self.source_names[name] = describe(by_id[name])
        return sources

    def _resume(self) -> _Run | None:
        """Lock and return the newest unfinished, not live run of this signature, or None."""
        for manifest in reversed(self.earlier):
            if manifest.get("signature") != self.signature or manifest["status"] != "unfinished":
                continue
            folder = Path(manifest["folder"])
            fd = _lock(folder / "lock")
            if fd is None:
                continue
            current = read_manifest(folder)  # it may have ended between the listing and the lock
            if current is None or current.get("state") == "finished":
                os.close(fd)
                continue
            run = _Run(folder, current, fd)
            run.write_manifest(state="running", pid=os.getpid(), sessions=int(current.get("sessions", 1)) + 1)
            return run
        return None

    def _start(self, rank: int, world_size: int) -> _Run:
        """Create, lock and return a new run of this signature."""
        while True:
            run_id = _new_run_id()
            folder = self.folder / RUNS / run_id
            try:
                folder.mkdir(mode=0o700)
            except FileExistsError:
                continue
            break
        fd = _lock(folder / "lock")
        assert fd is not None  # a folder made just now: nobody else holds its lock
        manifest = {
            "run": run_id,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "created_s": time.time(),
            "state": "running",
            "signature": self.signature,
            "command": _public(_shown_command(self.command)),
            "rank": rank,
            "world_size": world_size,
            "pid": os.getpid(),
            "sessions": 1,
        }
        run = _Run(folder, manifest, fd)
        if not run.write_manifest():
            os.close(fd)
            raise OSError(f"cannot write {folder / 'run.json'}")
        return run

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
            others = [m for m in self.earlier if m["run"] != self.run_id]
            legacy = self._legacy_folders()
            if others or legacy:
                parts = []
                if others:
                    parts.append(f"{len(others)} earlier runs of this model (newest: {describe(others[-1])})")
                if legacy:
                    parts.append(f"replies stored before runs existed ({LEGACY})")
                lines.append(
                    f"hvcu_context: {' and '.join(parts)} are NOT reused; reuse=all takes them, reuse=RUN[+RUN] "
                    f"some (list: python -m hvcu_tasks.models.request_cache {self.root})"
                )
        return lines

    # -- accounting --

    def tally(self, texts: list[Any]) -> None:
        """Count requests given to the model and their replies (a reply that is not real text leaves the run open)."""
        with self._lock:
            self._run.given += len(texts)
            self._run.missing += sum(1 for t in texts if not keepable(t))

    def failed(self, exc: BaseException) -> None:
        """End the run now as unfinished because a call raised: the same command (or a new wrapper) resumes it."""
        self._run.raised = type(exc).__name__
        self.end()

    def end(self) -> None:
        """End this run now (also done when the cache is garbage-collected or the process exits)."""
        self._finalizer()

    @property
    def state(self) -> str:
        """The run's state on disk: running, finished or unfinished."""
        return str(self._run.manifest.get("state"))

    # -- replies --

    def key(self, request: Any) -> str | None:
        """Return the key of a request under this identity, or None (sent uncached) when it cannot be keyed."""
        try:
            return digest([self.identity_digest, request])
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


def main(argv: list[str] | None = None) -> int:
    """List the runs of every model in a request cache: `python -m hvcu_tasks.models.request_cache [ROOT]`."""
    args = sys.argv[1:] if argv is None else argv
    if args:
        root = Path(args[0]).expanduser()
    else:
        located = cache_location("on", api=True)
        if located is None:  # pragma: no cover - cache_location raises instead
            return 1
        root = located
    folders = sorted(f for f in root.glob("*") if (f / "identity.json").is_file()) if root.is_dir() else []
    if not folders:
        print(f"no request cache under {root}")
        return 0
    for folder in folders:
        try:
            identity = json.loads((folder / "identity.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            identity = {}
        print(f"{folder}  {identity.get('backend', '?')} {json.dumps(identity.get('args', {}), sort_keys=True)}")
        for m in list_runs(folder):
            why = f"  ({m['why']})" if m.get("why") and m["status"] != "finished" else ""
            reused = "".join(f", {n} from {run}" for run, n in (m.get("reused") or {}).items())
            rank = f"rank {m.get('rank', 0)}/{m.get('world_size', 1)}"
            print(f"  {describe(m)}  {rank}  {m.get('replies', '?')} replies{reused}{why}")
        if any(folder.glob("*.jsonl")):
            print(f"  {LEGACY} (replies stored before runs existed)")
    return 0


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
        key = cache.key(kwargs)
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


if __name__ == "__main__":
    sys.exit(main())
