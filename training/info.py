"""What a rendered config folder (OUT of `hvcu train config`) says about its run, for scripts such as `make`."""

from __future__ import annotations

from pathlib import Path

from training import fingerprint
from training.render import LAYOUT_FILE, load_yaml, read_layout

FIELDS = (
    "model",
    "base_model",
    "eval_backend",
    "template",
    "adapter_dir",
    "merged_dir",
    "adapter_fingerprint",
    "merged_fingerprint",
)


def train_info(folder: Path) -> dict[str, str]:
    """Return the fields of a rendered folder; the base model is read from its train.yaml, fingerprints when stored."""
    folder = Path(folder)
    record = read_layout(folder / LAYOUT_FILE)
    train = load_yaml(folder / "train.yaml")
    export = load_yaml(folder / "export.yaml")
    for key, cfg, name in (("model_name_or_path", train, "train.yaml"), ("output_dir", train, "train.yaml")):
        if key not in cfg:
            raise ValueError(f"{folder / name}: no {key}")
    if "export_dir" not in export:
        raise ValueError(f"{folder / 'export.yaml'}: no export_dir")
    info = {
        "model": record.model,
        "base_model": str(train["model_name_or_path"]),
        "eval_backend": record.eval_backend,
        "template": str(train.get("template", "")),
        "adapter_dir": str(train["output_dir"]),
        "merged_dir": str(export["export_dir"]),
    }
    for field, key in (("adapter_fingerprint", "adapter_dir"), ("merged_fingerprint", "merged_dir")):
        stored = fingerprint.read(Path(info[key]))
        if stored is not None:
            info[field] = stored.digest
    return info


def info_field(folder: Path, field: str) -> str:
    """Return one field of a rendered folder; a fingerprint not stored yet is an error saying which step is missing."""
    if field not in FIELDS:
        raise ValueError(f"unknown field {field!r}; choose from {list(FIELDS)}")
    info = train_info(folder)
    if field not in info:
        step = "training" if field == "adapter_fingerprint" else "the merge"
        raise FileNotFoundError(
            f"{folder}: no {field}: {step} has not finished (run `hvcu train run {Path(folder) / 'train.yaml'} "
            f"--export {Path(folder) / 'export.yaml'}`)"
        )
    return info[field]
