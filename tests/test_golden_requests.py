"""The exact chat messages sent per request, compared byte for byte with golden files written from the protocol note.

tests/golden/requests/ holds, for one smoke sample per family, the messages of the base setting (L1-L3) and of
the context setting after a right, a wrong, an unparsable and an empty earlier reply. They were written by
tests/golden/requests/write_goldens.py from strings typed from the note, never by the code under test; the image
is the placeholder "<image>" (checked separately against the sample's file). cases.json says which request each
file is and which replies came before it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import datasets
import pytest
from PIL import Image

from hvcu_tasks.core import prompts
from hvcu_tasks.dev.smoke import SMOKE_DIR
from hvcu_tasks.lmms import context, hooks

GOLDEN = Path(__file__).resolve().parent / "golden" / "requests"
CASES: dict[str, dict[str, Any]] = json.loads((GOLDEN / "cases.json").read_text(encoding="utf-8"))
IMAGE_PLACEHOLDER = "<image>"
STEMS = {
    "implication": "Implication-Understanding",
    "aesthetic": "Aesthetic-Appreciation",
    "affective": "Affective-Reasoning",
}


def stub(family: str) -> datasets.Dataset:
    """The one-row task stub the smoke YAMLs load: {family, source}."""
    return datasets.Dataset.from_list([{"family": family, "source": "smoke"}])


@cache
def base_docs(family: str) -> datasets.Dataset:
    """The base setting's documents, built by the task's own process_docs."""
    return hooks.process_docs(stub(family))


@cache
def context_docs(family: str) -> datasets.Dataset:
    """The context setting's documents, built by the task's own process_docs."""
    return context.process_docs(stub(family))


def base_doc(family: str, sample_id: str, level: int) -> dict[str, Any]:
    """The base document of one (sample, level)."""
    return next(d for d in base_docs(family) if d["sample_id"] == sample_id and int(d["level"]) == level)


def context_doc(family: str, sample_id: str) -> dict[str, Any]:
    """The context document of one sample."""
    return next(d for d in context_docs(family) if d["sample_id"] == sample_id)


def messages_for(case: dict[str, Any]) -> list[dict]:
    """Build the messages of one golden case with the real task hooks."""
    if case["setting"] == "base":
        return hooks.doc_to_messages(base_doc(case["family"], case["sample_id"], case["level"]))
    doc = context_doc(case["family"], case["sample_id"])
    replies = case["replies"]
    if not replies:
        return context.doc_to_messages(doc)
    messages, done, _outputs, _info = context.doc_to_messages(doc, round_idx=len(replies), previous_output=replies)
    assert done is False
    return messages


def with_placeholder(messages: list[dict]) -> list[dict]:
    """Replace every image part's PIL image with the placeholder; any other image value is kept (and will differ)."""
    out = []
    for message in messages:
        content = []
        for part in message["content"]:
            if part.get("type") == "image" and isinstance(part.get("url"), Image.Image):
                part = {**part, "url": IMAGE_PLACEHOLDER}
            content.append(part)
        out.append({**message, "content": content})
    return out


def dump(messages: list[dict]) -> str:
    """The golden files' text form."""
    return json.dumps(messages, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def first_difference(want: Any, got: Any, where: str = "messages") -> str | None:
    """Return where two JSON values first differ, with both values, or None when they are equal."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got)):
            if key not in got or key not in want:
                return (
                    f"{where}.{key}: golden has {want.get(key, '<missing>')!r}, code has {got.get(key, '<missing>')!r}"
                )
            found = first_difference(want[key], got[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(want, list) and isinstance(got, list):
        for i, (w, g) in enumerate(zip(want, got, strict=False)):
            found = first_difference(w, g, f"{where}[{i}]")
            if found:
                return found
        if len(want) != len(got):
            return f"{where}: golden has {len(want)} entries, code has {len(got)}"
        return None
    if isinstance(want, str) and isinstance(got, str) and want != got:
        at = next((i for i, (w, g) in enumerate(zip(want, got, strict=False)) if w != g), min(len(want), len(got)))
        return f"{where}, from character {at}: golden has {want[at : at + 40]!r}, code has {got[at : at + 40]!r}"
    if want != got:
        return f"{where}: golden has {want!r}, code has {got!r}"
    return None


def test_every_golden_file_is_listed_in_the_manifest() -> None:
    on_disk = sorted(str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*.json") if p.name != "cases.json")
    assert on_disk == sorted(CASES)
    assert len(on_disk) == 3 * 11  # per family: base L1-L3, context L1, 4 after L1, 3 after L1+L2


@pytest.mark.parametrize("name", sorted(CASES))
def test_request_messages_match_the_golden_file(name: str) -> None:
    golden_text = (GOLDEN / name).read_text(encoding="utf-8")
    code_text = dump(with_placeholder(messages_for(CASES[name])))
    if code_text != golden_text:
        where = first_difference(json.loads(golden_text), json.loads(code_text))
        pytest.fail(f"tests/golden/requests/{name}: the request differs from the protocol's; first difference: {where}")


@pytest.mark.parametrize(
    "name", [n for n in sorted(CASES) if n.endswith(("base_L2.json", "context_L3_after_right_wrong.json"))]
)
def test_the_image_sent_is_the_samples_own_file(name: str) -> None:
    case = CASES[name]
    (image,) = [p["url"] for m in messages_for(case) for p in m["content"] if p["type"] == "image"]
    with Image.open(SMOKE_DIR / "Image" / STEMS[case["family"]] / f"{case['sample_id']}.png") as expected:
        assert image.convert("RGB").tobytes() == expected.convert("RGB").tobytes()


def test_system_prompt_is_the_authors_exact_text() -> None:
    assert prompts.SYSTEM_PROMPT == (
        "You are a helpful assistant that answers multiple-choice questions based on images. Respond with ONLY the "
        "single letter (A, B, C, or D) of the best option. Do not include any explanation or additional text."
    )


def test_context_prefix_is_the_authors_exact_text() -> None:
    assert prompts.CONTEXT_PREFIX == "The above Q&As provide context. Now carefully consider:\n"


def test_an_empty_earlier_reply_is_shown_as_no_answer() -> None:
    assert prompts.NO_ANSWER == "(no answer)"


def test_a_changed_protocol_string_names_the_file_and_the_string() -> None:
    """The failure message of a golden mismatch points at the first differing string."""
    golden = json.loads((GOLDEN / "implication/metaphor_001/base_L1.json").read_text(encoding="utf-8"))
    changed = json.loads(json.dumps(golden))
    changed[0]["content"][0]["text"] = "You are a helpful assistant."
    where = first_difference(golden, changed)
    assert where == (
        "messages[0].content[0].text, from character 27: golden has ' that answers multiple-choice questions ', "
        "code has '.'"
    )
