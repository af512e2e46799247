"""The whole loop on CPU with tiny random models: prepare -> config -> LoRA step -> merge -> lmms-eval -> report.

It proves the loop, not a score. The base model is evaluated while the adapter trains (2 cores, two processes).
"""

from __future__ import annotations

import glob
import json
import subprocess
from pathlib import Path

import pytest
from conftest import BIN
from safetensors.torch import load_file
from test_train_prepare import run_cli, write_chains

from hvcu_tasks.dev.tiny_model import build_llava_next, build_qwen3_vl
from hvcu_tasks.results.chains import chains_of_file, samples_files

pytestmark = pytest.mark.slow


def lmms_eval(backend: str, model: Path, tasks: str, out: Path) -> list[str]:
    """Return the lmms-eval command for both settings through the hvcu_context wrapper."""
    batch = ["--batch_size", "8"] if backend == "qwen3_vl" else []  # llava_hf runs one request at a time
    return [
        str(BIN / "lmms-eval"),
        "--model",
        "hvcu_context",
        "--model_args",
        f"inner={backend},pretrained={model},device=cpu,device_map=cpu",
        "--tasks",
        tasks,
        "--output_path",
        str(out),
        "--log_samples",
        "--verbosity",
        "DEBUG",
        *batch,
    ]


def results_of(out: Path, log: Path) -> dict:
    found = glob.glob(str(out / "**" / "*_results.json"), recursive=True)
    assert found, f"lmms-eval wrote no results under {out}:\n{log.read_text()[-4000:]}"
    return json.loads(Path(found[0]).read_text())


def loop(tmp_path: Path, build, config_model: str, backend: str, tasks: str) -> tuple[Path, Path, str]:
    """Run the loop; return the base and merged model folders and the comparison report."""
    base = build(tmp_path / "base")
    gen = tmp_path / "mcts"
    chains = write_chains(gen, n_images=3, per_image=2)
    data, train = tmp_path / "data", tmp_path / "train"
    assert run_cli("prepare", "--chains", str(chains), "--out", str(data), "--composition", "full-data",
                   "--image-root", str(gen)) == 0  # fmt: skip
    base_log = tmp_path / "base_eval.log"
    with open(base_log, "w") as log:
        base_eval = subprocess.Popen(
            lmms_eval(backend, base, tasks, tmp_path / "eval_base"), stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path
        )
    try:
        assert run_cli(
            "config", "--model", config_model, "--model-path", str(base), "--dataset", "hvcu_mcts_full_data",
            "--dataset-dir", str(data), "--out", str(train), "--cpu",
            "--set", "max_steps=1", "--set", "warmup_ratio=0", "--set", "image_max_pixels=16384",
        ) == 0  # fmt: skip
        assert run_cli("run", str(train / "train.yaml"), "--export", str(train / "export.yaml")) == 0
        merged = train / "merged"
        tuned_log = tmp_path / "tuned_eval.log"
        with open(tuned_log, "w") as log:
            subprocess.run(
                lmms_eval(backend, merged, tasks, tmp_path / "eval_tuned"),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=tmp_path,
                timeout=600,
                check=True,
            )
    finally:
        base_eval.wait(timeout=600)
    for out, log in ((tmp_path / "eval_base", base_log), (tmp_path / "eval_tuned", tuned_log)):
        results_of(out, log)
        chains = [c for task, path in samples_files([out]) for c in chains_of_file(task, path)]
        assert {c["setting"] for c in chains} == {"base", "context"}
        assert all(len(c["replies"]) == 3 and all(r.strip() for r in c["replies"]) for c in chains), out
    report = subprocess.run(
        [str(BIN / "hvcu"), "report", "--compare", str(tmp_path / "eval_base"), str(tmp_path / "eval_tuned")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr
    return base, merged, report.stdout


def changed_weights(base: Path, merged: Path) -> list[str]:
    """Return the names of the tensors the merged LoRA step changed."""
    a, b = load_file(str(base / "model.safetensors")), load_file(str(merged / "model.safetensors"))
    return [name for name in a if name in b and not a[name].equal(b[name].to(a[name].dtype))]


def test_qwen3_vl_loop_from_chains_to_the_comparison_report(tmp_path: Path) -> None:
    base, merged, report = loop(
        tmp_path, build_qwen3_vl, "qwen3_vl_4b", "qwen3_vl", "hvcu_bench_sample,hvcu_bench_context_sample"
    )
    assert str(base) in report and str(merged) in report
    changed = changed_weights(base, merged)
    assert changed and all("language_model" in n for n in changed)  # LoRA on the LM only; vision tower frozen


def test_llava_next_loop_from_chains_to_the_comparison_report(tmp_path: Path) -> None:
    tasks = "hvcu_bench_sample_aesth,hvcu_bench_context_sample_aesth"
    base, merged, report = loop(tmp_path, build_llava_next, "llava_next_7b", "llava_hf", tasks)
    assert str(base) in report and str(merged) in report
    assert changed_weights(base, merged)
