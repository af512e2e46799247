"""Fingerprints of what a training run and a merge depend on, so a finished run is never reused for another config.

A training fingerprint is the SHA-256 of the rendered train.yaml without bookkeeping keys (folders, logging,
checkpointing, workers, DeepSpeed stage) plus the SHA-256 of every dataset file it names; `hvcu train run` stores it
as `hvcu_fingerprint.json` in the adapter folder when training starts. A merge fingerprint covers the training
fingerprint and the export config (without its folders) and is stored in the merged model's folder after the export.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvcu_tasks.data import jsonio
from hvcu_tasks.data.files import write_atomic
from training.prepare import dataset_files

FINGERPRINT_FILE = "hvcu_fingerprint.json"
# Keys that change neither the data, the model nor the optimisation (the ZeRO stage only shards the same math).
TRAIN_IGNORED = frozenset(
    {
        "output_dir",
        "dataset_dir",
        "logging_steps",
        "save_steps",
        "save_total_limit",
        "plot_loss",
        "report_to",
        "preprocessing_num_workers",
        "dataloader_num_workers",
        "overwrite_cache",
        "ddp_timeout",
        "deepspeed",
    }
)
EXPORT_IGNORED = frozenset({"export_dir", "adapter_name_or_path"})  # the adapter is covered by its fingerprint


@dataclass(frozen=True)
class Fingerprint:
    """A digest, the config file it was computed from and the content it covers (to say what changed)."""

    digest: str
    config: str
    content: dict[str, Any]

    def to_json(self) -> str:
        """Serialise byte-stably."""
        return json.dumps({"fingerprint": self.digest, "config": self.config, "content": self.content}, indent=2) + "\n"


def _canonical(obj: Any) -> str:
    """Return canonical JSON (sorted keys, no whitespace) for hashing."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def file_sha256(path: Path) -> str:
    """Return the SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def make(content: dict[str, Any], config: Path) -> Fingerprint:
    """Return the fingerprint of some content computed from a config file."""
    digest = hashlib.sha256(_canonical(content).encode("utf-8")).hexdigest()
    return Fingerprint(digest, str(Path(config).resolve()), jsonio.loads(_canonical(content)))


def train_fingerprint(train: dict[str, Any], train_config: Path) -> Fingerprint:
    """Return the fingerprint of a rendered training config: its settings and the bytes of its dataset files."""
    if "dataset" not in train or "dataset_dir" not in train:
        raise ValueError(f"{train_config}: needs dataset and dataset_dir")
    files = dataset_files(str(train["dataset"]), Path(train["dataset_dir"]))
    content = {
        "train": {k: v for k, v in train.items() if k not in TRAIN_IGNORED},
        "dataset_files": {name: file_sha256(path) for name, path in files.items()},
    }
    return make(content, train_config)


def export_fingerprint(trained: Fingerprint, export: dict[str, Any], export_config: Path) -> Fingerprint:
    """Return the fingerprint of a merged model: the adapter's training fingerprint and the export settings."""
    content = {"adapter": trained.digest, "export": {k: v for k, v in export.items() if k not in EXPORT_IGNORED}}
    return make(content, export_config)


def read(folder: Path) -> Fingerprint | None:
    """Return the fingerprint stored in a folder, or None; a malformed file is an error naming it."""
    path = Path(folder) / FINGERPRINT_FILE
    if not path.is_file():
        return None
    try:
        data = jsonio.read_json(path)
        return Fingerprint(str(data["fingerprint"]), str(data["config"]), dict(data["content"]))
    except jsonio.JsonReadError as exc:
        raise ValueError(f"{exc}; use --force or another --out") from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: malformed fingerprint ({exc!r}); use --force or another --out") from exc


def write(folder: Path, fingerprint: Fingerprint) -> None:
    """Store a fingerprint in a folder (created if needed)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    write_atomic(Path(folder) / FINGERPRINT_FILE, fingerprint.to_json())


def differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """Return `key: old -> new` for every value that differs between two fingerprint contents."""
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, "<unset>"), new.get(key, "<unset>")
        if isinstance(a, dict) and isinstance(b, dict):
            out += differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return out
