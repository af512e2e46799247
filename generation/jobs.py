"""Run one async job per item against the shared model client: resumable, sharded, written atomically.

Shared by MCTS synthesis and benchmark construction. Each finished item is one JSON file
`<folder>/<key>.json`, written by rename (never half-written); every model reply is committed to
`cache.sqlite` as it arrives, so a killed run resumes where it stopped without paying twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from generation.client import ChatClient, ClientConfig, ResponseCache, Usage
from hvcu_tasks.data import jsonio
from hvcu_tasks.data.files import write_atomic

T = TypeVar("T")
C = TypeVar("C")


def parse_shard(text: str) -> tuple[int, int]:
    """Parse 'I/N' (0 <= I < N)."""
    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError as exc:
        raise ValueError(f"--shard must look like I/N, got {text!r}") from exc
    if not 0 <= index < count:
        raise ValueError(f"--shard {text}: need 0 <= I < N")
    return index, count


def path_key(path: Path | str) -> str:
    """Return the stable id of an input file: a hash of its path as given."""
    return hashlib.sha1(str(path).encode()).hexdigest()[:16]


def in_shard(key: str, shard: tuple[int, int]) -> bool:
    """Whether an item belongs to shard I of N (by its hex key, so every machine agrees)."""
    return int(key, 16) % shard[1] == shard[0]


def load_settings(path: Path | None, cls: type[C]) -> C:
    """Read a settings dataclass from a JSON/YAML file; unknown keys are errors naming the file."""
    if path is None:
        return cls()
    text = Path(path).read_text(encoding="utf-8")
    try:
        if Path(path).suffix in {".yaml", ".yml"}:
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            data = jsonio.loads(text, source=path)
    except jsonio.JsonReadError as exc:
        raise ValueError(f"{path}: {exc.reason}") from exc
    except Exception as exc:  # yaml.YAMLError, without importing yaml for JSON files
        raise ValueError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {unknown}; known: {sorted(fields)}")
    for name, value in data.items():
        if isinstance(value, list):  # YAML/JSON lists stand for the dataclass's tuples
            data[name] = tuple(value)
    try:
        return cls(**data)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from exc


def read_records(folder: Path) -> dict[str, dict[str, Any]]:
    """Return every per-item record of a folder by key; a damaged file is an error naming it."""
    records = {}
    for f in sorted(Path(folder).glob("*.json")):
        try:
            records[f.stem] = jsonio.read_json(f)
        except jsonio.JsonReadError as exc:
            raise ValueError(f"{f}: damaged item record ({exc.reason}); delete it to redo that item") from exc
    return records


@dataclass
class JobRun:
    """What one pass over the items did: client usage, replies stored, items processed and not attempted."""

    usage: Usage
    replies_stored: int
    processed: int
    not_attempted: int = 0
    endpoint_down: str | None = None
    """Why the run stopped early: the endpoint failed too many calls in a row (None when it did not)."""


async def run_jobs(
    items: Sequence[tuple[str, T]],
    folder: Path,
    client_config: ClientConfig,
    work: Callable[[ChatClient, str, T], Awaitable[dict[str, Any]]],
    *,
    final: tuple[str, ...] = ("done",),
    desc: str = "items",
    progress: bool = True,
    postfix: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    describe: Callable[[T], dict[str, Any]] | None = None,
) -> JobRun:
    """Run `work` for every (key, item) whose record is not final yet; a raising job is recorded as failed.

    A failed item is retried by the next run. Once the endpoint is down (see `EndpointHealth`) no further
    item is started: those are counted as not attempted and the reason is returned in `endpoint_down`.
    `describe(item)` adds identifying fields to a failed record; `postfix(record)` feeds the progress bar.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cache = ResponseCache(folder.parent / "cache.sqlite")
    client = ChatClient(client_config, cache)
    finished = {k for k, r in read_records(folder).items() if r.get("status") in final}
    pending = [(k, item) for k, item in items if k not in finished]
    # More items than call slots in flight: while one item waits on a barrier, others keep the endpoint
    # busy; the client itself caps the calls at `concurrency`.
    slots = asyncio.Semaphore(4 * client_config.concurrency)
    skipped = [0]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(pending), desc=desc, unit="item")

    async def one(key: str, item: T) -> None:
        async with slots:
            if client.health.down:
                skipped[0] += 1
                return
            try:
                record = await work(client, key, item)
                write_atomic(folder / f"{key}.json", json.dumps(record, ensure_ascii=False))
            except Exception as exc:  # one bad item must not stop the run; it is recorded and retried next time
                record = {
                    **(describe(item) if describe else {}),
                    "key": key,
                    "status": "failed",
                    "error": f"{type(exc).__name__}: {exc}",
                }
                write_atomic(folder / f"{key}.json", json.dumps(record))  # ASCII escapes: always encodable
            if bar is not None:
                bar.update(1)
                extra = postfix(record) if postfix else {}
                bar.set_postfix(calls=client.usage.calls, cached=client.usage.cached, **extra)

    try:
        await asyncio.gather(*(one(k, item) for k, item in pending))
    finally:
        stored = len(cache)
        await client.close()
        cache.close()
        if bar is not None:
            bar.close()
    down = client.health.message() if client.health.down else None
    return JobRun(client.usage, stored, len(pending) - skipped[0], skipped[0], down)
