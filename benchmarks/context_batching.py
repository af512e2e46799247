"""Measure the hvcu_context wrapper: one batched inner call per round vs one document at a time.

The inner model simulates a batched inference server: every generate_until call costs a fixed latency
per chunk of up to --batch-size items plus a small per-item cost (time.sleep, so the figures are wall
time). The same wrapper code runs both ways: all documents at once (what lmms-eval hands it), and one
document per call (what lmms-eval's own multi-round path does). Both must produce identical replies.

    python benchmarks/context_batching.py [--samples 64] [--batch-size 32] [--fixed-ms 50] [--item-ms 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Any

from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms

from hvcu_tasks import context
from hvcu_tasks.families import FAMILIES
from hvcu_tasks.loaders import load_source
from hvcu_tasks.models.wrapper import ContextWrapper


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


def make_requests(n: int) -> tuple[Any, list[Instance]]:
    """Return n context-setting documents (the smoke sample, repeated) and their multi-round requests."""
    base = [s for fam in FAMILIES for s in load_source("smoke", fam).raise_for_problems()]
    samples = [dataclasses.replace(base[i % len(base)], id=f"{base[i % len(base)].id}#{i}") for i in range(n)]
    docs = context.sample_dataset(samples)

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


def wrapper(docs: Any, batch_size: int, fixed_s: float, item_s: float) -> ContextWrapper:
    """Return a ContextWrapper around a fresh SimulatedServer that can see `docs`."""
    w = ContextWrapper.around(SimulatedServer(batch_size, fixed_s, item_s), "simulated")
    w.task_dict["bench"] = {"test": docs}
    return w


def main() -> None:
    """Run both modes and print wall times, inner-call counts and the speed-up."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--fixed-ms", type=float, default=50.0)
    parser.add_argument("--item-ms", type=float, default=2.0)
    args = parser.parse_args()
    docs, requests = make_requests(args.samples)
    fixed_s, item_s = args.fixed_ms / 1000, args.item_ms / 1000

    batched = wrapper(docs, args.batch_size, fixed_s, item_s)
    start = time.perf_counter()
    out_batched = batched.generate_until_multi_round(requests)
    t_batched = time.perf_counter() - start

    single = wrapper(docs, args.batch_size, fixed_s, item_s)
    start = time.perf_counter()
    out_single = [single.generate_until_multi_round([r])[0] for r in requests]
    t_single = time.perf_counter() - start

    if out_batched != out_single:
        raise SystemExit("batched and one-at-a-time replies differ")
    print(f"samples={args.samples} rounds=3 batch_size={args.batch_size} fixed={args.fixed_ms}ms item={args.item_ms}ms")
    print(f"batched wrapper      : {t_batched:7.2f} s  ({batched.inner.calls} inner calls)")
    print(f"one document at a time: {t_single:7.2f} s  ({single.inner.calls} inner calls)")
    print(f"speed-up             : {t_single / t_batched:7.1f}x")


if __name__ == "__main__":
    main()
