"""Runs of the request cache on disk: names, locks, manifests, the run id ranks agree on, `hvcu cache list`.

`runs/<run id>/rank-<N>/` of an identity folder is one rank's share: `run.json` (its manifest), `lock` (flock'd
while open) and `replies.jsonl`. A run is `live` while a share is open, `finished` (sealed) when all are.
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

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, so no default cache
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("hvcu_tasks")

RUNS = "runs"
"""Subfolder of an identity folder: one folder per run, one `rank-N` share in it per data-parallel rank."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class LockUnsupported(OSError):
    """The file system refuses advisory locks (ENOLCK, EOPNOTSUPP, ...): live runs cannot be told apart."""


def reuse_setting(value: Any) -> tuple[str, ...]:
    """Return the `reuse` model argument as run names ('all' or run ids joined by '+'); () for none, false or 0."""
    if value is True:
        raise ValueError("hvcu_context: reuse=true: say reuse=all, reuse=none or run ids joined by '+'")
    if value is None or (isinstance(value, (int, float)) and value == 0):
        return ()
    value = "+".join(map(str, value)) if isinstance(value, (list, tuple)) else value
    if not isinstance(value, (str, int, float)):
        raise ValueError(f"hvcu_context: reuse must be none, all or run ids joined by '+', got {value!r}")
    if str(value).strip().lower() in {"", "none", "off", "false", "no", "0"}:
        return ()
    names = tuple(dict.fromkeys(part.strip() for part in str(value).split("+")))
    bad = [n for n in names if not _NAME.fullmatch(n)]
    if bad:
        raise ValueError(f"hvcu_context: reuse={value}: {bad[0]!r} is not a run id (none, all or RUN+RUN)")
    return names


def run_name(value: Any) -> str | None:
    """Return the `run` model argument (lmms-eval's numbers and booleans by their text), or None when not given."""
    text = str(value).strip() if isinstance(value, (str, bool, int, float)) else ""
    if value is not None and not _NAME.fullmatch(text):
        raise ValueError(f"hvcu_context: run must be a name of letters, digits, '.', '_' or '-', got {value!r}")
    return None if value is None else text


def lock(path: Path, retries: int = 5) -> int | None:
    """Open and exclusively lock a share's lock file; None when another open share holds it.

    A held lock is tried `retries` more times, 50 ms apart, so that a probe's brief shared lock never keeps an owner
    out of its own share; any other refusal raises LockUnsupported.
    """
    if fcntl is None:  # pragma: no cover - Windows
        raise LockUnsupported(errno.ENOLCK, f"file locks are not supported in {path.parent} (no fcntl)")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    for attempt in range(retries + 1):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            time.sleep(0.05 if attempt < retries else 0)
        except OSError as exc:
            os.close(fd)
            why = f"file locks are not supported in {path.parent} ({exc.strerror})"
            raise LockUnsupported(exc.errno, why) from None
    os.close(fd)
    return None


def live(folder: Path) -> bool:
    """Whether a share is open in some process now (its lock is held); the probe's shared lock is let go at once."""
    try:
        fd = os.open(folder / "lock", os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError as exc:
        return isinstance(exc, BlockingIOError)
    finally:
        os.close(fd)


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """Return a share's manifest (`run.json`), or None when it has none or it cannot be read (with a warning)."""
    try:
        data = jsonio.read_json(folder / "run.json")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("request cache: cannot read %s (%s); that run is left alone", folder / "run.json", exc)
        return None
    return data if isinstance(data, dict) and isinstance(data.get("run"), str) else None


def list_runs(identity_folder: Path) -> list[dict[str, Any]]:
    """Return an identity folder's runs, oldest first: run, created_s, name, status (live, finished or unfinished),
    shares (folder, manifest, live)."""
    found = []
    for folder in sorted((Path(identity_folder) / RUNS).glob("*")):
        shares = [(f, read_manifest(f)) for f in sorted(folder.glob("rank-*"))]
        rows = [{"folder": str(f), "manifest": m, "live": live(f)} for f, m in shares if m is not None]
        if rows:
            first = min((r["manifest"] for r in rows), key=lambda m: m.get("created_s", 0))
            done = len(rows) >= first.get("ranks", 1) and all(r["manifest"].get("state") == "finished" for r in rows)
            status = "live" if any(r["live"] for r in rows) else "finished" if done else "unfinished"
            run = {"run": folder.name, "created_s": first.get("created_s", 0), "name": first.get("name")}
            found.append(run | {"status": status, "shares": rows})
    return sorted(found, key=lambda m: (m["created_s"], m["run"]))


def describe(run: Mapping[str, Any]) -> str:
    """Return a run as people read it: `ID (finished, 2026-12-01 19:26)`."""
    return f"{run['run']} ({run['status']}, {time.strftime('%Y-%m-%d %H:%M', time.localtime(run['created_s']))})"


def new_run_id() -> str:
    """Return a fresh run id: local start time and 4 random hex digits (20261201T192600-ab12)."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(2)}"


def agreed_run(rank: int, world_size: int) -> tuple[str, int]:
    """Return (run id, shares in the run): rank 0's new id on every rank when torch.distributed runs, else one's own."""
    mine = new_run_id()
    try:
        import torch.distributed as dist

        if world_size <= 1 or not (dist.is_available() and dist.is_initialized()):
            return mine, 1
        box = [mine if rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return str(box[0]), world_size
    except Exception as exc:  # noqa: BLE001 - no agreement possible: each rank is a run of its own
        log.warning("request cache: ranks cannot agree on a run id (%s); rank %d is a run of its own", exc, rank)
        return mine, 1


def listing(root: Path) -> list[str]:
    """Return the lines `hvcu cache list` prints: each identity of a cache root, then its runs with their shares."""
    lines = []
    for folder in sorted(f for f in root.glob("*") if (f / "identity.json").is_file()):
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
                state, why = "live" if share["live"] else m.get("state", "?"), f"  ({m['why']})" if m.get("why") else ""
                lines.append(f"    rank {m.get('rank', 0)}/{m.get('world_size', 1)}: {state}, {', '.join(counts)}{why}")
    return lines or [f"no request cache under {root}"]
