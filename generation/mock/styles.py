"""How the mock's multiple-choice replies name the letter: the reply styles and the `--styles` value that picks them."""

from __future__ import annotations

from collections.abc import Callable

# Reply styles by name: each names the letter in a way hvcu_tasks.core.parsing.parse_choice reads; which of them the
# authors' rule (core/official_parsing.py) reads is measured in tests/test_mock_server.py and docs/offline-recipes.md.
MC_STYLES: dict[str, Callable[[str, str], str]] = {
    "letter": lambda key, _text: key,
    "letter-period": lambda key, _text: f"{key}.",
    "letter-text": lambda key, text: f"{key}. {text}",
    "answer-is": lambda key, _text: f"The answer is {key}.",
    "answer-colon": lambda key, _text: f"Answer: {key}",
    "bold": lambda key, _text: f"**{key}**",
    "answer-is-paren": lambda key, _text: f"The answer is ({key}).",
    "paren": lambda key, _text: f"({key})",
    "option": lambda key, _text: f"Option {key}",
    "boxed": lambda key, _text: f"\\boxed{{{key}}}",
    "prose": lambda key, _text: f"Based on the image, {key}.",
}
DEFAULT_STYLES = "letter:6,letter-period,letter-text,answer-is,bold"
"""Mostly a bare letter, as models answer when asked for "the option's letter", and only forms both parsers read."""


def parse_styles(text: str) -> tuple[tuple[str, int], ...]:
    """Return the (style, weight) pairs of a `--styles` value: NAME[:WEIGHT] separated by commas (weight 1 if none)."""
    found = []
    for part in text.split(","):
        name, _, weight = part.strip().partition(":")
        if name not in MC_STYLES:
            raise ValueError(f"no reply style {name!r}; the styles: {', '.join(MC_STYLES)}")
        if weight and not (weight.isdigit() and int(weight) > 0):
            raise ValueError(f"{part.strip()!r}: a style's weight is a whole number above 0")
        found.append((name, int(weight or 1)))
    if len({name for name, _ in found}) != len(found):
        raise ValueError(f"{text!r}: a style is named twice (give it a weight instead, NAME:WEIGHT)")
    return tuple(found)
