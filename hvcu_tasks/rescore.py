"""Read the authors' evaluation result files and simple prediction files into scored outcomes."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvcu_tasks.families import FAMILIES, LEVELS, OPTION_KEYS, UNKNOWN_ASPECT, aspect_from_text, family_from_name
from hvcu_tasks.metrics import Outcome
from hvcu_tasks.parsing import parse_choice
from hvcu_tasks.schema import DataError, Problem

ID_FIELDS = ("id", "item_id", "sample_id")
RAW_FIELDS = ("model_response", "raw_response", "response", "model_output")


@dataclass(frozen=True)
class Prediction:
    """One model reply to one (family, sample, level) question, as read from a file."""

    family: str
    sample_id: str
    level: int
    response: str
    gold: str | None = None
    key: str | None = None
    aspect: str = UNKNOWN_ASPECT


def _family_of(path: Path, data: Any, override: str | None) -> str:
    """Decide a result file's family from --family, a top-level field, or the file name."""
    if override:
        fam = family_from_name(override)
        if fam:
            return fam
        raise DataError(
            [Problem(str(path), "-", "family", f"unknown family {override!r}; use one of {list(FAMILIES)}")]
        )
    if isinstance(data, Mapping):
        for key in ("family", "task", "category", "dataset", "task_name"):
            value = data.get(key)
            if isinstance(value, str) and family_from_name(Path(value).stem):
                return family_from_name(Path(value).stem)  # type: ignore[return-value]
    for token in [path.stem, *path.stem.replace(".", "_").split("_"), *path.stem.split("-")]:
        fam = family_from_name(token)
        if fam:
            return fam
    stem = path.stem.lower().replace("-", "_")
    for family, (split, json_stem, _short) in FAMILIES.items():
        if split.lower() in stem or json_stem.lower().replace("-", "_") in stem:
            return family
    raise DataError([Problem(str(path), "-", "family", "cannot tell the task family from the file; pass --family")])


def _option_keys(turn: Mapping[str, Any]) -> tuple[str, ...]:
    """Return the option keys of a turn: from its own `options` list when it has one, else A-D."""
    options = turn.get("options")
    if isinstance(options, list) and options and all(isinstance(o, Mapping) and "option_key" in o for o in options):
        return tuple(str(o["option_key"]).strip().upper() for o in options)
    return OPTION_KEYS


def read_authors_results(path: Path, family: str | None = None, require_raw: bool = False) -> list[Prediction]:
    """Read one authors'-format result file: predictions[].conversation_turns[] with answer keys.

    `require_raw` (for --reparse) refuses a file whose turns lack the raw reply text.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError([Problem(str(path), "-", "file", f"cannot read JSON: {exc}")]) from exc
    fam = _family_of(path, data, family)
    items = data.get("predictions") if isinstance(data, Mapping) else data
    if not isinstance(items, list):
        raise DataError([Problem(str(path), "-", "predictions", "expected a 'predictions' list")])
    out: list[Prediction] = []
    problems: list[Problem] = []
    no_raw: list[tuple[str, str]] = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            problems.append(Problem(str(path), f"#{index}", "predictions", "expected an object"))
            continue
        raw_id = next((item[f] for f in ID_FIELDS if item.get(f) is not None), None)
        sid = str(raw_id).strip() if raw_id is not None else f"#{index}"
        turns = item.get("conversation_turns")
        if not isinstance(turns, list):
            problems.append(Problem(str(path), sid, "conversation_turns", "missing or not a list"))
            continue
        aspect = next(
            (a for a in (aspect_from_text(str(item.get(k, "")), fam) for k in ("aspect", "category")) if a),
            aspect_from_text(sid, fam) or UNKNOWN_ASPECT,
        )
        for t_index, turn in enumerate(turns):
            where = f"conversation_turns[{t_index}]"
            if not isinstance(turn, Mapping) or "correct_answer_key" not in turn:
                problems.append(Problem(str(path), sid, f"{where}.correct_answer_key", "missing"))
                continue
            try:
                level = int(str(turn.get("level", t_index + 1)).strip())
            except ValueError:
                problems.append(Problem(str(path), sid, f"{where}.level", f"not a number: {turn.get('level')!r}"))
                continue
            if level not in LEVELS:
                problems.append(Problem(str(path), sid, f"{where}.level", f"{level} is outside 1-3"))
                continue
            gold = str(turn["correct_answer_key"]).strip().upper()
            keys = _option_keys(turn)
            if gold not in keys:
                message = f"{gold!r} is not one of the options {list(keys)}"
                problems.append(Problem(str(path), sid, f"{where}.correct_answer_key", message))
                continue
            key = turn.get("model_response_key")
            key = str(key).strip().upper() if key not in (None, "") else None
            raw = next((turn[f] for f in RAW_FIELDS if isinstance(turn.get(f), str)), None)
            if raw is None and require_raw:
                no_raw.append((sid, where))
                continue
            out.append(
                Prediction(
                    family=fam,
                    sample_id=sid,
                    level=level,
                    response=raw if raw is not None else (key or ""),
                    gold=gold,
                    key=key,
                    aspect=aspect,
                )
            )
    if no_raw:
        fields = "/".join(RAW_FIELDS)
        message = f"no raw reply ({fields}) in {len(no_raw)} turn(s), this the first; --reparse needs them"
        problems.append(Problem(str(path), no_raw[0][0], no_raw[0][1], message))
    if problems:
        raise DataError(problems)
    return out


def read_prediction_jsonl(path: Path) -> list[Prediction]:
    """Read a JSONL of {family, sample_id, level, response} lines (the replay model's simple format)."""
    out: list[Prediction] = []
    problems: list[Problem] = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            fam = family_from_name(str(rec["family"]))
            if fam is None:
                raise ValueError(f"unknown family {rec['family']!r}")
            out.append(Prediction(fam, str(rec["sample_id"]), int(rec["level"]), str(rec["response"])))
        except (json.JSONDecodeError, KeyError, ValueError, TypeError) as exc:
            problems.append(Problem(f"{path}:{n}", "-", "line", f"expected family, sample_id, level, response: {exc}"))
    if problems:
        raise DataError(problems)
    return out


def read_predictions(paths: Iterable[Path]) -> dict[tuple[str, str, int], str]:
    """Read prediction files (JSONL or authors' result JSON; folders expand) into (family, id, level) -> reply."""
    table: dict[tuple[str, str, int], str] = {}
    files: list[Path] = []
    for p in map(Path, paths):
        files.extend(sorted(q for q in p.iterdir() if q.suffix in {".json", ".jsonl"}) if p.is_dir() else [p])
    for f in files:
        preds = read_prediction_jsonl(f) if f.suffix == ".jsonl" else read_authors_results(f)
        for pr in preds:
            key = (pr.family, pr.sample_id, pr.level)
            if key in table:
                raise DataError([Problem(str(f), pr.sample_id, "level", f"second prediction for level {pr.level}")])
            table[key] = pr.response
    return table


def outcomes_from_results(preds: Iterable[Prediction], reparse: bool = False) -> list[Outcome]:
    """Score authors' predictions: their parsed key by default, or our parser on the raw reply."""
    out = []
    for p in preds:
        pred = parse_choice(p.response, "ABCD") if reparse else (p.key if p.key in {"A", "B", "C", "D"} else None)
        out.append(Outcome(p.sample_id, p.family, p.aspect, p.level, p.gold or "", pred, p.response))
    return out
