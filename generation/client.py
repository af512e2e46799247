"""One async client for any OpenAI-compatible chat endpoint, with a persistent cache and usage counts.

A call either returns a reply the model wrote or raises `ClientError`: HTTP errors, refused connections,
timeouts, bodies that are not a chat completion and empty replies are retried (exponential backoff with
jitter, honouring Retry-After) and then fail loudly; they are never turned into an answer. Only non-empty
replies that the caller accepts are cached (SQLite, keyed by model, messages, sampling parameters and
seed), so reruns and resumes never pay twice and never replay garbage. The client also watches the
endpoint: after `dead_after` consecutive failed attempts with no successful reply between them it is
declared down and every further call fails at once with `EndpointDown`, naming the URL and last error.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import mimetypes
import os
import random
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hvcu_tasks.data import jsonio

T = TypeVar("T")

RETRY_STATUSES = {408, 409, 429}
"""HTTP statuses worth retrying besides every 5xx."""
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
RETRY_AFTER_CAP_S = 60.0
"""Default longest single wait a server's Retry-After may impose (`--max-wait`); asking longer fails the call."""
CALLS_PER_POOL = 8
"""Concurrent calls per HTTP connection pool: httpx scans every connection of its pool for each request, so
at high concurrency several small pools cost far less CPU per call than one large one."""


def image_data_url(path: Path) -> str:
    """Return a file as a data URL with its true MIME type (from its bytes, not its name)."""
    data = Path(path).read_bytes()
    signatures = {b"\x89PNG": "image/png", b"\xff\xd8\xff": "image/jpeg", b"GIF8": "image/gif", b"RIFF": "image/webp"}
    mime = next((m for sig, m in signatures.items() if data.startswith(sig)), None)
    mime = mime or mimetypes.guess_type(str(path))[0]
    if mime is None or not mime.startswith("image/"):
        raise ValueError(f"{path}: not a recognised image file")
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


@dataclass(frozen=True)
class ClientConfig:
    """Where and how to call the model; transport settings are not part of the cache key."""

    model: str
    base_url: str
    api_key: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 6
    concurrency: int = 16
    dead_after: int = 20
    """Consecutive failed requests, with no successful reply between them, after which the endpoint is down."""
    dead_after_s: float = 60.0
    """Seconds without a successful reply after which 3 consecutive failed requests mean the endpoint is down."""
    max_wait_s: float = RETRY_AFTER_CAP_S
    """Longest single wait a rate limit's Retry-After may impose; a longer one fails the call at once."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("model must be a non-empty name")
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not isinstance(self.timeout_s, (int, float)) or not math.isfinite(self.timeout_s) or self.timeout_s <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout_s!r}")
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        if not isinstance(self.dead_after, int) or self.dead_after < 1:
            raise ValueError("dead_after must be at least 1")
        if not isinstance(self.dead_after_s, (int, float)) or not self.dead_after_s > 0:
            raise ValueError("dead_after_s must be a positive number of seconds")
        if not isinstance(self.max_wait_s, (int, float)) or not math.isfinite(self.max_wait_s) or self.max_wait_s < 0:
            raise ValueError(f"max_wait_s must be 0 or more seconds, got {self.max_wait_s!r}")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {self.base_url!r}")


@dataclass
class Usage:
    """What the client did: calls answered, answers served from cache, tokens, failures."""

    calls: int = 0
    cached: int = 0
    failures: int = 0
    """Calls that failed after every retry (HTTP error, no connection, timeout, empty or malformed body)."""
    retries: int = 0
    rate_limited: int = 0
    """HTTP 429 answers (each one also counts as a retry or, when it could not be waited out, a failure)."""
    unusable: int = 0
    """Replies the model wrote that the caller could not use (returned as errors, never cached)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        """Return the counters as a JSON-ready dict."""
        return dict(self.__dict__)


class ResponseCache:
    """A SQLite table of finished replies; each answer is committed as it arrives (safe across kill -9)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a commit survives the process being killed (not a power cut) and costs no fsync,
        # which would otherwise stall the event loop on every reply.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    @staticmethod
    def key(model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        """Return the cache key of a request: a hash of model, messages and sampling parameters (seed included)."""
        blob = json.dumps({"model": model, "messages": messages, "params": params}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        """Return a stored reply, or None."""
        with self._lock:
            row = self._db.execute("SELECT value FROM replies WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        value, _ = jsonio.loads_reply(row[0])
        return value if isinstance(value, dict) else None  # an unreadable row is asked again

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store a reply (first writer wins)."""
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO replies VALUES (?, ?)", (key, json.dumps(value)))

    def delete(self, key: str) -> None:
        """Forget a stored reply."""
        with self._lock:
            self._db.execute("DELETE FROM replies WHERE key = ?", (key,))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        self._db.close()


class ClientError(RuntimeError):
    """A call failed after its retries (no reply the model wrote came back); carries the reason."""


class EndpointDown(ClientError):
    """The endpoint failed so many attempts in a row that the run should stop instead of retrying for hours."""


class _Retryable(Exception):
    """One failed attempt that may succeed when repeated; `wait_s` is the server's Retry-After, if any."""

    def __init__(self, reason: str, wait_s: float | None = None, rate_limited: bool = False) -> None:
        super().__init__(reason)
        self.wait_s = wait_s
        self.rate_limited = rate_limited


@dataclass
class EndpointHealth:
    """Failed requests against one endpoint since its last successful reply; decides when it is down.

    Down after `dead_after` consecutive failed requests, or after at least 3 when no reply has succeeded for
    `dead_after_s` seconds (so an endpoint where every request times out stops after about one timeout).
    Rate-limit answers (HTTP 429) prove the server is alive: they count neither way.
    """

    base_url: str
    dead_after: int
    dead_after_s: float = 60.0
    consecutive: int = 0
    successes: int = 0
    last_error: str = ""
    down: bool = False
    since: float | None = None
    """monotonic time of the last success (or of the first request)."""

    def started(self) -> None:
        """Note that a request is about to be sent (the clock starts at the first one)."""
        if self.since is None:
            self.since = time.monotonic()

    def failed(self, reason: str) -> None:
        """Count one failed request."""
        self.consecutive += 1
        self.last_error = reason
        silent_for = time.monotonic() - (self.since if self.since is not None else time.monotonic())
        if self.consecutive >= self.dead_after or (self.consecutive >= 3 and silent_for >= self.dead_after_s):
            self.down = True

    def succeeded(self) -> None:
        """Count one successful reply (it resets the run of failures)."""
        self.successes += 1
        self.consecutive = 0
        self.since = time.monotonic()

    def message(self) -> str:
        """Return the one-line reason the endpoint is considered down."""
        since = "no successful reply yet" if not self.successes else "none succeeded in between"
        silent = time.monotonic() - self.since if self.since is not None else 0.0
        return (
            f"endpoint {self.base_url} looks down: {self.consecutive} consecutive failed requests in {silent:.0f} s "
            f"({since}); last error: {self.last_error}"
        )


def _retry_after(exc: Exception) -> float | None:
    """Return the Retry-After seconds of an HTTP error response, when it gives a number."""
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        wait = float(value) if value is not None else None
    except ValueError:
        return None
    return wait if wait is not None and math.isfinite(wait) and wait >= 0 else None


def _usable(text: object, accept: Callable[[str], Any] | None) -> bool:
    """Whether a stored reply is non-empty text that `accept` takes."""
    if not isinstance(text, str) or not text.strip():
        return False
    if accept is None:
        return True
    try:
        accept(text)
    except Exception:
        return False
    return True


def _reply_text(body: Any) -> str:
    """Return the text of a chat-completion body (parsed JSON), or raise _Retryable when it holds no usable reply."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list):
        raise _Retryable(f"malformed response body (not a chat completion): {str(body)[:120]!r}")
    if not choices:
        raise _Retryable("empty reply: the response has no choices")
    first = choices[0] if isinstance(choices[0], dict) else {}
    message = first.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str) or not content.strip():
        raise _Retryable(f"empty reply: message content is {content!r}")
    return content


def _token_count(usage: Any, name: str) -> int:
    """Return one token count of a body's `usage` object (0 when absent or not a count)."""
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass
class ChatClient:
    """Async chat completions with bounded concurrency, retries, caching, endpoint health and usage counts."""

    config: ClientConfig
    cache: ResponseCache | None = None
    usage: Usage = field(default_factory=Usage)
    say: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr, flush=True))
    """Where the once-per-run notice of a rate limit goes (stderr)."""

    def __post_init__(self) -> None:
        from openai import AsyncOpenAI

        key = self.config.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"  # local servers need no key
        # The SDK's own retries are off: every attempt goes through `_attempt`, so each one is seen by `health`.
        pools = max(1, math.ceil(self.config.concurrency / CALLS_PER_POOL))
        self._clients = [
            AsyncOpenAI(base_url=self.config.base_url, api_key=key, timeout=self.config.timeout_s, max_retries=0)
            for _ in range(pools)
        ]
        self._turn = 0
        self._slots = asyncio.Semaphore(self.config.concurrency)
        self._jitter = random.Random()  # spreads retries in time only; never touches a request or a result
        self.health = EndpointHealth(self.config.base_url, self.config.dead_after, self.config.dead_after_s)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        seed: int = 0,
        accept: Callable[[str], Any] | None = None,
    ) -> str:
        """Return the reply text for one chat, from the cache when this exact request was answered before.

        `accept(text)` may raise (a `ReplyError`, say) to refuse a reply the model wrote: the exception
        reaches the caller and the reply is not cached. A failed call raises `ClientError`.
        """
        params = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed}
        key = ResponseCache.key(self.config.model, messages, params)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            if _usable(hit.get("text"), accept):
                self.usage.cached += 1
                return hit["text"]
            self.cache.delete(key)  # stored by an older version (empty or unusable): ask again
        text = await self._call(messages, params)
        if accept is not None:
            try:
                accept(text)
            except Exception:
                self.usage.unusable += 1
                raise
        if self.cache is not None:
            self.cache.put(key, {"text": text})
        return text

    async def _call(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        """Make one call, retrying failed attempts; raise ClientError (EndpointDown when the endpoint is down)."""
        async with self._slots:
            for attempt in range(self.config.max_retries + 1):
                if self.health.down:
                    raise EndpointDown(self.health.message())
                self.health.started()
                try:
                    text = await self._attempt(messages, params)
                except _Retryable as exc:
                    if exc.rate_limited:
                        self._rate_limited(exc)
                    else:
                        self.health.failed(str(exc))
                    if self.health.down:
                        self.usage.failures += 1
                        raise EndpointDown(self.health.message()) from exc
                    if attempt == self.config.max_retries:
                        self.usage.failures += 1
                        raise ClientError(f"{exc} (after {attempt + 1} attempt(s))") from exc
                    if exc.wait_s is not None and exc.wait_s > self.config.max_wait_s:
                        self.usage.failures += 1
                        raise ClientError(
                            f"{exc}: it asks to wait {exc.wait_s:g} s (Retry-After), over --max-wait "
                            f"{self.config.max_wait_s:g} s; rerun later to finish"
                        ) from exc
                    self.usage.retries += 1
                    backoff = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt) * self._jitter.uniform(0.75, 1.25)
                    await asyncio.sleep(exc.wait_s if exc.wait_s is not None else backoff)
                    continue
                except ClientError as exc:
                    self.health.failed(str(exc))
                    self.usage.failures += 1
                    if self.health.down:
                        raise EndpointDown(self.health.message()) from exc
                    raise
                self.health.succeeded()
                self.usage.calls += 1
                return text
        raise AssertionError("unreachable: the loop returns or raises")

    def _rate_limited(self, exc: _Retryable) -> None:
        """Count one HTTP 429 answer; say the first one of the run, with the wait it asks for."""
        self.usage.rate_limited += 1
        if self.usage.rate_limited > 1:
            return
        asked = "no Retry-After" if exc.wait_s is None else f"Retry-After {exc.wait_s:g} s"
        self.say(
            f"rate limited: HTTP 429 from {self.config.base_url} ({asked}); a single wait is capped at --max-wait "
            f"{self.config.max_wait_s:g} s, a call asked to wait longer fails (said once; the count is in the summary)"
        )

    async def _attempt(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        """One HTTP request: the reply text, or _Retryable / ClientError saying why there is none."""
        import httpx
        import openai

        # A plain POST of the JSON body: the SDK's typed `chat.completions.create` walks every message part
        # (image data URLs included) to transform it and builds pydantic models of the reply, which cost
        # several ms of CPU per call and made the client the bottleneck at high concurrency. Errors, timeouts
        # and connection handling are the SDK's all the same. The body goes as ready JSON bytes (ASCII, so
        # no text can fail to encode), which also spares the SDK copying the messages for every attempt.
        body = json.dumps({"model": self.config.model, "messages": messages, **params}).encode()
        client = self._clients[self._turn % len(self._clients)]  # round robin over the connection pools
        self._turn += 1
        # The body comes back raw and is parsed by the one JSON reader: a body nested 100,000 deep is an
        # unusable reply, not a RecursionError.
        request = client.post("/chat/completions", content=body, cast_to=httpx.Response)
        try:
            # The SDK's timeout bounds each read; this bounds the whole attempt (a server that trickles bytes).
            response = await asyncio.wait_for(request, self.config.timeout_s)
        except asyncio.TimeoutError as exc:
            reason = f"timed out: no complete reply within {self.config.timeout_s:g} s from {self.config.base_url}"
            raise _Retryable(reason) from exc
        except openai.APIStatusError as exc:
            reason = f"HTTP {exc.status_code} from {self.config.base_url}: {str(exc)[:300]}"
            if exc.status_code in RETRY_STATUSES or exc.status_code >= 500:
                raise _Retryable(reason, _retry_after(exc), rate_limited=exc.status_code == 429) from exc
            raise ClientError(reason) from exc  # 400, 401, 403, 404, 422: repeating the request cannot help
        except (openai.APIConnectionError, openai.APIResponseValidationError, ValueError) as exc:
            # Connection refused or dropped, a timeout, a body that is not JSON or not a completion.
            raise _Retryable(f"{type(exc).__name__} from {self.config.base_url}: {str(exc)[:300]}") from exc
        parsed, unusable = jsonio.loads_reply(response.content)
        if unusable is not None:
            raise _Retryable(f"{unusable} from {self.config.base_url}")
        text = _reply_text(parsed)
        usage = parsed.get("usage")
        self.usage.prompt_tokens += _token_count(usage, "prompt_tokens")
        self.usage.completion_tokens += _token_count(usage, "completion_tokens")
        return text

    async def close(self) -> None:
        """Close the HTTP clients."""
        for client in self._clients:
            await client.close()
