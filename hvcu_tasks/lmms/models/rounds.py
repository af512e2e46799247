"""The round driver: runs multi-round chats over many documents, one model call per round per chunk.

`run_rounds` takes the documents `chunk_size` at a time and sends every pending chain's next round (the messages
lmms-eval's one-document-at-a-time `generate_until_multi_round` loop would build) to one `generate` call. During a
call the model's document lookup finds each request's row under the private key ROUND_TASK, by position.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

from lmms_eval.api.instance import Instance
from tqdm import tqdm

ROUND_TASK = "hvcu_context:round"
"""task_dict key under which, during a round's call, the model finds each request's RoundDoc (by position)."""


class RoundDoc(dict):
    """A chain's document row as the model looks it up during a round: the row's fields plus the round's chat."""

    __slots__ = ("messages",)

    def __init__(self, row: Mapping[str, Any], messages: list[dict]) -> None:
        super().__init__(row)
        self.messages = messages


def fixed_messages(messages: list[dict]) -> Callable[..., list[dict]]:
    """Return a doc_to_messages stand-in that yields this round's precomputed messages."""

    def doc_to_messages(doc: Any = None, **_kwargs: Any) -> list[dict]:
        """Return the looked-up document's round chat (a batch may reuse one function), else our own."""
        return doc.messages if isinstance(doc, RoundDoc) else messages

    return doc_to_messages


def reply_text(output: Any) -> str | None:
    """Return the text of one model output (a str or an lmms-eval GenerationResult); None when it has none."""
    text = output if isinstance(output, str) else getattr(output, "text", None)
    return text if isinstance(text, str) else None


def next_messages(request: Instance, doc: Any, replies: list[str | None], info: Any) -> tuple[list | None, Any]:
    """Return the chain's messages for round len(replies) and the task's round info; None messages: chain over."""
    doc_to_messages = request.args[1]
    if not replies:
        return doc_to_messages(doc), info
    payload = doc_to_messages(doc, round_idx=len(replies), previous_output=list(replies), previous_round_info=info)
    if not (isinstance(payload, tuple) and len(payload) == 4):
        return None, info
    messages, terminal, _previous, info = payload
    return (None if terminal else messages), info


def run_rounds(
    requests: Sequence[Instance],
    task_dict: MutableMapping[str, Any],
    generate: Callable[[list[Instance]], list[Any]],
    chunk_size: int,
    *,
    name: str = "model",
    rank: int = 0,
    rounds_sent: list[int] | None = None,
    desc: str = "hvcu chains",
) -> list[list[str | None]]:
    """Run every request's chain `chunk_size` documents at a time, one `generate` call per round; replies in order
    (None for a reply without text: a failed request). `rounds_sent`, when given, gets the size of every call."""
    outputs: list[list[str | None]] = []
    with tqdm(total=len(requests), desc=desc, disable=rank != 0 or not requests) as bar:
        for start in range(0, len(requests), chunk_size):
            chunk = requests[start : start + chunk_size]
            outputs.extend(_run_chunk(chunk, task_dict, generate, name, rounds_sent))
            bar.update(len(chunk))
    return outputs


def _run_chunk(
    chunk: Sequence[Instance],
    task_dict: MutableMapping[str, Any],
    generate: Callable[[list[Instance]], list[Any]],
    name: str,
    rounds_sent: list[int] | None,
) -> list[list[str | None]]:
    """Run all rounds of a chunk's chains, one call per round, fetching each document once."""
    docs = [task_dict[task][split][doc_id] for *_, doc_id, task, split in (r.args for r in chunk)]
    outputs: list[list[str | None]] = [[] for _ in chunk]
    infos: list[Any] = [None] * len(chunk)
    pending = list(range(len(chunk)))
    while pending:
        batch: list[Instance] = []
        lookup: list[Any] = []
        sent: list[int] = []
        for i in pending:
            messages, infos[i] = next_messages(chunk[i], docs[i], outputs[i], infos[i])
            if messages is None:
                continue
            ctx, _doc_to_messages, gen_kwargs, doc_id, task, _split = chunk[i].args
            lookup.append(RoundDoc(docs[i], messages) if isinstance(docs[i], Mapping) else docs[i])
            batch.append(
                Instance(
                    request_type="generate_until",
                    arguments=(ctx, fixed_messages(messages), dict(gen_kwargs), len(batch), ROUND_TASK, "docs"),
                    idx=len(outputs[i]),
                    metadata={**chunk[i].metadata, "task": task, "doc_id": doc_id, "repeats": 1},  # marks kept
                )
            )
            sent.append(i)
        if not batch:
            break
        if rounds_sent is not None:
            rounds_sent.append(len(batch))
        task_dict[ROUND_TASK] = {"docs": lookup}
        try:
            replies = generate(batch)
        finally:
            task_dict.pop(ROUND_TASK, None)
        if len(replies) != len(batch):
            raise RuntimeError(f"{name} returned {len(replies)} replies for {len(batch)} requests")
        for i, reply in zip(sent, replies, strict=True):
            outputs[i].append(reply_text(reply))
        pending = sent
    return outputs
