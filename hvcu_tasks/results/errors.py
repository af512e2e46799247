"""The report's one error type and its check of a text read from a results file (shared by runs and run_record)."""

from __future__ import annotations

from hvcu_tasks.data.public import name_problem


class ReportError(ValueError):
    """Raised when run folders cannot be turned into a report; the message says which folder and why."""


def checked_text(value: str, where: str, what: str) -> str:
    """Return a text read from a file when it is one line of printable text; refuse it in one line naming `where`."""
    problem = name_problem(value)
    if problem:
        raise ReportError(f"{where}: {what} {problem}; a {what} is one line of text: fix the file")
    return value
