"""hvcu_context names the endpoint it calls, sums up failed requests, and a run whose every request failed exits 1."""

from __future__ import annotations

import glob
import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ACCELERATE_TWO_CPU_RANKS, run_lmms_eval, two_rank_shares
from fake_openai import FakeOpenAI
from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms

from hvcu_tasks.data.loaders import load_source
from hvcu_tasks.lmms.models.wrapper import ContextWrapper

IMPL_REQUESTS = 15
"""The smoke sample's Implication family: 5 chains of 3 levels."""


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A 127.0.0.1 port nothing listens on, kept bound (never listening) for the test.

    Released at once, the port could be given to another test's server (bind to port 0) while this test's client
    still retries it: that server would get a stray request (a count one too high there, an answer here).
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def results_of(out: Path) -> dict:
    (found,) = glob.glob(str(out / "**" / "*_results.json"), recursive=True)
    return json.loads(Path(found).read_text())


@pytest.mark.slow
def test_a_run_whose_every_request_failed_exits_1_naming_the_endpoint_after_writing_results(
    tmp_path: Path, closed_port: int
) -> None:
    port = closed_port
    base_url = f"http://user:hunter2@127.0.0.1:{port}/v1?api-key=sk-hidden"
    args = f"inner=openai,model_version=fake-vlm,base_url={base_url},api_key=x,max_retries=1,retry_backoff_s=0"
    run = run_lmms_eval(
        ["--model", "hvcu_context", "--model_args", args, "--tasks", "hvcu_bench_sample_impl", "--log_samples"],
        tmp_path / "out",
        expect_ok=False,
        fresh=True,
    )
    output = run["output"]
    endpoint = f"http://127.0.0.1:{port}/v1"
    assert run["returncode"] == 1, output[-3000:]
    assert f"hvcu_context: inner openai, model fake-vlm, endpoint {endpoint}\n" in output
    assert f"hvcu_context: 15 of 15 requests failed (endpoint {endpoint}); first error: Connection error.\n" in output
    assert output.rstrip("\n").splitlines()[-1] == (
        f"hvcu_context: error: all 15 requests failed (endpoint {endpoint}; first error: Connection error.); "
        "check base_url, the API key and that the server is up and serves this model; "
        "lmms-eval wrote the results (n_failed_requests counts them)"
    )
    assert "hunter2" not in output and "sk-hidden" not in output
    assert "Traceback" not in output
    assert sum("Attempt " in line for line in output.splitlines()) == IMPL_REQUESTS  # max_retries=1: one each
    results = results_of(tmp_path / "out")
    assert results["results"]["hvcu_bench_sample_impl"]["n_failed_requests,none"] == IMPL_REQUESTS
    assert glob.glob(str(tmp_path / "out" / "**" / "*_samples_hvcu_bench_sample_impl.jsonl"), recursive=True)


@pytest.mark.slow
def test_a_healthy_server_exits_0_and_the_start_line_names_its_endpoint(tmp_path: Path) -> None:
    with FakeOpenAI(lambda body: "Answer: A") as server:
        args = f"inner=openai,model_version=fake-vlm,base_url={server.base_url},api_key=x"
        run = run_lmms_eval(
            ["--model", "hvcu_context", "--model_args", args, "--tasks", "hvcu_bench_sample_impl"],
            tmp_path / "out",
            expect_ok=False,
        )
    output = run["output"]
    assert run["returncode"] == 0, output[-3000:]
    endpoint = server.base_url.rstrip("/")
    assert f"hvcu_context: inner openai, model fake-vlm, endpoint {endpoint}\n" in output
    assert "requests failed" not in output
    assert results_of(tmp_path / "out")["results"]["hvcu_bench_sample_impl"]["n_failed_requests,none"] == 0


@pytest.mark.slow
def test_some_failed_requests_keep_exit_0_and_are_summed_up(tmp_path: Path) -> None:
    def refuse_level_1(n: int, body: dict) -> tuple[int, dict, bytes] | None:
        """The context setting's first round is [system, user]: refuse exactly those (one per chain)."""
        if len(body["messages"]) == 2:
            return 400, {}, json.dumps({"error": {"message": "image too large"}}).encode()
        return None

    with FakeOpenAI(lambda body: "Answer: A", fault=refuse_level_1) as server:
        args = f"inner=openai,model_version=fake-vlm,base_url={server.base_url},api_key=x,max_retries=1"
        run = run_lmms_eval(
            ["--model", "hvcu_context", "--model_args", args, "--tasks", "hvcu_bench_context_sample_impl"],
            tmp_path / "out",
            expect_ok=False,
        )
    output = run["output"]
    assert run["returncode"] == 0, output[-3000:]
    endpoint = server.base_url.rstrip("/")
    assert (
        f"hvcu_context: 5 of 15 requests failed (endpoint {endpoint}); first error: Error code: 400 - image too large\n"
    ) in output
    assert "hvcu_context: error:" not in output
    assert results_of(tmp_path / "out")["results"]["hvcu_bench_context_sample_impl"]["n_failed_requests,none"] == 5


@pytest.mark.slow
def test_under_data_parallelism_every_failed_request_ends_the_launch_non_zero_without_a_hang(
    tmp_path: Path, hvcu_cache: Path
) -> None:
    """Two real ranks whose every request failed: one verdict over both ranks' shares, exit 1, no hang; the request
    cache's run is one for both ranks, each rank keeping its own share.

    lmms-eval's openai backend refuses data parallelism on the CPU (it accepts only a multi-GPU, FSDP or DeepSpeed
    launch), so here the wrapper drives hvcu_replay replaying a run whose every reply is lmms-eval's failure marker.
    Shares: base 15 documents -> 8 + 7, context 5 chains -> 3 + 2 (3 rounds each). lmms-eval evens them out with
    copies (rank 1: one base request, one chain), which are no requests of the run: rank 0 asks 8 + 3 x 3 = 17,
    rank 1 7 + 2 x 3 = 13, 30 in all.
    """
    failed = "[LMMS_EVAL_REQUEST_FAILED after 1 retries] Connection error."
    replies = [
        {"family": "implication", "sample_id": sample.id, "level": lv.level, "response": failed}
        for sample in load_source("smoke", "implication").samples
        for lv in sample.levels
    ]
    predictions = tmp_path / "failed.jsonl"
    predictions.write_text("".join(json.dumps(reply) + "\n" for reply in replies), encoding="utf-8")
    out = tmp_path / "out"
    cmd = [*ACCELERATE_TWO_CPU_RANKS, "--model", "hvcu_context", "--model_args"]
    cmd += [f"inner=hvcu_replay,predictions={predictions},cache=on"]
    cmd += ["--tasks", "hvcu_bench_sample_impl,hvcu_bench_context_sample_impl"]
    cmd += ["--output_path", str(out), "--verbosity", "DEBUG"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]
    assert two_rank_shares(output) == {"hvcu_bench_sample_impl": [7, 8], "hvcu_bench_context_sample_impl": [2, 3]}
    summary = "hvcu_context: 30 of 30 requests failed (inner model hvcu_replay); first error: Connection error.\n"
    assert summary in output
    assert (
        "hvcu_context: error: all 30 requests of the inner model hvcu_replay failed (first error: Connection error.); "
    ) in output
    results = results_of(out)["results"]
    assert results["hvcu_bench_sample_impl"]["n_failed_requests,none"] == IMPL_REQUESTS
    assert results["hvcu_bench_context_sample_impl"]["n_failed_requests,none"] == IMPL_REQUESTS
    shares = [json.loads(f.read_text()) for f in sorted(hvcu_cache.glob("**/runs/*/rank-*/run.json"))]
    counts = [(m["rank"], m["world_size"], m["requests"], m["failed"]) for m in shares]
    assert counts == [(0, 2, 17, 17), (1, 2, 13, 13)]
    assert len({m["run"] for m in shares}) == 1


def test_without_base_url_the_start_line_names_the_openai_api_as_the_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    ContextWrapper(inner="openai", model_version="gpt-4o", api_key="x", cache="off")
    assert capsys.readouterr().err.splitlines()[0] == (
        "hvcu_context: inner openai, model gpt-4o, endpoint https://api.openai.com/v1 "
        "(the OpenAI API, the client's default: no base_url given)"
    )


class Refusing(lmms):
    """A chat model at a remote endpoint that answers every request with lmms-eval's failure marker."""

    is_simple = False
    base_url = "http://10.0.0.7:8000/v1/"

    def generate_until(self, requests: list) -> list[str]:
        return ["[LMMS_EVAL_REQUEST_FAILED after 1 retries] Connection refused"] * len(requests)

    def generate_until_multi_round(self, requests: list) -> list:
        raise NotImplementedError

    def loglikelihood(self, requests: list) -> list:
        raise NotImplementedError


def test_called_from_code_a_run_whose_every_request_failed_is_summed_up_and_nothing_raised(
    capsys: pytest.CaptureFixture[str],
) -> None:
    wrapper = ContextWrapper.around(Refusing(), "refusing")
    requests = [
        Instance(
            "generate_until",
            ("ctx", lambda doc: [], {}, i, "t", "test"),
            idx=0,
            metadata={"task": "t", "doc_id": i, "repeats": 1},
        )
        for i in range(3)
    ]
    assert len(wrapper.generate_until(requests)) == 3
    wrapper.clean()  # what lmms-eval calls once every request is done
    err = capsys.readouterr().err
    assert "hvcu_context: inner refusing, model (not given), endpoint http://10.0.0.7:8000/v1\n" in err
    assert (
        "hvcu_context: 3 of 3 requests failed (endpoint http://10.0.0.7:8000/v1); first error: Connection refused\n"
    ) in err


def test_a_ranks_padding_copy_is_answered_but_is_no_request_of_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    """lmms-eval gives a rank with fewer requests copies of its last one, marked `__padding_only__` in metadata."""
    wrapper = ContextWrapper.around(Refusing(), "refusing")
    requests = [
        Instance("generate_until", ("ctx", lambda doc: [], {}, i, "t", "test"), idx=0, metadata=metadata)
        for i, metadata in enumerate(
            [{"task": "t", "doc_id": 0, "repeats": 1}, {"task": "t", "doc_id": 1, "repeats": 1}]
            + [{"task": "t", "doc_id": 1, "repeats": 1, "__padding_only__": True}]
        )
    ]
    assert len(wrapper.generate_until(requests)) == 3
    wrapper.clean()
    assert "hvcu_context: 2 of 2 requests failed (endpoint http://10.0.0.7:8000/v1)" in capsys.readouterr().err
