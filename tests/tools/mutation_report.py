"""Print the mutation score of each mutated file and every surviving mutant after `mutmut run` (make mutation).

Reads mutmut's result files under mutants/ (run from the repository root). A survivor listed in EQUIVALENT is a
mutant no test can kill because it behaves exactly like the original; it is shown with that reason and counted
apart. Exit status 1 when a file scores below --min-score (killed / (checked - equivalent), in percent).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from mutmut.configuration import config
from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code

KILLED = ("killed", "timeout", "caught by type check")
"""Statuses that mean a test (or the time limit) noticed the mutant."""

_CASE = "upper-cases keywords of a pattern compiled with re.I (the key itself sits in (?-i:...), unchanged)"
_FOLDED = "rstrip('XX.XX') on casefolded text: casefold() leaves no upper-case X, so it strips what rstrip('.') does"
_STRICT = "zip(strict=...): both sides always have the same length"
_DEAD = "the 'level full' branch cannot run: an expansion asks for at most the room left on the level"

EQUIVALENT: dict[str, str] = {
    "hvcu_tasks.core.parsing.x__explicit_answer__mutmut_26": (
        "'>' vs '>=' at equal starts: patterns matching at one position begin with the same word and read the same key"
    ),
    "hvcu_tasks.core.official_parsing.x__vetoed__mutmut_23": (
        "'<= start + END_TO' vs '<': no negation ends exactly 10 after a phrase start (one overlapping the phrase"
        " ends 6 after it, one following it 14 or more after; see table_mutation's END_TO entries)"
    ),
    "hvcu_tasks.core.parsing.x__phrase_patterns__mutmut_12": (
        "the bracketed key's lower-case letters are redundant: every phrase pattern is compiled with re.I"
    ),
    "hvcu_tasks.core.parsing.x__key_mentioned_by_text__mutmut_26": _FOLDED,
    "hvcu_tasks.core.parsing.x__rule_echo__mutmut_18": _FOLDED,
    "hvcu_tasks.core.parsing.x__rule_echo__mutmut_22": _FOLDED,
    "hvcu_tasks.core.parsing.x__rule_echo__mutmut_32": (
        "when every line was an echo nothing is left, and no later rule finds a key in empty text"
    ),
    **{f"hvcu_tasks.core.parsing.x__phrase_patterns__mutmut_{n}": _CASE for n in (38, 46, 54, 65, 72, 74, 82, 96, 101)},
    **{f"hvcu_tasks.core.prompts.x_context_messages__mutmut_{n}": _STRICT for n in (29, 32, 33)},
    **{f"generation.mcts.x_expand__mutmut_{n}": _STRICT for n in (56, 59, 61)},
    **{f"generation.mcts.x_expand__mutmut_{n}": _DEAD for n in (80, 81, 82)},
    "generation.mcts.x_search__mutmut_5": (
        "the budget check before an expansion: past it, expand asks for (max_calls - calls) // 2 = 0 candidates and"
        " returns at once, so the tree is the same"
    ),
    "generation.mcts.xǁTreeǁreject__mutmut_5": "split(':', 1)[0] == split(':')[0]",
    "generation.mcts.xǁTreeǁreject__mutmut_8": "split(':', 1)[0] == split(':', 2)[0]",
    **{
        f"hvcu_tasks.core.documents.x_level_options__mutmut_{n}": (
            "zip(strict=...): a level's option keys and texts come from one list of (key, text) pairs (sample_rows)"
        )
        for n in (4, 7, 12)
    },
    **{
        f"hvcu_tasks.results.chains.x__add_line__mutmut_{n}": (
            "zip(strict=...): the lengths were checked equal just above (LevelMismatchError otherwise)"
        )
        for n in (63, 67, 68, 77, 81, 82)
    },
    "hvcu_tasks.results.chains.x_chains_of_file__mutmut_18": "'UTF-8' and 'utf-8' name the same codec",
    "hvcu_tasks.results.chains.x_chains_of_file__mutmut_19": "'UTF-8' and 'utf-8' name the same codec",
    **{
        f"hvcu_tasks.results.chains.x_chains_of_file__mutmut_{n}": (
            "the JSON error's own source and line: chains_of_file catches it and names the file and line itself"
        )
        for n in (34, 35, 37, 38)
    },
    **{
        f"hvcu_tasks.core.documents.x_circular_rows__mutmut_{n}": (
            "zip(strict=...): a row's option keys and texts come from one list of (key, text) pairs (level_rows)"
        )
        for n in (10, 13, 18)
    },
    **{
        f"hvcu_tasks.results.scores.x_error_propagation__mutmut_{n}": (
            "zip(LEVELS, LEVELS[1:], strict=False) vs no strict: the default is not strict either"
        )
        for n in (7, 10)
    },
    "hvcu_tasks.core.metrics.x_score_family__mutmut_38": (
        "chain[1].aspect vs chain[2].aspect: every level of a sample carries the sample's one aspect (Sample.aspect,"
        " written into each level's outcome by core.scoring.score_reply)"
    ),
    **{
        f"hvcu_tasks.core.metrics.xǁOutcomeǁfrom_dict__mutmut_{n}": (
            "bool(d.get('failed')) == bool(d.get('failed', False))"
        )
        for n in (68, 70)
    },
    "hvcu_tasks.report.stats.x_mcnemar__mutmut_32": "scipy's binomtest tests p = 0.5 by default",
    **{f"hvcu_tasks.report.stats.x_letters__mutmut_{n}": _STRICT for n in (43, 46, 47)},
    **{f"hvcu_tasks.report.uncertainty.x__family__mutmut_{n}": _STRICT for n in (33, 36, 37)},
    **{f"hvcu_tasks.report.uncertainty.x__ranks__mutmut_{n}": _STRICT for n in (28, 32, 37)},
    **{
        f"hvcu_tasks.report.uncertainty.x__ranks__mutmut_{n}": (
            "a significant pair's interval excludes 0: both its bounds have one sign, and neither is 0"
        )
        for n in (13, 14)
    },
    "hvcu_tasks.report.uncertainty.x__detectable_paired__mutmut_5": (
        "an assert for the type checker: only two runs with verdicts are compared paired"
    ),
}
"""Mutant name -> why it cannot be told apart from the original (names are stable while the function is unchanged)."""


def file_counts(path: Path) -> tuple[Counter[str], list[tuple[str, str]]]:
    """Return the status counts of one mutated file and its surviving mutants as (name, status)."""
    data = SourceFileMutationData(path=path)
    data.load()
    counts: Counter[str] = Counter()
    survivors = []
    for name, exit_code in sorted(data.exit_code_by_key.items(), key=lambda kv: _natural(kv[0])):
        status = status_by_exit_code[exit_code]
        if status == "survived" and name in EQUIVALENT:
            status = "equivalent"
        counts[status] += 1
        if status in ("survived", "equivalent", "no tests", "suspicious"):
            survivors.append((name, status))
    return counts, survivors


def _natural(name: str) -> tuple[str, int]:
    """Sort key putting mutant 2 before mutant 10."""
    stem, _, number = name.rpartition("_")
    return (stem, int(number) if number.isdigit() else 0)


def score(counts: Counter[str]) -> float | None:
    """Return killed / (checked - equivalent) in percent, None when nothing was checked."""
    killed = sum(counts[s] for s in KILLED)
    checked = sum(n for s, n in counts.items() if s not in ("not checked", "skipped", "equivalent"))
    return 100.0 * killed / checked if checked else None


def changed_lines(name: str, path: Path) -> str:
    """Return the -/+ lines of a mutant's diff against the original function."""
    diff = get_diff_for_mutant(name, path=path).splitlines()
    return "\n".join("      " + line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---")))


def main(argv: list[str] | None = None) -> int:
    """Print the per-file table and the survivors; return 1 when a file is under --min-score."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-score", type=float, default=0.0, help="fail when a file scores below this (percent)")
    parser.add_argument("--no-diff", action="store_true", help="list survivors by name only")
    args = parser.parse_args(argv)
    if not Path("mutants").is_dir():
        print("mutation_report: no mutants/ folder here; run `make mutation` (mutmut run) first", file=sys.stderr)
        return 2
    paths = [Path(p) for p in config().only_mutate]
    rows, listing, failed = [], [], []
    for path in paths:
        counts, survivors = file_counts(path)
        value = score(counts)
        total = sum(counts.values())
        rows.append(
            f"{str(path):28} {total:6} {sum(counts[s] for s in KILLED):7} {counts['survived']:9} "
            f"{counts['equivalent']:6} {counts['no tests'] + counts['suspicious']:8} {counts['not checked']:8} "
            + ("     -" if value is None else f"{value:5.1f}%")
        )
        if value is not None and value < args.min_score:
            failed.append(f"{path} {value:.1f}%")
        for name, status in survivors:
            reason = f"  [equivalent: {EQUIVALENT[name]}]" if name in EQUIVALENT else f"  [{status}]"
            listing.append(f"  {name}{reason}" + ("" if args.no_diff else "\n" + changed_lines(name, path)))
    print(
        f"{'file':28} {'mutants':>6} {'killed':>7} {'survived':>9} {'equiv':>6} {'no tests':>8} {'unchecked':>8} score"
    )
    print("\n".join(rows))
    print(f"\nSurviving mutants ({len(listing)}):" if listing else "\nNo surviving mutants.")
    print("\n".join(listing))
    if failed:
        print(f"\nBelow {args.min_score:g}%: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
