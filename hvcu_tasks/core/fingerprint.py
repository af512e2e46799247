"""The data fingerprint: one content hash per family, the same on every machine and for every layout.

The fingerprint (scheme `hvcu-data/1`) is the SHA-256 of a canonical serialisation of the normalised
samples of one family, so it is the same on every machine and for every layout of one release (hub
parquet, a local parquet copy, the authors' JSON + image folders):

- samples sorted by id (code-point order); one line per sample, lines joined by "\\n";
- each line is compact JSON (`separators=(",", ":")`, `ensure_ascii=False`, UTF-8) of
  `[id, [[level, question, [[key, text], ...], gold_key], ...], image_sha256_hex]`, levels by number,
  options in their given order, keys as the loader normalises them (stripped, upper-case), texts as read;
- the image enters by the SHA-256 of its encoded bytes as stored (the file, or the parquet cell's bytes),
  never its path or decoded pixels. The aspect is left out (a column on the hub, the id prefix locally):
  it is recorded beside, as counts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable

from hvcu_tasks.core.schema import Sample

SCHEME = "hvcu-data/1"


def sample_line(sample: Sample, image_sha256: str) -> str:
    """Return the canonical one-line serialisation of one sample (see the module docstring)."""
    levels = [
        [lv.level, lv.question, [[k, t] for k, t in lv.options], lv.answer]
        for lv in sorted(sample.levels, key=lambda lv: lv.level)
    ]
    return json.dumps([sample.id, levels, image_sha256], ensure_ascii=False, separators=(",", ":"))


def fingerprint(samples: Iterable[Sample], image_sha256: Callable[[Sample], str]) -> str:
    """Return 'sha256:<hex>' over the canonical lines of the samples, in id order."""
    lines = [line for _id, line in sorted((s.id, sample_line(s, image_sha256(s))) for s in samples)]
    return "sha256:" + hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
