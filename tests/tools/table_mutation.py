"""Mutate the module-level tables and constants of the core files and check that a test notices (make mutation).

mutmut mutates code inside functions only, so what a module defines at its top level (the parsers' regex word
lists, the cleaning and phrase tables, the punctuation map, the veto window's numbers, the metric prefixes) is never
changed by it. This script makes those mutants itself, from each file's syntax tree:

- every word of a plain-word regex alternation, `(?:not|n't|no|...)`, dropped in turn;
- every entry of a module-level dict, tuple or list literal (also inside a call, e.g. `str.maketrans({...})`)
  dropped in turn, when the literal has at least two entries;
- every module-level integer constant moved by +1 and by -1.

For each mutant it writes a copy of the package with that one file changed, runs the file's fast tests against the
copy and reports the mutants no test notices. A mutant listed in EQUIVALENT behaves like the original; it is shown
with the reason and not counted. Exit status 1 when a mutant that is not equivalent survives.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "hvcu_tasks"

TARGETS: dict[str, tuple[str, ...]] = {
    "hvcu_tasks/core/parsing.py": ("tests/test_parsing_rules.py", "tests/test_parsing.py"),
    "hvcu_tasks/core/official_parsing.py": ("tests/test_official_parsing.py", "tests/test_official_metrics.py"),
    "hvcu_tasks/core/prompts.py": ("tests/test_prompts.py", "tests/test_golden_requests.py"),
    "hvcu_tasks/core/metrics.py": (
        "tests/test_metrics.py",
        "tests/test_metric_names.py",
        "tests/test_analysis_metrics.py",
    ),
}
"""Each mutated file and the fast tests that must notice a change to its tables."""

ALTERNATION = re.compile(r"\(\?:((?:\\b)?[a-zA-Z' \\s+?=:-]+(?:\|(?:\\b)?[a-zA-Z' \\s+?=:-]+)+)\)")
"""A group of plain words: `(?:word|\\bword|two words|...)`."""

EQUIVALENT: dict[str, str] = {
    "hvcu_tasks/core/parsing.py: drop \\bisn't in (\\bnot|n't|\\bno|...)": '"n\'t" in the same list matches "isn\'t"',
    "hvcu_tasks/core/parsing.py: drop answer in (answer|option|choice|...)": (
        'the answer-statement pattern reads every "answer [is|:] X"'
    ),
    "hvcu_tasks/core/parsing.py: drop answer in (answer|option|choice)": (
        'the answer-statement pattern reads "answer would be X" from "answer" on'
    ),
    "hvcu_tasks/core/parsing.py: drop is in (is|would be|should be|...)": (
        'the verb pattern reads "answer is X" too ("answer" is one of its verbs)'
    ),
    "hvcu_tasks/core/parsing.py: drop : in (is|would be|should be|...)": (
        'the verb pattern reads "answer: X" too ("answer" is one of its verbs)'
    ),
    "hvcu_tasks/core/parsing.py: drop is in (is|would be|:)": 'the verb pattern reads "option/choice is X" anyway',
    "hvcu_tasks/core/parsing.py: drop : in (is|would be|:)": 'the verb pattern reads "option/choice: X" anyway',
    **{
        f"hvcu_tasks/core/official_parsing.py: SEARCH_BEFORE: 50 -> {n}": (
            "a negation vetoes only when it starts at most 20 before the phrase, and no negation can start inside"
            " another of its pattern, so what the window's first 30 characters hold or cut never reaches a veto"
        )
        for n in (49, 51)
    },
    **{
        f"hvcu_tasks/core/official_parsing.py: SEARCH_AFTER: 20 -> {n}": (
            "a negation vetoes only when it ends at most 10 after the phrase start, and every negation ends in a"
            " fixed word, so cutting the window at 19 or 21 leaves every such match as it was"
        )
        for n in (19, 21)
    },
    "hvcu_tasks/core/official_parsing.py: END_FROM: -15 -> -16": (
        "the shortest negation (DON'T, 5 characters) starts at most 20 before the phrase, so none ends before -15"
    ),
    **{
        f"hvcu_tasks/core/official_parsing.py: END_TO: 10 -> {n}": (
            "a negation that overlaps the phrase ends with its ANSWER/OPTION/CHOICE, 6 after the start; one after"
            " the phrase follows its letter and a mark, 14 or more after: none ends 9 to 11 after"
        )
        for n in (9, 11)
    },
    "hvcu_tasks/core/parsing.py: _CJK_PUNCT: drop key '」'": (
        "a closing corner quote after a key: the key patterns look after it only for a word character or an"
        " apostrophe, and neither '」' nor '\"' is one"
    ),
    "hvcu_tasks/core/parsing.py: drop the answer is\\s+ in (it'?s\\s+|the answer is\\s+)#2": (
        '"so the answer is X" is an answer statement anyway'
    ),
}
"""'file: mutant label' -> why that mutant behaves exactly like the original."""


@dataclass(frozen=True)
class Mutant:
    """One change to one file: a label that names it and the file's whole mutated source."""

    file: str
    label: str
    source: str

    @property
    def name(self) -> str:
        """The mutant's stable name, 'file: label'."""
        return f"{self.file}: {self.label}"


def _offsets(source: str) -> list[int]:
    """UTF-8 byte offset of the start of each line (1-based line numbers index it from 1), as `ast` counts columns."""
    starts = [0, 0]
    for line in source.encode("utf-8").splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _span(node: ast.AST, lines: list[int]) -> tuple[int, int]:
    """Start and end UTF-8 byte offsets of a node in the source."""
    return lines[node.lineno] + node.col_offset, lines[node.end_lineno] + node.end_col_offset


def _splice(source: str, start: int, end: int, text: str = "") -> str:
    """The source with bytes start..end replaced by `text`."""
    data = source.encode("utf-8")
    return (data[:start] + text.encode("utf-8") + data[end:]).decode("utf-8")


def _shown(words: list[str]) -> str:
    """Name a word list by its first three words."""
    return "|".join(words[:3]) + ("|..." if len(words) > 3 else "")


def word_drops(file: str, source: str) -> Iterator[Mutant]:
    """Every word of every plain-word alternation in the file, dropped in turn."""
    seen: dict[str, int] = {}
    for m in ALTERNATION.finditer(source):
        words = m.group(1).split("|")
        seen[m.group(1)] = seen.get(m.group(1), 0) + 1
        again = f"#{seen[m.group(1)]}" if seen[m.group(1)] > 1 else ""
        for i, word in enumerate(words):
            shorter = "|".join(words[:i] + words[i + 1 :])
            mutated = source[: m.start(1)] + shorter + source[m.end(1) :]
            yield Mutant(file, f"drop {word} in ({_shown(words)}){again}", mutated)


def _top_level_values(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """(assigned name, value) of every module-level assignment."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            yield node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            yield node.target.id, node.value


def _drop_entry(source: str, spans: list[tuple[int, int]], index: int) -> str:
    """The source with entry `index` of a literal removed, with the comma that separates it."""
    start, end = spans[index]
    if index + 1 < len(spans):
        end = spans[index + 1][0]
    else:
        start = spans[index - 1][1]
    return _splice(source, start, end)


def entry_drops(file: str, source: str) -> Iterator[Mutant]:
    """Every entry of every module-level dict/tuple/list literal of two or more entries, dropped in turn."""
    tree = ast.parse(source)
    lines = _offsets(source)
    for name, value in _top_level_values(tree):
        if name == "__all__":
            continue
        rows = {id(e) for n in ast.walk(value) if isinstance(n, (ast.Tuple, ast.List)) for e in n.elts}
        for node in ast.walk(value):
            if id(node) in rows:
                continue  # a row of a table (e.g. one (pattern, replacement, why) triple): dropped whole, not split
            if isinstance(node, ast.Dict) and None not in node.keys and len(node.keys) >= 2:
                spans = [(_span(k, lines)[0], _span(v, lines)[1]) for k, v in zip(node.keys, node.values, strict=True)]
                for i, key in enumerate(node.keys):
                    yield Mutant(file, f"{name}: drop key {ast.unparse(key)}", _drop_entry(source, spans, i))
            elif isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) >= 2 and not _is_generator_arg(node):
                spans = [_span(e, lines) for e in node.elts]
                for i, elt in enumerate(node.elts):
                    shown = ast.unparse(elt)
                    shown = shown if len(shown) <= 60 else shown[:57] + "..."
                    yield Mutant(file, f"{name}: drop entry {i} ({shown})", _drop_entry(source, spans, i))


def _is_generator_arg(node: ast.AST) -> bool:
    """Whether a tuple is a target or a comprehension's loop variable (never a table)."""
    return isinstance(getattr(node, "ctx", None), ast.Store)


def int_moves(file: str, source: str) -> Iterator[Mutant]:
    """Every module-level integer constant (also in a tuple assignment) moved by +1 and by -1."""
    tree = ast.parse(source)
    lines = _offsets(source)
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        for value, name in zip(values, names * len(values) if len(names) == 1 else names, strict=False):
            number = value.operand if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub) else value
            if isinstance(number, ast.Constant) and type(number.value) is int:
                start, end = _span(value, lines)
                current = ast.literal_eval(value)
                for moved in (current + 1, current - 1):
                    label = f"{ast.unparse(name)}: {current} -> {moved}"
                    yield Mutant(file, label, _splice(source, start, end, str(moved)))


def mutants_of(file: str) -> list[Mutant]:
    """Every mutant of one file, each of which still compiles."""
    source = (ROOT / file).read_text(encoding="utf-8")
    found = [*word_drops(file, source), *entry_drops(file, source), *int_moves(file, source)]
    compiled = []
    for mutant in found:
        try:
            compile(mutant.source, file, "exec")
        except SyntaxError:
            continue
        compiled.append(mutant)
    return compiled


class Sandbox:
    """A copy of the package in a temporary folder, where one file at a time is replaced."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        shutil.copytree(PACKAGE, folder / "hvcu_tasks", ignore=shutil.ignore_patterns("__pycache__"))

    def noticed(self, file: str, source: str, tests: tuple[str, ...]) -> bool:
        """Whether the tests fail with `file` replaced by `source` (the original is put back afterwards)."""
        target = self.folder / file
        original = target.read_text(encoding="utf-8")
        target.write_text(source, encoding="utf-8")
        try:
            command = [
                sys.executable,
                "-P",
                "-m",
                "pytest",
                "-x",
                "-q",
                "-p",
                "no:cacheprovider",
                "-m",
                "not slow and not hypothesis",
            ]
            result = subprocess.run(
                [*command, *tests],
                cwd=ROOT,
                env={"PYTHONPATH": str(self.folder), "PATH": "/usr/bin:/bin", "HOME": str(self.folder)},
                capture_output=True,
            )
        finally:
            target.write_text(original, encoding="utf-8")
        if result.returncode not in (0, 1):
            raise RuntimeError(f"pytest could not run (exit {result.returncode}):\n{result.stdout.decode()[-2000:]}")
        return result.returncode == 1


def main(argv: list[str] | None = None) -> int:
    """Run every mutant of the chosen files; print the score per file and every survivor."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=list(TARGETS), help="files to mutate (default: all targets)")
    parser.add_argument("--list", action="store_true", help="list the mutants without running them")
    args = parser.parse_args(argv)
    unknown = [f for f in args.files if f not in TARGETS]
    if unknown:
        parser.error(f"not a target: {', '.join(unknown)} (targets: {', '.join(TARGETS)})")
    failing = 0
    with tempfile.TemporaryDirectory(prefix="table-mutation-") as tmp:
        sandbox = Sandbox(Path(tmp))
        for file in args.files:
            mutants = mutants_of(file)
            if args.list:
                print("\n".join(m.name for m in mutants))
                continue
            if sandbox.noticed(file, (ROOT / file).read_text(encoding="utf-8"), TARGETS[file]):
                raise RuntimeError(f"the tests of {file} fail on the unchanged package; fix them first")
            survivors = [m for m in mutants if not sandbox.noticed(file, m.source, TARGETS[file])]
            missing = [m for m in survivors if m.name not in EQUIVALENT]
            counted = len(mutants) - (len(survivors) - len(missing))
            print(f"\n{file} tables and constants: {counted - len(missing)} of {counted} mutants noticed")
            for m in survivors:
                why = f"[equivalent: {EQUIVALENT[m.name]}]" if m.name in EQUIVALENT else "[NOT NOTICED]"
                print(f"  {m.label}: {why}")
            failing += len(missing)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
