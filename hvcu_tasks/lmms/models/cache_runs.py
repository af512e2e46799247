"""Runs of the request cache on disk: settings, locks, manifests, the listing of `hvcu cache list`.

Under an identity folder, `runs/<run id>/rank-<N>/` is one rank's share of a run: `run.json` (its manifest,
rewritten atomically and fsync'd), `lock` (held while the share is open) and append-only JSONL files
(request_cache.py writes them). The ranks of one data-parallel launch share a run id when torch.distributed
is running (rank 0's id, broadcast); otherwise each rank is a run of its own.

A share is `running` while open, `finished` when its model phase completed, else `unfinished`; a run is
finished (sealed) when all its shares are. Which replies a new cache may use is request_cache.py's rule.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hvcu_tasks.data import jsonio
from hvcu_tasks.data.files import write_atomic

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("hvcu_tasks")

RUNS = "runs"
"""Subfolder of an identity folder: one folder per run, one `rank-N` share in it per data-parallel rank."""

LEGACY = "v1"
"""The name `reuse=` gives the replies stored before runs existed (requests-v1, loose JSONL files)."""

_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_HELD = frozenset({errno.EWOULDBLOCK, errno.EAGAIN})


class LockUnsupported(OSError):
    """The file system refuses advisory locks (ENOLCK, EOPNOTSUPP, ...): live runs cannot be told apart."""


def reuse_setting(value: Any) -> tuple[str, ...]:
    """Return the `reuse` model argument as run names ('all', 'v1' or run ids joined by '+'); () for none.

    Values as lmms-eval parses them: False and 0 are none; other numbers are names (str).
    """
    if (
        value is None
        or value is False
        or (isinstance(value, (int, float)) and not isinstance(value, bool) and not value)
    ):
        return ()
    if value is True:
        raise ValueError(
            f"hvcu_context: reuse=true: say reuse=all, reuse=none, reuse={LEGACY} or run ids joined by '+'"
        )
    if isinstance(value, (int, float)):
        value = str(value)
    if isinstance(value, (list, tuple)):
        value = "+".join(str(v) for v in value)
    if not isinstance(value, str):
        raise ValueError(f"hvcu_context: reuse must be none, all, {LEGACY} or run ids joined by '+', got {value!r}")
    if value.strip().lower() in {"", "none", "off", "false", "no", "0"}:
        return ()
    names = tuple(dict.fromkeys(part.strip() for part in value.split("+")))
    bad = [n for n in names if not _RUN_NAME.fullmatch(n)]
    if bad:
        raise ValueError(f"hvcu_context: reuse={value}: {bad[0]!r} is not a run id (none, all, {LEGACY} or RUN+RUN)")
    return names


def run_name(value: Any) -> str | None:
    """Return the `run` model argument (a name: only unfinished runs of that name are resumed), or None.

    lmms-eval turns `run=2026`, `run=1.5`, `run=true` into numbers and booleans: their text is the name.
    """
    if value is None:
        return None
    if isinstance(value, (bool, int, float)):
        value = str(value)
    if isinstance(value, str) and _RUN_NAME.fullmatch(value.strip()):
        return value.strip()
    raise ValueError(f"hvcu_context: run must be a name of letters, digits, '.', '_' or '-', got {value!r}")


def lock(path: Path, retries: int = 5) -> int | None:
    """Open and exclusively lock a share's lock file; None when another open share holds it.

    Only EWOULDBLOCK/EAGAIN mean "held" (retried `retries` times, 50 ms apart, so that a probe's brief shared
    lock cannot keep an owner out of its own share); any other refusal raises LockUnsupported.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    if fcntl is None:  # pragma: no cover - no advisory locks (Windows): a live run is not told apart
        return fd
    for attempt in range(retries + 1):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as exc:
            if exc.errno not in _HELD:
                os.close(fd)
                raise LockUnsupported(
                    exc.errno, f"file locks are not supported in {path.parent} ({exc.strerror})"
                ) from None
        if attempt < retries:
            time.sleep(0.05)
    os.close(fd)
    return None


def live(folder: Path) -> bool:
    """Whether a share is open in some process now (its lock is held); the probe's shared lock is let go at once."""
    path = folder / "lock"
    if fcntl is None or not path.exists():  # pragma: no cover - no advisory locks
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in _HELD
    finally:
        os.close(fd)
    return False


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """Return a share's manifest (`run.json`), or None when it has none or it cannot be read."""
    try:
        data = jsonio.read_json(folder / "run.json")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("request cache: cannot read %s (%s); that run is left alone", folder / "run.json", exc)
        return None
    return data if isinstance(data, dict) and isinstance(data.get("run"), str) else None


def write_manifest(folder: Path, manifest: Mapping[str, Any]) -> bool:
    """Rewrite a share's manifest atomically and durably; warn and return False when it cannot."""
    try:
        write_atomic(folder / "run.json", json.dumps(manifest, indent=2, ensure_ascii=True) + "\n", durable=True)
    except OSError as exc:
        log.warning("request cache: cannot write %s (%s)", folder / "run.json", exc.strerror or exc)
        return False
    return True


def list_runs(identity_folder: Path) -> list[dict[str, Any]]:
    """Return an identity folder's runs, oldest first: run, folder, created_s, name, status, shares.

    status: `live` (a share open in some process now), `finished` (all its shares finished: sealed), else
    `unfinished` (killed, or a call raised); each share: folder, manifest, live.
    """
    found = []
    for folder in sorted((Path(identity_folder) / RUNS).glob("*")):
        shares = [(f, read_manifest(f)) for f in sorted(folder.glob("rank-*")) if f.is_dir()]
        rows = [{"folder": str(f), "manifest": m, "live": live(f)} for f, m in shares if m is not None]
        if not rows:
            continue
        first = min((r["manifest"] for r in rows), key=lambda m: m.get("created_s", 0))
        size = int(first.get("ranks", first.get("world_size", 1)) or 1)
        if any(r["live"] for r in rows):
            status = "live"
        elif len(rows) >= size and all(r["manifest"].get("state") == "finished" for r in rows):
            status = "finished"
        else:
            status = "unfinished"
        name = first.get("name", (first.get("command") or {}).get("run"))
        found.append(
            {"run": folder.name, "folder": str(folder), "created_s": first.get("created_s", 0), "name": name}
            | {"status": status, "shares": rows}
        )
    return sorted(found, key=lambda m: (m["created_s"], m["run"]))


def describe(run: Mapping[str, Any]) -> str:
    """Return a run as people read it: `ID (finished, 2026-12-01 19:26)`."""
    created = run.get("created_s")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(created)) if isinstance(created, (int, float)) else "?"
    return f"{run['run']} ({run.get('status', run.get('state', '?'))}, {when})"


def new_run_id() -> str:
    """Return a fresh run id: local start time and 4 random hex digits (20261201T192600-ab12)."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(2)}"


def agreed_run(rank: int, world_size: int) -> tuple[str, int]:
    """Return (run id, shares in the run): rank 0's new id on every rank when torch.distributed runs, else one's own."""
    mine = new_run_id()
    if world_size <= 1:
        return mine, 1
    try:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return mine, 1
        box = [mine if rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return str(box[0]), world_size
    except Exception as exc:  # noqa: BLE001 - no agreement possible: each rank is a run of its own
        log.warning("request cache: ranks cannot agree on a run id (%s); rank %d is a run of its own", exc, rank)
        return mine, 1


def listing(root: Path) -> list[str]:
    """Return the lines `hvcu cache list` prints: each identity of a cache root, then its runs with their shares."""
    folders = sorted(f for f in root.glob("*") if (f / "identity.json").is_file()) if root.is_dir() else []
    if not folders:
        return [f"no request cache under {root}"]
    lines = []
    for folder in folders:
        try:
            identity = jsonio.read_json(folder / "identity.json")
        except (OSError, ValueError):
            identity = {}
        lines.append(f"{folder}  {identity.get('backend', '?')} {json.dumps(identity.get('args', {}), sort_keys=True)}")
        for run in list_runs(folder):
            lines.append(f"  {describe(run)}" + (f"  run={run['name']}" if run["name"] else ""))
            for share in run["shares"]:
                m = share["manifest"]
                counts = [f"{m.get('requests', 0)} requests", f"{m.get('replies', '?')} replies stored"]
                counts += [f"{n} resumed from {src}" for src, n in (m.get("resumed") or {}).items()]
                counts += [f"{n} from {src}" for src, n in (m.get("reused") or {}).items()]
                counts += [f"{m['failed']} without a reply"] if m.get("failed") else []
                state = "live" if share["live"] else m.get("state", "?")
                why = f"  ({m['why']})" if m.get("why") else ""
                lines.append(f"    rank {m.get('rank', 0)}/{m.get('world_size', 1)}: {state}, {', '.join(counts)}{why}")
        if any(folder.glob("*.jsonl")):
            lines.append(f"  {LEGACY} (replies stored before runs existed)")
    return lines
