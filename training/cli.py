"""`hvcu train prepare|config|run|info`: LLaMA-Factory datasets from chains, LoRA configs, training and merge."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hvcu_tasks.argtypes import int_range
from training.info import FIELDS
from training.prepare import COMPOSITIONS
from training.render import DEEPSPEED_CHOICES


def _cmd_prepare(args: argparse.Namespace) -> int:
    """Write the requested compositions of the chains as LLaMA-Factory datasets and report their counts."""
    from training.prepare import prepare

    written, chains = prepare(args.chains, args.out, args.composition, args.seed, args.image_root, args.name)
    methods = ", ".join(f"{m} {n}" for m, n in chains.by_method.items())
    print(
        f"read {len(chains.chains)} chain(s) from {len(args.chains)} file(s) ({methods}); "
        f"dropped {chains.duplicates} exact duplicate(s)"
    )
    for p in written:
        c = p.counts
        print(f"{p.name} ({p.composition}): {c.samples} samples, {c.qa_pairs} QA pairs, {c.images} images -> {p.file}")
    print(f"entries in {Path(args.out) / 'dataset_info.json'}: {', '.join(p.name for p in written)}")
    return 0


def _cmd_config(args: argparse.Namespace) -> int:
    """Render the shipped configs of a model and print how to launch them."""
    from training.render import Layout, Request, parse_set, write_configs

    layout = Layout(
        gpus=args.gpus,
        nodes=args.nodes,
        cpu=args.cpu,
        deepspeed=args.deepspeed,
        per_device=args.per_device,
        global_batch=args.global_batch,
    )
    req = Request(
        model=args.model,
        dataset=args.dataset,
        dataset_dir=args.dataset_dir,
        out=args.out,
        layout=layout,
        model_path=args.model_path,
        overrides=parse_set(args.set or []),
    )
    rendered = write_configs(req, args.master_addr, args.master_port)
    for warning in rendered.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    t, record = rendered.train, rendered.record
    print(f"wrote {rendered.train_yaml}, {rendered.export_yaml} and {rendered.train_yaml.parent / 'layout.json'}")
    print(f"base model {record.base_model}; evaluate with lmms-eval hvcu_context inner={record.eval_backend}")
    print(
        f"global batch {args.global_batch} = {t['per_device_train_batch_size']} per device x "
        f"{t['gradient_accumulation_steps']} accumulation x {layout.world} process(es)"
        + (f"; DeepSpeed {t['deepspeed']}" if "deepspeed" in t else "")
    )
    if layout.nodes > 1 and not layout.cpu:
        print("launch (each train command on its node, then the merge on one of them):")
    else:
        print("launch:")
    for command in rendered.commands:
        print(f"  {command}")
    if layout.nodes == 1 or layout.cpu:
        from training.run import machine_has_gpu

        run = f"hvcu train run {rendered.train_yaml} --export {rendered.export_yaml}"
        if layout.cpu or machine_has_gpu():
            print(f"or, on this machine: {run}")
        else:
            print(f"this machine shows no GPU: run these on the training machine (or there: {run})")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    """Train, then merge; a failing step prints its exit status and log and returns it."""
    from training.run import StepFailed, run

    try:
        result = run(args.config, args.export, force=args.force)
    except StepFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status
    print(f"training: {result.trained} ({result.output_dir})")
    if result.export_dir is not None:
        print(f"merge: {result.exported} ({result.export_dir})")
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    """Print one field of a rendered folder (for scripts), or every field as `name: value` lines."""
    from training.info import info_field, train_info

    if args.field:
        print(info_field(args.folder, args.field))
    else:
        for name, value in train_info(args.folder).items():
            print(f"{name}: {value}")
    return 0


def _shipped_models() -> list[str]:
    """Return the shipped model keys (for --model choices)."""
    from training.render import shipped_models

    return shipped_models()


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `train` with its subcommands prepare, config, run and info."""
    train = sub.add_parser("train", help="LoRA tuning on generated chains with LLaMA-Factory (datasets, configs, runs)")
    tsub = train.add_subparsers(dest="train_command", required=True)

    prep = tsub.add_parser("prepare", help="chains.jsonl -> LLaMA-Factory ShareGPT datasets + dataset_info.json")
    prep.add_argument("--chains", type=Path, nargs="+", required=True, help="chains.jsonl of hvcu mcts / direct")
    prep.add_argument("--out", type=Path, required=True, help="dataset folder (dataset_info.json entries are merged)")
    prep.add_argument(
        "--composition", nargs="+", choices=COMPOSITIONS, required=True, help="one or more of the paper's Table 4"
    )
    prep.add_argument(
        "--seed", type=int_range(0, 2**31 - 1), default=0, help="picks full-hierarchy's third of the chains"
    )
    prep.add_argument("--image-root", type=Path, help="folder that relative image paths start from (default: cwd)")
    prep.add_argument(
        "--name",
        help="dataset name (one composition only; default hvcu_<method>_<composition>); needed to mix mcts and direct",
    )
    prep.set_defaults(func=_cmd_prepare)

    cfg = tsub.add_parser("config", help="render a shipped LoRA config for a dataset and GPU layout (batch 128)")
    models = _shipped_models()
    cfg.add_argument(
        "--model",
        required=True,
        choices=models,
        metavar="MODEL",
        help=f"shipped config to render: {', '.join(models)} (qwen3_vl_4b: the paper's run)",
    )
    cfg.add_argument("--dataset", required=True, help="name(s) in DATASET_DIR/dataset_info.json, comma-separated")
    cfg.add_argument(
        "--dataset-dir",
        type=Path,
        required=True,
        help="the --out folder of `hvcu train prepare` (holds dataset_info.json)",
    )
    cfg.add_argument("--out", type=Path, required=True, help="gets train.yaml, export.yaml, adapter/, merged/")
    cfg.add_argument("--gpus", type=int_range(1, 1024), default=1, help="GPUs per node")
    cfg.add_argument(
        "--nodes", type=int_range(1, 4096), default=1, help="> 1: launch the printed per-node commands yourself"
    )
    cfg.add_argument(
        "--per-device", type=int_range(1, 4096), help="per-device batch (default: the largest <= the shipped value)"
    )
    cfg.add_argument("--global-batch", type=int_range(1, 1 << 20), default=128, help="kept exactly (paper: 128)")
    cfg.add_argument(
        "--deepspeed", choices=DEEPSPEED_CHOICES, default="none", help="ZeRO stage (needs deepspeed); none: DDP"
    )
    cfg.add_argument("--model-path", help="local folder or hub id instead of the shipped base model")
    cfg.add_argument("--cpu", action="store_true", help="CPU run (tests): use_cpu, no DeepSpeed/bf16/workers")
    cfg.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a LLaMA-Factory argument (VALUE read as YAML); repeat for several",
    )
    cfg.add_argument("--master-addr", help="node 0's address for multi-node launch commands")
    cfg.add_argument(
        "--master-port", type=int_range(1, 65535), default=29500, help="node 0's port for multi-node launch (29500)"
    )
    cfg.set_defaults(func=_cmd_config)

    run = tsub.add_parser("run", help="llamafactory-cli train (resumes from checkpoints), then export")
    run.add_argument("config", type=Path, help="rendered train.yaml")
    run.add_argument("--export", type=Path, help="rendered export.yaml: merge the adapter after training")
    run.add_argument("--force", action="store_true", help="retrain and re-export even when finished")
    run.set_defaults(func=_cmd_run)

    info = tsub.add_parser("info", help="what a rendered folder holds: base model, eval backend, fingerprints")
    info.add_argument("folder", type=Path, help="the --out folder of `hvcu train config`")
    info.add_argument("--field", choices=FIELDS, help="print only this value (for scripts)")
    info.set_defaults(func=_cmd_info)
