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


@dataclass(frozen=True)
class GeneralRow:
    """One model of the paper's Table 7: its general benchmarks per column, and its HVCU-Bench Scores when the
    paper gives them outside Tables 2 and 8 (the tuned model: Table 6)."""

    model: str
    values: dict[str, float]
    hvcu: dict[str, float] | None = None


@cache
def general_reference() -> tuple[str, tuple[GeneralRow, ...]]:
    """Return the paper's Table 7: its source and one row per model (named as in the paper's Table 2)."""
    data = jsonio.read_json(REFERENCE_FILE)["general"]
    rows = (
        GeneralRow(r["model"], dict(zip(data["columns"], r["values"], strict=True)), r.get("hvcu"))
        for r in data["rows"]
    )
    return data["source"], tuple(rows)
