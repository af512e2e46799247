"""`hvcu_context`: runs multi-round chats on ANY lmms-eval chat model, one batched call per round.

lmms-eval's own multi-round path (vllm) walks one document at a time; most backends do not implement
it at all. This wrapper asks the task for every pending document's next-round messages, sends them all
to the inner model's `generate_until` as one batch, and repeats until every chain has ended.

    --model hvcu_context --model_args inner=openai,model_version=gpt-4o,base_url=...
Every argument except `inner` goes to the inner model; single-round requests pass straight through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms


def _fixed(messages: list[dict]) -> Callable[..., list[dict]]:
    """Return a doc_to_messages stand-in that yields this round's precomputed messages."""

    def doc_to_messages(_doc: Any = None, **_kwargs: Any) -> list[dict]:
        """Return the round's messages, whatever document the inner model passes."""
        return messages

    return doc_to_messages


def _text(output: Any) -> str | None:
    """Return the text of one inner-model output (a str or an lmms-eval GenerationResult); None when it has none."""
    text = output if isinstance(output, str) else getattr(output, "text", None)
    return text if isinstance(text, str) else None


class ContextWrapper(lmms):
    """Drive an inner chat model round by round over all pending documents (true multi-turn messages)."""

    is_simple = False

    def __init__(self, inner: str = "", **inner_args: Any) -> None:
        """Build the inner model named by `inner` with every other model argument."""
        super().__init__()
        if not inner:
            raise ValueError("hvcu_context needs --model_args inner=<lmms-eval model>,<its arguments>")
        from lmms_eval.models import get_model

        cls = get_model(inner)
        self._check_chat(cls, inner)
        self._attach(cls(**inner_args), inner)

    @classmethod
    def around(cls, inner: lmms, name: str = "") -> ContextWrapper:
        """Wrap an already-built lmms-eval chat model (for code that builds its models itself)."""
        cls._check_chat(type(inner), name or type(inner).__name__)
        wrapper = cls.__new__(cls)
        lmms.__init__(wrapper)
        wrapper._attach(inner, name or type(inner).__name__)
        return wrapper

    @staticmethod
    def _check_chat(model_cls: type, name: str) -> None:
        """Reject models that take a text prompt instead of chat messages."""
        if getattr(model_cls, "is_simple", True):
            raise ValueError(
                f"hvcu_context: inner model {name!r} resolves to a simple (text-prompt) model that cannot take "
                "multi-turn chat messages; pick a chat backend (openai, vllm, qwen2_5_vl, qwen3_vl, llava_hf, ...)"
            )

    def _attach(self, inner: lmms, name: str) -> None:
        """Hold the inner model and share its task_dict (the evaluator fills ours, the inner model reads it)."""
        self.inner_name = name
        self.inner = inner
        self.task_dict = inner.task_dict
        self.rounds_sent: list[int] = []  # batch size of every inner call made for multi-round requests

    @property
    def rank(self) -> int:
        """The inner model's process rank."""
        return self.inner.rank

    @property
    def world_size(self) -> int:
        """The inner model's world size."""
        return self.inner.world_size

    def __getattr__(self, name: str) -> Any:
        """Delegate everything else (accelerator, device, ...) to the inner model."""
        if name in {"inner", "__setstate__"}:
            raise AttributeError(name)
        return getattr(self.inner, name)

    def set_cache_hook(self, cache_hook: Any) -> None:
        """Install the cache hook on the wrapper and the inner model."""
        super().set_cache_hook(cache_hook)
        self.inner.set_cache_hook(cache_hook)

    def clean(self) -> None:
        """Free the inner model's memory."""
        self.inner.clean()

    def generate_until(self, requests: list[Instance]) -> list[Any]:
        """Single-round requests go straight to the inner model."""
        return self.inner.generate_until(requests)

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        """Delegate log-likelihood requests to the inner model."""
        return self.inner.loglikelihood(requests)

    def generate_until_multi_round(self, requests: list[Instance]) -> list[list[str | None]]:
        """Run every document's rounds, sending each round of all pending documents as one batch.

        A reply with no text (None) stays None: the task scores it as a failed request and shows it to the
        next round as "(no answer)".
        """
        outputs: list[list[str | None]] = [[] for _ in requests]
        infos: list[Any] = [None] * len(requests)
        pending = list(range(len(requests)))
        round_idx = 0
        while pending:
            batch: list[Instance] = []
            still: list[int] = []
            for i in pending:
                ctx, doc_to_messages, gen_kwargs, doc_id, task, split = requests[i].args
                doc = self.task_dict[task][split][doc_id]
                if round_idx == 0:
                    messages = doc_to_messages(doc)
                else:
                    payload = doc_to_messages(
                        doc, round_idx=round_idx, previous_output=list(outputs[i]), previous_round_info=infos[i]
                    )
                    if not (isinstance(payload, tuple) and len(payload) == 4):
                        continue
                    messages, terminal, _previous, infos[i] = payload
                    if terminal:
                        continue
                batch.append(
                    Instance(
                        request_type="generate_until",
                        arguments=(ctx, _fixed(messages), dict(gen_kwargs), doc_id, task, split),
                        idx=round_idx,
                        metadata={"task": task, "doc_id": doc_id, "repeats": 1},
                    )
                )
                still.append(i)
            if batch:
                self.rounds_sent.append(len(batch))
                replies = self.inner.generate_until(batch)
                if len(replies) != len(batch):
                    raise RuntimeError(f"{self.inner_name} returned {len(replies)} replies for {len(batch)} requests")
                for i, reply in zip(still, replies, strict=True):
                    outputs[i].append(_text(reply))
            pending = still
            round_idx += 1
        return outputs
