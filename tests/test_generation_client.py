"""The shared OpenAI-compatible client: cache, retries, timeouts, bad bodies, concurrency; JSON replies."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from PIL import Image

from generation.client import ChatClient, ClientConfig, ClientError, ResponseCache, image_data_url
from generation.replies import ReplyError, parse_json_reply

MESSAGES = [{"role": "user", "content": "Describe the image."}]


def client_for(server: FakeOpenAI, cache: ResponseCache | None = None, **overrides) -> ChatClient:
    config = ClientConfig(model="fake-vlm", base_url=server.base_url, api_key="x", **overrides)
    return ChatClient(config, cache)


def run(coro):
    return asyncio.run(coro)


async def _complete(client: ChatClient, *args, **kwargs) -> str:
    try:
        return await client.complete(*args, **kwargs)
    finally:
        await client.close()


def test_a_repeated_request_is_served_from_the_cache_across_runs(tmp_path: Path) -> None:
    with FakeOpenAI(lambda r: "hello") as server:
        first = ResponseCache(tmp_path / "cache.sqlite")
        assert run(_complete(client_for(server, first), MESSAGES, seed=1)) == "hello"
        first.close()
        again = ResponseCache(tmp_path / "cache.sqlite")  # a new process after a kill keeps the answers
        client = client_for(server, again)
        assert run(_complete(client, MESSAGES, seed=1)) == "hello"
        assert client.usage.cached == 1 and client.usage.calls == 0
        assert run(_complete(client_for(server, again), MESSAGES, seed=2)) == "hello"  # another seed is new
        assert len(server.requests) == 2 and len(again) == 2


def test_rate_limits_are_retried_honouring_retry_after() -> None:
    def fault(n: int, _request: dict):
        return (429, {"Retry-After": "0"}, b'{"error": {"message": "slow down"}}') if n < 2 else None

    with FakeOpenAI(lambda r: "ok", fault=fault) as server:
        client = client_for(server, max_retries=3)
        assert run(_complete(client, MESSAGES)) == "ok"
        assert len(server.requests) == 3 and client.usage.calls == 1


def test_server_errors_beyond_the_retry_budget_fail_clearly() -> None:
    with FakeOpenAI(lambda r: "ok", fault=lambda n, r: (500, {"Retry-After": "0"}, b"{}")) as server:
        client = client_for(server, max_retries=2)
        with pytest.raises(ClientError, match="HTTP 500"):
            run(_complete(client, MESSAGES))
        assert len(server.requests) == 3 and client.usage.failures == 1


def test_a_slow_server_times_out_and_is_reported() -> None:
    with FakeOpenAI(lambda r: "late", delay_s=1.5) as server:
        client = client_for(server, timeout_s=0.3, max_retries=0)
        with pytest.raises(ClientError, match="timed out"):
            run(_complete(client, MESSAGES))


def test_a_malformed_body_is_an_error_not_a_crash() -> None:
    with FakeOpenAI(lambda r: "ok", fault=lambda n, r: (200, {}, b"{not json")) as server:
        with pytest.raises(ClientError):
            run(_complete(client_for(server, max_retries=0), MESSAGES))


def test_concurrency_is_bounded() -> None:
    async def many(client: ChatClient) -> list[str]:
        try:
            return await asyncio.gather(*(client.complete(MESSAGES, seed=i) for i in range(9)))
        finally:
            await client.close()

    with FakeOpenAI(lambda r: "ok", delay_s=0.2) as server:
        assert run(many(client_for(server, concurrency=3))) == ["ok"] * 9
        assert server.max_in_flight == 3


def test_image_data_urls_use_the_true_mime_type(tmp_path: Path) -> None:
    path = tmp_path / "actually_png.jpg"
    Image.new("RGB", (2, 2)).save(path, format="PNG")
    assert image_data_url(path).startswith("data:image/png;base64,")
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(ValueError, match="not a recognised image"):
        image_data_url(tmp_path / "notes.txt")


@pytest.mark.parametrize(
    "reply",
    [
        '{"question": "What is red?", "answer": "The heart", "extra": 1}',
        'Sure! Here it is:\n```json\n{"question": "What is red?", "answer": "The heart"}\n```\nHope it helps.',
        'I think {"question": "What is red?", "answer": "The heart"} fits.',
    ],
)
def test_json_replies_are_found_in_prose_and_fences(reply: str) -> None:
    obj = parse_json_reply(reply, ("question", "answer"))
    assert obj["question"] == "What is red?" and obj["answer"] == "The heart"


@pytest.mark.parametrize("reply", ["", "no json here", '{"question": "only"}', "{broken"])
def test_unusable_replies_raise_a_reply_error(reply: str) -> None:
    with pytest.raises(ReplyError):
        parse_json_reply(reply, ("question", "answer"))
