"""`hvcu train run`: train then merge through llamafactory-cli, resume, skip finished work, fail loudly."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import yaml
from test_train_prepare import run_cli

from training.fingerprint import FINGERPRINT_FILE
from training.run import FINISHED, LOG_NAME, StepFailed, is_exported, run, stream

TRAIN = {"model_name_or_path": "Qwen/Qwen3-VL-4B-Instruct", "template": "qwen3_vl_nothink", "learning_rate": 2e-5}


def write_configs(tmp_path: Path, **changes) -> tuple[Path, Path]:
    """Write a dataset (dataset_info.json + file) and a train/export config pair for it; `changes` edit train.yaml."""
    data = tmp_path / "data"
    if not data.exists():
        data.mkdir()
        (data / "dataset_info.json").write_text(json.dumps({"chains": {"file_name": "chains.json"}}))
        (data / "chains.json").write_text('[{"messages": [], "images": []}]')
    train, export = tmp_path / "train.yaml", tmp_path / "export.yaml"
    cfg = {**TRAIN, "dataset": "chains", "dataset_dir": str(data), "output_dir": str(tmp_path / "adapter"), **changes}
    train.write_text(yaml.safe_dump(cfg))
    export.write_text(
        yaml.safe_dump(
            {
                "model_name_or_path": TRAIN["model_name_or_path"],
                "adapter_name_or_path": str(tmp_path / "adapter"),
                "export_dir": str(tmp_path / "merged"),
                "export_size": 5,
            }
        )
    )
    return train, export


class FakeCli:
    """Stands in for llamafactory-cli: records the steps and writes what a successful step leaves behind."""

    def __init__(self, tmp_path: Path, fail: str | None = None, status: int = 3):
        self.tmp_path, self.fail, self.status, self.calls, self.envs = tmp_path, fail, status, [], {}

    def __call__(self, cmd: list[str], log: Path, env: dict, out) -> int:
        step = cmd[1]
        self.calls.append(step)
        self.envs[step] = env
        if step == self.fail:
            return self.status
        if step == "train":
            (self.tmp_path / "adapter").mkdir(exist_ok=True)
            (self.tmp_path / "adapter" / FINISHED).write_text("{}")
        else:
            (self.tmp_path / "merged").mkdir(exist_ok=True)
            for name in ("config.json", "tokenizer_config.json", "processor_config.json"):
                (self.tmp_path / "merged" / name).write_text("{}")
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


def interrupt(train: Path, export: Path, tmp_path: Path, steps: tuple[int, ...] = (50, 100, 150)) -> None:
    """Start a run that dies after saving checkpoints (as a killed `hvcu train run` leaves it)."""
    with pytest.raises(StepFailed):
        run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path, fail="train"))
    for step in steps:
        (tmp_path / "adapter" / f"checkpoint-{step}").mkdir(parents=True)


def test_an_interrupted_run_resumes_from_its_last_checkpoint(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    interrupt(train, export, tmp_path)
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
    names = {"model": "qwen3_vl_4b", "base_model": "Qwen/Qwen3-VL-4B-Instruct", "eval_backend": "qwen3_vl"}
    base = {**names, "gpus": 1, "nodes": 1, "cpu": False, "deepspeed": "none", "per_device": None, "global_batch": 128}
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
    with pytest.raises(ValueError, match="is for 2 nodes: run the per-node launch commands printed by .* then its "
                       "`llamafactory-cli export` command"):  # fmt: skip
        run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path), gpus_seen=lambda: 8)


def test_a_cpu_config_runs_without_gpus(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    _layout(tmp_path, gpus=8, cpu=True)
    assert run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path), gpus_seen=lambda: 0).trained == "trained"


def test_a_deepspeed_config_without_deepspeed_installed_says_what_to_do(tmp_path: Path, monkeypatch) -> None:
    train, export = write_configs(tmp_path, deepspeed="/x/ds_z2.json")
    monkeypatch.setattr("training.run.deepspeed_installed", lambda: False)
    with pytest.raises(ValueError, match="deepspeed is not installed: pip install deepspeed, or render with"):
        run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))


def test_a_finished_run_of_another_config_is_refused_naming_both_configs(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))
    moved = tmp_path / "other.yaml"
    write_configs(tmp_path, learning_rate=1e-4)
    train.rename(moved)
    cli = FakeCli(tmp_path)
    with pytest.raises(ValueError) as err:
        run(moved, export, out=io.StringIO(), runner=cli)
    message = str(err.value)
    assert f"{tmp_path / 'adapter'} holds a finished training run from another config" in message
    assert f"started from {train.resolve()}" in message and f"but {moved.resolve()} has fingerprint" in message
    assert "train.learning_rate: 2e-05 -> 0.0001" in message
    assert "use --force to start again" in message and "another --out" in message
    assert cli.calls == []


def test_a_changed_dataset_file_makes_a_finished_run_stale(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))
    (tmp_path / "data" / "chains.json").write_text('[{"messages": [], "images": ["other.png"]}]')
    with pytest.raises(
        ValueError, match=r"from another config.*dataset_files\.chains: '[0-9a-f]{64}' -> '[0-9a-f]{64}'"
    ):
        run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))


def test_bookkeeping_keys_do_not_make_a_run_stale(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))
    write_configs(tmp_path, logging_steps=1, save_steps=5, report_to="none", dataloader_num_workers=0)
    assert run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path)).trained == "already trained"


def test_an_interrupted_run_of_another_config_is_not_resumed(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    interrupt(train, export, tmp_path)
    write_configs(tmp_path, learning_rate=1e-4)
    with pytest.raises(ValueError, match="holds an interrupted training run from another config"):
        run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))


def test_force_retrains_a_stale_run_under_the_new_fingerprint(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))
    write_configs(tmp_path, learning_rate=1e-4)
    assert run(train, export, force=True, out=io.StringIO(), runner=FakeCli(tmp_path)).trained == "trained"
    stored = json.loads((tmp_path / "adapter" / FINGERPRINT_FILE).read_text())
    assert stored["content"]["train"]["learning_rate"] == 1e-4
    assert run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path)).trained == "already trained"


def test_a_run_without_a_fingerprint_is_not_reused(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / FINISHED).write_text("{}")
    with pytest.raises(ValueError, match=f"without {FINGERPRINT_FILE} .* cannot be matched to {train.resolve()}"):
        run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))


def test_the_merged_model_stores_its_fingerprint_and_is_exported_again_for_another_export_config(
    tmp_path: Path,
) -> None:
    train, export = write_configs(tmp_path)
    run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))
    merged = json.loads((tmp_path / "merged" / FINGERPRINT_FILE).read_text())
    adapter = json.loads((tmp_path / "adapter" / FINGERPRINT_FILE).read_text())
    assert merged["content"] == {"adapter": adapter["fingerprint"], "export": {
        "model_name_or_path": "Qwen/Qwen3-VL-4B-Instruct", "export_size": 5}}  # fmt: skip
    (tmp_path / "merged" / "model-00002-of-00002.safetensors").write_bytes(b"stale shard")
    cfg = yaml.safe_load(export.read_text())
    export.write_text(yaml.safe_dump({**cfg, "export_size": 2}))
    cli, out = FakeCli(tmp_path), io.StringIO()
    result = run(train, export, out=out, runner=cli)
    assert (result.trained, result.exported, cli.calls) == ("already trained", "exported", ["export"])
    assert "(another config); exporting again" in out.getvalue()
    assert not (tmp_path / "merged" / "model-00002-of-00002.safetensors").exists()
    assert json.loads((tmp_path / "merged" / FINGERPRINT_FILE).read_text())["content"]["export"]["export_size"] == 2


def test_export_refuses_to_overwrite_a_folder_that_is_not_a_merged_model(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    (tmp_path / "merged").mkdir()
    (tmp_path / "merged" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="export_dir holds files that are not a merged model"):
        run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))
    assert (tmp_path / "merged" / "notes.txt").exists()


def test_a_deepspeed_config_is_launched_through_torchrun(tmp_path: Path, monkeypatch) -> None:
    train, export = write_configs(tmp_path, deepspeed="/x/ds_z2.json")
    monkeypatch.setattr("training.run.deepspeed_installed", lambda: True)
    cli = FakeCli(tmp_path)
    run(train, export, out=io.StringIO(), runner=cli)
    assert cli.envs["train"]["FORCE_TORCHRUN"] == "1"


def test_a_plain_config_leaves_the_launcher_alone(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("FORCE_TORCHRUN", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    train, export = write_configs(tmp_path)
    cli = FakeCli(tmp_path)
    run(train, export, out=io.StringIO(), runner=cli)
    assert "FORCE_TORCHRUN" not in cli.envs["train"] and cli.envs["train"]["CUDA_VISIBLE_DEVICES"] == "0"


def test_a_cpu_config_hides_the_gpus_from_the_launcher(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    train, export = write_configs(tmp_path)
    _layout(tmp_path, cpu=True)
    cli = FakeCli(tmp_path)
    run(train, export, out=io.StringIO(), runner=cli, gpus_seen=lambda: 2)
    assert cli.envs["train"]["CUDA_VISIBLE_DEVICES"] == ""


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not a JSON file"),
        ('["gpus", 1]', "must be a JSON object"),
        ('{"gpus": 1}', "missing key(s) ["),
    ],
)
def test_a_malformed_layout_json_is_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    train, export = write_configs(tmp_path)
    (tmp_path / "layout.json").write_text(content)
    with pytest.raises(ValueError) as err:
        run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))
    assert str(err.value).startswith(f"{tmp_path / 'layout.json'}: ") and message in str(err.value)
    assert "render the configs again with `hvcu train config`" in str(err.value)


def test_a_layout_json_with_wrong_types_is_refused(tmp_path: Path) -> None:
    train, export = write_configs(tmp_path)
    _layout(tmp_path, gpus="8", cpu="no", deepspeed="auto")
    with pytest.raises(ValueError, match=r"gpus: must be an integer >= 1, got '8'; cpu: must be true or false, got "
                       r"'no'; deepspeed: must be one of \['none', 'z2', 'z3'\], got 'auto'"):  # fmt: skip
        run(train, export, out=io.StringIO(), runner=FakeCli(tmp_path))


def merged_folder(tmp_path: Path, *names: str, index: dict | None = None) -> Path:
    d = tmp_path / "merged"
    d.mkdir()
    for name in names:
        (d / name).write_text("{}")
    if index is not None:
        (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": index}))
    return d


COMPLETE = ("config.json", "tokenizer_config.json", "processor_config.json")


def test_a_sharded_export_needs_every_shard_its_index_names(tmp_path: Path) -> None:
    index = {"a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"}
    d = merged_folder(tmp_path, *COMPLETE, "model-00001-of-00002.safetensors", index=index)
    assert not is_exported(d)
    (d / "model-00002-of-00002.safetensors").write_text("")
    assert is_exported(d)


@pytest.mark.parametrize(
    ("names", "complete"),
    [
        ((*COMPLETE, "model.safetensors"), True),
        (("config.json", "tokenizer_config.json", "preprocessor_config.json", "model.safetensors"), True),
        (("config.json", "tokenizer_config.json", "model.safetensors"), False),  # no processor files
        (("config.json", "processor_config.json", "model.safetensors"), False),  # no tokenizer files
        ((*COMPLETE, "adapter_model.safetensors"), False),  # not the merged weights
        (COMPLETE, False),
    ],
)
def test_an_export_needs_weights_tokenizer_and_processor(tmp_path: Path, names: tuple, complete: bool) -> None:
    assert is_exported(merged_folder(tmp_path, *names)) is complete
