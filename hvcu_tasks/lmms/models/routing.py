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
from `--batch_size 1`; so rather than change a run's numbers behind the user's back, a run with batch size 1
says once (one line on stderr, rank 0, above any progress bar) how to feed the engine: `--batch_size 64` or
more for vllm, a batch that fits in memory for qwen2_5_vl and qwen3_vl (their batch size sets padded tensor
sizes). `llava_hf` only runs batch size 1, so it gets no hint. Under the hvcu_context wrapper the wrapper gives
the hint, naming its own command.

Tensor parallelism (vllm). lmms-eval's vllm backend gathers every TP rank's conversations before each engine
call (`_run_tp_synced`), so the ranks of a TP group must make the same number of calls. They do for HVCU runs:
lmms-eval pads every rank to the same number of requests and every HVCU chain has three rounds, so every rank
runs the same chunks and rounds. Other tasks' multi-round requests go to lmms-eval's own loop, which calls the
engine without that sync; mixing them into one run under TP > 1 is not supported (nor by lmms-eval itself).

Set HVCU_NO_ROUND_ROUTING=1 to get lmms-eval's own classes back (vllm then walks one document at a time;
the Hugging Face backends then need the `hvcu_context` wrapper for the context setting).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from typing import Any

from hvcu_tasks import settings
from hvcu_tasks.lmms.models.rounds import ROUND_TASK, run_rounds

ROUTED_BACKENDS: dict[str, str] = {"vllm": "engine", "qwen2_5_vl": "hf", "qwen3_vl": "hf", "llava_hf": "hf"}
"""lmms-eval chat models (canonical ids) routed here, with their kind: an engine batches inside a call."""
MIN_ROUND_CHUNK = 64
"""Fewest documents whose rounds run together (rounded up to a multiple of the batch size)."""
TASK_PREFIX = "hvcu_"
CHAIN_ROUNDS = 3
"""Rounds of an HVCU multi-round request (a context-setting chain asks levels L1, L2, L3)."""
UNBATCHED = frozenset({"llava_hf"})
"""Routed backends that only run batch size 1 (no hint: there is nothing to raise)."""

_routed: dict[type, type] = {}
_hinted: set[str] = set()


def routing_off() -> bool:
    """Whether the user turned routing off (HVCU_NO_ROUND_ROUTING=1)."""
    return settings.current().no_round_routing


def is_hvcu_request(request: Any) -> bool:
    """Whether a request belongs to one of this package's tasks (or to a round the driver is sending)."""
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


def feed_hint(command: str, kind: str, conversations: int, rounds: int = 1) -> str:
    """Return the one line that says how to feed a backend running at batch size 1 (kind: 'engine' or 'hf')."""
    if rounds > 1:
        what = f"{conversations * rounds} calls for {conversations} HVCU chains of {rounds} rounds"
    else:
        what = f"{conversations} calls for {conversations} HVCU requests"
    if kind == "engine":
        return (
            f"hvcu: {command} runs with batch_size 1, so each engine call (LLM.chat) gets one conversation "
            f"({what}); pass --batch_size 64 (or more) to hand it whole rounds"
        )
    return (
        f"hvcu: {command} runs with batch_size 1, so each generate call decodes one conversation ({what}); "
        "pass --batch_size 8 (or as many as fit in GPU memory) to decode them in batches"
    )


def own_requests(requests: Sequence[Any]) -> int:
    """Count the requests of this package's tasks (not the rounds the driver is sending)."""
    return sum(1 for r in requests if is_hvcu_request(r) and r.args[4] != ROUND_TASK)


def hint_once(model: Any, model_id: str, requests: Sequence[Any], rounds: int = 1, command: str = "") -> None:
    """Say once per process (rank 0, stderr, above any progress bar) how to feed a routed backend at batch size 1.

    `command` is how the user named the model (default `--model <model_id>`); `rounds` is the calls per request.
    """
    kind = ROUTED_BACKENDS.get(model_id)
    if kind is None or model_id in UNBATCHED or model_id in _hinted or batch_size_of(model) != 1:
        return
    mine = own_requests(requests)
    if mine < 2:
        return
    _hinted.add(model_id)
    if getattr(model, "rank", 0) == 0:
        from tqdm import tqdm

        tqdm.write(feed_hint(command or f"--model {model_id}", kind, mine, rounds), file=sys.stderr)
        sys.stderr.flush()


def unrouted_reason(cls: type, model_id: str) -> str:
    """Return why route() leaves lmms-eval's class `cls` for `model_id` unrouted ('' when it routes it)."""
    if routing_off():
        return f"{settings.NO_ROUND_ROUTING_ENV}=1 turns routing off"
    if model_id not in ROUTED_BACKENDS:
        return f"{model_id} is not one of the routed backends ({', '.join(ROUTED_BACKENDS)})"
    if getattr(cls, "is_simple", True):
        return f"{model_id} resolved to its simple (text-prompt) class"
    if cls.__module__ != f"lmms_eval.models.chat.{model_id}" and not getattr(cls, "_hvcu_routed", False):
        return (
            f"{model_id} resolved to {cls.__module__}.{cls.__qualname__}, not lmms-eval's own class (another plugin "
            "replaced it)"
        )
    return ""


def route(cls: type, model_id: str) -> type:
    """Return the routed subclass of lmms-eval's chat class `cls` for `model_id`, or `cls` when it is not routed."""
    if getattr(cls, "_hvcu_routed", False) or unrouted_reason(cls, model_id):
        return cls
    if cls not in _routed:
        _routed[cls] = routed(cls, model_id)
    return _routed[cls]


def routed(base: type, model_id: str) -> type:
    """Build the subclass of `base` whose HVCU multi-round requests run whole rounds through rounds.run_rounds."""

    def generate_until(self, requests):  # noqa: ANN001, ANN202
        hint_once(self, model_id, requests)
        return base.generate_until(self, requests)

    def generate_until_multi_round(self, requests):  # noqa: ANN001, ANN202
        ours = [i for i, r in enumerate(requests) if is_hvcu_request(r)]
        if not ours:
            return base.generate_until_multi_round(self, requests)
        hint_once(self, model_id, [requests[i] for i in ours], CHAIN_ROUNDS)
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

    generate_until.__doc__ = f"{base.__name__}.generate_until (says once how to feed the backend at batch size 1)."
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
