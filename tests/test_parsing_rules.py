"""parse_choice rule by rule: every keyword and negation word of the parser with a case that fires and a near miss.

Each row is (reply, expected key); the expected keys are written by hand from the rule table in
hvcu_tasks/core/parsing.py. A keyword's positive case is built so that the reply decides differently when that one
keyword is missing from its list (usually: two options named, only the keyword's statement picks one).
"""

from __future__ import annotations

import pytest

from hvcu_tasks import parse_choice

KEYS = ["A", "B", "C", "D"]
OPTIONS = {"A": "Joy", "B": "Sadness", "C": "Red", "D": "Solid"}


def check(reply: str, expected: str | None, options=None) -> None:
    """Assert the parse of one reply."""
    assert parse_choice(reply, KEYS if options is None else options) == expected


# --- explicit answer statements: "answer <connective> X" -----------------------------------------------------
# Without its statement each reply names two options ("A looks ..., B") and so commits to none.
ANSWER_CONNECTIVES = [
    ("A looks tempting, but the answer is B.", "B"),
    ("A looks tempting, but the answer would be B.", "B"),
    ("A looks tempting, but the answer should be B.", "B"),
    ("A looks tempting, but the answer will be B.", "B"),
    ("A looks tempting, but the answer = B.", "B"),
    ("A looks tempting, but the answer: B.", "B"),
    ("A looks tempting, but the answer - B.", "B"),
    ("A looks tempting, but the final answer B.", "B"),
    ("A looks tempting, but the answer is option B.", "B"),
    ('A looks tempting, but the answer is "B".', "B"),
]
ANSWER_NEAR_MISSES = [
    ("A looks tempting, but the answer could be B.", None),
    ("A looks tempting, but the answers B.", None),
    ("A looks tempting, but the answer might be B.", None),
]


@pytest.mark.parametrize(("reply", "expected"), ANSWER_CONNECTIVES + ANSWER_NEAR_MISSES)
def test_answer_statement_connectives(reply: str, expected: str | None) -> None:
    check(reply, expected)


# "<adjective> option/choice would be X": only this rule reads "would be" after option/choice.
ADJECTIVES = [
    ("A looks tempting, but the correct choice would be B.", "B"),
    ("A looks tempting, but the best choice would be B.", "B"),
    ("A looks tempting, but the right choice would be B.", "B"),
    ("A looks tempting, but the most likely choice would be B.", "B"),
    ("A looks tempting, but the most appropriate option would be B.", "B"),
    ("A looks tempting, but the best option would be B.", "B"),
]
ADJECTIVE_NEAR_MISSES = [
    ("A looks tempting, but the worst choice would be B.", None),
    ("A looks tempting, but the likely choice would be B.", None),  # "most likely", not "likely"
    ("A looks tempting, but the best guess would be B.", None),
]


@pytest.mark.parametrize(("reply", "expected"), ADJECTIVES + ADJECTIVE_NEAR_MISSES)
def test_adjective_statements(reply: str, expected: str | None) -> None:
    check(reply, expected)


# "<verb> X": choosing verbs.
VERBS = [
    ("A looks tempting, but my answer B.", "B"),
    ("A looks tempting, but option B.", "B"),
    ("A looks tempting, but my choice: B.", "B"),
    ("A looks tempting, but I choose B.", "B"),
    ("A looks tempting, but I chose B.", "B"),
    ("A looks tempting, but I select B.", "B"),
    ("A looks tempting, but I selected B.", "B"),
    ("A looks tempting, but I pick B.", "B"),
    ("A looks tempting, but I picked B.", "B"),
    ("A looks tempting, but I go with B.", "B"),
    ("A looks tempting, but I am going with B.", "B"),
    ("A looks tempting, but I opt for B.", "B"),
    ("A looks tempting, but the option is B.", "B"),
]
VERB_NEAR_MISSES = [
    ("A looks tempting, but I considered B.", None),
    ("A looks tempting, but I would go for B.", None),
    ("A looks tempting, but I went with B.", None),
]


@pytest.mark.parametrize(("reply", "expected"), VERBS + VERB_NEAR_MISSES)
def test_choosing_verbs(reply: str, expected: str | None) -> None:
    check(reply, expected)


# Corrections after a leading key: "A, actually B" takes the correction; any other word keeps the leading key.
CORRECTIONS = [
    ("A, actually B.", "B"),
    ("A, rather B.", "B"),
    ("A, instead B.", "B"),
    ("A. Correction: B.", "B"),
    ("A. On second thought, B.", "B"),
    ("A. Wait - B.", "B"),
    ("A, actually it's B.", "B"),
    ("A, actually its B.", "B"),
    ("A, actually the answer is B.", "B"),
]
CORRECTION_NEAR_MISSES = [
    ("A, maybe B.", "A"),
    ("A, actually, as B shows.", "A"),  # a key after other words is no correction
    ("A. Waiting for B.", "A"),
]


@pytest.mark.parametrize(("reply", "expected"), CORRECTIONS + CORRECTION_NEAR_MISSES)
def test_corrections_after_a_leading_key(reply: str, expected: str | None) -> None:
    check(reply, expected)


def test_a_negated_correction_keeps_the_leading_key() -> None:
    check("B. Not actually C.", "B")


def test_the_last_of_several_corrections_wins() -> None:
    check("A, actually B, actually C.", "C")


# Conclusions at the end: "..., so X."
CONCLUSIONS = [
    ("A and B both show tears, so B.", "B"),
    ("A and B both show tears, therefore B.", "B"),
    ("A and B both show tears, thus B.", "B"),
    ("A and B both show tears, hence B.", "B"),
    ("A and B both show tears, so it's B.", "B"),
    ("A and B both show tears, so the answer is B.", "B"),
    ("A and B both show tears; so: B!", "B"),
]
CONCLUSION_NEAR_MISSES = [
    ("A and B both show tears, also B.", None),
    ("A and B both show tears, so B and A are close.", None),  # "so X" must end the reply
]


@pytest.mark.parametrize(("reply", "expected"), CONCLUSIONS + CONCLUSION_NEAR_MISSES)
def test_conclusions(reply: str, expected: str | None) -> None:
    check(reply, expected)


# "X is the best" and its variants.
VERDICTS = [
    ("Both A and B show tears; B is the best.", "B"),
    ("Both A and B show tears; B is correct.", "B"),
    ("Both A and B show tears; B is right.", "B"),
    ("Both A and B show tears; B is the most likely.", "B"),
    ("Both A and B show tears; B is the most fitting.", "B"),
    ("Both A and B show tears; B seems the best.", "B"),
    ("Both A and B show tears; B looks right.", "B"),
    ("Both A and B show tears; B best.", "B"),
    ("Both A and B show tears; B fits best.", "B"),
]
VERDICT_NEAR_MISSES = [
    ("Both A and B show tears; B is the worst.", None),
    ("Both A and B show tears; B is best than most.", None),
    ("Both A and B show tears; B is right if tears mean grief.", None),
    ("Both A and B show tears; B fits well.", None),
    ("Both A and B show tears; B is the most common.", None),
]


@pytest.mark.parametrize(("reply", "expected"), VERDICTS + VERDICT_NEAR_MISSES)
def test_verdicts(reply: str, expected: str | None) -> None:
    check(reply, expected)


# --- the article "A" -------------------------------------------------------------------------------------------
# "A <lower-case word>" is the article unless the word links options; then "A" is the key.
LINKING_WORDS = ["or", "and", "nor", "vs", "versus", "is", "was", "seems", "looks", "because", "since", "as", "then"]
NEAR_MISS_WORDS = [
    "orange",
    "android",
    "normal",
    "vsync",
    "versatile",
    "island",
    "wasp",
    "seemsly",
    "lookout",
    "becausal",
    "sincere",
    "ash",
    "thence",
    "butter",
]


@pytest.mark.parametrize("word", [*LINKING_WORDS, "but"])
def test_a_before_a_linking_word_is_the_key(word: str) -> None:
    check(f"A {word} nothing else fits", "A")


@pytest.mark.parametrize("word", NEAR_MISS_WORDS)
def test_a_before_another_lower_case_word_is_the_article(word: str) -> None:
    check(f"A {word} fits", None)


def test_a_before_a_capitalised_word_is_the_key() -> None:
    check("A Joyful scene", "A")


def test_other_keys_before_a_lower_case_word_are_keys() -> None:
    check("B shows the tears", "B")


# --- negation --------------------------------------------------------------------------------------------------
# "I'd say B, <negation> A": a negated A leaves B; without the negation the reply names two options.
NEGATIONS = [
    ("I'd say B, not A.", "B"),
    ("I'd say B; it can't be A.", "B"),
    ("I'd say B; no A.", "B"),
    ("I'd say B; exclude A.", "B"),
    ("I'd say B; I excluded A.", "B"),
    ("I'd say B; rule out A.", "B"),
    ("I'd say B; I ruled out A.", "B"),
    ("I'd say B; eliminate A.", "B"),
    ("I'd say B; it isn't A.", "B"),
    ("I'd say B; wrong: A.", "B"),
    ("I'd say B, NOT A.", "B"),  # any case
    ("I'd say B, not option A.", "B"),  # up to two words between
    ("I'd say B, not the option A.", "B"),
]
NEGATION_NEAR_MISSES = [
    ("I'd say B; knot A.", None),
    ("I'd say B; rulers out A.", None),
    ("I'd say B; strong A.", None),
    ("I'd say B; it is A.", None),
    ("I'd say B, not one of the others but A.", None),  # more than two words between
    ("I'd say B, not least because of A.", None),  # three words between
    ("I'd say B, and A is not.", None),  # the negation follows the key
]


@pytest.mark.parametrize(("reply", "expected"), NEGATIONS)
def test_negation_words_veto_the_next_key(reply: str, expected: str | None) -> None:
    check(reply, expected)


@pytest.mark.parametrize(("reply", "expected"), NEGATION_NEAR_MISSES)
def test_near_misses_of_negation_words_do_not_veto(reply: str, expected: str | None) -> None:
    check(reply, expected)


def test_a_negated_answer_statement_is_skipped() -> None:
    check("The answer is not A; the answer is C.", "C")


# A negation's reach ends at a clause end (. , ; ! ?) before the key, after the negation word or after a word.
NEGATION_SCOPE_ENDS = [
    ("A is not right; C is the best.", "C"),
    ("not A, B", "B"),
    ("B. Not A. Actually C.", "C"),
    ("Not A! B", "B"),
    ("Not A? B", "B"),
    ("Is it A? No, the answer is B.", "B"),
    ("Is it A? No. The answer is B.", "B"),
    ("Is it A? No; the answer is B.", "B"),
    ("Is it A? No! The answer is B.", "B"),
    ("Is it A? Not? The answer is B.", "B"),
]
NEGATION_SCOPE_CONTINUES = [
    ("I'd say B; not - A.", "B"),  # a dash is no clause end
    ("I'd say B. Wrong:\n- A", "B"),  # nor is a line break (a list after "Wrong:")
]


@pytest.mark.parametrize(("reply", "expected"), NEGATION_SCOPE_ENDS)
def test_a_negation_does_not_reach_past_a_clause_end(reply: str, expected: str) -> None:
    check(reply, expected)


@pytest.mark.parametrize(("reply", "expected"), NEGATION_SCOPE_CONTINUES)
def test_other_separators_keep_a_negation_in_reach(reply: str, expected: str) -> None:
    check(reply, expected)


@pytest.mark.parametrize("reply", ["Note: B.", "Notably, B is the best.", "Now B.", "Nothing but B fits."])
def test_words_starting_with_no_are_not_negations(reply: str) -> None:
    check(reply, "B")


def test_nor_is_no_negation_so_neither_nor_names_no_option() -> None:
    check("It is neither A nor B.", None)


@pytest.mark.parametrize(
    "reply",
    ["I'd say B, excluding A.", "I'd say B, ruling out A.", "I'd say B, eliminating A.", "I'd say B; it rules out A."],
)
def test_other_forms_of_negation_verbs_veto_the_next_key(reply: str) -> None:
    check(reply, "B")


# The window: a negation counts only when it starts within the 30 characters before the key.
# "not" + padding + "A": the window is the 30 characters before "A".
@pytest.mark.parametrize(("padding", "expected"), [(26, "B"), (27, "B"), (28, None), (29, None)])
def test_negation_window_is_thirty_characters(padding: int, expected: str | None) -> None:
    reply = "I'd say B, not" + " " * padding + "A"
    # padding 27: "not" starts exactly 30 characters before A (inside); 28: one character beyond (outside).
    check(reply, expected)


def test_negation_window_counts_from_the_start_of_the_text() -> None:
    check("Not A; I'd say B", "B")


def test_negation_window_at_the_start_of_an_explicit_statement() -> None:
    # "not" 30 characters before "answer" vetoes the statement (two options named: none); 31 does not.
    inside = "Both A and B fit; not" + " " * 27 + "answer is B"
    outside = "Both A and B fit; not" + " " * 28 + "answer is B"
    check(inside, None)
    check(outside, "B")


# --- \boxed{} --------------------------------------------------------------------------------------------------
BOXED = [
    ("\\boxed{B}", "B"),
    ("\\boxed{b}", "B"),
    ("$\\boxed{(C)}$", "C"),
    ("\\boxed {D.}", "D"),
    ("\\boxed{A} first, then \\boxed{C}", "C"),  # the last box decides
    ("\\boxed{Sadness}", "B"),
    ("\\boxed{E}", None),  # a single letter that is no option
    ("\\boxed{AB}", None),
    ("\\boxed{} B", None),  # an empty box decides: no answer
    ("\\boxed{\\text{Red}}", "C"),
    ("\\boxed{x^{2}} B", None),  # one level of nested braces is still a box
]


@pytest.mark.parametrize(("reply", "expected"), BOXED)
def test_boxed(reply: str, expected: str | None) -> None:
    check(reply, expected, OPTIONS)


# --- option texts ----------------------------------------------------------------------------------------------
def test_repeating_an_option_text_as_a_whole_picks_it() -> None:
    check('"Sadness!"', "B", OPTIONS)


def test_two_options_with_the_same_text_pick_neither() -> None:
    check("red", None, {"A": "Red", "B": "red ", "C": "Blue", "D": "Green"})


def test_a_phrase_inside_a_longer_mentioned_option_is_not_a_second_hit() -> None:
    options = {"A": "sad", "B": "deeply sad", "C": "joy", "D": "anger"}
    check("The figure looks deeply sad overall", "B", options)


def test_two_unrelated_mentioned_options_pick_neither() -> None:
    options = {"A": "sad", "B": "deeply sad", "C": "joy", "D": "anger"}
    check("The figure looks sad with some joy", None, options)


def test_a_mentioned_option_must_stand_as_a_phrase() -> None:
    options = {"A": "sad", "B": "glad", "C": "joy", "D": "anger"}
    check("the saddest picture", None, options)


@pytest.mark.parametrize(("text", "expected"), [("ox", "A"), ("x", None)])
def test_mentioned_option_texts_need_two_characters(text: str, expected: str | None) -> None:
    options = {"A": text, "B": "glad", "C": "joy", "D": "anger"}
    check(f"there is an {text} in it", expected, options)


def test_a_mentioned_option_ignores_a_final_period() -> None:
    check("i think it is solid here", "D", {"A": "Joy.", "B": "Sadness.", "C": "Red.", "D": "Solid."})


# --- echoed option lists and leading keys ----------------------------------------------------------------------
def test_two_echoed_option_lines_are_dropped() -> None:
    check("A. Joy\nB. Sadness", None, OPTIONS)


def test_a_single_echoed_line_is_an_answer() -> None:
    check("B. Sadness\nC", "B", OPTIONS)


def test_echoed_lines_must_repeat_the_option_text() -> None:
    check("A. Happy\nB. Sadness", "A", OPTIONS)


def test_echo_lines_are_dropped_and_the_rest_is_read() -> None:
    check("A. Joy\nB. Sadness\nI pick C", "C", OPTIONS)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("(B) because", "B"), ("[C] tears", "C"), ("D: solid", "D"), ("B - grief", "B"), ("B— grief", "B")],
)
def test_a_leading_key_decides(reply: str, expected: str) -> None:
    check(reply, expected)


# --- keys and options ------------------------------------------------------------------------------------------
def test_only_single_letter_keys_are_options() -> None:
    check("1", None, {"1": "one", "AB": "two", "C": "three"})


def test_option_keys_are_normalised() -> None:
    check("Answer: c", "C", {" a ": "x", "b": "y", "c": "z"})


def test_unusual_option_keys_are_escaped() -> None:
    check("The answer is ^.", None, ["^", "A"])


# --- normalisation ---------------------------------------------------------------------------------------------
def test_an_upper_case_dangling_think_close_is_recognised() -> None:
    check("A or B?</THINK> C", "C")


def test_an_upper_case_unclosed_think_is_cut() -> None:
    check("C <THINK> maybe A", "C")


def test_emphasis_and_latex_wrappers_are_removed() -> None:
    check("The answer is \\textbf{__C__}", "C")


# --- details each rule relies on -------------------------------------------------------------------------------
WXYZ = ["W", "X", "Y", "Z"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("\\boxed{X}", "X"), ("The answer is (X).", "X"), ("X", "X"), ("Y fits best", "Y")],
)
def test_keys_other_than_abcd_work_the_same(reply: str, expected: str) -> None:
    check(reply, expected, WXYZ)


def test_a_bracketed_key_other_than_abcd_is_read_whole() -> None:
    check("Y looks fine, but the answer is (X).", "X", WXYZ)


@pytest.mark.parametrize("reply", ["X", "The answer is X.", "\\boxed{X}"])
def test_x_is_no_key_among_abcd(reply: str) -> None:
    check(reply, None)


def test_a_boxed_key_inside_dollars_counts() -> None:
    check("\\boxed{$B$}", "B")


def test_a_negated_statement_does_not_hide_a_later_one_of_the_same_kind() -> None:
    check("B looks fine, but I did not choose A; I choose C.", "C")


def test_a_negation_far_before_a_correction_does_not_veto_it() -> None:
    check("B. It is not A. After a long look at the whole picture: actually C.", "C")


def test_several_named_keys_are_no_answer_even_when_an_option_text_is_mentioned() -> None:
    check("Either A or B; it shows joy", None, OPTIONS)


@pytest.mark.parametrize("reply", ["X", '"X"', "X.", "(X)", "  X!  "])
def test_a_one_letter_option_text_repeated_alone_is_that_option(reply: str) -> None:
    check(reply, "A", {"A": "X", "B": "Y", "C": "Z", "D": "W"})


def test_a_one_letter_option_text_in_a_code_fence_is_that_option() -> None:
    check("```\nY\n```", "B", {"A": "X", "B": "Y", "C": "Z", "D": "W"})


@pytest.mark.parametrize(
    ("reply", "options"),
    [
        ("Plan  B", {"A": "Plan B", "B": "Plan C", "C": "joy", "D": "fear"}),  # odd spacing in the reply
        ("Plan B", {"A": "Plan   B", "B": "Plan C", "C": "joy", "D": "fear"}),  # odd spacing in the option
    ],
)
def test_an_option_text_naming_a_key_is_matched_as_text_despite_spacing(reply: str, options: dict) -> None:
    check(reply, "A", options)


@pytest.mark.parametrize(
    ("reply", "options"),
    [
        ("she is deeply\nsad today", {"A": "deeply sad", "B": "glad", "C": "joy", "D": "anger"}),
        ("she is deeply sad today", {"A": "deeply   sad", "B": "glad", "C": "joy", "D": "anger"}),
    ],
)
def test_a_mentioned_option_is_found_despite_spacing(reply: str, options: dict) -> None:
    check(reply, "A", options)


def test_a_sequence_of_keys_has_no_option_texts_to_match() -> None:
    check("xxxx", None, ["A"])


@pytest.mark.parametrize(
    ("reply", "options"),
    [
        ("A. Joy.\nB. Sadness.", OPTIONS),  # the echo ends with a period, the option does not
        ("A. Joy\nB. Sadness", {"A": "Joy.", "B": "Sadness.", "C": "Red.", "D": "Solid."}),  # the other way round
    ],
)
def test_echoed_lines_match_options_whatever_the_final_period(reply: str, options: dict) -> None:
    check(reply, None, options)


def test_lines_left_after_dropping_an_echo_keep_their_line_breaks() -> None:
    check("A. Joy\nB. Sadness\nAnswer: C\nBecause of the tears.", "C", OPTIONS)


# <think> handling: the cut points.
@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("I lean to B</think> C", "C"),  # keep only what follows the close
        ("first</think> A</think> C", "C"),  # the LAST dangling close
        ("prompt-opened</think> C <think> maybe A", "C"),  # then cut an unclosed open after it
        ("C <think> maybe A <think> or B", "C"),  # the FIRST unclosed open
        ("C <think> maybe A, or B", "C"),
    ],
)
def test_reasoning_cut_points(reply: str, expected: str) -> None:
    check(reply, expected)


# Statements in any case: models that shout, or capitalise a sentence start.
@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("A looks tempting. Answer would be B.", "B"),
        ("A looks tempting, but the Best choice would be B.", "B"),
        ("A looks tempting, but I Choose B.", "B"),
        ("A, Actually B.", "B"),
        ("A and B both show tears. Therefore B.", "B"),
        ("Both A and B show tears; B IS CORRECT.", "B"),
        ("A looks tempting, but the answer is (b).", "B"),  # a lower-case key in brackets
        ("A looks tempting, but the answer is [c]", "C"),
    ],
)
def test_statements_in_any_case(reply: str, expected: str) -> None:
    check(reply, expected)


@pytest.mark.parametrize("wrapper", ["text", "textbf", "mathrm", "mathbf"])
def test_latex_wrappers_around_a_key_are_removed(wrapper: str) -> None:
    check(f"A looks tempting, but the answer is \\{wrapper}{{B}}.", "B")


# --- full-width punctuation: read as its ASCII counterpart before any rule ------------------------------------
# Each reply below decides only because its full-width mark reads as the ASCII one (without it: no commitment).
FULL_WIDTH = [
    ("A looks tempting, but the answer is 【B】.", "B"),  # lenticular brackets are [ ]: "[B]"
    ("B。 A is too cheerful.", "B"),  # the ideographic full stop is ".": a leading "B."
    ("B、 because A is wrong", "B"),  # the ideographic comma is ",": a leading "B,"
    ("A looks tempting, but the answer is 「B」.", "B"),  # corner quotes are '"': a quoted key
    ("【B】", "B"),
    ("答案是【B】", "B"),
    ("A、B", None),  # two keys listed: no commitment
]


@pytest.mark.parametrize(("reply", "expected"), FULL_WIDTH)
def test_full_width_punctuation(reply: str, expected: str | None) -> None:
    check(reply, expected)


def test_an_option_text_at_the_start_of_a_reply_is_read() -> None:
    # The option's text starts the reply, with no space or key before it.
    options = {"A": "a red heart", "B": "a key", "C": "a star", "D": "a bird"}
    check("a red heart, I think", "A", options)
