"""The authors' exact prompt strings and the chat messages built from them (base setting)."""

from __future__ import annotations

from typing import Any

from hvcu_tasks.schema import Level

SYSTEM_PROMPT = (
    "You are a helpful assistant that answers multiple-choice questions based on images. "
    "Respond with ONLY the single letter (A, B, C, or D) of the best option. "
    "Do not include any explanation or additional text."
)


def level_text(question: str, options: tuple[tuple[str, str], ...] | list[tuple[str, str]]) -> str:
    """Return the user text for one level: the question, 'Options:' and one 'K. text' line per option."""
    return f"{question}\nOptions:\n" + "\n".join(f"{key}. {text}" for key, text in options)


def level_text_of(level: Level) -> str:
    """Return the user text for a Level record."""
    return level_text(level.question, level.options)


def base_messages(text: str, image: Any) -> list[dict[str, Any]]:
    """Return lmms-eval chat messages for one base-setting call: system, then user [text, image]."""
    return [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
        {"role": "user", "content": [{"type": "text", "text": text}, {"type": "image", "url": image}]},
    ]
