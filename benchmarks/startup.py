"""Measure this package's share of lmms-eval start-up (importing the plugin, building the HVCU tasks) and `hvcu`'s own.

Four lmms-eval figures, each in a fresh interpreter:

1. cold plugin import: `python -X importtime -c "import hvcu_tasks.lmms.plugin; hvcu_tasks.lmms.plugin.manifests()"`,
   our share = the cumulative import time of our outermost modules (everything they pull in that was not
   loaded yet, PIL included), lmms-eval's own import reported apart;
2. the same after lmms-eval is loaded (what the CLI does: lmms-eval is loaded before its entry points);
3. task indexing: TaskManager() with our task folder minus TaskManager() without it;
4. task building: get_task_dict(["hvcu_bench"]) on local data (a seeded synthetic copy, $HVCU_BENCH_DATA),
   with the time spent inside this package's process_docs hooks shown apart, twice: with an empty image-check
   cache (the first run on these images: every image decoded) and with the cache that run left (later runs).

Then the `hvcu` command's wall time, best of --repeat fresh processes: `hvcu -h`, and `hvcu train config`
rendering a config without `--set`, with `--set` on a first run (LLaMA-Factory's argument names read by importing
it) and with `--set` on later runs (the names remembered in the cache). `--cli-only` measures only these.

The children's $HVCU_CACHE_DIR is a temporary folder: the user's own cache is never read nor written.

    python benchmarks/startup.py [--samples 1050] [--repeat 3] [--cli-only]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OURS = ("hvcu_tasks", "generation")
PLUGIN_CODE = "import hvcu_tasks.lmms.plugin; hvcu_tasks.lmms.plugin.manifests()"
LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")

# Our plugin imported once lmms-eval is loaded (as the CLI does: it loads lmms-eval, then its entry points).
AFTER_LMMS = "import lmms_eval.evaluator, lmms_eval.tasks, lmms_eval.models; " + PLUGIN_CODE

# Run in a child: index tasks without and with our folder, then build hvcu_bench on local data.
TASKS = """
import json, os, time
import lmms_eval.evaluator as ev
from lmms_eval.tasks import TaskManager
import hvcu_tasks.lmms.context as context, hvcu_tasks.lmms.hooks as hooks
spent = {"s": 0.0}
def timed(fn):
    def run(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent["s"] += time.perf_counter() - t
    return run
hooks.process_docs = timed(hooks.process_docs)
context.process_docs = timed(context.process_docs)
os.environ["HVCU_NO_AUTO_TASKS"] = "1"
import hvcu_tasks.lmms.plugin as plugin
plugin.manifests()
TaskManager()  # warm-up: the first index pays for file-system caches
t = time.perf_counter(); TaskManager(); without = time.perf_counter() - t
plugin.install_task_hook()
t = time.perf_counter(); tm = TaskManager(); with_ours = time.perf_counter() - t
t = time.perf_counter(); tm._get_task_and_group(str(plugin.TASKS_DIR)); ours_only = time.perf_counter() - t
t = time.perf_counter(); ev.get_task_dict(["hvcu_bench"], tm); build = time.perf_counter() - t
print(json.dumps({"index_without_s": without, "index_with_s": with_ours, "index_ours_s": ours_only, "build_s": build,
                  "process_docs_s": spent["s"]}))
"""


def child_env(data: Path | None = None, cache: Path | None = None) -> dict[str, str]:
    """Return the environment of a measuring child (this checkout first on the path, offline, its own cache)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env["HF_HUB_OFFLINE"] = "1"
    env["HVCU_CACHE_DIR"] = str(cache) if cache is not None else "off"
    if data is not None:
        env["HVCU_BENCH_DATA"] = str(data)
    return env


def import_shares(stderr: str) -> dict[str, float]:
    """Split a -X importtime log into our outermost modules' cumulative seconds and the other top-level ones'."""
    rows = [(int(m[2]), len(m[3]), m[4]) for m in map(LINE.match, stderr.splitlines()) if m]
    ours = other = 0
    stack: list[tuple[int, bool]] = []  # (depth, this module or an ancestor is ours)
    for cumulative, depth, name in reversed(rows):  # importtime prints children first: reversed, parents come first
        while stack and stack[-1][0] >= depth:
            stack.pop()
        inside_ours = bool(stack) and stack[-1][1]
        mine = name.split(".")[0] in OURS
        if mine and not inside_ours:
            ours += cumulative
        elif not stack and not mine:
            other += cumulative
        stack.append((depth, inside_ours or mine))
    return {"ours_s": ours / 1e6, "other_s": other / 1e6}


def import_time(code: str, repeat: int) -> dict[str, float]:
    """Run `code` under -X importtime in fresh interpreters; return the best run's shares."""
    runs = []
    for _ in range(repeat):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code],
            capture_output=True,
            text=True,
            env=child_env(),
            check=True,
        )
        runs.append(import_shares(proc.stderr))
    return min(runs, key=lambda r: r["ours_s"])


def child_json(code: str, envs: list[dict[str, str]]) -> dict[str, float]:
    """Run `code` in a fresh interpreter per environment; return the per-key minimum of the JSON each prints last."""
    runs = []
    for env in envs:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
        if proc.returncode:
            raise SystemExit(f"measuring child failed:\n{proc.stderr[-3000:]}")
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return {k: min(r[k] for r in runs) for k in runs[0]}


def hvcu_seconds(argv: list[str], envs: list[dict[str, str]], cwd: Path) -> float:
    """Return the best wall time of `hvcu ARGV` over fresh processes, one per environment; a failure stops."""
    best = float("inf")
    for env in envs:
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "hvcu_tasks.cli", *argv], capture_output=True, text=True, env=env, cwd=cwd
        )
        seconds = time.perf_counter() - start
        if proc.returncode:
            raise SystemExit(f"hvcu {' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
        best = min(best, seconds)
    return best


def cli_figures(work: Path, repeat: int) -> dict[str, float]:
    """Time `hvcu -h` and `hvcu train config` (without --set, with --set on a first and on a later run)."""
    data = work / "train-data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "d.json").write_text("[]")
    (data / "dataset_info.json").write_text(json.dumps({"d": {"file_name": "d.json", "formatting": "sharegpt"}}))
    config = ["train", "config", "--model", "qwen3_vl_4b", "--dataset", "d", "--dataset-dir", str(data)]
    config += ["--out", str(work / "train-out")]
    first_envs = [child_env(cache=work / f"cache-keys-{i}") for i in range(repeat)]  # an empty cache each
    for env in first_envs:
        shutil.rmtree(env["HVCU_CACHE_DIR"], ignore_errors=True)
    warm = [child_env(cache=work / "cache-keys-0")] * repeat
    return {
        "help_s": hvcu_seconds(["-h"], [child_env()] * repeat, work),
        "config_s": hvcu_seconds(config, [child_env()] * repeat, work),
        "config_set_first_s": hvcu_seconds([*config, "--set", "max_steps=1"], first_envs, work),
        "config_set_later_s": hvcu_seconds([*config, "--set", "max_steps=1"], warm, work),
    }


def print_cli(figures: dict[str, float]) -> None:
    """Print the `hvcu` command's figures."""
    print(f"hvcu -h: {figures['help_s']:.2f} s")
    print(
        f"hvcu train config: {figures['config_s']:.2f} s without --set; "
        f"with --set {figures['config_set_first_s']:.2f} s "
        f"on a first run (LLaMA-Factory imported), {figures['config_set_later_s']:.2f} s later (its names cached)"
    )


def main() -> None:
    """Measure and print the start-up figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1050, help="size of the synthetic local data set")
    parser.add_argument("--repeat", type=int, default=3, help="fresh interpreters per figure (best is kept)")
    parser.add_argument("--work", type=Path, default=None, help="keep the synthetic data here")
    parser.add_argument("--cli-only", action="store_true", help="measure only the `hvcu` command's figures")
    args = parser.parse_args()
    if args.cli_only:
        with tempfile.TemporaryDirectory() as tmp:
            print_cli(cli_figures(args.work or Path(tmp), args.repeat))
        return
    sys.path.insert(0, str(REPO / "benchmarks"))
    from harness_overhead import build_dataset

    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        data, _ = build_dataset(work, args.samples)
        cold = import_time(PLUGIN_CODE, args.repeat)
        after = import_time(AFTER_LMMS, args.repeat)
        # cold: an empty cache per run; warm: the cache that a first run on these images left
        cold_envs = [child_env(data, work / f"cache-cold-{i}") for i in range(args.repeat)]
        for env in cold_envs:
            shutil.rmtree(env["HVCU_CACHE_DIR"], ignore_errors=True)
        tasks_cold = child_json(TASKS, cold_envs)
        tasks = child_json(TASKS, [child_env(data, work / "cache-cold-0")] * args.repeat)
        cli = cli_figures(work, args.repeat)
    index_ours = tasks["index_ours_s"]  # our folder indexed alone; the difference of two full indexes is noise
    share = after["ours_s"] + index_ours + tasks["process_docs_s"]
    share_cold = after["ours_s"] + tasks_cold["index_ours_s"] + tasks_cold["process_docs_s"]
    print(
        f"cold import of the plugin + manifests(): ours {cold['ours_s']:.3f} s, "
        f"lmms-eval and the rest {cold['other_s']:.2f} s"
    )
    print(f"plugin import + manifests() after lmms-eval is loaded (as in the CLI): ours {after['ours_s']:.3f} s")
    print(
        f"task indexing: {tasks['index_without_s']:.2f} s without our folder, {tasks['index_with_s']:.2f} s with it "
        f"(our folder alone {index_ours:.3f} s)"
    )
    for name, figures in (("first run, empty image-check cache", tasks_cold), ("later runs, cache kept", tasks)):
        print(
            f"building hvcu_bench on {args.samples} local samples ({name}): {figures['build_s']:.2f} s, "
            f"of which our process_docs {figures['process_docs_s']:.3f} s"
        )
    print(
        "our share of start-up (plugin after lmms-eval + indexing + process_docs): "
        f"{share_cold:.3f} s on a first run, {share:.3f} s on later runs (goal <= 0.5 s)"
    )
    print_cli(cli)


if __name__ == "__main__":
    main()
