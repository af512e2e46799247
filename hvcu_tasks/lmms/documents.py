"""What the installed toolkit hands the shared hooks (hooks.py): its validated samples, and images the plugin sends.

The exported task folder ships `export_documents.py` in this module's place; the hooks are the same file in both.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from hvcu_tasks import settings
from hvcu_tasks.core.schema import DataError, Problem, Sample, TaskLoadError
from hvcu_tasks.data import images, provenance
from hvcu_tasks.data.validate import data_identity, load_family
from hvcu_tasks.lmms.plugin import ensure_image_hook

log = logging.getLogger("hvcu_tasks")


def document_image(doc: Mapping[str, Any]) -> Any:
    """Return a document's image (`images.document_image`: it carries its source), the plugin's image hook first."""
    ensure_image_hook()
    return images.document_image(doc)


def task_data(stub: Any) -> tuple[list[Sample], str]:
    """Return a task's samples, validated, and their data identity (JSON text), or end the run (TaskLoadError)."""
    row = stub[0] if len(stub) else {}
    family, declared = str(row.get("family", "?")), str(row.get("source", "?"))
    source = settings.resolve_source(declared)
    try:
        if len(stub) != 1 or not {"family", "source"} <= set(stub.column_names):
            raise ValueError(f"HVCU task stub must hold one row with 'family' and 'source', got {stub.column_names}")
        if source != declared:
            env = settings.DATA_ENV
            log.warning("HVCU-Bench %s: reading %s (from $%s) instead of %s", family, source, env, declared)
        samples = load_family(source, family)
        return samples, provenance.encode(data_identity(family, source, samples))
    except DataError as exc:
        raise TaskLoadError(family, source, exc.problems) from exc
    except Exception as exc:  # anything else would be retried for a minute, then swallowed by lmms-eval (exit 0)
        log.debug("HVCU-Bench %s: loading %s failed", family, source, exc_info=True)
        problem = Problem(source, "-", "load", f"unexpected {type(exc).__name__}: {exc}")
        raise TaskLoadError(family, source, [problem]) from exc
