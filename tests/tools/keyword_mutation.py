"""Drop one word at a time from the parser's keyword and negation lists and check that a test notices (make mutation).

mutmut mutates code inside functions only, so the module-level regex word lists of hvcu_tasks/core/parsing.py (negation
words, linking words after "A", LaTeX wrappers) and the word lists inside its patterns are never shortened by it.
This script does that: for every alternation of plain words, `(?:not|n't|no|...)`, it writes a copy of the package
with one word removed, runs the parser's fast tests against the copy and reports the words whose removal no test
notices. A word listed in REDUNDANT is covered by another entry of the same pattern; it is shown, not counted.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "hvcu_tasks" / "core" / "parsing.py"
TESTS = ["tests/test_parsing_rules.py", "tests/test_parsing.py"]
ALTERNATION = re.compile(r"\(\?:((?:\\b)?[a-z' \\s+?=:-]+(?:\|(?:\\b)?[a-z' \\s+?=:-]+)+)\)")
"""A group of plain words: `(?:word|\\bword|two words|...)`."""

REDUNDANT = {
    "\\bisn't in (\\bnot|n't|\\bno|...)": '"n\'t" in the same list matches every "isn\'t"',
    "answer in (answer|option|choice|...)": 'the answer-statement pattern reads every "answer [is|:] X"',
    "answer in (answer|option|choice)": 'the answer-statement pattern reads "answer would be X" from "answer" on',
    "is in (is|would be|should be|...)": 'the verb pattern reads "answer is X" too ("answer" is one of its verbs)',
    ": in (is|would be|should be|...)": 'the verb pattern reads "answer: X" too ("answer" is one of its verbs)',
    "is in (is|would be|:)": 'the verb pattern reads "option/choice is X" without the adjective',
    ": in (is|would be|:)": 'the verb pattern reads "option/choice: X" without the adjective',
    "the answer is\\s+ in (it'?s\\s+|the answer is\\s+)#2": '"so the answer is X" is an answer statement anyway',
}
"""'word in (its list, shortened)' -> why dropping that word changes nothing."""


def label(word: str, words: list[str]) -> str:
    """Name one word of one list: 'word in (first|words|...)'."""
    shown = "|".join(words[:3]) + ("|..." if len(words) > 3 else "")
    return f"{word} in ({shown})"


def word_drops(source: str) -> list[tuple[str, str]]:
    """Return (label, source without that word) for every word of every plain-word alternation."""
    drops = []
    seen: dict[str, int] = {}
    for m in ALTERNATION.finditer(source):
        words = m.group(1).split("|")
        seen[m.group(1)] = seen.get(m.group(1), 0) + 1
        again = f"#{seen[m.group(1)]}" if seen[m.group(1)] > 1 else ""  # the same list a second time
        for i, word in enumerate(words):
            shorter = "|".join(words[:i] + words[i + 1 :])
            drops.append((label(word, words) + again, source[: m.start(1)] + shorter + source[m.end(1) :]))
    return drops


def noticed(mutated: str, workdir: Path) -> bool:
    """Whether the parser's tests fail against a copy of the package whose parsing.py is `mutated`."""
    package = workdir / "hvcu_tasks"
    shutil.rmtree(package, ignore_errors=True)
    shutil.copytree(SOURCE.parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "parsing.py").write_text(mutated, encoding="utf-8")
    command = [sys.executable, "-P", "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "not hypothesis"]
    result = subprocess.run(
        [*command, *TESTS], cwd=ROOT, env={"PYTHONPATH": str(workdir), "PATH": "/usr/bin:/bin"}, capture_output=True
    )
    if result.returncode not in (0, 1):
        raise RuntimeError(f"pytest could not run (exit {result.returncode}):\n{result.stdout.decode()[-2000:]}")
    return result.returncode == 1


def main() -> int:
    """Print the score and every word whose removal no test noticed; return 1 when one is not in REDUNDANT."""
    drops = word_drops(SOURCE.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="keyword-mutation-") as tmp:
        unnoticed = [word for word, mutated in drops if not noticed(mutated, Path(tmp))]
    missing = [w for w in unnoticed if w not in REDUNDANT]
    counted = len(drops) - (len(unnoticed) - len(missing))
    print(f"\nhvcu_tasks/parsing.py keyword lists: {counted - len(missing)} of {counted} one-word drops noticed")
    for word in unnoticed:
        print(f"  {word}: " + (f"[redundant: {REDUNDANT[word]}]" if word in REDUNDANT else "[NOT NOTICED]"))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
