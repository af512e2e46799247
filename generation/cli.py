"""`hvcu mcts` / `hvcu direct`: the command-line edge of instruction-data synthesis."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hvcu_tasks.argtypes import float_range, int_range

if TYPE_CHECKING:
    from generation.client import ClientConfig


def add_endpoint_arguments(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """Add the model endpoint options every generation command shares (--model, --base-url, ...)."""
    parser.add_argument("--model", required=required, help="model name as the endpoint serves it")
    parser.add_argument(
        "--base-url", required=required, help="e.g. http://localhost:8000/v1 (vLLM) or https://api.openai.com/v1"
    )
    parser.add_argument("--api-key", help="default: $OPENAI_API_KEY")
    parser.add_argument(
        "--concurrency", type=int_range(1, 4096), default=16, help="model calls in flight at once (1-4096)"
    )
    parser.add_argument(
        "--timeout", type=float_range(0, 86400, low_open=True), default=120.0, help="seconds per request attempt"
    )
    parser.add_argument(
        "--retries",
        type=int_range(0, 100),
        default=6,
        help="retries of a failed call (backoff 0.5 s doubling to 8 s)",
    )
    parser.add_argument(
        "--max-wait",
        type=float_range(0, 86400),
        default=60.0,
        help="longest single wait (seconds) a rate limit's Retry-After may impose; a call asked to wait longer "
        "fails at once and its image is failed, for a rerun to finish (default 60)",
    )
    parser.add_argument(
        "--dead-after",
        type=int_range(1, 100000),
        default=20,
        help="stop the run after this many consecutive failed calls with no success between them",
    )
    parser.add_argument(
        "--seed", type=int_range(0, 2**31 - 1), default=0, help="seeds every model call (and any shuffling)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def client_config(args: argparse.Namespace) -> ClientConfig:
    """Return the client settings given by the endpoint options."""
    from generation.client import ClientConfig

    return ClientConfig(
        model=args.model,
        base_url=args.base_url,
        api_key=args.api_key,
        concurrency=args.concurrency,
        timeout_s=args.timeout,
        max_retries=args.retries,
        dead_after=args.dead_after,
        max_wait_s=getattr(args, "max_wait", 60.0),
    )


def _cmd_generate(args: argparse.Namespace) -> int:
    """Run MCTS synthesis or the direct baseline over images against an OpenAI-compatible endpoint."""
    from generation.jobs import parse_shard
    from generation.runner import list_images, load_config, run, summary_line

    images = list_images(args.images)
    config = client_config(args)
    stats = asyncio.run(
        run(
            images,
            args.out,
            config,
            load_config(args.config),
            args.method,
            parse_shard(args.shard),
            args.seed,
            progress=not args.quiet,
        )
    )
    print(json.dumps({k: v for k, v in stats.items() if k not in {"failed", "rejected"}}, indent=2))
    for image, error in list(stats["failed"].items())[:20]:
        print(f"failed: {image}: {error}", file=sys.stderr)
    if len(stats["failed"]) > 20:
        print(f"... and {len(stats['failed']) - 20} more failed image(s): see {args.out}/stats.json", file=sys.stderr)
    if stats["endpoint_down"]:
        print(f"stopped: {stats['endpoint_down']}", file=sys.stderr)
    print(summary_line(stats, args.out), file=sys.stderr)
    return 1 if stats["images_failed"] or stats["images_not_attempted"] else 0


def _cmd_merge(args: argparse.Namespace) -> int:
    """Merge shard outputs into one folder."""
    from generation.runner import merge

    print(json.dumps(merge(args.shards, args.out), indent=2))
    return 0


HELP = {
    "mcts": "MCTS synthesis of hierarchical instruction data (paper §3.3): a tree search per image, each level "
    "judged and validated, the top chains kept",
    "direct": "the direct-generation baseline for MCTS synthesis (paper App. D.4, Table 10): one prompt per image asks "
    "for all three levels, no search or validation",
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `mcts` (with its other form `mcts merge`) and `direct` on the `hvcu` command line."""
    for method, helptext in HELP.items():
        gen = sub.add_parser(
            method,
            help=f"{helptext}; writes chains.jsonl for `hvcu train prepare`",
            description=f"{helptext[0].upper()}{helptext[1:]}. The model is any OpenAI-compatible endpoint. "
            "Writes OUT/chains.jsonl (for `hvcu train prepare`), stats.json, run.json, images/ and cache.sqlite; "
            "a rerun resumes."
            + (" `hvcu mcts merge` combines the --out folders of --shard runs." if method == "mcts" else ""),
        )
        if method == "mcts":
            merge = gen.add_form(
                "merge",
                description="Combine the --out folders of `hvcu mcts --shard I/N` runs into one folder, with the "
                "chains.jsonl a single run writes.",
            )
            merge.add_argument("shards", nargs="+", type=Path, metavar="SHARD", help="--out folders of --shard runs")
            merge.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder to write the merge into")
            merge.set_defaults(func=_cmd_merge)
        gen.add_argument(
            "--images",
            type=Path,
            required=True,
            metavar="PATH",
            help="a folder of images (searched recursively) or a text file with one image path per line",
        )
        gen.add_argument(
            "--out",
            type=Path,
            required=True,
            metavar="DIR",
            help="output folder (resumable: a rerun skips done images)",
        )
        add_endpoint_arguments(gen)
        gen.add_argument(
            "--config", type=Path, help="JSON/YAML overriding the search settings (paper defaults otherwise)"
        )
        gen.add_argument(
            "--shard", default="0/1", metavar="I/N", help="this machine's share I of N of the images (default 0/1)"
        )
        gen.set_defaults(func=_cmd_generate, method=method)
