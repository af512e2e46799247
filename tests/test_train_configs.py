"""Shipped and rendered LLaMA-Factory configs: parsed by LLaMA-Factory itself, global batch 128, launch commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_train_prepare import run_cli, write_chains

from training.prepare import prepare
from training.render import (
    CONFIGS,
    DEEPSPEED,
    Layout,
    Request,
    global_batch_of,
    known_keys,
    launch_commands,
    load_yaml,
    read_layout,
    shipped_models,
    split_batch,
    write_configs,
)

MODELS = {"qwen3_vl_4b": "qwen3_vl_nothink", "qwen3_vl_8b": "qwen3_vl_nothink", "llava_next_7b": "llava_next"}
LAYOUTS = [(1, 1), (8, 1), (16, 1), (8, 2)]  # (GPUs per node, nodes)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("chains")
    prepare([write_chains(root)], root / "data", ["full-data", "l3-only"], image_root=root)
    return root / "data"


def on_this_cpu(cfg: dict) -> dict:
    """What a GPU config becomes for parsing here: no DeepSpeed (not installed), no bf16, use_cpu."""
    return {**{k: v for k, v in cfg.items() if k not in ("deepspeed", "bf16")}, "use_cpu": True}


def parse_train(cfg: dict):
    from llamafactory.hparams import get_train_args

    return get_train_args(cfg)


def test_every_model_ships_a_training_and_a_merge_config() -> None:
    assert shipped_models() == sorted(MODELS)
    for model, template in MODELS.items():
        train = load_yaml(CONFIGS / f"{model}_lora_sft.yaml")
        merge = load_yaml(CONFIGS / f"{model}_merge.yaml")
        assert train["template"] == merge["template"] == template
        assert train["model_name_or_path"] == merge["model_name_or_path"]
        assert set(train) | set(merge) <= known_keys(), model


def test_the_4b_config_is_the_papers_recipe() -> None:
    cfg = load_yaml(CONFIGS / "qwen3_vl_4b_lora_sft.yaml")
    assert cfg["model_name_or_path"] == "Qwen/Qwen3-VL-4B-Instruct"
    assert (cfg["finetuning_type"], cfg["lora_rank"], cfg["lora_alpha"]) == ("lora", 32, 64)
    assert (cfg["num_train_epochs"], cfg["learning_rate"], cfg["optim"]) == (3.0, 2e-5, "adamw_torch")
    assert global_batch_of(cfg, world=1) == 128


def test_llava_next_has_the_longer_cutoff() -> None:
    assert load_yaml(CONFIGS / "llava_next_7b_lora_sft.yaml")["cutoff_len"] >= 4096
    assert load_yaml(CONFIGS / "llava_next_7b_lora_sft.yaml")["model_name_or_path"].startswith("llava-hf/llava-v1.6")


@pytest.mark.parametrize("model", sorted(MODELS))
def test_shipped_training_config_parses_with_llamafactory(model: str, data_dir: Path, tmp_path: Path) -> None:
    cfg = load_yaml(CONFIGS / f"{model}_lora_sft.yaml")
    cfg.update(dataset_dir=str(data_dir), dataset="hvcu_mcts_full_data", output_dir=str(tmp_path / "out"))
    model_args, data_args, training_args, finetuning_args, _ = parse_train(on_this_cpu(cfg))
    assert data_args.template == MODELS[model] and finetuning_args.lora_rank == 32
    assert training_args.learning_rate == 2e-5 and training_args.num_train_epochs == 3.0


@pytest.mark.parametrize("model", sorted(MODELS))
def test_shipped_merge_config_parses_with_llamafactory(model: str) -> None:
    from llamafactory.hparams import get_infer_args

    model_args, data_args, finetuning_args, _ = get_infer_args(load_yaml(CONFIGS / f"{model}_merge.yaml"))
    assert model_args.export_dir and model_args.adapter_name_or_path and data_args.template == MODELS[model]


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize(("gpus", "nodes"), LAYOUTS)
def test_rendered_configs_parse_and_keep_the_global_batch(
    model: str, gpus: int, nodes: int, data_dir: Path, tmp_path: Path
) -> None:
    from llamafactory.hparams import get_infer_args

    req = Request(model, "hvcu_mcts_l3_only", data_dir, tmp_path / "run", Layout(gpus=gpus, nodes=nodes))
    rendered = write_configs(req)
    train = yaml.safe_load(rendered.train_yaml.read_text())
    assert global_batch_of(train, gpus * nodes) == 128
    assert train["output_dir"] == str((tmp_path / "run" / "adapter").resolve())
    assert train["dataset_dir"] == str(data_dir.resolve()) and train["dataset"] == "hvcu_mcts_l3_only"
    assert "deepspeed" not in train  # opt-in: deepspeed is not a dependency
    model_args, data_args, training_args, _, _ = parse_train(on_this_cpu(train))
    assert training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps * gpus * nodes == 128
    export = yaml.safe_load(rendered.export_yaml.read_text())
    assert export["adapter_name_or_path"] == train["output_dir"]
    assert export["export_dir"] == str((tmp_path / "run" / "merged").resolve())
    assert get_infer_args(export)[1].template == MODELS[model]


def test_cpu_rendering_for_tests_uses_the_cpu_and_drops_gpu_settings(data_dir: Path, tmp_path: Path) -> None:
    req = Request(
        "qwen3_vl_4b",
        "hvcu_mcts_full_data",
        data_dir,
        tmp_path / "run",
        Layout(gpus=8, cpu=True),
        model_path="/models/tiny",
        overrides={"max_steps": 1},
    )
    train = write_configs(req).train
    assert train["use_cpu"] is True and train["max_steps"] == 1
    assert not {"deepspeed", "bf16", "preprocessing_num_workers", "dataloader_num_workers"} & set(train)
    assert train["model_name_or_path"] == "/models/tiny"
    assert global_batch_of(train, world=1) == 128
    parse_train(train)


@pytest.mark.parametrize(
    ("world", "per_device_max", "expected"),
    [
        (1, 4, (4, 32)),
        (8, 4, (4, 4)),
        (16, 4, (4, 2)),
        (32, 4, (4, 1)),
        (64, 4, (2, 1)),
        (128, 2, (1, 1)),
        (8, 3, (2, 8)),
    ],
)
def test_split_batch_keeps_128(world: int, per_device_max: int, expected: tuple[int, int]) -> None:
    assert split_batch(128, world, per_device_max) == expected


def test_split_batch_refuses_what_cannot_make_128() -> None:
    with pytest.raises(ValueError, match="128 is not a multiple of 3"):
        split_batch(128, 3, 4)
    with pytest.raises(ValueError, match="128 is not a multiple of 256"):
        split_batch(128, 256, 1)
    with pytest.raises(ValueError, match="--per-device 3 does not divide 16"):
        split_batch(128, 8, 3, fixed=True)


def test_launch_commands_for_one_gpu_eight_gpus_and_two_nodes() -> None:
    t, e = Path("run/train.yaml"), Path("run/export.yaml")
    assert launch_commands(t, e, Layout(gpus=1)) == [
        "CUDA_VISIBLE_DEVICES=0 llamafactory-cli train run/train.yaml",
        "llamafactory-cli export run/export.yaml",
    ]
    assert launch_commands(t, e, Layout(gpus=8))[0] == (
        "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 llamafactory-cli train run/train.yaml"
    )
    assert launch_commands(t, e, Layout(gpus=1, deepspeed="z3"))[0].startswith(
        "FORCE_TORCHRUN=1 CUDA_VISIBLE_DEVICES=0 "
    )
    multi = launch_commands(t, e, Layout(gpus=8, nodes=2), master_addr="10.0.0.1")
    assert multi[:2] == [
        "FORCE_TORCHRUN=1 NNODES=2 NODE_RANK=0 NPROC_PER_NODE=8 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 "
        "llamafactory-cli train run/train.yaml   # on node 0",
        "FORCE_TORCHRUN=1 NNODES=2 NODE_RANK=1 NPROC_PER_NODE=8 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 "
        "llamafactory-cli train run/train.yaml   # on node 1",
    ]
    assert multi[2] == "llamafactory-cli export run/export.yaml"


@pytest.mark.parametrize("stage", ["z2", "z3"])
def test_deepspeed_jsons_leave_batch_and_precision_to_the_trainer(stage: str) -> None:
    ds = json.loads(DEEPSPEED[stage].read_text())
    for key in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"):
        assert ds[key] == "auto", key
    assert ds["bf16"]["enabled"] == "auto" and ds["fp16"]["enabled"] == "auto"
    assert ds["zero_optimization"]["stage"] == int(stage[1])


def test_explicit_z3_is_used_even_on_one_gpu(data_dir: Path, tmp_path: Path) -> None:
    req = Request("qwen3_vl_8b", "hvcu_mcts_full_data", data_dir, tmp_path, Layout(gpus=1, deepspeed="z3"))
    assert Path(write_configs(req).train["deepspeed"]) == DEEPSPEED["z3"]


def test_set_refuses_unknown_and_owned_keys(data_dir: Path, tmp_path: Path) -> None:
    base = dict(model="qwen3_vl_4b", dataset="hvcu_mcts_full_data", dataset_dir=data_dir, out=tmp_path)
    with pytest.raises(ValueError, match=r"unknown LLaMA-Factory argument\(s\) \['lora_rnak'\]"):
        write_configs(Request(**base, overrides={"lora_rnak": 8}))
    with pytest.raises(ValueError, match="cannot change \\['gradient_accumulation_steps'\\]"):
        write_configs(Request(**base, overrides={"gradient_accumulation_steps": 1}))


def test_a_dataset_missing_from_dataset_info_is_an_error(data_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no entry for dataset\(s\) \['hvcu_mcts_full_hierarchy'\]"):
        write_configs(Request("qwen3_vl_4b", "hvcu_mcts_full_hierarchy", data_dir, tmp_path))


def test_cli_config_prints_the_batch_split_and_launch_commands(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code = run_cli(
        "config", "--model", "qwen3_vl_4b", "--dataset", "hvcu_mcts_full_data", "--dataset-dir", str(data_dir),
        "--out", str(tmp_path / "run"), "--gpus", "8", "--set", "save_steps=10",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "global batch 128 = 4 per device x 4 accumulation x 8 process(es)\n" in out
    assert "base model Qwen/Qwen3-VL-4B-Instruct; evaluate with lmms-eval hvcu_context inner=qwen3_vl" in out
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 llamafactory-cli train" in out
    assert f"hvcu train run {tmp_path / 'run' / 'train.yaml'} --export {tmp_path / 'run' / 'export.yaml'}" in out
    assert yaml.safe_load((tmp_path / "run" / "train.yaml").read_text())["save_steps"] == 10
    layout = json.loads((tmp_path / "run" / "layout.json").read_text())
    assert (layout["gpus"], layout["nodes"], layout["global_batch"], layout["deepspeed"]) == (8, 1, 128, "none")


def test_cli_config_for_several_nodes_prints_only_the_per_node_commands(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code = run_cli(
        "config", "--model", "qwen3_vl_4b", "--dataset", "hvcu_mcts_full_data", "--dataset-dir", str(data_dir),
        "--out", str(tmp_path / "run"), "--gpus", "8", "--nodes", "2",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "global batch 128 = 4 per device x 2 accumulation x 16 process(es)" in out
    assert "launch (each train command on its node, then the merge on one of them):" in out
    assert "NODE_RANK=1 NPROC_PER_NODE=8 MASTER_ADDR=<address of node 0>" in out
    assert f"llamafactory-cli export {tmp_path / 'run' / 'export.yaml'}" in out
    assert "hvcu train run" not in out


@pytest.mark.parametrize(
    ("model", "base", "backend"),
    [
        ("qwen3_vl_4b", "Qwen/Qwen3-VL-4B-Instruct", "qwen3_vl"),
        ("qwen3_vl_8b", "Qwen/Qwen3-VL-8B-Instruct", "qwen3_vl"),
        ("llava_next_7b", "llava-hf/llava-v1.6-vicuna-7b-hf", "llava_hf"),
    ],
)
def test_layout_json_records_the_model_its_base_and_eval_backend(
    model: str, base: str, backend: str, data_dir: Path, tmp_path: Path
) -> None:
    write_configs(Request(model, "hvcu_mcts_full_data", data_dir, tmp_path))
    layout = json.loads((tmp_path / "layout.json").read_text())
    assert (layout["model"], layout["base_model"], layout["eval_backend"]) == (model, base, backend)
    assert read_layout(tmp_path / "layout.json").layout == Layout()


def test_layout_json_records_a_model_path_given_instead_of_the_shipped_base(data_dir: Path, tmp_path: Path) -> None:
    write_configs(Request("llava_next_7b", "hvcu_mcts_full_data", data_dir, tmp_path, model_path="/models/tiny"))
    record = read_layout(tmp_path / "layout.json")
    assert (record.base_model, record.eval_backend) == ("/models/tiny", "llava_hf")


def test_deepspeed_is_opt_in(data_dir: Path, tmp_path: Path) -> None:
    assert Layout().deepspeed == "none"
    for model in MODELS:
        assert "deepspeed" not in load_yaml(CONFIGS / f"{model}_lora_sft.yaml"), model
    assert run_cli("config", "--model", "qwen3_vl_4b", "--dataset", "hvcu_mcts_full_data", "--dataset-dir",
                   str(data_dir), "--out", str(tmp_path), "--gpus", "8") == 0  # fmt: skip
    assert "deepspeed" not in yaml.safe_load((tmp_path / "train.yaml").read_text())
    assert json.loads((tmp_path / "layout.json").read_text())["deepspeed"] == "none"


@pytest.mark.parametrize("stage", ["z2", "z3"])
def test_config_warns_when_deepspeed_is_chosen_but_not_installed(
    stage: str, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("training.render.deepspeed_installed", lambda: False)
    assert run_cli("config", "--model", "qwen3_vl_4b", "--dataset", "hvcu_mcts_full_data", "--dataset-dir",
                   str(data_dir), "--out", str(tmp_path), "--gpus", "8", "--deepspeed", stage) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert f"warning: {tmp_path / 'train.yaml'} uses DeepSpeed ({stage}) but deepspeed is not installed here" in err
    assert "pip install deepspeed before training, or render with --deepspeed none" in err
    assert Path(yaml.safe_load((tmp_path / "train.yaml").read_text())["deepspeed"]) == DEEPSPEED[stage]


def test_config_does_not_warn_when_deepspeed_is_installed(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("training.render.deepspeed_installed", lambda: True)
    assert run_cli("config", "--model", "qwen3_vl_4b", "--dataset", "hvcu_mcts_full_data", "--dataset-dir",
                   str(data_dir), "--out", str(tmp_path), "--deepspeed", "z2") == 0  # fmt: skip
    assert "warning" not in capsys.readouterr().err


def test_the_cpu_launch_command_hides_the_gpus() -> None:
    commands = launch_commands(Path("run/train.yaml"), Path("run/export.yaml"), Layout(gpus=8, cpu=True))
    assert commands[0] == "CUDA_VISIBLE_DEVICES= llamafactory-cli train run/train.yaml"


def test_a_broken_dataset_info_is_an_error_naming_its_path(tmp_path: Path) -> None:
    (tmp_path / "dataset_info.json").write_text('{"hvcu": ')
    with pytest.raises(ValueError, match=f"^{tmp_path / 'dataset_info.json'}: not a JSON file"):
        write_configs(Request("qwen3_vl_4b", "hvcu", tmp_path, tmp_path / "run"))


@pytest.mark.parametrize("entry", [{"formatting": "sharegpt"}, {"file_name": ""}, "hvcu.json"])
def test_a_dataset_info_entry_without_file_name_is_an_error(entry: object, tmp_path: Path) -> None:
    (tmp_path / "dataset_info.json").write_text(json.dumps({"hvcu": entry}))
    with pytest.raises(ValueError, match=r"dataset_info.json: entry 'hvcu': file_name must name the data file"):
        write_configs(Request("qwen3_vl_4b", "hvcu", tmp_path, tmp_path / "run"))


def test_a_dataset_info_entry_whose_file_is_missing_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "dataset_info.json").write_text(json.dumps({"hvcu": {"file_name": "hvcu.json"}}))
    with pytest.raises(FileNotFoundError, match=f"entry 'hvcu': no data file {tmp_path / 'hvcu.json'}"):
        write_configs(Request("qwen3_vl_4b", "hvcu", tmp_path, tmp_path / "run"))


def test_info_reads_the_base_model_from_train_yaml_and_the_backend_from_layout_json(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    write_configs(Request("llava_next_7b", "hvcu_mcts_full_data", data_dir, tmp_path))
    train = yaml.safe_load((tmp_path / "train.yaml").read_text())
    (tmp_path / "train.yaml").write_text(yaml.safe_dump({**train, "model_name_or_path": "/edited/by/hand"}))
    assert run_cli("info", str(tmp_path), "--field", "base_model") == 0
    assert capsys.readouterr().out == "/edited/by/hand\n"
    assert run_cli("info", str(tmp_path), "--field", "eval_backend") == 0
    assert capsys.readouterr().out == "llava_hf\n"
    assert run_cli("info", str(tmp_path)) == 0
    assert f"merged_dir: {(tmp_path / 'merged').resolve()}\n" in capsys.readouterr().out


def test_info_field_merged_fingerprint_is_the_one_stored_by_the_merge(data_dir: Path, tmp_path: Path) -> None:
    from training.fingerprint import FINGERPRINT_FILE
    from training.info import info_field

    write_configs(Request("qwen3_vl_4b", "hvcu_mcts_full_data", data_dir, tmp_path))
    with pytest.raises(FileNotFoundError, match="no merged_fingerprint: the merge has not finished"):
        info_field(tmp_path, "merged_fingerprint")
    (tmp_path / "merged").mkdir()
    (tmp_path / "merged" / FINGERPRINT_FILE).write_text(
        json.dumps({"fingerprint": "ab" * 32, "config": str(tmp_path / "export.yaml"), "content": {}})
    )
    assert info_field(tmp_path, "merged_fingerprint") == "ab" * 32
