"""Write the human scores as an lmms-eval results file (so `hvcu report` shows them) and a readable summary."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from generation.human.assign import Assignment
from generation.human.score import HumanScores
from hvcu_tasks.core.families import ASPECTS, FAMILIES
from hvcu_tasks.core.names import UnsafeNameError, check_name
from hvcu_tasks.data.files import inside, write_atomic

SUMMARY_FILE = "human_summary.json"
DEFINITION = (
    "Virtual annotator k answers level L with the k-th member of L's group; every metric is computed per virtual "
    "annotator and averaged (errors_at_* summed, error_share_* pooled), so a level's accuracy is the mean of "
    "that level's annotators."
)


def check_label(label: str) -> str:
    """Return a row label usable in lmms-eval's model_args (no ',' or '=') and as a folder name."""
    if not label.strip() or re.search(r"[,=]", label):
        raise ValueError(f"--label {label!r}: give a non-empty name without ',' or '='")
    try:
        check_name(folder_name(label.strip()), "folder name")
    except UnsafeNameError as exc:
        raise ValueError(f"--label {label!r}: its run folder would not be one folder inside --out ({exc})") from None
    return label.strip()


def check_stamp(stamp: str) -> str:
    """Return a results-file stamp if it is one safe file-name part (letters, digits, '_', '.', '-')."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", stamp) or stamp.startswith("."):
        raise ValueError(f"--stamp {stamp!r}: use letters, digits, '_', '.' or '-', not starting with '.'")
    return stamp


def folder_name(label: str) -> str:
    """Return the run subfolder lmms-eval would use for a model name (unsafe characters replaced by '__')."""
    return re.sub(r"[\"<>:/|\\?*\[\]]+", "__", label)


def task_name(family: str, smoke: bool) -> str:
    """Return the base-setting task of a family: hvcu_bench[_sample]_<short>."""
    return f"hvcu_bench{'_sample' if smoke else ''}_{FAMILIES[family][2]}"


def subset_limit(assignment: Assignment, smoke: bool) -> int | None:
    """Return a --limit-like count when the sheets held fewer samples than a family has in the paper, else None."""
    counts = {f: sum(i.family == f for i in assignment.items) for f in FAMILIES}
    if smoke or all(counts[f] >= sum(ASPECTS[f].values()) for f in FAMILIES):
        return None
    return max(counts.values())


def results_document(scores: HumanScores, assignment: Assignment, label: str, smoke: bool) -> dict[str, Any]:
    """Return the results JSON in lmms-eval's layout: per-task metrics as 'name,none', group, configs, config."""
    group = "hvcu_bench_sample" if smoke else "hvcu_bench"
    tasks = {f: task_name(f, smoke) for f in scores.families}
    results: dict[str, dict[str, Any]] = {
        tasks[f]: {"alias": tasks[f], **{f"{k},none": v for k, v in metrics.items()}}
        for f, metrics in scores.families.items()
    }
    if scores.overall is not None:
        results[group] = {"alias": group, "acc_full,none": scores.overall}
    n = {f: sum(i.family == f for i in assignment.items) for f in scores.families}
    return {
        "results": results,
        "groups": {group: results[group]} if group in results else {},
        "group_subtasks": {group: list(tasks.values())},
        "configs": {
            tasks[f]: {
                "task": tasks[f],
                "dataset_path": assignment.bench,
                "output_type": "human_answer_sheets",
                "metadata": {"annotators_per_level": assignment.per_level, "definition": DEFINITION},
            }
            for f in scores.families
        },
        "versions": {t: 1.0 for t in tasks.values()},
        "n-samples": {tasks[f]: {"original": n[f], "effective": n[f]} for f in scores.families},
        "config": {
            "model": "human",
            "model_args": f"model_version={label}",
            "batch_size": None,
            "limit": subset_limit(assignment, smoke),
        },
        "model_name": label,
        "model_name_sanitized": folder_name(label),
    }


def summary_document(scores: HumanScores, assignment: Assignment, label: str, results_file: str) -> dict[str, Any]:
    """Return the readable summary: Score, per-family metrics, virtual and real annotators, definition."""
    return {
        "label": label,
        "bench": assignment.bench,
        "annotators_per_level": assignment.per_level,
        "definition": DEFINITION,
        "overall_score": scores.overall,
        "families": scores.families,
        "virtual_annotators": [
            {"members": v.members, "acc_full": v.acc_full, "overall_score": v.overall} for v in scores.virtual
        ],
        "annotators": [
            {
                "annotator": a.annotator,
                "level": a.level,
                "answered": a.answered,
                "blank": a.blank,
                "acc": a.acc,
                "acc_all": a.acc_all,
            }
            for a in scores.annotators
        ],
        "results_file": results_file,
    }


def write_run(
    scores: HumanScores, assignment: Assignment, out: Path, label: str = "Human", stamp: str = "human"
) -> tuple[Path, Path]:
    """Write `<out>/<label>/<stamp>_results.json` and `<out>/human_summary.json`; return both paths."""
    label = check_label(label)
    check_stamp(stamp)
    smoke = assignment.bench == "smoke"
    out = Path(out)
    results_path = inside(out, folder_name(label), f"{stamp}_results.json")
    results_path.parent.mkdir(parents=True, exist_ok=True)
    document = results_document(scores, assignment, label, smoke)
    write_atomic(results_path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    summary_path = inside(out, SUMMARY_FILE)
    summary = summary_document(scores, assignment, label, str(results_path.relative_to(out.resolve())))
    write_atomic(summary_path, json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return out / folder_name(label) / results_path.name, out / SUMMARY_FILE
