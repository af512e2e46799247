"""The toolkit's settings from the environment: every HVCU_* variable is read here and nowhere else.

`current()` reads os.environ on every call (nothing cached); a bad value is reported by the setting that needs it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

DATA_ENV = "HVCU_BENCH_DATA"
"""Where the `hub` tasks read instead (a local copy, `smoke`, or another `hub:REPO[@REV]`)."""
REVISION_ENV = "HVCU_BENCH_REVISION"
"""Pins the hub revision (branch, tag or commit) that the `hub` tasks read."""
CACHE_DIR_ENV = "HVCU_CACHE_DIR"
"""The folder of the toolkit's caches; off, none, 0 or false turns them off."""
IMAGE_CACHE_ENV = "HVCU_IMAGE_CACHE_MB"
"""Budget of the decoded-image LRU in megabytes (0 turns it off)."""
NO_AUTO_TASKS_ENV = "HVCU_NO_AUTO_TASKS"
"""Set (1, true, yes) to stop the plugin from indexing the task folder (pass --include_path instead)."""
NO_ROUND_ROUTING_ENV = "HVCU_NO_ROUND_ROUTING"
"""Set (1, true, yes) to get lmms-eval's own model classes back (no whole-round routing)."""

HUB_DATASET = "Chime316/HVCU-Bench"
"""The hub dataset a `hub` source reads when it names no repository."""
DEFAULT_IMAGE_CACHE_MB = 256.0
YES = frozenset({"1", "true", "yes"})
"""The values (any case) that turn an opt-out variable on."""


@dataclass(frozen=True)
class Settings:
    """The HVCU_* environment at one moment: each value stripped, "" when unset."""

    data: str = ""
    revision: str = ""
    cache_dir: str = ""
    image_cache_mb: str = ""
    no_auto_tasks: bool = False
    no_round_routing: bool = False

    def image_cache_bytes(self) -> int:
        """The decoded-image LRU's budget in bytes, or ValueError naming HVCU_IMAGE_CACHE_MB."""
        raw = self.image_cache_mb
        try:
            megabytes = float(raw) if raw else DEFAULT_IMAGE_CACHE_MB
        except ValueError:
            megabytes = -1.0
        if not megabytes >= 0:  # also refuses NaN
            raise ValueError(
                f"{IMAGE_CACHE_ENV}={raw!r}: expected a number of megabytes >= 0 (0 turns the image cache off)"
            )
        return int(megabytes * 1024 * 1024)


def current(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings of `environ` (default: os.environ, read now)."""
    env = os.environ if environ is None else environ
    return Settings(
        data=env.get(DATA_ENV, "").strip(),
        revision=env.get(REVISION_ENV, "").strip(),
        cache_dir=env.get(CACHE_DIR_ENV, "").strip(),
        image_cache_mb=env.get(IMAGE_CACHE_ENV, "").strip(),
        no_auto_tasks=env.get(NO_AUTO_TASKS_ENV, "").strip().lower() in YES,
        no_round_routing=env.get(NO_ROUND_ROUTING_ENV, "").strip().lower() in YES,
    )


def hub_spec(source: str) -> tuple[str, str | None] | None:
    """Return (repo, requested revision or None) of a 'hub' / 'hub:REPO[@REV]' source; None for any other source."""
    if source != "hub" and not source.startswith("hub:"):
        return None
    repo, _, revision = (source[4:] or HUB_DATASET).partition("@")
    return repo, revision or None


def pinned_source(source: str, revision: str) -> str:
    """Return a hub source with `revision` (HVCU_BENCH_REVISION's) added when it names none (others unchanged)."""
    spec = hub_spec(source)
    return f"hub:{spec[0]}@{revision}" if spec and revision and spec[1] is None else source


def resolve_source(declared: str, config: Settings | None = None) -> str:
    """Return the source a task reads: HVCU_BENCH_DATA's for hub tasks, else as declared.

    A hub source that names no revision is pinned to `HVCU_BENCH_REVISION` (`hub:REPO@REV` wins).
    """
    config = config or current()
    return pinned_source(config.data if declared == "hub" and config.data else declared, config.revision)
