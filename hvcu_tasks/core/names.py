"""Names read from data files: one line of printable text, one portable path component (pure string rules).

Also the extension order the authors' loader tries for an image file, and a URL's public form (public_url).
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit, urlunsplit

MAX_NAME_BYTES = 200

IMAGE_EXTENSIONS: tuple[str, ...] = (".jpg", ".png", ".webp", ".jpeg")
"""Extensions an image file of a local copy or the hub may have, in the order the authors' loader tries them."""

LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""A UTF-16 surrogate code point: never part of valid Unicode text, and it cannot be written as UTF-8."""

NOT_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""What a name read from a file may not hold: control characters (line breaks included), lone surrogates, line and
paragraph separators, bidirectional overrides. None has a visible form in a table cell, a figure or a file name."""


def name_problem(value: str) -> str | None:
    """Return why a name read from a file is not one line of printable text (None when it is)."""
    found = NOT_TEXT.search(value)
    if found is None:
        return None
    char = found.group()
    kind = "a lone surrogate" if "\ud800" <= char <= "\udfff" else "a control character"
    return f"{ascii(value)[:120]} holds {kind} (U+{ord(char):04X})"


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


def name_key(name: str) -> str:
    """Return the form under which two names share one file on macOS or Windows (NFC, then case-folded)."""
    return unicodedata.normalize("NFC", name).casefold()


_CREDENTIAL = re.compile(r"key|token|secret|passw|credential|auth|header", re.IGNORECASE)
"""Words that mark an argument name as holding credentials (anywhere in it): never in the identity, never on disk."""

_NOT_SECRET = re.compile(
    r"(?:max|min|num|budget|thinking|reasoning)_(?:[a-z]+_)*tokens|keyframes?|keypoints?|authors?", re.IGNORECASE
)
"""Parts of argument names that are settings although they hold a credential word (max_new_tokens, keyframes)."""


def is_secret_name(name: str) -> bool:
    """Whether an argument name says it holds a credential (api_keys, extra_headers, hf_token, auth, ...)."""
    return bool(_CREDENTIAL.search(_NOT_SECRET.sub("", name)))


URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s,'\"<>]*")  # a scheme, ://, up to a space, comma, quote or bracket


def public_url(text: str) -> str:
    """Return a URL without its user, password, query and fragment (where keys hide); other text unchanged."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return text
    if not (parts.scheme and parts.netloc):
        return text
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def public_urls(text: str) -> str:
    """Return a text with every URL in it made public (public_url): the one rule for a URL shown anywhere."""
    return URL.sub(lambda found: public_url(found.group()), text)
