"""argparse value types that range-check numbers, so a bad option is a usage error naming it, not a late crash."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any


def _checked(kind: str, convert: Callable[[str], Any], span: str, inside: Callable[[Any], bool]) -> Callable:
    """Return an argparse `type` that converts with `convert` and accepts only values `inside` `span`."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind} {span}, got {text!r}") from None
        if not inside(value):
            raise argparse.ArgumentTypeError(f"must be {kind} {span}, got {text}")
        return value

    parse.__name__ = kind.split()[-1]  # argparse names the type in its own messages
    return parse


def int_range(low: int, high: int | None = None) -> Callable[[str], int]:
    """Return an argparse `type` accepting integers from `low` to `high` (inclusive; None: no upper bound)."""
    span = f"from {low} to {high}" if high is not None else f">= {low}"
    return _checked("an integer", int, span, lambda value: low <= value and (high is None or value <= high))


def float_range(low: float, high: float, *, low_open: bool = False) -> Callable[[str], float]:
    """Return an argparse `type` accepting finite numbers in [low, high] (or (low, high] with `low_open`)."""
    span = f"in {'(' if low_open else '['}{low:g}, {high:g}]"
    inside = (lambda v: low < v <= high) if low_open else (lambda v: low <= v <= high)
    return _checked("a number", float, span, lambda value: math.isfinite(value) and inside(value))
