"""Pull the JSON object out of a model reply: bare, in a code fence, or wrapped in prose."""

from __future__ import annotations

import re
from typing import Any

from hvcu_tasks.core.names import LONE_SURROGATE
from hvcu_tasks.data import jsonio

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)


class ReplyError(ValueError):
    """A reply held no JSON object with the required keys; the message says what was wrong."""


def _objects(text: str) -> list[dict[str, Any]]:
    """Return every top-level JSON object found in text, in order."""
    found, i = [], 0
    while (start := text.find("{", i)) != -1:
        decoded = jsonio.raw_decode(text, start)
        if decoded is None:
            i = start + 1
            continue
        value, end = decoded
        if isinstance(value, dict):
            found.append(value)
        i = end
    return found


def _has_surrogate(value: Any) -> bool:
    """Whether any string inside a JSON value holds a lone surrogate (it cannot be written as UTF-8)."""
    if isinstance(value, str):
        return LONE_SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    return False


def text_fields(obj: dict[str, Any], names: tuple[str, ...]) -> dict[str, str]:
    """Return the named fields as stripped, non-empty strings; raise ReplyError naming a field that is not one."""
    out = {}
    for name in names:
        value = obj.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ReplyError(f"{name!r} must be non-empty text, got {value!r}"[:300])
        out[name] = value.strip()
    return out


def parse_json_reply(text: str, required: tuple[str, ...]) -> dict[str, Any]:
    """Return the last JSON object in the reply that has every required key (extra keys are kept)."""
    if not text or not text.strip():
        raise ReplyError("empty reply")
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        for obj in reversed(_objects(candidate)):
            if all(k in obj for k in required):
                if _has_surrogate(obj):
                    raise ReplyError("reply holds a lone surrogate (broken Unicode) in its JSON")
                return obj
    raise ReplyError(f"no JSON object with keys {list(required)} in reply: {text[:200]!r}")
