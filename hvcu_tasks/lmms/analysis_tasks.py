"""Beyond the paper: the blind, circular and gold-context settings' hooks (docs/evaluation.md, "Analyses beyond the
paper"). Circular verdicts are made in the aggregation, after lmms-eval has gathered every rank's documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hvcu_tasks.core.documents import circular_rows, gold_entry, gold_rows, level_options, level_texts
from hvcu_tasks.core.payloads import ROTATION_KEY, payloads
from hvcu_tasks.core.prompts import SYSTEM_PROMPT, context_messages
from hvcu_tasks.core.scoring import score_reply
from hvcu_tasks.lmms import context, hooks

# --- blind ---------------------------------------------------------------------------------------------------


def blind_doc_to_visual(doc: Mapping[str, Any]) -> list[Any]:
    """Return no visual: the blind setting never sends the image."""
    return []


def blind_doc_to_messages(
    doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Return a level document's blind chat (base-setting system prompt and text, no image part)."""
    return [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
        {"role": "user", "content": [{"type": "text", "text": hooks.doc_to_text(doc)}]},
    ]


# --- circular ------------------------------------------------------------------------------------------------


def circular_process_docs(stub: Any) -> Any:
    """Replace a circular task's stub with that family's documents, four rotations per (sample, level)."""
    return hooks.loaded_table(stub, "rotations", circular_rows)


def circular_process_results(doc: Mapping[str, Any], results: Sequence[object]) -> dict[str, Mapping[str, Any]]:
    """Score one rotated question; the circular verdicts are made in the aggregation, over all ranks' records."""
    outcome = hooks.outcome_of(doc, results[0] if results else None)
    rotation = {ROTATION_KEY: int(doc[ROTATION_KEY])}
    return payloads([outcome], {"question": hooks.doc_to_text(doc), **rotation}, hooks.doc_identity(doc), rotation)


# --- gold context --------------------------------------------------------------------------------------------


def gold_process_docs(stub: Any) -> Any:
    """Replace a gold-context task's stub with that family's documents, one per sample and level."""
    return hooks.loaded_table(stub, "gold-context", gold_rows)


def gold_index(doc: Mapping[str, Any]) -> int:
    """Return the position of the document's asked level among its sample's levels."""
    return list(doc["levels"]).index(int(doc["level"]))


def gold_doc_to_text(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> str:
    """Return the asked level's text (the request context), after checking the backend takes multi-turn chats."""
    context.require_native(lmms_eval_specific_kwargs)
    return level_texts(doc)[gold_index(doc)]


def gold_doc_to_messages(
    doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Return the context-setting chat for the asked level with the gold letters as the earlier assistant turns."""
    k = gold_index(doc)
    return context_messages(level_texts(doc), list(doc["answers"][:k]), hooks.doc_image(doc))


def gold_process_results(doc: Mapping[str, Any], results: Sequence[object]) -> dict[str, Mapping[str, Any]]:
    """Score one level asked after gold answers; the acc_full entry logs it in the context setting's list form."""
    k = gold_index(doc)
    reply = results[0] if results else None
    options = level_options(doc, k)
    outcome = score_reply(doc, int(doc["level"]), options, doc["answers"][k], reply, hooks.doc_fingerprint(doc))
    entry = gold_entry(doc, reply, outcome.pred)
    return hooks.family_payloads(doc, [outcome], entry)
