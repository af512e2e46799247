"""`make train-loop`: the commands it runs, the base model and backend it evaluates, and when it evaluates again.

`hvcu`, `lmms-eval` and the venv are stand-ins that log their arguments (the real steps are tested elsewhere):
`hvcu train info` answers from a JSON file the test controls, lmms-eval writes a results file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_HVCU = """
import json, sys
from pathlib import Path
root = Path(__file__).resolve().parents[2]
with open(root / "calls.jsonl", "a") as fh:
    fh.write(json.dumps(["hvcu", *sys.argv[1:]]) + "\\n")
if sys.argv[1:3] == ["train", "info"]:
    print(json.loads((root / "info.json").read_text())[sys.argv[sys.argv.index("--field") + 1]])
"""

FAKE_LMMS_EVAL = """
import json, sys
from pathlib import Path
root = Path(__file__).resolve().parents[2]
with open(root / "calls.jsonl", "a") as fh:
    fh.write(json.dumps(["lmms-eval", *sys.argv[1:]]) + "\\n")
out = Path(sys.argv[sys.argv.index("--output_path") + 1]) / "model"
out.mkdir(parents=True)
(out / "20250101_results.json").write_text("{}")
"""

INFO = {"base_model": "llava-hf/llava-v1.6-vicuna-7b-hf", "eval_backend": "llava_hf", "merged_fingerprint": "f1" * 32}


@pytest.fixture
def loop(tmp_path: Path):
    """Return a function that runs `make train-loop VAR=value ...` with the stand-ins and returns the logged calls."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name, code in (("hvcu", FAKE_HVCU), ("lmms-eval", FAKE_LMMS_EVAL)):
        (venv / "bin" / name).write_text(f"#!{sys.executable}\n{code}")
        (venv / "bin" / name).chmod(0o755)
    (venv / ".installed").touch()  # newer than pyproject.toml: `setup` has nothing to do
    (tmp_path / "info.json").write_text(json.dumps(INFO))

    def make(*variables: str) -> list[list[str]]:
        log = tmp_path / "calls.jsonl"
        log.unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
        done = subprocess.run(
            ["make", "--no-print-directory", "train-loop", f"VENV={venv}", f"OUT={tmp_path / 'out'}", *variables],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        make.stdout = done.stdout
        return [json.loads(line) for line in log.read_text().splitlines()]

    return make


def step(calls: list[list[str]], *prefix: str) -> list[list[str]]:
    return [c for c in calls if c[: len(prefix)] == list(prefix)]


def model_args(call: list[str]) -> str:
    return call[call.index("--model_args") + 1]


def test_the_shipped_base_of_train_model_is_trained_and_evaluated_with_its_backend(loop, tmp_path: Path) -> None:
    calls = loop("TRAIN_MODEL=llava_next_7b")
    [config] = step(calls, "hvcu", "train", "config")
    assert config[config.index("--model") + 1] == "llava_next_7b" and "--model-path" not in config
    base, tuned = step(calls, "lmms-eval")
    assert model_args(base) == "inner=llava_hf,pretrained=llava-hf/llava-v1.6-vicuna-7b-hf,device_map=auto"
    assert model_args(tuned) == f"inner=llava_hf,pretrained={tmp_path / 'out' / 'train' / 'merged'},device_map=auto"
    assert step(calls, "hvcu", "report", "--compare")


def test_base_model_and_eval_backend_can_be_set(loop) -> None:
    calls = loop("BASE_MODEL=/models/tiny", "EVAL_BACKEND=hf_custom")
    [config] = step(calls, "hvcu", "train", "config")
    assert config[config.index("--model-path") + 1] == "/models/tiny"
    assert all(model_args(c).startswith("inner=hf_custom,") for c in step(calls, "lmms-eval"))


def test_deepspeed_is_off_and_there_is_no_multi_node_variable(loop) -> None:
    [config] = step(loop("NODES=2"), "hvcu", "train", "config")
    assert config[config.index("--deepspeed") + 1] == "none" and "--nodes" not in config


def test_train_force_passes_force_to_the_run(loop) -> None:
    [plain] = step(loop(), "hvcu", "train", "run")
    [forced] = step(loop("TRAIN_FORCE=1"), "hvcu", "train", "run")
    assert "--force" not in plain and forced[-1] == "--force"


def test_a_rerun_skips_evaluations_whose_model_fingerprint_is_unchanged(loop, tmp_path: Path) -> None:
    loop()
    assert step(loop(), "lmms-eval") == []
    assert "base: evaluated already" in loop.stdout and "tuned: evaluated already" in loop.stdout


def test_a_new_merged_model_is_evaluated_again(loop, tmp_path: Path) -> None:
    loop()
    stale = tmp_path / "out" / "eval" / "tuned" / "model" / "20240101_results.json"
    stale.write_text("{}")  # results of the previous merged model
    (tmp_path / "info.json").write_text(json.dumps({**INFO, "merged_fingerprint": "f2" * 32}))
    [tuned] = step(loop(), "lmms-eval")
    assert "pretrained=" + str(tmp_path / "out" / "train" / "merged") in model_args(tuned)
    assert (tmp_path / "out" / "eval" / "tuned" / "fingerprint").read_text().startswith("merged " + "f2" * 32)
    assert not stale.exists()  # cleared, so the comparison reads only the new results


def test_other_eval_tasks_evaluate_both_models_again(loop) -> None:
    loop()
    assert len(step(loop("EVAL_TASKS=hvcu_bench"), "lmms-eval")) == 2


def batch_size(call: list[str]) -> str:
    return call[call.index("--batch_size") + 1]


def test_llava_hf_is_evaluated_one_request_at_a_time(loop) -> None:
    calls = step(loop(), "lmms-eval")  # the stand-in's backend is llava_hf
    assert [batch_size(c) for c in calls] == ["1", "1"]


def test_other_backends_are_evaluated_in_batches_of_eight(loop) -> None:
    calls = step(loop("EVAL_BACKEND=qwen3_vl"), "lmms-eval")
    assert [batch_size(c) for c in calls] == ["8", "8"]


def test_eval_batch_sets_the_batch_size(loop) -> None:
    calls = step(loop("EVAL_BATCH=4"), "lmms-eval")
    assert [batch_size(c) for c in calls] == ["4", "4"]


def test_another_batch_size_evaluates_both_models_again(loop) -> None:
    loop()
    assert len(step(loop("EVAL_BATCH=2"), "lmms-eval")) == 2
