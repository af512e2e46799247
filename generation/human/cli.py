"""`hvcu human sheets` (groups and answer sheets) and `hvcu human score` (import, score, lmms-eval results)."""

from __future__ import annotations

import argparse
from pathlib import Path

from generation.human.answers import read_answers
from generation.human.assign import (
    DEFAULT_PER_LEVEL,
    check_groups,
    deal_groups,
    make_assignment,
    parse_group_specs,
    read_assignment,
)
from generation.human.results import check_label, check_stamp, write_run
from generation.human.score import match_bench, score_human
from generation.human.sheets import write_sheets
from hvcu_tasks.argtypes import int_range
from hvcu_tasks.core.families import FAMILIES, LEVEL_NAMES
from hvcu_tasks.core.metrics import ACCURACY_METRICS
from hvcu_tasks.core.schema import Sample
from hvcu_tasks.data.files import write_atomic
from hvcu_tasks.data.loaders import load_source

ASSIGNMENT_FILE = "assignment.json"
SHEETS_FOLDER = "sheets"


def bench_source(text: str) -> str:
    """Return a dataset source as recorded: 'smoke' and 'hub[:...]' as given, a local path made absolute."""
    if text == "smoke" or text == "hub" or text.startswith("hub:"):
        return text
    return str(Path(text).expanduser().resolve())


def load_bench(source: str) -> list[Sample]:
    """Load every family of a dataset source, refusing one with problems."""
    samples: list[Sample] = []
    for family in FAMILIES:
        samples += load_source(source, family).raise_for_problems()
    return samples


def cmd_sheets(args: argparse.Namespace) -> int:
    """Assign one group per level, write `assignment.json` and every annotator's HTML and CSV sheet."""
    if args.names:
        groups = deal_groups(args.names, args.annotators_per_level, args.seed)
    else:
        groups = check_groups(parse_group_specs(args.group), args.annotators_per_level)
    source = bench_source(args.bench)
    samples = load_bench(source)
    assignment = make_assignment(samples, groups, source, args.seed)
    out: Path = args.out
    target = out / ASSIGNMENT_FILE
    text = assignment.to_json()
    if target.is_file() and target.read_text(encoding="utf-8") != text:
        raise ValueError(f"{target}: already holds a different assignment; choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    written = write_sheets(samples, assignment, out / SHEETS_FOLDER)
    write_atomic(target, text)  # last, and whole: its presence means every sheet was written
    print(f"{len(assignment.items)} sample(s) from {source}")
    for level, members in assignment.groups.items():
        print(f"  level {level} ({LEVEL_NAMES[level]}): {', '.join(members)}")
    print(f"wrote {target} and {len(written)} sheet file(s) in {out / SHEETS_FOLDER}")
    print("hand each annotator only their own <name>_level<k>.html (or .csv); keep assignment.json")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    """Import the filled sheets, score the Human row and write it in lmms-eval's results layout."""
    label, stamp = check_label(args.label), check_stamp(args.stamp)
    assignment = read_assignment(args.sheets_dir)
    bench = bench_source(args.bench) if args.bench else assignment.bench
    samples = match_bench(assignment, load_bench(bench), bench)
    answers = read_answers(args.answers, assignment)
    scores = score_human(assignment, samples, answers)
    results_path, summary_path = write_run(scores, assignment, args.out, label, stamp)
    print(f"{'family':<12} {'Acc_perc':>9} {'Acc_bridge':>10} {'Acc_conn':>9} {'Acc_full':>9}")
    for family, m in scores.families.items():
        cells = [m[name] for name in ACCURACY_METRICS]
        print(f"{family:<12} " + " ".join(f"{v:>{w}.2f}" for v, w in zip(cells, (9, 10, 9, 9), strict=True)))
    print(f"Overall Score: {'-' if scores.overall is None else f'{scores.overall:.2f}'}")
    print(f"wrote {results_path} (for `hvcu report {args.out}`) and {summary_path}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `hvcu human sheets` and `hvcu human score`."""
    human = sub.add_parser("human", help="human baseline: one annotator group per level, answer sheets, scoring")
    commands = human.add_subparsers(dest="human_command", required=True)

    sheets = commands.add_parser("sheets", help="assign annotator groups and write level-specific answer sheets")
    sheets.add_argument("bench", help="dataset: a folder in the authors' layout, 'smoke' or 'hub[:REPO[@REV]]'")
    sheets.add_argument("--out", type=Path, required=True, help="folder for assignment.json and sheets/")
    who = sheets.add_mutually_exclusive_group(required=True)
    who.add_argument("--names", nargs="+", metavar="NAME", help="annotators, dealt into the level groups with --seed")
    who.add_argument(
        "--group",
        action="append",
        metavar="LEVEL=A,B,C",
        help="one group per level, given once per level (LEVEL: perc/bridge/conn or 1/2/3)",
    )
    sheets.add_argument(
        "--annotators-per-level",
        type=int_range(1),
        default=DEFAULT_PER_LEVEL,
        metavar="N",
        help=f"annotators in each level's group (default {DEFAULT_PER_LEVEL})",
    )
    sheets.add_argument(
        "--seed", type=int_range(0, 2**31 - 1), default=0, help="seeds the dealing of names and every sheet's order"
    )
    sheets.set_defaults(func=cmd_sheets)

    score = commands.add_parser("score", help="score filled answer sheets as a 'Human' run for `hvcu report`")
    score.add_argument("sheets_dir", type=Path, help="the --out folder of `hvcu human sheets`")
    score.add_argument("answers", nargs="+", type=Path, help="filled answer CSV files, or folders of them")
    score.add_argument("--out", type=Path, required=True, help="run folder to write (pass it to `hvcu report`)")
    score.add_argument("--bench", help="dataset source, when it moved since the sheets were made")
    score.add_argument("--label", default="Human", help="row name in the report (default: Human)")
    score.add_argument("--stamp", default="human", help="results file name: <stamp>_results.json")
    score.set_defaults(func=cmd_score)
