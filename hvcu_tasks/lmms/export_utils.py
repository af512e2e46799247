"""HVCU-Bench task hooks for lmms-eval: every `!function utils.<name>` the task YAMLs of this folder reference.

Written by `hvcu export-task` (the template is hvcu-toolkit's `hvcu_tasks/lmms/export_utils.py`). The hooks live in
`hvcu_lib/` beside this file: the toolkit's own hook modules (`hook_table.HOOKS` names them) over its pure core in
`hvcu_lib/core/` (prompts, both answer parsers, the metrics); this file only hands them to lmms-eval.

lmms-eval executes this file once for every `!function` it reads, as a module it does not register. So the code in
`hvcu_lib/` is loaded once per process as the package `hvcu_export_<digest of its folder's real path>`: registered
in `sys.modules` under that name (so every load shares one set of hooks, caches and classes, and pickle finds the
classes in every process of a data-parallel run) and never put on `sys.path`, so it cannot shadow another package:
not hvcu-toolkit's own `hvcu_tasks`, not another exported copy of this folder elsewhere.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import threading
from types import ModuleType

LIB = "hvcu_lib"
"""The folder beside this file that holds the hooks and the core."""
_LOCK = threading.Lock()


def _hook_table() -> ModuleType:
    """Return the hook table of the code beside this file, loading its package once per process."""
    folder = os.path.join(os.path.dirname(os.path.realpath(__file__)), LIB)
    name = "hvcu_export_" + hashlib.blake2b(folder.encode(), digest_size=8).hexdigest()
    with _LOCK:
        if name not in sys.modules:
            init = os.path.join(folder, "__init__.py")
            spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[folder])
            package = importlib.util.module_from_spec(spec)
            sys.modules[name] = package
            try:
                spec.loader.exec_module(package)
            except BaseException:
                del sys.modules[name]
                raise
    return importlib.import_module(f"{name}.hook_table")


_TABLE = _hook_table()
HOOKS = _TABLE.HOOKS
globals().update(HOOKS)
__all__ = sorted(HOOKS)


def __getattr__(name: str) -> object:
    """Refuse a `!function utils.<name>` that names no hook, saying which metrics a task YAML can list."""
    raise AttributeError(_TABLE.unknown_hook(name))
