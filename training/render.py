"""Render a shipped LLaMA-Factory config for a dataset, a folder and a GPU layout, keeping the global batch fixed.

Shipped: `configs/<model>_lora_sft.yaml` (training) and `configs/<model>_merge.yaml` (LoRA merge/export) per
model, and `configs/deepspeed/ds_z{2,3}.json`. Rendering writes OUT/train.yaml and OUT/export.yaml whose
folders are OUT/adapter (LoRA output, checkpoints) and OUT/merged (the merged model), plus OUT/layout.json (the
layout, the model key, its base model and the lmms-eval backend that evaluates it), with
per_device_train_batch_size x gradient_accumulation_steps x GPUs x nodes == the global batch (128: paper).
DeepSpeed is opt-in (`z2`/`z3`; deepspeed is not a dependency): the default is plain DDP, enough for LoRA.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import importlib.util
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hvcu_tasks.data import jsonio
from hvcu_tasks.data.files import make_folder, write_atomic
from training.prepare import dataset_files

CONFIGS = Path(__file__).resolve().parent / "configs"
DEEPSPEED = {"z2": CONFIGS / "deepspeed" / "ds_z2.json", "z3": CONFIGS / "deepspeed" / "ds_z3.json"}
GLOBAL_BATCH = 128  # paper, Appendix C
LAYOUT_FILE = "layout.json"  # beside train.yaml: the layout it was rendered for, checked by `hvcu train run`
DEEPSPEED_CHOICES = ("none", "z2", "z3")
# lmms-eval backend (the `inner` of hvcu_context) that evaluates a model key's base and merged models, by key prefix.
EVAL_BACKENDS = {"qwen3_vl_": "qwen3_vl", "llava_next_": "llava_hf"}
# Keys the renderer owns: setting them with --set would break the global batch or the folder layout.
OWNED = {
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "dataset",
    "dataset_dir",
    "output_dir",
    "deepspeed",
    "adapter_name_or_path",
    "export_dir",
}
# Settings that only make sense on GPUs: dropped by --cpu (parallel preprocessing is dropped too: 2-core CI).
CPU_DROPPED = ("deepspeed", "bf16", "fp16", "preprocessing_num_workers", "dataloader_num_workers")
KEYS_FOLDER = "llamafactory-keys-v1"
"""Subfolder of the toolkit's cache that remembers LLaMA-Factory's argument names (importing them takes seconds)."""

log = logging.getLogger(__name__)


def shipped_models() -> list[str]:
    """Return the model keys that have a shipped training config (e.g. `qwen3_vl_4b`)."""
    return sorted(p.name.removesuffix("_lora_sft.yaml") for p in CONFIGS.glob("*_lora_sft.yaml"))


def shipped_paths(model: str) -> tuple[Path, Path]:
    """Return the shipped (training, merge) YAML paths of a model key."""
    if model not in shipped_models():
        raise ValueError(f"unknown model {model!r}; shipped configs: {shipped_models()}")
    return CONFIGS / f"{model}_lora_sft.yaml", CONFIGS / f"{model}_merge.yaml"


def eval_backend(model: str) -> str:
    """Return the lmms-eval backend of a shipped model key (qwen3_vl for qwen3_vl_*, llava_hf for llava_next_*)."""
    for prefix, backend in EVAL_BACKENDS.items():
        if model.startswith(prefix):
            return backend
    raise ValueError(f"no lmms-eval backend known for model {model!r}; known prefixes: {sorted(EVAL_BACKENDS)}")


def deepspeed_installed() -> bool:
    """Whether the deepspeed package can be imported here."""
    return importlib.util.find_spec("deepspeed") is not None


def load_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping; anything else is an error naming the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such config file")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: must be a YAML mapping of LLaMA-Factory arguments")
    return data


def _import_keys() -> frozenset[str]:
    """Return every argument name LLaMA-Factory's train/export parsers accept, read from its argument classes."""
    from llamafactory.hparams import (
        DataArguments,
        FinetuningArguments,
        GeneratingArguments,
        ModelArguments,
        TrainingArguments,
    )

    classes = (ModelArguments, DataArguments, TrainingArguments, FinetuningArguments, GeneratingArguments)
    return frozenset(f.name for c in classes for f in dataclasses.fields(c))


def keys_tag() -> str:
    """Return what LLaMA-Factory's argument names depend on: its and transformers' versions, its hparams sources."""
    from importlib.metadata import PackageNotFoundError, version

    spec = importlib.util.find_spec("llamafactory")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("--set is checked against LLaMA-Factory's arguments: install it (pip install '.[train]')")
    stamp = hashlib.sha256()
    for folder in spec.submodule_search_locations:
        for source in sorted((Path(folder) / "hparams").glob("*.py")):
            st = source.stat()
            stamp.update(f"{source}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    try:
        versions = f"llamafactory{version('llamafactory')}-transformers{version('transformers')}"
    except PackageNotFoundError as exc:
        raise ValueError(f"--set needs LLaMA-Factory and transformers installed: {exc}") from exc
    return f"{versions}-{stamp.hexdigest()[:16]}"


def _cached_keys(path: Path) -> frozenset[str] | None:
    """Return the argument names remembered in `path`, or None when it is missing or not a list of names."""
    try:
        data = jsonio.read_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(data, list) or not data or not all(isinstance(k, str) for k in data):
        return None
    return frozenset(data)


@functools.cache
def known_keys(fresh: bool = False) -> frozenset[str]:
    """Return every argument name LLaMA-Factory's train/export parsers accept (`fresh`: read LLaMA-Factory again).

    Importing LLaMA-Factory's argument classes loads torch and transformers (seconds), so the names are remembered
    in the toolkit's cache ($HVCU_CACHE_DIR), one file per `keys_tag()`: another version reads them again. A name
    the remembered list lacks is looked up in LLaMA-Factory itself before it is refused (`_check_overrides`).
    """
    from hvcu_tasks.data.validate import cache_root
    from hvcu_tasks.settings import CACHE_DIR_ENV

    root = cache_root()
    path = None if root is None else root / KEYS_FOLDER / f"{keys_tag()}.json"
    cached = None if path is None or fresh else _cached_keys(path)
    if cached is not None:
        return cached
    keys = _import_keys()
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_atomic(path, json.dumps(sorted(keys)) + "\n")
        except OSError as exc:
            log.warning(
                "cannot write %s (%s): LLaMA-Factory's arguments are read again next time (set %s to a writable "
                "folder, or to 'off')",
                path,
                exc.strerror or exc,
                CACHE_DIR_ENV,
            )
    return keys


def parse_set(items: list[str]) -> dict[str, Any]:
    """Parse `KEY=VALUE` overrides (VALUE read as YAML: numbers, booleans, lists)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set {item!r}: expected KEY=VALUE")
        out[key.strip()] = yaml.safe_load(value) if value.strip() else None
    return out


def split_batch(global_batch: int, world: int, per_device_max: int, fixed: bool = False) -> tuple[int, int]:
    """Return (per-device batch, gradient accumulation) whose product times `world` devices is `global_batch`.

    The per-device batch is the largest value <= per_device_max that divides global_batch / world, or exactly
    per_device_max when `fixed`.
    """
    if world < 1 or per_device_max < 1 or global_batch < 1:
        raise ValueError("GPUs, nodes, per-device batch and global batch must all be >= 1")
    if global_batch % world:
        raise ValueError(
            f"global batch {global_batch} cannot be split over {world} device(s): {global_batch} is not a multiple "
            f"of {world}; use a device count that divides it (1, 2, 4, 8, 16, ...)"
        )
    per_world = global_batch // world
    if fixed:
        if per_world % per_device_max:
            raise ValueError(
                f"--per-device {per_device_max} does not divide {per_world} samples per device and step "
                f"(global batch {global_batch} / {world} device(s)); choose a divisor of {per_world}"
            )
        return per_device_max, per_world // per_device_max
    per_device = max(d for d in range(1, min(per_device_max, per_world) + 1) if per_world % d == 0)
    return per_device, per_world // per_device


@dataclass(frozen=True)
class Layout:
    """Where and on what a rendered config runs."""

    gpus: int = 1
    nodes: int = 1
    cpu: bool = False
    deepspeed: str = "none"  # none (plain DDP), or z2 / z3: the shipped ZeRO configs (needs deepspeed installed)
    per_device: int | None = None
    global_batch: int = GLOBAL_BATCH

    @property
    def world(self) -> int:
        """Return the number of training processes (1 on CPU)."""
        return 1 if self.cpu else self.gpus * self.nodes


@dataclass(frozen=True)
class LayoutRecord:
    """What OUT/layout.json holds: the layout a config was rendered for, its model key, base model and backend."""

    model: str
    base_model: str
    eval_backend: str
    layout: Layout

    def to_json(self) -> str:
        """Serialise as one flat, byte-stable JSON object."""
        flat = {"model": self.model, "base_model": self.base_model, "eval_backend": self.eval_backend}
        return json.dumps({**flat, **dataclasses.asdict(self.layout)}, indent=2) + "\n"


def _layout_problems(data: dict[str, Any]) -> list[str]:
    """Return what is wrong with a decoded layout.json object (keys and value types)."""
    expected = {"model", "base_model", "eval_backend", *(f.name for f in dataclasses.fields(Layout))}
    problems = []
    if set(data) - expected:
        problems.append(f"unknown key(s) {sorted(set(data) - expected)}")
    if expected - set(data):
        problems.append(f"missing key(s) {sorted(expected - set(data))}")
    for key in ("model", "base_model", "eval_backend"):
        if key in data and (not isinstance(data[key], str) or not data[key]):
            problems.append(f"{key}: must be a non-empty string, got {data[key]!r}")
    for key in ("gpus", "nodes", "global_batch", "per_device"):
        value = data.get(key)
        if key in data and not (value is None and key == "per_device"):
            if type(value) is not int or value < 1:
                problems.append(f"{key}: must be an integer >= 1, got {value!r}")
    if "cpu" in data and not isinstance(data["cpu"], bool):
        problems.append(f"cpu: must be true or false, got {data['cpu']!r}")
    if "deepspeed" in data and data["deepspeed"] not in DEEPSPEED_CHOICES:
        problems.append(f"deepspeed: must be one of {list(DEEPSPEED_CHOICES)}, got {data['deepspeed']!r}")
    return problems


def read_layout(path: Path) -> LayoutRecord:
    """Read and validate a layout.json written by `hvcu train config`; a malformed one is an error naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no layout.json (render the configs with `hvcu train config`)")
    try:
        data = jsonio.read_json(path)
    except jsonio.JsonReadError as exc:
        raise ValueError(
            f"{path}: not a JSON file ({exc.reason}); render the configs again with `hvcu train config`"
        ) from exc
    problems = ["must be a JSON object"] if not isinstance(data, dict) else _layout_problems(data)
    if problems:
        raise ValueError(f"{path}: {'; '.join(problems)}; render the configs again with `hvcu train config`")
    layout = Layout(**{f.name: data[f.name] for f in dataclasses.fields(Layout)})
    return LayoutRecord(data["model"], data["base_model"], data["eval_backend"], layout)


@dataclass(frozen=True)
class Request:
    """What to render: a shipped model, a prepared dataset, an output folder, a layout and overrides."""

    model: str
    dataset: str
    dataset_dir: Path
    out: Path
    layout: Layout = Layout()
    model_path: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)


def _check_overrides(overrides: dict[str, Any]) -> None:
    """Reject overrides of owned keys and keys LLaMA-Factory does not know."""
    owned = sorted(set(overrides) & OWNED)
    if owned:
        raise ValueError(f"--set cannot change {owned}: use the matching option of `hvcu train config`")
    if not overrides:
        return  # nothing to check: LLaMA-Factory's argument names are not needed
    keys = known_keys()
    unknown = sorted(set(overrides) - keys)
    if unknown:  # the remembered names may be stale (LLaMA-Factory changed in place): ask it once before refusing
        keys = known_keys(fresh=True)
        unknown = sorted(set(overrides) - keys)
    if unknown:
        raise ValueError(f"--set: unknown LLaMA-Factory argument(s) {unknown}{did_you_mean(unknown, keys - OWNED)}")


def did_you_mean(unknown: list[str], valid: frozenset[str] | set[str]) -> str:
    """Return `; did you mean X?` naming the closest valid key of each unknown one ('' when none is close)."""
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, sorted(valid), n=1)
        if close:
            hints.append(f"{close[0]}" + (f" (for {key})" if len(unknown) > 1 else ""))
    return f"; did you mean {', '.join(hints)}?" if hints else ""


def _deepspeed_file(layout: Layout) -> Path | None:
    """Return the DeepSpeed JSON to use, or None (CPU, or `none`)."""
    if layout.deepspeed not in DEEPSPEED_CHOICES:
        raise ValueError(f"--deepspeed must be one of {list(DEEPSPEED_CHOICES)}; got {layout.deepspeed!r}")
    if layout.cpu or layout.deepspeed == "none":
        return None
    return DEEPSPEED[layout.deepspeed]


def check_dataset(dataset: str, dataset_dir: Path) -> None:
    """Check that every comma-separated dataset name has an entry with a data file in dataset_dir/dataset_info.json."""
    dataset_files(dataset, dataset_dir)


def render_train(shipped: dict[str, Any], req: Request) -> dict[str, Any]:
    """Return the training config: shipped values, then the request's dataset, folders, batch split, layout."""
    _check_overrides(req.overrides)
    cfg = dict(shipped)
    per_device, accum = split_batch(
        req.layout.global_batch,
        req.layout.world,
        req.layout.per_device or int(shipped["per_device_train_batch_size"]),
        fixed=req.layout.per_device is not None,
    )
    ds = _deepspeed_file(req.layout)
    cfg.pop("deepspeed", None)
    if req.model_path:
        cfg["model_name_or_path"] = req.model_path
    cfg.update(
        dataset=req.dataset,
        dataset_dir=str(Path(req.dataset_dir).resolve()),
        output_dir=str((Path(req.out) / "adapter").resolve()),
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=accum,
    )
    if ds is not None:
        cfg["deepspeed"] = str(ds)
    if req.layout.cpu:
        for key in CPU_DROPPED:
            cfg.pop(key, None)
        cfg["use_cpu"] = True
    cfg.update(req.overrides)
    return cfg


def render_export(shipped: dict[str, Any], train: dict[str, Any], out: Path) -> dict[str, Any]:
    """Return the merge config for a rendered training config: same base model and template, OUT/merged."""
    cfg = dict(shipped)
    cfg.update(
        model_name_or_path=train["model_name_or_path"],
        adapter_name_or_path=train["output_dir"],
        template=train["template"],
        export_dir=str((Path(out) / "merged").resolve()),
    )
    for key in ("image_max_pixels", "trust_remote_code"):
        if key in train:
            cfg[key] = train[key]
    return cfg


def global_batch_of(cfg: dict[str, Any], world: int) -> int:
    """Return per-device batch x gradient accumulation x world size of a training config."""
    return int(cfg["per_device_train_batch_size"]) * int(cfg.get("gradient_accumulation_steps", 1)) * world


def launch_commands(
    train_yaml: Path, export_yaml: Path, layout: Layout, master_addr: str | None = None, master_port: int = 29500
) -> list[str]:
    """Return the shell commands that train (one per node) and then merge, as LLaMA-Factory expects them."""
    train_cmd = f"llamafactory-cli train {train_yaml}"
    commands = []
    if layout.cpu:
        commands.append(f"CUDA_VISIBLE_DEVICES= {train_cmd}")  # else LLaMA-Factory starts torchrun on a GPU machine
    elif layout.nodes == 1:
        devices = ",".join(str(i) for i in range(layout.gpus))
        force = "FORCE_TORCHRUN=1 " if layout.gpus == 1 and layout.deepspeed in DEEPSPEED else ""
        commands.append(f"{force}CUDA_VISIBLE_DEVICES={devices} {train_cmd}")
    else:
        addr = master_addr or "<address of node 0>"
        for rank in range(layout.nodes):
            commands.append(
                f"FORCE_TORCHRUN=1 NNODES={layout.nodes} NODE_RANK={rank} NPROC_PER_NODE={layout.gpus} "
                f"MASTER_ADDR={addr} MASTER_PORT={master_port} {train_cmd}   # on node {rank}"
            )
    commands.append(f"llamafactory-cli export {export_yaml}")
    return commands


def _header(req: Request, cfg: dict[str, Any] | None, kind: str) -> str:
    """Return the comment heading a rendered YAML: what it came from and the batch arithmetic."""
    lines = [f"# Rendered by `hvcu train config` from training/configs/{req.model}_{kind}.yaml."]
    if cfg is not None:
        lay = req.layout
        where = "CPU (1 process)" if lay.cpu else f"{lay.gpus} GPU(s) x {lay.nodes} node(s)"
        lines.append(
            f"# Global batch: {cfg['per_device_train_batch_size']} per device x "
            f"{cfg['gradient_accumulation_steps']} accumulation x {lay.world} process(es) = "
            f"{global_batch_of(cfg, lay.world)} on {where}."
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Rendered:
    """The written configs and how to launch them."""

    train_yaml: Path
    export_yaml: Path
    train: dict[str, Any]
    export: dict[str, Any]
    commands: list[str]
    record: LayoutRecord
    warnings: list[str]


def write_configs(req: Request, master_addr: str | None = None, master_port: int = 29500) -> Rendered:
    """Render the model's shipped training and merge configs for the request and write them to OUT."""
    train_path, merge_path = shipped_paths(req.model)
    check_dataset(req.dataset, req.dataset_dir)
    train = render_train(load_yaml(train_path), req)
    export = render_export(load_yaml(merge_path), train, req.out)
    out = make_folder(req.out)
    train_yaml, export_yaml = out / "train.yaml", out / "export.yaml"
    record = LayoutRecord(req.model, str(train["model_name_or_path"]), eval_backend(req.model), req.layout)
    write_atomic(out / LAYOUT_FILE, record.to_json())
    dump = functools.partial(yaml.safe_dump, sort_keys=False, allow_unicode=True)
    write_atomic(train_yaml, _header(req, train, "lora_sft") + dump(train))
    write_atomic(export_yaml, _header(req, None, "merge") + dump(export))
    commands = launch_commands(train_yaml, export_yaml, req.layout, master_addr, master_port)
    warnings = []
    if "deepspeed" in train and not deepspeed_installed():
        warnings.append(
            f"{train_yaml} uses DeepSpeed ({req.layout.deepspeed}) but deepspeed is not installed here: "
            "pip install deepspeed before training, or render with --deepspeed none (plain DDP, enough for LoRA)"
        )
    return Rendered(train_yaml, export_yaml, train, export, commands, record, warnings)
