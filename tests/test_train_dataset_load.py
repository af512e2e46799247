"""Prepared datasets load through LLaMA-Factory's own loader with each shipped template and a tiny local model."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_train_configs import on_this_cpu
from test_train_prepare import LEVEL_TEXT, write_chains

from hvcu_tasks.dev.tiny_model import build_llava_next, build_qwen3_vl
from training.prepare import prepare
from training.render import CONFIGS, load_yaml


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("chains")
    prepare([write_chains(root, n_images=3, per_image=2)], root / "data", ["full-data", "l3-only"], image_root=root)
    return root / "data"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny")
    return {"qwen3_vl_4b": build_qwen3_vl(root / "qwen3_vl"), "llava_next_7b": build_llava_next(root / "llava_next")}


def load_through_llamafactory(model: str, model_path: Path, data_dir: Path, dataset: str, out: Path):
    """Parse the shipped config (CPU view) and run LLaMA-Factory's tokenizer, template and dataset loader."""
    from llamafactory.data import get_dataset, get_template_and_fix_tokenizer
    from llamafactory.hparams import get_train_args
    from llamafactory.model import load_tokenizer

    cfg = on_this_cpu(load_yaml(CONFIGS / f"{model}_lora_sft.yaml"))
    for key in ("preprocessing_num_workers", "dataloader_num_workers"):
        cfg.pop(key)
    cfg.update(
        model_name_or_path=str(model_path),
        dataset=dataset,
        dataset_dir=str(data_dir),
        output_dir=str(out),
        overwrite_cache=True,
    )
    model_args, data_args, training_args, _, _ = get_train_args(cfg)
    modules = load_tokenizer(model_args)
    template = get_template_and_fix_tokenizer(modules["tokenizer"], data_args)
    rows = get_dataset(template, model_args, data_args, training_args, "sft", **modules)["train_dataset"]
    return rows, modules["tokenizer"]


def trained_text(row: dict, tokenizer) -> str:
    return tokenizer.decode([t for t in row["labels"] if t != -100])


@pytest.mark.parametrize(("model", "image_token"), [("qwen3_vl_4b", "<|image_pad|>"), ("llava_next_7b", "<image>")])
def test_full_data_loads_and_trains_on_all_three_answers(
    model: str, image_token: str, tiny: dict[str, Path], data_dir: Path, tmp_path: Path
) -> None:
    rows, tokenizer = load_through_llamafactory(model, tiny[model], data_dir, "hvcu_mcts_full_data", tmp_path)
    assert len(rows) == 6
    text = trained_text(rows[0], tokenizer)
    answers = [f"{a} (0.0)." for _q, a in LEVEL_TEXT]
    positions = [text.index(a) for a in answers]
    assert positions == sorted(positions)
    prompt = tokenizer.decode(rows[0]["input_ids"])
    assert prompt.count(image_token) >= 1 and "Why is it open indoors? (0.0)" in prompt
    assert "What object is in the centre? (0.0)" not in text  # questions are not trained on


@pytest.mark.parametrize("model", ["qwen3_vl_4b", "llava_next_7b"])
def test_l3_only_loads_with_one_trained_answer(
    model: str, tiny: dict[str, Path], data_dir: Path, tmp_path: Path
) -> None:
    rows, tokenizer = load_through_llamafactory(model, tiny[model], data_dir, "hvcu_mcts_l3_only", tmp_path)
    assert len(rows) == 6
    text = trained_text(rows[1], tokenizer)
    assert "The product protects you (0.1)." in text and "A red umbrella" not in text
