"""Annotator verdicts and team decisions: the records, their CSV columns, and strict reading of both files.

A verdict is one annotator's judgement of one candidate chain: for each level, is the marked answer
unambiguously supported by the image (yes/no), and do the three levels form a coherent chain from
perception to connotation (yes/no), plus an optional comment. Rows are counted as in a spreadsheet:
the header is row 1. Every error names the file, the row, the item and the field.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hvcu_tasks.core.names import check_name
from hvcu_tasks.data.files import csv_cell, csv_uncell, write_atomic

# The four yes/no questions asked per item, in form order; also the CSV column names.
QUESTIONS: tuple[str, str, str, str] = ("l1_supported", "l2_supported", "l3_supported", "coherent")
QUESTION_LABELS: Mapping[str, str] = {
    "l1_supported": "Is the marked L1 (perception) answer unambiguously supported by the image?",
    "l2_supported": "Is the marked L2 (bridge) answer unambiguously supported by the image?",
    "l3_supported": "Is the marked L3 (connotation) answer unambiguously supported by the image?",
    "coherent": "Do the three levels form a coherent chain from perception to connotation?",
}
VERDICT_COLUMNS: tuple[str, ...] = ("annotator", "round", "family", "id", *QUESTIONS, "comment")
# Read-only context the spreadsheet sheet carries beside the verdict columns; ignored on import.
CONTEXT_COLUMNS: tuple[str, ...] = (
    "aspect",
    "image",
    *(f"l{n}_{part}" for n in (1, 2, 3) for part in ("question", "options", "answer")),
)
DECISIONS: tuple[str, str, str] = ("keep", "discard", "revisit")
DECISION_COLUMNS: tuple[str, ...] = ("family", "id", "decision", "note")
DECISION_CONTEXT_COLUMNS: tuple[str, ...] = ("reasons",)
_YES = {"yes", "y"}
_NO = {"no", "n"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")

ItemKey = tuple[str, str]  # (family, id): ids are unique within a family only


def check_annotator_name(name: str) -> str:
    """Return the name if it is usable as a file name (letters, digits, '_', '.', '-'), else raise ValueError."""
    check_name(name, "annotator name")  # one path component: never '..', a separator or a hidden file
    if not _NAME.fullmatch(name):
        raise ValueError(f"annotator name {name!r}: use letters, digits, '_', '.' or '-' (no spaces)")
    return name


@dataclass(frozen=True)
class Verdict:
    """One annotator's yes/no answers on one candidate chain, and an optional comment."""

    annotator: str
    family: str
    id: str
    l1_supported: bool
    l2_supported: bool
    l3_supported: bool
    coherent: bool
    comment: str = ""

    @property
    def key(self) -> ItemKey:
        """The item this verdict is about."""
        return (self.family, self.id)

    def vote(self, question: str) -> bool:
        """Return the answer to one of QUESTIONS."""
        if question not in QUESTIONS:
            raise ValueError(f"unknown question {question!r}; expected one of {list(QUESTIONS)}")
        return bool(getattr(self, question))


@dataclass(frozen=True)
class Decision:
    """The team's consensus on one item of a round: keep, discard or revisit in the next round."""

    family: str
    id: str
    decision: str
    note: str = ""

    @property
    def key(self) -> ItemKey:
        """The item this decision is about."""
        return (self.family, self.id)


class VerdictError(ValueError):
    """A verdict or decisions file was refused; the message lists every problem (file, row, item, field)."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        shown = "\n".join(self.problems[:20])
        more = len(self.problems) - 20
        super().__init__(shown + (f"\n... and {more} more problem(s)" if more > 0 else ""))


def yes_no(value: bool) -> str:
    """Render a verdict answer as it is written in CSV files."""
    return "yes" if value else "no"


def _read_table(path: Path, required: Sequence[str], allowed: Sequence[str]) -> list[dict[str, str]]:
    """Read a CSV (UTF-8, BOM tolerated, ',' or ';' separated) and check its header; raise VerdictError if bad."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise VerdictError([f"{path}: cannot read as UTF-8 text: {exc}"]) from exc
    first = text.split("\n", 1)[0]
    delimiter = ";" if ";" in first and "," not in first else ","  # spreadsheets in some locales save with ';'
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = [h.strip() for h in (reader.fieldnames or [])]
    if not header:
        raise VerdictError([f"{path}: empty file (expected a header row with {list(required)})"])
    problems = []
    missing = [c for c in required if c not in header]
    if missing:
        problems.append(f"{path}: row 1: header: missing column(s) {missing}")
    unknown = [c for c in header if c not in allowed]
    if unknown:
        problems.append(f"{path}: row 1: header: unknown column(s) {unknown}; allowed: {list(allowed)}")
    dupes = sorted({c for c in header if header.count(c) > 1})
    if dupes:
        problems.append(f"{path}: row 1: header: repeated column(s) {dupes}")
    if problems:
        raise VerdictError(problems)
    reader.fieldnames = header
    rows = []
    for row_no, row in enumerate(reader, start=2):
        if None in row:  # DictReader files surplus cells under the key None
            problems.append(f"{path}: row {row_no}: more cells than the header has columns")
        rows.append({k: csv_uncell((v or "").strip()) for k, v in row.items() if k is not None})
    if problems:
        raise VerdictError(problems)
    return rows


def _where(path: Path, row_no: int, row: Mapping[str, str]) -> str:
    """Locate a row in messages: file, spreadsheet row number and item."""
    return f"{path}: row {row_no} (id={row.get('family', '')}/{row.get('id', '')})"


def read_verdicts(
    path: Path, round_no: int, candidates: Sequence[ItemKey], annotators: Sequence[str] | None = None
) -> list[Verdict]:
    """Read one annotator's verdict file for a round; every candidate exactly once, every answer yes/no."""
    path = Path(path)
    rows = _read_table(path, VERDICT_COLUMNS[:-1], (*VERDICT_COLUMNS, *CONTEXT_COLUMNS))
    wanted = set(candidates)
    problems: list[str] = []
    verdicts: list[Verdict] = []
    seen: dict[ItemKey, int] = {}
    names: set[str] = set()
    for row_no, row in enumerate(rows, start=2):
        where = _where(path, row_no, row)
        name = row["annotator"]
        if not name:
            problems.append(f"{where}: annotator: empty")
        else:
            names.add(name)
            if annotators is not None and name not in annotators:
                problems.append(f"{where}: annotator: {name!r} is not one of this audit's {list(annotators)}")
        if row["round"] != str(round_no):
            problems.append(f"{where}: round: {row['round']!r}, but this is round {round_no}")
        key = (row["family"], row["id"])
        if key not in wanted:
            problems.append(f"{where}: id: not a candidate of round {round_no}")
            continue
        if key in seen:
            problems.append(f"{where}: id: repeats row {seen[key]}")
            continue
        seen[key] = row_no
        answers = {}
        for q in QUESTIONS:
            value = row[q].lower()
            if value in _YES:
                answers[q] = True
            elif value in _NO:
                answers[q] = False
            else:
                got = "missing" if not value else f"{row[q]!r} is not"
                problems.append(f"{where}: {q}: {got} yes or no")
        if len(answers) == len(QUESTIONS):
            verdicts.append(Verdict(name, key[0], key[1], comment=row.get("comment", ""), **answers))
    if len(names) > 1:
        problems.append(f"{path}: annotator: one file per annotator, found {sorted(names)}")
    missing = [f"{f}/{i}" for f, i in candidates if (f, i) not in seen]
    if missing:
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        problems.append(f"{path}: id: no verdict for {len(missing)} candidate(s) of round {round_no}: {shown}")
    if problems:
        raise VerdictError(problems)
    order = {k: i for i, k in enumerate(candidates)}
    return sorted(verdicts, key=lambda v: order[v.key])


def read_decisions(path: Path, candidates: Sequence[ItemKey]) -> list[Decision]:
    """Read the team's decisions file: one row per decided item, decision keep|discard|revisit (blank = none)."""
    path = Path(path)
    rows = _read_table(path, DECISION_COLUMNS[:-1], (*DECISION_COLUMNS, *DECISION_CONTEXT_COLUMNS))
    wanted = set(candidates)
    problems: list[str] = []
    decisions: list[Decision] = []
    seen: dict[ItemKey, int] = {}
    for row_no, row in enumerate(rows, start=2):
        where = _where(path, row_no, row)
        key = (row["family"], row["id"])
        if key not in wanted:
            problems.append(f"{where}: id: not a candidate of this round")
            continue
        if key in seen:
            problems.append(f"{where}: id: repeats row {seen[key]}")
            continue
        seen[key] = row_no
        value = row["decision"].lower()
        if not value:
            continue  # an undecided row; the caller checks that every flagged item got a decision
        if value not in DECISIONS:
            problems.append(f"{where}: decision: {row['decision']!r} is not one of {list(DECISIONS)}")
            continue
        decisions.append(Decision(key[0], key[1], value, row.get("note", "")))
    if problems:
        raise VerdictError(problems)
    return decisions


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, object]]) -> None:
    """Write rows as UTF-8 CSV with '\\n' line ends (byte-stable, no cell a formula), replacing the file atomically."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: csv_cell(v) for k, v in row.items()} for row in rows)
    write_text(path, buffer.getvalue())


def write_text(path: Path, text: str) -> None:
    """Write text as UTF-8 through a temporary file and a rename, so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode("utf-8"))


def verdict_row(verdict: Verdict, round_no: int) -> dict[str, str]:
    """Render a verdict as a row of VERDICT_COLUMNS."""
    return {
        "annotator": verdict.annotator,
        "round": str(round_no),
        "family": verdict.family,
        "id": verdict.id,
        **{q: yes_no(verdict.vote(q)) for q in QUESTIONS},
        "comment": verdict.comment,
    }
