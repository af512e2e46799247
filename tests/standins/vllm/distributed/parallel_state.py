"""vllm.distributed.parallel_state stand-in: a one-process tensor-parallel group."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class GroupCoordinator:
    """The fields of vLLM's GroupCoordinator that lmms-eval reads."""

    world_size: int = 1
    rank_in_group: int = 0
    cpu_group: Any = None


def get_tp_group() -> GroupCoordinator:
    """Return this process's tensor-parallel group (always one process here)."""
    return GroupCoordinator()
