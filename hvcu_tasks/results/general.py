"""General benchmarks next to HVCU-Bench (paper Table 7): which lmms-eval task and metric feeds which column."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """One Table 7 column: the lmms-eval task and metric it reads, and the factor to percent."""

    label: str
    task: str
    metric: str
    to_percent: float


# lmms-eval 0.7.3 reports MMStar, MMMU and HallusionBench as fractions and MMBench in percent.
COLUMNS: tuple[Column, ...] = (
    Column("MMBench CN(CC)", "mmbench_cn_cc", "gpt_eval_score", 1.0),
    Column("MMBench CN(Dev)", "mmbench_cn_dev", "gpt_eval_score", 1.0),
    Column("MMBench EN(Dev)", "mmbench_en_dev", "gpt_eval_score", 1.0),
    Column("MMBench RU(Dev)", "mmbench_ru_dev", "gpt_eval_score", 1.0),
    Column("HallusionBench qAcc", "hallusion_bench_image", "qAcc", 100.0),
    Column("HallusionBench fAcc", "hallusion_bench_image", "fAcc", 100.0),
    Column("HallusionBench aAcc", "hallusion_bench_image", "aAcc", 100.0),
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


def general_values(results: dict[str, dict[str, float]]) -> dict[str, float | None]:
    """Map one model's lmms-eval results ({task: {metric: value}}) to Table 7 columns, in percent."""
    values: dict[str, float | None] = {}
    for c in COLUMNS:
        raw = results.get(c.task, {}).get(c.metric)
        values[c.label] = None if not isinstance(raw, (int, float)) else float(raw) * c.to_percent
    mmbench = [values[c.label] for c in COLUMNS[:4]]
    values[MMBENCH_AVG] = None if None in mmbench else sum(mmbench) / 4  # type: ignore[arg-type]
    return {label: values[label] for label in TABLE_ORDER}
