"""`hvcu build-bench`: the command-line edge of benchmark construction."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from generation.cli import add_endpoint_arguments
from hvcu_tasks.data.files import check_folder


def _cmd_build(args: argparse.Namespace) -> int:
    """Build benchmark items from a manifest against an OpenAI-compatible endpoint."""
    from generation.bench.build import BuildConfig
    from generation.bench.manifest import read_manifest
    from generation.bench.pipeline import build_bench
    from generation.cli import client_config
    from generation.jobs import load_settings

    check_folder(args.out, "--out")  # an --out that is a file: one line now, not an OSError after the model calls
    rows = read_manifest(args.manifest)
    client = client_config(args)
    config = load_settings(args.config, BuildConfig)
    summary = asyncio.run(
        build_bench(
            rows,
            args.out,
            client,
            config,
            args.seed,
            progress=not args.quiet,
            base=args.base,
            retry_rejected=args.retry_rejected,
        )
    )
    print(json.dumps({k: v for k, v in summary.items() if k not in {"rejected", "failed"}}, indent=2))
    for sid, why in summary["rejected"].items():
        print(f"rejected: {sid}: level {why['level']}: {'; '.join(why['reasons'])}")
    for sid, error in summary["failed"].items():
        print(f"failed (rerun to retry): {sid}: {error}", file=sys.stderr)
    if summary["endpoint_down"]:
        print(f"stopped: {summary['endpoint_down']}", file=sys.stderr)
    line = (
        f"build-bench: {summary['emitted']} of {len(rows)} item(s) written to {args.out}, "
        f"{len(summary['rejected'])} rejected, {len(summary['failed'])} failed"
    )
    if summary["not_attempted"]:
        line += f", {summary['not_attempted']} not attempted"
    if summary["failed"] or summary["not_attempted"]:
        line += " (rerun the same command to retry them)"
    print(line + "; see build_report.json", file=sys.stderr)
    return 1 if summary["failed"] or summary["not_attempted"] else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `build-bench` on the `hvcu` command line."""
    build = sub.add_parser(
        "build-bench", help="generate a hierarchical benchmark top-down (L3 -> L2 -> L1) with validation"
    )
    build.add_argument("--manifest", type=Path, required=True, help="CSV/JSONL: image, family, aspect[, anchor, id]")
    build.add_argument("--out", type=Path, required=True, help="output folder (resumable)")
    build.add_argument("--config", type=Path, help="JSON/YAML overriding BuildConfig (attempts, temperatures)")
    build.add_argument("--base", type=Path, help="existing benchmark folder to extend (its items kept as they are)")
    build.add_argument(
        "--retry-rejected", action="store_true", help="build rejected items again (e.g. after raising max_attempts)"
    )
    add_endpoint_arguments(build)
    build.set_defaults(func=_cmd_build)
