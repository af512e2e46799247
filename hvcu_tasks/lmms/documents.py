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


def samples_for_stub(stub: Any) -> list[Sample]:
    """Load the samples a task's one-row stub ({family, source}) names through the one validator, or raise DataError."""
    if len(stub) != 1 or not {"family", "source"} <= set(stub.column_names):
        raise ValueError(f"HVCU task stub must hold one row with 'family' and 'source', got {stub.column_names}")
    family, declared = stub[0]["family"], stub[0]["source"]
    source = settings.resolve_source(declared)
    if source != declared:
        log.warning("HVCU-Bench %s: reading %s (from $%s) instead of %s", family, source, settings.DATA_ENV, declared)
    return load_family(source, family)


def task_data(stub: Any) -> tuple[list[Sample], str]:
    """Return a task's validated samples and their data identity (JSON text), or end the run (TaskLoadError)."""
    row = stub[0] if len(stub) else {}
    family, source = str(row.get("family", "?")), settings.resolve_source(str(row.get("source", "?")))
    try:
        samples = samples_for_stub(stub)
        return samples, provenance.encode(data_identity(family, source, samples))
    except DataError as exc:
        raise TaskLoadError(family, source, exc.problems) from exc
    except Exception as exc:  # anything else would be retried for a minute, then swallowed by lmms-eval (exit 0)
        log.debug("HVCU-Bench %s: loading %s failed", family, source, exc_info=True)
        problem = Problem(source, "-", "load", f"unexpected {type(exc).__name__}: {exc}")
        raise TaskLoadError(family, source, [problem]) from exc
