"""A deterministic lmms-eval chat model that answers from stored predictions, keyed by sample and level."""

from __future__ import annotations

from pathlib import Path

from accelerate import PartialState
from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms
from lmms_eval.protocol import ChatMessages

from hvcu_tasks.results.rescore import read_predictions


class ReplayModel(lmms):
    """Replays stored replies: `--model hvcu_replay --model_args predictions=PATH` (docs/lmms-eval.md).

    A request without a stored reply is an error, never a default answer; under data parallelism each rank answers
    its share, with the launch's rank, world size and device.
    """

    is_simple = False

    def __init__(self, predictions: str = "", model: str = "", **kwargs) -> None:
        """Load the predictions named by the `predictions` model argument (`model` only names the run)."""
        super().__init__()
        if not predictions:
            raise ValueError("hvcu_replay needs --model_args predictions=PATH (JSONL or authors' result JSON)")
        unknown = sorted(k for k in kwargs if k not in {"batch_size", "device", "max_batch_size"})
        if unknown:
            raise ValueError(f"hvcu_replay: unknown model argument(s) {unknown}")
        self.predictions = read_predictions(Path(p) for p in str(predictions).split("+"))
        launch = PartialState()  # joins the launch's process group, as lmms-eval's Accelerator() does
        self._rank, self._world_size, self.device = launch.process_index, launch.num_processes, launch.device

    def _reply(self, request: Instance) -> str:
        """Return the stored reply for one request after checking its chat messages are well formed."""
        _ctx, doc_to_messages, _gen_kwargs, doc_id, task, split = request.args
        doc = self.task_dict[task][split][doc_id]
        messages = doc_to_messages(doc)
        ChatMessages(messages=messages)  # raises if the task built malformed messages
        # Base documents name their level; a context-setting chat asks level = number of user turns.
        level = int(doc["level"]) if "level" in doc else sum(m["role"] == "user" for m in messages)
        key = (str(doc["family"]), str(doc["sample_id"]), level)
        if key not in self.predictions:
            raise KeyError(f"hvcu_replay: no stored reply for family={key[0]} sample_id={key[1]} level={key[2]}")
        return self.predictions[key]

    def generate_until(self, requests: list[Instance]) -> list[str]:
        """Answer every request from the stored predictions."""
        return [self._reply(r) for r in requests]

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        """Not supported: HVCU-Bench is generative."""
        raise NotImplementedError("hvcu_replay only answers generate_until requests")

    def generate_until_multi_round(self, requests: list[Instance]) -> list[str]:
        """Not supported: wrap it, `--model hvcu_context --model_args inner=hvcu_replay,predictions=...`."""
        raise NotImplementedError("hvcu_replay answers single rounds; wrap it with --model hvcu_context")
