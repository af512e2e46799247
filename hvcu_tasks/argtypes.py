"""argparse value types that range-check numbers, so a bad option is a usage error naming it, not a late crash."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def int_range(low: int, high: int | None = None) -> Callable[[str], int]:
    """Return an argparse `type` accepting integers from `low` to `high` (inclusive; None: no upper bound)."""
    span = f"from {low} to {high}" if high is not None else f">= {low}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer {span}, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be an integer {span}, got {value}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its own messages
    return parse


def float_range(low: float, high: float, *, low_open: bool = False) -> Callable[[str], float]:
    """Return an argparse `type` accepting finite numbers in [low, high] (or (low, high] with `low_open`)."""
    span = f"{'(' if low_open else '['}{low:g}, {high:g}]"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number in {span}, got {text!r}") from None
        if not math.isfinite(value) or value < low or (low_open and value == low) or value > high:
            raise argparse.ArgumentTypeError(f"must be a number in {span}, got {text}")
        return value

    parse.__name__ = "number"
    return parse
