"""Issue 35: the installed task folder and `hvcu export-task`'s hand lmms-eval one implementation of the task.

For every `!function utils.<name>` that the installed YAMLs and the exported YAMLs both reference, the function
each folder's utils.py resolves it to must have the same source text, and come from the same file (the exported
copy of it) — not a second implementation that happens to behave alike.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest
from conftest import REPO

from hvcu_tasks.cli import main

INSTALLED = REPO / "hvcu_tasks" / "lmms" / "tasks"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("one") / "hvcu_bench"
    assert main(["export-task", str(folder)]) == 0
    return folder


def utils_of(folder: Path) -> ModuleType:
    """Execute a task folder's utils.py as lmms-eval does for a `!function` (a fresh, unregistered module)."""
    spec = importlib.util.spec_from_file_location("utils", folder / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def named_hooks(folder: Path) -> set[str]:
    """Return every `utils.<name>` a task folder's YAMLs and YAML templates reference with `!function`."""
    names: set[str] = set()
    for path in folder.iterdir():
        if path.is_file() and path.name.endswith(("yaml", "_yaml")):
            names |= set(re.findall(r"!function\s+utils\.(\w+)", path.read_text(encoding="utf-8")))
    return names


def defining_file(function: object, root: Path) -> str:
    """Return the file that defines a function, relative to its package folder (lmms/ or hvcu_lib/, core/ alike)."""
    path = Path(inspect.getsourcefile(function)).resolve().relative_to(root)
    return path.as_posix().removeprefix("lmms/")


def test_both_folders_reference_the_hooks_of_every_setting(exported: Path) -> None:
    both = named_hooks(INSTALLED) & named_hooks(exported)
    every_setting = {
        "process_docs",
        "process_results",
        "context_process_docs",
        "context_doc_to_messages",
        "blind_doc_to_messages",
        "circular_process_docs",
        "gold_process_results",
        "agg_acc_full",
        "agg_circular_acc_full",
        "overall_score_group",
    }
    assert every_setting <= both


def test_every_hook_both_folders_name_has_the_same_source_text(exported: Path) -> None:
    installed, ours = utils_of(INSTALLED), utils_of(exported)
    both = sorted(named_hooks(INSTALLED) & named_hooks(exported))
    differ = [n for n in both if inspect.getsource(getattr(installed, n)) != inspect.getsource(getattr(ours, n))]
    assert differ == []


def test_every_hook_both_folders_name_comes_from_the_same_file(exported: Path) -> None:
    installed, ours = utils_of(INSTALLED), utils_of(exported)
    both = sorted(named_hooks(INSTALLED) & named_hooks(exported))
    package, lib = REPO / "hvcu_tasks", (exported / "hvcu_lib").resolve()
    moved = [n for n in both if defining_file(getattr(installed, n), package) != defining_file(getattr(ours, n), lib)]
    assert moved == []
    assert defining_file(installed.context_process_docs, package) == "context.py"  # a hook module, not a copy
