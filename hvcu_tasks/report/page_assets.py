"""The report pages' style sheets, scripts and static markup: files in hvcu_tasks/report/assets/ (package data)."""

from __future__ import annotations

from importlib.resources import files


def asset(name: str) -> str:
    """Return the text of one file of hvcu_tasks/report/assets/ (a style sheet, a script, static markup)."""
    return (files("hvcu_tasks.report") / "assets" / name).read_text(encoding="utf-8")
