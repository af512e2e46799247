"""Measure `hvcu mcts` against a local fake OpenAI-compatible server with fixed latency.

Prints the achieved request throughput against the limit C/L (concurrency C, latency L) and the model
calls per accepted chain with the default (paper) MCTS settings.

    python benchmarks/mcts_throughput.py [--images 32] [--concurrency 16] [--latency-ms 200]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing
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
    args = parser.parse_args()
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
            start = time.perf_counter()
            stats = asyncio.run(run(list_images(folder), Path(tmp) / "out", config, progress=False))
            wall = time.perf_counter() - start
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


if __name__ == "__main__":
    main()
