"""Run `llamafactory-cli train` and then `export` for rendered configs: streamed logs, loud failures, resume.

Resume: LLaMA-Factory itself resumes from the last `checkpoint-*` in output_dir (when resume_from_checkpoint is
unset and output_dir exists). A finished run (output_dir/train_results.json) is not trained again, and its merged
model is not exported again, unless `force` is given. Reuse is keyed on fingerprints (training/fingerprint.py): a
finished or interrupted run whose stored fingerprint differs from the current config is refused, and a merged model
from another export config is exported again.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from hvcu_tasks.data import jsonio
from training import fingerprint
from training.fingerprint import FINGERPRINT_FILE, Fingerprint
from training.render import LAYOUT_FILE, LayoutRecord, deepspeed_installed, load_yaml, read_layout

FINISHED = "train_results.json"  # written by LLaMA-Factory after the last step and the final save
LOG_NAME = "hvcu_train.log"
INDEX = "model.safetensors.index.json"
TOKENIZER_FILES = ("tokenizer_config.json",)
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json")  # transformers < 5 / >= 5: either one


class StepFailed(RuntimeError):
    """Raised when a llamafactory-cli step exits non-zero; carries the exit status."""

    def __init__(self, step: str, status: int, log: Path):
        self.status = status
        super().__init__(f"llamafactory-cli {step} exited with status {status}; full log: {log}")


def llamafactory_cli() -> str:
    """Return the llamafactory-cli of this environment (next to the running Python), else the one on PATH."""
    local = Path(sys.executable).parent / "llamafactory-cli"
    if local.exists():
        return str(local)
    found = shutil.which("llamafactory-cli")
    if found is None:
        raise FileNotFoundError("llamafactory-cli not found: install the training extra (pip install '.[train]')")
    return found


def last_checkpoint(output_dir: Path) -> Path | None:
    """Return the checkpoint-N folder with the largest N, or None."""
    steps = [
        (int(p.name.split("-", 1)[1]), p)
        for p in Path(output_dir).glob("checkpoint-*")
        if p.is_dir() and p.name.split("-", 1)[1].isdigit()
    ]
    return max(steps)[1] if steps else None


def is_trained(output_dir: Path) -> bool:
    """Whether LLaMA-Factory finished training into output_dir."""
    return (Path(output_dir) / FINISHED).is_file()


def looks_like_run(output_dir: Path) -> bool:
    """Whether a folder holds LLaMA-Factory training output (so --force may delete it)."""
    d = Path(output_dir)
    marks = (FINISHED, "trainer_state.json", "adapter_config.json", LOG_NAME)
    return d.is_dir() and (any((d / m).exists() for m in marks) or last_checkpoint(d) is not None)


def is_exported(export_dir: Path) -> bool:
    """Whether export_dir holds a complete merged model: config, every weight shard, tokenizer and processor files."""
    d = Path(export_dir)
    if not (d / "config.json").is_file() or not all((d / f).is_file() for f in TOKENIZER_FILES):
        return False
    if not any((d / f).is_file() for f in PROCESSOR_FILES):
        return False
    if not (d / INDEX).is_file():
        return (d / "model.safetensors").is_file()
    try:
        shards = set(jsonio.read_json(d / INDEX)["weight_map"].values())
    except (OSError, jsonio.JsonReadError, KeyError, TypeError, AttributeError):
        return False
    return bool(shards) and all((d / str(shard)).is_file() for shard in shards)


def stream(cmd: list[str], log: Path, env: dict[str, str], out: TextIO) -> int:
    """Run a command, copying its merged stdout/stderr line by line to `out` and appending it to `log`."""
    env = {**env, "PYTHONUNBUFFERED": "1"}  # Python children write lines as they happen, in order
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        with subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, errors="replace", bufsize=1
        ) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                fh.write(line)
            return proc.wait()


def visible_gpus() -> int:
    """Return the number of CUDA devices this process can see."""
    import torch

    return torch.cuda.device_count()


DEV_DIR = Path("/dev")
"""Where the GPU device nodes are (nvidia0, nvidia1, ... and ROCm's kfd)."""
VISIBLE_DEVICE = re.compile(r"\d+|(?:GPU|MIG)-[0-9A-Za-z/-]+")
"""One entry of a CUDA_VISIBLE_DEVICES list that names a device: an index or a GPU/MIG UUID."""


def visible_devices_allow_a_gpu(value: str | None) -> bool:
    """Whether CUDA_VISIBLE_DEVICES (None: unset) lets a process use a device: a comma list of ids or UUIDs.

    Empty, -1, `NoDevFiles` (Slurm without a GPU allocation) or anything else that is not such a list hides every
    device; CUDA stops at the first invalid entry, so a list must start with a valid one.
    """
    if value is None:
        return True
    first = value.split(",")[0].strip()
    return bool(VISIBLE_DEVICE.fullmatch(first))


def machine_has_gpu() -> bool:
    """Whether this machine shows a GPU this process may use, told without importing torch (it takes seconds).

    torch's own answer when torch is loaded already; else none when CUDA_VISIBLE_DEVICES hides every device
    (`visible_devices_allow_a_gpu`); else an NVIDIA device node (/dev/nvidia0, ...) or AMD's ROCm device (/dev/kfd).
    /proc/driver/nvidia/gpus alone does not count: CPU-only containers on a GPU host see it without the device.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        return bool(torch.cuda.is_available())
    if not visible_devices_allow_a_gpu(os.environ.get("CUDA_VISIBLE_DEVICES")):
        return False
    return any(DEV_DIR.glob("nvidia[0-9]*")) or (DEV_DIR / "kfd").exists()


def layout_of(train_config: Path) -> LayoutRecord | None:
    """Return the layout.json rendered beside a training config (validated), or None when there is none."""
    path = Path(train_config).parent / LAYOUT_FILE
    return read_layout(path) if path.exists() else None


def check_single_node(train_config: Path, record: LayoutRecord | None) -> None:
    """Refuse a multi-node config: each node needs the launch command that `hvcu train config` printed for it."""
    if record is not None and not record.layout.cpu and record.layout.nodes > 1:
        raise ValueError(
            f"{train_config} is for {record.layout.nodes} nodes: run the per-node launch commands printed by "
            "`hvcu train config` on every node, then its `llamafactory-cli export` command"
        )


def check_gpus(train_config: Path, record: LayoutRecord | None, gpus_seen: Callable[[], int] = visible_gpus) -> None:
    """Refuse a config rendered for another GPU count (LLaMA-Factory uses every visible GPU: the batch would change)."""
    if record is None or record.layout.cpu:
        return
    seen = gpus_seen()
    if seen != record.layout.gpus:
        raise ValueError(
            f"{train_config} was rendered for {record.layout.gpus} GPU(s) (global batch {record.layout.global_batch}) "
            f"but {seen} are visible; render again with --gpus {seen} or set CUDA_VISIBLE_DEVICES"
        )


def check_deepspeed(train_config: Path, train: dict) -> None:
    """Refuse a DeepSpeed config when DeepSpeed is not installed (LLaMA-Factory would fail after loading)."""
    if train.get("deepspeed") and not deepspeed_installed():
        raise ValueError(
            f"{train_config} uses DeepSpeed ({train['deepspeed']}) but deepspeed is not installed: "
            "pip install deepspeed, or render with --deepspeed none (plain DDP)"
        )


def train_env(base: dict[str, str], train: dict[str, Any], record: LayoutRecord | None) -> dict[str, str]:
    """Return the environment for `llamafactory-cli train`: torchrun forced for DeepSpeed, no GPUs for a CPU run."""
    env = dict(base)
    if train.get("deepspeed"):
        env["FORCE_TORCHRUN"] = "1"  # LLaMA-Factory refuses DeepSpeed outside torchrun, even on one GPU
    if record is not None and record.layout.cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""  # else its launcher starts torchrun over the GPUs it sees
    return env


def check_same(folder: Path, current: Fingerprint, what: str) -> None:
    """Refuse to reuse a folder whose stored fingerprint is missing or differs from the current config's."""
    stored = fingerprint.read(folder)
    fix = f"use --force to start again (deletes {folder}) or render the configs with another --out"
    if stored is None:
        raise ValueError(
            f"{folder} holds {what} without {FINGERPRINT_FILE} (not started by `hvcu train run`), so it cannot be "
            f"matched to {current.config}; {fix}"
        )
    if stored.digest != current.digest:
        changed = "; ".join(fingerprint.differences(stored.content, current.content)) or "content differs"
        raise ValueError(
            f"{folder} holds {what} from another config: it was started from {stored.config} "
            f"(fingerprint {stored.digest[:12]}), but {current.config} has fingerprint {current.digest[:12]} "
            f"({changed}); {fix}"
        )


def clear_export_dir(export_dir: Path, base_model: str) -> None:
    """Empty an export folder before merging into it (stale shards would survive); refuse a folder not ours."""
    d = Path(export_dir)
    if not d.exists() or not any(d.iterdir()):
        return
    if d.resolve() == Path(base_model).resolve():
        raise ValueError(f"export_dir {d} is the base model's folder; merge into another folder")
    if not (d / FINGERPRINT_FILE).is_file() and not is_exported(d):
        raise ValueError(f"{d}: export_dir holds files that are not a merged model; remove them or use another --out")
    shutil.rmtree(d)


@dataclass(frozen=True)
class RunResult:
    """What `run` did: each step's outcome and the folders."""

    trained: str  # "trained", "resumed from checkpoint-N" or "already trained"
    exported: str | None  # "exported", "already exported" or None (no export config)
    output_dir: Path
    export_dir: Path | None


def _train(
    train_config: Path,
    train: dict[str, Any],
    current: Fingerprint,
    record: LayoutRecord | None,
    io: tuple[Callable[[list[str], Path, dict[str, str], TextIO], int], Callable[[], int], TextIO],
) -> str:
    """Train, resume or skip (fingerprints checked); return what happened."""
    runner, gpus_seen, out = io
    output_dir = Path(train["output_dir"])
    if is_trained(output_dir):
        check_same(output_dir, current, "a finished training run")
        print(f"{output_dir}: training already finished ({FINISHED}); skipping (--force retrains)", file=out)
        return "already trained"
    ckpt = last_checkpoint(output_dir)
    if ckpt is not None or (output_dir / FINGERPRINT_FILE).exists():
        check_same(output_dir, current, "an interrupted training run")
    check_gpus(train_config, record, gpus_seen)
    check_deepspeed(train_config, train)
    fingerprint.write(output_dir, current)
    if ckpt:
        print(f"{output_dir}: resuming from {ckpt.name}", file=out)
    log = output_dir / LOG_NAME
    env = train_env(dict(os.environ), train, record)
    status = runner([llamafactory_cli(), "train", str(Path(train_config).resolve())], log, env, out)
    if status != 0 or not is_trained(output_dir):
        raise StepFailed("train", status or 1, log)
    return f"resumed from {ckpt.name}" if ckpt else "trained"


def run(
    train_config: Path,
    export_config: Path | None = None,
    force: bool = False,
    out: TextIO | None = None,
    runner: Callable[[list[str], Path, dict[str, str], TextIO], int] = stream,
    gpus_seen: Callable[[], int] = visible_gpus,
) -> RunResult:
    """Train (or resume, or skip when finished), then merge with the export config; raise StepFailed on failure."""
    out = out or sys.stdout
    train = load_yaml(train_config)
    if "output_dir" not in train:
        raise ValueError(f"{train_config}: no output_dir")
    output_dir = Path(train["output_dir"])
    export = load_yaml(export_config) if export_config is not None else None
    if export is not None:
        if "export_dir" not in export:
            raise ValueError(f"{export_config}: no export_dir")
        adapter = export.get("adapter_name_or_path")
        if adapter is None or Path(adapter).resolve() != output_dir.resolve():
            raise ValueError(
                f"{export_config}: adapter_name_or_path {adapter!r} is not the training output_dir {output_dir}"
            )
    record = layout_of(train_config)
    check_single_node(train_config, record)
    current = fingerprint.train_fingerprint(train, train_config)
    if force and looks_like_run(output_dir):
        shutil.rmtree(output_dir)
    trained = _train(train_config, train, current, record, (runner, gpus_seen, out))
    if export is None or export_config is None:
        return RunResult(trained, None, output_dir, None)
    export_dir = Path(export["export_dir"])
    merged = fingerprint.export_fingerprint(current, export, export_config)
    stored = fingerprint.read(export_dir) if is_exported(export_dir) else None
    if trained == "already trained" and not force and stored is not None:
        if stored.digest == merged.digest:
            print(f"{export_dir}: merged model already there; skipping export", file=out)
            return RunResult(trained, "already exported", output_dir, export_dir)
        print(f"{export_dir}: merged model came from {stored.config} (another config); exporting again", file=out)
    clear_export_dir(export_dir, str(export.get("model_name_or_path", "")))
    log = output_dir / LOG_NAME
    status = runner([llamafactory_cli(), "export", str(Path(export_config).resolve())], log, dict(os.environ), out)
    if status != 0 or not is_exported(export_dir):
        raise StepFailed("export", status or 1, log)
    fingerprint.write(export_dir, merged)
    return RunResult(trained, "exported", output_dir, export_dir)
