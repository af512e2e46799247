"""The MCTS policy over the real client and a local OpenAI-compatible server: prompts, seeds, parameters, replies."""

from __future__ import annotations

import asyncio
import json

import pytest
from fake_openai import FakeOpenAI

from generation.client import ChatClient, ClientConfig
from generation.mcts import Candidate, Judgement, Node
from generation.policy import ModelPolicy, call_seed, candidate_fields, chain_text, feedback_text, judge_score
from generation.replies import ReplyError

IMAGE = "data:image/png;base64,AAAA"
PATH = [
    Node(id=3, level=1, question="What is drawn?", answer="A heart."),
    Node(id=5, level=2, question="Why bars?", answer="Confinement."),
]
GOOD = json.dumps({"question": "What does it mean?", "answer": "Love can feel like a prison."})


def requests_for(answer, calls):
    """Run `calls(policy)` against a server answering `answer(request)`; return its results and the requests."""

    async def go(server):
        client = ChatClient(ClientConfig(model="fake", base_url=server.base_url, api_key="x"))
        try:
            return await calls(ModelPolicy(client, IMAGE, "photo.png", seed=7), client)
        finally:
            await client.close()

    with FakeOpenAI(answer) as server:
        result = asyncio.run(go(server))
    return result, server.requests


def text_of(request: dict) -> str:
    return request["messages"][0]["content"][0]["text"]


# --- prompt pieces ---------------------------------------------------------------------------------------------
def test_chain_text_numbers_each_level() -> None:
    assert chain_text(PATH) == "Level 1: Q: What is drawn? A: A heart.\nLevel 2: Q: Why bars? A: Confinement."


def test_chain_text_of_an_empty_chain() -> None:
    assert chain_text([]) == "(none yet)"


def test_feedback_text_lists_every_reason() -> None:
    assert feedback_text(["low quality: 0.40 < 0.65: vague", "unparsable: empty reply"]) == (
        "Earlier candidates were rejected; avoid these problems:\n- low quality: 0.40 < 0.65: vague\n"
        "- unparsable: empty reply"
    )


def test_no_feedback_adds_nothing() -> None:
    assert feedback_text([]) == ""


# --- seeds -----------------------------------------------------------------------------------------------------
def test_call_seeds_are_stable_31_bit_numbers() -> None:
    # Pinned: a rerun (or a resumed run) must send the same seeds so that cached answers are reused.
    assert call_seed(0, "img", "judge", "Q?", "A.") == 1119765501
    assert call_seed(0, "img", "judge", "What is drawn?", "A.") == 9473269  # the hash's top bit is masked off


def test_every_position_in_the_search_gets_its_own_generator_seed() -> None:
    base = {"path": PATH, "level": 3, "index": 0, "temperature": 0.8, "feedback": ("too similar",)}
    variants = [
        {},
        {"path": PATH[:1]},
        {"level": 2},
        {"index": 1},
        {"temperature": 0.9},
        {"feedback": ()},
    ]

    async def calls(policy, client):
        for change in variants:
            a = {**base, **change}
            await policy._one(a["path"], a["level"], a["index"], a["temperature"], a["feedback"])
        other_seed = ModelPolicy(client, IMAGE, "photo.png", seed=8)
        await other_seed._one(PATH, 3, 0, 0.8, ("too similar",))
        other_image = ModelPolicy(client, IMAGE, "other.png", seed=7)
        await other_image._one(PATH, 3, 0, 0.8, ("too similar",))

    _, requests = requests_for(lambda r: GOOD, calls)
    seeds = [r["seed"] for r in requests]
    assert all(isinstance(s, int) and 0 <= s < 2**31 for s in seeds)
    assert len(set(seeds)) == len(seeds) == 8


def test_the_same_call_gets_the_same_seed() -> None:
    async def calls(policy, client):
        await policy._one(PATH, 3, 0, 0.8, ())
        await ModelPolicy(client, IMAGE, "photo.png", seed=7)._one(PATH, 3, 0, 0.8, ())

    _, requests = requests_for(lambda r: GOOD, calls)
    assert requests[0]["seed"] == requests[1]["seed"]


def test_every_candidate_gets_its_own_judge_seed() -> None:
    candidates = [Candidate("Q1?", "A."), Candidate("Q2?", "A."), Candidate("Q1?", "B.")]

    async def calls(policy, client):
        for c in candidates:
            await policy.judge(PATH, c)
        await ModelPolicy(client, IMAGE, "photo.png", seed=8).judge(PATH, candidates[0])
        await ModelPolicy(client, IMAGE, "other.png", seed=7).judge(PATH, candidates[0])

    _, requests = requests_for(lambda r: json.dumps({"score": 0.5, "reason": "ok"}), calls)
    assert len({r["seed"] for r in requests}) == 5


def test_the_judge_seed_is_pinned() -> None:
    async def calls(policy, client):
        await ModelPolicy(client, IMAGE, "img", seed=0).judge([], Candidate("Q?", "A."))

    _, requests = requests_for(lambda r: json.dumps({"score": 0.5, "reason": "ok"}), calls)
    assert requests[0]["seed"] == 1119765501


# --- what the generator sends and reads ------------------------------------------------------------------------
def test_the_generator_request() -> None:
    async def calls(policy, client):
        return await policy.generate(PATH, 3, 2, 0.9, ["too similar: 0.80 >= 0.75 to a sibling"])

    candidates, requests = requests_for(lambda r: GOOD, calls)
    assert candidates == [Candidate("What does it mean?", "Love can feel like a prison.")] * 2
    assert len(requests) == 2
    for request in requests:
        assert (request["temperature"], request["max_tokens"]) == (0.9, 512)
        assert [m["role"] for m in request["messages"]] == ["user"]
        content = request["messages"][0]["content"]
        assert [part["type"] for part in content] == ["text", "image_url"]
        assert content[1]["image_url"] == {"url": IMAGE}
        text = content[0]["text"]
        assert "Level 3" in text and "CONNOTATION" in text.upper()
        assert "Level 1: Q: What is drawn? A: A heart.\nLevel 2: Q: Why bars? A: Confinement." in text
        assert "Earlier candidates were rejected; avoid these problems:\n- too similar: 0.80 >= 0.75" in text
    assert requests[0]["seed"] != requests[1]["seed"]


def test_a_first_level_candidate_is_judged_with_an_empty_chain() -> None:
    async def calls(policy, client):
        return await policy.judge([], Candidate("What is drawn?", "A heart."))

    _, requests = requests_for(lambda r: json.dumps({"score": 0.5, "reason": "ok"}), calls)
    assert "The chain so far:\n(none yet)\nCandidate for level 1:" in text_of(requests[0])


def test_a_generator_prompt_without_feedback_mentions_no_rejection() -> None:
    async def calls(policy, client):
        return await policy.generate([], 1, 1, 0.8, [])

    _, requests = requests_for(lambda r: GOOD, calls)
    assert "rejected" not in text_of(requests[0])
    assert "PERCEPTION" in text_of(requests[0])


def test_a_generator_reply_without_the_fields_is_a_rejected_candidate() -> None:
    async def calls(policy, client):
        return await policy.generate(PATH, 3, 1, 0.8, []), client.usage.unusable

    (candidates, unusable), _ = requests_for(lambda r: json.dumps({"question": "Q?"}), calls)
    assert candidates == [
        Candidate(error="no JSON object with keys ['question', 'answer'] in reply: " + repr('{"question": "Q?"}'))
    ]
    assert unusable == 1  # the client was told the reply is unusable (so it is not cached)


def test_a_long_unusable_reply_is_reported_in_300_characters() -> None:
    async def calls(policy, client):
        return await policy.generate(PATH, 3, 1, 0.8, [])

    candidates, _ = requests_for(lambda r: "\x01" * 400, calls)
    assert len(candidates[0].error) == 300
    assert candidates[0].error.startswith("no JSON object with keys ['question', 'answer'] in reply: '\\x01")


def test_generated_fields_are_stripped() -> None:
    assert candidate_fields('{"question": " Q? ", "answer": " A. "}') == {"question": "Q?", "answer": "A."}


@pytest.mark.parametrize("reply", ['{"question": "Q?", "answer": ""}', '{"question": 3, "answer": "A."}'])
def test_generated_fields_must_be_text(reply: str) -> None:
    with pytest.raises(ReplyError, match="must be non-empty text"):
        candidate_fields(reply)


# --- what the judge sends and reads ----------------------------------------------------------------------------
def test_the_judge_request_and_verdict() -> None:
    async def calls(policy, client):
        return await policy.judge(PATH, Candidate("What does it mean?", "Love hurts."))

    verdict, requests = requests_for(lambda r: json.dumps({"score": 0.7, "reason": "coherent"}), calls)
    assert verdict == Judgement(0.7, "coherent")
    request = requests[0]
    assert (request["temperature"], request["max_tokens"]) == (0.2, 256)
    content = request["messages"][0]["content"]
    assert content[1]["image_url"] == {"url": IMAGE}
    text = content[0]["text"]
    assert text.startswith("You judge")
    assert "Candidate for level 3:\nQuestion: What does it mean?\nAnswer: Love hurts." in text
    assert "Level 1: Q: What is drawn? A: A heart.\nLevel 2: Q: Why bars? A: Confinement." in text


def test_an_unusable_judge_reply_scores_zero_with_the_reason() -> None:
    async def calls(policy, client):
        return await policy.judge(PATH, Candidate("Q?", "A.")), client.usage.unusable

    (verdict, unusable), _ = requests_for(lambda r: "x" * 400, calls)
    assert verdict.score == 0.0
    prefix = "judge reply unusable: no JSON object with keys ['score', 'reason'] in reply: 'xxx"
    assert verdict.reason.startswith(prefix)
    assert len(verdict.reason) == len("judge reply unusable: ") + 200
    assert unusable == 1


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ('{"score": 0.7, "reason": "r"}', 0.7),
        ('{"score": "0.4", "reason": "r"}', 0.4),
        ('{"score": 1.5, "reason": "r"}', 1.0),
        ('{"score": -0.2, "reason": "r"}', 0.0),
        ('{"score": 1, "reason": "r"}', 1.0),
        ('{"score": 0, "reason": "r"}', 0.0),
    ],
)
def test_judge_scores_are_clipped_to_the_unit_interval(reply: str, score: float) -> None:
    assert judge_score(reply) == score


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ('{"score": "high", "reason": "r"}', "judge score 'high' is not a number"),
        ('{"score": null, "reason": "r"}', "judge score None is not a number"),
        ('{"score": true, "reason": "r"}', "judge score True is not a finite number"),
        ('{"score": "nan", "reason": "r"}', "judge score 'nan' is not a finite number"),
        ('{"score": "inf", "reason": "r"}', "judge score 'inf' is not a finite number"),
    ],
)
def test_judge_scores_must_be_finite_numbers(reply: str, message: str) -> None:
    with pytest.raises(ReplyError, match="^" + message.replace("(", r"\(") + "$"):
        judge_score(reply)


def test_a_judge_reply_needs_both_keys() -> None:
    with pytest.raises(ReplyError, match=r"no JSON object with keys \['score', 'reason'\]"):
        judge_score('{"score": 0.5}')
