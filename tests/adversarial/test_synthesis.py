"""Synthesis against endpoints that fail: `hvcu mcts`, `hvcu direct`, `hvcu build-bench` never record a
failed call as a rejected candidate, never cache an empty or unusable reply, stop on a dead endpoint, and
say in one line what happened."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI

from hvcu_tasks.cli import main
from hvcu_tasks.dev.smoke import SMOKE_DIR

SMALL = {"capacity": [3, 4, 5], "max_iterations": 12, "candidates_per_expansion": 3, "top_k": 4}


def healthy(request: dict) -> str:
    """A deterministic generator / judge / direct / build-bench model: replies depend only on the request."""
    text = request["messages"][-1]["content"][0]["text"]
    digest = int(hashlib.sha256((text + str(request.get("seed"))).encode()).hexdigest()[:6], 16)
    if text.startswith("You judge"):
        return json.dumps({"score": 0.6 + (digest % 40) / 100, "reason": "coherent"})
    if text.startswith("Write three questions"):
        return json.dumps({"levels": [{"question": f"Q{i} {digest}", "answer": f"A{i}"} for i in (1, 2, 3)]})
    if "dependency" in text or "single_answer" in text:  # build-bench validator
        return json.dumps({"dependency": True, "progression": True, "single_answer": True, "reason": "ok"})
    if "distractors" in text:  # build-bench stage
        words = ["red", "blue", "green", "black"]
        return json.dumps({"question": f"Q {digest}?", "answer": words[0], "distractors": words[1:]})
    level = re.search(r"Level (\d) is", text).group(1)
    return json.dumps({"question": f"L{level} q{digest}?", "answer": f"because {digest % 97}"})


def copy_images(folder: Path, n: int, start: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for src in sorted((SMOKE_DIR / "Image").rglob("*.png"))[start : start + n]:
        shutil.copy(src, folder / src.name)
    return folder


@pytest.fixture
def images(tmp_path: Path) -> Path:
    return copy_images(tmp_path / "imgs", 2)


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Waits of milliseconds between a call's attempts instead of 0.5-8 s (the same attempts, in the same number).

    For the tests that check what is retried, failed or cached, not how long it takes; the tests that bound a
    run's time (a dead endpoint stops within seconds) keep the real waits.
    """
    from generation import client

    monkeypatch.setattr(client, "BACKOFF_BASE_S", 0.005)


def synth(method: str, base_url: str, images: Path, out: Path, *extra: str) -> int:
    args = [method, "--images", str(images), "--out", str(out), "--model", "fake", "--base-url", base_url]
    args += ["--api-key", "x", "--quiet"]
    if method == "mcts":
        config = out.parent / "small.json"
        config.write_text(json.dumps(SMALL))
        args += ["--config", str(config)]
    return main([*args, *extra])


def stats(out: Path) -> dict:
    return json.loads((out / "stats.json").read_text())


def chain_lines(out: Path) -> list[str]:
    return (out / "chains.jsonl").read_text().splitlines()


def cached_replies(out: Path) -> list[str]:
    with sqlite3.connect(out / "cache.sqlite") as db:
        return [json.loads(v)["text"] for (v,) in db.execute("SELECT value FROM replies")]


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A 127.0.0.1 port nothing listens on, kept bound (never listening) for the test: released at once, it could
    be given to another test's server while this test's client still calls it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def always(status: int, body: bytes = b'{"error": {"message": "boom"}}'):
    return lambda _n, _request: (status, {"Retry-After": "0"}, body)


# --- a call that fails is a failed call, and its image is failed, not done ---------------------------------------


def test_an_endpoint_answering_500_fails_the_images_and_the_run(images: Path, tmp_path: Path, capsys) -> None:
    with FakeOpenAI(healthy, fault=always(500)) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "out") == 1
    got = stats(tmp_path / "out")
    assert got["images_done"] == 0 and got["images_failed"] + got["images_not_attempted"] == 2
    assert chain_lines(tmp_path / "out") == []
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "0 done" in last and "0 chains" in last


def test_images_failed_on_a_dead_endpoint_are_built_by_the_next_healthy_run(images: Path, tmp_path: Path) -> None:
    with FakeOpenAI(healthy, fault=always(500)) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "out") == 1
    with FakeOpenAI(healthy) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "out") == 0
    with FakeOpenAI(healthy) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "reference") == 0
    assert stats(tmp_path / "out")["images_done"] == 2
    assert chain_lines(tmp_path / "out") == chain_lines(tmp_path / "reference") != []


def test_a_failed_call_mid_search_fails_the_image_instead_of_rejecting_a_candidate(
    images: Path, tmp_path: Path
) -> None:
    def judge_down(_n: int, request: dict):
        text = request["messages"][-1]["content"][0]["text"]
        return (503, {"Retry-After": "0"}, b"{}") if text.startswith("You judge") else None

    with FakeOpenAI(healthy, fault=judge_down) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "out") == 1
    records = [json.loads(p.read_text()) for p in (tmp_path / "out" / "images").glob("*.json")]
    assert records and all(r["status"] == "failed" for r in records)
    assert all("503" in r["error"] for r in records)


def test_non_json_bodies_on_every_other_call_are_retried_to_the_full_result(
    images: Path, tmp_path: Path, quick_retries: None
) -> None:
    def every_other(n: int, _request: dict):
        return (200, {"Content-Type": "application/json"}, b"<html>gateway</html>") if n % 2 == 0 else None

    with FakeOpenAI(healthy, fault=every_other) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "flaky") == 0
    with FakeOpenAI(healthy) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "clean") == 0
    assert chain_lines(tmp_path / "flaky") == chain_lines(tmp_path / "clean") != []


@pytest.mark.parametrize("reply", ["", None, "   "], ids=["empty", "null", "blank"])
def test_empty_or_null_replies_are_failed_calls_and_never_cached(
    images: Path, tmp_path: Path, reply: str | None, quick_retries: None
) -> None:
    with FakeOpenAI(lambda _request: reply) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "out") == 1
    assert cached_replies(tmp_path / "out") == []
    assert stats(tmp_path / "out")["images_done"] == 0
    with FakeOpenAI(healthy) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "out") == 0
    assert stats(tmp_path / "out")["images_done"] == 2 and chain_lines(tmp_path / "out")


def test_a_reply_the_model_wrote_but_that_is_unusable_is_rejected_and_not_cached(images: Path, tmp_path: Path) -> None:
    def prose_sometimes(request: dict) -> str:
        return "I would rather not." if request.get("seed", 0) % 4 == 0 else healthy(request)

    with FakeOpenAI(prose_sometimes) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "out") == 0
    got = stats(tmp_path / "out")
    assert got["images_done"] == 2 and got["candidates_rejected"] > 0
    assert "I would rather not." not in cached_replies(tmp_path / "out")


# --- a dead endpoint stops the run quickly and says so ------------------------------------------------------------


def test_a_refused_connection_stops_the_run_within_seconds_naming_the_endpoint(
    tmp_path: Path, capsys, closed_port: int
) -> None:
    many = copy_images(tmp_path / "many", 15)
    url = f"http://127.0.0.1:{closed_port}/v1"
    start = time.monotonic()
    assert synth("mcts", url, many, tmp_path / "out", "--concurrency", "2") == 1
    assert time.monotonic() - start < 60
    err = capsys.readouterr().err
    assert url in err and "consecutive failed requests" in err and "Connection" in err
    got = stats(tmp_path / "out")
    assert got["images_done"] == 0 and got["images_not_attempted"] > 0
    assert got["images_failed"] + got["images_not_attempted"] == 15


def test_a_dead_endpoint_answering_500_stops_and_names_the_last_error(tmp_path: Path, capsys) -> None:
    many = copy_images(tmp_path / "many", 12)
    with FakeOpenAI(healthy, fault=always(500, b'{"error": {"message": "model crashed"}}')) as server:
        start = time.monotonic()
        assert synth("mcts", server.base_url, many, tmp_path / "out") == 1
        assert time.monotonic() - start < 60
        assert len(server.requests) < 60  # stopped after ~20 failed calls, not 12 images x retries
    err = capsys.readouterr().err
    assert server.base_url in err and "500" in err and "model crashed" in err


# --- chains.jsonl and stats.json describe every image finished in --out -------------------------------------------


def test_a_second_run_with_other_images_keeps_the_first_runs_chains(tmp_path: Path) -> None:
    first, second = copy_images(tmp_path / "a", 2), copy_images(tmp_path / "b", 2, start=2)
    with FakeOpenAI(healthy) as server:
        assert synth("mcts", server.base_url, first, tmp_path / "out") == 0
        n_first = len(chain_lines(tmp_path / "out"))
        assert synth("mcts", server.base_url, second, tmp_path / "out") == 0
    images_in_chains = {json.loads(line)["image"] for line in chain_lines(tmp_path / "out")}
    assert {Path(p).parent.name for p in images_in_chains} == {"a", "b"}
    assert len(chain_lines(tmp_path / "out")) > n_first
    assert stats(tmp_path / "out")["images_done"] == 4


def test_another_model_or_method_into_the_same_out_is_refused(images: Path, tmp_path: Path, capsys) -> None:
    with FakeOpenAI(healthy) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "out") == 0
        assert synth("direct", server.base_url, images, tmp_path / "out") == 2
        assert "direct" in capsys.readouterr().err
        args = ["mcts", "--images", str(images), "--out", str(tmp_path / "out"), "--model", "other"]
        assert main([*args, "--base-url", server.base_url, "--quiet", "--config", str(tmp_path / "small.json")]) == 2
    assert "other" in capsys.readouterr().err


# --- options and inputs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option, value",
    [("--concurrency", "0"), ("--concurrency", "-3"), ("--concurrency", "many"), ("--timeout", "0"),
     ("--timeout", "-1"), ("--timeout", "nan"), ("--seed", "-1")],
)  # fmt: skip
def test_numeric_options_are_range_checked(images: Path, tmp_path: Path, capsys, option: str, value: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        synth("mcts", "http://127.0.0.1:9/v1", images, tmp_path / "out", option, value)
    assert exit_info.value.code == 2
    assert option in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "setting",
    [{"top_k": 0}, {"max_calls": 1}, {"capacity": [0, 4, 5]}, {"max_iterations": 0}, {"exploration": -1},
     {"candidates_per_expansion": 0}, {"temperature": 3}, {"max_attempts_per_node": 0}, {"top_k": "ten"}],
)  # fmt: skip
def test_search_settings_out_of_range_are_named(images: Path, tmp_path: Path, capsys, setting: dict) -> None:
    config = tmp_path / "bad.json"
    config.write_text(json.dumps(setting))
    args = ["mcts", "--images", str(images), "--out", str(tmp_path / "out"), "--model", "m"]
    assert main([*args, "--base-url", "http://127.0.0.1:9/v1", "--config", str(config), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert str(config) in err and next(iter(setting)) in err


@pytest.mark.parametrize("method", ["mcts", "direct"])
def test_an_empty_image_folder_is_an_error(tmp_path: Path, capsys, method: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not an image")
    assert synth(method, "http://127.0.0.1:9/v1", tmp_path / "empty", tmp_path / "out") == 2
    assert "no images" in capsys.readouterr().err


def test_an_empty_list_file_is_an_error(tmp_path: Path, capsys) -> None:
    listing = tmp_path / "list.txt"
    listing.write_text("# nothing yet\n\n")
    assert synth("mcts", "http://127.0.0.1:9/v1", listing, tmp_path / "out") == 2
    assert "no images" in capsys.readouterr().err


def test_a_list_file_naming_a_missing_image_names_the_line(images: Path, tmp_path: Path, capsys) -> None:
    listing = tmp_path / "list.txt"
    present = next(images.iterdir())
    listing.write_text(f"{present}\n{images / 'gone.png'}\n")
    assert synth("mcts", "http://127.0.0.1:9/v1", listing, tmp_path / "out") == 2
    assert f"{listing}:2" in capsys.readouterr().err


# --- direct and build-bench follow the same rules -----------------------------------------------------------------


def test_direct_against_a_500_endpoint_fails_and_is_redone_later(images: Path, tmp_path: Path, capsys) -> None:
    with FakeOpenAI(healthy, fault=always(500)) as server:
        assert synth("direct", server.base_url, images, tmp_path / "out") == 1
    assert "0 done" in capsys.readouterr().err.strip().splitlines()[-1]
    with FakeOpenAI(healthy) as server:
        assert synth("direct", server.base_url, images, tmp_path / "out") == 0
    assert len(chain_lines(tmp_path / "out")) == 2


def test_direct_unusable_reply_is_rejected_with_its_reason_and_not_cached(images: Path, tmp_path: Path) -> None:
    with FakeOpenAI(lambda _request: "Sorry, no JSON today.") as server:
        assert synth("direct", server.base_url, images, tmp_path / "out") == 0
    got = stats(tmp_path / "out")
    assert got["images_rejected"] == 2 and got["images_done"] == 0 and got["images_failed"] == 0
    assert cached_replies(tmp_path / "out") == []


def build_bench(base_url: str, manifest: Path, out: Path) -> int:
    args = ["build-bench", "--manifest", str(manifest), "--out", str(out), "--model", "fake"]
    return main([*args, "--base-url", base_url, "--api-key", "x", "--quiet"])


@pytest.fixture
def manifest(images: Path, tmp_path: Path) -> Path:
    rows = [{"image": str(p), "family": "affective", "aspect": "joy"} for p in sorted(images.iterdir())]
    path = tmp_path / "manifest.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_build_bench_empty_replies_fail_the_item_not_reject_it(
    manifest: Path, tmp_path: Path, capsys, quick_retries: None
) -> None:
    with FakeOpenAI(lambda _request: "") as server:
        assert build_bench(server.base_url, manifest, tmp_path / "out") == 1
    report = json.loads((tmp_path / "out" / "build_report.json").read_text())
    assert report["rejected"] == {} and len(report["failed"]) + report["not_attempted"] == 2
    assert cached_replies(tmp_path / "out") == []
    with FakeOpenAI(healthy) as server:
        assert build_bench(server.base_url, manifest, tmp_path / "out") == 0
    assert json.loads((tmp_path / "out" / "build_report.json").read_text())["emitted"] == 2


def test_build_bench_stops_on_a_dead_endpoint(manifest: Path, tmp_path: Path, capsys, closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}/v1"
    start = time.monotonic()
    assert build_bench(url, manifest, tmp_path / "out") == 1
    assert time.monotonic() - start < 60
    assert url in capsys.readouterr().err


def test_merge_refuses_a_folder_that_is_no_shard_output(images: Path, tmp_path: Path, capsys) -> None:
    with FakeOpenAI(healthy) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "s0", "--shard", "0/2") == 0
    (tmp_path / "typo").mkdir()
    assert main(["mcts", "merge", str(tmp_path / "s0"), str(tmp_path / "typo"), "--out", str(tmp_path / "m")]) == 2
    assert "typo" in capsys.readouterr().err


def test_merge_refuses_shards_made_with_different_models(images: Path, tmp_path: Path, capsys) -> None:
    with FakeOpenAI(healthy) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "s0", "--shard", "0/2") == 0
        args = ["mcts", "--images", str(images), "--out", str(tmp_path / "s1"), "--model", "other", "--shard", "1/2"]
        args += ["--base-url", server.base_url, "--quiet", "--config", str(tmp_path / "small.json")]
        assert main(args) == 0
    assert main(["mcts", "merge", str(tmp_path / "s0"), str(tmp_path / "s1"), "--out", str(tmp_path / "m")]) == 2
    assert "model 'fake' -> 'other'" in capsys.readouterr().err


# --- found in review: stale caches, odd replies, rate limits, silent servers, one image under two names --------


def test_a_cached_empty_or_unusable_reply_from_an_older_version_is_asked_again(tmp_path: Path) -> None:
    import asyncio

    from generation.client import ChatClient, ClientConfig, ResponseCache
    from generation.replies import parse_json_reply

    messages = [{"role": "user", "content": "Give JSON."}]
    params = {"temperature": 0.0, "max_tokens": 1024, "seed": 0}
    cache = ResponseCache(tmp_path / "cache.sqlite")
    cache.put(ResponseCache.key("fake", messages, params), {"text": ""})  # what the old client stored for null

    async def ask() -> str:
        client = ChatClient(ClientConfig(model="fake", base_url=server.base_url, api_key="x"), cache)
        try:
            return await client.complete(messages, accept=lambda t: parse_json_reply(t, ("a",)))
        finally:
            await client.close()

    with FakeOpenAI(lambda _request: '{"a": 1}') as server:
        assert asyncio.run(ask()) == '{"a": 1}'
        assert len(server.requests) == 1
        assert asyncio.run(ask()) == '{"a": 1}' and len(server.requests) == 1  # now cached
    cache.close()


def test_a_cached_prose_reply_is_rejected_as_a_candidate_not_a_crash(images: Path, tmp_path: Path) -> None:
    with FakeOpenAI(healthy) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "out") == 0
    reference = chain_lines(tmp_path / "out")
    with sqlite3.connect(tmp_path / "out" / "cache.sqlite") as db:  # as an older version could leave it
        db.execute("UPDATE replies SET value = ?", (json.dumps({"text": "no json"}),))
    for f in (tmp_path / "out" / "images").glob("*.json"):
        f.unlink()
    with FakeOpenAI(healthy) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "out") == 0
    assert chain_lines(tmp_path / "out") == reference


def test_a_reply_with_a_lone_surrogate_is_unusable_not_a_crash(images: Path, tmp_path: Path) -> None:
    def surrogate(request: dict) -> str:
        text = request["messages"][-1]["content"][0]["text"]
        return '{"levels": [{"question": "Q\\ud800", "answer": "A"}] }' if "three" in text else healthy(request)

    with FakeOpenAI(surrogate) as server:
        assert synth("direct", server.base_url, images, tmp_path / "out") == 0
    assert stats(tmp_path / "out")["images_rejected"] == 2


def test_a_null_question_from_the_generator_is_rejected_never_the_text_none(images: Path, tmp_path: Path) -> None:
    def null_question(request: dict) -> str:
        reply = healthy(request)
        return '{"question": null, "answer": "x"}' if request.get("seed", 0) % 3 == 0 and "Level" in reply else reply

    with FakeOpenAI(null_question) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "out") == 0
    assert all('"None"' not in line for line in chain_lines(tmp_path / "out"))


def test_a_burst_of_rate_limits_does_not_stop_a_healthy_run(images: Path, tmp_path: Path) -> None:
    def burst(n: int, _request: dict):
        return (429, {"Retry-After": "0"}, b'{"error": {"message": "slow down"}}') if n < 40 else None

    with FakeOpenAI(healthy, fault=burst) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "out", "--retries", "60") == 0
    assert stats(tmp_path / "out")["images_done"] == 2


def test_a_server_that_never_answers_is_declared_down_quickly(tmp_path: Path, capsys) -> None:
    many = copy_images(tmp_path / "many", 6)
    with FakeOpenAI(healthy, delay_s=3.0) as server:
        start = time.monotonic()
        assert synth("mcts", server.base_url, many, tmp_path / "out", "--timeout", "0.2") == 1
        assert time.monotonic() - start < 30
    assert "timed out" in capsys.readouterr().err


def test_timeout_bounds_a_whole_attempt_even_when_bytes_trickle_in() -> None:
    import asyncio
    import threading

    from generation.client import ChatClient, ClientConfig, ClientError

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        while not stop.is_set():
            try:
                conn.sendall(b" ")
            except OSError:
                break
            time.sleep(0.2)
        conn.close()

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"

    async def ask() -> None:
        client = ChatClient(ClientConfig(model="m", base_url=url, api_key="x", timeout_s=1.0, max_retries=0))
        try:
            await client.complete([{"role": "user", "content": "hi"}])
        finally:
            await client.close()

    start = time.monotonic()
    with pytest.raises(ClientError, match="timed out"):
        asyncio.run(ask())
    elapsed = time.monotonic() - start
    stop.set()
    listener.close()
    assert elapsed < 4


def test_one_image_under_two_path_spellings_is_built_once(tmp_path: Path, monkeypatch) -> None:
    copy_images(tmp_path / "one", 1)
    monkeypatch.chdir(tmp_path)
    with FakeOpenAI(healthy) as server:
        assert synth("mcts", server.base_url, Path("one"), tmp_path / "out") == 0
        paid = len(server.requests)
        assert synth("mcts", server.base_url, tmp_path / "one", tmp_path / "out") == 0
        assert len(server.requests) == paid
    assert stats(tmp_path / "out")["images_done"] == 1
    assert len({json.loads(line)["image"] for line in chain_lines(tmp_path / "out")}) == 1


def test_a_truncated_input_image_is_refused_before_any_call(images: Path, tmp_path: Path, capsys) -> None:
    victim = sorted(images.iterdir())[0]
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    with FakeOpenAI(healthy) as server:
        assert synth("direct", server.base_url, images, tmp_path / "out") == 2
        assert server.requests == []
    assert victim.name in capsys.readouterr().err
