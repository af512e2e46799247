"""Prompt snapshots: the authors' protocol strings, byte for byte. Changing them changes every number."""

from __future__ import annotations

import pytest
from PIL import Image

from hvcu_tasks.core.prompts import SYSTEM_PROMPT, base_messages, context_answer, context_messages, level_text

SNAPSHOT_SYSTEM = (
    "You are a helpful assistant that answers multiple-choice questions based on images. Respond with ONLY the "
    "single letter (A, B, C, or D) of the best option. Do not include any explanation or additional text."
)
SNAPSHOT_TEXT = "What object is drawn behind the grey bars?\nOptions:\nA. A star\nB. A red heart\nC. A key\nD. A bird"


def test_system_prompt_is_the_authors() -> None:
    assert SYSTEM_PROMPT == SNAPSHOT_SYSTEM


def test_level_text_layout() -> None:
    options = (("A", "A star"), ("B", "A red heart"), ("C", "A key"), ("D", "A bird"))
    assert level_text("What object is drawn behind the grey bars?", options) == SNAPSHOT_TEXT


def test_base_messages_put_text_before_the_image() -> None:
    image = Image.new("RGB", (4, 4))
    messages = base_messages(SNAPSHOT_TEXT, image)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == [{"type": "text", "text": SNAPSHOT_SYSTEM}]
    assert [part["type"] for part in messages[1]["content"]] == ["text", "image"]
    assert messages[1]["content"][0]["text"] == SNAPSHOT_TEXT
    assert messages[1]["content"][1]["url"] is image


# --- the context-setting chat, built directly (expected messages written out from the protocol note) ----------
CONTEXT_PREFIX = "The above Q&As provide context. Now carefully consider:\n"


def test_level_text_with_one_option_has_no_trailing_newline() -> None:
    assert level_text("Q?", [("A", "yes")]) == "Q?\nOptions:\nA. yes"


def test_context_messages_for_level_one_are_the_base_chat() -> None:
    assert context_messages(["L1", "L2", "L3"], [], "img") == [
        {"role": "system", "content": [{"type": "text", "text": SNAPSHOT_SYSTEM}]},
        {"role": "user", "content": [{"type": "text", "text": "L1"}, {"type": "image", "url": "img"}]},
    ]


def test_context_messages_for_level_three_carry_both_earlier_turns_without_images() -> None:
    assert context_messages(["L1", "L2", "L3"], ["B", "the heart"], "img") == [
        {"role": "system", "content": [{"type": "text", "text": SNAPSHOT_SYSTEM}]},
        {"role": "user", "content": [{"type": "text", "text": "L1"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "B"}]},
        {"role": "user", "content": [{"type": "text", "text": "L2"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "the heart"}]},
        {"role": "user", "content": [{"type": "text", "text": CONTEXT_PREFIX + "L3"}, {"type": "image", "url": "img"}]},
    ]


def test_context_messages_need_fewer_answers_than_levels() -> None:
    with pytest.raises(ValueError, match=r"^need 0 <= answered levels < 3, got 3$"):
        context_messages(["L1", "L2", "L3"], ["A", "B", "C"], "img")


@pytest.mark.parametrize(
    ("letter", "reply", "expected"),
    [
        ("C", "whatever the model wrote", "C"),  # the parsed letter wins
        (None, "<think>hmm</think> It is a heart.", "It is a heart."),  # else the model's own words
        (None, "", "(no answer)"),
        (None, None, "(no answer)"),
        (None, "<think>only thinking</think>", "(no answer)"),
        ("", "B is my guess", "B is my guess"),
    ],
)
def test_context_answer_is_the_letter_else_the_models_words(letter, reply, expected: str) -> None:
    assert context_answer(letter, reply) == expected
