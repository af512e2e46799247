"""The authors' answer-parsing rule, for metrics comparable with the paper (the `*_official` metrics).

Behaviour follows the VCU-Bridge release (`Evaluation/answer_parser.py`), known failures included: it
rejects `(B)`, `Option B`, `The answer is (B).`; reads `Red.` as D and an echoed option list as A; drops
an answer inside a code fence; keeps an unclosed <think>. Our own parser is `hvcu_tasks.core.parsing`; this
one only exists so that a score can be set beside the paper's rows. The rule, in order:

1. Clean: the CLEANING table below, then strip and upper-case.
2. No A-D character left: unparsable. The whole text is one of A/B/C/D: that letter.
3. The first A-D character, when a period follows it.
4. Answer phrases (PHRASES), tried from the last one in the text to the first; a phrase is vetoed when
   a negation (NEGATIONS) lies close to where the phrase starts (see `_vetoed`). First survivor wins.
5. The last line: a bare letter (the line before is not one), or "X." (the line before does not start so).
6. Otherwise unparsable. The letter is never checked against the item's options.
"""

from __future__ import annotations

import re

__all__ = ["parse_official"]

LETTERS = frozenset("ABCD")

# Step 1: (pattern, replacement, what it removes), applied in this order to the raw reply.
CLEANING: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"<think>.*?</think>", re.I | re.S), "", "closed <think> blocks with their content"),
    (re.compile(r"```.*?```", re.S), "", "fenced code with its content"),
    (re.compile(r"`([^`]+)`"), r"\1", "inline-code backticks (text kept)"),
    (re.compile(r"\*\*([^*]+)\*\*"), r"\1", "** bold ** markers"),
    (re.compile(r"__([^_]+)__"), r"\1", "__ bold __ markers"),
    (re.compile(r"\*([^*]+)\*"), r"\1", "* italic * markers"),
    (re.compile(r"_([^_]+)_"), r"\1", "_ italic _ markers"),
    (re.compile(r"~~([^~]+)~~"), r"\1", "~~ strike ~~ markers"),
    (re.compile(r"^#+\s+", re.M), "", "heading marks (with the whitespace after them)"),
)

# What may follow the letter of an answer phrase: optional spaces then . , ， 。, or the end, or a newline.
_AFTER_LETTER = r"(?=\s*[.,，。]|\s*$|\n)"

# Step 4: the answer phrases; group 1 is the letter. A phrase's position is where its match starts.
PHRASES: tuple[re.Pattern[str], ...] = tuple(
    re.compile(head + r"([A-D])" + _AFTER_LETTER)
    for head in (
        r"ANSWER\s*[:：]\s*",  # ANSWER: X
        r"ANSWER\s+IS:?\s*",  # ANSWER IS X, ANSWER IS: X
        r"(?:OPTION|CHOICE)\s+IS:?\s*",  # OPTION IS X, CHOICE IS X
        r"(?:CHOOSE|SELECT)(?:\s+OPTION)?\s+",  # CHOOSE X, SELECT OPTION X
    )
)

# Negations that veto a nearby phrase (matched without word boundaries, as the release does).
NEGATIONS: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?:NOT|WRONG|INCORRECT|ISN'T|AREN'T)\s+(?:THE\s+)?(?:ANSWER|OPTION|CHOICE)"),
    re.compile(r"DON'T"),
    re.compile(r"(?:ANSWER|OPTION)\s*[:：]?\s*[A-D]\s+IS\s+(?:WRONG|INCORRECT)"),
)

# The veto window, in characters relative to the start `s` of the phrase match: negations are searched in
# text[s - 50 : s + 20]; one vetoes when it starts at or after s - 20 and ends between s - 15 and s + 10.
SEARCH_BEFORE, SEARCH_AFTER = 50, 20
START_NOT_BEFORE = 20
END_FROM, END_TO = -15, 10

_LINE_STARTS_WITH_LETTER_DOT = re.compile(r"([A-D])\.")


def _clean(reply: str) -> str:
    """Apply the cleaning table, strip and upper-case."""
    for pattern, replacement, _what in CLEANING:
        reply = pattern.sub(replacement, reply)
    return reply.strip().upper()


def _exact(text: str) -> str | None:
    """The whole text is a single letter."""
    return text if text in LETTERS else None


def _first_letter_then_period(text: str) -> str | None:
    """The first A-D character of the text, when the next character is a period."""
    first = re.search(r"[A-D]", text)
    if first and text[first.end() : first.end() + 1] == ".":
        return first.group()
    return None


def _vetoed(text: str, start: int) -> bool:
    """Whether a negation lies close enough to a phrase starting at `start` to cancel it."""
    lo = max(0, start - SEARCH_BEFORE)
    window = text[lo : min(len(text), start + SEARCH_AFTER)]
    for negation in NEGATIONS:
        for m in negation.finditer(window):
            neg_start, neg_end = lo + m.start(), lo + m.end()
            if neg_start >= start - START_NOT_BEFORE and start + END_FROM <= neg_end <= start + END_TO:
                return True
    return False


def _last_unvetoed_phrase(text: str) -> str | None:
    """The letter of the last answer phrase (by start position) that no negation vetoes."""
    found = [m for pattern in PHRASES for m in pattern.finditer(text)]
    for m in sorted(found, key=lambda m: m.start(), reverse=True):
        if not _vetoed(text, m.start()):
            return m.group(1)
    return None


def _last_line(text: str) -> str | None:
    """A last line that is a bare letter, or starts "X.", unless the line before has the same form."""
    lines = text.strip().split("\n")
    last = lines[-1].strip()
    before = lines[-2].strip() if len(lines) > 1 else None
    if last in LETTERS and before is not None and before not in LETTERS:
        return last
    starts = _LINE_STARTS_WITH_LETTER_DOT.match(last)
    if starts and (before is None or not _LINE_STARTS_WITH_LETTER_DOT.match(before)):
        return starts.group(1)
    return None


# Steps 2-5 after the "any A-D at all" check, in priority order.
RULES = (_exact, _first_letter_then_period, _last_unvetoed_phrase, _last_line)


def parse_official(reply: str | None) -> str | None:
    """Return the letter (A-D) the authors' parser reads in a reply, or None where it reads none."""
    if not isinstance(reply, str) or not reply:
        return None
    text = _clean(reply)
    if not re.search(r"[A-D]", text):
        return None
    for rule in RULES:
        letter = rule(text)
        if letter is not None:
            return letter
    return None
