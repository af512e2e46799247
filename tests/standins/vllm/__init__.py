"""A stand-in for vLLM's offline engine (tests and benchmarks only): `LLM.chat` with vLLM's signature, recorded.

lmms-eval's `vllm` backend imports `vllm.LLM`, `vllm.SamplingParams` and
`vllm.distributed.parallel_state.get_tp_group` through `optional_import`; put this folder first on PYTHONPATH
(`PYTHONPATH=tests/standins lmms-eval --model vllm ...`) and the real backend runs against it, unchanged.

- Answers are deterministic functions of the whole conversation (every message, images included): a SHA-256 of
  it picks a letter A-D, and one conversation in eleven gets a reply with no letter. So two paths that send the
  same conversations get the same replies, and a path that mixes up a chain's history gets different ones.
- Every `LLM.chat` call appends one JSON line to the file named by $HVCU_VLLM_STANDIN_LOG (when set):
  `{"conversations": n, "user_turns": [...], "modelled_s": s, "pid": p}`.
- Cost model: a call costs $HVCU_VLLM_STANDIN_CALL_S seconds plus $HVCU_VLLM_STANDIN_CONV_S per conversation
  (both default 0); the cost is recorded as `modelled_s`, and slept only when $HVCU_VLLM_STANDIN_SLEEP=1.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Sequence
from typing import Any

LOG_ENV = "HVCU_VLLM_STANDIN_LOG"
CALL_COST_ENV = "HVCU_VLLM_STANDIN_CALL_S"
CONVERSATION_COST_ENV = "HVCU_VLLM_STANDIN_CONV_S"
SLEEP_ENV = "HVCU_VLLM_STANDIN_SLEEP"
__version__ = "0.0.0+hvcu.standin"


@dataclasses.dataclass(kw_only=True)
class SamplingParams:
    """vLLM's sampling parameters (the fields lmms-eval sets); an unknown keyword is a TypeError, as in vLLM."""

    n: int = 1
    max_tokens: int | None = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: list[str] | str | None = None
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0


@dataclasses.dataclass
class CompletionOutput:
    """One generated sequence (vllm.outputs.CompletionOutput's fields that callers read)."""

    index: int
    text: str
    token_ids: list[int] = dataclasses.field(default_factory=list)
    finish_reason: str | None = "stop"


@dataclasses.dataclass
class RequestOutput:
    """One request's result (vllm.outputs.RequestOutput's fields that callers read)."""

    request_id: str
    prompt: str | None
    outputs: list[CompletionOutput]
    finished: bool = True


def cost(conversations: int) -> float:
    """Return the modelled seconds of one engine call of `conversations` conversations (env cost model)."""
    fixed = float(os.environ.get(CALL_COST_ENV, "0") or 0)
    each = float(os.environ.get(CONVERSATION_COST_ENV, "0") or 0)
    return fixed + each * conversations


def answer(conversation: Sequence[dict]) -> str:
    """Return the deterministic reply to one conversation (a letter, or words with no letter)."""
    digest = hashlib.sha256(json.dumps(list(conversation), sort_keys=True, default=str).encode()).digest()
    value = int.from_bytes(digest[:8], "big")
    if value % 11 == 0:
        return "I cannot tell from this picture."
    return "ABCD"[value % 4]


def _check(conversation: Any) -> None:
    """Raise like vLLM on a conversation that is not a list of {role, content} messages."""
    if not isinstance(conversation, list) or not conversation:
        raise TypeError(f"a conversation is a non-empty list of messages, got {type(conversation).__name__}")
    for message in conversation:
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise TypeError(f"a message is a dict with role and content, got {message!r:.200}")


class LLM:
    """vLLM's offline engine: `LLM(model=...)`, `chat(...)`, `get_metrics()`; see the module docstring."""

    def __init__(
        self,
        model: str,
        *,
        tensor_parallel_size: int = 1,
        seed: int | None = 0,
        gpu_memory_utilization: float = 0.9,
        trust_remote_code: bool = False,
        disable_log_stats: bool = True,
        **engine_args: Any,
    ) -> None:
        self.model = model
        self.tensor_parallel_size = int(tensor_parallel_size)
        self.engine_args = {"seed": seed, "gpu_memory_utilization": gpu_memory_utilization, **engine_args}
        self.calls: list[int] = []

    def chat(
        self,
        messages: list[dict] | list[list[dict]],
        sampling_params: SamplingParams | list[SamplingParams] | None = None,
        use_tqdm: bool = True,
        lora_request: Any = None,
        chat_template: str | None = None,
        chat_template_content_format: str = "auto",
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        tools: list[dict] | None = None,
        chat_template_kwargs: dict | None = None,
        mm_processor_kwargs: dict | None = None,
    ) -> list[RequestOutput]:
        """Answer one conversation or a list of them in one engine call (one SamplingParams, or one each)."""
        conversations = [messages] if messages and isinstance(messages[0], dict) else list(messages)
        for conversation in conversations:
            _check(conversation)
        params = sampling_params if sampling_params is not None else SamplingParams()
        if isinstance(params, list) and len(params) != len(conversations):
            raise ValueError(f"{len(params)} sampling params for {len(conversations)} conversations")
        for p in params if isinstance(params, list) else [params]:
            if not isinstance(p, SamplingParams):
                raise TypeError(f"sampling_params must be SamplingParams, got {type(p).__name__}")
        seconds = cost(len(conversations))
        self.calls.append(len(conversations))
        self._record(conversations, seconds)
        if os.environ.get(SLEEP_ENV, "").strip() == "1" and seconds > 0:
            time.sleep(seconds)
        return [
            RequestOutput(request_id=str(i), prompt=None, outputs=[CompletionOutput(index=0, text=answer(c))])
            for i, c in enumerate(conversations)
        ]

    def _record(self, conversations: list[list[dict]], seconds: float) -> None:
        """Append this call to the log named by $HVCU_VLLM_STANDIN_LOG (one JSON line, one write)."""
        path = os.environ.get(LOG_ENV)
        if not path:
            return
        turns = [sum(1 for m in c if m.get("role") == "user") for c in conversations]
        record = {"conversations": len(conversations), "user_turns": turns, "modelled_s": seconds, "pid": os.getpid()}
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")

    def get_metrics(self) -> list:
        """vLLM's engine metrics: none here."""
        return []
