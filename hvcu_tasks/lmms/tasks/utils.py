"""Hooks named by the HVCU-Bench task YAMLs: `hvcu_tasks.lmms.hook_table.HOOKS`.

One implementation for this folder and `hvcu export-task`'s, whose utils.py hands lmms-eval the same table from its
copy of the same files.
"""

from hvcu_tasks.lmms.hook_table import HOOKS

globals().update(HOOKS)
__all__ = sorted(HOOKS)
