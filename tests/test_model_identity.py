"""hvcu_context records the served model's identity in the results file (`configs.<task>.metadata`), cache on or off."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import pytest
from conftest import run_lmms_eval, smoke_predictions
from fake_openai import FakeOpenAI

from hvcu_tasks.cli import main
from hvcu_tasks.lmms.plugin import serve, served_identity

KEY = "hvcu_model_identity"
SAMPLE_TASKS = [f"hvcu_bench_sample_{short}" for short in ("aesth", "affect", "impl")]
CONTEXT_TASKS = [f"hvcu_bench_context_sample_{short}" for short in ("aesth", "affect", "impl")]


def identities(results: dict) -> dict[str, object]:
    """Each task's recorded model identity (None where the task's config has none)."""
    return {task: (config.get("metadata") or {}).get(KEY) for task, config in results["configs"].items()}


class Served:
    """A stand-in for an hvcu_context wrapper: the task_dict lmms-eval fills and the identity it records."""

    def __init__(self, task_dict: dict, identity: dict) -> None:
        self.task_dict = task_dict
        self.model_identity = identity


def test_a_task_whose_documents_a_wrapper_holds_gets_its_identity() -> None:
    docs = {"test": ["a document"]}
    wrapper = Served({"hvcu_bench_impl": docs}, {"backend": "vllm"})
    serve(wrapper)
    assert served_identity("hvcu_bench_impl", docs) == {"backend": "vllm"}


def test_a_task_whose_documents_no_wrapper_holds_gets_none() -> None:
    wrapper = Served({"hvcu_bench_impl": {"test": ["an earlier run's document"]}}, {"backend": "vllm"})
    serve(wrapper)
    assert served_identity("hvcu_bench_impl", {"test": ["a document"]}) is None


def test_the_recorded_identity_is_a_copy() -> None:
    docs = {"test": ["a document"]}
    wrapper = Served({"hvcu_bench_impl": docs}, {"backend": "vllm", "args": {"pretrained": "x"}})
    serve(wrapper)
    served_identity("hvcu_bench_impl", docs)["args"]["pretrained"] = "changed"
    assert wrapper.model_identity["args"]["pretrained"] == "x"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A replay run of both settings through hvcu_context (a local model: request cache off by default)."""
    root = tmp_path_factory.mktemp("identity")
    predictions = smoke_predictions(root / "p.jsonl")
    args = ["--model", "hvcu_context", "--model_args", f"inner=hvcu_replay,model=m,predictions={predictions}"]
    tasks = ["--tasks", "hvcu_bench_sample,hvcu_bench_context_sample", "--limit", "2"]
    return root, run_lmms_eval([*args, *tasks], root / "run")


@pytest.mark.slow
def test_every_hvcu_task_served_through_hvcu_context_records_the_model_identity(replayed: tuple[Path, dict]) -> None:
    root, results = replayed
    expected = {
        "backend": "hvcu_replay",
        "args": {"model": "m", "predictions": str(root / "p.jsonl")},
        "lmms_eval": version("lmms_eval"),  # the installed release (the file's lmms_eval_version may be a git ref)
    }
    assert identities(results) == {task: expected for task in SAMPLE_TASKS + CONTEXT_TASKS}


@pytest.mark.slow
def test_a_run_without_hvcu_context_records_no_model_identity(tmp_path: Path) -> None:
    predictions = smoke_predictions(tmp_path / "p.jsonl")
    args = ["--model", "hvcu_replay", "--model_args", f"model=m,predictions={predictions}", "--limit", "2"]
    results = run_lmms_eval([*args, "--tasks", "hvcu_bench_sample"], tmp_path / "run")
    assert identities(results) == dict.fromkeys(SAMPLE_TASKS)


@pytest.mark.slow
def test_an_api_run_records_the_endpoint_without_credentials_and_its_cache_run(
    tmp_path: Path, hvcu_cache: Path
) -> None:
    with FakeOpenAI(lambda _request: "Answer: A") as server:
        url = server.base_url.replace("://", "://bob:hunter2@")
        args = f"inner=openai,model_version=fake-vlm,base_url={url},api_key=sk-secret-1,num_concurrent=4"
        results = run_lmms_eval(
            ["--model", "hvcu_context", "--model_args", args, "--tasks", "hvcu_bench_sample", "--limit", "1"],
            tmp_path / "run",
        )
    (identity,) = {json.dumps(i, sort_keys=True) for i in identities(results).values()}
    recorded = json.loads(identity)
    (manifest,) = hvcu_cache.glob("requests-v2/*/runs/*/rank-0/run.json")
    assert recorded["backend"] == "openai" and recorded["endpoint"] == server.base_url + "/"
    assert recorded["args"] == {"base_url": server.base_url, "model_version": "fake-vlm"}
    assert "hunter2" not in identity and "sk-secret-1" not in identity and "bob" not in identity
    run = json.loads(manifest.read_text())["run"]
    assert recorded["request_cache"] == {"identity": manifest.parents[3].name, "run": run}


@pytest.mark.slow
def test_the_model_page_shows_the_recorded_identity(replayed: tuple[Path, dict]) -> None:
    root, _results = replayed
    assert main(["report", str(root / "run"), "--format", "html", "--out", str(root / "site")]) == 0
    page = (root / "site" / "models" / "m.html").read_text()
    assert "<dt>Model identity</dt><dd>backend hvcu_replay · model m · predictions " in page
