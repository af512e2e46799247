"""Runs of the request cache: which earlier replies a new `hvcu_context` wrapper may use.

Layout under an identity folder: `runs/<run id>/rank-<N>/` holds one rank's share of a run: `run.json` (its
manifest, rewritten atomically and fsync'd), `lock` (held while the share is open) and append-only JSONL
files (request_cache.py writes them). Every rank of one data-parallel command shares one run id.

- **Signature** (`command_signature`, `run_signature`): what makes two runs "the same command". For
  lmms-eval's CLI: the arguments in REQUEST_ARGS (those that change which requests are sent; every other
  argument is classified in NOT_REQUEST_ARGS with its reason), a `--config` file by its resolved path and
  content, the entry's own arguments where simple_evaluate is on the stack (tasks, limit, gen_kwargs, ...:
  tells apart the entries of one `--config`), and the ordinal of this cache among those opened in this
  process with the same identity and signature. Elsewhere: the script's path and arguments. `run=NAME`
  stands for the command. The world size is part of it, the rank is not (a rank has its share).
- **State**: a share is `running` while open, `finished` when the process's model phase completed (every
  call returned, no exception out of the wrapper, no unhandled exception at exit), else `unfinished`; a run
  is finished when every rank's share is. By default a cache resumes the newest unfinished run of its
  signature that no live process holds, else starts a new one; it reads no other run.
- **Reuse** (`reuse_setting`): `all`, run ids joined by '+', `v1` (the layout before runs), `none`.
- **Listing** (`listing`): every identity's runs, for `hvcu cache list`.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import logging
import os
import re
import secrets
import sys
import threading
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

REQUEST_ARGS = (
    "model",  # the backend (also in the identity)
    "tasks",  # which documents and prompts
    "limit",  # how many documents
    "offset",  # which documents
    "num_fewshot",  # the prompt
    "system_instruction",  # the prompt
    "apply_chat_template",  # the prompt
    "fewshot_as_multiturn",  # the prompt
    "gen_kwargs",  # generation settings (also in each key)
    "seed",  # few-shot sampling and the seed sent with each request
    "include_path",  # which task files (resolved to an absolute path)
    "process_with_media",  # how documents are built
    "force_simple",  # which model interface answers
    "repeats",  # how many samples per request
    "config",  # resolved path and content (an entry's own arguments: from simple_evaluate)
)
"""lmms-eval arguments that change which requests are sent: the run signature of an lmms-eval command."""

NOT_REQUEST_ARGS = {
    "model_args": "the model identity already (its knobs and cache/reuse/run never change a request)",
    "output_path log_samples log_samples_suffix write_out show_config verbosity timezone predict_only tui "
    "wandb_args wandb_log_samples swanlab_args swanlab_log_samples hf_hub_log_args agentic_trace_mode": (
        "where and how results are written or shown"
    ),
    "batch_size max_batch_size device process_docs_parallel": "how requests are sent or scored, not which",
    "max_tokens": "a token budget stops a run early; raising it must resume the stopped run",
    "use_cache cache_requests": "lmms-eval's own caches of replies and of built requests",
    "check_integrity trust_remote_code": "checks and permissions: the run fails or runs the same requests",
    "baseline alpha power correlation reasoning_tags launcher_args": "scoring and statistics after the replies",
}
"""Every other lmms-eval argument, grouped with the reason it is left out of the signature."""

SHOWN_ARGS = ("tasks", "limit", "model", "run", "program")
"""The only command fields written to a run's manifest (no argument value can carry a credential there)."""

_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_HELD = frozenset({errno.EWOULDBLOCK, errno.EAGAIN})
_OPENED: dict[tuple[str, str], int] = {}
_OPENED_LOCK = threading.Lock()


class LockUnsupported(OSError):
    """The file system refuses advisory locks (ENOLCK, EOPNOTSUPP, ...): runs cannot be told apart safely."""


# ---- signature ----


def _plain(value: Any) -> Any:
    """Return a JSON-ready form of an argument value (anything else by its repr)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    name = getattr(value, "task_name", None) or getattr(getattr(value, "config", None), "task", None)
    return str(name) if name else f"<{type(value).__name__}>"


def sig_digest(value: Any) -> str:
    """Return the SHA-256 (hex) of a value's sorted JSON."""
    text = json.dumps(_plain(value), sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def is_lmms_eval(program: str) -> bool:
    """Whether argv[0] is lmms-eval's CLI (the `lmms-eval` script or `python -m lmms_eval`)."""
    path = Path(program)
    return path.name in ("lmms-eval", "lmms_eval") or (path.name == "__main__.py" and path.parent.name == "lmms_eval")


def _lmms_eval_args(program: str, args: list[str]) -> dict[str, Any] | None:
    """Return lmms-eval's parsed REQUEST_ARGS (None when the command line does not parse)."""
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
    parsed = vars(namespace)
    values = {k: parsed.get(k) for k in REQUEST_ARGS}
    for name in ("config", "include_path"):
        if isinstance(values[name], str) and values[name]:
            values[name] = os.path.abspath(os.path.expanduser(values[name]))
    if values["config"]:
        try:
            values["config_sha256"] = hashlib.sha256(Path(values["config"]).read_bytes()).hexdigest()
        except OSError:
            pass
    return values


def entry_arguments() -> dict[str, Any] | None:
    """Return the arguments of the lmms-eval simple_evaluate call on the stack (one `--config` entry), or None."""
    frame = sys._getframe(1)
    names = ("tasks", "limit", "offset", "num_fewshot", "gen_kwargs", "system_instruction", "repeats")
    names += ("apply_chat_template", "fewshot_as_multiturn", "random_seed", "fewshot_random_seed", "force_simple")
    while frame is not None:
        code = frame.f_code
        if code.co_name == "simple_evaluate" and frame.f_globals.get("__name__", "").startswith("lmms_eval"):
            return {n: _plain(frame.f_locals.get(n)) for n in names}
        frame = frame.f_back
    return None


def command_signature(argv: list[str] | None = None, name: str | None = None) -> dict[str, Any]:
    """Return what makes two runs "the same command": `name` if given, else the command's request arguments.

    lmms-eval's CLI: its REQUEST_ARGS (a `--config` file by resolved path and content) plus the entry's own
    arguments when simple_evaluate is running; any other program: its path and arguments.
    """
    if name is not None:
        return {"run": name}
    argv = list(sys.argv if argv is None else argv)
    program, args = (argv[0] if argv else ""), argv[1:]
    if is_lmms_eval(program):
        parsed = _lmms_eval_args(program, args)
        if parsed is not None:
            entry = entry_arguments()
            return {"lmms_eval": parsed, **({"entry": entry} if entry is not None else {})}
    return {"program": os.path.abspath(program) if program else "", "argv": args}


def shown_command(command: Mapping[str, Any]) -> dict[str, Any]:
    """Return the harmless fields of a signature (SHOWN_ARGS) as written to a manifest: never an argument value."""
    if "run" in command:
        return {"run": command["run"]}
    if "argv" in command:
        return {"program": Path(str(command.get("program", ""))).name}
    found = {**(command.get("lmms_eval") or {}), **(command.get("entry") or {})}
    shown: dict[str, Any] = {}
    tasks = found.get("tasks")
    if isinstance(tasks, list):
        tasks = ",".join(str(t) for t in tasks)
    if isinstance(tasks, str) and re.fullmatch(r"[\w.,-]*", tasks):
        shown["tasks"] = tasks
    if isinstance(found.get("limit"), (int, float)) and not isinstance(found.get("limit"), bool):
        shown["limit"] = found["limit"]
    if isinstance(found.get("model"), str) and re.fullmatch(r"[\w.-]+", found["model"]):
        shown["model"] = found["model"]
    return shown


def run_signature(identity_digest: str, command: Mapping[str, Any], world_size: int) -> tuple[str, int]:
    """Return (signature digest, ordinal): the n-th cache this process opens with one identity and command is n."""
    base = sig_digest({"command": command, "world_size": world_size})
    with _OPENED_LOCK:
        ordinal = _OPENED.get((identity_digest, base), 0) + 1
        _OPENED[(identity_digest, base)] = ordinal
    return (base if ordinal == 1 else sig_digest({"base": base, "ordinal": ordinal})), ordinal


def forget_opened() -> None:
    """Forget the caches this process opened (the next one of each command is the first again: a fresh process)."""
    with _OPENED_LOCK:
        _OPENED.clear()


# ---- model arguments ----


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
    """Return the `run` model argument (a name standing for the command line in the signature), or None.

    lmms-eval turns `run=2026`, `run=1.5`, `run=true` into numbers and booleans: their text is the name.
    """
    if value is None:
        return None
    if isinstance(value, (bool, int, float)):
        value = str(value)
    if isinstance(value, str) and _RUN_NAME.fullmatch(value.strip()):
        return value.strip()
    raise ValueError(f"hvcu_context: run must be a name of letters, digits, '.', '_' or '-', got {value!r}")


# ---- locks ----


def lock(path: Path, retries: int = 0) -> int | None:
    """Open and exclusively lock a share's lock file; None when another open share (or a probe) holds it.

    Only EWOULDBLOCK/EAGAIN mean "held" (retried `retries` times, 50 ms apart, so that a probe's brief shared
    lock cannot make an owner skip its own run); any other refusal raises LockUnsupported.
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
    """Whether a share is open in some process now (its lock is held); a shared probe never blocks its owner long."""
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


# ---- manifests and listing ----


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


def share_folder(run_folder: Path, rank: int) -> Path:
    """Return the folder of one rank's share of a run."""
    return run_folder / f"rank-{rank}"


def _shares(run_folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Return (folder, manifest) of a run's shares (a run of the first layout is its own rank-0 share)."""
    if (run_folder / "run.json").is_file():
        found = read_manifest(run_folder)
        return [(run_folder, found)] if found else []
    shares = []
    for folder in sorted(run_folder.glob("rank-*")):
        manifest = read_manifest(folder) if folder.is_dir() else None
        if manifest is not None:
            shares.append((folder, manifest))
    return shares


def list_runs(identity_folder: Path) -> list[dict[str, Any]]:
    """Return an identity folder's runs, oldest first: id, created_s, signature, world_size, status, shares.

    status: `live` (a share open in some process now), `finished` (every rank's share finished), else
    `unfinished` (killed, or a call raised); each share: folder, manifest, live.
    """
    found = []
    for folder in sorted((Path(identity_folder) / RUNS).glob("*")):
        shares = _shares(folder) if folder.is_dir() else []
        if not shares:
            continue
        rows = [{"folder": str(f), "manifest": m, "live": live(f)} for f, m in shares]
        first = min((m for _f, m in shares), key=lambda m: m.get("created_s", 0))
        world = int(first.get("world_size", 1) or 1)
        if any(r["live"] for r in rows):
            status = "live"
        elif len(rows) >= world and all(r["manifest"].get("state") == "finished" for r in rows):
            status = "finished"
        else:
            status = "unfinished"
        found.append(
            {
                "run": folder.name,
                "folder": str(folder),
                "created_s": first.get("created_s", 0),
                "signature": first.get("signature"),
                "world_size": world,
                "status": status,
                "shares": rows,
            }
        )
    return sorted(found, key=lambda m: (m.get("created_s", 0), m["run"]))


def describe(run: Mapping[str, Any]) -> str:
    """Return a run as people read it: `ID (finished, 2026-12-01 19:26)`."""
    created = run.get("created_s")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(created)) if isinstance(created, (int, float)) else "?"
    return f"{run['run']} ({run.get('status', run.get('state', '?'))}, {when})"


def new_run_id() -> str:
    """Return a fresh run id: local start time and 4 random hex digits (20261201T192600-ab12)."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(2)}"


def agreed_run_id(proposal: str | None, rank: int, world_size: int) -> str | None:
    """Return rank 0's run id on every rank when torch.distributed is running (else `proposal` unchanged)."""
    if world_size <= 1:
        return proposal
    try:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return proposal
        box = [proposal if rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]
    except Exception as exc:  # noqa: BLE001 - no agreement possible: each rank keeps its own choice
        log.warning("request cache: ranks cannot agree on a run id (%s); rank %d decides alone", exc, rank)
        return proposal


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
            shown = run["shares"][0]["manifest"].get("command") or {}
            what = " ".join(f"{k}={v}" for k, v in shown.items())
            lines.append(f"  {describe(run)}  {what}".rstrip())
            for share in run["shares"]:
                m = share["manifest"]
                reused = "".join(f", {n} from {src}" for src, n in (m.get("reused") or {}).items())
                failed = f", {m['failed']} without a reply" if m.get("failed") else ""
                why = f"  ({m['why']})" if m.get("why") else ""
                state = "live" if share["live"] else m.get("state", "?")
                lines.append(
                    f"    rank {m.get('rank', 0)}/{m.get('world_size', 1)}: {state}, {m.get('requests', 0)} requests, "
                    f"{m.get('replies', '?')} replies stored{reused}{failed}{why}"
                )
        if any(folder.glob("*.jsonl")):
            lines.append(f"  {LEGACY} (replies stored before runs existed)")
    return lines
