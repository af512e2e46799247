"""The `hvcu` command line: everything around lmms-eval — data, scores, reports, synthesis, construction, training."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hvcu_tasks.argtypes import int_range
from hvcu_tasks.core.families import FAMILIES, LEVEL_NAMES
from hvcu_tasks.core.metrics import FamilyScores
from hvcu_tasks.core.schema import DataError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint


def _cmd_validate(args: argparse.Namespace) -> int:
    """Validate a dataset and print one line per problem, then the counts."""
    from hvcu_tasks.data.validate import identity_lines, validate

    report = validate(args.source, decode_images=not args.no_decode, use_cache=not args.no_cache)
    for problem in report.problems:
        print(problem)
    total = sum(sum(c.values()) for c in report.counts.values())
    print(f"{total} sample(s)")
    for family, counts in report.counts.items():
        detail = ", ".join(f"{a} {n}" for a, n in counts.items())
        print(f"  {family}: {sum(counts.values())} ({detail})")
    for line in report.count_warnings + ([report.count_note] if report.count_note else []):
        print(line)
    if report.identities:
        print("\n".join(identity_lines(report.identities)))
    if report.problems:
        print(f"INVALID: {len(report.problems)} problem(s)", file=sys.stderr)
        return 1
    warned = len(report.count_warnings)
    print(f"OK ({warned} count warning(s) above: not the published benchmark's counts)" if warned else "OK")
    return 0


def _number(value: float, spec: str) -> str:
    """Format a score, 'n/a' when it is not available (NaN)."""
    return "n/a" if isinstance(value, float) and math.isnan(value) else format(value, spec)


def _print_table(summary: list[dict]) -> None:
    """Print one table per (model, setting) in the paper's layout, both parsers side by side, then its Overall Score."""
    from hvcu_tasks.report.render import to_terminal
    from hvcu_tasks.report.tables import Table

    names = list(LEVEL_NAMES.values())
    columns = ["family", "parser", "n", "Acc_perc", "Acc_bridge", "Acc_conn", "Acc_full"]
    columns += ["invalid p/b/c", "first error p/b/c"]
    for run in summary:
        model = run["model"] or "(model not named)"
        title = f"{model} · {run['setting'] or 'setting unknown'} — HVCU-Bench scores (percent)"
        table = Table("score", title, columns, notes=[f"official: {run['parser_official']}"])
        for family in FAMILIES:
            rows = [("hvcu", run["families"].get(family)), ("official", run["families_official"].get(family))]
            for parser, d in rows:
                if d is None:
                    continue
                s = FamilyScores(**d)
                invalid = "/".join(_number(s.invalid[n], ".1f") for n in names)
                accs = [float(s.acc[n]) for n in names] + [float(s.acc_full)]
                table.rows.append(
                    [family, parser, s.n_samples, *accs, invalid, "/".join(str(s.error_counts[n]) for n in names)]
                )
        print(to_terminal(table), end="")
        scores = [("hvcu parser", run["overall_score"]), ("authors' rule", run["overall_score_official"])]
        for label, value in scores:
            if value is not None:
                print(f"Overall Score ({label}): {_number(value, '.2f')}")
        if run["note"]:
            print(f"note: {run['note']}")
        print()


def _cmd_score(args: argparse.Namespace) -> int:
    """Re-score authors' result files: one table (or JSON entry) per model and setting."""
    from hvcu_tasks.data.jsonio import json_safe
    from hvcu_tasks.results.rescore import score_runs

    summary = score_runs(args.files, args.family, args.reparse)
    if args.format == "json":
        print(json.dumps(json_safe(summary), indent=2, allow_nan=False))
    else:
        _print_table(summary)
    return 0


def _cmd_chains(args: argparse.Namespace) -> int:
    """Print one JSON line per sample chain found in lmms-eval samples files."""
    from hvcu_tasks.results.chains import chains_of_file, no_samples_reason, samples_files

    files = samples_files(args.paths)
    if not files:
        where = [str(p) for p in args.paths]
        print(f"error: no *_samples_hvcu_bench*.jsonl under {where}: {no_samples_reason(args.paths)}", file=sys.stderr)
        return 2
    chains = (chain for task, path in files for chain in chains_of_file(task, path))
    lines = (json.dumps(chain, ensure_ascii=False) + "\n" for chain in chains)
    if args.out is None:
        sys.stdout.writelines(lines)
        return 0
    from hvcu_tasks.data.files import write_atomic

    if args.out.is_dir():
        raise ValueError(f"--out {args.out}: is a folder; give the path of the JSONL file to write")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out, "".join(lines))  # every file read first: a bad line leaves --out as it was
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    """Write or print the leaderboard and paper-layout tables for the given lmms-eval run folders."""
    from hvcu_tasks.report.analysis import analysis_tables
    from hvcu_tasks.report.board import board_entries, make_board, merge, per_model, run_entry, with_reference
    from hvcu_tasks.report.board_file import leaderboard_json, read_leaderboard
    from hvcu_tasks.report.board_tables import summary_table
    from hvcu_tasks.report.crossbench import compare_general_table
    from hvcu_tasks.report.render import EXTENSIONS, RENDERERS, custom_groups, report_tables, to_json, to_terminal
    from hvcu_tasks.report.tables import compare_table
    from hvcu_tasks.results.runs import CUSTOM, ReportError, read_folders

    if args.format == "html" and args.out is None:
        raise ReportError("--format html writes a site (index.html, models/, figures/): give --out DIR")
    if args.summary and args.out is None and args.format not in (None, "md"):
        raise ReportError(f"--summary prints a table; --format {args.format} needs --out DIR (or drop it)")
    published = read_leaderboard(args.base) if args.base is not None else None
    folders = read_folders(args.runs)
    models = folders.models
    reference = not args.no_reference
    ranked = [m for m in models if CUSTOM not in m.dataset]
    if published is None:
        entries = board_entries(ranked, reference)
    else:  # the published board as it is (its [paper] rows included, or today's when it has none), plus the new runs
        entries = merge(with_reference(published, reference), [run_entry(m) for m in ranked if m.settings], args.base)
    board = make_board(entries)
    tables = report_tables(models, reference, board) + analysis_tables(folders.analysis)
    pair = None
    if args.compare:
        if len(models) != 2:
            raise ReportError(f"--compare needs runs of exactly two models (A then B); got {[m.model for m in models]}")
        pair = (models[0], models[1])
        tables += [compare_table(*pair, s) for s in ("base", "context") if all(s in m.settings for m in pair)]
        tables += [compare_general_table(*pair)] if any(m.general for m in pair) else []
    for line in (f"warning: {m.model} ({s}): {n}" for m in models for s, notes in m.notes.items() for n in notes):
        print(line, file=sys.stderr)
    summary = ""
    if args.summary:  # its custom-data boards are made only when it is printed
        table = summary_table(
            board, [make_board(board_entries(g, reference=False)) for g in custom_groups(models).values()]
        )
        summary = RENDERERS["md"](table) if args.format == "md" else to_terminal(table, refs=len(table.rows))
    if args.out is None:
        if args.summary:
            print(summary + "\n" + _report_next(args), end="")
        elif args.format is None:
            shown: set[str] = set()
            print("\n".join(to_terminal(t, shown=shown) for t in tables) + "\n" + _report_next(args), end="")
        else:
            print(to_json(tables) if args.format == "json" else "\n".join(map(RENDERERS[args.format], tables)), end="")
        return 0
    from hvcu_tasks.data.files import write_atomic
    from hvcu_tasks.report.figures import all_figures

    if args.out.exists() and not args.out.is_dir():
        raise ReportError(f"--out {args.out}: is a file; give a folder for the tables and figures/")
    args.out.mkdir(parents=True, exist_ok=True)
    figures = all_figures(ranked, args.out / "figures", reference, per_model(board.entries, reference))
    texts = {"leaderboard.json": leaderboard_json(board)}
    if args.format == "json":
        texts["report.json"] = to_json(tables)
    elif args.format != "html":
        fmt = args.format or "md"
        texts |= {f"{t.name}.{EXTENSIONS[fmt]}": RENDERERS[fmt](t) for t in tables}
    for name, text in texts.items():
        write_atomic(args.out / name, text)
    pages = []
    if args.format == "html":
        from hvcu_tasks.report.site import write_site

        runs_on_board = [e.model for e in entries if e.source == "run"]
        pages = write_site(
            args.out, tables, models, figures, args.runs, pair, reference, runs_on_board, args.data, folders.logs
        )
    print(summary, end="")
    print(f"wrote {len(texts) + len(pages)} file(s) and {len(figures)} figure file(s) to {args.out}")
    print(_report_next(args) if args.summary else "", end="")
    return 0


def _report_next(args: argparse.Namespace) -> str:
    """Return the lines after the terminal's tables: where the page is, the commands that print and write them all."""
    import shlex

    same = [str(p) for p in args.runs] + ["--no-reference"] * args.no_reference + ["--compare"] * args.compare
    same += ["--base", str(args.base)] if args.base is not None else []
    command = shlex.join(["hvcu", "report", *same])
    page = f"the leaderboard page: {args.out / 'index.html'}" if args.format == "html" else f"the tables: {args.out}"
    lines = [page] * (args.out is not None) + [f"the same runs: {command}"]
    lines += ["  (no option)                every table, 120 columns wide"] * args.summary
    lines.append("  --format md                every table in full (or csv, latex, json)")
    rest = "  --out DIR                  one file per table\n  --format html --out site   a leaderboard site"
    lines += [rest] * (args.out is None)
    return "\n".join(lines) + "\n"


def _cmd_cache_list(args: argparse.Namespace) -> int:
    """List every model identity of an hvcu_context request cache and its runs (state, ranks, counts)."""
    from hvcu_tasks.lmms.models.cache_runs import listing
    from hvcu_tasks.lmms.models.request_cache import cache_location

    root = args.root.expanduser() if args.root is not None else cache_location("on", api=True)
    if root is None:  # pragma: no cover - cache_location raises instead
        return 1
    if not root.is_dir():
        print(f"error: {root}: no such folder", file=sys.stderr)
        return 1
    for line in listing(root):
        print(line)
    return 0


def _cmd_tasks_dir(_args: argparse.Namespace) -> int:
    """Print the folder to pass to lmms-eval's --include_path."""
    from hvcu_tasks.lmms.plugin import TASKS_DIR

    print(TASKS_DIR)
    return 0


def _cmd_tiny_model(args: argparse.Namespace) -> int:
    """Build a tiny random Qwen2.5-VL, Qwen3-VL, LLaVA or LLaVA-NeXT (offline stand-ins for the demo and tests)."""
    from hvcu_tasks.dev import tiny_model

    print(getattr(tiny_model, f"build_{args.arch}")(args.out, seed=args.seed))
    return 0


DESCRIPTION = """\
Everything around lmms-eval for HVCU-Bench: lmms-eval runs the evaluation (`hvcu tasks-dir` names the task
folder); hvcu checks data, turns runs into the paper's tables, and makes and audits new data.

command groups (`hvcu COMMAND -h` explains each):
  data validate           check a dataset: a local copy, the hub, or the bundled smoke sample
  report, score, chains   results: tables of lmms-eval runs; of the authors' result files; per-sample chains
  mcts, direct            instruction data from images via an OpenAI-compatible endpoint: MCTS; its baseline
  build-bench, perturb    new benchmark items, generated top-down; controlled aesthetic variants of an image
  audit, human            human audit rounds of new items; the human baseline (answer sheets, scores)
  train                   LoRA tuning on the chains with LLaMA-Factory; then compare base and tuned model
  mock                    a local OpenAI-compatible stand-in endpoint (serve, wait), for offline runs
  cache list              the runs kept by hvcu_context's request cache (resumed, reused with reuse=)
  tasks-dir, tiny-model   lmms-eval's --include_path; a tiny random model for offline runs
  export-task             a task folder for plain lmms-eval (YAMLs, hooks, the pure core; no hvcu needed)"""


class Parser(argparse.ArgumentParser):
    """An argument parser whose command may have other forms with parsers of their own (`hvcu mcts merge ...`).

    Its subcommands' parsers are of this class too (argparse makes them of the parent's class).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.forms: dict[str, Parser] = {}
        self.problems: list[str] = []  # command groups missing or broken, said at the end of the help
        self.failed: list[str] = []  # those broken: said on stderr as a warning before a command runs
        self.unavailable: dict[str, str] = {}  # command of such a group -> why it is not available

    def add_form(self, word: str, **kwargs: Any) -> Parser:
        """Add `PROG WORD ...` as another form of this command; usage and help show it beside the main form."""
        form = type(self)(prog=f"{self.prog} {word}", **kwargs)
        self.forms[word] = form
        return form

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse with the form whose word comes first, else as this command."""
        args = list(sys.argv[1:] if args is None else args)
        if args and args[0] in self.forms:
            return self.forms[args[0]].parse_known_args(args[1:], namespace)
        return super().parse_known_args(args, namespace)

    def _form_usages(self) -> str:
        """Return the other forms' usage lines, each starting with `   or:`."""
        return "".join(f"   or: {form.format_usage().removeprefix('usage: ')}" for form in self.forms.values())

    def format_usage(self) -> str:
        """Return the usage of this command and of its other forms."""
        return super().format_usage() + self._form_usages()

    def format_help(self) -> str:
        """Return the help, its usage block followed by the other forms' usage lines."""
        text = super().format_help()
        if not self.forms:
            return text
        usage, sep, rest = text.partition("\n\n")
        return usage + "\n" + self._form_usages().rstrip("\n") + sep + rest


class _VersionAction(argparse.Action):
    """`--version`: print `hvcu VERSION (lmms-eval VERSION)` and exit (the versions are read only when asked)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any) -> None:
        """Print the installed distributions' versions and exit with status 0."""
        from importlib.metadata import PackageNotFoundError, version

        found = []
        for dist in ("hvcu-toolkit", "lmms_eval"):
            try:
                found.append(version(dist))
            except PackageNotFoundError:
                found.append("not installed")
        print("hvcu {} (lmms-eval {})".format(*found))
        parser.exit()


COMMANDS_ENTRY_POINTS = "hvcu.commands"
"""The entry-point group of `hvcu`'s command groups: name -> `module:function`, the function adding subcommands."""

COMMAND_GROUPS: dict[str, tuple[str, ...]] = {
    "synthesis": ("mcts", "direct"),
    "mock": ("mock",),
    "build-bench": ("build-bench",),
    "human": ("human",),
    "perturb": ("perturb",),
    "audit": ("audit",),
    "train": ("train",),
}
"""hvcu-toolkit's own command groups (pyproject.toml), in `hvcu -h` order -> the commands each adds.

A group of another distribution comes after these, by name; one of these not installed is named in `hvcu -h`.
"""

REINSTALL = "run `pip install -e .` again in the checkout (or install the current wheel)"


def command_entry_points() -> list[EntryPoint]:
    """Return the installed entry points of `hvcu`'s command groups."""
    from importlib.metadata import entry_points

    return list(entry_points(group=COMMANDS_ENTRY_POINTS))


def _register(entry_point: EntryPoint, sub: argparse._SubParsersAction) -> str | None:
    """Add an entry point's commands to `sub`; return why it failed (its commands taken back), None when it loaded."""
    choices, actions = dict(sub.choices), len(sub._choices_actions)
    try:
        register = entry_point.load()
        if not callable(register):
            raise TypeError(f"{entry_point.value} is a {type(register).__name__}, not a function")
        register(sub)
    except Exception as exc:  # a broken group must not take the other commands with it
        sub.choices.clear()
        sub.choices.update(choices)
        del sub._choices_actions[actions:]
        where = f"entry point {entry_point.name} = {entry_point.value}"
        why = " ".join(f"{type(exc).__name__}: {exc}".split())
        return f"command group '{entry_point.name}' ({where}) did not load: {why}"
    return None


def _add_command_groups(parser: Parser, sub: argparse._SubParsersAction) -> None:
    """Add the command groups found through entry points; note on `parser` each one that is missing or broken."""
    found: dict[str, list[EntryPoint]] = {}
    for entry_point in command_entry_points():
        found.setdefault(entry_point.name, []).append(entry_point)
    missing = []
    for name in [*COMMAND_GROUPS, *sorted(set(found) - set(COMMAND_GROUPS))]:
        commands = COMMAND_GROUPS.get(name, ())
        if name not in found:
            missing.append(f"{name} ({', '.join(commands)})")
            problems = [
                f"command group '{name}' ({', '.join(commands)}) is not installed: hvcu-toolkit's metadata lacks its "
                f"`{COMMANDS_ENTRY_POINTS}` entry point, as an install made before the group was added "
                f"does; {REINSTALL}"
            ]
        else:
            results = (_register(ep, sub) for ep in sorted(found[name], key=lambda ep: ep.value))
            problems = [problem for problem in results if problem is not None]
            parser.failed += problems
        for command in commands:  # in its place: a command of a missing or broken group refuses in one line
            if problems and command not in sub.choices:
                sub.add_parser(command, help="not available in this install (see the end of `hvcu -h`)", add_help=False)
                parser.unavailable[command] = problems[0]
    if missing:
        parser.problems.append(
            f"command groups not installed: {', '.join(missing)}: hvcu-toolkit's metadata lacks their "
            f"`{COMMANDS_ENTRY_POINTS}` entry points, as an install made before they were added does; {REINSTALL}"
        )
    parser.problems += parser.failed
    if parser.problems:
        lines = (textwrap.fill(p, 116, initial_indent="  ", subsequent_indent="    ") for p in parser.problems)
        parser.epilog = "command groups not available:\n" + "\n".join(lines)


def build_parser() -> Parser:
    """Return the argument parser of the `hvcu` command."""
    parser = Parser(prog="hvcu", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_VersionAction, help="print hvcu's version and lmms-eval's, then exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    data = sub.add_parser("data", help="dataset utilities: validate").add_subparsers(
        dest="data_command", required=True, metavar="SUBCOMMAND"
    )
    val = data.add_parser(
        "validate",
        help="check a dataset (folder, JSON/parquet file, 'hub[:REPO]' or 'smoke'); exit 1 on any problem",
    )
    val.add_argument(
        "source",
        help="a local copy (folder or JSON/parquet file), 'hub' or 'hub:REPO[@REV]', or 'smoke' (the bundled sample)",
    )
    val.add_argument("--no-decode", action="store_true", help="do not decode every image (faster)")
    val.add_argument(
        "--no-cache",
        action="store_true",
        help="decode every image, even those whose content decoded before ($HVCU_CACHE_DIR verdict cache)",
    )
    val.set_defaults(func=_cmd_validate)

    score = sub.add_parser(
        "score",
        help="re-score the authors' own result files (their evaluator's Result/<Family>/<Indep|Context>/<model>.json)"
        " with the paper's metrics; lmms-eval runs: `report`; human answer sheets: `human score`",
    )
    score.add_argument("files", nargs="+", type=Path, help="result files or folders (searched recursively)")
    score.add_argument(
        "--family",
        help=f"family of every file when neither its path nor its content says it ({', '.join(FAMILIES)}, "
        "or a split or file stem such as Implication_Understanding)",
    )
    score.add_argument(
        "--reparse", action="store_true", help="parse the raw replies with both hvcu's parser and the authors' rule"
    )
    score.add_argument(
        "--format", choices=["table", "json"], default="table", help="tables (default) or one JSON list on stdout"
    )
    score.set_defaults(func=_cmd_score)

    chains = sub.add_parser(
        "chains", help="per-sample chains (questions, replies, letters, verdict) from lmms-eval's --log_samples files"
    )
    chains.add_argument("paths", nargs="+", type=Path, help="lmms-eval output folders or samples files")
    chains.add_argument("--out", type=Path, help="write JSONL here instead of stdout")
    chains.set_defaults(func=_cmd_chains)

    report = sub.add_parser(
        "report", help="ranked leaderboard and paper-layout tables from lmms-eval run folders, beside the paper's rows"
    )
    report.add_argument("runs", nargs="+", type=Path, help="lmms-eval --output_path folders or results files")
    report.add_argument(
        "--format",
        choices=["md", "csv", "latex", "json", "html"],
        help="md, csv, latex or json print every table in full to stdout without --out (without --format: the "
        "tables fitted to 120 columns, your runs first; with --out: md); html needs --out DIR (a static site: "
        "index.html, models/, figures/, the chain browser)",
    )
    report.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write here instead of printing: one file per table (html: the site), figures/ and leaderboard.json",
    )
    report.add_argument(
        "--base",
        type=Path,
        metavar="LEADERBOARD_JSON",
        help="a published leaderboard.json: the new runs are added to its rows without re-reading the old runs "
        "(a model already on it as a run is refused)",
    )
    report.add_argument("--no-reference", action="store_true", help="leave out the paper's rows, human and chance")
    report.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="SOURCE",
        help="html: data the chain browser may show images of (a folder, hub, hub:REPO[@REV] or smoke; repeatable); "
        "each is used only for runs whose recorded fingerprint it matches, never a folder a samples log names",
    )
    report.add_argument(
        "--compare", action="store_true", help="two models, A then B: Δ tables with paired tests (B tuned vs A base)"
    )
    report.add_argument(
        "--summary",
        action="store_true",
        help="print only a short leaderboard (your runs, then the best [paper] rows, human, chance) with which runs "
        "differ significantly, where the files are and the commands that print every table; with --out the files "
        "are written as usual",
    )
    report.set_defaults(func=_cmd_report)

    _add_command_groups(parser, sub)
    from hvcu_tasks.export import add_parser as add_export_task

    add_export_task(sub)

    cache = sub.add_parser("cache", help="the hvcu_context request cache: list").add_subparsers(
        dest="cache_command", required=True, metavar="SUBCOMMAND"
    )
    listing = cache.add_parser("list", help="list each model of a request cache and its runs (state, ranks, counts)")
    listing.add_argument(
        "root",
        nargs="?",
        type=Path,
        help="the cache folder (default: $HVCU_CACHE_DIR/requests-v2, the one hvcu_context uses)",
    )
    listing.set_defaults(func=_cmd_cache_list)

    tasks = sub.add_parser("tasks-dir", help="print the task folder for lmms-eval --include_path")
    tasks.set_defaults(func=_cmd_tasks_dir)

    tiny = sub.add_parser("tiny-model", help="build a tiny random VLM (offline stand-in; its answers are noise)")
    tiny.add_argument("out", type=Path, help="folder to write the model into (a Hugging Face model folder)")
    tiny.add_argument(
        "--arch",
        choices=["qwen2_5_vl", "qwen3_vl", "llava", "llava_next"],
        default="qwen2_5_vl",
        help="architecture, as lmms-eval's qwen2_5_vl, qwen3_vl and llava_hf backends load it (default qwen2_5_vl)",
    )
    tiny.add_argument("--seed", type=int_range(0, 2**31 - 1), default=0, help="seed of the random weights (default 0)")
    tiny.set_defaults(func=_cmd_tiny_model)
    return parser


class _StdoutClosed(BrokenPipeError):
    """Writing to stdout failed because its reader went away (`hvcu chains | head`)."""


class _GuardedStdout:
    """Stdout as the commands see it: a broken pipe while writing here is raised as _StdoutClosed, and again by
    every later flush (argparse's help swallows the first one: `hvcu --help | true` must not exit 0)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._closed = False

    def _guard(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self._stream, method)(*args)
        except _StdoutClosed:
            raise
        except BrokenPipeError as exc:
            self._closed = True
            raise _StdoutClosed(*exc.args) from exc

    def write(self, text: str) -> int:
        """Write to stdout, marking a broken pipe as stdout's."""
        return self._guard("write", text)

    def writelines(self, lines: Iterable[str]) -> None:
        """Write lines to stdout, marking a broken pipe as stdout's (not one raised while making the lines)."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Flush stdout, marking a broken pipe as stdout's (one met before as well)."""
        if self._closed:
            raise _StdoutClosed("stdout was closed by its reader")
        self._guard("flush")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `hvcu` command line and return its exit status."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in parser.unavailable:
        print(f"error: {parser.unavailable[argv[0]]}", file=sys.stderr)
        return 2
    stdout = sys.stdout
    sys.stdout = _GuardedStdout(stdout)
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit:  # -h, --version or a usage error, said already: a closed stdout shows in this flush
            sys.stdout.flush()
            raise
        for problem in parser.failed:  # a broken group (not a stale install): said until it is fixed
            print(f"warning: {problem}", file=sys.stderr)
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below, not at interpreter exit
        return code
    except _StdoutClosed:  # `hvcu chains | head`: the reader has what it wanted; leave quietly
        try:  # what is still buffered goes nowhere at exit, instead of a second broken pipe
            os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
        except (OSError, ValueError):  # no file descriptor (a test's stream): nothing to flush at exit
            pass
        return 141  # 128 + SIGPIPE, as a shell reports a process stopped by a closed pipe
    except (DataError, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError as exc:  # not stdout: a model server or a child process closed its end
        print(f"error: a connection or pipe closed while this command was writing to it ({exc})", file=sys.stderr)
        return 1
    except OSError as exc:  # a full disk, a read-only folder: one line naming the file, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if isinstance(sys.stdout, _GuardedStdout):
            sys.stdout = stdout


if __name__ == "__main__":
    sys.exit(main())
