"""Scoring one reply: the reply to one level -> its Outcome under both parsers (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hvcu_tasks.core.metrics import Outcome
from hvcu_tasks.core.official_parsing import parse_official
from hvcu_tasks.core.parsing import parse_choice

FAILED_REQUEST_MARKER = "[LMMS_EVAL_REQUEST_FAILED"
"""Prefix lmms-eval's API backends put in place of a reply when every retry failed."""


def failed_reply(reply: object) -> bool:
    """Whether a reply is no answer at all: missing, None, not text, empty, or lmms-eval's failed-request marker.

    lmms-eval hands a base-setting task "" where the model gave None, so an empty reply counts as none.
    """
    return not isinstance(reply, str) or not reply.strip() or reply.startswith(FAILED_REQUEST_MARKER)


def score_reply(
    doc: Mapping[str, Any],
    level: int,
    options: tuple[tuple[str, str], ...],
    gold: str,
    reply: object,
    data: str | None = None,
) -> Outcome:
    """Parse one reply to one level with both rules and score it (no reply: wrong under both, and marked failed).

    `data` is the fingerprint of the data the document came from (None when it carries none).
    """
    text = reply if isinstance(reply, str) else ""
    failed = failed_reply(reply)
    return Outcome(
        sample_id=str(doc["sample_id"]),
        family=str(doc["family"]),
        aspect=str(doc["aspect"]),
        level=int(level),
        gold=str(gold),
        pred=None if failed else parse_choice(text, dict(options)),
        response=text,
        pred_official=None if failed else parse_official(text),
        failed=failed,
        data=data,
    )


def outcome_payload(outcome: Outcome) -> dict[str, Any]:
    """Return the compact, JSON-ready record of one scored level (no raw reply)."""
    record = outcome.to_dict()
    record["failed"] = outcome.failed or failed_reply(record.pop("response"))
    return record
