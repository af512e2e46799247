"""Measure `hvcu mcts` against a local fake OpenAI-compatible server with fixed latency.

Prints the achieved request throughput against the limit C/L (concurrency C, latency L), the model
calls per accepted chain with the default (paper) MCTS settings, and the client's CPU time per call
(process CPU of the client over the run / requests; the server runs in its own process). --profile adds
a cProfile top 15 of the client.

    python benchmarks/mcts_throughput.py [--images 32] [--concurrency 16] [--latency-ms 200] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import hashlib
import io
import json
import multiprocessing
import os
import pstats
import re
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fake_openai import FakeOpenAI  # noqa: E402  (the test suite's server, reused as the load target)

from generation.client import ClientConfig  # noqa: E402
from generation.runner import list_images, run  # noqa: E402


def reply(request: dict) -> str:
    """Deterministic generator/judge replies that vary with the prompt and seed."""
    text = request["messages"][-1]["content"][0]["text"]
    digest = int(hashlib.sha256((text + str(request.get("seed"))).encode()).hexdigest()[:6], 16)
    if text.startswith("You judge"):
        return json.dumps({"score": 0.5 + (digest % 50) / 100, "reason": "ok"})
    level = re.search(r"Level (\d) is", text).group(1)
    return json.dumps({"question": f"L{level} question {digest}?", "answer": f"answer {digest % 1000}"})


def serve(latency_s: float, ready, stop, counts) -> None:
    """Run the fake server in its own process (so it does not share the client's interpreter)."""
    with FakeOpenAI(reply, delay_s=latency_s) as server:
        ready.put(server.base_url)
        stop.wait()
        counts.put((len(server.requests), server.max_in_flight))


def main() -> None:
    """Run one synthesis job against the fake server and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--profile", action="store_true", help="print a cProfile top 15 of the client")
    args = parser.parse_args()
    profiler = cProfile.Profile(time.process_time) if args.profile else None  # CPU time, not wall time
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "images"
        folder.mkdir()
        for i in range(args.images):
            # distinct pixels per image: images are keyed by content, so equal files would be one image
            Image.new("RGB", (32, 32), (i * 30 % 255, i // 256 % 256, i % 256)).save(folder / f"img{i:03d}.png")
        ready, counts, stop = multiprocessing.Queue(), multiprocessing.Queue(), multiprocessing.Event()
        server = multiprocessing.Process(target=serve, args=(args.latency_ms / 1000, ready, stop, counts))
        server.start()
        try:
            config = ClientConfig(
                model="fake", base_url=ready.get(timeout=30), api_key="x", concurrency=args.concurrency
            )
            start, cpu_start = time.perf_counter(), os.times()
            if profiler:
                profiler.enable()
            stats = asyncio.run(run(list_images(folder), Path(tmp) / "out", config, progress=False))
            if profiler:
                profiler.disable()
            wall, cpu_end = time.perf_counter() - start, os.times()
            user, system = cpu_end.user - cpu_start.user, cpu_end.system - cpu_start.system
        finally:
            stop.set()
            requests, peak = counts.get(timeout=30)
            server.join(timeout=30)
    limit = args.concurrency / (args.latency_ms / 1000)
    print(f"images={args.images} concurrency C={args.concurrency} latency L={args.latency_ms:.0f} ms")
    print(f"requests={requests} wall={wall:.1f} s peak in flight={peak}")
    print(f"throughput={requests / wall:.1f} req/s  limit C/L={limit:.1f} req/s  ratio={requests / wall / limit:.0%}")
    print(
        f"chains={stats['chains']} calls per accepted chain={stats['calls_per_chain']:.1f} "
        f"acceptance rate={stats['acceptance_rate']:.0%}"
    )
    cpu = user + system
    print(
        f"client CPU={cpu:.2f} s (user {user:.2f} s, system {system:.2f} s)  per call={cpu / requests * 1000:.2f} ms "
        f"(user {user / requests * 1000:.2f} ms; goal <= 2 ms)  client busy {cpu / wall:.0%} of the wall time"
    )
    if profiler:
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("tottime").print_stats(15)
        stats.sort_stats("cumulative").print_stats(r"generation[/\\]", 15)  # where the toolkit's own code spends
        print(out.getvalue())


if __name__ == "__main__":
    main()
