"""Per-sample chains from lmms-eval `--log_samples` files, for both settings (behind `hvcu chains`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hvcu_tasks.core.metrics import Outcome, group_chains, is_complete
from hvcu_tasks.core.official_parsing import parse_official
from hvcu_tasks.data import jsonio

SAMPLES_FILE = re.compile(r"_samples_(?P<task>hvcu_bench\w*)\.jsonl$")
ANALYSIS_TASK = re.compile(r"^hvcu_bench_(?:blind|circular|context_gold)(?:_|$)")
"""Tasks of the `hvcu_analysis` group: their logs are not chains of the base or context setting."""


class LevelMismatchError(ValueError):
    """A samples line whose scored levels, questions, replies and gold keys are not equally many."""


@dataclass
class _Read:
    """What the lines of one samples file hold: each sample's identity, the scored levels, their texts."""

    samples: dict[tuple[Any, str], dict[str, Any]] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)
    texts: dict[tuple[str, str, int], tuple[str, Any]] = field(default_factory=dict)
    details: dict[tuple[Any, str], dict[str, Any]] = field(default_factory=dict)
    """Per sample: aspect, the file's line numbers, the image lmms-eval logged and the data identity."""


def samples_files(paths: Iterable[Path]) -> list[tuple[str, Path]]:
    """Return (task, file) for every base- or context-setting samples file under the given files or folders."""
    found = []
    for p in map(Path, paths):
        for f in sorted(p.rglob("*.jsonl")) if p.is_dir() else [p]:
            m = SAMPLES_FILE.search(f.name)
            if m and not ANALYSIS_TASK.match(m.group("task")):
                found.append((m.group("task"), f))
    return found


def no_samples_reason(paths: Sequence[Path]) -> str:
    """Return what is under the given paths instead of a base- or context-setting samples file (for one error line)."""
    if missing := [str(p) for p in map(Path, paths) if not p.exists()]:
        return f"no such file or folder: {', '.join(missing)}"
    names = [f.name for p in map(Path, paths) for f in (sorted(p.rglob("*")) if p.is_dir() else [p])]
    if tasks := sorted({n[n.index("_samples_") + 9 : -6] for n in names if re.search(r"_samples_.+\.jsonl$", n)}):
        return f"the samples files there are of other tasks only: {', '.join(tasks)}"
    if any(n.endswith("_results.json") for n in names):
        return "the results files there have no samples files beside them: rerun with --log_samples"
    return "no lmms-eval output there (no *_results.json, no *_samples_*.jsonl)"


def _reply(line: dict[str, Any]) -> Any:
    """Return the raw reply(s) lmms-eval logged for a document."""
    value = line.get("filtered_resps", line.get("resps"))
    while isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]
    return value


def _outcome(record: dict[str, Any], reply: Any) -> Outcome:
    """Rebuild a logged outcome; a log written before the authors' parse was recorded gets it from the raw reply."""
    if "pred_official" not in record:
        usable = isinstance(reply, str) and not record.get("failed")
        record = {**record, "pred_official": parse_official(reply) if usable else None}
    return Outcome.from_dict(record)


def _add_line(read: _Read, line: dict[str, Any], task: str, setting: str, number: int = 0) -> None:
    """Add one samples line (one document: a level, or a whole chain in the context setting) to what was read."""
    entry = line["acc_full"]
    records = entry["outcomes"]
    family = records[0]["family"] if records else None
    sid = str(records[0]["sample_id"]) if records else str(entry.get("sample_id"))
    read.samples.setdefault((family, sid), {"task": task, "setting": setting, "family": family, "sample_id": sid})
    aspect = records[0].get("aspect") if records else None
    details = read.details.setdefault((family, sid), {"aspect": aspect, "lines": [], "input_media": None})
    details["lines"].append(number)
    media = line.get("input_media")
    if details["input_media"] is None and isinstance(media, list) and media and isinstance(media[0], str):
        details["input_media"] = media[0]
    identity = entry.get("data_identity")
    if details.get("data_identity") is None and isinstance(identity, dict) and identity:
        details["data_identity"] = identity
    texts, replies, gold = _levels_of(line, entry, setting)
    counts = {"scored levels": len(records), "questions": len(texts), "replies": len(replies)}
    if gold is not None:
        counts["gold keys"] = len(gold)
    if len(set(counts.values())) != 1:
        shown = ", ".join(f"{n} {what}" for what, n in counts.items())
        raise LevelMismatchError(f"sample {sid!r}: {shown}; each level needs one of each (the line is damaged)")
    for record, question, reply in zip(records, texts, replies, strict=True):
        outcome = _outcome(record, reply)
        read.outcomes.append(outcome)
        read.texts[(outcome.family, outcome.sample_id, outcome.level)] = (question, reply)


def _levels_of(line: dict[str, Any], entry: dict[str, Any], setting: str) -> tuple[list, list, list | None]:
    """Return the questions, replies and (context setting) gold keys that one samples line logged."""
    if setting == "context":
        logged = entry.get("replies")  # the harness's own record: one per level, None where no reply came
        if not isinstance(logged, list):
            raw = _reply(line)
            logged = list(raw if isinstance(raw, list) else [raw])
        gold = entry.get("gold")
        return list(entry["questions"]), logged, list(gold) if isinstance(gold, list) else None
    replies = _reply(line)
    return [entry["question"]], [replies[0] if isinstance(replies, list) else replies], None


def chains_of_file(task: str, path: Path, details: bool = False) -> list[dict[str, Any]]:
    """Return one record per sample: questions, raw replies, letters and verdicts under both rules, gold.

    With `details`, also `aspect`, per-level `correct`, `correct_official` and `failed`, `lines` (from 1),
    `input_media` (the image lmms-eval logged) and `data_identity` (what the harness logged), None when not logged.
    """
    return logged_chains(task, path, details)[0]


def logged_chains(task: str, path: Path, details: bool = True) -> tuple[list[dict[str, Any]], list[Outcome]]:
    """Return a samples file's chain records (chains_of_file) and the outcome of every level it logged."""
    setting = "context" if task.startswith("hvcu_bench_context") else "base"
    read = _Read()
    for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            _add_line(read, jsonio.loads(text, source=path, line=n), task, setting, n)
        except jsonio.JsonReadError as exc:
            raise ValueError(f"{path}:{n}: not an HVCU-Bench samples line ({exc.reason})") from None
        except LevelMismatchError as exc:
            raise ValueError(f"{path}:{n}: {exc}") from exc
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise ValueError(f"{path}:{n}: not an HVCU-Bench samples line ({type(exc).__name__}: {exc})") from exc
    try:
        grouped = group_chains(read.outcomes)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}; each level of a sample is logged once (the file is damaged)") from exc
    records = [
        _record(meta, grouped.get(key, {}), read.texts, read.details[key] if details else None)
        for key, meta in read.samples.items()
    ]
    return records, read.outcomes


def _record(
    meta: dict[str, Any], chain: dict[int, Outcome], texts: dict[tuple, tuple[str, Any]], found: dict | None
) -> dict[str, Any]:
    """Return the `hvcu chains` record of one sample from its grouped outcomes (verdicts null unless complete)."""
    levels = [chain[k] for k in sorted(chain)]
    logged = [texts[(o.family, o.sample_id, o.level)] for o in levels]
    complete = is_complete(chain)
    record = {
        **meta,
        "questions": [question for question, _reply in logged],
        "replies": [reply for _question, reply in logged],
        "parsed": [o.pred for o in levels],
        "gold": [o.gold for o in levels],
        "chain_correct": all(o.correct for o in levels) if complete else None,
        "parsed_official": [o.pred_official for o in levels],
        "chain_correct_official": all(o.correct_official for o in levels) if complete else None,
    }
    if found is not None:  # the details of chains_of_file
        record |= {
            "aspect": found["aspect"],
            "correct": [o.correct for o in levels],
            "correct_official": [o.correct_official for o in levels],
            "failed": [o.failed for o in levels],
            "lines": found["lines"],
            "input_media": found["input_media"],
            "data_identity": found.get("data_identity"),
        }
    return record
