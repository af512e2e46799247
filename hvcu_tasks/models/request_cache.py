"""Per-request reply cache of `hvcu_context`: a killed paid run, rerun as it was, pays only what was in flight.

Each reply is stored the moment it arrives, keyed by the model's identity and the exact request:

- Backends that talk to an OpenAI-compatible server through an `openai` client (`openai`, `async_openai`)
  are cached at the client's `chat.completions.create` call, the one place where a single reply arrives
  while the backend runs many requests at once: the key is the request body itself (model, messages with
  each image's bytes, max_tokens, temperature, top_p, seed, ...) under the model identity and endpoint.
- Every other backend is cached by the wrapper: the key is the request's chat messages (each image by the
  SHA-256 of its file's bytes, never its path) and generation settings; the wrapper sends the requests not
  in the cache `chunk_size` at a time and stores each call's replies as it returns.

The model identity is the backend name, its model arguments (model_version, pretrained, base_url, ...; not
credentials nor knobs that do not change a reply, NEUTRAL_ARGS) and, for client backends, the endpoint the
client really talks to. One folder per identity, `<root>/<digest>/`, holds `identity.json` (what the digest
stands for) and append-only JSONL files, one per writing process (so data-parallel ranks and concurrent runs
never share a file). Each record is written with one `os.write` and fsync'd before the reply goes back to the
backend; a process killed mid-write leaves at most its file's last line torn, which readers skip with a
warning. Only real replies are kept: an error, None, an empty or blank reply, or lmms-eval's failure and
budget markers are never stored, so a rerun asks again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from hvcu_tasks.files import write_atomic

log = logging.getLogger("hvcu_tasks")

CACHE_FOLDER = "requests-v1"
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

_CREDENTIAL = re.compile(r"(key|token|secret|password)$", re.IGNORECASE)
"""Argument names that hold credentials: never part of the identity, never written to disk."""

FAILURE_MARKERS = ("[LMMS_EVAL_REQUEST_FAILED", "[LMMS_EVAL_BUDGET_EXCEEDED]")
"""Texts lmms-eval backends return in place of a reply when a request failed or the token budget ran out."""

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
    `requests-v1` subfolder. `cache=on` while $HVCU_CACHE_DIR turns caching off is an error.
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
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def model_identity(backend: str, args: Mapping[str, Any], endpoint: str | None = None) -> dict[str, Any]:
    """Return what identifies a model's replies: backend, reply-relevant arguments, and the endpoint when known."""
    kept = {k: v for k, v in args.items() if k not in NEUTRAL_ARGS and not _CREDENTIAL.search(k) and k != "cache"}
    identity: dict[str, Any] = {"backend": backend, "args": {k: _plain(v) for k, v in sorted(kept.items())}}
    if endpoint is not None:
        identity["endpoint"] = endpoint
    return identity


def _plain(value: Any) -> Any:
    """Return a model argument as JSON (a value with no JSON form by its text)."""
    try:
        return canonical(value)
    except Uncacheable:
        return str(value)


def keepable(text: Any) -> bool:
    """Whether a reply is worth storing: real, non-blank text that is not an lmms-eval failure marker."""
    return isinstance(text, str) and bool(text.strip()) and not text.startswith(FAILURE_MARKERS)


# ---- the store ----


def read_replies(folder: Path) -> dict[str, Reply]:
    """Return every readable record of a cache folder's JSONL files; an unreadable line is skipped with a warning."""
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


class RequestCache:
    """Replies of one model identity under `root`: read at start, each new one appended and fsync'd as it arrives."""

    def __init__(self, root: Path | str, identity: Mapping[str, Any]) -> None:
        """Open (creating it, private) the folder of this identity and read its stored replies."""
        self.identity = dict(identity)
        self.identity_digest = digest(self.identity)
        self.folder = Path(root) / self.identity_digest[:32]
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        card = self.folder / "identity.json"
        if not card.exists():
            write_atomic(card, json.dumps(self.identity, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        self.replies = read_replies(self.folder)
        self.loaded = len(self.replies)
        self.hits = 0
        self.stored = 0
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._broken = False
        self.path = self.folder / f"{time.time_ns()}-{os.getpid()}-{secrets.token_hex(4)}.jsonl"

    def key(self, request: Any) -> str | None:
        """Return the key of a request under this identity, or None when part of it has no content identity."""
        try:
            return digest([self.identity_digest, request])
        except Uncacheable as exc:
            log.debug("request cache: request not cached (%s)", exc)
            return None

    def get(self, key: str | None) -> Reply | None:
        """Return the stored reply for a key, or None."""
        reply = None if key is None else self.replies.get(key)
        if reply is not None:
            self.hits += 1
        return reply

    def put(self, key: str | None, text: Any, finish_reason: str | None = None) -> bool:
        """Store a real reply durably (written and fsync'd before returning); return whether it was stored."""
        if key is None or not keepable(text) or self._broken:
            return False
        line = json.dumps({"key": key, "reply": text, "finish_reason": finish_reason}, ensure_ascii=False) + "\n"
        data = line.encode("utf-8")
        try:
            with self._lock:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                fd = self._fd
                while data:
                    data = data[os.write(fd, data) :]
                self.replies.setdefault(key, Reply(text, finish_reason))
                self.stored += 1
            os.fsync(fd)
        except OSError as exc:
            self._broken = True
            log.warning(
                "request cache: cannot write %s (%s); later replies are not cached (a killed run pays for them again)",
                self.path,
                exc.strerror or exc,
            )
            return False
        return True

    def __len__(self) -> int:
        return len(self.replies)

    def close(self) -> None:
        """Close this process's record file."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


# ---- OpenAI clients ----


def openai_client(model: Any) -> Any:
    """Return the `openai` client (sync or async) a backend sends its requests through, or None."""
    try:
        import openai
    except ImportError:  # pragma: no cover - lmms-eval depends on openai
        return None
    client = getattr(model, "client", None)
    return client if isinstance(client, (openai.OpenAI, openai.AsyncOpenAI)) else None


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
                    "finish_reason": reply.finish_reason or "stop",
                    "message": {"role": "assistant", "content": reply.text},
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
    )


def _completion_reply(response: Any) -> tuple[Any, str | None]:
    """Return (text, finish reason) of a chat completion's first choice; (None, None) when it has none."""
    try:
        choice = response.choices[0]
    except (AttributeError, IndexError, TypeError):
        return None, None
    message = getattr(choice, "message", None)
    finish = getattr(choice, "finish_reason", None)
    return getattr(message, "content", None), finish if isinstance(finish, str) else None


def hook_client(client: Any, cache: RequestCache) -> None:
    """Make `client.chat.completions.create` answer from the cache and store each real reply as it arrives."""
    completions = client.chat.completions
    create: Callable[..., Any] = completions.create

    def lookup(args: tuple, kwargs: dict) -> tuple[str | None, Reply | None]:
        key = None if args else cache.key(kwargs)
        return key, cache.get(key)

    def store(key: str | None, response: Any) -> None:
        text, finish = _completion_reply(response)
        cache.put(key, text, finish)

    import openai

    if isinstance(client, openai.AsyncOpenAI):

        async def cached_create_async(*args: Any, **kwargs: Any) -> Any:
            """AsyncCompletions.create through the request cache."""
            key, reply = lookup(args, kwargs)
            if reply is not None:
                return stored_completion(reply, kwargs.get("model"))
            response = await create(*args, **kwargs)
            store(key, response)
            return response

        completions.create = cached_create_async
        return

    def cached_create(*args: Any, **kwargs: Any) -> Any:
        """Completions.create through the request cache."""
        key, reply = lookup(args, kwargs)
        if reply is not None:
            return stored_completion(reply, kwargs.get("model"))
        response = create(*args, **kwargs)
        store(key, response)
        return response

    completions.create = cached_create
