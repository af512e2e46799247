"""Prompt snapshots: the authors' protocol strings, byte for byte. Changing them changes every number."""

from __future__ import annotations

from PIL import Image

from hvcu_tasks.prompts import SYSTEM_PROMPT, base_messages, level_text

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
