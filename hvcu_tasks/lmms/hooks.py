"""The base setting's hooks (one document per level): prompt, image, messages, scoring.

`tasks/utils.py` re-exports them for the YAMLs; the context setting's hooks live in `context.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hvcu_tasks.core.metrics import Outcome
from hvcu_tasks.core.payloads import payloads
from hvcu_tasks.core.prompts import base_messages, level_text
from hvcu_tasks.core.scoring import score_reply
from hvcu_tasks.data.images import document_image
from hvcu_tasks.lmms.documents import doc_identity, gc_paused, level_dataset, task_data
from hvcu_tasks.lmms.plugin import ensure_image_hook


def doc_image(doc: Mapping[str, Any]) -> Any:
    """Return a document's image (`images.document_image`), the plugin's image hook installed first."""
    ensure_image_hook()
    return document_image(doc)


def doc_fingerprint(doc: Mapping[str, Any]) -> str | None:
    """Return the fingerprint of the data a document came from (None for a document built without one)."""
    return doc_identity(doc).get("fingerprint")


def doc_options(doc: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Return a document's options as (key, text) pairs."""
    return tuple(zip(doc["option_keys"], doc["option_texts"], strict=True))


def doc_to_text(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> str:
    """Return the protocol's user text for one level document."""
    return level_text(doc["question"], doc_options(doc))


def doc_to_visual(doc: Mapping[str, Any]) -> list[Any]:
    """Return the document's image as an RGB PIL image in a list (decoded once, see `images.document_image`)."""
    return [doc_image(doc)]


def doc_to_messages(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> list[dict]:
    """Return the base-setting chat: the authors' system prompt, then user [text, image]."""
    return base_messages(doc_to_text(doc), doc_image(doc))


def outcome_of(doc: Mapping[str, Any], response: object) -> Outcome:
    """Score one reply against a base-setting (one level) document."""
    return score_reply(doc, int(doc["level"]), doc_options(doc), str(doc["answer"]), response, doc_fingerprint(doc))


def process_docs(stub) -> Any:
    """Replace a base task's stub with that family's level documents (one per sample and level)."""
    with gc_paused():
        return level_dataset(*task_data(stub))


def process_results(doc: Mapping[str, Any], results: Sequence[object]) -> dict[str, dict]:
    """Score a base-setting document: {"outcomes": [one level]} under every metric of its family.

    The `acc_full` entry also carries the question so that `--log_samples` files can be read without
    the dataset (the raw reply is lmms-eval's `resps`).
    """
    outcome = outcome_of(doc, results[0] if results else None)
    return payloads(str(doc["family"]), [outcome], {"question": doc_to_text(doc)}, doc_identity(doc))
