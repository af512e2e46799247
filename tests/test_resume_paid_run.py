"""A paid lmms-eval run killed with SIGKILL, rerun with the same command, pays only for the requests left unanswered.

The killed run is the real `lmms-eval` process; the runs that finish go through the test worker's long-lived
lmms-eval (conftest.run_lmms_eval, a forked child per run, as the CLI would run them): the request cache on disk,
not the process, is what they check.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import threading
import time
import zlib
from pathlib import Path

import pytest
from conftest import BIN, run_lmms_eval
from fake_openai import FakeOpenAI

from hvcu_tasks.lmms.models.request_cache import read_replies

pytestmark = pytest.mark.slow

TASKS = "hvcu_bench_sample,hvcu_bench_context_sample"
KILL_AFTER = 50
"""Replies the server gives before it stops answering and the run is killed (45 base requests + 5 context ones)."""


def reply(body: dict) -> str:
    """A reply that depends only on the request's last user text."""
    text = " ".join(part.get("text", "") for part in body["messages"][-1]["content"])
    return "Answer: " + "ABCD"[zlib.crc32(text.encode()) % 4]


class Freezer:
    """Answers `reply` until `limit` replies were given, then holds every later request until released."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.answered: list[str] = []
        self.lock = threading.Lock()
        self.release = threading.Event()

    def __call__(self, body: dict) -> str:
        with self.lock:
            hold = self.limit is not None and len(self.answered) >= self.limit
            if not hold:
                self.answered.append(key(body))
        if hold:
            self.release.wait(timeout=300)
        return reply(body)


def key(body: dict) -> str:
    return json.dumps(body, sort_keys=True)


def command(server: FakeOpenAI) -> list[str]:
    """lmms-eval's arguments for the paid run (the wrapper over the openai backend, both settings)."""
    args = f"inner=openai,model_version=fake-vlm,base_url={server.base_url},api_key=x,num_concurrent=8"
    return ["--model", "hvcu_context", "--model_args", args, "--tasks", TASKS]


def finish(args: list[str], out: Path, cache: Path) -> str:
    """Run lmms-eval with these arguments to the end; return its output."""
    run = run_lmms_eval([*args, "--log_samples"], out, env={"HVCU_CACHE_DIR": str(cache)}, expect_ok=False)
    assert run["returncode"] == 0 and run["results"], run["output"][-3000:]
    return run["output"]


def stored(cache: Path) -> int:
    """Replies stored in every run of every model under a cache root."""
    return sum(
        len(read_replies(folder)) for folder in (cache / "requests-v2").glob("*/runs/*/rank-*") if folder.is_dir()
    )


def outcome(out: Path) -> dict:
    """The run's metrics and every logged (task, doc_id, replies)."""
    (results,) = glob.glob(str(out / "**" / "*_results.json"), recursive=True)
    replies = set()
    for path in glob.glob(str(out / "**" / "*_samples_*.jsonl"), recursive=True):
        task = Path(path).stem.split("_samples_", 1)[1]
        for line in Path(path).read_text().splitlines():
            row = json.loads(line)
            replies.add((task, row["doc_id"], json.dumps(row["filtered_resps"])))
    return {"metrics": json.loads(Path(results).read_text())["results"], "replies": replies}


def test_a_killed_run_rerun_pays_only_for_what_was_unanswered(tmp_path: Path) -> None:
    freezer = Freezer()
    with FakeOpenAI(freezer) as server:
        server.server.handle_error = lambda *_: None  # the killed run's dropped connections are expected
        cmd = command(server)
        printed = finish(cmd, tmp_path / "whole", tmp_path / "cache-whole")
        uninterrupted = len(server.requests)

        # The killed run: once KILL_AFTER replies are given (and stored), later requests hang; kill -9 the run.
        server.requests.clear()
        freezer.limit, freezer.answered = KILL_AFTER, []
        cache = tmp_path / "cache"
        env = {**os.environ, "HVCU_CACHE_DIR": str(cache)}
        proc = subprocess.Popen(
            [str(BIN / "lmms-eval"), *cmd, "--output_path", str(tmp_path / "killed")],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 600
        while stored(cache) < KILL_AFTER and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)  # let the backend fill its concurrency with requests that will not be answered
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        answered = set(freezer.answered)
        in_flight = {key(b) for b in server.requests} - answered
        freezer.release.set()

        server.requests.clear()
        freezer.limit = None
        finish(cmd, tmp_path / "rerun", cache)
        rerun = [key(b) for b in server.requests]

    assert "hvcu_context: request cache " + str(tmp_path / "cache-whole" / "requests-v2") in printed
    assert uninterrupted == 75  # 45 base + 30 context requests: a context chain's level 1 is the base request
    assert len(answered) == KILL_AFTER and in_flight
    assert set(rerun) & answered == set()  # nothing answered before the kill is paid again
    assert set(rerun) >= in_flight  # the requests in flight at the kill are asked again
    assert len(rerun) == uninterrupted - KILL_AFTER
    assert outcome(tmp_path / "rerun") == outcome(tmp_path / "whole")


def mock_answers(accuracy: float):
    """The toolkit's mock model: right on every sample question (accuracy 1) or wrong on every one (0)."""
    from generation.mock.answers import MockSettings, load_gold, reply_to

    settings, gold = MockSettings(seed=0, accuracy=accuracy), load_gold(["smoke"])
    return lambda body: reply_to(body, settings, gold).text


def asked(server: FakeOpenAI, model: str) -> int:
    """The different requests for `model` the server got: what the run asked (the count the cache decides).

    Not the raw count: a request the openai client sent again after a connection error (its own retries), or one
    from another test's client whose port the server's was given again, would add to it on a loaded machine.
    """
    return len({key(body) for body in server.requests if body.get("model") == model})


def acc_full(out: Path) -> float:
    (results,) = glob.glob(str(out / "**" / "*_results.json"), recursive=True)
    return json.loads(Path(results).read_text())["results"]["hvcu_bench_sample"]["acc_full,none"]


def test_a_new_checkpoint_served_under_the_same_name_is_asked_again(tmp_path: Path) -> None:
    """The issue's run: the same command after a finished run asks the server again; reuse=all replays."""
    model = {"answer": mock_answers(1.0)}
    with FakeOpenAI(lambda body: model["answer"](body)) as server:
        args = f"inner=openai,model_version=my-ckpt,base_url={server.base_url},api_key=x,num_concurrent=8"
        cmd = ["--model", "hvcu_context", "--model_args", args, "--tasks", "hvcu_bench_sample"]
        cache = tmp_path / "cache"
        finish(cmd, tmp_path / "right", cache)
        first = asked(server, "my-ckpt")

        model["answer"] = mock_answers(0.0)  # a new checkpoint under the same name at the same URL
        server.requests.clear()
        printed = finish(cmd, tmp_path / "wrong", cache)
        second = asked(server, "my-ckpt")

        server.requests.clear()
        reused = finish([*cmd[:3], args + ",reuse=all", *cmd[4:]], tmp_path / "reused", cache)
        third = asked(server, "my-ckpt")

    runs = [json.loads(p.read_text()) for p in cache.glob("requests-v2/*/runs/*/rank-*/run.json")]
    runs.sort(key=lambda m: m["created_s"])
    assert (first, second, third) == (45, 45, 0)
    assert [m["state"] for m in runs] == ["finished"] * 3
    assert (acc_full(tmp_path / "right"), acc_full(tmp_path / "wrong")) == (100, 0)
    assert acc_full(tmp_path / "reused") == 0  # the newest run's replies win
    assert "1 earlier runs of this model" in printed and "are NOT reused; reuse=all takes them" in printed
    assert f"hvcu_context: 45 replies reused from run {runs[1]['run']} (finished, " in reused
