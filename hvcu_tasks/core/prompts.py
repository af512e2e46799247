"""The authors' exact prompt strings and the chat messages built from them (base and context settings)."""

from __future__ import annotations

from typing import Any

SYSTEM_PROMPT = (
    "You are a helpful assistant that answers multiple-choice questions based on images. "
    "Respond with ONLY the single letter (A, B, C, or D) of the best option. "
    "Do not include any explanation or additional text."
)


CONTEXT_PREFIX = "The above Q&As provide context. Now carefully consider:\n"
NO_ANSWER = "(no answer)"
"""Assistant turn sent in the context setting when an earlier reply was empty (the release sent "")."""


def level_text(question: str, options: tuple[tuple[str, str], ...] | list[tuple[str, str]]) -> str:
    """Return the user text for one level: the question, 'Options:' and one 'K. text' line per option."""
    return f"{question}\nOptions:\n" + "\n".join(f"{key}. {text}" for key, text in options)


def base_messages(text: str, image: Any) -> list[dict[str, Any]]:
    """Return lmms-eval chat messages for one base-setting call: system, then user [text, image]."""
    return [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
        {"role": "user", "content": [{"type": "text", "text": text}, {"type": "image", "url": image}]},
    ]


def context_answer(letter: str | None, reply: str) -> str:
    """Return what an earlier level's assistant turn holds: the parsed letter, else the model's own words."""
    if letter:
        return letter
    from hvcu_tasks.core.parsing import strip_reasoning

    return strip_reasoning(reply or "") or NO_ANSWER


def context_messages(texts: list[str], answers: list[str], image: Any) -> list[dict[str, Any]]:
    """Return the context-setting chat for level len(answers)+1 of a chain.

    Level 1 is the base-setting chat. For level k > 1: system, then per earlier level a user turn with
    its text (no image) and an assistant turn with the model's own answer, then the final user turn =
    CONTEXT_PREFIX + level-k text, with the image.
    """
    k = len(answers)
    if not 0 <= k < len(texts):
        raise ValueError(f"need 0 <= answered levels < {len(texts)}, got {k}")
    if k == 0:
        return base_messages(texts[0], image)
    messages: list[dict[str, Any]] = [{"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]}]
    for text, answer in zip(texts[:k], answers, strict=True):
        messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
    messages.append(
        {
            "role": "user",
            "content": [{"type": "text", "text": CONTEXT_PREFIX + texts[k]}, {"type": "image", "url": image}],
        }
    )
    return messages
