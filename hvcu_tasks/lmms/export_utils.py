"""HVCU-Bench task hooks for lmms-eval: every `!function utils.<name>` the task YAMLs of this folder reference.

Written by `hvcu export-task`; the hooks are the toolkit's own modules in `hvcu_lib/` beside this file. lmms-eval
executes this file once per `!function`, unregistered, so `hvcu_lib/` is loaded once per process as the package
`hvcu_export_<digest of its real path>`: registered in `sys.modules` (one set of hooks and classes; pickle finds
them in every rank) and never put on `sys.path`, so it shadows neither `hvcu_tasks` nor another exported copy.
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
