"""Count what the vLLM engine gets from `lmms-eval --model vllm`: calls, conversations per call, modelled time.

Runs the real lmms-eval CLI with the stand-in engine (tests/standins/vllm: vLLM's `LLM.chat` API, every call
logged) on a seeded synthetic copy of the benchmark (harness_overhead.build_dataset: 1,050 samples, 512x512
JPEGs), per setting (base `hvcu_bench`, context `hvcu_bench_context`) and path:

  one at a time  the README's commands before issue 25: no --batch_size (lmms-eval's default 1) and
                 HVCU_NO_ROUND_ROUTING=1 (lmms-eval's own multi-round loop, one document at a time)
  whole rounds   --batch_size 64 with the toolkit's round routing (models/routing.py)

The engine time is MODELLED, not measured: an assumed cost of --call-s seconds per engine call (scheduling,
prefill start-up, the Python round trip; default 0.5 s) plus --conversation-s per conversation (default 5 ms,
the marginal cost of one more short greedy reply in a batch), summed over the logged calls. --sleep makes the
stand-in sleep that cost too (the harness wall time then includes it). The harness wall time is the child
lmms-eval process, start-up included.

    python benchmarks/engine_batching.py [--samples 1050] [--call-s 0.5] [--conversation-s 0.005] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from harness_overhead import TOTAL, build_dataset  # noqa: E402

STANDINS = REPO / "tests" / "standins"
SETTINGS = {"base": "hvcu_bench", "context": "hvcu_bench_context"}
PATHS: dict[str, tuple[list[str], dict[str, str]]] = {
    "one at a time": ([], {"HVCU_NO_ROUND_ROUTING": "1"}),
    "whole rounds": (["--batch_size", "64"], {}),
}


def run(setting: str, path: str, data: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Run one setting on one path in a fresh lmms-eval process; return its engine figures and wall time."""
    run_dir = work / f"{setting}_{path.replace(' ', '_')}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    log = run_dir / "engine.jsonl"
    extra, env_extra = PATHS[path]
    env = {
        **os.environ,
        **env_extra,
        "PYTHONPATH": os.pathsep.join([str(STANDINS), os.environ.get("PYTHONPATH", "")]),
        "HVCU_BENCH_DATA": str(data),
        "HF_HUB_OFFLINE": "1",
        "HVCU_VLLM_STANDIN_LOG": str(log),
        "HVCU_VLLM_STANDIN_CALL_S": str(args.call_s),
        "HVCU_VLLM_STANDIN_CONV_S": str(args.conversation_s),
        "HVCU_VLLM_STANDIN_SLEEP": "1" if args.sleep else "0",
    }
    argv = [str(Path(sys.executable).parent / "lmms-eval"), "--model", "vllm", "--model_args", "model=stand-in"]
    argv += [*extra, "--tasks", SETTINGS[setting], "--output_path", str(run_dir / "out")]
    start = time.perf_counter()
    with (run_dir / "child.log").open("w") as out:
        proc = subprocess.run(argv, env=env, stdout=out, stderr=out, cwd=run_dir, timeout=args.timeout)
    wall = time.perf_counter() - start
    if not list((run_dir / "out").glob("**/*_results.json")):
        raise SystemExit(f"{setting}, {path}: lmms-eval wrote no results (rc={proc.returncode}); see {out.name}")
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    conversations = sum(c["conversations"] for c in calls)
    return {
        "setting": setting,
        "path": path,
        "calls": len(calls),
        "conversations": conversations,
        "per_call": conversations / len(calls),
        "max_per_call": max(c["conversations"] for c in calls),
        "engine_s": sum(c["modelled_s"] for c in calls),
        "wall_s": wall,
    }


def table(rows: list[dict[str, Any]]) -> str:
    """Return the markdown table: per setting and path, engine calls, conversations per call, modelled times."""
    slow = {r["setting"]: r["engine_s"] for r in rows if r["path"] == "one at a time"}
    lines = [
        "| setting | path | engine calls | conversations per call (max) | modelled engine time, s | speed-up "
        "| harness wall time, s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        speedup = slow[r["setting"]] / r["engine_s"] if r["engine_s"] else math.nan
        lines.append(
            f"| {r['setting']} | {r['path']} | {r['calls']:,} | {r['per_call']:.1f} ({r['max_per_call']}) "
            f"| {r['engine_s']:,.1f} | {speedup:.1f}x | {r['wall_s']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Build the data, run every setting on both paths, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=TOTAL, help="synthetic samples (default: the paper's 1,050)")
    parser.add_argument("--call-s", type=float, default=0.5, help="assumed engine seconds per LLM.chat call")
    parser.add_argument("--conversation-s", type=float, default=0.005, help="assumed seconds per conversation")
    parser.add_argument("--sleep", action="store_true", help="make the stand-in sleep the modelled cost")
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"subset of {','.join(SETTINGS)}")
    parser.add_argument("--work", type=Path, default=None, help="keep data and logs here (default: a temp folder)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per lmms-eval run")
    args = parser.parse_args()
    settings = [s for s in args.settings.split(",") if s]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        parser.error(f"unknown setting(s) {unknown}; choose from {list(SETTINGS)}")
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        data, _predictions = build_dataset(work, args.samples)
        rows = []
        for setting in settings:
            for path in PATHS:
                rows.append(run(setting, path, data, work, args))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        print(
            f"{args.samples:,} samples; engine cost model: {args.call_s} s per call + "
            f"{args.conversation_s * 1000:g} ms per conversation (modelled, not measured)"
        )
        print(table(rows))


if __name__ == "__main__":
    main()
