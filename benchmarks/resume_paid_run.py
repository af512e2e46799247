"""Measure what a killed paid run costs on its rerun: requests the server sees again after `kill -9`.

A local OpenAI-compatible server (tests/fake_openai.py; every reply takes --latency-ms and depends only on the
request) counts requests. The real lmms-eval CLI runs the HVCU sample tasks in both settings through
`--model hvcu_context --model_args inner=<backend>,...`:

  1. uninterrupted, into a fresh cache: the reference results and the number of requests a run pays;
  2. the same command into another fresh cache, killed (SIGKILL to its process group) when the server
     receives request number --kill-at (default: half of run 1's);
  3. the same command again on that cache: the resumed run.

It prints the requests of each run, how many the rerun repeats (bodies the killed run had already sent),
how many were in flight at the kill, and whether the resumed run's results (metrics and every logged reply)
equal the uninterrupted run's. With --baseline it also runs steps 2 and 3 with the request cache off and
lmms-eval's own `--use_cache`, which stores replies only after the backend returns a whole batch.

    python benchmarks/resume_paid_run.py [--backend openai|async_openai] [--concurrency 8] [--latency-ms 100]
                                         [--kill-at N] [--baseline] [--json FILE]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fake_openai import FakeOpenAI  # noqa: E402

TASKS = "hvcu_bench_sample,hvcu_bench_context_sample"


def answer(body: dict) -> str:
    """Return a reply that depends only on the request's last user text: 'Answer: <letter>'."""
    content = body["messages"][-1]["content"]
    text = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
    return "Answer: " + "ABCD"[zlib.crc32(text.encode()) % 4]


def body_key(body: dict) -> str:
    """Return a request body's identity (its canonical JSON)."""
    return json.dumps(body, sort_keys=True)


class Server(FakeOpenAI):
    """FakeOpenAI that can kill a process group when its n-th request (0-based) arrives, noting the in-flight count."""

    def __init__(self, latency_s: float) -> None:
        super().__init__(answer, fault=self._maybe_kill, delay_s=latency_s)
        self.kill_at: int | None = None
        self.victim: int | None = None
        self.killed = threading.Event()
        self.at_kill: dict[str, int] = {}
        self.server.handle_error = lambda *_: None  # the killed client's dropped connections are expected

    def _maybe_kill(self, n: int, _body: dict) -> None:
        if self.victim is not None and n == self.kill_at and not self.killed.is_set():
            with self._lock:
                os.killpg(self.victim, signal.SIGKILL)
                self.at_kill = {"received": len(self.requests), "in_flight": self.in_flight}
            self.killed.set()
        return None

    def reset(self, kill_at: int | None = None) -> None:
        """Forget the requests seen so far; arm the kill at request `kill_at` of the next run."""
        with self._lock:
            self.requests.clear()
            self.body_sizes.clear()
        self.kill_at, self.victim, self.at_kill = kill_at, None, {}
        self.killed.clear()


def command(backend: str, server: Server, concurrency: int, out: Path, cache: str | None, use_cache: Path | None):
    """Return the lmms-eval command line of one run."""
    knob = "num_cpus" if backend == "async_openai" else "num_concurrent"
    args = f"inner={backend},model_version=fake-vlm,base_url={server.base_url},api_key=x,{knob}={concurrency}"
    if cache:
        args += f",cache={cache}"
    cmd = [str(Path(sys.executable).parent / "lmms-eval"), "--model", "hvcu_context", "--model_args", args]
    cmd += ["--tasks", TASKS, "--output_path", str(out), "--log_samples"]
    if use_cache is not None:
        cmd += ["--use_cache", str(use_cache)]
    return cmd


def run(cmd: list[str], env: dict[str, str], server: Server, kill_at: int | None, log: Path) -> dict[str, Any]:
    """Run one lmms-eval command (killed at request `kill_at` when given); return its figures."""
    server.reset(kill_at)
    started = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        server.victim = proc.pid
        rc = proc.wait(timeout=1800)
    with server._lock:
        bodies = [body_key(b) for b in server.requests]
    figures = {"rc": rc, "requests": len(bodies), "seconds": round(time.perf_counter() - started, 1)}
    if kill_at is not None and not server.killed.is_set():
        raise SystemExit(f"the run ended ({len(bodies)} requests) before request {kill_at}; see {log}")
    figures.update(server.at_kill)
    figures["bodies"] = bodies
    return figures


def outcome(out: Path) -> dict[str, Any]:
    """Return a finished run's metrics and, per task, every logged (doc_id, replies) pair."""
    found = sorted(glob.glob(str(out / "**" / "*_results.json"), recursive=True))
    if not found:
        raise SystemExit(f"no results file under {out}")
    metrics = json.loads(Path(found[0]).read_text())["results"]
    replies: dict[str, list] = {}
    for path in sorted(glob.glob(str(out / "**" / "*_samples_*.jsonl"), recursive=True)):
        task = Path(path).stem.split("_samples_", 1)[1]
        rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        replies[task] = sorted((row["doc_id"], json.dumps(row["filtered_resps"])) for row in rows)
    return {"metrics": metrics, "replies": replies}


def resume(label: str, args: argparse.Namespace, server: Server, work: Path, reference: dict, kill_at: int) -> dict:
    """Kill a run at request `kill_at`, rerun the same command, and return the figures of both."""
    baseline = label == "lmms-eval --use_cache"
    slug = "baseline" if baseline else "cached"
    env = {**os.environ, "HVCU_CACHE_DIR": str(work / f"cache-{slug}")}
    cmd = command(
        args.backend,
        server,
        args.concurrency,
        work / f"out-{slug}",
        "off" if baseline else None,
        work / "lmms-eval-cache" if baseline else None,
    )
    killed = run(cmd, env, server, kill_at, work / f"{slug}-killed.log")
    rerun = run(cmd, env, server, None, work / f"{slug}-rerun.log")
    repeated = sum((Counter(rerun["bodies"]) & Counter(killed["bodies"])).values())  # each killed request once
    same = outcome(work / f"out-{slug}") == reference
    return {
        "setting": label,
        "requests of the killed run": killed["requests"],
        "in flight at the kill": killed["in_flight"],
        "requests on the rerun": rerun["requests"],
        "repeated on the rerun": repeated,
        "paid in all": killed["requests"] + rerun["requests"],
        "results equal": same,
        "rerun seconds": rerun["seconds"],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["openai", "async_openai"], default="openai")
    parser.add_argument("--concurrency", type=int, default=8, help="requests the backend sends at once")
    parser.add_argument("--latency-ms", type=float, default=100.0, help="time the server takes per request")
    parser.add_argument("--kill-at", type=int, default=None, help="kill on this request (default: half of a run)")
    parser.add_argument("--baseline", action="store_true", help="also measure lmms-eval's own --use_cache")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--work", type=Path, default=None, help="keep logs, caches and outputs here")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="hvcu-resume-"))
    work.mkdir(parents=True, exist_ok=True)
    with Server(args.latency_ms / 1000) as server:
        env = {**os.environ, "HVCU_CACHE_DIR": str(work / "cache-uninterrupted")}
        cmd = command(args.backend, server, args.concurrency, work / "out-uninterrupted", None, None)
        whole = run(cmd, env, server, None, work / "uninterrupted.log")
        reference = outcome(work / "out-uninterrupted")
        kill_at = args.kill_at if args.kill_at is not None else whole["requests"] // 2
        rows = [resume("hvcu request cache", args, server, work, reference, kill_at)]
        if args.baseline:
            rows.append(resume("lmms-eval --use_cache", args, server, work, reference, kill_at))
    print(
        f"{args.backend}, {args.concurrency} at once, {args.latency_ms:.0f} ms per request; an uninterrupted run "
        f"sends {whole['requests']} requests ({whole['seconds']} s); killed on request {kill_at + 1}"
    )
    columns = list(rows[0])
    print(" | ".join(columns))
    for row in rows:
        print(" | ".join(str(row[c]) for c in columns))
    if args.json is not None:
        figures = {"uninterrupted requests": whole["requests"], "kill at": kill_at, "rows": rows}
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"logs and outputs: {work}")
    return 0 if all(row["results equal"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
