"""`hvcu mcts` / `hvcu direct` against a fake OpenAI-compatible server: outputs, resume, shards, faults."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI

from hvcu_tasks.cli import main
from hvcu_tasks.dev.smoke import SMOKE_DIR

SMALL = {"capacity": [3, 4, 5], "max_iterations": 12, "candidates_per_expansion": 3, "top_k": 4}


def fake_mllm(request: dict) -> str:
    """A deterministic generator/judge: replies depend only on the request (prompt, seed)."""
    text = request["messages"][-1]["content"][0]["text"]
    digest = int(hashlib.sha256((text + str(request.get("seed"))).encode()).hexdigest()[:6], 16)
    if text.startswith("You judge"):
        question = re.search(r"Question: (.*)", text).group(1)
        score = 0.3 if "seven" in question else 0.6 + (digest % 40) / 100
        return f'Here is my verdict: {{"score": {score:.2f}, "reason": "coherent"}}'
    if text.startswith("Write three questions"):
        levels = [{"question": f"Q{i} {digest}", "answer": f"A{i}"} for i in (1, 2, 3)]
        return "```json\n" + json.dumps({"levels": levels}) + "\n```"
    level = re.search(r"Level (\d) is", text).group(1)
    word = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"][digest % 10]
    return json.dumps({"question": f"L{level} {word} {digest}?", "answer": f"because {digest % 97}"})


@pytest.fixture
def images(tmp_path: Path) -> Path:
    folder = tmp_path / "imgs"
    folder.mkdir()
    for src in sorted((SMOKE_DIR / "Image").rglob("*.png"))[:4]:
        shutil.copy(src, folder / src.name)
    return folder


def mcts_args(base_url: str, images: Path, out: Path) -> list[str]:
    """The `hvcu mcts` arguments of these tests (small search config written next to `out`)."""
    config = out.parent / "config.json"
    config.write_text(json.dumps(SMALL))
    return [
        "mcts",
        "--images",
        str(images),
        "--out",
        str(out),
        "--model",
        "fake",
        "--base-url",
        base_url,
        "--api-key",
        "x",
        "--config",
        str(config),
        "--quiet",
    ]


def mcts(server: FakeOpenAI, images: Path, out: Path, *extra: str) -> int:
    return main([*mcts_args(server.base_url, images, out), *extra])


def chains(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "chains.jsonl").read_text().splitlines()]


def test_mcts_writes_chains_stats_and_tree_states(images: Path, tmp_path: Path) -> None:
    with FakeOpenAI(fake_mllm) as server:
        assert mcts(server, images, tmp_path / "out") == 0
        first = len(server.requests)
    got = chains(tmp_path / "out")
    assert got and all([lv["level"] for lv in c["levels"]] == [1, 2, 3] for c in got)
    assert all(c["method"] == "mcts" and c["path_score"] >= 0.65 for c in got)
    assert all("seven" not in lv["question"] for c in got for lv in c["levels"])  # judged 0.3: rejected
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["images_done"] == 4 and stats["images_failed"] == 0 and stats["chains"] == len(got)
    assert stats["model_replies_stored"] == first and stats["calls_per_chain"] == pytest.approx(first / len(got))
    assert 0 < stats["acceptance_rate"] < 1
    assert len(list((tmp_path / "out" / "images").glob("*.json"))) == 4
    first_image = server.requests[0]["messages"][-1]["content"][1]["image_url"]["url"]
    assert first_image.startswith("data:image/png;base64,")


def test_rerun_pays_for_nothing_and_reproduces_the_chains(images: Path, tmp_path: Path) -> None:
    with FakeOpenAI(fake_mllm) as server:
        mcts(server, images, tmp_path / "out")
        before = (tmp_path / "out" / "chains.jsonl").read_text()
        paid = len(server.requests)
        for f in list((tmp_path / "out" / "images").glob("*.json"))[:2]:
            f.unlink()  # as if killed before these two images finished
        assert mcts(server, images, tmp_path / "out") == 0
        assert len(server.requests) == paid  # every call came from the cache
    assert (tmp_path / "out" / "chains.jsonl").read_text() == before


def test_shards_merge_to_the_single_run(images: Path, tmp_path: Path) -> None:
    with FakeOpenAI(fake_mllm) as server:
        mcts(server, images, tmp_path / "all")
        mcts(server, images, tmp_path / "s0", "--shard", "0/2")
        mcts(server, images, tmp_path / "s1", "--shard", "1/2")
    assert main(["mcts", "merge", str(tmp_path / "s0"), str(tmp_path / "s1"), "--out", str(tmp_path / "m")]) == 0
    assert (tmp_path / "m" / "chains.jsonl").read_text() == (tmp_path / "all" / "chains.jsonl").read_text()
    sizes = [len(list((tmp_path / s / "images").glob("*.json"))) for s in ("s0", "s1")]
    assert sum(sizes) == 4


def test_faults_from_the_server_do_not_stop_the_run(images: Path, tmp_path: Path) -> None:
    def fault(n: int, _request: dict):
        if n % 11 == 3:
            return 429, {"Retry-After": "0"}, b'{"error": {"message": "busy"}}'
        if n % 13 == 5:
            return 500, {"Retry-After": "0"}, b"{}"
        return None

    def sometimes_garbage(request: dict) -> str:
        reply = fake_mllm(request)
        return "I cannot answer that." if request.get("seed", 0) % 9 == 0 else reply

    with FakeOpenAI(sometimes_garbage, fault=fault) as server:
        assert mcts(server, images, tmp_path / "out") == 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["images_done"] == 4 and stats["chains"] > 0


def test_direct_baseline_writes_the_same_format(images: Path, tmp_path: Path) -> None:
    with FakeOpenAI(fake_mllm) as server:
        args = [
            "direct",
            "--images",
            str(images),
            "--out",
            str(tmp_path / "d"),
            "--model",
            "fake",
            "--base-url",
            server.base_url,
            "--api-key",
            "x",
            "--quiet",
        ]
        assert main(args) == 0
        assert len(server.requests) == 4
    got = chains(tmp_path / "d")
    assert len(got) == 4 and all(c["method"] == "direct" and len(c["levels"]) == 3 for c in got)


def test_direct_sends_its_prompt_with_single_braces(images: Path, tmp_path: Path) -> None:
    with FakeOpenAI(fake_mllm) as server:
        args = ["direct", "--images", str(images), "--out", str(tmp_path / "d"), "--model", "fake"]
        assert main([*args, "--base-url", server.base_url, "--api-key", "x", "--quiet"]) == 0
        texts = [p["text"] for m in server.requests[0]["messages"] for p in m["content"] if p.get("type") == "text"]
    assert texts and texts[0].rstrip().endswith(
        '{"levels": [{"question": "...", "answer": "..."}, {"question": "...", "answer": "..."}, '
        '{"question": "...", "answer": "..."}]}'
    )


def test_bad_config_keys_are_named(images: Path, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"capacity": [1, 1, 1], "exploraton": 1.0}))
    code = main(
        [
            "mcts",
            "--images",
            str(images),
            "--out",
            str(tmp_path / "o"),
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--config",
            str(bad),
            "--quiet",
        ]
    )
    assert code == 2 and "unknown key(s) ['exploraton']" in capsys.readouterr().err


def test_a_killed_run_resumes_without_repeating_stored_calls(images: Path, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    with FakeOpenAI(fake_mllm) as server:
        assert mcts(server, images, tmp_path / "reference") == 0
        uninterrupted = len(server.requests)
        server.requests.clear()
        server.delay_s = 0.05
        cmd = [sys.executable, "-m", "hvcu_tasks.cli", *mcts_args(server.base_url, images, tmp_path / "out")]
        cmd += ["--concurrency", "4"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while len(server.requests) < uninterrupted // 2 and time.time() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        first_run = len(server.requests)
        assert 0 < first_run < uninterrupted
        server.delay_s = 0.0
        assert mcts(server, images, tmp_path / "out") == 0
        total = len(server.requests)
    assert total <= uninterrupted + 4  # at most the calls in flight at the kill are paid twice
    assert (tmp_path / "out" / "chains.jsonl").read_text() == (tmp_path / "reference" / "chains.jsonl").read_text()


def test_missing_endpoint_arguments_are_named(images: Path, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["mcts", "--images", str(images), "--model", "m"])
    assert done.value.code == 2
    assert "the following arguments are required: --out, --base-url" in capsys.readouterr().err
