"""Hooks named by the HVCU-Bench task YAMLs: `hvcu_tasks.lmms.hook_table.HOOKS`.

One implementation for this folder and `hvcu export-task`'s, whose utils.py hands lmms-eval the same table from its
copy of the same files.
"""

from hvcu_tasks.lmms.hook_table import HOOKS, unknown_hook

globals().update(HOOKS)
__all__ = sorted(HOOKS)


def __getattr__(name: str) -> object:
    """Refuse a `!function utils.<name>` that names no hook, saying which metrics a task YAML can list."""
    raise AttributeError(unknown_hook(name))
