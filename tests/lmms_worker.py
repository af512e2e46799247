"""A long-lived lmms-eval for the tests: import lmms-eval and the plugin once, then fork one run per call.

Starting `lmms-eval` costs 6-30 s of imports and task-folder indexing for a replay evaluation that takes under a
second. Where the process itself is not what a test checks, `run()` sends the command line to a worker process
(this file run as a script) that has imported `lmms_eval.__main__` (which loads this package's entry point) and
indexed lmms-eval's own task folder once. For each call the worker forks: the child starts from that same
just-imported state (so no cache of hvcu_tasks, no hook, no logger or environment change of an earlier call can
leak into it), takes the call's whole environment, working folder and argv, writes its stdout and stderr to
files, runs what the `lmms-eval` console script runs (`lmms_eval.cli.dispatch.main`), runs the exit handlers
and exits with the status the console script would have. The worker replies with that status.

What a fresh process reads at import time must match: the worker is started with the call's environment, and
calls whose environment differs in anything but the variables read at call time (IMPORT_FREE) go to a worker
started with theirs (a pool of at most POOL_SIZE workers, the least recently used one closed first).

Only lmms-eval's own task folder (site-packages, unchanged during a test session) is indexed once; this package's
task folder and every --include_path are indexed by each run, as the CLI does.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

IMPORT_FREE = frozenset(
    {
        "HVCU_BENCH_DATA",
        "HVCU_BENCH_REVISION",
        "HVCU_CACHE_DIR",
        "HVCU_IMAGE_CACHE_MB",
        "HVCU_NO_ROUND_ROUTING",
        "OPENAI_API_KEY",
        "PYTEST_CURRENT_TEST",
        "VERBOSITY",
        "HVCU_VLLM_STANDIN_LOG",
        "HVCU_VLLM_STANDIN_CALL_S",
        "HVCU_VLLM_STANDIN_CONV_S",
        "HVCU_VLLM_STANDIN_SLEEP",
    }
)
"""Environment variables read when used, not at import (hvcu_tasks/settings.py reads HVCU_* on every call, the
stand-in vLLM of tests/standins its variables on every engine call; HVCU_NO_AUTO_TASKS is read when the entry
point loads, so it is not here)."""
POOL_SIZE = 3
STARTUP_TIMEOUT = 300.0


@dataclass
class Result:
    """One lmms-eval run: its exit status, stdout and stderr."""

    returncode: int
    stdout: str
    stderr: str


def _import_key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The part of an environment a fresh process would read at import time."""
    return tuple(sorted((k, v) for k, v in env.items() if k not in IMPORT_FREE))


class Worker:
    """One worker process (this file as a script) and the pipe to it."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-P", str(Path(__file__).resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        self.runs = 0
        ready = self._reply(STARTUP_TIMEOUT)
        if ready.get("ready") is not True:
            self.close()
            raise RuntimeError(f"the lmms-eval worker did not start: {ready}")

    def _reply(self, timeout: float) -> dict:
        """Read the worker's next reply line, or raise TimeoutError after `timeout` seconds."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError(f"the lmms-eval worker gave no reply in {timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the lmms-eval worker exited (status {self.proc.wait()})")
        return json.loads(line)

    def run(self, argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> Result:
        """Run `lmms-eval ARGV` in a forked child with `env` and `cwd`; return its status and output."""
        assert self.proc.stdin is not None
        with tempfile.TemporaryDirectory(prefix="lmms-worker-") as folder:
            out, err = Path(folder) / "stdout", Path(folder) / "stderr"
            request = {"argv": argv, "env": env, "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}
            request["timeout"] = timeout
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            reply = self._reply(timeout + 60)
            self.runs += 1
            read = lambda path: path.read_text(errors="replace") if path.exists() else ""  # noqa: E731
            return Result(int(reply["returncode"]), read(out), read(err))

    def close(self) -> None:
        """Stop the worker and anything it started."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


class Pool:
    """Workers by the import-time part of their environment (at most POOL_SIZE, least recently used closed)."""

    def __init__(self) -> None:
        self.workers: OrderedDict[tuple, Worker] = OrderedDict()
        self.started = 0

    def run(self, argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 900.0) -> Result:
        """Run `lmms-eval ARGV` as a fresh process with `env` in `cwd` would; return its status and output."""
        key = _import_key(env)
        worker = self.workers.pop(key, None)
        if worker is None or worker.proc.poll() is not None:
            while len(self.workers) >= POOL_SIZE:
                self.workers.popitem(last=False)[1].close()
            worker = Worker(env)
            self.started += 1
        try:
            result = worker.run(argv, env, cwd, timeout)
        except BaseException:  # a timeout, a dead worker, pytest-timeout: this worker's state is unknown
            worker.close()
            raise
        self.workers[key] = worker
        return result

    def close(self) -> None:
        """Stop every worker."""
        while self.workers:
            self.workers.popitem()[1].close()


POOL = Pool()
"""This process's workers (one pytest process each, so one set per xdist worker)."""


# ---- the worker process ------------------------------------------------------------------------------------------


def index_lmms_eval_tasks_once() -> Callable[[], None]:
    """Index lmms-eval's own task folder now and hand each TaskManager a copy; return what undoes it.

    The folder (site-packages) does not change in a session; every other folder, this package's task folder and
    any --include_path, is indexed by each TaskManager as usual.
    """
    import copy

    from lmms_eval.tasks import TaskManager

    own = os.path.dirname(os.path.abspath(sys.modules[TaskManager.__module__].__file__)) + "/"
    original = TaskManager._get_task_and_group
    index: dict[str, dict] = {}

    def get_task_and_group(self, task_dir):  # noqa: ANN001, ANN202
        if task_dir != own:
            return original(self, task_dir)
        if task_dir not in index:
            index[task_dir] = original(self, task_dir)
        return copy.deepcopy(index[task_dir])

    def undo() -> None:
        TaskManager._get_task_and_group = original

    TaskManager._get_task_and_group = get_task_and_group
    TaskManager(include_defaults=True)
    return undo


def _child(request: dict) -> int:
    """Run one `lmms-eval` command line in this (forked) process; return the console script's exit status."""
    import atexit
    import traceback

    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    quiet = os.open(os.devnull, os.O_RDONLY)
    os.dup2(quiet, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in (quiet, out, err):
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [str(Path(sys.executable).parent / "lmms-eval"), *request["argv"]]  # as the console script sees it
    from lmms_eval.cli.dispatch import main

    try:
        code = main()
        status = 0 if code is None else code
    except SystemExit as stop:
        status = stop.code
    except BaseException:
        traceback.print_exc()
        status = 1
    if status is None:
        status = 0
    elif not isinstance(status, int):
        print(status, file=sys.stderr)
        status = 1
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return status


def _serve() -> None:
    """Import lmms-eval once, then fork one child per request line on stdin; reply its exit status on stdout."""
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    import lmms_eval.__main__  # noqa: F401  (loads the hvcu entry point, as the CLI does)

    index_lmms_eval_tasks_once()
    replies.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(request)
            finally:
                os._exit(code & 0xFF)
        deadline = time.monotonic() + float(request.get("timeout", 900))
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(0.02)
        replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")


if __name__ == "__main__":
    _serve()
