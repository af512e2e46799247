"""Measure the hvcu_context wrapper: batched rounds vs one document at a time, and its peak memory.

Three modes; every document names its own image file (default 512x512 PNG), read through the task's code.

  sleep   The inner model simulates a batched inference server: each generate_until call sleeps a fixed
          latency per chunk of up to --batch-size items plus a per-item cost.
  openai  The inner model is lmms-eval's real `openai` chat backend (`num_concurrent` threads, images
          sent as base64) talking to a local OpenAI-compatible server (tests/fake_openai.py) whose every
          call takes --latency-ms: the path users take (`--model hvcu_context --model_args inner=openai,...`).
  memory  Peak RSS of a wrapper run at --samples and --factor x --samples documents, each in a fresh
          process, with an inner model that builds every request's messages and answers at once.

In sleep and openai modes the same wrapper runs both ways, all documents at once (what lmms-eval hands
it; the wrapper cuts them into chunks of --chunk-size) and one document per call (lmms-eval's own
multi-round path); both must give identical replies.

    python benchmarks/context_batching.py sleep  [--samples 64] [--batch-size 32] [--fixed-ms 50] [--item-ms 2]
    python benchmarks/context_batching.py openai [--samples 48] [--num-concurrent 16] [--latency-ms 100]
    python benchmarks/context_batching.py memory [--samples 1050] [--factor 3] [--unchunked]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import random
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms
from loguru import logger
from PIL import Image

from hvcu_tasks.core.documents import sample_rows
from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.core.schema import ImageRef
from hvcu_tasks.data import images as hvcu_images
from hvcu_tasks.data.loaders import load_source
from hvcu_tasks.lmms import context, hooks
from hvcu_tasks.lmms.models.wrapper import DEFAULT_CHUNK_SIZE, ContextWrapper

REPO = Path(__file__).resolve().parent.parent
DISTINCT_IMAGES = 16


class SimulatedServer(lmms):
    """A chat model whose call costs fixed latency per batch chunk plus a per-item cost; answers 'B'."""

    is_simple = False

    def __init__(self, batch_size: int = 32, fixed_s: float = 0.05, item_s: float = 0.002, **_: Any) -> None:
        """Set the simulated costs."""
        super().__init__()
        self.batch_size, self.fixed_s, self.item_s = int(batch_size), float(fixed_s), float(item_s)
        self.calls = 0

    def generate_until(self, requests: list[Instance]) -> list[str]:
        """Build every request's messages (as a real backend must), then sleep the simulated cost."""
        for r in requests:
            _ctx, doc_to_messages, _gen, doc_id, task, split = r.args
            doc_to_messages(self.task_dict[task][split][doc_id])
        if self.fixed_s or self.item_s:
            for start in range(0, len(requests), self.batch_size):
                chunk = len(requests[start : start + self.batch_size])
                time.sleep(self.fixed_s + self.item_s * chunk)
        self.calls += 1
        return ["B"] * len(requests)

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        """Not used."""
        raise NotImplementedError

    def generate_until_multi_round(self, requests: list[Instance]) -> list[list[str]]:
        """Not used: the wrapper drives the rounds."""
        raise NotImplementedError


def write_images(folder: Path, size: int, count: int = DISTINCT_IMAGES) -> list[Path]:
    """Write `count` distinct size x size RGB PNGs (gradient plus noise, so they neither vanish nor bloat)."""
    rng = random.Random(0)
    paths = []
    for k in range(count):
        img = Image.linear_gradient("L").resize((size, size)).convert("RGB")
        noise = Image.frombytes("RGB", (size // 4, size // 4), rng.randbytes(3 * (size // 4) ** 2))
        img = Image.blend(img, noise.resize((size, size)), 0.3 + 0.02 * k)
        paths.append(folder / f"bench_{size}_{k}.png")
        img.save(paths[-1])
    return paths


def sample_images(folder: Path, images: list[Path], n: int) -> list[Path]:
    """Return one image path per sample: links to the distinct images, so no two samples share a file."""
    links = []
    for i in range(n):
        link = folder / f"sample_{i}.png"
        if not link.exists():
            link.symlink_to(images[i % len(images)])
        links.append(link)
    return links


def make_requests(n: int, images: list[Path]) -> tuple[Any, list[Instance]]:
    """Return n context-setting documents (smoke samples, repeated, one image file each) and their requests.

    One chat is built before returning, so one-time imports do not count in the timed runs.
    """
    base = [s for fam in FAMILIES for s in load_source("smoke", fam).raise_for_problems()]
    paths = sample_images(images[0].parent, images, n)
    samples = [
        dataclasses.replace(base[i % len(base)], id=f"{base[i % len(base)].id}#{i}", image=ImageRef(path=paths[i]))
        for i in range(n)
    ]
    docs = hooks.document_table(list(sample_rows(samples)), "chains")
    context.doc_to_messages(docs[0])
    hvcu_images.reset()

    def doc_to_messages(doc: Any, **round_kwargs: Any) -> Any:
        return context.doc_to_messages(doc, **round_kwargs)

    requests = [
        Instance(
            request_type="generate_until_multi_round",
            arguments=("", doc_to_messages, {"max_new_tokens": 8}, i, "bench", "test"),
            idx=0,
            metadata={"task": "bench", "doc_id": i, "repeats": 1},
        )
        for i in range(n)
    ]
    return docs, requests


def seeing(w: ContextWrapper, docs: Any) -> ContextWrapper:
    """Let the wrapper (and so its inner model) see `docs` as task 'bench', split 'test'."""
    w.task_dict["bench"] = {"test": docs}
    return w


@contextlib.contextmanager
def progress_bars_hidden():
    """Keep the progress bars (one per wrapper and inner call) off the terminal; show them if the run fails."""
    real, sys.stderr = sys.stderr, io.StringIO()
    try:
        yield
    except BaseException:
        real.write(sys.stderr.getvalue()[-4000:])
        raise
    finally:
        sys.stderr = real


def timed(w: ContextWrapper, requests: list[Instance], one_at_a_time: bool) -> tuple[float, list[list]]:
    """Run the requests through the wrapper all at once or one document per call; return (seconds, replies).

    The image cache starts empty, so neither way profits from the other's decodes.
    """
    hvcu_images.reset()
    with progress_bars_hidden():
        start = time.perf_counter()
        if one_at_a_time:
            out = [w.generate_until_multi_round([r])[0] for r in requests]
        else:
            out = w.generate_until_multi_round(requests)
        return time.perf_counter() - start, out


def report(title: str, t_batched: float, t_single: float, calls: tuple[Any, Any]) -> None:
    """Print both wall times and the speed-up."""
    print(title)
    print(f"batched wrapper       : {t_batched:7.2f} s  ({calls[0]})")
    print(f"one document at a time: {t_single:7.2f} s  ({calls[1]})")
    print(f"speed-up              : {t_single / t_batched:7.1f}x")


def run_sleep(args: argparse.Namespace, images: list[Path]) -> None:
    """Simulated batched server: batched wrapper vs one document per call."""
    docs, requests = make_requests(args.samples, images)
    fixed_s, item_s = args.fixed_ms / 1000, args.item_ms / 1000
    batched = seeing(
        ContextWrapper.around(SimulatedServer(args.batch_size, fixed_s, item_s), "sim", args.chunk_size), docs
    )
    single = seeing(
        ContextWrapper.around(SimulatedServer(args.batch_size, fixed_s, item_s), "sim", args.chunk_size), docs
    )
    t_batched, out_batched = timed(batched, requests, one_at_a_time=False)
    t_single, out_single = timed(single, requests, one_at_a_time=True)
    if out_batched != out_single:
        raise SystemExit("batched and one-at-a-time replies differ")
    report(
        f"sleep model: samples={args.samples} rounds=3 chunk_size={args.chunk_size} batch_size={args.batch_size} "
        f"fixed={args.fixed_ms}ms item={args.item_ms}ms image={args.image_size}px",
        t_batched,
        t_single,
        (f"{batched.inner.calls} inner calls", f"{single.inner.calls} inner calls"),
    )


def answer_of(body: dict) -> str:
    """The fake server's reply: a letter fixed by the last user turn's text (so both runs must agree)."""
    user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    text = user if isinstance(user, str) else " ".join(p.get("text", "") for p in user if p.get("type") == "text")
    return f"Answer: {'ABCD'[zlib.crc32(text.encode()) % 4]}"


def run_openai(args: argparse.Namespace, images: list[Path]) -> None:
    """lmms-eval's openai chat backend against a local server with per-call latency: batched vs one at a time."""
    sys.path.insert(0, str(REPO / "tests"))
    from fake_openai import FakeOpenAI

    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    docs, requests = make_requests(args.samples, images)
    with FakeOpenAI(answer_of, delay_s=args.latency_ms / 1000) as server:

        def build() -> ContextWrapper:
            """The wrapper as `--model hvcu_context --model_args inner=openai,...` builds it."""
            model_args = {"model_version": "bench", "base_url": server.base_url, "api_key": "x"}
            model_args |= {"num_concurrent": args.num_concurrent, "chunk_size": args.chunk_size, "cache": "off"}
            return seeing(ContextWrapper(inner="openai", **model_args), docs)

        t_batched, out_batched = timed(build(), requests, one_at_a_time=False)
        sent_batched = len(server.requests)
        peak_batched = server.max_in_flight
        server.max_in_flight = 0
        t_single, out_single = timed(build(), requests, one_at_a_time=True)
        sent_single, peak_single = len(server.requests) - sent_batched, server.max_in_flight
    if out_batched != out_single:
        raise SystemExit("batched and one-at-a-time replies differ")
    if any(not isinstance(r, str) or not r.startswith("Answer: ") for chain in out_batched for r in chain):
        raise SystemExit("the openai backend returned failed requests; see the log above")
    report(
        f"openai backend: samples={args.samples} rounds=3 chunk_size={args.chunk_size} "
        f"num_concurrent={args.num_concurrent} latency={args.latency_ms}ms image={args.image_size}px",
        t_batched,
        t_single,
        (
            f"{sent_batched} HTTP requests, {peak_batched} at once at most",
            f"{sent_single} HTTP requests, {peak_single} at once at most",
        ),
    )


def rss_kib(field: str) -> int:
    """Return a memory figure of this process from /proc/self/status, in KiB (VmRSS: now, VmHWM: peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def memory_child(args: argparse.Namespace) -> None:
    """Run one wrapper pass with a zero-cost inner model; print baseline and peak RSS as JSON."""
    images = sorted(Path(args.images_dir).glob(f"bench_{args.image_size}_*.png"))
    docs, requests = make_requests(args.samples, images)
    w = seeing(ContextWrapper.around(SimulatedServer(fixed_s=0, item_s=0), "zero-cost", args.chunk_size), docs)
    Path("/proc/self/clear_refs").write_text("5")  # restart the peak (VmHWM) from here
    baseline = rss_kib("VmRSS")
    start = time.perf_counter()
    with progress_bars_hidden():
        out = w.generate_until_multi_round(requests)
    seconds = time.perf_counter() - start
    assert len(out) == args.samples and all(len(chain) == 3 for chain in out)
    print(json.dumps({"baseline_kib": baseline, "peak_kib": rss_kib("VmHWM"), "seconds": seconds}))


def measure(args: argparse.Namespace, samples: int, chunk_size: int, images_dir: Path) -> dict:
    """Run memory_child in a fresh process and return its figures."""
    cmd = [sys.executable, __file__, "memory-child", "--samples", str(samples), "--chunk-size", str(chunk_size)]
    cmd += ["--image-size", str(args.image_size), "--images-dir", str(images_dir)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"memory run of {samples} samples failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_memory(args: argparse.Namespace, images_dir: Path) -> None:
    """Peak RSS at 1x and factor x samples (chunked; optionally all at once) and the ratio of the peaks."""
    sizes = [args.samples, args.samples * args.factor]
    runs = [("chunked", args.chunk_size)] + ([("all at once", 0)] if args.unchunked else [])
    print(f"memory: image={args.image_size}px rounds=3, zero-cost inner model, peak RSS of a fresh process")
    print(f"{'mode':<12} {'chunk':>6} {'samples':>8} {'baseline MB':>12} {'peak MB':>9} {'growth MB':>10} {'s':>6}")
    for label, chunk in runs:
        peaks = []
        for n in sizes:
            m = measure(args, n, chunk or n, images_dir)
            peaks.append(m["peak_kib"])
            growth = (m["peak_kib"] - m["baseline_kib"]) / 1024
            print(
                f"{label:<12} {chunk or n:>6} {n:>8} {m['baseline_kib'] / 1024:>12.0f} {m['peak_kib'] / 1024:>9.0f} "
                f"{growth:>10.0f} {m['seconds']:>6.1f}"
            )
        ratio = peaks[1] / peaks[0]
        verdict = "meets" if ratio <= 1.2 else "misses"
        print(f"{label}: peak at {args.factor}x / peak at 1x = {ratio:.2f} ({verdict} the <= 1.2 goal)")


def main() -> None:
    """Parse the mode and its options, write the images, run the mode and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="sleep", choices=["sleep", "openai", "memory", "memory-child"])
    parser.add_argument("--samples", type=int, default=None, help="documents (sleep 64, openai 48, memory 1050)")
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE)
    parser.add_argument("--image-size", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32, help="sleep: items per simulated server batch")
    parser.add_argument("--fixed-ms", type=float, default=50.0, help="sleep: latency per server batch")
    parser.add_argument("--item-ms", type=float, default=2.0, help="sleep: cost per item")
    parser.add_argument("--num-concurrent", type=int, default=16, help="openai: the backend's num_concurrent")
    parser.add_argument("--latency-ms", type=float, default=100.0, help="openai: the server's time per call")
    parser.add_argument("--factor", type=int, default=3, help="memory: the larger run has factor x samples")
    parser.add_argument("--unchunked", action="store_true", help="memory: also run all documents as one chunk")
    parser.add_argument("--images-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.samples = args.samples or {"sleep": 64, "openai": 48}.get(args.mode, 1050)
    if args.mode == "memory-child":
        memory_child(args)
        return
    with tempfile.TemporaryDirectory(prefix="hvcu_bench_") as tmp:
        images = write_images(Path(tmp), args.image_size)
        if args.mode == "sleep":
            run_sleep(args, images)
        elif args.mode == "openai":
            run_openai(args, images)
        else:
            run_memory(args, Path(tmp))


if __name__ == "__main__":
    main()
