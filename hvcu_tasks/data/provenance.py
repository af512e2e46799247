"""The data identity of a task load (source, counts, core.fingerprint's content fingerprint), encoded and read back."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from hvcu_tasks.core.fingerprint import SCHEME, fingerprint
from hvcu_tasks.core.schema import Sample
from hvcu_tasks.data import jsonio
from hvcu_tasks.data.loaders import family_counts
from hvcu_tasks.settings import hub_spec

CONFIG_KEY = "hvcu_data_identity"
"""Where a results file keeps a task's data identity: `configs.<task>.metadata.hvcu_data_identity`."""
VERSION_KEY = "hvcu_toolkit_version"
"""Where a results file keeps the toolkit version that ran a task, beside its data identity."""
MODEL_KEY = "hvcu_model_identity"
"""Where a results file keeps the model identity hvcu_context served a task with (absent without the wrapper)."""
LMMS_EVAL_KEY = "hvcu_lmms_eval_version"
"""Where a results file keeps the installed lmms-eval release that ran a task, beside the toolkit version (lmms-eval's
own `lmms_eval_version` is `branch@commit` of the git folder it lies in, whichever repository that is)."""


def toolkit_version() -> str:
    """Return the installed hvcu-toolkit version ("unknown" outside an installed package)."""
    try:
        return version("hvcu-toolkit")
    except PackageNotFoundError:
        return "unknown"


def data_identity(
    family: str, samples: Sequence[Sample], source: str, image_sha256: Callable[[Sample], str], hub_read: Any = None
) -> dict[str, Any]:
    """Return the JSON-ready identity of one family's data: scheme, family, where it came from, counts, fingerprint.

    For the hub, `hub_read` is (commit, layout read): "parquet" or "json" names how, not what (one fingerprint).
    """
    spec = hub_spec(source)
    if spec is not None:
        revision, layout = hub_read or (None, None)
        where = dict(kind="hub", location=spec[0], requested_revision=spec[1], revision=revision, layout=layout)
    elif source == "smoke":
        where = {"kind": "smoke", "location": "smoke"}
    else:
        where = {"kind": "local", "location": str(Path(source).expanduser().resolve())}
    aspects = family_counts(samples).get(family, {})
    counts = {"samples": len(samples), "aspects": aspects, "fingerprint": fingerprint(list(samples), image_sha256)}
    return {"scheme": SCHEME, "family": family, **where, **counts}


def config_identity(config: Any) -> dict[str, Any] | None:
    """Return the data identity a task's lmms-eval config recorded (None when absent), or ValueError when damaged."""
    metadata = config.get("metadata") if isinstance(config, dict) else None
    identity = metadata.get(CONFIG_KEY) if isinstance(metadata, dict) else None
    if identity is None:
        return None
    if not isinstance(identity, dict) or not isinstance(identity.get("fingerprint"), str):
        raise ValueError(f"configs metadata {CONFIG_KEY}: not a data identity (no fingerprint); damaged")
    return identity


def encode(identity: Mapping[str, Any]) -> str:
    """Return an identity as compact JSON text (a document column)."""
    return json.dumps(identity, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def decode(text: str) -> dict[str, Any]:
    """Return the identity held in a document column."""
    return jsonio.loads(text, source="identity column")


def published_match(
    identity: Mapping[str, Any], counts: Mapping[str, Mapping[str, int]], fingerprints: Mapping[str, str]
) -> str | None:
    """Return None when an identity is the published benchmark's family, else why not.

    The fingerprint decides once it is known for the family; until then the dataset card's per-aspect counts do.
    """
    family = identity.get("family")
    if family not in counts:
        return f"unknown family {family!r}"
    expected = fingerprints.get(family)
    if expected:
        return None if identity.get("fingerprint") == expected else "fingerprint differs from the published release"
    published = dict(counts[family])
    if identity.get("samples") != sum(published.values()):
        return f"{identity.get('samples')} samples where the dataset card has {sum(published.values())}"
    if dict(identity.get("aspects") or {}) != published:
        return "per-aspect counts differ from the dataset card"
    return None


def location_text(identity: Mapping[str, Any]) -> str:
    """Return a short readable source: 'hub Chime316/HVCU-Bench@<rev>' or the local path."""
    if identity.get("kind") == "hub":
        rev = identity.get("revision") or identity.get("requested_revision")
        return f"hub {identity.get('location')}" + (f"@{str(rev)[:12]}" if rev else "")
    return str(identity.get("location"))
