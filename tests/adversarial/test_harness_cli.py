"""Task-load failures and empty denominators through the real `lmms-eval` CLI (slow).

lmms-eval's CLI prints and swallows every Exception and exits 0; an HVCU-Bench task that cannot load must
instead end the process at once with a non-zero status and its one-line reason as the last line.
"""

from __future__ import annotations

import glob
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import report_metrics

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.data.loaders import load_source

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def replay_predictions(path: Path) -> Path:
    """Write replay predictions answering every smoke question with its gold key."""
    with path.open("w", encoding="utf-8") as out:
        for family in FAMILIES:
            for s in load_source("smoke", family).raise_for_problems():
                for lv in s.levels:
                    line = {"family": family, "sample_id": s.id, "level": lv.level, "response": lv.answer}
                    out.write(json.dumps(line) + "\n")
    return path


def lmms_eval(tmp_path: Path, tasks: str, env: dict[str, str], *extra: str) -> tuple[int, list[str], float, Path]:
    """Run the lmms-eval CLI as a user would (default verbosity, stdout and stderr in one pipe)."""
    preds = replay_predictions(tmp_path / "preds.jsonl")
    out = tmp_path / "out"
    cmd = [str(BIN / "lmms-eval"), "--model", "hvcu_replay", "--model_args", f"predictions={preds}"]
    cmd += ["--tasks", tasks, "--output_path", str(out), *extra]
    full_env = {k: v for k, v in os.environ.items() if k not in {"HVCU_BENCH_DATA", "HF_HUB_OFFLINE"}}
    full_env.update(env)
    start = time.monotonic()
    proc = subprocess.run(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env, timeout=600, cwd=tmp_path
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, lines, time.monotonic() - start, out


def test_a_broken_local_copy_ends_the_run_non_zero_with_the_reason_last(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "Image" / "Implication-Understanding").mkdir(parents=True)
    (data / "Implication-Understanding.json").write_text(json.dumps([]), encoding="utf-8")
    code, lines, _, out = lmms_eval(tmp_path, "hvcu_bench_impl", {"HVCU_BENCH_DATA": str(data)})
    assert code != 0, "\n".join(lines[-30:])
    assert lines[-1].startswith("HVCU-Bench implication: cannot load the data; no request was sent: ")
    assert "Implication-Understanding.json: id=-: file: holds no items" in lines[-1]
    assert not any("RetryError" in line or "Traceback" in line for line in lines)
    assert not glob.glob(str(out / "**" / "*_results.json"), recursive=True)


def test_an_unreachable_hub_fails_fast_naming_the_env_variable(tmp_path: Path) -> None:
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")}
    code, lines, seconds, _ = lmms_eval(tmp_path, "hvcu_bench_impl", env)
    assert code != 0, "\n".join(lines[-30:])
    assert "cannot reach the Hugging Face Hub at http://127.0.0.1:9" in lines[-1]
    assert "HVCU_BENCH_DATA" in lines[-1]
    assert not any("Retrying" in line or "RetryError" in line for line in lines)
    assert seconds < 120  # lmms-eval's own start-up; the load itself fails within the probe's timeout


def test_offline_mode_without_a_cache_fails_fast_naming_the_env_variable(tmp_path: Path) -> None:
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    code, lines, _, _ = lmms_eval(tmp_path, "hvcu_bench_impl", env)
    assert code != 0, "\n".join(lines[-30:])
    assert "HVCU_BENCH_DATA" in lines[-1] and "Chime316/HVCU-Bench" in lines[-1]
    assert not any("RetryError" in line for line in lines)


def test_limit_without_a_complete_chain_gives_nan_not_zero(tmp_path: Path) -> None:
    code, lines, _, out = lmms_eval(tmp_path, "hvcu_bench_sample", {}, "--limit", "2", "--log_samples")
    assert code == 0, "\n".join(lines[-40:])
    (found,) = glob.glob(str(out / "**" / "*_results.json"), recursive=True)
    text = Path(found).read_text(encoding="utf-8")
    results = json.loads(text)["results"]
    impl = results["hvcu_bench_sample_impl"]
    assert impl["acc_l1_perc,none"] == 100.0 and impl["n_chains,none"] == 0
    for metric in ("acc_full", "acc_l3_conn"):  # reported to lmms-eval
        assert math.isnan(impl[f"{metric},none"]), metric
    diagnostics = report_metrics(out)["hvcu_bench_sample_impl"]  # what hvcu report computes from the sample log
    for metric in ("invalid_conn", "error_share_perc", "full_metaphor"):
        assert math.isnan(diagnostics[f"{metric},none"]), metric
    assert impl["acc_full_stderr,none"] == "N/A"
    assert math.isnan(results["hvcu_bench_sample"]["acc_full,none"])
    assert '"acc_full,none": NaN' in text
