"""The one way the toolkit reads JSON and JSONL: every decode failure becomes one `JsonReadError` line.

Nesting deeper than MAX_DEPTH, an integer past Python's digit limit, bytes that are not UTF-8, a key given twice
(where asked) and syntax errors raise `JsonReadError` (`FILE:LINE: reason`); `loads_reply` never raises.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from pathlib import Path
from typing import Any

from hvcu_tasks.core.records import unique_object

MAX_DEPTH = 100
"""Deepest nesting of arrays and objects accepted; no file or reply the toolkit reads needs more than ~10."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class JsonReadError(ValueError):
    """A JSON text could not be read; `source`, `line` and `reason` say where and why, `str()` in one line."""

    def __init__(self, reason: str, source: str | Path | None = None, line: int | None = None) -> None:
        self.reason = " ".join(str(reason).split())
        self.source = None if source is None else str(source)
        self.line = line
        where = self.source if self.source is not None else "JSON text"
        super().__init__(f"{where}{'' if line is None else f':{line}'}: {self.reason}")


def _too_deep(text: str) -> bool:
    """Whether a JSON text nests deeper than MAX_DEPTH, strings skipped; scanned only past MAX_DEPTH brackets."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:  # the scan costs 2x json.loads: benchmarks/json_reads.py
        return False
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(1 if c in "[{" else -1 for c in brackets), default=0) > MAX_DEPTH


def loads(
    text: str | bytes, *, source: str | Path | None = None, line: int | None = None, unique_keys: bool = False
) -> Any:
    """Parse one JSON text; raise JsonReadError naming `source` (and `line`) when it cannot be read."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            why = f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
            raise JsonReadError(why, source, line) from None
    if _too_deep(text):
        raise JsonReadError(f"nested deeper than {MAX_DEPTH} levels of arrays/objects", source, line)
    try:
        return json.loads(text, object_pairs_hook=unique_object if unique_keys else None)
    except json.JSONDecodeError as exc:  # a whole file's error names the file's line; a JSONL line keeps its own
        at = line if line is not None or source is None else exc.lineno
        why = f"not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})"
        raise JsonReadError(why, source, at) from None
    except ValueError as exc:  # a key given twice (unique_keys), an integer past the digit limit
        digits = "digits" in str(exc) and "limit" in str(exc)
        why = "holds an integer longer than Python's 4300-digit limit" if digits else str(exc)
        raise JsonReadError(why, source, line) from None


def loads_field(text: str) -> Any:
    """Parse JSON text held in a data field (duplicate keys refused); raise ValueError(reason) when it is not JSON."""
    try:
        return loads(text, unique_keys=True)
    except JsonReadError as exc:
        raise ValueError(exc.reason) from None


def read_json(path: str | Path, *, unique_keys: bool = False) -> Any:
    """Read one JSON file; raise JsonReadError (`FILE:LINE: reason`) when it is not readable JSON, OSError if absent."""
    with open(path, "rb") as f:  # not Path.read_bytes: tests count image reads through it
        return loads(f.read(), source=path, unique_keys=unique_keys)


def loads_reply(text: str | bytes) -> tuple[Any, str | None]:
    """Parse a model or server reply; return (value, None), or (None, 'unusable reply: ...') — never raises."""
    try:
        return loads(text), None
    except JsonReadError as exc:
        return None, f"unusable reply: {exc.reason}"


def raw_decode(text: str, start: int) -> tuple[Any, int] | None:
    """Decode the JSON value starting at `start` of text; (value, end), or None when none is readable there."""
    try:
        value, end = json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    return None if _too_deep(text[start:end]) else (value, end)


def json_safe(value: Any) -> Any:
    """Return `value` with every NaN or infinity replaced by None, so that it dumps as strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
