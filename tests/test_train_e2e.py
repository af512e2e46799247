"""The whole loop on CPU with a tiny random LLaVA-NeXT: prepare -> config -> LoRA step -> merge -> lmms-eval -> report.

It proves the loop, not a score. The Qwen3-VL loop is the offline training recipe's run (docs/offline-recipes.md,
recipe 2), checked in tests/test_readme_recipes.py: LoRA on the language model only, both models evaluated in both
settings with three replies per chain, the comparison naming them. lmms-eval runs in a forked child of the test
worker's long-lived lmms-eval (tests/lmms_worker.py), as the CLI would run it: the loop, not the process, is tested.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import BIN, run_lmms_eval
from safetensors.torch import load_file
from test_train_prepare import run_cli, write_chains

from hvcu_tasks.dev.tiny_model import build_llava_next
from hvcu_tasks.results.chains import chains_of_file, samples_files

pytestmark = pytest.mark.slow
TASKS = "hvcu_bench_sample_aesth,hvcu_bench_context_sample_aesth"


def evaluate(model: Path, out: Path) -> None:
    """Evaluate a model in both settings through the hvcu_context wrapper (llava_hf: one request at a time)."""
    args = f"inner=llava_hf,pretrained={model},device=cpu,device_map=cpu"
    run_lmms_eval(["--model", "hvcu_context", "--model_args", args, "--tasks", TASKS, "--log_samples"], out)
    chains = [c for task, path in samples_files([out]) for c in chains_of_file(task, path)]
    assert {c["setting"] for c in chains} == {"base", "context"}
    assert all(len(c["replies"]) == 3 and all(r.strip() for r in c["replies"]) for c in chains), out


def changed_weights(base: Path, merged: Path) -> list[str]:
    """Return the names of the tensors the merged LoRA step changed."""
    a, b = load_file(str(base / "model.safetensors")), load_file(str(merged / "model.safetensors"))
    return [name for name in a if name in b and not a[name].equal(b[name].to(a[name].dtype))]


def test_llava_next_loop_from_chains_to_the_comparison_report(tmp_path: Path) -> None:
    base = build_llava_next(tmp_path / "base")
    gen = tmp_path / "mcts"
    chains = write_chains(gen, n_images=3, per_image=2)
    data, train = tmp_path / "data", tmp_path / "train"
    assert run_cli("prepare", "--chains", str(chains), "--out", str(data), "--composition", "full-data",
                   "--image-root", str(gen)) == 0  # fmt: skip
    evaluate(base, tmp_path / "eval_base")
    assert run_cli(
        "config", "--model", "llava_next_7b", "--model-path", str(base), "--dataset", "hvcu_mcts_full_data",
        "--dataset-dir", str(data), "--out", str(train), "--cpu",
        "--set", "max_steps=1", "--set", "warmup_ratio=0", "--set", "image_max_pixels=16384",
    ) == 0  # fmt: skip
    assert run_cli("run", str(train / "train.yaml"), "--export", str(train / "export.yaml")) == 0
    merged = train / "merged"
    evaluate(merged, tmp_path / "eval_tuned")
    report = subprocess.run(
        [str(BIN / "hvcu"), "report", "--compare", str(tmp_path / "eval_base"), str(tmp_path / "eval_tuned")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr
    assert str(base) in report.stdout and str(merged) in report.stdout
    assert changed_weights(base, merged)
