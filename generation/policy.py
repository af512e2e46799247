"""The MCTS policy backed by an MLLM: our prompts, the shared client, JSON replies, seeded calls."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from generation.client import ChatClient
from generation.mcts import Candidate, Judgement, Node, gather_all
from generation.replies import ReplyError, parse_json_reply, text_fields

JUDGE_TEMPERATURE = 0.2


@cache
def prompt(name: str) -> str:
    """Return a prompt template shipped in generation/prompts."""
    return resources.files("generation").joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8")


def chain_text(path: Sequence[Node]) -> str:
    """Render the chain above a candidate as numbered Q/A lines."""
    return "\n".join(f"Level {n.level}: Q: {n.question} A: {n.answer}" for n in path) or "(none yet)"


def feedback_text(feedback: Sequence[str]) -> str:
    """Render the previous attempt's rejection reasons as guidance."""
    if not feedback:
        return ""
    return "Earlier candidates were rejected; avoid these problems:\n" + "\n".join(f"- {r}" for r in feedback)


def call_seed(*parts: object) -> int:
    """Return a stable 31-bit seed for one model call from its position in the search."""
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


def user_message(text: str, image_url: str) -> list[dict[str, Any]]:
    """Return one user turn with the instruction text and the image as a data URL."""
    return [
        {
            "role": "user",
            "content": [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": image_url}}],
        }
    ]


@dataclass
class ModelPolicy:
    """Generator and judge calls for one image through an OpenAI-compatible client."""

    client: ChatClient
    image_url: str
    image_key: str
    seed: int = 0
    max_tokens: int = 512

    async def _one(
        self, path: Sequence[Node], level: int, index: int, temperature: float, feedback: Sequence[str]
    ) -> Candidate:
        """Generate one candidate; an unusable reply is a rejected candidate, a failed call raises ClientError."""
        text = prompt(f"level_{level}").format(chain=chain_text(path), feedback=feedback_text(feedback))
        seed = call_seed(self.seed, self.image_key, [n.id for n in path], level, index, temperature, tuple(feedback))
        try:
            reply = await self.client.complete(
                user_message(text, self.image_url),
                temperature=temperature,
                max_tokens=self.max_tokens,
                seed=seed,
                accept=candidate_fields,
            )
            fields = candidate_fields(reply)
        except ReplyError as exc:
            return Candidate(error=str(exc)[:300])
        return Candidate(question=fields["question"], answer=fields["answer"])

    async def generate(
        self, path: Sequence[Node], level: int, n: int, temperature: float, feedback: Sequence[str]
    ) -> list[Candidate]:
        """Generate n candidates in parallel (every call finishes before a failed one is raised)."""
        return await gather_all(self._one(path, level, i, temperature, feedback) for i in range(n))

    async def judge(self, path: Sequence[Node], candidate: Candidate) -> Judgement:
        """Score a candidate; an unusable judge reply scores 0 with the reason, a failed call raises ClientError."""
        text = prompt("judge").format(
            chain=chain_text(path), level=len(path) + 1, question=candidate.question, answer=candidate.answer
        )
        seed = call_seed(self.seed, self.image_key, "judge", candidate.question, candidate.answer)
        try:
            reply = await self.client.complete(
                user_message(text, self.image_url),
                temperature=JUDGE_TEMPERATURE,
                max_tokens=256,
                seed=seed,
                accept=judge_score,
            )
            score, reason = judge_score(reply), str(parse_json_reply(reply, ("score", "reason"))["reason"])
        except ReplyError as exc:
            return Judgement(0.0, f"judge reply unusable: {str(exc)[:200]}")
        return Judgement(score, reason)


def candidate_fields(reply: str) -> dict[str, str]:
    """Return a generator reply's question and answer as non-empty text; raise ReplyError otherwise."""
    return text_fields(parse_json_reply(reply, ("question", "answer")), ("question", "answer"))


def judge_score(reply: str) -> float:
    """Return the judge's score clipped to [0, 1]; raise ReplyError when the reply holds no numeric score."""
    value = parse_json_reply(reply, ("score", "reason"))["score"]
    try:
        score = float(value)
    except (TypeError, ValueError) as exc:
        raise ReplyError(f"judge score {value!r} is not a number") from exc
    if isinstance(value, bool) or not math.isfinite(score):
        raise ReplyError(f"judge score {value!r} is not a finite number")
    return min(1.0, max(0.0, score))
