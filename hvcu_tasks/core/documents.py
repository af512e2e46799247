"""The documents lmms-eval is given, as plain rows (pure): one per level, per sample (context), per level and
rotation (circular), per sample and level (gold context). A row carries the image as a reference (`image_path` or
`image_bytes`), never pixels, and the data identity (IDENTITY_KEY) of its load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from hvcu_tasks.core.metrics import ROTATIONS
from hvcu_tasks.core.parsing import parse_choice
from hvcu_tasks.core.payloads import IDENTITY_KEY, ROTATION_KEY
from hvcu_tasks.core.prompts import context_answer, level_text
from hvcu_tasks.core.schema import Sample


def image_cell(sample: Sample) -> dict[str, Any]:
    """Return a document's image columns: `image_path` (its file) or `image_bytes` (its encoded cell), never pixels.

    Not a {"bytes": ...} dict: lmms-eval would inline such bytes as base64 into every --log_samples line.
    """
    if sample.image and sample.image.path:
        return {"image_path": str(sample.image.path), "image_bytes": None}
    return {"image_path": None, "image_bytes": sample.image.data if sample.image else None}


def level_rows(samples: Iterable[Sample], identity: str = "") -> Iterator[dict[str, Any]]:
    """Yield one document per (sample, level), sample-major, carrying the image reference and the data identity."""
    for s in samples:
        image = image_cell(s)
        for lv in s.levels:
            yield {
                "sample_id": s.id,
                "family": s.family,
                "aspect": s.aspect,
                "level": lv.level,
                "question": lv.question,
                "option_keys": [k for k, _ in lv.options],
                "option_texts": [t for _, t in lv.options],
                "answer": lv.answer,
                **image,
                IDENTITY_KEY: identity,
            }


def sample_rows(samples: Iterable[Sample], identity: str = "") -> Iterator[dict[str, Any]]:
    """Yield one document per sample with its three levels side by side, carrying the data identity."""
    for s in samples:
        yield {
            "sample_id": s.id,
            "family": s.family,
            "aspect": s.aspect,
            "levels": [lv.level for lv in s.levels],
            "questions": [lv.question for lv in s.levels],
            "option_keys": [[k for k, _ in lv.options] for lv in s.levels],
            "option_texts": [[t for _, t in lv.options] for lv in s.levels],
            "answers": [lv.answer for lv in s.levels],
            **image_cell(s),
            IDENTITY_KEY: identity,
        }


def rotate_options(options: Sequence[tuple[str, str]], rotation: int) -> tuple[tuple[str, str], ...]:
    """Return the options with the keys in place and the texts moved: key i shows text (i + rotation) mod n."""
    keys, texts = [k for k, _ in options], [t for _, t in options]
    n = len(options)
    return tuple((keys[i], texts[(i + rotation) % n]) for i in range(n))


def rotated_answer(options: Sequence[tuple[str, str]], answer: str, rotation: int) -> str:
    """Return the key that holds the gold option's text after the rotation."""
    keys = [k for k, _ in options]
    gold = keys.index(answer)
    return keys[(gold - rotation) % len(keys)]


def circular_rows(samples: Iterable[Sample], identity: str = "") -> Iterator[dict[str, Any]]:
    """Yield one document per (sample, level, rotation), sample-major, level by level, rotation 0 (as in base) first."""
    for row in level_rows(samples, identity):
        options = tuple(zip(row["option_keys"], row["option_texts"], strict=True))
        for rotation in range(ROTATIONS):
            rotated = rotate_options(options, rotation)
            yield {
                **row,
                "option_texts": [t for _, t in rotated],
                "answer": rotated_answer(options, row["answer"], rotation),
                ROTATION_KEY: rotation,
            }


def gold_rows(samples: Iterable[Sample], identity: str = "") -> Iterator[dict[str, Any]]:
    """Yield one document per (sample, level): the context setting's sample row plus the level it asks."""
    for row in sample_rows(samples, identity):
        for level in row["levels"]:
            yield {**row, "level": level}


def level_options(doc: Mapping[str, Any], index: int) -> tuple[tuple[str, str], ...]:
    """Return the (key, text) options of the document's level at position `index`."""
    return tuple(zip(doc["option_keys"][index], doc["option_texts"][index], strict=True))


def level_texts(doc: Mapping[str, Any]) -> list[str]:
    """Return the protocol's user text of each level of a document."""
    return [level_text(q, level_options(doc, i)) for i, q in enumerate(doc["questions"])]


def earlier_answers(doc: Mapping[str, Any], replies: Sequence[object]) -> list[str]:
    """Return the assistant turns for the levels already answered: parsed letter, else the raw words.

    A lost reply (None or not text) is shown like an empty one, as "(no answer)", never as the text "None".
    """
    texts = [reply if isinstance(reply, str) else "" for reply in replies]
    return [context_answer(parse_choice(text, dict(level_options(doc, i))), text) for i, text in enumerate(texts)]


def next_round(
    doc: Mapping[str, Any],
    round_idx: int | None,
    previous_output: Sequence[str] | None,
    previous_round_info: Any,
    messages: Callable[[list[str]], Any],
) -> Any:
    """Answer one round of lmms-eval's multi-round protocol for a chain document.

    Round 0 gives L1's messages; a later round gives (messages, done, outputs, info), `messages(replies so far)`
    building the next level's chat.
    """
    replies = list(previous_output or [])
    if not round_idx:
        return messages([])
    if len(replies) != round_idx:
        raise ValueError(f"round {round_idx} of sample {doc['sample_id']} got {len(replies)} earlier replies")
    if round_idx >= len(doc["questions"]):
        return None, True, replies, previous_round_info
    return messages(replies), False, replies, previous_round_info


def gold_entry(doc: Mapping[str, Any], reply: object, parsed: str | None) -> dict[str, Any]:
    """What a gold-context sample-log line holds beside its outcome, in the context setting's list form."""
    k = list(doc["levels"]).index(int(doc["level"]))
    return {
        "sample_id": doc["sample_id"],
        "questions": [level_texts(doc)[k]],
        "replies": [reply if isinstance(reply, str) else None],
        "parsed": [parsed],
        "gold": [doc["answers"][k]],
        "shown_answers": list(doc["answers"][:k]),
    }
