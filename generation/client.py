"""One async client for any OpenAI-compatible chat endpoint, with a persistent cache and usage counts.

Retries (429, 5xx, timeouts, dropped connections, with exponential backoff, jitter and Retry-After)
are the openai SDK's own; this layer adds bounded concurrency, a request timeout, a SQLite cache keyed
by (model, messages, sampling parameters, seed) so reruns and resumes never pay twice, and counters.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import mimetypes
import os
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {self.base_url!r}")


@dataclass
class Usage:
    """What the client did: calls made, answers served from cache, tokens, failures."""

    calls: int = 0
    cached: int = 0
    failures: int = 0
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
        return None if row is None else json.loads(row[0])

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store a reply (first writer wins)."""
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO replies VALUES (?, ?)", (key, json.dumps(value)))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        self._db.close()


class ClientError(RuntimeError):
    """A request failed after the SDK's retries; carries the reason."""


@dataclass
class ChatClient:
    """Async chat completions with bounded concurrency, caching and usage counts."""

    config: ClientConfig
    cache: ResponseCache | None = None
    usage: Usage = field(default_factory=Usage)

    def __post_init__(self) -> None:
        from openai import AsyncOpenAI

        key = self.config.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"  # local servers need no key
        self._client = AsyncOpenAI(
            base_url=self.config.base_url,
            api_key=key,
            timeout=self.config.timeout_s,
            max_retries=self.config.max_retries,
        )
        self._slots = asyncio.Semaphore(self.config.concurrency)

    async def complete(
        self, messages: list[dict[str, Any]], *, temperature: float = 0.0, max_tokens: int = 1024, seed: int = 0
    ) -> str:
        """Return the reply text for one chat, from the cache when this exact request was answered before."""
        from openai import OpenAIError

        params = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed}
        key = ResponseCache.key(self.config.model, messages, params)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            self.usage.cached += 1
            return hit["text"]
        async with self._slots:
            try:
                response = await self._client.chat.completions.create(
                    model=self.config.model, messages=messages, **params
                )
            except (OpenAIError, ValueError) as exc:  # ValueError: a body that is not JSON
                self.usage.failures += 1
                raise ClientError(f"{type(exc).__name__}: {exc}") from exc
        self.usage.calls += 1
        text = (response.choices[0].message.content or "") if response.choices else ""
        if response.usage is not None:
            self.usage.prompt_tokens += response.usage.prompt_tokens or 0
            self.usage.completion_tokens += response.usage.completion_tokens or 0
        if self.cache is not None:
            self.cache.put(key, {"text": text})
        return text

    async def close(self) -> None:
        """Close the HTTP client."""
        await self._client.close()
