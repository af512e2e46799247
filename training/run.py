"""Run `llamafactory-cli train` and then `export` for rendered configs: streamed logs, loud failures, resume.

Resume: LLaMA-Factory itself resumes from the last `checkpoint-*` in output_dir (when resume_from_checkpoint is
unset and output_dir exists). A finished run (output_dir/train_results.json) is not trained again, and its
merged model is not exported again when export_dir already holds one, unless `force` is given.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from training.render import LAYOUT_FILE, load_yaml

FINISHED = "train_results.json"  # written by LLaMA-Factory after the last step and the final save
LOG_NAME = "hvcu_train.log"


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
    """Whether export_dir holds a merged model (config and weights)."""
    d = Path(export_dir)
    return (d / "config.json").is_file() and any(d.glob("*.safetensors"))


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


def check_layout(train_config: Path, gpus_seen: Callable[[], int] = visible_gpus) -> None:
    """Refuse a config whose rendered layout (layout.json beside it) this machine would not reproduce.

    LLaMA-Factory uses every visible GPU, so a different count silently changes the global batch; a multi-node
    config needs the per-node launch commands that `hvcu train config` prints.
    """
    path = Path(train_config).parent / LAYOUT_FILE
    if not path.is_file():
        return
    layout = json.loads(path.read_text(encoding="utf-8"))
    if layout.get("cpu"):
        return
    if layout["nodes"] > 1:
        raise ValueError(
            f"{train_config} is for {layout['nodes']} nodes: run the launch command printed by `hvcu train config` "
            "on every node, then `hvcu train run` again (it skips the finished training and merges)"
        )
    seen = gpus_seen()
    if seen != layout["gpus"]:
        raise ValueError(
            f"{train_config} was rendered for {layout['gpus']} GPU(s) (global batch {layout['global_batch']}) but "
            f"{seen} are visible; render again with --gpus {seen} or set CUDA_VISIBLE_DEVICES"
        )


def check_deepspeed(train_config: Path, train: dict) -> None:
    """Refuse a DeepSpeed config when DeepSpeed is not installed (LLaMA-Factory would fail after loading)."""
    import importlib.util

    if train.get("deepspeed") and importlib.util.find_spec("deepspeed") is None:
        raise ValueError(
            f"{train_config} uses DeepSpeed ({train['deepspeed']}) but deepspeed is not installed: "
            "pip install deepspeed, or render with --deepspeed none (plain DDP)"
        )


@dataclass(frozen=True)
class RunResult:
    """What `run` did: each step's outcome and the folders."""

    trained: str  # "trained", "resumed from checkpoint-N" or "already trained"
    exported: str | None  # "exported", "already exported" or None (no export config)
    output_dir: Path
    export_dir: Path | None


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
    log = output_dir / LOG_NAME
    env = dict(os.environ)
    cli = llamafactory_cli()
    if force and looks_like_run(output_dir):
        shutil.rmtree(output_dir)
    if is_trained(output_dir):
        trained = "already trained"
        print(f"{output_dir}: training already finished ({FINISHED}); skipping (--force retrains)", file=out)
    else:
        check_layout(train_config, gpus_seen)
        check_deepspeed(train_config, train)
        ckpt = last_checkpoint(output_dir)
        trained = f"resumed from {ckpt.name}" if ckpt else "trained"
        if ckpt:
            print(f"{output_dir}: resuming from {ckpt.name}", file=out)
        status = runner([cli, "train", str(Path(train_config).resolve())], log, env, out)
        if status != 0 or not is_trained(output_dir):
            raise StepFailed("train", status or 1, log)
    if export is None:
        return RunResult(trained, None, output_dir, None)
    export_dir = Path(export["export_dir"])
    if is_exported(export_dir) and trained == "already trained" and not force:
        print(f"{export_dir}: merged model already there; skipping export", file=out)
        return RunResult(trained, "already exported", output_dir, export_dir)
    status = runner([cli, "export", str(Path(export_config).resolve())], log, env, out)
    if status != 0 or not is_exported(export_dir):
        raise StepFailed("export", status or 1, log)
    return RunResult(trained, "exported", output_dir, export_dir)
