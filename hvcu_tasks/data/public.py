"""Text the toolkit shows or writes: one line of printable text, a file-name collision key, no credentials
(credential-named arguments and a URL's user, password, query and fragment never reach a file or a log line).
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit, urlunsplit

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
