"""Whole rounds for lmms-eval's own backends: HVCU multi-round requests go through the shared round driver.

lmms-eval's `vllm` runs `generate_until_multi_round` one document at a time (one `LLM.chat` call of one
conversation per round), and its Hugging Face chat backends (`qwen2_5_vl`, `qwen3_vl`, `llava_hf`) do not
run it at all. When lmms-eval resolves one of ROUTED_BACKENDS (plugin.install_route_hook), it gets a subclass
from `routed` whose `generate_until_multi_round` sends the requests of this package's tasks (task names start
with `hvcu_`) through rounds.run_rounds: per round, every pending chain's next chat goes to the model's OWN
`generate_until` in one call, so the backend's batching (`--batch_size`) and vLLM's tensor-parallel request
sync still apply. Every other task's requests go to the backend's own method unchanged, and so does
everything else the backend does.

Batch size. Documents run `round_chunk(batch_size)` at a time: the smallest multiple of the backend's batch
size that holds at least MIN_ROUND_CHUNK (64) documents, so a round of N chains reaches the engine in
ceil(N / batch_size) calls, and only one chunk's documents (decoded images, about 2 MB per 512x512 sample)
are alive at a time. The batch size stays the user's: with vLLM, `--batch_size` is only how many
conversations go into one `LLM.chat` call (vLLM schedules inside a call), but vLLM does not promise the same
greedy output for a prompt decoded alone and in a batch, and lmms-eval's default (1) cannot be told apart
from `--batch_size 1`; so rather than change a run's numbers behind the user's back, a vllm run with batch
size 1 says once (one line on stderr, rank 0) how to feed the engine: `--batch_size 64` or more. For the
Hugging Face backends the batch size sets padded tensor sizes (memory), so it is left alone without a word
(`llava_hf` only runs batch size 1).

Set HVCU_NO_ROUND_ROUTING=1 to get lmms-eval's own classes back (vllm then walks one document at a time;
the Hugging Face backends then need the `hvcu_context` wrapper for the context setting).
"""

from __future__ import annotations

import sys
import types
from typing import Any

from hvcu_tasks.plugin import ROUTE_OPT_OUT_ENV, opted_out

ROUTED_BACKENDS: dict[str, str] = {"vllm": "engine", "qwen2_5_vl": "hf", "qwen3_vl": "hf", "llava_hf": "hf"}
"""lmms-eval chat models (canonical ids) routed here, with their kind: an engine batches inside a call."""
MIN_ROUND_CHUNK = 64
"""Fewest documents whose rounds run together (rounded up to a multiple of the batch size)."""
TASK_PREFIX = "hvcu_"

_routed: dict[type, type] = {}
_hinted: set[str] = set()


def routing_off() -> bool:
    """Whether the user turned routing off (HVCU_NO_ROUND_ROUTING=1)."""
    return opted_out(ROUTE_OPT_OUT_ENV)


def is_hvcu_request(request: Any) -> bool:
    """Whether a request belongs to one of this package's tasks (or to a round the driver is sending)."""
    from hvcu_tasks.models.rounds import ROUND_TASK

    task = request.args[4]
    return isinstance(task, str) and (task.startswith(TASK_PREFIX) or task == ROUND_TASK)


def batch_size_of(model: Any) -> int:
    """Return the backend's per-device batch size (lmms-eval's `batch_size_per_gpu`), at least 1."""
    size = getattr(model, "batch_size_per_gpu", None)
    if size is None:
        size = getattr(model, "batch_size", 1)
    return max(1, int(size))


def round_chunk(batch_size: int) -> int:
    """Return the documents per chunk: the smallest multiple of `batch_size` that is at least MIN_ROUND_CHUNK."""
    return batch_size * -(-MIN_ROUND_CHUNK // batch_size)


def feed_hint(model_id: str, requests: int) -> str:
    """Return the one line that says how to hand vLLM whole rounds."""
    return (
        f"hvcu: --model {model_id} runs with batch_size 1, so each engine call (LLM.chat) gets one conversation "
        f"({requests} calls for {requests} HVCU requests); pass --batch_size 64 (or more) to hand it whole rounds"
    )


def _hint_once(model: Any, model_id: str, requests: list[Any]) -> None:
    """Print feed_hint once per process, on rank 0, when an engine runs HVCU requests one conversation a call."""
    if ROUTED_BACKENDS.get(model_id) != "engine" or model_id in _hinted or batch_size_of(model) != 1:
        return
    mine = sum(1 for r in requests if is_hvcu_request(r))
    if mine < 2:
        return
    _hinted.add(model_id)
    if getattr(model, "rank", 0) == 0:
        print(feed_hint(model_id, mine), file=sys.stderr, flush=True)


def route(cls: type, model_id: str) -> type:
    """Return the routed subclass of lmms-eval's chat class `cls` for `model_id`, or `cls` when it is not routed."""
    if routing_off() or model_id not in ROUTED_BACKENDS or getattr(cls, "is_simple", True):
        return cls
    if cls.__module__ != f"lmms_eval.models.chat.{model_id}":  # someone else's class under that name
        return cls
    if getattr(cls, "_hvcu_routed", False):
        return cls
    if cls not in _routed:
        _routed[cls] = routed(cls, model_id)
    return _routed[cls]


def routed(base: type, model_id: str) -> type:
    """Build the subclass of `base` whose HVCU multi-round requests run whole rounds through rounds.run_rounds."""
    from hvcu_tasks.models.rounds import run_rounds

    def generate_until(self, requests):  # noqa: ANN001, ANN202
        _hint_once(self, model_id, requests)
        return base.generate_until(self, requests)

    def generate_until_multi_round(self, requests):  # noqa: ANN001, ANN202
        ours = [i for i, r in enumerate(requests) if is_hvcu_request(r)]
        if not ours:
            return base.generate_until_multi_round(self, requests)
        _hint_once(self, model_id, requests)
        mine = iter(
            run_rounds(
                [requests[i] for i in ours],
                self.task_dict,
                lambda batch: base.generate_until(self, batch),
                round_chunk(batch_size_of(self)),
                name=model_id,
                rank=getattr(self, "rank", 0),
                desc=f"hvcu rounds ({model_id})",
            )
        )
        picked = set(ours)
        others = [r for i, r in enumerate(requests) if i not in picked]
        theirs = iter(base.generate_until_multi_round(self, others) if others else [])
        return [next(mine) if i in picked else next(theirs) for i in range(len(requests))]

    generate_until.__doc__ = f"{base.__name__}.generate_until (says once how to feed the engine at batch size 1)."
    generate_until_multi_round.__doc__ = (
        f"Whole rounds for HVCU requests (rounds.run_rounds over {base.__name__}.generate_until); the rest as before."
    )
    namespace = {
        "__module__": base.__module__,
        "__qualname__": base.__qualname__,
        "__doc__": base.__doc__,
        "_hvcu_routed": True,
        "_hvcu_model_id": model_id,
        "generate_until": generate_until,
        "generate_until_multi_round": generate_until_multi_round,
    }
    return types.new_class(base.__name__, (base,), exec_body=lambda ns: ns.update(namespace))
