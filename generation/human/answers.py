"""Import filled answer sheets (CSV from the page's download button or from a spreadsheet), checked strictly.

Every row must name a known annotator, the level that annotator was assigned, a (family, id) on the
sheets and an answer A-D or blank (blank = no answer: scored wrong and counted as invalid). A row given
twice, or an annotator whose answers miss items of their sheet, is an error; every problem is reported
with its file, line, sample id and field.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path

from generation.human.assign import Assignment, parse_level
from hvcu_tasks.core.families import LEVEL_NAMES, OPTION_KEYS
from hvcu_tasks.core.schema import DataError, Problem
from hvcu_tasks.data.files import csv_uncell
from hvcu_tasks.data.loaders import family_from_name

REQUIRED = ("annotator", "level", "family", "id", "answer")
Answers = dict[str, dict[tuple[str, str], str | None]]
"""annotator -> (family, sample id) -> chosen letter, None when left blank."""

Row = tuple[int, dict[str, str]]


def answer_files(paths: Iterable[Path]) -> list[Path]:
    """Expand folders to the CSV files directly in them; every path must exist."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob("*.csv"))
            if not found:
                raise FileNotFoundError(f"{p}: no answer file (*.csv) in it")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise FileNotFoundError(f"{p}: no such file or folder")
    return files


def read_rows(path: Path) -> list[Row]:
    """Return (line number, row) for every data row of a CSV answer file, after checking its header."""
    try:
        with Path(path).open(encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f)
            header = [h.strip() for h in (reader.fieldnames or [])]
            missing = [c for c in REQUIRED if c not in header]
            if missing:
                raise ValueError(f"{path}: line 1: header lacks column(s) {missing}; found {header}")
            reader.fieldnames = header
            rows = []
            for row in reader:
                if any((v or "").strip() for k, v in row.items() if k is not None):
                    cells = {k: csv_uncell((v or "").strip()) for k, v in row.items() if k is not None}
                    rows.append((reader.line_num, cells))
            return rows
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc}); save the sheet as CSV UTF-8") from exc
    except csv.Error as exc:
        raise ValueError(f"{path}: not a readable CSV file ({exc})") from exc


def collect_answers(files: Sequence[tuple[str, Sequence[Row]]], assignment: Assignment) -> Answers:
    """Check every row against the assignment and return the answers; DataError lists every problem."""
    items = {i.key for i in assignment.items}
    answers: Answers = {name: {} for members in assignment.groups.values() for name in members}
    first_seen: dict[tuple[str, str, str], str] = {}
    problems: list[Problem] = []
    refused: set[str] = set()  # annotators with a refused row: coverage is checked once their rows are fixed
    for source, rows in files:
        for line, row in rows:
            annotator = row["annotator"]
            problem = _check_row(row, annotator, assignment, items)
            key = (family_from_name(row["family"]) or "", row["id"])
            where = f"{source}:{line}"
            if problem is None:
                seen_at = first_seen.setdefault((annotator, *key), where)
                if seen_at != where:
                    problem = ("id", f"{annotator} answered {key[0]}/{key[1]} twice (first at {seen_at})")
            if problem is not None:
                problems.append(Problem(where, row["id"] or "-", *problem))
                refused.add(annotator)
                continue
            answers[annotator][key] = row["answer"].upper() or None
    for level, members in assignment.groups.items():
        for annotator in members:
            got = answers[annotator]
            missing = [f"{f}/{i}" for f, i in sorted(items - set(got))]
            if not got and annotator not in refused:
                problems.append(
                    Problem("answer files", "-", "annotator", f"no answers from {annotator} (level {level})")
                )
            elif missing and annotator not in refused:
                problems.append(
                    Problem(
                        "answer files",
                        missing[0],
                        "id",
                        f"{annotator} (level {level}) left {len(missing)} item(s) of their sheet out, "
                        f"e.g. {', '.join(missing[:3])}; keep the row with a blank answer to count it wrong",
                    )
                )
    if problems:
        raise DataError(problems)
    return answers


def _check_row(
    row: dict[str, str], annotator: str, assignment: Assignment, items: set[tuple[str, str]]
) -> tuple[str, str] | None:
    """Return (field, message) for the first thing wrong with one answer row, None when it is fine."""
    assigned = assignment.level_of(annotator)
    if assigned is None:
        return "annotator", f"{annotator!r} is in no group of the assignment"
    try:
        level = parse_level(row["level"])
    except ValueError as exc:
        return "level", str(exc)
    if level != assigned:
        return "level", f"{annotator} was assigned level {assigned} ({LEVEL_NAMES[assigned]}), row says {level}"
    family = family_from_name(row["family"]) if row["family"] else None
    if family is None or (family, row["id"]) not in items:
        return "id", f"unknown item {row['family']}/{row['id']}: not on the sheets of this assignment"
    if row["answer"] and row["answer"].upper() not in OPTION_KEYS:
        return "answer", f"{row['answer']!r} is not one of {', '.join(OPTION_KEYS)} or blank"
    return None


def read_answers(paths: Iterable[Path], assignment: Assignment) -> Answers:
    """Read answer CSV files (or folders of them) and check them against the assignment."""
    return collect_answers([(str(p), read_rows(p)) for p in answer_files(paths)], assignment)
