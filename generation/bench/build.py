"""Top-down construction of one benchmark item: L3, then L2 and L1, each validated and refined.

Stage 1 writes the connotation question (anchored on the manifest's concept when given), stage 2 the
bridge question conditioned on it, stage 3 the perception question conditioned on both. After stages 2
and 3 an MLLM validator checks dependency and difficulty progression, and after every stage that exactly
one option is right among plausible distractors. A failed or unusable attempt is regenerated with the
reasons as guidance at a higher temperature, up to `max_attempts`; an item whose stage never passes is
recorded as rejected, with every attempt.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from generation.bench.manifest import ManifestRow
from generation.bench.stages import STAGE_LEVELS, Draft, parse_draft, parse_verdict, stage_prompt, validate_prompt
from generation.client import ChatClient
from generation.policy import call_seed, user_message
from generation.replies import ReplyError

MAX_ATTEMPTS = 20  # per stage; each attempt is one or two paid calls
MAX_TOKENS = 32768  # per generated reply; more is a typo that the endpoint would bill or refuse


@dataclass(frozen=True)
class BuildConfig:
    """Sampling and refinement settings of `hvcu build-bench` (a JSON/YAML --config overrides any of them)."""

    max_attempts: int = 3
    """Generation attempts per stage before the item is rejected."""
    temperature: float = 0.7
    """Generator temperature of a stage's first attempt."""
    temperature_step: float = 0.1
    """Added to the temperature after each failed attempt."""
    temperature_cap: float = 1.2
    validator_temperature: float = 0.0
    max_tokens: int = 1024
    validate_levels: tuple[int, ...] = (3, 2, 1)
    """Levels checked by the validator: 2 and 1 for dependency and progression (the paper's checks after stages
    2 and 3), every listed level for one right answer among plausible distractors."""

    def __post_init__(self) -> None:
        for name, high in (("max_attempts", MAX_ATTEMPTS), ("max_tokens", MAX_TOKENS)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ValueError(f"{name} must be a positive integer, at most {high}; got {value!r}")
        for name in ("temperature", "temperature_step", "temperature_cap", "validator_temperature"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 2:
                raise ValueError(f"{name} must be a number from 0 to 2, got {value!r}")
        if self.temperature > self.temperature_cap:
            raise ValueError("need temperature <= temperature_cap")
        levels = self.validate_levels
        if not isinstance(levels, tuple) or not all(lv in (1, 2, 3) and isinstance(lv, int) for lv in levels):
            raise ValueError(f"validate_levels must be a list drawn from 1, 2, 3; got {levels!r}")

    def temperature_at(self, attempt: int) -> float:
        """Return the generator temperature of the n-th attempt (1-based)."""
        return round(min(self.temperature_cap, self.temperature + self.temperature_step * (attempt - 1)), 4)


async def _attempt(
    client: ChatClient,
    row: ManifestRow,
    level: int,
    above: list[Draft],
    reasons: list[str],
    attempt: int,
    config: BuildConfig,
    image_url: str,
    seed: int,
) -> tuple[Draft | None, list[str], dict[str, Any]]:
    """Generate and check one attempt of a stage; return the draft (None on failure), its reasons and a log."""
    temperature = config.temperature_at(attempt)
    log: dict[str, Any] = {
        "level": level,
        "attempt": attempt,
        "temperature": temperature,
        "guidance": list(reasons),
        "calls": 1,
    }
    text = stage_prompt(level, row.family, row.aspect, above, row.anchor, reasons)
    try:
        reply = await client.complete(
            user_message(text, image_url),
            temperature=temperature,
            max_tokens=config.max_tokens,
            seed=call_seed(seed, row.id, "generate", level, attempt),
            accept=lambda reply: parse_draft(reply, level),  # an unusable reply is not cached
        )
        draft = parse_draft(reply, level)
    except ReplyError as exc:
        log.update(passed=False, reasons=[f"unusable reply: {exc}"])
        return None, log["reasons"], log
    log["draft"] = dataclasses.asdict(draft)
    if level not in config.validate_levels:
        log.update(passed=True, reasons=[])
        return draft, [], log
    upper = above[-1] if above else None
    log["calls"] = 2
    try:
        verdict_reply = await client.complete(
            user_message(validate_prompt(upper, draft), image_url),
            temperature=config.validator_temperature,
            max_tokens=256,
            seed=call_seed(seed, row.id, "validate", level, attempt),
            accept=lambda reply: parse_verdict(reply, top=upper is None),
        )
        verdict = parse_verdict(verdict_reply, top=upper is None)
    except ReplyError as exc:
        log.update(passed=False, reasons=[f"unusable validator reply: {exc}"])
        return None, log["reasons"], log
    log["verdict"] = dataclasses.asdict(verdict)
    log.update(passed=verdict.passed, reasons=verdict.failures())
    return (draft if verdict.passed else None), log["reasons"], log


async def build_item(
    client: ChatClient, row: ManifestRow, config: BuildConfig, image_url: str, seed: int = 0
) -> dict[str, Any]:
    """Build one item top-down; return its record (status 'done' with three drafts, or 'rejected')."""
    record: dict[str, Any] = {
        "id": row.id,
        "image": str(row.image),
        "family": row.family,
        "aspect": row.aspect,
        "anchor": row.anchor,
        "attempts": [],
    }
    drafts: list[Draft] = []
    for level in STAGE_LEVELS:
        reasons: list[str] = []
        draft = None
        for attempt in range(1, config.max_attempts + 1):
            draft, reasons, log = await _attempt(client, row, level, drafts, reasons, attempt, config, image_url, seed)
            record["attempts"].append(log)
            if draft is not None:
                break
        if draft is None:
            return {**record, "status": "rejected", "rejected_at": level, "reasons": reasons}
        drafts.append(draft)
    levels = sorted(drafts, key=lambda d: d.level)
    return {**record, "status": "done", "levels": [dataclasses.asdict(d) for d in levels]}


def calls_of(record: dict[str, Any]) -> int:
    """Return the model calls an item's build made (generation and validation, cached or not)."""
    return sum(a.get("calls", 1) for a in record.get("attempts", []))
