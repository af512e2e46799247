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

from hvcu_tasks.images import SOURCE_ATTR, ImageSource
from hvcu_tasks.models.request_cache import RequestCache, cache_location, cache_setting, hook_client, model_identity
from hvcu_tasks.models.wrapper import ContextWrapper

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


def test_a_stored_reply_is_read_back_by_the_next_run(tmp_path: Path, cache: RequestCache) -> None:
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
    from hvcu_tasks.models.request_cache import RequestCache
    store = RequestCache(sys.argv[1], {"backend": "writer"})
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
    store = RequestCache(tmp_path, {"backend": "writer"})
    assert all(store.get(f"k{n}") == (f"reply {n}", None) for n in range(last + 1))


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    script = WRITER.replace("while True:", "while n < 300:").replace('f"k{n}"', 'f"{sys.argv[2]}{n}"')
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), tag]) for tag in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    store = RequestCache(tmp_path, {"backend": "writer"})
    assert len(store) == 600
    assert len(list(store.folder.glob("*.jsonl"))) == 2


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
    assert cache_location("auto", api=True) == hvcu_cache / "requests-v1"
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
    assert not (hvcu_cache / "requests-v1").exists()


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
        for _ in range(2):
            wrapper = ContextWrapper(inner="openai", model_version="m", base_url=server.base_url, api_key="x")
            wrapper.task_dict["t"] = {"test": [{"q": f"q{i}"} for i in range(5)]}
            assert [r.text for r in wrapper.generate_until(base_requests(2))] == ["Answer: A"] * 2
        assert len(server.requests) == 2
    assert str(hvcu_cache / "requests-v1") in capsys.readouterr().err


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


def test_a_local_models_chains_are_answered_from_the_cache_on_a_rerun(tmp_path: Path) -> None:
    first = Counting()
    outputs = local(first, str(tmp_path)).generate_until_multi_round(chain_requests(3))
    again = Counting()
    assert local(again, str(tmp_path)).generate_until_multi_round(chain_requests(3)) == outputs
    assert (len(first.asked), len(again.asked)) == (6, 0)


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
