"""Whole rounds for lmms-eval's own chat backends (ROUTED_BACKENDS): HVCU multi-round requests go to rounds.py.

When lmms-eval resolves one of them (plugin.install_route_hook), it gets a subclass whose
`generate_until_multi_round` sends the `hvcu_*` tasks' requests through rounds.run_rounds, every pending chain's
next chat to the backend's OWN `generate_until` in one call per round and chunk, and everything else to the
backend's own code. Chunks, the batch-size hint and tensor parallelism: docs/evaluation.md, "The context setting".
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
CHAIN_ROUNDS = 3
"""Rounds of an HVCU multi-round request (a context-setting chain asks levels L1, L2, L3)."""
UNBATCHED = frozenset({"llava_hf"})
"""Routed backends that only run batch size 1 (no hint: there is nothing to raise)."""

_routed: dict[type, type] = {}
_hinted: set[str] = set()


def is_hvcu_request(request: Any) -> bool:
    """Whether a request belongs to one of this package's tasks (or to a round the driver is sending)."""
    task = request.args[4]
    return isinstance(task, str) and (task.startswith("hvcu_") or task == ROUND_TASK)


def batch_size_of(model: Any) -> int:
    """Return the backend's per-device batch size (lmms-eval's `batch_size_per_gpu`), at least 1."""
    size = getattr(model, "batch_size_per_gpu", None)
    return max(1, int(getattr(model, "batch_size", 1) if size is None else size))


def round_chunk(batch_size: int) -> int:
    """Return the documents per chunk: the smallest multiple of `batch_size` that is at least MIN_ROUND_CHUNK."""
    return batch_size * -(-MIN_ROUND_CHUNK // batch_size)


def hint_once(model: Any, model_id: str, requests: Sequence[Any], rounds: int = 1, command: str = "") -> None:
    """Say once per process (rank 0, stderr, above any progress bar) how to feed a routed backend at batch size 1.

    `command` is how the user named the model (default `--model <model_id>`); `rounds` is the calls per request.
    """
    kind = ROUTED_BACKENDS.get(model_id)
    if kind is None or model_id in UNBATCHED or model_id in _hinted or batch_size_of(model) != 1:
        return
    mine = sum(1 for r in requests if is_hvcu_request(r) and r.args[4] != ROUND_TASK)
    if mine < 2:
        return
    _hinted.add(model_id)
    if getattr(model, "rank", 0) != 0:
        return
    command = command or f"--model {model_id}"
    if rounds > 1:
        what = f"{mine * rounds} calls for {mine} HVCU chains of {rounds} rounds"
    else:
        what = f"{mine} calls for {mine} HVCU requests"
    if kind == "engine":
        line = (
            f"hvcu: {command} runs with batch_size 1, so each engine call (LLM.chat) gets one conversation "
            f"({what}); pass --batch_size 64 (or more) to hand it whole rounds"
        )
    else:
        line = (
            f"hvcu: {command} runs with batch_size 1, so each generate call decodes one conversation ({what}); "
            "pass --batch_size 8 (or as many as fit in GPU memory) to decode them in batches"
        )
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)
    sys.stderr.flush()


def unrouted_reason(cls: type, model_id: str) -> str:
    """Return why route() leaves lmms-eval's class `cls` for `model_id` unrouted ('' when it routes it)."""
    if settings.current().no_round_routing:
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
    generate_until_multi_round.__doc__ = f"Whole rounds for HVCU requests over {base.__name__}.generate_until."
    namespace = {
        "__module__": base.__module__,
        "__qualname__": base.__qualname__,
        "__doc__": base.__doc__,
        "_hvcu_routed": True,
        "generate_until": generate_until,
        "generate_until_multi_round": generate_until_multi_round,
    }
    return types.new_class(base.__name__, (base,), exec_body=lambda ns: ns.update(namespace))
