"""The `hvcu perturb` subcommand: controlled aesthetic variants of an image or a layered design."""

from __future__ import annotations

import argparse
from pathlib import Path

from generation.perturb.run import MANIFEST, perturb
from generation.perturb.variants import ASPECTS, FACTORS
from hvcu_tasks.argtypes import int_range

MAX_VARIANTS = 100  # per input and aspect: more is a typo, and each variant is a full-size image in memory


def _cmd_perturb(args: argparse.Namespace) -> int:
    """Write the variants and print one line per variant."""
    records = perturb(args.input, args.aspect, args.n, args.seed, args.out, replace=args.replace)
    for r in records:
        print(f"{args.out / r['image']}: {r['factor']} {r['params']}")
    print(f"{len(records)} {args.aspect} variant(s) of {args.input} in {args.out} (manifest {args.out / MANIFEST})")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `perturb` subcommand."""
    factors = "; ".join(f"{a}: {', '.join(f)}" for a, f in FACTORS.items())
    p = sub.add_parser(
        "perturb",
        help="controlled aesthetic variants (color, composition, font, graphics) of an image or design",
        description=(
            "Make N variants of INPUT that each change one factor of one aesthetic aspect "
            f"({factors}). color and composition work on any image or design; font and graphics need a "
            "layered design (.json). Writes DIR/<stem>_<aspect>_<NN>.png, the perturbed design "
            f"DIR/<stem>_<aspect>_<NN>.json for font/graphics, and DIR/{MANIFEST}."
        ),
    )
    p.add_argument("input", type=Path, metavar="INPUT", help="an image file, or a layered design .json")
    p.add_argument("--aspect", required=True, choices=ASPECTS, help="the aesthetic aspect to vary")
    p.add_argument(
        "--n", type=int_range(1, MAX_VARIANTS), default=4, help=f"number of variants, 1 to {MAX_VARIANTS} (default 4)"
    )
    p.add_argument(
        "--seed",
        type=int_range(0, 2**31 - 1),
        default=0,
        help="seed for the variant parameters, mixed with the input's content hash (default 0)",
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    p.add_argument(
        "--replace",
        action="store_true",
        help="replace variants in DIR of another input file with the same stem and aspect (refused otherwise)",
    )
    p.set_defaults(func=_cmd_perturb)
