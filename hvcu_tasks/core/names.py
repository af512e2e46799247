"""Names read from data files: one portable path component (pure string rules), and the image extensions.

The extension order is the one the authors' loader tries for an image file.
"""

from __future__ import annotations

import re
import unicodedata

MAX_NAME_BYTES = 200

IMAGE_EXTENSIONS: tuple[str, ...] = (".jpg", ".png", ".webp", ".jpeg")
"""Extensions an image file of a local copy or the hub may have, in the order the authors' loader tries them."""

LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""A UTF-16 surrogate code point: never part of valid Unicode text, and it cannot be written as UTF-8."""


class UnsafeNameError(ValueError):
    """A value meant to be one path component could escape its folder or is not a usable file name."""


_WINDOWS_DEVICES = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"] + [f"{kind}{n}" for kind in ("COM", "LPT") for n in "0123456789"]
)
"""Names Windows reserves for devices, with any extension (`nul.txt` opens the null device, not a file)."""
_WINDOWS_FORBIDDEN = '<>|*?"'
"""Characters besides ':' and the separators that no Windows file name may hold."""


def _name_problem(text: str) -> str | None:
    """Return why `text` is not one portable path component, or None when it is."""
    if text in {".", ".."}:
        return "is a relative folder reference"
    if "/" in text or "\\" in text:
        return "contains a path separator"
    if text != text.strip():
        return "starts or ends with whitespace"
    if text.startswith("."):
        return "starts with '.' (a hidden file)"
    if any(unicodedata.category(ch) in {"Cc", "Cs", "Co", "Cn"} for ch in text):
        return "contains a control, surrogate or unassigned character"
    if any(unicodedata.category(ch) == "Cf" for ch in text):
        hidden = next(ch for ch in text if unicodedata.category(ch) == "Cf")
        return f"contains the invisible format character U+{ord(hidden):04X} (bidi, zero-width or a BOM)"
    if ":" in text:
        return "contains ':' (not allowed in file names on Windows)"
    bad = next((ch for ch in text if ch in _WINDOWS_FORBIDDEN), None)
    if bad:
        return f"contains {bad!r} (not allowed in file names on Windows)"
    if text.endswith("."):
        return "ends with '.' (Windows drops it, so two names would share one file)"
    if text.split(".")[0].rstrip(" ").upper() in _WINDOWS_DEVICES:
        return "is a Windows device name (CON, PRN, AUX, NUL, COM0-9, LPT0-9, with any extension)"
    if len(text.encode("utf-8")) > MAX_NAME_BYTES:
        return f"is longer than {MAX_NAME_BYTES} bytes"
    return None


def check_name(value: object, what: str = "name") -> str:
    """Return `value` as one safe path component, or raise UnsafeNameError saying what is wrong with it."""
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str):
        raise UnsafeNameError(f"{what} must be a string, got {type(value).__name__}")
    if not text:
        raise UnsafeNameError(f"{what} is empty")
    problem = _name_problem(text)
    if problem:
        raise UnsafeNameError(f"{what} {text!r} {problem}; use letters, digits, '-', '_' or '.'")
    return text
