"""Read the authors' evaluation result files (`Result/<Family stem>/<Indep|Context>/<model>.json`) and simple
prediction files into scored outcomes; `score_runs` scores each (model, setting) with the stored key or, with
--reparse, both rules.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvcu_tasks.core.families import FAMILIES, LEVELS, OPTION_KEYS, UNKNOWN_ASPECT, aspect_from_text
from hvcu_tasks.core.metrics import Outcome, overall_score, score_family
from hvcu_tasks.core.official_parsing import parse_official
from hvcu_tasks.core.parsing import parse_choice
from hvcu_tasks.core.schema import DataError, Problem
from hvcu_tasks.data import jsonio
from hvcu_tasks.data.loaders import family_from_name
from hvcu_tasks.data.public import name_problem

ID_FIELDS = ("id", "item_id", "sample_id")
RAW_FIELDS = ("model_response", "raw_response", "response", "model_output")
FAMILY_FIELDS = ("family", "task", "category", "dataset", "task_name")

# The authors' setting folders and `evaluation_type` values -> this project's setting names.
SETTING_DIRS = {"indep": "base", "context": "context"}
EVALUATION_TYPES = {"independent_level": "base", "sequential_with_context": "context"}
SETTING_WORDS = {"indep": "base", "independent": "base", "context": "context"}
SETTING_ORDER = ("base", "context")

RULES = ("stored", "robust", "official")
"""How a turn's answer is read: the stored model_response_key, hvcu's parser or the authors' rule on the raw reply."""


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
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ResultFile:
    """One authors' result file: where it sits in the Result tree, and its predictions."""

    path: Path
    family: str
    setting: str | None
    model: str | None
    model_name: str | None
    predictions: tuple[Prediction, ...]


def _fail(path: Path, field: str, message: str, record: str = "-") -> DataError:
    """Return a one-problem DataError naming the file, the record and the field."""
    return DataError([Problem(str(path), record, field, message)])


def _layout(path: Path) -> tuple[str | None, str | None, str | None]:
    """Return (family, folder naming it, setting) read from the folders of Result/<Family>/<Indep|Context>/x.json."""
    parent = Path(os.path.abspath(path)).parent  # the path as named (a symlink's own folders), made absolute
    setting = SETTING_DIRS.get(parent.name.lower())
    folder = parent.parent if setting else parent
    family = family_from_name(folder.name) if folder.name else None
    return family, (folder.name if family else None), setting


def _name_family(path: Path) -> str | None:
    """Return the family the file name mentions, if any."""
    for token in [path.stem, *path.stem.replace(".", "_").split("_"), *path.stem.split("-")]:
        fam = family_from_name(token)
        if fam:
            return fam
    stem = path.stem.lower().replace("-", "_")
    for family, (split, json_stem, _short) in FAMILIES.items():
        if split.lower() in stem or json_stem.lower().replace("-", "_") in stem:
            return family
    return None


def _content_family(data: Any) -> tuple[str, str] | None:
    """Return (family, field) from a top-level field of the file that names a family, if any."""
    if isinstance(data, Mapping):
        for key in FAMILY_FIELDS:
            value = data.get(key)
            if isinstance(value, str) and (family := family_from_name(Path(value).stem)):
                return family, key
    return None


def _family_of(path: Path, data: Any, override: str | None) -> str:
    """Decide a result file's family from its folders or name, a top-level field and --family; refuse a conflict."""
    dir_family, folder, _setting = _layout(path)
    path_family, said_by = (dir_family, f"folder {folder!r}") if dir_family else (_name_family(path), "file name")
    content = _content_family(data)
    if path_family and content and content[0] != path_family:
        message = f"the path says {path_family} ({said_by}) but the file's {content[1]!r} says {content[0]}"
        raise _fail(path, f"family ({content[1]})", message)
    family = path_family or (content[0] if content else None)
    if override:
        wanted = family_from_name(override)
        if wanted is None:
            raise _fail(path, "family", f"unknown family {override!r}; use one of {list(FAMILIES)}")
        if family and family != wanted:
            raise _fail(path, "family", f"--family says {wanted} but the file says {family}")
        return wanted
    if family is None:
        raise _fail(path, "family", "cannot tell the task family from the file; pass --family")
    return family


def _setting_of(path: Path, data: Any) -> str | None:
    """Decide a result file's setting (base/context) from its folder, `evaluation_type` or name; refuse a conflict."""
    _family, _folder, dir_setting = _layout(path)
    value = data.get("evaluation_type") if isinstance(data, Mapping) else None
    content = EVALUATION_TYPES.get(value.strip().lower()) if isinstance(value, str) else None
    if dir_setting and content and dir_setting != content:
        folder = Path(os.path.abspath(path)).parent.name
        message = f"the path says {dir_setting} (folder {folder!r}) but the file says {value!r} ({content})"
        raise _fail(path, "evaluation_type", message)
    if dir_setting or content:
        return dir_setting or content
    words = {w.lower() for w in path.stem.replace("-", "_").replace(".", "_").split("_")}
    found = {SETTING_WORDS[w] for w in words if w in SETTING_WORDS}
    return found.pop() if len(found) == 1 else None


def _model_of(path: Path, data: Any) -> tuple[str | None, str | None]:
    """Return (model key, model_name as written): the file stem in the Result tree, else from `model_name`."""
    value = data.get("model_name") if isinstance(data, Mapping) else None
    name = value.strip() if isinstance(value, str) and value.strip() else None
    for field, text in (("model_name", name), ("file name", path.stem)):
        problem = None if text is None else name_problem(text)
        if problem:
            raise _fail(path, field, f"model name {problem}: a model name is one line of text")
    if _layout(path)[2]:  # Result/<Family>/<Indep|Context>/<model>.json: the file is named after the model
        return path.stem.replace("-", "_"), name
    # The authors name a result file model_name.split('/')[-1] with '-' -> '_'.
    return (name.split("/")[-1].replace("-", "_") if name else None), name


def _options(turn: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Return a turn's (key, text) options: a {key: text} dict (the authors' files) or a list of option objects."""
    options = turn.get("options")
    if isinstance(options, Mapping) and options:
        return tuple((str(k).strip().upper(), str(v)) for k, v in options.items())
    if isinstance(options, list) and options and all(isinstance(o, Mapping) and "option_key" in o for o in options):
        return tuple((str(o["option_key"]).strip().upper(), str(o.get("option_text", ""))) for o in options)
    return ()


def _predictions(path: Path, data: Any, fam: str, require_raw: bool) -> list[Prediction]:
    """Read predictions[].conversation_turns[] of one file, listing every defect with its id and field."""
    items = data.get("predictions") if isinstance(data, Mapping) else data
    if not isinstance(items, list):
        raise _fail(path, "predictions", "expected a 'predictions' list")
    out: list[Prediction] = []
    problems: list[Problem] = []
    no_raw: list[tuple[str, str]] = []
    for index, item in enumerate(items):
        if item is None:
            message = (
                "null: an item the authors' evaluator dropped (its image was missing), so its answers are unknown; "
                "rerun it, or delete the null entries to score without it as the authors do"
            )
            problems.append(Problem(str(path), f"#{index}", f"predictions[{index}]", message))
            continue
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
            options = _options(turn)
            keys = tuple(k for k, _ in options) or OPTION_KEYS
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
            response = raw if raw is not None else (key or "")
            out.append(Prediction(fam, sid, level, response, gold=gold, key=key, aspect=aspect, options=options))
    if no_raw:
        fields = "/".join(RAW_FIELDS)
        message = f"no raw reply ({fields}) in {len(no_raw)} turn(s), this the first; --reparse needs them"
        problems.append(Problem(str(path), no_raw[0][0], no_raw[0][1], message))
    if problems:
        raise DataError(problems)
    return out


def read_result_file(path: Path, family: str | None = None, require_raw: bool = False) -> ResultFile:
    """Read one authors' result file with its family, setting and model; `require_raw`: refuse turns without one."""
    path = Path(path)
    try:
        data = jsonio.read_json(path)
    except (jsonio.JsonReadError, OSError) as exc:
        raise _fail(path, "file", f"cannot read JSON: {getattr(exc, 'reason', exc)}") from exc
    fam = _family_of(path, data, family)
    setting = _setting_of(path, data)
    model, model_name = _model_of(path, data)
    preds = _predictions(path, data, fam, require_raw)
    return ResultFile(path, fam, setting, model, model_name, tuple(preds))


def result_paths(paths: Iterable[Path]) -> list[Path]:
    """Expand folders into the *.json files under them (recursively), each file once; refuse an empty folder."""
    out: dict[Path, Path] = {}
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(q for q in p.rglob("*.json") if q.is_file())
            if not found:
                raise _fail(p, "folder", "holds no result files (*.json, searched recursively)")
        elif p.exists():
            found = [p]
        else:
            raise _fail(p, "file", "no such file or folder")
        for q in found:
            out.setdefault(q.resolve(), q)
    return list(out.values())


def group_runs(files: Iterable[ResultFile]) -> dict[tuple[str | None, str | None], dict[str, ResultFile]]:
    """Group result files by (model, setting), one per family; refuse two for one (model, setting, family)."""
    runs: dict[tuple[str | None, str | None], dict[str, ResultFile]] = {}
    problems: list[Problem] = []
    for f in files:
        run = runs.setdefault((f.model, f.setting), {})
        first = run.get(f.family)
        if first is not None:
            what = f"model {f.model or '(not named)'}, setting {f.setting or '(unknown)'}, family {f.family}"
            problems.append(Problem(str(f.path), "-", "file", f"a second result for {what}; the first is {first.path}"))
            continue
        run[f.family] = f
    if problems:
        raise DataError(problems)
    return {k: runs[k] for k in sorted(runs, key=_run_order)}


def _run_order(key: tuple[str | None, str | None]) -> tuple[bool, str, int]:
    """Sort runs by model name (unnamed last), then base before context before unknown."""
    model, setting = key
    order = SETTING_ORDER.index(setting) if setting in SETTING_ORDER else len(SETTING_ORDER)
    return model is None, (model or "").casefold(), order


def outcomes_from_results(preds: Iterable[Prediction], rule: str = "stored") -> list[Outcome]:
    """Score predictions by `rule`: the stored key (authors' rule), or either parser on the raw reply."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; use one of {list(RULES)}")
    out = []
    for p in preds:
        if rule == "robust":
            pred = parse_choice(p.response, dict(p.options) if p.options else OPTION_KEYS)
        elif rule == "official":
            pred = parse_official(p.response)
        else:
            pred = p.key if p.key in OPTION_KEYS else None
        out.append(Outcome(p.sample_id, p.family, p.aspect, p.level, p.gold or "", pred, p.response))
    return out


def _score(files: Mapping[str, ResultFile], rule: str) -> tuple[dict[str, dict], float | None]:
    """Return the per-family scores and the Overall Score (None unless all three families are there)."""
    scores = {f: score_family(outcomes_from_results(files[f].predictions, rule)) for f in FAMILIES if f in files}
    overall = overall_score([s.acc_full for s in scores.values()]) if len(scores) == len(FAMILIES) else None
    return {f: s.to_dict() for f, s in scores.items()}, overall


def _stored_key_disagreements(files: Mapping[str, ResultFile]) -> tuple[int, str | None]:
    """Count turns whose stored key is not the authors' rule's reading of the raw reply; describe the first."""
    found = [
        (f.path, p)
        for f in files.values()
        for p in f.predictions
        if (p.key if p.key in OPTION_KEYS else None) != parse_official(p.response)
    ]
    if not found:
        return 0, None
    path, p = found[0]
    return len(found), (
        f"the stored model_response_key differs from the authors' rule on the raw reply in {len(found)} turn(s), "
        f"first {path} id={p.sample_id} level {p.level} (stored {p.key!r}, rule reads {parse_official(p.response)!r}): "
        "the file was edited or written by another parser version; the official numbers here re-parse the replies"
    )


def score_run(model: str | None, setting: str | None, files: Mapping[str, ResultFile], reparse: bool) -> dict:
    """Score one (model, setting): the authors' rule always, hvcu's parser too with `reparse`; JSON-ready."""
    missing = [f for f in FAMILIES if f not in files]
    notes = [f"no Overall Score: it needs all three families; missing: {', '.join(missing)}"] if missing else []
    official, overall_official = _score(files, "official" if reparse else "stored")
    robust, overall = _score(files, "robust") if reparse else ({}, None)
    disagreements, disagreement_note = _stored_key_disagreements(files) if reparse else (None, None)
    if disagreement_note:
        notes.append(disagreement_note)
    if not reparse:
        notes.append("hvcu parser numbers need --reparse and raw replies (these files hold only the parsed key)")
    elif setting == "context":
        notes.append(
            "context setting: levels 2-3 were asked after the authors' history (their parsed letters), so the hvcu "
            "parser re-reads the same replies; an hvcu run, whose history keeps its own parse, can differ"
        )
    names = sorted({f.model_name for f in files.values() if f.model_name})
    return {
        "model": model,
        "model_name": ", ".join(names) or None,
        "setting": setting,
        "files": {fam: str(files[fam].path) for fam in FAMILIES if fam in files},
        "missing_families": missing,
        "families": robust,
        "overall_score": overall,
        "families_official": official,
        "overall_score_official": overall_official,
        "parser": "hvcu parse_choice on the raw replies" if reparse else None,
        "parser_official": (
            "the authors' rule (hvcu_tasks.core.official_parsing) on the raw replies"
            if reparse
            else "model_response_key as stored (the authors' rule's output)"
        ),
        "stored_key_disagreements": disagreements,
        "note": "; ".join(notes) or None,
    }


def score_runs(paths: Sequence[Path], family: str | None = None, reparse: bool = False) -> list[dict]:
    """Score result files and folders: one JSON-ready entry per (model, setting)."""
    files = [read_result_file(p, family, require_raw=reparse) for p in result_paths(paths)]
    return [score_run(model, setting, run, reparse) for (model, setting), run in group_runs(files).items()]


def read_prediction_jsonl(path: Path) -> list[Prediction]:
    """Read a JSONL of {family, sample_id, level, response} lines (the replay model's simple format)."""
    out: list[Prediction] = []
    problems: list[Problem] = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = jsonio.loads(line, source=path, line=n)
            fam = family_from_name(str(rec["family"]))
            if fam is None:
                raise ValueError(f"unknown family {rec['family']!r}")
            out.append(Prediction(fam, str(rec["sample_id"]), int(rec["level"]), str(rec["response"])))
        except jsonio.JsonReadError as exc:
            problems.append(Problem(f"{path}:{n}", "-", "line", exc.reason))
        except (KeyError, ValueError, TypeError) as exc:
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
        preds = read_prediction_jsonl(f) if f.suffix == ".jsonl" else read_result_file(f).predictions
        for pr in preds:
            key = (pr.family, pr.sample_id, pr.level)
            if key in table:
                raise _fail(f, "level", f"second prediction for level {pr.level}", pr.sample_id)
            table[key] = pr.response
    return table
