"""Per-sample chains from lmms-eval `--log_samples` files, for both settings (behind `hvcu chains`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SAMPLES_FILE = re.compile(r"_samples_(?P<task>hvcu_bench\w*)\.jsonl$")


class LevelMismatchError(ValueError):
    """A samples line whose scored levels, questions, replies and gold keys are not equally many."""


def samples_files(paths: Iterable[Path]) -> list[tuple[str, Path]]:
    """Return (task, file) for every HVCU-Bench samples file under the given files or folders."""
    found = []
    for p in map(Path, paths):
        for f in sorted(p.rglob("*.jsonl")) if p.is_dir() else [p]:
            m = SAMPLES_FILE.search(f.name)
            if m:
                found.append((m.group("task"), f))
    return found


def _reply(line: dict[str, Any]) -> Any:
    """Return the raw reply(s) lmms-eval logged for a document."""
    value = line.get("filtered_resps", line.get("resps"))
    while isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]
    return value


def _add_line(by_sample: dict[str, dict[str, Any]], line: dict[str, Any], task: str, setting: str) -> None:
    """Add one samples line (one document: a level, or a whole chain in the context setting) to its chain."""
    entry = line["acc_full"]
    outcomes = entry["outcomes"]
    sid = str(outcomes[0]["sample_id"]) if outcomes else str(entry.get("sample_id"))
    chain = by_sample.setdefault(
        sid,
        {
            "task": task,
            "setting": setting,
            "family": outcomes[0]["family"] if outcomes else None,
            "sample_id": sid,
            "levels": {},
        },
    )
    texts, replies, gold = _levels_of(line, entry, setting)
    counts = {"scored levels": len(outcomes), "questions": len(texts), "replies": len(replies)}
    if gold is not None:
        counts["gold keys"] = len(gold)
    if len(set(counts.values())) != 1:
        shown = ", ".join(f"{n} {what}" for what, n in counts.items())
        raise LevelMismatchError(f"sample {sid!r}: {shown}; each level needs one of each (the line is damaged)")
    for outcome, question, reply in zip(outcomes, texts, replies, strict=True):
        chain["levels"][int(outcome["level"])] = {
            "question": question,
            "reply": reply,
            "parsed": outcome["pred"],
            "gold": outcome["gold"],
            "correct": outcome["correct"],
        }


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


def chains_of_file(task: str, path: Path) -> list[dict[str, Any]]:
    """Return one record per sample: questions, raw replies, parsed letters, gold keys and the verdict."""
    setting = "context" if task.startswith("hvcu_bench_context") else "base"
    by_sample: dict[str, dict[str, Any]] = {}
    for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            _add_line(by_sample, json.loads(text), task, setting)
        except LevelMismatchError as exc:
            raise ValueError(f"{path}:{n}: {exc}") from exc
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise ValueError(f"{path}:{n}: not an HVCU-Bench samples line ({type(exc).__name__}: {exc})") from exc
    out = []
    for chain in by_sample.values():
        levels = [chain["levels"][k] for k in sorted(chain["levels"])]
        complete = sorted(chain["levels"]) == [1, 2, 3]
        out.append(
            {
                **{k: chain[k] for k in ("task", "setting", "family", "sample_id")},
                "questions": [lv["question"] for lv in levels],
                "replies": [lv["reply"] for lv in levels],
                "parsed": [lv["parsed"] for lv in levels],
                "gold": [lv["gold"] for lv in levels],
                "chain_correct": all(lv["correct"] for lv in levels) if complete else None,
            }
        )
    return out
