"""The task folder: generated files are current, YAMLs parse, and lmms-eval finds the tasks with no flag."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hvcu_tasks import settings
from hvcu_tasks.lmms import plugin, taskgen

HVCU_TASKS = {
    "hvcu_suite",
    "hvcu_bench_context",
    "hvcu_bench_context_impl",
    "hvcu_bench_context_aesth",
    "hvcu_bench_context_affect",
    "hvcu_bench_context_sample",
    "hvcu_bench_context_sample_impl",
    "hvcu_bench_context_sample_aesth",
    "hvcu_bench_context_sample_affect",
    "hvcu_bench",
    "hvcu_bench_impl",
    "hvcu_bench_aesth",
    "hvcu_bench_affect",
    "hvcu_bench_sample",
    "hvcu_bench_sample_impl",
    "hvcu_bench_sample_aesth",
    "hvcu_bench_sample_affect",
    # the analyses beyond the paper (issue 15)
    "hvcu_analysis",
    "hvcu_analysis_sample",
    *(
        f"hvcu_bench_{setting}{variant}{family}"
        for setting in ("blind", "circular", "context_gold")
        for variant in ("", "_sample")
        for family in ("", "_impl", "_aesth", "_affect")
    ),
}


@pytest.mark.parametrize("rel", sorted(taskgen.generated_files()))
def test_generated_files_are_committed_and_current(rel: str) -> None:
    path = plugin.TASKS_DIR / rel
    assert path.is_file(), f"{rel} missing: run python -m hvcu_tasks.lmms.taskgen"
    assert path.read_text(encoding="utf-8") == taskgen.generated_files()[rel], (
        f"{rel} stale: run python -m hvcu_tasks.lmms.taskgen"
    )


def test_only_task_files_use_the_yaml_suffix() -> None:
    names = {p.stem for p in plugin.TASKS_DIR.glob("*.yaml")}
    assert names == HVCU_TASKS


def test_every_yaml_loads_with_lmms_eval_and_names_known_hooks() -> None:
    from lmms_eval.utils import load_yaml_config

    for path in plugin.TASKS_DIR.glob("*.yaml"):
        config = load_yaml_config(str(path), mode="full")
        assert "group" in config or isinstance(config["task"], str)
        for metric in config.get("metric_list", []):
            assert callable(metric["aggregation"]), (path.name, metric["metric"])


def test_lmms_eval_still_has_the_signature_the_task_hook_wraps() -> None:
    """Fails loudly when lmms-eval changes the internal that makes `--tasks hvcu_bench` work with no flag."""
    from lmms_eval.tasks import TaskManager

    original = getattr(TaskManager.initialize_tasks, "__wrapped__", TaskManager.initialize_tasks)
    assert tuple(inspect.signature(original).parameters) == plugin.EXPECTED_SIGNATURE


def _listed_tasks(env: dict[str, str], *include_paths: list[str]) -> list[set[str]]:
    """The hvcu tasks a fresh process with `env` lists, one TaskManager per include path list ([] = none given)."""
    code = (
        "import json, sys, lmms_eval.models\n"  # importing models loads the entry points, as the CLI does
        "from lmms_eval.tasks import TaskManager\n"
        "for paths in map(json.loads, sys.argv[1:]):\n"
        "    tasks = TaskManager(include_path=paths or None).all_tasks\n"
        "    print(json.dumps([t for t in tasks if t.startswith('hvcu')]))\n"
    )
    queries = [json.dumps(paths) for paths in include_paths]
    proc = subprocess.run([sys.executable, "-c", code, *queries], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [set(json.loads(line)) for line in proc.stdout.strip().splitlines()[-len(queries) :]]


def test_installed_entry_point_registers_the_tasks_without_include_path() -> None:
    env = {k: v for k, v in os.environ.items() if k != settings.NO_AUTO_TASKS_ENV}
    assert _listed_tasks(env, []) == [HVCU_TASKS]


def test_opt_out_leaves_include_path_as_the_way_in() -> None:
    env = {**os.environ, settings.NO_AUTO_TASKS_ENV: "1"}
    assert _listed_tasks(env, [], [str(plugin.TASKS_DIR)]) == [set(), HVCU_TASKS]


def test_include_path_given_twice_is_indexed_once() -> None:
    assert plugin._with_our_tasks([str(plugin.TASKS_DIR)]) == [str(plugin.TASKS_DIR)]
    assert plugin._with_our_tasks("/x") == ["/x", str(plugin.TASKS_DIR)]
    assert plugin._with_our_tasks(None) == [str(plugin.TASKS_DIR)]


def test_replay_and_context_models_are_registered() -> None:
    from lmms_eval.models import get_model

    assert get_model("hvcu_replay").__name__ == "ReplayModel"
    assert get_model("hvcu_context").__name__ == "ContextWrapper"


def test_hvcu_tasks_dir_prints_the_folder(capsys) -> None:
    from hvcu_tasks.cli import main

    assert main(["tasks-dir"]) == 0
    assert Path(capsys.readouterr().out.strip()) == plugin.TASKS_DIR


@pytest.mark.usefixtures("lmms_eval_tasks_indexed_once")
def test_the_suite_names_tasks_lmms_eval_knows() -> None:
    from lmms_eval.tasks import TaskManager

    known = set(TaskManager(include_path=str(plugin.TASKS_DIR)).all_tasks)
    assert set(taskgen.SUITE_TASKS) <= known


def test_the_suite_stays_the_papers_set() -> None:
    assert taskgen.SUITE_TASKS == (
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


def test_the_analysis_group_holds_the_three_analyses() -> None:
    from lmms_eval.utils import load_yaml_config

    for group, variant in (("hvcu_analysis", ""), ("hvcu_analysis_sample", "_sample")):
        config = load_yaml_config(str(plugin.TASKS_DIR / f"{group}.yaml"), mode="full")
        assert config["task"] == [f"hvcu_bench_{s}{variant}" for s in ("blind", "circular", "context_gold")]
