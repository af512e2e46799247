"""`hvcu audit`: export review forms, import verdicts, agreement statistics, team decisions, final benchmark."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from generation.audit.review import DEFAULT_MIN_ANNOTATORS, DEFAULT_THRESHOLD, rule_text
from hvcu_tasks.argtypes import float_range, int_range


def _cmd_export(args: argparse.Namespace) -> int:
    """Start an audit: snapshot the benchmark and write round 1's forms."""
    from generation.audit.config import parse_annotators
    from generation.audit.rounds import start_audit

    folder = start_audit(
        args.bench,
        args.out,
        parse_annotators(args.annotators),
        seed=args.seed,
        rounds=args.rounds,
        min_annotators=args.min_annotators,
        threshold=args.threshold,
        max_side=args.max_side,
    )
    forms = sorted((folder / "forms").glob("*.html"))
    print(f"round 1 opened in {folder}: {len(forms)} form(s) in {folder / 'forms'} (HTML, and CSV for spreadsheets)")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    """Import verdict files into the open round."""
    from generation.audit.rounds import audit_status, import_verdicts

    names = import_verdicts(args.audit, args.files, args.round, replace=args.replace)
    print(f"imported verdicts of {', '.join(names)}")
    print(f"next: {audit_status(args.audit)['next']}")
    return 0


def _cmd_forms(args: argparse.Namespace) -> int:
    """Rewrite the open round's forms from source/ after an edit (before any verdict is imported)."""
    from generation.audit.rounds import refresh_forms

    folder = refresh_forms(args.audit, args.round)
    forms = sorted((folder / "forms").glob("*.html"))
    print(f"{len(forms)} form(s) rewritten in {folder / 'forms'}; send them out again (the old ones are stale)")
    return 0


def _print_stats(stats: dict) -> None:
    """Print a round's agreement table and flag count."""
    print(f"round {stats['round']}: {stats['n_items']} item(s), {stats['n_annotators']} annotator(s)")
    print(f"{'question':<14} {'Fleiss kappa':>12} {'Kripp. alpha':>12} {'agreement':>10} {'yes':>7}")

    def fmt(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    undefined = []
    for q, a in stats["agreement"].items():
        cells = [fmt(a["fleiss_kappa"]), fmt(a["krippendorff_alpha"]), fmt(a["observed_agreement"])]
        print(f"{q:<14} {cells[0]:>12} {cells[1]:>12} {cells[2]:>10} {fmt(a['yes_share']):>7}")
        if any(v is None for v in a.values()):
            undefined.append(q)
    if undefined:
        print(
            f"n/a ({', '.join(undefined)}): everyone gave the same answer on every item, "
            "so kappa and alpha are undefined"
        )
    print(f"flagged: {stats['n_flagged']} of {stats['n_items']} (rule: {rule_text(stats['threshold'])})")


def _cmd_stats(args: argparse.Namespace) -> int:
    """Compute and print a round's agreement statistics and flags."""
    from generation.audit.rounds import compute_stats

    stats, _reviews = compute_stats(args.audit, args.round)
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        _print_stats(stats)
    return 0


def _cmd_decide(args: argparse.Namespace) -> int:
    """Apply decisions, close the round, open the next one or write the final benchmark."""
    from generation.audit.rounds import decide

    outcome = decide(args.audit, args.decisions, args.round)
    counts = ", ".join(f"{len(outcome[k])} {k}" for k in ("accepted", "discarded", "revisit"))
    print(f"round {outcome['round']} closed: {counts}")
    for warning in outcome.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    print(f"next: {outcome['next']}")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    """Print where the audit stands."""
    from generation.audit.rounds import audit_status

    status = audit_status(args.audit)
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    for r in status["rounds"]:
        extra = ", ".join(f"{k} {r[k]}" for k in ("flagged", "accepted", "discarded", "revisit") if k in r)
        who = ", ".join(r["verdicts_from"]) or "none"
        print(
            f"round {r['round']} ({r['status']}): {r['candidates']} item(s); verdicts from {who}; {extra}".rstrip("; ")
        )
    print(f"next: {status['next']}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `audit` and its subcommands on the `hvcu` parser."""
    audit = sub.add_parser("audit", help="human audit rounds: forms, verdicts, agreement, decisions, final benchmark")
    cmds = audit.add_subparsers(dest="audit_command", required=True)

    export = cmds.add_parser("export", help="start an audit: snapshot a candidate benchmark, write round-1 forms")
    export.add_argument("bench", type=Path, help="candidate benchmark folder (authors' layout)")
    export.add_argument("--out", type=Path, required=True, help="new audit folder")
    export.add_argument(
        "--annotators", nargs="+", required=True, help="a count (5 -> a1..a5) or names (alice bob ... or alice,bob)"
    )
    export.add_argument("--seed", type=int_range(0, 2**31 - 1), default=0, help="seed of each annotator's item order")
    export.add_argument(
        "--rounds", type=int_range(1), default=3, help="most review rounds; unresolved items are then dropped"
    )
    export.add_argument(
        "--min-annotators",
        type=int_range(2),
        default=DEFAULT_MIN_ANNOTATORS,
        help="verdicts needed per item (default 5)",
    )
    export.add_argument(
        "--threshold",
        type=float_range(0.5, 1, low_open=True),
        default=DEFAULT_THRESHOLD,
        help="yes share an item needs on every question",
    )
    export.add_argument(
        "--max-side", type=int_range(0), default=0, help="shrink embedded images to this many pixels (0: as is)"
    )
    export.set_defaults(func=_cmd_export)

    imp = cmds.add_parser("import", help="import annotators' verdict CSV files into the open round")
    imp.add_argument("audit", type=Path, help="the audit folder (the --out of `hvcu audit export`)")
    imp.add_argument(
        "files",
        nargs="+",
        type=Path,
        help="the verdict CSV files the annotators downloaded from their forms (or filled in)",
    )
    imp.add_argument("--round", type=int_range(1), help="round number (default: the open round)")
    imp.add_argument("--replace", action="store_true", help="replace verdicts already imported for an annotator")
    imp.set_defaults(func=_cmd_import)

    forms = cmds.add_parser(
        "forms", help="rewrite the open round's forms after editing its items in source/ (before any verdict)"
    )
    forms.add_argument("audit", type=Path, help="the audit folder")
    forms.add_argument("--round", type=int_range(1), help="round number (default: the open round)")
    forms.set_defaults(func=_cmd_forms)

    stats = cmds.add_parser("stats", help="agreement per question, flagged items (writes stats.json, flags.csv)")
    stats.add_argument("audit", type=Path, help="the audit folder")
    stats.add_argument("--round", type=int_range(1), help="round number (default: the open round, else the last)")
    stats.add_argument("--json", action="store_true", help="print stats.json instead of a table")
    stats.set_defaults(func=_cmd_stats)

    dec = cmds.add_parser("decide", help="apply keep/discard/revisit decisions; open the next round or finish")
    dec.add_argument("audit", type=Path, help="the audit folder")
    dec.add_argument("decisions", nargs="?", type=Path, help="decisions CSV (default: the round's decisions.csv)")
    dec.add_argument("--round", type=int_range(1), help="round number (default: the open round)")
    dec.set_defaults(func=_cmd_decide)

    status = cmds.add_parser("status", help="where the audit stands and what to do next")
    status.add_argument("audit", type=Path, help="the audit folder")
    status.add_argument("--json", action="store_true", help="print the status as JSON instead of lines")
    status.set_defaults(func=_cmd_status)
