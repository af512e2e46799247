"""Which data a task reads: its declared source, or the HVCU_BENCH_DATA override, pinned by HVCU_BENCH_REVISION."""

from __future__ import annotations

from hvcu_tasks import settings
from hvcu_tasks.data import provenance


def resolve_source(declared: str, config: settings.Settings | None = None) -> str:
    """Return the data source a task should read: the HVCU_BENCH_DATA override for hub tasks, else as declared.

    `HVCU_BENCH_REVISION` pins the hub revision of a hub source that names none (`hub:REPO@REV` wins).
    """
    config = config or settings.current()
    chosen = config.data if declared == "hub" and config.data else declared
    return provenance.pinned_source(chosen, config.revision)
