"""Measure what the HVCU harness costs per request, beside the floor of decoding the same images.

Builds a seeded synthetic copy of the benchmark (the real 1,050-sample layout over 3 families and 15
aspects, 512x512 JPEGs of about 100 KB), then runs lmms-eval once per configuration in a fresh child
process: the base and context settings, each with the replay model (hvcu_replay, no inference cost)
and with lmms-eval's `openai` backend against a local server that answers at once. Every child is
measured from outside (its peak RSS from os.wait4) and from a small in-process probe (phase times,
decodes counted at PIL's ImageFile.load). The decode floor is measured in the same run on the same files.

    python benchmarks/harness_overhead.py [--sizes 1050,3150] [--quick] [--configs replay-base,...]

--quick uses 60 samples (1x) and 180 (3x): a smoke run of a few minutes. The full run (1,050 and 3,150
samples, four configurations) runs eight lmms-eval processes one after another.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hvcu_tasks.core.families import ASPECTS, FAMILIES  # noqa: E402

CONFIGS: dict[str, tuple[str, str]] = {
    "replay-base": ("hvcu_bench", "replay"),
    "replay-context": ("hvcu_bench_context", "replay"),
    "openai-base": ("hvcu_bench", "openai"),
    "openai-context": ("hvcu_bench_context", "openai"),
}
TOTAL = sum(sum(a.values()) for a in ASPECTS.values())  # 1,050: the paper's sample count
ANSWERS = "ABCD"


# ---------------------------------------------------------------- synthetic data


def aspect_counts(n: int) -> dict[str, dict[str, int]]:
    """Split n samples over the families and aspects in the real benchmark's proportions (at least one each)."""
    counts = {f: {a: max(1, round(k * n / TOTAL)) for a, k in asp.items()} for f, asp in ASPECTS.items()}
    # put any rounding difference on the largest aspect so the total is exactly n
    biggest = max(((f, a) for f in counts for a in counts[f]), key=lambda fa: counts[fa[0]][fa[1]])
    counts[biggest[0]][biggest[1]] += n - sum(sum(c.values()) for c in counts.values())
    return counts


def jpeg_bytes(seed: int) -> bytes:
    """Return a seeded 512x512 JPEG of about 100 KB (smooth colour field plus grain)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    field = Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).resize((512, 512), Image.BICUBIC)
    pixels = np.asarray(field).astype(np.int16) + rng.normal(0, 20, (512, 512, 3)).astype(np.int16)
    buf = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=85)
    return buf.getvalue()


def gold(seed: int, lv: int) -> str:
    """Return the deterministic gold key of one level."""
    return ANSWERS[(seed * 7 + lv * 3) % 4]


def build_dataset(root: Path, n: int) -> tuple[Path, Path]:
    """Write an authors'-layout dataset of n samples and a replay JSONL of gold replies; return both paths."""
    data, preds = root / f"data_{n}", root / f"predictions_{n}.jsonl"
    if (data / "done").is_file():
        return data, preds
    lines: list[str] = []
    seed = 0
    for family, aspects in aspect_counts(n).items():
        stem = FAMILIES[family][1]
        (data / "Image" / stem).mkdir(parents=True, exist_ok=True)
        items = []
        for aspect, k in aspects.items():
            for i in range(k):
                sid = f"{aspect}_{i + 1:04d}"
                seed += 1
                (data / "Image" / stem / f"{sid}.jpg").write_bytes(jpeg_bytes(seed))
                levels = []
                for lv in (1, 2, 3):
                    options = [{"option_key": o, "option_text": f"{aspect} option {o} at level {lv}"} for o in ANSWERS]
                    q = f"Level {lv} question about {sid}?"
                    levels.append(
                        {"level": lv, "question": q, "options": options, "correct_answer_key": gold(seed, lv)}
                    )
                    lines.append(
                        json.dumps({"family": family, "sample_id": sid, "level": lv, "response": gold(seed, lv)})
                    )
                items.append({"id": sid, "qa_levels": levels})
        (data / f"{stem}.json").write_text(json.dumps(items), encoding="utf-8")
    preds.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (data / "done").write_text("ok")
    return data, preds


def image_files(data: Path) -> list[Path]:
    """Return the dataset's image files in a stable order."""
    return sorted(data.glob("Image/*/*.jpg"))


def decode_floor_ms(files: list[Path], limit: int = 300, rounds: int = 3) -> float:
    """Return the median ms to read and decode one file to RGB (best of `rounds` passes over up to `limit` files)."""
    from PIL import Image

    chosen = files[:limit]
    per_pass = []
    for _ in range(rounds):
        start = time.perf_counter()
        for f in chosen:
            with Image.open(f) as im:
                im.convert("RGB")
        per_pass.append((time.perf_counter() - start) / len(chosen) * 1000)
    return min(per_pass)


# ---------------------------------------------------------------- instant OpenAI-compatible server


class InstantServer:
    """An OpenAI-compatible /v1/chat/completions server that answers 'A' at once and counts request bytes."""

    def __init__(self) -> None:
        self.requests = 0
        self.body_bytes = 0
        self.lock = threading.Lock()
        owner = self
        payload = json.dumps(
            {
                "id": "cmpl-bench",
                "object": "chat.completion",
                "created": 0,
                "model": "x",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "A"}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                size = int(self.headers.get("Content-Length", 0))
                self.rfile.read(size)
                with owner.lock:
                    owner.requests += 1
                    owner.body_bytes += size
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        """Return the server's /v1 base URL."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def take(self) -> tuple[int, int]:
        """Return (requests, body bytes) since the last call and reset the counters."""
        with self.lock:
            out = (self.requests, self.body_bytes)
            self.requests = self.body_bytes = 0
        return out


# ---------------------------------------------------------------- child: one lmms-eval run with probes


class Timer:
    """Accumulates wall time of (outermost) calls to wrapped functions."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.depth = 0

    def wrap(self, fn: Callable) -> Callable:
        """Return fn timed into this accumulator; nested calls count once."""

        def timed(*args: Any, **kwargs: Any) -> Any:
            self.depth += 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.depth -= 1
                if self.depth == 0:
                    self.seconds += time.perf_counter() - start
                    self.calls += 1

        return timed


def count_decodes() -> dict[str, int]:
    """Patch PIL's ImageFile.load to count loads that really decode pixels; return the live counter."""
    from PIL import ImageFile

    counter = {"decodes": 0}
    original = ImageFile.ImageFile.load

    def load(self: Any) -> Any:
        if getattr(self, "tile", None):
            counter["decodes"] += 1
        return original(self)

    ImageFile.ImageFile.load = load
    return counter


def model_classes() -> Iterator[tuple[Any, str]]:
    """Yield (class, method) pairs whose outermost calls are the model phase."""
    from hvcu_tasks.lmms.models.replay import ReplayModel
    from hvcu_tasks.lmms.models.wrapper import ContextWrapper

    yield ReplayModel, "generate_until"
    yield ContextWrapper, "generate_until_multi_round"
    from lmms_eval.models.chat.openai import OpenAICompatible

    yield OpenAICompatible, "generate_until"


def child(spec: dict[str, Any]) -> None:
    """Run lmms-eval once as the spec says, with probes, and write the figures to spec['report']."""
    started = time.perf_counter()
    decodes = count_decodes()
    import lmms_eval.evaluator as evaluator
    import lmms_eval.evaluator_utils as evaluator_utils
    from lmms_eval.cli.dispatch import main as lmms_main

    imported = time.perf_counter()
    timers = {name: Timer() for name in ("tasks", "evaluate", "model", "aggregate", "group")}
    evaluator.get_task_dict = timers["tasks"].wrap(evaluator.get_task_dict)
    evaluator.evaluate = timers["evaluate"].wrap(evaluator.evaluate)
    model = timers["model"]
    for cls, method in model_classes():
        setattr(cls, method, model.wrap(getattr(cls, method)))
    agg = evaluator_utils.TaskOutput.calculate_aggregate_metric
    evaluator_utils.TaskOutput.calculate_aggregate_metric = timers["aggregate"].wrap(agg)
    evaluator.consolidate_group_results = timers["group"].wrap(evaluator.consolidate_group_results)
    decodes_at_start = decodes["decodes"]
    sys.argv = ["lmms-eval", *spec["argv"]]
    try:
        lmms_main()
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    figures = {name: t.seconds for name, t in timers.items()}
    figures.update(
        {
            "import_s": imported - started,
            "total_s": time.perf_counter() - started,
            "decodes": decodes["decodes"] - decodes_at_start,
            "images_counter": images_counter(),
        }
    )
    Path(spec["report"]).write_text(json.dumps(figures), encoding="utf-8")


def images_counter() -> int | None:
    """Return the decode counter of hvcu_tasks.data.images when that module keeps one, else None."""
    module = sys.modules.get("hvcu_tasks.data.images")
    for name in ("DECODES", "decodes", "decode_count"):
        value = getattr(module, name, None) if module else None
        if callable(value):
            value = value()
        if isinstance(value, int):
            return value
        if isinstance(value, dict) and "decodes" in value:
            return int(value["decodes"])
    return None


# ---------------------------------------------------------------- parent: run and tabulate


def lmms_argv(config: str, data_preds: tuple[Path, Path], base_url: str, out: Path, concurrency: int) -> list[str]:
    """Return the lmms-eval arguments of one configuration."""
    task, backend = CONFIGS[config]
    if backend == "replay":
        inner = f"predictions={data_preds[1]}"
        model, args = ("hvcu_replay", inner) if task == "hvcu_bench" else ("hvcu_context", f"inner=hvcu_replay,{inner}")
    else:
        inner = f"model_version=x,base_url={base_url},num_concurrent={concurrency}"
        model, args = ("openai", inner) if task == "hvcu_bench" else ("hvcu_context", f"inner=openai,{inner},cache=off")
    return ["--model", model, "--model_args", args, "--tasks", task, "--output_path", str(out)]


def run_child(argv: list[str], data: Path, work: Path, timeout: float) -> dict[str, Any]:
    """Run one configuration in a fresh process; return its probe figures, peak RSS and exit status."""
    report = work / "report.json"
    env = {**os.environ, "HVCU_BENCH_DATA": str(data), "OPENAI_API_KEY": "x", "HF_HUB_OFFLINE": "1"}
    spec = json.dumps({"argv": argv, "report": str(report)})
    log = (work / "child.log").open("w")
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", spec], env=env, stdout=log, stderr=log, cwd=work)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    log.close()
    figures = json.loads(report.read_text()) if report.is_file() else {}
    results = sorted(work.glob("out/**/*_results.json"))
    figures.update(
        {
            "wall_s": time.perf_counter() - start,
            "rc": proc.returncode,
            "peak_rss_mb": usage.ru_maxrss / 1024,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "score": overall(results[0]) if results else None,
            "log": str(work / "child.log"),
        }
    )
    return figures


def overall(results_file: Path) -> float | None:
    """Return the group's acc_full (the overall score) from a results file, if present."""
    results = json.loads(results_file.read_text()).get("results", {})
    for name in ("hvcu_bench", "hvcu_bench_context"):
        for key, value in results.get(name, {}).items():
            if key.startswith("acc_full,") and isinstance(value, (int, float)):
                return float(value)
    return None


def fmt(value: float | None, spec: str = ".2f") -> str:
    """Format a number, or '-' for none."""
    return "-" if value is None else format(value, spec)


def table(rows: list[dict[str, Any]], source_kb: float) -> str:
    """Return the side-by-side table of every configuration's figures."""
    head = (
        f"{'config':<15}{'samples':>8}{'reqs':>7}{'ms/req':>8}{'floor':>7}{'-floor':>8}{'dec/img':>8}{'B/req:src':>10}"
        f"{'RSS MB':>8}{'agg s':>7}{'tasks s':>8}{'eval s':>8}{'wall s':>8}{'score':>7}{'rc':>4}"
    )
    out = [f"mean source file {source_kb:.1f} KB; floor: ms to read + decode one image, measured before each run", head]
    for r in rows:
        reqs = r["samples"] * 3
        per = r["model"] * 1000 / reqs if r.get("model") is not None else None
        ratio = r["bytes_per_request"] / (source_kb * 1024) if r.get("bytes_per_request") else None
        out.append(
            f"{r['config']:<15}{r['samples']:>8}{reqs:>7}{fmt(per):>8}{r['floor_ms']:>7.2f}"
            f"{fmt(per - r['floor_ms'] if per else None):>8}"
            f"{fmt(r.get('decodes', 0) / r['samples']):>8}{fmt(ratio):>10}{r['peak_rss_mb']:>8.0f}"
            f"{fmt(r.get('aggregate', 0) + r.get('group', 0)):>7}{fmt(r.get('tasks'), '.1f'):>8}"
            f"{fmt(r.get('evaluate'), '.1f'):>8}{r['wall_s']:>8.1f}{fmt(r.get('score'), '.1f'):>7}{r['rc']:>4}"
        )
    out.append(
        "ms/req: model phase wall / level requests (3 per sample); -floor: ms/req minus one decode; dec/img: "
        "decodes / samples; B/req:src: HTTP body per request / mean source file; RSS: peak of the child; "
        "agg: aggregation (tasks + group); tasks: task building (data load); eval: lmms-eval evaluate()."
    )
    return "\n".join(out)


def main() -> None:
    """Build the data, run every configuration at every size, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=f"{TOTAL},{3 * TOTAL}", help="sample counts (1x,3x)")
    parser.add_argument("--quick", action="store_true", help="60 and 180 samples: a smoke run")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"subset of {','.join(CONFIGS)}")
    parser.add_argument("--concurrency", type=int, default=8, help="num_concurrent of the openai backend")
    parser.add_argument("--work", type=Path, default=None, help="keep data and logs here (default: a temp folder)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per lmms-eval run")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    sizes = [60, 180] if args.quick else [int(s) for s in args.sizes.split(",")]
    configs = [c for c in args.configs.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown config(s) {unknown}; choose from {list(CONFIGS)}")
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        datasets = {n: build_dataset(work, n) for n in sizes}
        files = image_files(datasets[sizes[0]][0])
        source_kb = statistics.mean(f.stat().st_size for f in files) / 1024
        server = InstantServer()
        rows = []
        for config in configs:
            for n in sizes:
                run_dir = work / f"run_{config}_{n}"
                shutil.rmtree(run_dir, ignore_errors=True)  # no stale report or results from an earlier run
                run_dir.mkdir()
                argv = lmms_argv(config, datasets[n], server.base_url, run_dir / "out", args.concurrency)
                server.take()
                floor = decode_floor_ms(files)  # just before the child: the same machine load as its run
                figures = run_child(argv, datasets[n][0], run_dir, args.timeout)
                requests, body = server.take()
                figures.update(
                    config=config,
                    samples=n,
                    floor_ms=floor,
                    http_requests=requests,
                    bytes_per_request=body / requests if requests else 0,
                )
                rows.append(figures)
                print(f"{config} n={n}: {json.dumps(figures)}", file=sys.stderr, flush=True)
        print(table(rows, source_kb))
        print(rss_ratios(rows, sizes))


def rss_ratios(rows: list[dict[str, Any]], sizes: list[int]) -> str:
    """Return each configuration's peak RSS at the largest size over that at the smallest."""
    if len(sizes) < 2:
        return ""
    by = {(r["config"], r["samples"]): r["peak_rss_mb"] for r in rows}
    parts = [
        f"{c} {by[(c, sizes[-1])] / by[(c, sizes[0])]:.2f}x"
        for c in dict.fromkeys(r["config"] for r in rows)
        if (c, sizes[0]) in by and (c, sizes[-1]) in by
    ]
    return f"peak RSS at {sizes[-1]} / at {sizes[0]} samples: " + ", ".join(parts)


if __name__ == "__main__":
    main()
