"""The request cache of hvcu_context: exact keys, replies durable as they arrive, only real replies kept."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms
from PIL import Image

from hvcu_tasks.data.images import SOURCE_ATTR, ImageSource
from hvcu_tasks.lmms.models.cache_runs import new_run_id
from hvcu_tasks.lmms.models.request_cache import (
    RequestCache,
    cache_location,
    cache_setting,
    hook_client,
    model_identity,
)
from hvcu_tasks.lmms.models.wrapper import ContextWrapper

IDENTITY = {"backend": "openai", "args": {"model_version": "m1"}, "endpoint": "http://host/v1"}


def png(color: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 4), color).save(out, format="PNG")
    return out.getvalue()


def picture(path: Path | None = None, data: bytes | None = None) -> Image.Image:
    """A decoded image as the HVCU tasks hand it out: pixels plus the source it came from."""
    source = ImageSource(path=str(path)) if path is not None else ImageSource(data=data)
    image = Image.open(io.BytesIO(source.read())).convert("RGB")
    setattr(image, SOURCE_ATTR, source)
    return image


def request(text: str = "Which?", image: Image.Image | None = None, **gen) -> dict:
    content = [{"type": "text", "text": text}]
    if image is not None:
        content.append({"type": "image", "url": image})
    return {"messages": [{"role": "user", "content": content}], "gen_kwargs": {"max_new_tokens": 64, **gen}}


@pytest.fixture
def cache(tmp_path: Path) -> RequestCache:
    return RequestCache(tmp_path / "c", IDENTITY)


# ---- keys ----


def test_the_same_request_built_twice_has_the_same_key(cache: RequestCache) -> None:
    first = request(image=picture(data=png("red")), temperature=0)
    second = request(image=picture(data=png("red")), temperature=0)
    second["gen_kwargs"] = dict(reversed(list(second["gen_kwargs"].items())))
    assert cache.key(first) == cache.key(second)


def test_the_key_changes_with_the_text(cache: RequestCache) -> None:
    assert cache.key(request("Which one?")) != cache.key(request("Which two?"))


def test_the_key_changes_with_the_image_bytes(cache: RequestCache) -> None:
    assert cache.key(request(image=picture(data=png("red")))) != cache.key(request(image=picture(data=png("blue"))))


def test_the_key_follows_the_image_content_not_its_path(tmp_path: Path, cache: RequestCache) -> None:
    (tmp_path / "a.png").write_bytes(png("red"))
    (tmp_path / "b.png").write_bytes(png("red"))
    key_a = cache.key(request(image=picture(tmp_path / "a.png")))
    assert key_a == cache.key(request(image=picture(tmp_path / "b.png")))
    (tmp_path / "a.png").write_bytes(png("green"))
    assert cache.key(request(image=picture(tmp_path / "a.png"))) != key_a


@pytest.mark.parametrize(
    "setting", [{"temperature": 0.7}, {"max_new_tokens": 65}, {"top_p": 0.9}, {"seed": 1}, {"until": ["\n"]}]
)
def test_the_key_changes_with_each_generation_setting(cache: RequestCache, setting: dict) -> None:
    assert cache.key(request()) != cache.key(request(**setting))


@pytest.mark.parametrize(
    "other",
    [
        {"backend": "async_openai", "args": {"model_version": "m1"}, "endpoint": "http://host/v1"},
        {"backend": "openai", "args": {"model_version": "m2"}, "endpoint": "http://host/v1"},
        {"backend": "openai", "args": {"model_version": "m1"}, "endpoint": "http://other/v1"},
    ],
)
def test_the_key_changes_with_the_model_identity(tmp_path: Path, cache: RequestCache, other: dict) -> None:
    assert RequestCache(tmp_path / "c", other).key(request()) != cache.key(request())


def test_credentials_and_sending_knobs_are_not_part_of_the_identity() -> None:
    plain = model_identity("openai", {"model_version": "m"})
    assert model_identity("openai", {"model_version": "m", "api_key": "sk-1", "num_concurrent": 8}) == plain
    assert model_identity("openai", {"model_version": "m", "max_new_tokens": 9}) != plain


def test_the_identity_card_on_disk_holds_no_credential(tmp_path: Path) -> None:
    store = RequestCache(tmp_path, model_identity("openai", {"model_version": "m", "api_key": "sk-secret-1"}))
    assert "sk-secret-1" not in (store.folder / "identity.json").read_text()


# ---- durability ----


def test_a_stored_reply_is_read_back_when_the_unfinished_run_resumes(tmp_path: Path, cache: RequestCache) -> None:
    key = cache.key(request())
    assert cache.put(key, "Answer: B", "stop")
    cache.close()
    again = RequestCache(tmp_path / "c", IDENTITY)
    assert again.get(key) == ("Answer: B", "stop")


@pytest.mark.parametrize("reply", [None, "", "  \n", "[LMMS_EVAL_REQUEST_FAILED after 5 retries] 500", 7])
def test_a_reply_that_is_not_real_text_is_never_stored(tmp_path: Path, cache: RequestCache, reply) -> None:
    key = cache.key(request())
    assert not cache.put(key, reply)
    assert RequestCache(tmp_path / "c", IDENTITY).get(key) is None


def test_a_torn_last_record_is_skipped_with_a_warning(tmp_path: Path, cache: RequestCache, caplog) -> None:
    cache.put("k1", "A")
    cache.put("k2", "B")
    cache.close()
    with cache.path.open("ab") as f:
        f.write(b'{"key": "k3", "reply": "C", "fin')
    with caplog.at_level(logging.WARNING, logger="hvcu_tasks"):
        again = RequestCache(tmp_path / "c", IDENTITY)
    assert (again.get("k1"), again.get("k2"), again.get("k3")) == (("A", None), ("B", None), None)
    assert f"{cache.path} line 3: record cut short" in caplog.text


WRITER = textwrap.dedent(
    """
    import sys
    from hvcu_tasks.lmms.models.request_cache import RequestCache
    store = RequestCache(sys.argv[1], {"backend": "writer"}, name="writer")
    n = 0
    while True:
        store.put(f"k{n}", f"reply {n}")
        print(n, flush=True)
        n += 1
    """
)


def test_replies_survive_the_writer_being_killed_mid_run(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    for _ in range(200):
        last = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = RequestCache(tmp_path, {"backend": "writer"}, name="writer")
    assert store.resumed  # the killed writer's run, never ended, is resumed
    assert all(store.get(f"k{n}") == (f"reply {n}", None) for n in range(last + 1))


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    script = WRITER.replace("while True:", "while n < 300:").replace('f"k{n}"', 'f"{sys.argv[2]}{n}"')
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), tag]) for tag in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    store = RequestCache(tmp_path, {"backend": "writer"}, name="writer", reuse="all")
    assert len({f"{tag}{n}" for tag in "ab" for n in range(300)} - set(store.replies) - set(store.reused)) == 0
    assert len(list(store.folder.glob("runs/*/rank-0/*.jsonl"))) == 2  # two concurrent runs: one run and file each


# ---- settings ----


@pytest.mark.parametrize(
    ("value", "expected"), [(None, "auto"), ("off", "off"), (False, "off"), ("on", "on"), (1, "on")]
)
def test_cache_setting_words(value, expected) -> None:
    assert cache_setting(value) == expected


def test_cache_setting_takes_a_folder(tmp_path: Path) -> None:
    assert cache_setting(str(tmp_path / "x")) == tmp_path / "x"


@pytest.mark.parametrize("bad", [2.5, "", "   "])
def test_a_bad_cache_setting_is_a_clear_error(bad) -> None:
    with pytest.raises(ValueError, match="hvcu_context: cache must be on, off or a folder"):
        cache_setting(bad)


def test_by_default_the_cache_is_on_for_api_backends_off_for_local_models(hvcu_cache: Path) -> None:
    assert cache_location("auto", api=True) == hvcu_cache / "requests-v2"
    assert cache_location("auto", api=False) is None


def test_cache_on_when_the_toolkit_caches_are_off_is_an_error(monkeypatch) -> None:
    monkeypatch.setenv("HVCU_CACHE_DIR", "off")
    assert cache_location("auto", api=True) is None
    with pytest.raises(ValueError, match="cache=on, but HVCU_CACHE_DIR turns the toolkit's caches off"):
        cache_location("on", api=True)


# ---- the OpenAI client hook ----


def answer_by_text(body: dict) -> str:
    return "Answer: " + body["messages"][-1]["content"][0]["text"][-1]


PAYLOAD = {"model": "m1", "max_tokens": 8, "temperature": 0}


def chat_payload(text: str) -> dict:
    return {**PAYLOAD, "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}


def test_a_client_answers_a_repeated_request_from_the_cache(cache: RequestCache) -> None:
    import openai

    with FakeOpenAI(answer_by_text) as server:
        client = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)
        hook_client(client, cache)
        first = client.chat.completions.create(**chat_payload("q A"))
        again = client.chat.completions.create(**chat_payload("q A"))
        other = client.chat.completions.create(**chat_payload("q B"))
        sent = len(server.requests)
    assert [first.choices[0].message.content, again.choices[0].message.content] == ["Answer: A", "Answer: A"]
    assert other.choices[0].message.content == "Answer: B"
    assert sent == 2


def test_an_async_client_answers_a_repeated_request_from_the_cache(cache: RequestCache) -> None:
    import openai

    async def twice(base_url: str) -> list[str]:
        client = openai.AsyncOpenAI(api_key="x", base_url=base_url, max_retries=0)
        hook_client(client, cache)
        replies = [await client.chat.completions.create(**chat_payload("q C")) for _ in range(2)]
        return [r.choices[0].message.content for r in replies]

    with FakeOpenAI(answer_by_text) as server:
        assert asyncio.run(twice(server.base_url)) == ["Answer: C", "Answer: C"]
        assert len(server.requests) == 1


def test_a_failed_request_is_not_cached_and_is_asked_again(cache: RequestCache) -> None:
    import openai

    def fail_first(n: int, _body: dict):
        return (500, {}, b'{"error": {"message": "boom"}}') if n == 0 else None

    with FakeOpenAI(answer_by_text, fault=fail_first) as server:
        client = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)
        hook_client(client, cache)
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(**chat_payload("q D"))
        assert client.chat.completions.create(**chat_payload("q D")).choices[0].message.content == "Answer: D"
        assert len(server.requests) == 2


def test_an_empty_reply_is_not_cached_and_is_asked_again(cache: RequestCache) -> None:
    import openai

    with FakeOpenAI(lambda body: "") as server:
        client = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)
        hook_client(client, cache)
        for _ in range(2):
            client.chat.completions.create(**chat_payload("q E"))
        assert len(server.requests) == 2


# ---- the wrapper with a local (non-client) backend ----


class Counting(lmms):
    """A local chat model answering 'reply to <text>'; counts what it is asked, fails after `fail_after` replies."""

    is_simple = False

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__()
        self.asked: list[str] = []
        self.fail_after = fail_after

    def generate_until(self, requests):
        replies = []
        for r in requests:
            if self.fail_after is not None and len(self.asked) >= self.fail_after:
                raise RuntimeError("killed")
            text = r.args[1](self.task_dict[r.args[4]][r.args[5]][r.args[3]])[0]["content"][0]["text"]
            self.asked.append(text)
            replies.append(f"reply to {text}")
        return replies

    def loglikelihood(self, requests):
        raise NotImplementedError

    def generate_until_multi_round(self, requests):
        raise NotImplementedError


def base_requests(n: int) -> list[Instance]:
    def doc_to_messages(doc):
        return [{"role": "user", "content": [{"type": "text", "text": doc["q"]}]}]

    return [
        Instance(
            "generate_until",
            ("", doc_to_messages, {"max_new_tokens": 8}, i, "t", "test"),
            idx=0,
            metadata={"task": "t", "doc_id": i, "repeats": 1},
        )
        for i in range(n)
    ]


def local(model: Counting, cache, chunk_size: int = 2) -> ContextWrapper:
    wrapper = ContextWrapper.around(model, "local", chunk_size=chunk_size, cache=cache, model_args={"pretrained": "p"})
    wrapper.task_dict["t"] = {"test": [{"q": f"q{i}"} for i in range(5)]}
    return wrapper


def test_a_local_model_rerun_asks_only_what_a_killed_run_left(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="killed"):
        local(Counting(fail_after=3), str(tmp_path)).generate_until(base_requests(5))
    model = Counting()
    replies = local(model, str(tmp_path)).generate_until(base_requests(5))
    assert replies == [f"reply to q{i}" for i in range(5)]
    assert model.asked == ["q2", "q3", "q4"]  # q2 was asked in the killed run's unfinished call of 2


def test_the_cache_is_off_by_default_for_a_local_model(tmp_path: Path, hvcu_cache: Path) -> None:
    for _ in range(2):
        model = Counting()
        local(model, None).generate_until(base_requests(5))
        assert len(model.asked) == 5
    assert not (hvcu_cache / "requests-v2").exists()


def test_the_cache_location_is_printed_once(tmp_path: Path, capsys) -> None:
    local(Counting(), str(tmp_path))
    err = capsys.readouterr().err
    assert err.count("hvcu_context: request cache ") == 1
    assert str(tmp_path) in err


def test_cache_off_turns_it_off_for_an_api_backend(tmp_path: Path, capsys) -> None:
    with FakeOpenAI(lambda body: "Answer: A") as server:
        for _ in range(2):
            wrapper = ContextWrapper(
                inner="openai", cache="off", model_version="m", base_url=server.base_url, api_key="x"
            )
            wrapper.task_dict["t"] = {"test": [{"q": f"q{i}"} for i in range(5)]}
            wrapper.generate_until(base_requests(2))
        assert len(server.requests) == 4
    assert "hvcu_context: request cache off (cache=off)" in capsys.readouterr().err


def test_an_api_backend_is_cached_by_default(hvcu_cache: Path, capsys) -> None:
    with FakeOpenAI(lambda body: "Answer: A") as server:
        wrapper = ContextWrapper(inner="openai", model_version="m", base_url=server.base_url, api_key="x")
        wrapper.task_dict["t"] = {"test": [{"q": f"q{i}"} for i in range(5)]}
        for _ in range(2):  # within one run a repeated request is paid once
            assert [r.text for r in wrapper.generate_until(base_requests(2))] == ["Answer: A"] * 2
        assert len(server.requests) == 2
    assert str(hvcu_cache / "requests-v2") in capsys.readouterr().err


def chain_requests(n: int) -> list[Instance]:
    """Two-round chains: round 2 shows round 1's reply as an assistant turn."""

    def doc_to_messages(doc, round_idx=None, previous_output=None, previous_round_info=None):
        first = [{"role": "user", "content": [{"type": "text", "text": doc["q"]}]}]
        if round_idx is None:
            return first
        if round_idx >= 2:
            return None, True, previous_output, previous_round_info
        said = {"role": "assistant", "content": [{"type": "text", "text": previous_output[0]}]}
        follow = {"role": "user", "content": [{"type": "text", "text": doc["q"] + " then"}]}
        return [*first, said, follow], False, previous_output, previous_round_info

    return [
        Instance(
            "generate_until_multi_round",
            ("", doc_to_messages, {"max_new_tokens": 8}, i, "t", "test"),
            idx=0,
            metadata={"task": "t", "doc_id": i, "repeats": 1},
        )
        for i in range(n)
    ]


def test_a_local_models_killed_chains_resume_from_the_cache(tmp_path: Path) -> None:
    whole = local(Counting(), str(tmp_path / "whole")).generate_until_multi_round(chain_requests(3))
    with pytest.raises(RuntimeError, match="killed"):  # dies in chunk [q0, q1]'s second round
        local(Counting(fail_after=3), str(tmp_path)).generate_until_multi_round(chain_requests(3))
    again = Counting()
    assert local(again, str(tmp_path)).generate_until_multi_round(chain_requests(3)) == whole
    # Counting records each chat's first user text: the rerun asks q0's and q1's round 2, then q2's two rounds.
    assert again.asked == ["q0", "q1", "q2", "q2"]


def test_async_openai_sends_each_request_once_across_the_wrappers_calls(tmp_path: Path) -> None:
    """lmms-eval's async_openai runs each call in a new event loop; its client's pooled connections must not
    make the next call's first requests fail and go out twice."""
    with FakeOpenAI(lambda body: "Answer: A") as server:
        wrapper = ContextWrapper(
            inner="async_openai", cache="off", model_version="m", base_url=server.base_url, api_key="x", num_cpus=4
        )
        wrapper.task_dict["t"] = {"test": [{"q": f"q{i}"} for i in range(5)]}
        for _ in range(2):
            assert [r.text for r in wrapper.generate_until(base_requests(5))] == ["Answer: A"] * 5
        assert len(server.requests) == 10


# ---- a reply or request the cache cannot handle never reaches the backend as an error ----

CUT_EMOJI = "Answer: B \ud83d"
"""A reply cut at max_tokens in the middle of an emoji: a lone surrogate, valid in JSON, not encodable as UTF-8."""


def test_a_reply_with_a_lone_surrogate_is_stored_and_read_back_exactly(tmp_path: Path, cache: RequestCache) -> None:
    key = cache.key(request())
    assert cache.put(key, CUT_EMOJI, "length")
    cache.close()
    assert RequestCache(tmp_path / "c", IDENTITY).get(key) == (CUT_EMOJI, "length")


def test_a_client_reply_with_a_lone_surrogate_reaches_the_backend_and_is_replayed(cache: RequestCache) -> None:
    import openai

    with FakeOpenAI(lambda body: CUT_EMOJI) as server:
        client = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)
        hook_client(client, cache)
        replies = [client.chat.completions.create(**chat_payload("q S")).choices[0].message.content for _ in range(2)]
        assert (replies, len(server.requests)) == ([CUT_EMOJI, CUT_EMOJI], 1)


def test_a_chain_whose_first_reply_has_a_lone_surrogate_runs_its_second_round(tmp_path: Path) -> None:
    class CutEmoji(Counting):
        """Answers the last user text, cut inside an emoji."""

        def generate_until(self, requests):
            chats = [r.args[1](self.task_dict[r.args[4]][r.args[5]][r.args[3]]) for r in requests]
            self.asked += [chat[-1]["content"][0]["text"] for chat in chats]
            return [f"reply to {chat[-1]['content'][0]['text']} \ud83d" for chat in chats]

    first = CutEmoji()
    wrapper = local(first, str(tmp_path))
    outputs = wrapper.generate_until_multi_round(chain_requests(1))
    wrapper.end_run()
    again = CutEmoji()
    reused = ContextWrapper.around(
        again, "local", chunk_size=2, cache=str(tmp_path), model_args={"pretrained": "p"}, reuse="all"
    )
    reused.task_dict["t"] = {"test": [{"q": "q0"}]}
    assert reused.generate_until_multi_round(chain_requests(1)) == outputs
    assert outputs == [["reply to q0 \ud83d", "reply to q0 then \ud83d"]]
    assert (first.asked, again.asked) == (["q0", "q0 then"], [])


def test_a_reply_that_cannot_be_written_still_reaches_the_backend_with_one_warning(
    cache: RequestCache, monkeypatch, caplog
) -> None:
    import errno

    import openai

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with FakeOpenAI(answer_by_text) as server, caplog.at_level(logging.WARNING, logger="hvcu_tasks"):
        client = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)
        hook_client(client, cache)
        replies = [client.chat.completions.create(**chat_payload(q)).choices[0].message.content for q in ("q F", "q G")]
    assert replies == ["Answer: F", "Answer: G"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert str(cache.path) in warnings[0] and "No space left on device" in warnings[0]


def test_a_request_whose_image_file_vanished_is_sent_uncached(tmp_path: Path, cache: RequestCache, caplog) -> None:
    (tmp_path / "a.png").write_bytes(png("red"))
    image = picture(tmp_path / "a.png")
    (tmp_path / "a.png").unlink()
    with caplog.at_level(logging.WARNING, logger="hvcu_tasks"):
        assert cache.key(request(image=image)) is None
    assert "a.png" in caplog.text


def test_the_key_of_a_palette_image_follows_its_palette(cache: RequestCache) -> None:
    def paletted(color: tuple[int, int, int]) -> Image.Image:
        image = Image.new("P", (4, 4), 0)
        image.putpalette([*color, *([0, 0, 0] * 255)])
        return image

    assert cache.key(request(image=paletted((255, 0, 0)))) != cache.key(request(image=paletted((0, 0, 255))))


def test_an_async_client_stores_replies_without_blocking_the_event_loop(cache: RequestCache, monkeypatch) -> None:
    import time

    import openai

    monkeypatch.setattr(os, "fsync", lambda fd: time.sleep(1.0))

    async def ticks_during_one_request(base_url: str) -> int:
        client = openai.AsyncOpenAI(api_key="x", base_url=base_url, max_retries=0)
        hook_client(client, cache)
        done, ticks = asyncio.Event(), 0

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                await asyncio.sleep(0.01)
                ticks += 1

        counting = asyncio.create_task(ticker())
        await client.chat.completions.create(**chat_payload("q T"))
        done.set()
        await counting
        return ticks

    with FakeOpenAI(answer_by_text) as server:
        assert asyncio.run(ticks_during_one_request(server.base_url)) >= 30


# ---- an unusable cache folder ----


def api_wrapper(server: FakeOpenAI, **args) -> ContextWrapper:
    wrapper = ContextWrapper(inner="openai", model_version="m", base_url=server.base_url, api_key="x", **args)
    wrapper.task_dict["t"] = {"test": [{"q": f"q{i}"} for i in range(5)]}
    return wrapper


def test_an_unusable_default_cache_folder_runs_uncached_with_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setenv("HVCU_CACHE_DIR", "/dev/null/x")
    with FakeOpenAI(lambda body: "Answer: A") as server:
        for _ in range(2):
            assert [r.text for r in api_wrapper(server).generate_until(base_requests(2))] == ["Answer: A"] * 2
        assert len(server.requests) == 4
    lines = [line for line in capsys.readouterr().err.splitlines() if "hvcu_context" in line]
    assert (
        lines
        == [
            f"hvcu_context: inner openai, model m, endpoint {server.base_url.rstrip('/')}",
            "hvcu_context: request cache off (cannot create /dev/null/x/requests-v2: Not a directory)",
        ]
        * 2
    )


@pytest.mark.parametrize("cache", ["on", "/dev/null/x"])
def test_an_unusable_cache_folder_asked_for_is_a_one_line_error(monkeypatch, cache: str) -> None:
    monkeypatch.setenv("HVCU_CACHE_DIR", "/dev/null/x")
    with FakeOpenAI(lambda body: "Answer: A") as server, pytest.raises(ValueError) as error:
        api_wrapper(server, cache=cache)
    message = str(error.value)
    folder = "/dev/null/x/requests-v2" if cache == "on" else "/dev/null/x"
    assert message.startswith(f"hvcu_context: cannot create the request cache {folder}: Not a directory;")
    assert "\n" not in message


# ---- model identity ----


class Versioned(Counting):
    """A chat model that says which model it is only through its attributes (as lmms-eval backends do)."""

    def __init__(self, model_version: str) -> None:
        super().__init__()
        self.model_version = model_version

    def generate_until(self, requests):
        return [f"{self.model_version}: {reply}" for reply in super().generate_until(requests)]


def around(model: lmms, name: str, tmp_path: Path, **args) -> ContextWrapper:
    wrapper = ContextWrapper.around(model, name, cache=str(tmp_path), **args)
    wrapper.task_dict["t"] = {"test": [{"q": f"q{i}"} for i in range(5)]}
    return wrapper


def test_two_models_wrapped_without_arguments_keep_their_own_replies(tmp_path: Path) -> None:
    first = around(Versioned("gemini-a"), "gemini", tmp_path).generate_until(base_requests(2))
    second = around(Versioned("gemini-b"), "gemini", tmp_path).generate_until(base_requests(2))
    assert (first, second) == (
        ["gemini-a: reply to q0", "gemini-a: reply to q1"],
        ["gemini-b: reply to q0", "gemini-b: reply to q1"],
    )


def test_an_api_model_wrapped_with_nothing_identifying_it_runs_uncached(capsys) -> None:
    for _ in range(2):
        model = Counting()
        wrapper = ContextWrapper.around(model, "gemini")
        wrapper.task_dict["t"] = {"test": [{"q": f"q{i}"} for i in range(5)]}
        wrapper.generate_until(base_requests(2))
        assert model.asked == ["q0", "q1"]
    err = capsys.readouterr().err
    assert err.count("hvcu_context: request cache off (nothing identifies the inner model gemini") == 2


def test_cache_on_for_a_model_with_nothing_identifying_it_is_a_one_line_error() -> None:
    with pytest.raises(
        ValueError, match=r"^hvcu_context: cache=on, but nothing identifies the inner model gemini"
    ) as e:
        ContextWrapper.around(Counting(), "gemini", cache="on")
    assert "\n" not in str(e.value)


def test_the_identity_names_the_installed_lmms_eval_release(tmp_path: Path) -> None:
    import importlib.metadata
    import json

    wrapper = around(Counting(), "local", tmp_path, model_args={"pretrained": "p"})
    card = json.loads((wrapper.request_cache.folder / "identity.json").read_text())
    assert card["lmms_eval"] == importlib.metadata.version("lmms_eval")


SECRETS = ("sk-a1", "sk-b2", "sk-h3", "hunter2", "sk-q4", "sk-t5")


def test_credentials_never_reach_the_disk(tmp_path: Path) -> None:
    args = {
        "model_version": "m",
        "api_keys": "sk-a1,sk-b2",
        "extra_headers": {"Authorization": "Bearer sk-h3"},
        "base_url": "https://bob:hunter2@host.example/v1?key=sk-q4",
        "hf_access_token": "sk-t5",
        "max_new_tokens": 9,
    }
    store = RequestCache(tmp_path, model_identity("openai", args, "https://bob:hunter2@host.example/v1?key=sk-q4"))
    card = (store.folder / "identity.json").read_text()
    assert [s for s in SECRETS if s in card] == []
    assert "https://host.example/v1" in card and '"max_new_tokens": 9' in card


@pytest.mark.parametrize(
    "name",
    ["api_keys", "openai_key", "extra_headers", "hf_token", "access_token", "db_password", "credentials", "auth"],
)
def test_an_argument_named_as_a_credential_is_left_out_of_the_identity(name: str) -> None:
    assert model_identity("openai", {"model_version": "m", name: "s3cret"}) == model_identity(
        "openai", {"model_version": "m"}
    )


@pytest.mark.parametrize("name", ["max_new_tokens", "max_completion_tokens", "thinking_budget_tokens", "num_keyframes"])
def test_a_setting_named_like_a_credential_stays_in_the_identity(name: str) -> None:
    assert model_identity("openai", {"model_version": "m", name: 9}) != model_identity("openai", {"model_version": "m"})


def test_the_identity_folder_is_private_even_when_it_existed(tmp_path: Path) -> None:
    folder = RequestCache(tmp_path, IDENTITY).folder
    folder.chmod(0o755)
    RequestCache(tmp_path, IDENTITY)
    assert folder.stat().st_mode & 0o777 == 0o700


# ---- client backends found by their shape ----


class Killed(BaseException):
    """The run is killed (nothing in the backend catches it)."""


class ShimCompletions:
    """litellm's client shim: a `chat.completions.create` that is not an openai client; killed after `live` replies."""

    def __init__(self, base_url: str, live: int | None = None) -> None:
        import openai

        self._client = openai.OpenAI(api_key="x", base_url=base_url, max_retries=0)
        self.live = live

    def create(self, **payload):
        if self.live is not None:
            if self.live == 0:
                raise Killed
            self.live -= 1
        return self._client.chat.completions.create(**payload)


def litellm_like(server: FakeOpenAI, tmp_path: Path, live: int | None = None) -> ContextWrapper:
    from types import SimpleNamespace

    from lmms_eval.models.chat.openai import OpenAICompatible

    model = OpenAICompatible(model_version="m-lite", base_url=server.base_url, api_key="x", num_concurrent=1)
    model.client = SimpleNamespace(chat=SimpleNamespace(completions=ShimCompletions(server.base_url, live)))
    return around(model, "litellm", tmp_path, model_args={"model_version": "m-lite"})


def test_a_client_shim_keeps_each_reply_as_it_arrives(tmp_path: Path) -> None:
    def asked(server: FakeOpenAI) -> set[str]:
        return {body["messages"][-1]["content"][0]["text"] for body in server.requests}

    with FakeOpenAI(answer_by_text) as server:
        with pytest.raises(Killed):
            litellm_like(server, tmp_path, live=3).generate_until(base_requests(5))
        answered = asked(server)
        server.requests.clear()
        replies = litellm_like(server, tmp_path).generate_until(base_requests(5))
        rerun = asked(server)
    assert [r.text for r in replies] == [f"Answer: {i}" for i in range(5)]
    assert (len(answered), rerun) == (3, {f"q{i}" for i in range(5)} - answered)


def test_async_openai_with_the_cache_on_pays_each_request_once(tmp_path: Path) -> None:
    with FakeOpenAI(lambda body: "Answer: A") as server:
        wrapper = ContextWrapper(
            inner="async_openai", cache=str(tmp_path), model_version="m", base_url=server.base_url, api_key="x"
        )
        wrapper.task_dict["t"] = {"test": [{"q": f"q{i}"} for i in range(5)]}
        for _ in range(2):
            assert [r.text for r in wrapper.generate_until(base_requests(5))] == ["Answer: A"] * 5
        wrapper.end_run()
        again = ContextWrapper(
            inner="async_openai",
            cache=str(tmp_path),
            model_version="m",
            base_url=server.base_url,
            api_key="x",
            reuse="all",
        )
        again.task_dict["t"] = {"test": [{"q": f"q{i}"} for i in range(5)]}
        assert [r.text for r in again.generate_until(base_requests(5))] == ["Answer: A"] * 5
        assert len(server.requests) == 5


class FixedCompletions:
    """A client shim whose `create` cannot be replaced (no instance attributes besides its slot)."""

    __slots__ = ("_client",)

    def __init__(self, base_url: str) -> None:
        import openai

        self._client = openai.OpenAI(api_key="x", base_url=base_url, max_retries=0)

    def create(self, **payload):
        return self._client.chat.completions.create(**payload)


def test_a_client_whose_create_cannot_be_replaced_is_cached_by_the_wrapper(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from lmms_eval.models.chat.openai import OpenAICompatible

    with FakeOpenAI(answer_by_text) as server:
        for reuse in (None, "all"):
            model = OpenAICompatible(model_version="m-fixed", base_url=server.base_url, api_key="x")
            model.client = SimpleNamespace(chat=SimpleNamespace(completions=FixedCompletions(server.base_url)))
            wrapper = around(model, "litellm", tmp_path, model_args={"model_version": "m-fixed"}, reuse=reuse)
            replies = [getattr(r, "text", r) for r in wrapper.generate_until(base_requests(3))]
            assert replies == ["Answer: 0", "Answer: 1", "Answer: 2"]
            wrapper.end_run()
        assert len(server.requests) == 3


# ---- runs: a new run resumes what unfinished runs left, and nothing a finished run asked ----


def run_manifests(root: Path) -> list[dict]:
    """Every run manifest under a cache root, oldest first (read from disk as JSON)."""
    import json

    found = [json.loads(p.read_text()) for p in root.glob("*/runs/*/rank-*/run.json")]
    return sorted(found, key=lambda m: m["created_s"])


class Flaky(Counting):
    """Answers like Counting but gives an empty reply to the texts in `empty`."""

    def __init__(self, empty: set[str]) -> None:
        super().__init__()
        self.empty = empty

    def generate_until(self, requests):
        return [
            "" if reply.removeprefix("reply to ") in self.empty else reply for reply in super().generate_until(requests)
        ]


def test_a_new_run_after_a_finished_one_asks_the_model_again(tmp_path: Path, capsys) -> None:
    first = local(Counting(), str(tmp_path))
    first.generate_until(base_requests(5))
    first.end_run()
    model = Counting()
    local(model, str(tmp_path)).generate_until(base_requests(5))
    assert model.asked == [f"q{i}" for i in range(5)]
    err = capsys.readouterr().err
    finished = run_manifests(tmp_path)[0]
    assert finished["state"] == "finished"
    assert "new run " in err and "1 earlier runs of this model" in err and "are NOT reused; reuse=all" in err
    assert finished["run"] in err


def test_a_completed_run_with_failed_replies_is_finished_and_reuse_asks_only_those(tmp_path: Path, capsys) -> None:
    first = local(Flaky({"q1", "q3"}), str(tmp_path))
    assert first.generate_until(base_requests(5)) == ["reply to q0", "", "reply to q2", "", "reply to q4"]
    first.end_run()
    run_id = first.request_cache.run_id
    assert run_manifests(tmp_path)[0]["state"] == "finished"
    assert (
        f"hvcu_context: run {run_id} finished with 2 requests without a reply; rerun with reuse={run_id} to ask "
        "only those" in capsys.readouterr().err
    )
    new_checkpoint = Counting()  # the same command again: a new run that replays nothing
    local(new_checkpoint, str(tmp_path)).generate_until(base_requests(5))
    assert new_checkpoint.asked == [f"q{i}" for i in range(5)]
    model = Counting()
    wrapper = ContextWrapper.around(model, "local", cache=str(tmp_path), model_args={"pretrained": "p"}, reuse=run_id)
    wrapper.task_dict["t"] = {"test": [{"q": f"q{i}"} for i in range(5)]}
    assert wrapper.generate_until(base_requests(5)) == [f"reply to q{i}" for i in range(5)]
    assert model.asked == ["q1", "q3"]


def test_a_request_that_always_fails_does_not_keep_the_run_open_forever(tmp_path: Path) -> None:
    for _ in range(2):
        wrapper = local(Flaky({"q2"}), str(tmp_path))
        wrapper.generate_until(base_requests(3))
        wrapper.end_run()
    assert [(m["state"], m["sessions"]) for m in run_manifests(tmp_path)] == [("finished", 1), ("finished", 1)]


def test_a_run_resumed_to_the_end_is_finished_and_not_resumed_again(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="killed"):
        local(Counting(fail_after=3), str(tmp_path)).generate_until(base_requests(5))
    resumed = local(Counting(), str(tmp_path))
    resumed.generate_until(base_requests(5))
    resumed.end_run()
    killed, whole = run_manifests(tmp_path)
    assert (killed["state"], whole["state"], whole["replies"], whole["resumed"]) == (
        "unfinished",
        "finished",
        5,  # the 3 it asked and the 2 it resumed: it holds them now
        {killed["run"]: 2},
    )
    model = Counting()
    local(model, str(tmp_path)).generate_until(base_requests(5))
    assert len(model.asked) == 5


def test_identical_requests_within_one_run_are_asked_once(tmp_path: Path) -> None:
    model = Counting()
    wrapper = local(model, str(tmp_path))
    wrapper.generate_until(base_requests(3))
    wrapper.generate_until(base_requests(5))
    assert model.asked == ["q0", "q1", "q2", "q3", "q4"]


def test_reuse_all_takes_earlier_runs_replies_and_the_output_names_each_run(tmp_path: Path, capsys) -> None:
    first = local(Counting(), str(tmp_path))
    first.generate_until(base_requests(3))
    first.end_run()
    model = Counting()
    wrapper = ContextWrapper.around(model, "local", cache=str(tmp_path), model_args={"pretrained": "p"}, reuse="all")
    wrapper.task_dict["t"] = {"test": [{"q": f"q{i}"} for i in range(5)]}
    assert wrapper.generate_until(base_requests(5)) == [f"reply to q{i}" for i in range(5)]
    wrapper.end_run()
    assert model.asked == ["q3", "q4"]
    earlier = run_manifests(tmp_path)[0]
    import time

    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(earlier["created_s"]))
    err = capsys.readouterr().err
    assert f"hvcu_context: 3 replies reused from run {earlier['run']} (finished, {when})" in err


def test_reuse_of_one_run_takes_that_run_only(tmp_path: Path, capsys) -> None:
    ids = []
    for n in (2, 4):  # run A answers q0-q1, run B q0-q3
        wrapper = local(Counting(), str(tmp_path))
        wrapper.generate_until(base_requests(n))
        wrapper.end_run()
        ids.append(wrapper.request_cache.run_id)
    for reuse, asked in ((ids[0], ["q2", "q3", "q4"]), (f"{ids[0]}+{ids[1]}", ["q4"])):
        model = Counting()
        wrapper = ContextWrapper.around(
            model, "local", cache=str(tmp_path), model_args={"pretrained": "p"}, reuse=reuse
        )
        wrapper.task_dict["t"] = {"test": [{"q": f"q{i}"} for i in range(5)]}
        wrapper.generate_until(base_requests(5))
        wrapper.end_run()
        assert model.asked == asked


def test_a_bad_reuse_value_is_a_one_line_error_naming_it_and_the_runs(tmp_path: Path) -> None:
    first = local(Counting(), str(tmp_path))
    first.generate_until(base_requests(1))
    first.end_run()
    with pytest.raises(ValueError) as error:
        ContextWrapper.around(Counting(), "local", cache=str(tmp_path), model_args={"pretrained": "p"}, reuse="nope")
    message = str(error.value)
    assert message.startswith("hvcu_context: reuse=nope: no run nope of this model")
    assert first.request_cache.run_id in message and "\n" not in message
    with pytest.raises(ValueError, match="reuse=a,b"):
        ContextWrapper.around(Counting(), "local", cache=str(tmp_path), model_args={"pretrained": "p"}, reuse="a,b")


def test_a_killed_runs_replies_resume_any_later_run_of_the_model_for_equal_requests(tmp_path: Path) -> None:
    killed = RequestCache(tmp_path, IDENTITY)
    killed.put("k", "A")
    killed.failed(RuntimeError("killed"))  # a call raised: the run is unfinished
    rerun = RequestCache(tmp_path, IDENTITY)
    assert (rerun.resumed, rerun.resumed_runs, rerun.get("k"), rerun.get("j")) == (
        True,
        [killed.run_id],
        ("A", None),
        None,
    )
    assert rerun.run_id != killed.run_id  # every cache is a new run


def test_a_run_that_finishes_seals_the_replies_it_resumed(tmp_path: Path) -> None:
    killed = RequestCache(tmp_path, IDENTITY)
    killed.put("k", "A")
    killed.put("j", "B")
    killed.failed(RuntimeError("killed"))
    rerun = RequestCache(tmp_path, IDENTITY)
    assert rerun.get("k") == ("A", None)
    rerun.put("n", "C")
    rerun.tally(["A", "C"])
    rerun.end()  # finished: it holds k (resumed) and n
    after = RequestCache(tmp_path, IDENTITY)
    assert (after.get("k"), after.get("n"), after.get("j")) == (None, None, ("B", None))  # j: no finished run asked it
    assert RequestCache(tmp_path, IDENTITY, reuse=rerun.run_id).get("k") == ("A", None)


def test_a_named_run_resumes_only_unfinished_runs_of_its_name(tmp_path: Path) -> None:
    killed = RequestCache(tmp_path, IDENTITY, name="exp1")
    killed.put("k", "A")
    killed.failed(RuntimeError("killed"))
    assert (RequestCache(tmp_path, IDENTITY).get("k"), RequestCache(tmp_path, IDENTITY, name="exp2").get("k")) == (
        None,
        None,
    )
    assert RequestCache(tmp_path, IDENTITY, name="exp1").get("k") == ("A", None)


def test_a_live_run_is_not_adopted(tmp_path: Path) -> None:
    live = RequestCache(tmp_path, IDENTITY, name="r")
    live.put("k", "A")
    second = RequestCache(tmp_path, IDENTITY, name="r")
    assert (second.resumed, second.get("k"), second.run_id != live.run_id) == (False, None, True)
    live.end()  # given no requests: unfinished, so the next wrapper resumes it
    third = RequestCache(tmp_path, IDENTITY, name="r")
    assert (third.resumed_runs, third.get("k")) == ([live.run_id], ("A", None))


HOLDER = textwrap.dedent(
    """
    import sys, time
    from hvcu_tasks.lmms.models.request_cache import RequestCache
    store = RequestCache(sys.argv[1], {"backend": "writer"}, name="writer")
    store.put("k", "A")
    print(store.run_id, flush=True)
    time.sleep(60)
    """
)


def test_a_run_live_in_another_process_is_not_adopted(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        held = proc.stdout.readline().strip()
        other = RequestCache(tmp_path, {"backend": "writer"}, name="writer")
        assert (other.run_id != held, other.get("k")) == (True, None)
        other.put("j", "B")
        other.tally(["B"])
        other.end()  # finished: not a candidate for resuming
    finally:
        proc.kill()
        proc.wait()
    after_kill = RequestCache(tmp_path, {"backend": "writer"}, name="writer")
    assert (after_kill.resumed_runs, after_kill.get("k")) == ([held], ("A", None))


ENDING = textwrap.dedent(
    """
    import sys
    from hvcu_tasks.lmms.models.request_cache import RequestCache
    store = RequestCache(sys.argv[1], {"backend": "writer"}, name=sys.argv[2])
    store.put("k", "A")
    store.tally(["A"])
    if sys.argv[2] == "crash":
        raise SystemError("after the replies")
    """
)


def test_a_process_that_ends_with_an_unhandled_exception_leaves_its_run_unfinished(tmp_path: Path) -> None:
    for how in ("clean", "crash"):
        subprocess.run([sys.executable, "-c", ENDING, str(tmp_path), how], capture_output=True, timeout=60)
    states = {m["name"]: m["state"] for m in run_manifests(tmp_path)}
    assert states == {"clean": "finished", "crash": "unfinished"}


def test_reuse_and_run_are_not_part_of_the_identity(tmp_path: Path) -> None:
    plain = model_identity("openai", {"model_version": "m"})
    assert model_identity("openai", {"model_version": "m", "reuse": "all", "run": "x", "cache": "on"}) == plain


def test_no_credential_reaches_a_run_manifest(tmp_path: Path, monkeypatch) -> None:
    argv = ["/venv/bin/lmms-eval", "--model_args", "inner=openai,api_key=sk-b2", "--hf_hub_log_args", "token=sk-h3"]
    monkeypatch.setattr(sys, "argv", argv)
    store = RequestCache(tmp_path, model_identity("openai", {"model_version": "m", "api_key": "sk-a1"}), name="r")
    store.put("k", "A")
    store.end()
    written = "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    assert [s for s in ("sk-a1", "sk-b2", "sk-h3") if s in written] == []


def test_the_runs_of_a_cache_can_be_listed(tmp_path: Path, capsys) -> None:
    from hvcu_tasks.cli import main

    done = local(Flaky({"q1"}), str(tmp_path))
    done.generate_until(base_requests(2))
    done.end_run()
    with pytest.raises(RuntimeError):
        local(Counting(fail_after=1), str(tmp_path)).generate_until(base_requests(2))
    capsys.readouterr()
    assert main(["cache", "list", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{done.request_cache.run_id} (finished, " in out
    assert "rank 0/1: finished, 2 requests, 1 replies stored, 1 without a reply" in out
    assert "(unfinished, " in out and "(a call raised RuntimeError)" in out


def test_cache_list_of_a_missing_folder_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    from hvcu_tasks.cli import main

    assert main(["cache", "list", str(tmp_path / "nope")]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"error: {tmp_path / 'nope'}: no such folder\n" and captured.out == ""


def test_cache_list_help_is_help_not_a_folder(capsys) -> None:
    from hvcu_tasks.cli import main

    with pytest.raises(SystemExit) as done:
        main(["cache", "list", "--help"])
    assert done.value.code == 0 and "usage: hvcu cache list" in capsys.readouterr().out


# ---- defects found in review: each test failed before its fix ----


def test_two_wrappers_of_one_process_are_two_runs(tmp_path: Path) -> None:
    """Two entries of one --config with the same model never share a run: the second reads nothing of the first."""
    first = local(Counting(), str(tmp_path))
    first.generate_until(base_requests(2))
    model = Counting()
    second = local(model, str(tmp_path))
    second.generate_until(base_requests(3))
    assert model.asked == ["q0", "q1", "q2"]
    assert first.request_cache.run_id != second.request_cache.run_id


class Sampler(Counting):
    """A model at temperature > 0: every answer is a new sample."""

    drawn = 0

    def generate_until(self, requests):
        super().generate_until(requests)
        replies = []
        for _ in requests:
            Sampler.drawn += 1
            replies.append(f"sample {Sampler.drawn}")
        return replies


def test_repeats_of_one_instance_are_separate_samples_each_resumed_as_stored(tmp_path: Path) -> None:
    (b,) = base_requests(1)
    with pytest.raises(RuntimeError):
        local(Sampler(fail_after=2), str(tmp_path), chunk_size=1).generate_until([b, b, b])
    model = Sampler()
    replies = local(model, str(tmp_path), chunk_size=1).generate_until([b, b, b])
    assert len(set(replies)) == 3  # three samples, not one answer three times
    assert model.asked == ["q0"]  # the two samples drawn before the kill are replayed, the third is drawn


def test_repeated_chains_are_separate_samples(tmp_path: Path) -> None:
    (chain,) = chain_requests(1)
    chains = local(Sampler(), str(tmp_path)).generate_until_multi_round([chain, chain, chain])
    assert len({tuple(c) for c in chains}) == 3


def test_equal_requests_of_different_instances_in_one_call_are_paid_once(tmp_path: Path) -> None:
    model = Counting()
    wrapper = local(model, str(tmp_path))
    wrapper.task_dict["t"] = {"test": [{"q": "same"}, {"q": "same"}, {"q": "other"}]}
    assert wrapper.generate_until(base_requests(3)) == ["reply to same", "reply to same", "reply to other"]
    assert model.asked == ["same", "other"]


class BrokenDoc(dict):
    """A document whose image cannot be decoded: looking into it raises."""

    def __getitem__(self, _key):
        raise OSError("image file is truncated")


def test_an_error_outside_the_inner_call_leaves_the_run_unfinished(tmp_path: Path) -> None:
    first = local(Counting(), str(tmp_path))
    first.task_dict["t"]["test"][3] = BrokenDoc()
    with pytest.raises(OSError, match="truncated"):  # lmms-eval's CLI catches it and exits 0
        first.generate_until_multi_round(chain_requests(5))
    first.end_run()
    assert [m["state"] for m in run_manifests(tmp_path)] == ["unfinished"]
    again = Counting()
    local(again, str(tmp_path)).generate_until_multi_round(chain_requests(5))
    assert again.asked == ["q2", "q3", "q2", "q3", "q4", "q4"]  # chunk [q2, q3] and [q4]; q0, q1 replayed


@pytest.mark.parametrize("code", ["ENOLCK", "EOPNOTSUPP"])
def test_a_file_system_without_locks_turns_the_default_cache_off_with_one_line(
    tmp_path: Path, monkeypatch, capsys, code: str
) -> None:
    import errno
    import fcntl

    def refuse(_fd, _op):
        raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)))

    monkeypatch.setattr(fcntl, "flock", refuse)
    monkeypatch.setenv("HVCU_CACHE_DIR", str(tmp_path))
    with FakeOpenAI(lambda body: "Answer: A") as server:
        wrapper = ContextWrapper(inner="openai", model_version="m", base_url=server.base_url, api_key="x")
        assert wrapper.request_cache is None
        err = capsys.readouterr().err
        assert "hvcu_context: request cache off (file locks are not supported in " in err
        with pytest.raises(ValueError) as error:
            ContextWrapper(inner="openai", model_version="m", base_url=server.base_url, api_key="x", cache="on")
    assert str(error.value).startswith("hvcu_context: cache=on: file locks are not supported in ")
    assert "\n" not in str(error.value)


def test_a_probe_of_a_run_does_not_make_its_owner_skip_it(tmp_path: Path) -> None:
    import fcntl
    import threading

    from hvcu_tasks.lmms.models import cache_runs

    path = tmp_path / "lock"
    path.touch()
    probe = os.open(path, os.O_RDONLY)
    fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)  # someone listing runs at this moment
    threading.Timer(0.1, os.close, [probe]).start()
    fd = cache_runs.lock(path, retries=5)
    assert fd is not None
    assert cache_runs.live(tmp_path)
    os.close(fd)
    assert not cache_runs.live(tmp_path)


def test_data_parallel_ranks_share_one_run_id_reuse_takes_every_share_and_each_reports(tmp_path: Path, capsys) -> None:
    shared = new_run_id()  # rank 0's id, as torch.distributed hands it to every rank
    ranks = [RequestCache(tmp_path, IDENTITY, rank=r, world_size=2, report=True, run_id=shared) for r in (0, 1)]
    assert ranks[0].run_id == ranks[1].run_id
    for r, cache in enumerate(ranks):
        for i in range(r, 10, 2):
            cache.put(f"k{i}", f"A{i}")
        cache.tally(["x"] * 5)
        cache.end()
    run_id = ranks[0].run_id
    again = [
        RequestCache(tmp_path, IDENTITY, reuse=run_id, rank=r, world_size=2, report=True, run_id=f"{shared}-2")
        for r in (0, 1)
    ]
    hits = [sum(cache.get(f"k{i}") is not None for i in range(r, 10, 2)) for r, cache in enumerate(again)]
    for cache in again:
        cache.tally(["x"] * 5)
        cache.end()
    assert hits == [5, 5]
    err = capsys.readouterr().err
    assert "hvcu_context: rank 0: 5 replies reused from run " in err
    assert "hvcu_context: rank 1: 5 replies reused from run " in err


RANK = textwrap.dedent(
    """
    import sys
    import torch.distributed as dist
    from hvcu_tasks.lmms.models.request_cache import RequestCache
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    store = RequestCache(sys.argv[1], {"backend": "writer"}, rank=rank, world_size=2)
    store.put(f"k{rank}", "A")
    store.tally(["A"])
    print(store.run_id, flush=True)
    """
)


@pytest.mark.slow
def test_ranks_under_torch_distributed_share_rank_0s_run_id(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, str(tmp_path)], env={**env, "RANK": str(r)}, stdout=subprocess.PIPE, text=True
        )
        for r in (0, 1)
    ]
    ids = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert ids[0] == ids[1] and [p.returncode for p in procs] == [0, 0]
    (run,) = [m for m in run_manifests(tmp_path) if m["rank"] == 0]
    assert sorted(m["rank"] for m in run_manifests(tmp_path)) == [0, 1] and run["ranks"] == 2
    assert [m["state"] for m in run_manifests(tmp_path)] == ["finished", "finished"]


def test_a_killed_data_parallel_run_is_resumed_by_every_rank(tmp_path: Path) -> None:
    shared = new_run_id()
    killed = [RequestCache(tmp_path, IDENTITY, rank=r, world_size=2, run_id=shared) for r in (0, 1)]
    for r, cache in enumerate(killed):
        cache.put(f"k{r}", "A")
        cache.failed(RuntimeError("killed"))
    again = [RequestCache(tmp_path, IDENTITY, rank=r, world_size=2, run_id=f"{shared}-2") for r in (0, 1)]
    assert [c.resumed_runs for c in again] == [[shared]] * 2
    assert [c.get(f"k{r}") for r, c in enumerate(again)] == [("A", None), ("A", None)]


@pytest.mark.parametrize("text", ["reuse=false", "reuse=0", "reuse=none"])
def test_reuse_off_as_lmms_eval_parses_it_is_none(text: str) -> None:
    from lmms_eval.utils import simple_parse_args_string

    from hvcu_tasks.lmms.models.cache_runs import reuse_setting

    assert reuse_setting(simple_parse_args_string(text)["reuse"]) == ()


@pytest.mark.parametrize(("text", "name"), [("run=2026", "2026"), ("run=1.5", "1.5"), ("run=exp1", "exp1")])
def test_run_names_as_lmms_eval_parses_them_are_names(text: str, name: str) -> None:
    from lmms_eval.utils import simple_parse_args_string

    from hvcu_tasks.lmms.models.cache_runs import run_name

    assert run_name(simple_parse_args_string(text)["run"]) == name


def test_every_name_of_reuse_is_checked_even_with_all(tmp_path: Path) -> None:
    first = local(Counting(), str(tmp_path))
    first.generate_until(base_requests(1))
    first.end_run()
    with pytest.raises(ValueError, match="hvcu_context: reuse=all\\+typo: no run typo of this model"):
        ContextWrapper.around(
            Counting(), "local", cache=str(tmp_path), model_args={"pretrained": "p"}, reuse="all+typo"
        )


def test_a_manifest_is_written_durably(tmp_path: Path, monkeypatch) -> None:
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    RequestCache(tmp_path, IDENTITY, name="r")
    assert len(synced) >= 2  # the manifest file and its folder
