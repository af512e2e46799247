"""One record of the authors' format -> a Sample and every problem it has (pure: the half of loading after the read).

Each problem names the record and the field (`qa_levels[level=2].options[1].option_text`); JSON text held in a
field is parsed by the caller's `decode`, which raises ValueError saying why.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from hvcu_tasks.core.families import LEVELS, UNKNOWN_ASPECT, aspect_from_text
from hvcu_tasks.core.names import LONE_SURROGATE, UnsafeNameError, check_name
from hvcu_tasks.core.schema import ImageRef, Level, Problem, Sample, check_sample

ASPECT_COLUMNS = ("aspect", "sub_category", "subcategory", "category", "sub_task", "subtask", "type")


def _as_key(value: Any) -> str:
    """Normalise an answer or option key: strip and upper-case."""
    return str(value).strip().upper()


Report = Callable[[str, str], None]
"""Records one problem of the record being read: (field, message)."""

Decode = Callable[[str], Any]
"""Parses JSON text held in a field; raises ValueError saying why it is not JSON."""


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Build a JSON object, refusing a key given twice (json.loads would silently keep the last)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears twice in one object")
        out[key] = value
    return out


def loads_unique(text: str) -> Any:
    """Parse JSON text, refusing a key given twice: the reader of the code both task folders share (no data/jsonio)."""
    return json.loads(text, object_pairs_hook=unique_object)


def _text(value: Any, fld: str, add: Report) -> str | None:
    """Return a question or option text, or report why it is not usable text (null, not a string, bad Unicode)."""
    if value is None:
        add(fld, "missing (null)")
        return None
    if not isinstance(value, str):
        add(fld, f"expected text, got {type(value).__name__} {value!r}")
        return None
    bad = LONE_SURROGATE.search(value)
    if bad is not None:
        add(fld, f"contains a lone surrogate (U+{ord(bad.group()):04X}), which is not valid Unicode text")
        return None
    return value


def _parse_options(raw: Any, where: str, add: Report, decode: Decode) -> tuple[tuple[str, str], ...]:
    """Read options given as [{option_key, option_text}], {"A": text} or a list of texts."""
    if isinstance(raw, str):
        try:
            raw = decode(raw)
        except ValueError as exc:
            add(f"{where}.options", f"not a list, mapping or valid JSON text ({exc})")
            return ()
    if isinstance(raw, Mapping):
        return tuple((_as_key(k), _text(v, f"{where}.options.{k}", add) or "") for k, v in raw.items())
    if raw is None or isinstance(raw, (bytes, bytearray)) or not isinstance(raw, Iterable):
        add(f"{where}.options", f"expected a list of options, got {type(raw).__name__}")
        return ()
    out: list[tuple[str, str]] = []
    for i, opt in enumerate(raw):
        if isinstance(opt, Mapping):
            key_name = next((n for n in ("option_key", "key", "label") if n in opt), None)
            text_name = next((n for n in ("option_text", "text", "value") if n in opt), None)
            if key_name is None or text_name is None:
                add(f"{where}.options[{i}]", f"expected option_key and option_text, found {sorted(opt)}")
                continue
            if opt[key_name] is None:
                add(f"{where}.options[{i}].{key_name}", "missing (null)")
                continue
            out.append((_as_key(opt[key_name]), _text(opt[text_name], f"{where}.options[{i}].{text_name}", add) or ""))
        elif isinstance(opt, str):
            out.append((chr(ord("A") + i), _text(opt, f"{where}.options[{i}]", add) or ""))
        else:
            add(f"{where}.options[{i}]", f"unreadable option {opt!r}")
    return tuple(out)


def _level_number(raw: Mapping[str, Any], where: str, add: Report) -> int | None:
    """Return a level's number (1, 2 or 3; '1', 'L1' and 'Level 1' accepted), or report why there is none."""
    if "level" not in raw or raw["level"] is None:
        add(f"{where}.level", "missing" if "level" not in raw else "missing (null)")
        return None
    value = raw["level"]
    try:
        if isinstance(value, bool):
            raise ValueError
        number = int(str(value).strip().upper().removeprefix("L").removeprefix("EVEL"))
    except ValueError:
        add(f"{where}.level", f"not a level number: {value!r}")
        return None
    if number not in LEVELS:
        add(f"{where}.level", f"level {number} is outside 1-3")
        return None
    return number


def _parse_levels(raw: Any, add: Report, decode: Decode) -> tuple[Level, ...]:
    """Read the `qa_levels` list (or its JSON text) into Level records."""
    if isinstance(raw, str):
        try:
            raw = decode(raw)
        except ValueError as exc:
            add("qa_levels", f"not a list or valid JSON text ({exc})")
            return ()
    if raw is None or not isinstance(raw, Iterable) or isinstance(raw, (Mapping, bytes, bytearray)):
        add("qa_levels", f"expected a list of levels, got {type(raw).__name__}")
        return ()
    levels = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            add(f"qa_levels[{i}]", f"expected an object, got {type(item).__name__}")
            continue
        number = _level_number(item, f"qa_levels[{i}]", add)
        if number is None:
            continue
        where = f"qa_levels[level={number}]"
        missing = [k for k in ("question", "options", "correct_answer_key") if k not in item]
        if missing:
            add(where, f"missing field(s) {missing}")
            continue
        answer = item["correct_answer_key"]
        if answer is None:
            add(f"{where}.correct_answer_key", "missing (null)")
        levels.append(
            Level(
                level=number,
                question=_text(item["question"], f"{where}.question", add) or "",
                options=_parse_options(item["options"], where, add, decode),
                answer="" if answer is None else _as_key(answer),
            )
        )
    return tuple(levels)


def _aspect(record: Mapping[str, Any], family: str, sid: str) -> str:
    """Take the aspect from a metadata field, else from the id prefix, else 'unknown'."""
    for col in ASPECT_COLUMNS:
        value = record.get(col)
        if isinstance(value, str) and value.strip():
            found = aspect_from_text(value, family)
            if found:
                return found
    return aspect_from_text(sid, family) or UNKNOWN_ASPECT


def _shadowed(problem: Problem, parse_fields: list[str]) -> bool:
    """Whether a structural problem only restates a field the parser already reported."""
    for fld in parse_fields:
        if fld.startswith("qa_levels[level="):
            prefix = fld.split("]", 1)[0] + "]"
            if problem.field.startswith(prefix):
                return True
        elif fld.startswith("qa_levels") and problem.field == "qa_levels":
            return True
    return False


def record_to_sample(
    record: Mapping[str, Any], family: str, source: str, image: ImageRef | None, index: int, decode: Decode
) -> tuple[Sample | None, list[Problem]]:
    """Map one authors'-format record to a Sample and every problem it has (none when it is usable)."""
    raw_id = record.get("id")
    if raw_id is None or (isinstance(raw_id, str) and not raw_id.strip()):
        return None, [Problem(source, f"#{index}", "id", "missing id")]
    try:
        sid = check_name(raw_id, "id")
    except UnsafeNameError as exc:
        return None, [Problem(source, f"#{index}", "id", str(exc))]
    if "qa_levels" not in record:
        return None, [Problem(source, sid, "qa_levels", f"missing; record has fields {sorted(record)}")]
    problems: list[Problem] = []
    levels = _parse_levels(
        record["qa_levels"], lambda fld, msg: problems.append(Problem(source, sid, fld, msg)), decode
    )
    sample = Sample(
        id=sid, family=family, aspect=_aspect(record, family, sid), image=image, levels=levels, source=source
    )
    parse_fields = [p.field for p in problems]
    return sample, problems + [p for p in check_sample(sample) if not _shadowed(p, parse_fields)]
