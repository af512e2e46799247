"""parse_official: the authors' answer-parsing rule (VCU-Bridge Evaluation/answer_parser.py), step by step.

Every expected value below was worked out by hand from the authors' parser, including its known failures
(listed in the protocol note): this rule exists to give numbers comparable to the paper, not right ones.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hvcu_tasks.core.official_parsing import parse_official

# Step 1: cleaning (closed <think> blocks and code fences removed with their content, markdown markers
# removed keeping their text, heading marks dropped, strip, upper-case).
CLEANING = [
    ("<think>The answer is A.</think>C", "C"),
    ("<THINK>a.</Think>\nD", "D"),  # the think tag is matched in any case
    ("```\nB\n```", None),  # an answer inside a code fence is deleted with the fence
    ("The answer is\n```\nB\n```", None),
    ("`B`", "B"),
    ("**B**", "B"),
    ("__C__", "C"),
    ("*D*", "D"),
    ("_A_", "A"),
    ("~~A.~~", "A"),  # strike-through markers go, the struck text stays
    ("~~A~~ B", None),  # ... so this reads "A B": no rule fires
    ("# C", "C"),
    ("## Final\nD", "D"),
    ("#C", None),  # a heading mark needs whitespace after it
    ("**B.** Sadness", "B"),
    (" c \n", "C"),
    ("b", "B"),
]

# Step 2: no A-D anywhere -> unparsable; exactly one letter -> that letter.
NO_LETTER_OR_EXACT = [
    ("", None),
    ("   ", None),
    ("Yes", None),
    ("E", None),
    ("B", "B"),
    ("a", "A"),  # the word "a" becomes option A
]

# Step 3: the first A-D character anywhere, when a period follows it.
FIRST_LETTER_PERIOD = [
    ("B. Sadness", "B"),
    ("C.", "C"),
    ("Red.", "D"),  # R and E are not A-D; the D before the period is
    ("Solid.", "D"),
    ("Bad.", None),  # first A-D is B, followed by A: no period, and nothing else fires
    ("A. Joy\nB. Sadness\nC. Anger\nD. Fear", "A"),  # an echoed option list parses as A
    ("A. Hmm, actually B.", "A"),  # "A ... actually B" gives A
    ("<think>C. looks right, but let me check", "C"),  # an unclosed <think> is not removed
]

# Step 4: answer phrases, the last one first, with the negation veto.
PHRASES = [
    ("Answer: C", "C"),
    ("Answer：B", "B"),  # full-width colon
    ("The answer is D.", "D"),
    ("The answer is: B,", "B"),
    ("My choice is C", "C"),
    ("The correct option is A.", "A"),
    ("I choose B", "B"),
    ("I would select option D.", "D"),
    ("The answer is C\nbecause of the tears", "C"),  # a newline ends the letter
    ("最终 answer: A。", "A"),  # full-width full stop ends the letter
    ("Answer: A. No wait, the answer is C.", "C"),  # the last phrase wins
    ("Answer: B.\nIt is not the answer: C.", "B"),  # the last phrase is vetoed, the earlier one is not
    ("It is not the answer: C.", None),  # NOT THE ANSWER overlaps the phrase: vetoed
    ("Option A is wrong. Answer: C.", None),  # "OPTION A IS WRONG" is a negation: vetoed
    ("I choose B. Don't doubt it.", "B"),  # DON'T starts 10 after CHOOSE, ends 15 after: too late to veto
    ("Answer: B. Don't overthink it.", "B"),
]

# Step 5: the last line, when it is a bare letter or starts "X." (and the line before does not).
LAST_LINE = [
    ("Let me think.\nB", "B"),
    ("A\nB", None),  # the line before is a bare letter too
    ("The image shows a cat.\nC. Anger", "C"),
    ("See below\nA. Joy\nB. Sadness", None),  # the line before also starts "X."
    ("It shows grief\n\nD", "D"),
]

# The known failures of the authors' parser (protocol note): all rejected.
REJECTED = [
    "(A)",
    "A)",
    "B: Sadness",
    "B - Sadness",
    "Option B",
    "The answer is (B).",
    "Answer: B Sadness",
    "Based on the image, B.",
    "I cannot tell",
]


@pytest.mark.parametrize(
    ("reply", "expected"), CLEANING + NO_LETTER_OR_EXACT + FIRST_LETTER_PERIOD + PHRASES + LAST_LINE
)
def test_the_authors_rule_step_by_step(reply: str, expected: str | None) -> None:
    assert parse_official(reply) == expected


@pytest.mark.parametrize("reply", REJECTED)
def test_the_known_failures_are_rejected(reply: str) -> None:
    assert parse_official(reply) is None


def test_no_reply_is_unparsable() -> None:
    assert parse_official(None) is None


def test_a_letter_outside_the_items_options_is_never_rejected() -> None:
    # The rule never sees the options: "D" is D even for an item whose options stop at C.
    assert parse_official("D") == "D"
    assert parse_official("The answer is D.") == "D"


def _veto_text(gap: int) -> str:
    """DON'T, then `gap` characters of filler, then the answer phrase "answer: C"."""
    filler = " hesitate; the" + " " * (gap - 14)
    return "Don't" + filler + "answer: C"


def test_a_negation_starting_20_before_the_phrase_vetoes_it() -> None:
    text = _veto_text(15)
    assert text.upper().index("ANSWER") - text.upper().index("DON'T") == 20
    assert parse_official(text) is None


def test_a_negation_starting_21_before_the_phrase_does_not_veto_it() -> None:
    text = _veto_text(16)
    assert text.upper().index("ANSWER") - text.upper().index("DON'T") == 21
    assert parse_official(text) == "C"


def test_a_long_negation_starting_20_before_the_phrase_vetoes_it() -> None:
    # "NOT THE ANSWER" ends 6 before the phrase, inside the window; only where it starts decides.
    text = "Not the answer, and answer: C"
    assert text.upper().index("ANSWER:") - text.upper().index("NOT") == 20
    assert parse_official(text) is None


def test_a_long_negation_starting_21_before_the_phrase_does_not_veto_it() -> None:
    text = "Not the answer, then answer: C"
    assert text.upper().index("ANSWER:") - text.upper().index("NOT") == 21
    assert parse_official(text) == "C"


def test_a_negation_overlapping_the_phrase_vetoes_it() -> None:
    # "NOT ANSWER" starts 4 before the phrase and ends 6 after its start (the window allows up to 10 after).
    assert parse_official("Not answer: B.") is None


def test_a_negation_right_after_the_letter_is_past_the_window() -> None:
    # The closest a negation can follow a phrase: DON'T starts 9 and ends 14 after the phrase start (> 10).
    text = "Answer:B.Don't ask."
    assert text.upper().index("DON'T") + len("DON'T") == 14
    assert parse_official(text) == "B"


def test_a_negation_ending_16_after_the_phrase_start_does_not_veto() -> None:
    text = "Answer: B. Don't overthink it."
    assert text.upper().index("DON'T") + len("DON'T") == 16
    assert parse_official(text) == "B"


@given(st.text())
def test_never_raises_and_gives_a_letter_or_none(reply: str) -> None:
    assert parse_official(reply) in {None, "A", "B", "C", "D"}


@given(st.text(alphabet="ABCDabcd.:：,，。()* _~`#\n<>/thinkTHINKanswerANSWERisnot'", max_size=40))
def test_never_raises_on_replies_made_of_its_own_syntax(reply: str) -> None:
    assert parse_official(reply) in {None, "A", "B", "C", "D"}


# Each cleaning step, on a reply whose verdict it changes (the verdict without that step in brackets).
EACH_CLEANING_STEP_MATTERS = [
    ("<think>So B.</think>The answer is C.", "C"),  # [B: "SO B." gives the first letter then a period]
    ("```python\nprint('A.')\n```\nAnswer: C", "C"),  # [A: the fenced "A." would be the first letter-period]
    ("`B`.", "B"),  # [None: "`B`." has no letter directly before a period]
    ("**B**.", "B"),  # [None]
    ("__B__.", "B"),  # [None]
    ("*B*.", "B"),  # [None]
    ("_B_.", "B"),  # [None]
    ("~~B~~", "B"),  # [None: "~~B~~" is not a bare letter]
    ("# B", "B"),  # [None: "# B" is not a bare letter]
]


@pytest.mark.parametrize(("reply", "expected"), EACH_CLEANING_STEP_MATTERS)
def test_each_cleaning_step_changes_a_verdict(reply: str, expected: str) -> None:
    assert parse_official(reply) == expected


# Each negation word vetoes a phrase on its own (without the veto, the phrase's letter would be read).
EACH_NEGATION_VETOES = [
    "Not the answer: B",
    "Wrong answer: B",
    "Incorrect answer: B",
    "Isn't the answer: B",
    "Aren't the answer: B",
    "Not the option is B",
    "Not the choice is B",
    "Don't choose B",
    "Answer B is wrong, answer: C",
    "Option B is wrong, answer: C",
    # "OPTION B IS INCORRECT" is 21 characters: a phrase must start within 20 of it, so only a squeezed one does.
    "OptionB is incorrectAnswer: C",
]


@pytest.mark.parametrize("reply", EACH_NEGATION_VETOES)
def test_each_negation_word_vetoes_a_nearby_phrase(reply: str) -> None:
    assert parse_official(reply) is None


# Each answer phrase is read on its own (no earlier rule reads these replies).
EACH_PHRASE_READS = [
    ("So my answer: C", "C"),
    ("The answer is C", "C"),
    ("The option is C", "C"),
    ("The choice is C", "C"),
    ("I choose C", "C"),
    ("I select option C", "C"),
]


@pytest.mark.parametrize(("reply", "expected"), EACH_PHRASE_READS)
def test_each_answer_phrase_is_read(reply: str, expected: str) -> None:
    assert parse_official(reply) == expected


@pytest.mark.parametrize("reply", [5, 1.0, b"A", ["A"], {"answer": "A"}])
def test_a_reply_that_is_not_text_is_unparsable(reply: object) -> None:
    assert parse_official(reply) is None
