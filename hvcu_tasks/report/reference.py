"""The paper's reference rows (Tables 2 and 8), shipped as data with their source."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hvcu_tasks.data import jsonio

REFERENCE_FILE = Path(__file__).resolve().parent / "paper_reference.json"


@dataclass(frozen=True)
class ReferenceRow:
    """One published row: per-family level accuracies and the Score, with its table."""

    model: str
    setting: str
    families: dict[str, dict[str, float]]
    score: float
    source: str
    human: bool = False


@cache
def reference_rows() -> tuple[ReferenceRow, ...]:
    """Return every shipped reference row."""
    data = jsonio.read_json(REFERENCE_FILE)
    return tuple(
        ReferenceRow(r["model"], r["setting"], r["families"], float(r["score"]), r["source"], bool(r.get("human")))
        for r in data["rows"]
    )


def rows_for(setting: str) -> list[ReferenceRow]:
    """Return the reference rows of one setting, in the paper's order."""
    return [r for r in reference_rows() if r.setting == setting]


def general_reference() -> tuple[str, list[str], list[tuple[str, list[float]]]]:
    """Return the paper's Table 7: source, column labels, and (model, values) rows."""
    data = jsonio.read_json(REFERENCE_FILE)["general"]
    return data["source"], list(data["columns"]), [(r["model"], list(r["values"])) for r in data["rows"]]
