"""Canonical in-memory records for HVCU-Bench samples, and the problems found while building them."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hvcu_tasks.core.families import ASPECTS, LEVELS, OPTION_KEYS


@dataclass(frozen=True)
class Problem:
    """One defect in a dataset, located by file, record id and field."""

    source: str
    record: str
    field: str
    message: str

    def __str__(self) -> str:
        """Render as the one-line form printed by `hvcu data validate`."""
        return f"{self.source}: id={self.record}: {self.field}: {self.message}"


MAX_SHOWN = 20
"""How many problems an error message lists before it says how many more there are."""


def problem_lines(problems: list[Problem]) -> list[str]:
    """Return the one-line form of the first MAX_SHOWN problems, plus a count of the rest."""
    more = len(problems) - MAX_SHOWN
    return [str(p) for p in problems[:MAX_SHOWN]] + ([f"... and {more} more problem(s)"] if more > 0 else [])


class DataError(ValueError):
    """Raised when a dataset cannot be loaded; carries every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(problem_lines(self.problems)))


class TaskLoadError(SystemExit):
    """Ends an lmms-eval run whose HVCU-Bench task cannot load: every problem listed, the reason as the last line.

    A SystemExit on purpose: lmms-eval retries a task's data loading on any Exception (tenacity, up to 60 s)
    and its CLI prints and swallows every Exception, exiting 0. A SystemExit passes both untouched, so the
    process stops at once with exit status 1 and Python prints this message as the last thing it writes.
    """

    def __init__(self, family: str, source: str, problems: list[Problem]):
        self.family, self.source, self.problems = family, source, list(problems)
        if len(self.problems) == 1:
            reason = f"HVCU-Bench {family}: cannot load the data; no request was sent: {self.problems[0]}"
            lines = [reason]
        else:
            reason = (
                f"HVCU-Bench {family}: {len(self.problems)} problem(s) in {source!r} (listed above); "
                f"no request was sent. Check the whole dataset with `hvcu data validate {shlex.quote(source)}`"
            )
            lines = [*problem_lines(self.problems), reason]
        self.reason = reason
        super().__init__("\n".join(lines))
        for stream in (sys.stdout, sys.stderr):  # what was printed before stays before the reason, even piped
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):  # no stream, or a closed one
                pass


@dataclass(frozen=True)
class Level:
    """One multiple-choice question of a chain: L1 perception, L2 bridge or L3 connotation."""

    level: int
    question: str
    options: tuple[tuple[str, str], ...]
    answer: str


@dataclass(frozen=True)
class ImageRef:
    """Where a sample's image comes from: a file on disk or encoded bytes from a parquet cell."""

    path: Path | None = None
    data: bytes | None = field(default=None, repr=False)

    def describe(self) -> str:
        """Return a short human-readable location for messages."""
        return str(self.path) if self.path is not None else f"<{len(self.data or b'')} bytes>"


@dataclass(frozen=True)
class Sample:
    """One benchmark sample: an image and its three-level question chain."""

    id: str
    family: str
    aspect: str
    image: ImageRef | None
    levels: tuple[Level, ...]
    source: str = ""


def check_sample(sample: Sample) -> list[Problem]:
    """Return the structural problems of a sample (levels, options, answers, family, aspect)."""
    problems: list[Problem] = []

    def add(fld: str, msg: str) -> None:
        problems.append(Problem(sample.source, sample.id, fld, msg))

    if not sample.id:
        add("id", "empty id")
    if sample.family not in ASPECTS:
        add("family", f"unknown family {sample.family!r}; expected one of {sorted(ASPECTS)}")
    elif sample.aspect != "unknown" and sample.aspect not in ASPECTS[sample.family]:
        add("aspect", f"aspect {sample.aspect!r} does not belong to family {sample.family!r}")
    if sample.image is None:
        add("image", "no image found")
    got = [lv.level for lv in sample.levels]
    if got != list(LEVELS):
        add("qa_levels", f"expected exactly levels [1, 2, 3] in order, got {got}")
    for lv in sample.levels:
        where = f"qa_levels[level={lv.level}]"
        if not lv.question.strip():
            add(f"{where}.question", "empty question")
        keys = [k for k, _ in lv.options]
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            add(f"{where}.options", f"duplicate option key {', '.join(map(repr, repeated))}")
        elif keys != list(OPTION_KEYS):
            add(f"{where}.options", f"expected option keys A, B, C, D in order, got {keys}")
        texts = [t.strip().casefold() for _, t in lv.options]
        if any(not t for t in texts):
            add(f"{where}.options", "an option text is empty")
        elif len(set(texts)) != len(texts):
            add(f"{where}.options", "option texts are not distinct")
        if lv.answer not in keys:
            add(f"{where}.correct_answer_key", f"answer {lv.answer!r} is not one of the options {keys}")
    return problems
