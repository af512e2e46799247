"""`hvcu train run`: train then merge through llamafactory-cli, resume, skip finished work, fail loudly."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import yaml
from test_train_prepare import run_cli

from training.run import FINISHED, LOG_NAME, StepFailed, run, stream


def write_configs(tmp_path: Path) -> tuple[Path, Path]:
    train, export = tmp_path / "train.yaml", tmp_path / "export.yaml"
    train.write_text(yaml.safe_dump({"output_dir": str(tmp_path / "adapter"), "template": "qwen3_vl_nothink"}))
    export.write_text(
        yaml.safe_dump({"adapter_name_or_path": str(tmp_path / "adapter"), "export_dir": str(tmp_path / "merged")})
    )
    return train, export


class FakeCli:
    """Stands in for llamafactory-cli: records the steps and writes what a successful step leaves behind."""

    def __init__(self, tmp_path: Path, fail: str | None = None, status: int = 3):
        self.tmp_path, self.fail, self.status, self.calls = tmp_path, fail, status, []

    def __call__(self, cmd: list[str], log: Path, env: dict, out) -> int:
        step = cmd[1]
        self.calls.append(step)
        if step == self.fail:
            return self.status
        if step == "train":
            (self.tmp_path / "adapter").mkdir(exist_ok=True)
            (self.tmp_path / "adapter" / FINISHED).write_text("{}")
        else:
            (self.tmp_path / "merged").mkdir(exist_ok=True)
            (self.tmp_path / "merged" / "config.json").write_text("{}")
            (self.tmp_path / "merged" / "model.safetensors").write_bytes(b"")
        return 0


def test_trains_then_merges(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    cli = FakeCli(tmp_path)
    result = run(train, export, out=io.StringIO(), runner=cli)
    assert cli.calls == ["train", "export"]
    assert (result.trained, result.exported) == ("trained", "exported")


def test_a_finished_run_is_neither_retrained_nor_reexported(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))
    cli, out = FakeCli(tmp_path), io.StringIO()
    result = run(train, export, out=out, runner=cli)
    assert cli.calls == [] and (result.trained, result.exported) == ("already trained", "already exported")
    assert "training already finished" in out.getvalue()


def test_force_retrains_and_reexports(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))
    cli = FakeCli(tmp_path)
    assert run(train, export, force=True, out=io.StringIO(), runner=cli).trained == "trained"
    assert cli.calls == ["train", "export"]


def test_an_interrupted_run_resumes_from_its_last_checkpoint(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    for step in (50, 100, 150):
        (tmp_path / "adapter" / f"checkpoint-{step}").mkdir(parents=True)
    cli, out = FakeCli(tmp_path), io.StringIO()
    result = run(train, export, out=out, runner=cli)
    assert result.trained == "resumed from checkpoint-150" and cli.calls == ["train", "export"]
    assert "resuming from checkpoint-150" in out.getvalue()


@pytest.mark.parametrize("step", ["train", "export"])
def test_a_failing_step_raises_with_its_exit_status(tmp_path: Path, step: str) -> None:
    train, export = write_configs(tmp_path)
    with pytest.raises(StepFailed, match=f"llamafactory-cli {step} exited with status 3; full log: ") as err:
        run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path, fail=step))
    assert err.value.status == 3


def test_a_step_that_exits_zero_without_output_still_fails(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    with pytest.raises(StepFailed, match="train exited with status 1"):
        run(train, export, out=io.StringIO(), runner=lambda cmd, log, env, out: 0)


def test_export_must_merge_the_trained_adapter(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    export.write_text(yaml.safe_dump({"adapter_name_or_path": "/elsewhere", "export_dir": str(tmp_path / "m")}))
    with pytest.raises(ValueError, match="adapter_name_or_path '/elsewhere' is not the training output_dir"):
        run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))


def test_stream_copies_output_to_the_console_and_the_log(tmp_path: Path) -> None:
    out, log = io.StringIO(), tmp_path / "adapter" / LOG_NAME
    code = "import sys; print('step 1/1'); print('boom', file=sys.stderr); sys.exit(4)"
    assert stream([sys.executable, "-c", code], log, {}, out) == 4
    assert out.getvalue() == "step 1/1\nboom\n"
    assert log.read_text().endswith("step 1/1\nboom\n")


def test_cli_run_returns_the_failing_exit_status(tmp_path: Path, monkeypatch, capsys) -> None:
    train, export = write_configs(tmp_path)
    (tmp_path / "cli").write_text("#!/bin/sh\necho 'no GPU here' >&2\nexit 7\n")
    (tmp_path / "cli").chmod(0o755)
    monkeypatch.setattr("training.run.llamafactory_cli", lambda: str(tmp_path / "cli"))
    assert run_cli("run", str(train), "--export", str(export)) == 7
    captured = capsys.readouterr()
    assert "no GPU here" in captured.out
    assert "error: llamafactory-cli train exited with status 7" in captured.err


def _layout(tmp_path: Path, **layout) -> None:
    base = {"gpus": 1, "nodes": 1, "cpu": False, "deepspeed": "auto", "per_device": None, "global_batch": 128}
    (tmp_path / "layout.json").write_text(json.dumps({**base, **layout}))


def test_a_config_rendered_for_other_gpus_is_refused_before_training(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    _layout(tmp_path, gpus=8)
    cli = FakeCli(tmp_path)
    with pytest.raises(ValueError, match=r"rendered for 8 GPU\(s\) \(global batch 128\) but 4 are visible"):
        run(train, export, out=io.StringIO(), runner=cli, gpus_seen=lambda: 4)
    assert cli.calls == []
    assert run(train, export, out=io.StringIO(), runner=cli, gpus_seen=lambda: 8).trained == "trained"


def test_a_multi_node_config_points_to_the_per_node_launch_commands(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    _layout(tmp_path, gpus=8, nodes=2)
    with pytest.raises(ValueError, match="is for 2 nodes: run the launch command printed by"):
        run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path), gpus_seen=lambda: 8)


def test_a_cpu_config_runs_without_gpus(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    _layout(tmp_path, gpus=8, cpu=True)
    assert run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path), gpus_seen=lambda: 0).trained == "trained"


def test_a_deepspeed_config_without_deepspeed_installed_says_what_to_do(tmp_path: Path, monkeypatch) -> None:
    import importlib.util

    train, export = write_configs(tmp_path)
    train.write_text(yaml.safe_dump({"output_dir": str(tmp_path / "adapter"), "deepspeed": "/x/ds_z2.json"}))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="deepspeed is not installed: pip install deepspeed, or render with"):
        run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))
