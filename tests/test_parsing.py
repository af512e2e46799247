"""parse_choice: the release's known failures, realistic replies, and properties that must always hold."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hvcu_tasks import parse_choice

OPTIONS = {"A": "Joy", "B": "Sadness", "C": "Red", "D": "Solid"}

# (reply, expected key) — each row a reply a real model gave or a failure of the authors' parser.
TABLE = [
    ("B", "B"),
    (" b ", "B"),
    ("(B)", "B"),
    ("B)", "B"),
    ("[B]", "B"),
    ("B.", "B"),
    ("**B**", "B"),
    ("B: Sadness", "B"),
    ("B - Sadness", "B"),
    ("B. Sadness", "B"),
    ("Option B", "B"),
    ("The answer is (B).", "B"),
    ("The correct answer is B because the figure is crying.", "B"),
    ("Answer: B Sadness", "B"),
    ("Final answer: C", "C"),
    ("Based on the image, B.", "B"),
    ("B\n\nThe tear on the face shows grief.", "B"),
    ("B. Because the image shows tears; option A is wrong", "B"),
    ("<think>A looks plausible, but the tear means B.</think>\nB", "B"),
    ("<think>It could be A", None),  # unclosed reasoning: no answer given
    ("reasoning that was opened in the prompt...</think> C", "C"),
    ("```\nB\n```", "B"),
    ("```text\nAnswer: D\n```", "D"),
    ("A. Joy\nB. Sadness\nC. Red\nD. Solid\nAnswer: B", "B"),
    ("A. Joy\nB. Sadness\nC. Red\nD. Solid", None),  # only echoed the options
    ("A ... actually B", "B"),
    ("I first thought A, but actually it's C.", "C"),
    ("It is not A; it is D.", "D"),
    ("Sadness", "B"),
    ("sadness.", "B"),
    ("Red.", "C"),  # the release parses this as D
    ("Solid.", "D"),
    ("Blue.", None),  # the release parses this as D
    ("a", "A"),
    ("a man standing in the rain", None),  # the article "a" is not option A
    ("A man standing in the rain conveys sadness", "B"),  # names option B's text; "A" is the article
    ("A man standing in the rain looks sad", None),
    ("$\\boxed{B}$", "B"),
    ("\\boxed{\\text{C}}", "C"),
    ("The answer is \\boxed{Sadness}", "B"),
    ("Ｂ", "B"),  # full-width letter
    ("答案：（Ｃ）。", "C"),  # full-width punctuation
    ("It could be A or B.", None),
    ("The answer is B or C.", None),  # names two options
    ("The answer is A/B", None),
    ("Both A and B are plausible but C fits best.", "C"),
    ("B seems the best choice here.", "B"),
    ("D is the most likely.", "D"),
    ("C is better than D", None),
    ("B is incorrect; the answer is A.", "A"),
    ("Looking at the options: A is joy, B is sadness. The figure cries, so B.", "B"),
    ("answer - d", "D"),  # a lower-case letter counts only where nothing follows it
    ("the answer is a metaphor for loss", None),
    ('The correct option is "B".', "B"),
    ("My answer: (D) Solid", "D"),
    ("E", None),  # not an option
    ("The answer is E.", None),
    ("", None),
    ("   ", None),
]


@pytest.mark.parametrize(("reply", "expected"), TABLE)
def test_realistic_replies(reply: str, expected: str | None) -> None:
    assert parse_choice(reply, OPTIONS) == expected


def test_a_plain_sequence_of_keys_works_as_options() -> None:
    assert parse_choice("The answer is (C).", ["A", "B", "C", "D"]) == "C"
    assert parse_choice("The answer is (C).", "ABCD") == "C"


def test_a_letter_outside_the_item_options_is_rejected() -> None:
    assert parse_choice("D", ["A", "B", "C"]) is None
    assert parse_choice("Answer: D", {"A": "x", "B": "y"}) is None


def test_none_reply_and_empty_options_give_none() -> None:
    assert parse_choice(None, OPTIONS) is None
    assert parse_choice("A", []) is None


KEYS = st.lists(st.sampled_from(list("ABCDEFGH")), min_size=1, max_size=8, unique=True)
DECORATIONS = [
    "{k}",
    "({k})",
    "{k})",
    "{k}.",
    "Answer: {k}",
    "The answer is ({k}).",
    "Option {k}",
    "**{k}**",
    "<think>hmm</think>{k}",
    "\\boxed{{{k}}}",
    "```\n{k}\n```",
    "{k}: because of the image",
]


@given(keys=KEYS, data=st.data())
def test_any_decorated_key_round_trips(keys: list[str], data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(keys))
    template = data.draw(st.sampled_from(DECORATIONS))
    assert parse_choice(template.format(k=key), keys) == key


@given(reply=st.text(alphabet=string.printable + "（）：。Ａｂ", max_size=80), keys=KEYS)
def test_never_returns_a_key_outside_the_options(reply: str, keys: list[str]) -> None:
    result = parse_choice(reply, keys)
    assert result is None or result in keys


@given(reply=st.text(max_size=200))
def test_never_raises_on_arbitrary_text(reply: str) -> None:
    parse_choice(reply, OPTIONS)
