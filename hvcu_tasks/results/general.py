"""General benchmarks next to HVCU-Bench (paper Table 7): which lmms-eval task and metric feeds which column, and what
each benchmark's headline counts (per stratum, units right of units asked), read from the run's sample logs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvcu_tasks.data import jsonio
from hvcu_tasks.results.errors import ReportError


@dataclass(frozen=True)
class Column:
    """One Table 7 column: the lmms-eval task and metric it reads, and the factor to percent."""

    label: str
    task: str
    metric: str
    to_percent: float


# lmms-eval 0.7.3 reports MMStar and MMMU as fractions, MMBench and HallusionBench in percent.
COLUMNS: tuple[Column, ...] = (
    Column("MMBench CN(CC)", "mmbench_cn_cc", "gpt_eval_score", 1.0),
    Column("MMBench CN(Dev)", "mmbench_cn_dev", "gpt_eval_score", 1.0),
    Column("MMBench EN(Dev)", "mmbench_en_dev", "gpt_eval_score", 1.0),
    Column("MMBench RU(Dev)", "mmbench_ru_dev", "gpt_eval_score", 1.0),
    Column("HallusionBench qAcc", "hallusion_bench_image", "qAcc", 1.0),
    Column("HallusionBench fAcc", "hallusion_bench_image", "fAcc", 1.0),
    Column("HallusionBench aAcc", "hallusion_bench_image", "aAcc", 1.0),
    Column("MMStar CP", "mmstar", "coarse perception", 100.0),
    Column("MMStar FP", "mmstar", "fine-grained perception", 100.0),
    Column("MMStar IR", "mmstar", "instance reasoning", 100.0),
    Column("MMStar LR", "mmstar", "logical reasoning", 100.0),
    Column("MMStar ST", "mmstar", "science & technology", 100.0),
    Column("MMStar MA", "mmstar", "math", 100.0),
    Column("MMStar Avg.", "mmstar", "average", 100.0),
    Column("MMMU Acc", "mmmu_val", "mmmu_acc", 100.0),
)
GENERAL_TASKS: frozenset[str] = frozenset(c.task for c in COLUMNS)
MMBENCH_AVG = "MMBench Avg."
TABLE_ORDER: tuple[str, ...] = (*[c.label for c in COLUMNS[:4]], MMBENCH_AVG, *[c.label for c in COLUMNS[4:]])
MMSTAR_CATEGORIES = tuple(c.label for c in COLUMNS if c.task == "mmstar" and c.metric != "average")
HEADLINES: dict[str, tuple[str, ...]] = {
    MMBENCH_AVG: tuple(c.task for c in COLUMNS[:4]),
    "HallusionBench aAcc": ("hallusion_bench_image",),
    "MMStar Avg.": ("mmstar",),
    "MMMU Acc": ("mmmu_val",),
}
"""Each benchmark's headline column (the one with an interval, ranked against HVCU-Bench) and the tasks behind it."""
TASK_VALUE = {tasks[0]: label for label, tasks in HEADLINES.items()} | {c.task: c.label for c in COLUMNS[:4]}
"""The column of each task whose value its counts must give (an MMBench split: its own; the others: the headline)."""
CIRCULAR = 1_000_000
"""MMBench's CircularEval: row index + k * CIRCULAR asks question `index` again with its options rotated."""


def general_values(results: dict[str, dict[str, float]]) -> dict[str, float | None]:
    """Map one model's lmms-eval results ({task: {metric: value}}) to Table 7 columns, in percent."""
    values: dict[str, float | None] = {}
    for c in COLUMNS:
        raw = results.get(c.task, {}).get(c.metric)
        values[c.label] = None if not isinstance(raw, (int, float)) else float(raw) * c.to_percent
    mmbench = [values[c.label] for c in COLUMNS[:4]]
    values[MMBENCH_AVG] = None if None in mmbench else sum(mmbench) / 4  # type: ignore[arg-type]
    return {label: values[label] for label in TABLE_ORDER}


@dataclass(frozen=True)
class Counts:
    """A headline's units right and units asked per stratum (its value: the mean over strata of right / asked), and
    each unit's verdict when the sample logs give every one (paired comparisons)."""

    right: dict[str, int]
    sizes: dict[str, int]
    verdicts: dict[str, dict[str, bool]] | None = None


Units = dict[str, dict[str, bool | None]]
"""One task's units per stratum: unit id -> right (None: the log does not say)."""


def _unit(task: str, line: dict[str, Any]) -> tuple[str, str, bool | None] | None:
    """Return (stratum, unit id, right) of one sample-log line; None for a line that is no unit (a circular copy)."""
    if task == "mmstar":
        rec = line["average"]
        return str(rec["l2_category"]), str(rec["question_id"]), rec["score"] == 1
    if task == "mmmu_val":
        rec = line["mmmu_acc"]
        gold, preds = rec["answer"], rec["parsed_pred"]
        right = any(p == gold or (isinstance(gold, list) and p in gold) for p in preds)  # MMMU's multiple-choice rule
        return "all", str(rec["id"]), right if rec["question_type"] == "multiple-choice" else None
    if task == "hallusion_bench_image":
        rec = line["aAcc"]
        return "all", hallusion_key(rec), rec["correct"] == 1 if "correct" in rec else None
    index = int(line["gpt_eval_score"]["index"])  # an MMBench split: one unit per question
    return None if index >= CIRCULAR else (task, str(index), None)


def hallusion_key(record: dict[str, Any]) -> str:
    """Return a HallusionBench question's key (category, subcategory, set, figure, question), as lmms-eval keys it."""
    return "_".join(str(record[k]) for k in ("category", "subcategory", "set_id", "figure_id", "question_id"))


def check_judged(path: Path, lines: list[tuple[int, Any]]) -> None:
    """Refuse a HallusionBench log whose judge verdicts were given to other replies: lmms-eval keeps them in
    OUTPUT_PATH/gpt_response/ and reuses them for any later run written to the same --output_path."""
    judged = {}
    for kind in ("vd", "vs"):
        kept = path.parent.parent / "gpt_response" / f"hallusion_output_{kind}_model.json"
        judged |= {hallusion_key(r): r["model_prediction"] for r in (jsonio.read_json(kept) if kept.is_file() else [])}
    for n, line in lines:
        rec, said = line["aAcc"], None
        if "gpt_answer" in rec:  # the prompt the judge got: "...Prediction answer:<reply>\nOutput:<verdict>"
            said = str(rec["gpt_answer"]).split("\nPrediction answer:")[-1].split("\nOutput:")[0]
        reply = rec.get("model_prediction")
        if (said if said is not None else judged.get(hallusion_key(rec), reply)) != reply:
            raise ReportError(
                f"{path}:{n}: the judge's verdict is on another reply than this run's ({reply!r}): "
                "lmms-eval reuses OUTPUT_PATH/gpt_response/hallusion_output_*.json of an earlier run written to the "
                "same --output_path; rerun hallusion_bench_image with an --output_path of its own"
            )


def logged_units(task: str, path: Path) -> Units:
    """Return a general task's units from its `--log_samples` file; a line without the fields is refused in one line."""
    lines, units = [], {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot read it ({exc})") from None
    for n, line in enumerate(text.splitlines(), start=1):
        try:
            if line.strip() and (found := _unit(task, parsed := jsonio.loads(line, source=path, line=n))) is not None:
                units.setdefault(found[0], {})[found[1]] = found[2]
        except (jsonio.JsonReadError, KeyError, TypeError, ValueError) as exc:
            raise ReportError(f"{path}:{n}: not a {task} samples line ({type(exc).__name__}: {exc})") from None
        lines += [(n, parsed)] if line.strip() else []
    try:
        if task == "hallusion_bench_image":
            check_judged(path, lines)
    except (OSError, jsonio.JsonReadError, KeyError, TypeError, AttributeError) as exc:
        raise ReportError(f"{path}: its judge's verdicts in gpt_response/ cannot be read ({exc!r})") from None
    return units


def headline_counts(general: dict[str, dict[str, Any]], units: dict[str, Units], where: str) -> dict[str, Counts]:
    """Return the counts of every headline whose tasks all have units; refuse counts that cannot give the value read."""
    values = general_values(general)
    found = {}
    for label, tasks in HEADLINES.items():
        if values[label] is None or not all(t in units for t in tasks):
            continue
        right, sizes, verdicts = {}, {}, {}
        for task in tasks:
            task_value = values[TASK_VALUE[task]]
            for stratum, unit in units[task].items():
                sizes[stratum] = len(unit)
                known = None not in unit.values()
                right[stratum] = sum(unit.values()) if known else round(task_value * len(unit) / 100)  # type: ignore
                if known:
                    verdicts[stratum] = unit
        got = sum(right[s] / sizes[s] for s in sizes) / len(sizes) * 100 if sizes else -1.0
        if abs(got - values[label]) > 0.01:  # type: ignore[operator]
            raise ReportError(
                f"{where}: {label} is {values[label]:.2f} in the results file, but its sample logs give {got:.2f} "
                f"({sum(sizes.values())} units); keep each samples file beside the results file of its run"
            )
        found[label] = Counts(right, sizes, verdicts if len(verdicts) == len(sizes) else None)
    return found
