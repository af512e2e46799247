"""Write the repetitive task YAMLs from the metric definitions: `python -m hvcu_tasks.lmms.taskgen`.

The committed files must equal what this writes (a test checks it), so the YAMLs cannot drift from
`metrics.TABLE_METRICS` and `hook_table.HOOKS`. The metric lists hold TABLE_METRICS (what lmms-eval prints), the
only metrics a task has aggregations for: a hand-written YAML that names a diagnostic's is refused when lmms-eval
builds the task (`hook_table.unknown_hook`); `hvcu report` computes the diagnostics from the sample logs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.core.metrics import FULL_METRIC, OFFICIAL_FULL_METRIC, TABLE_METRICS
from hvcu_tasks.lmms.plugin import TASKS_DIR

GROUP_METRICS = (FULL_METRIC, OFFICIAL_FULL_METRIC)
"""What a group of the three family tasks reports: the Overall Score under our rule and under the authors'."""


def higher_is_better(name: str) -> bool | None:
    """The YAMLs' `higher_is_better`: True for an accuracy (lmms-eval prints ↑), None for a count (no arrow)."""
    return None if name.startswith("n_") else True


# (task-name infix, stub source, human label) per dataset the tasks can read.
VARIANTS = (
    ("", "hub", "the hub dataset Chime316/HVCU-Bench"),
    ("sample_", "smoke", "the bundled smoke sample (NOT the benchmark)"),
)
# (task-name prefix, template, setting label) per evaluation setting.
SETTINGS = (
    ("hvcu_bench_", "_default_template_yaml", "base setting"),
    ("hvcu_bench_context_", "_context_template_yaml", "context setting"),
)
# The analyses beyond the paper (hvcu_tasks/lmms/analysis_tasks.py): (prefix, template, setting label,
# metrics fragment or None for the family's own). Grouped as hvcu_analysis; hvcu_suite stays the paper's set.
ANALYSIS_SETTINGS = (
    ("hvcu_bench_blind_", "_blind_template_yaml", "blind setting (no image)", None),
    ("hvcu_bench_circular_", "_circular_template_yaml", "circular evaluation (4 option rotations)", "circular"),
    ("hvcu_bench_context_gold_", "_context_gold_template_yaml", "gold-context setting", None),
)
ANALYSIS_GROUP = "hvcu_analysis"
CIRCULAR_METRICS = "_circular_metrics_yaml"
YAML_BOOL = {True: "true", None: "null"}


def _metric_list(comments: list[str], infix: str) -> str:
    """Return a metric_list fragment: the comment lines, then every table metric aggregated by `utils.agg_{infix}*`."""
    lines = [*comments, "metric_list:"]
    for m in TABLE_METRICS:
        lines += [
            f"  - metric: {m}",
            f"    aggregation: !function utils.agg_{infix}{m}",
            f"    higher_is_better: {YAML_BOOL[higher_is_better(m)]}",
        ]
    return "\n".join(lines) + "\n"


def metrics_yaml(family: str) -> str:
    """Return the metric_list fragment of one family."""
    split = FAMILIES[family][0].replace("_", " ")
    comments = [
        f"# Metrics of the {split} family lmms-eval prints (percent, except the n_* counts).",
        "# *_official: the same accuracy with the authors' answer-parsing rule (comparable with the paper).",
        "# n_chains, n_incomplete (> 0: a partial run), n_failed_requests. The diagnostics (per aspect, error",
        "# attribution, invalid replies, answer positions, propagation): `hvcu report` on a --log_samples run.",
    ]
    return _metric_list(comments, "")


def circular_metrics_yaml() -> str:
    """Return the metric_list fragment every circular family task shares."""
    comments = [
        "# Metrics of every circular-evaluation family task lmms-eval prints (percent, except the n_* counts).",
        "# acc_*: a level counts right only when all 4 rotations of its options are; acc_full: all three levels so.",
        "# plain_acc_* (every rotated question on its own), invalid_* and the answer-position bias: `hvcu report`",
        "# on a --log_samples run.",
    ]
    return _metric_list(comments, "circular_")


def task_yaml(
    family: str, prefix: str, template: str, setting: str, infix: str, source: str, label: str, metrics: str = ""
) -> str:
    """Return one family task's YAML (`metrics`: the metric fragment to include, the family's own by default)."""
    split, _stem, short = FAMILIES[family]
    return (
        f"# HVCU-Bench {split.replace('_', ' ')}, {setting}, on {label}.\n"
        f"task: {prefix}{infix}{short}\n"
        "dataset_kwargs:\n"
        f"  data_files: stubs/{source}_{family}.jsonl\n"
        "include:\n"
        f"  - {template}\n"
        f"  - {metrics or f'_{short}_metrics_yaml'}\n"
    )


def group_name(prefix: str, infix: str) -> str:
    """Return the group name of a setting and data variant (hvcu_bench, hvcu_bench_context_sample, ...)."""
    return (prefix + infix).rstrip("_")


def group_yaml(prefix: str, setting: str, infix: str, label: str, score: str = "the paper's Overall Score") -> str:
    """Return the group YAML whose acc_full (and acc_full_official) is the Overall Score."""
    tasks = "".join(f"  - {prefix}{infix}{short}\n" for _split, _stem, short in FAMILIES.values())
    aggregates = "".join(
        f"  - metric: {m}\n    aggregation: !function utils.overall_score_group\n    weight_by_size: false\n"
        for m in GROUP_METRICS
    )
    return (
        f"# HVCU-Bench, {setting}, on {label}: the three task families.\n"
        f"# The group's acc_full is {score}: the unweighted mean of the families' acc_full;\n"
        "# acc_full_official is the same under the authors' answer-parsing rule (comparable with the paper).\n"
        "# lmms-eval matches these names as substrings of the subtasks' metric keys, so the acc_full entry also\n"
        "# covers acc_full_official; both use the same aggregation over each key's own values, so they agree.\n"
        "# The alias names the group's rows in the printed table (lmms-eval orders groups by name, not alias).\n"
        f"group: {group_name(prefix, infix)}\n"
        f'group_alias: "{group_name(prefix, infix)}: Overall Score"\n'
        f"task:\n{tasks}"
        f"aggregate_metric_list:\n{aggregates}"
        "metadata:\n"
        "  version: 1.0\n"
    )


SUITE_TASKS = (
    "hvcu_bench",
    "hvcu_bench_context",
    "mmbench_cn_cc",
    "mmbench_cn_dev",
    "mmbench_en_dev",
    "mmbench_ru_dev",
    "hallusion_bench_image",
    "mmstar",
    "mmmu_val",
)


def suite_yaml() -> str:
    """Return the group that runs HVCU-Bench (both settings) next to the paper's general benchmarks."""
    tasks = "".join(f"  - {t}\n" for t in SUITE_TASKS)
    return (
        "# HVCU-Bench (base + context) next to the general benchmarks of the paper's Table 7, in one run.\n"
        "# The context group needs a multi-round backend: --model vllm, qwen2_5_vl, qwen3_vl or llava_hf (chat\n"
        "# classes, not --force_simple), or --model hvcu_context --model_args inner=<any chat backend>,...\n"
        "# `hvcu report` turns the run into Tables 2, 3, 7 and 8.\n"
        "group: hvcu_suite\n"
        f"task:\n{tasks}"
    )


def analysis_group_yaml(infix: str, label: str) -> str:
    """Return the group of the three analyses beyond the paper (blind, circular, gold context)."""
    tasks = "".join(f"  - {group_name(prefix, infix)}\n" for prefix, *_rest in ANALYSIS_SETTINGS)
    return (
        f"# The analyses beyond the paper, on {label}: visual dependency (blind, no image), circular evaluation\n"
        "# (4 rotations of every level's options: 4x the base setting's requests) and the gold-context setting.\n"
        "# The gold-context group needs a multi-turn backend: --model vllm, qwen2_5_vl, qwen3_vl or llava_hf (chat\n"
        "# classes, not --force_simple), or --model hvcu_context --model_args inner=<any chat backend>,...\n"
        "# `hvcu report` turns the run into the analysis tables (beside base/context runs of the same model).\n"
        f"group: {group_name(ANALYSIS_GROUP + '_', infix)}\n"
        f"task:\n{tasks}"
    )


def generated_files() -> dict[str, str]:
    """Return every generated file, relative to the tasks folder (utils.py and the templates are written by hand)."""
    files = {CIRCULAR_METRICS: circular_metrics_yaml()}
    every_setting = [(*s, None) for s in SETTINGS] + list(ANALYSIS_SETTINGS)  # (prefix, template, setting, metrics)
    for family, (_split, _stem, short) in FAMILIES.items():
        files[f"_{short}_metrics_yaml"] = metrics_yaml(family)
        for infix, source, label in VARIANTS:
            files[f"stubs/{source}_{family}.jsonl"] = f'{{"family": "{family}", "source": "{source}"}}\n'
            for prefix, template, setting, metrics in every_setting:
                files[f"{prefix}{infix}{short}.yaml"] = task_yaml(
                    family, prefix, template, setting, infix, source, label, CIRCULAR_METRICS if metrics else ""
                )
    for infix, _source, label in VARIANTS:
        for prefix, _template, setting in SETTINGS:
            files[group_name(prefix, infix) + ".yaml"] = group_yaml(prefix, setting, infix, label)
        for prefix, _template, setting, _metrics in ANALYSIS_SETTINGS:
            files[group_name(prefix, infix) + ".yaml"] = group_yaml(
                prefix, setting, infix, label, f"the Overall Score of the {setting}"
            )
        files[group_name(ANALYSIS_GROUP + "_", infix) + ".yaml"] = analysis_group_yaml(infix, label)
    files["hvcu_suite.yaml"] = suite_yaml()
    return files


def write(root: Path = TASKS_DIR) -> None:
    """Write the generated files under `root`."""
    for rel, text in generated_files().items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else TASKS_DIR)
