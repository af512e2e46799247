"""Whether a hub parquet split holds the authors' records, judged from its files' footers (never from the card).

A split is "known for certain" only when every shard's footer says so: columns `id` (text or integer),
`qa_levels` (text or a list) and `image` (binary, or a struct with a binary `bytes` field), and, where the footer
keeps null-count statistics, no row without image bytes. The card's `dataset_info` features are not used: they
can differ from the files (and `datasets` would then fail with a CastError).

A remote footer is read with two small HTTP range requests per shard (the last 64 KiB, then more only when the
footer is larger), retried on 429/5xx and network errors (`huggingface_hub`'s `http_backoff`), each with the
client's download timeout (`HF_HUB_DOWNLOAD_TIMEOUT`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import Any

CONFIG = "benchmark"
AUTHORS_COLUMNS = ("id", "qa_levels", "image")
"""The authors' record fields a parquet split must have as columns to be read as parquet."""
FOOTER_PROBE = 64 * 1024
"""Bytes read from the end of a parquet file to find its footer (more only when the footer is larger)."""
FOOTER_RETRIES = 5
"""Retries of one footer request on 429/5xx or a network error (`http_backoff`)."""
FOOTER_WAIT = 1.0
"""Seconds before the first retry of a footer request (doubling, at most 8)."""


def _config(card: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Return the card's `configs:` entry of the benchmark config, if any."""
    for entry in card.get("configs") or []:
        if isinstance(entry, Mapping) and entry.get("config_name") == CONFIG:
            return entry
    return None


def split_patterns(card: Mapping[str, Any], split: str) -> tuple[str, ...]:
    """Return the path patterns the card declares for one split of the benchmark config (none: no such split)."""
    config = _config(card)
    data_files = config.get("data_files") if config else None
    if isinstance(data_files, Mapping):
        data_files = [{"split": k, "path": v} for k, v in data_files.items()]
    for entry in data_files or []:
        if isinstance(entry, Mapping) and entry.get("split") == split:
            paths = entry.get("path")
            return tuple(str(p) for p in ([paths] if isinstance(paths, str) else list(paths or [])))
    return ()


def matches(path: str, patterns: Iterable[str]) -> bool:
    """Whether a repository path matches one of the card's data_files patterns."""
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)


def _type_text(kind: Any) -> str:
    """Return an arrow type as short text for messages."""
    return str(kind).replace("\n", " ")


def _is_bytes(kind: Any) -> bool:
    """Whether an arrow type holds raw bytes."""
    import pyarrow as pa

    return pa.types.is_binary(kind) or pa.types.is_large_binary(kind)


def _image_bytes_path(kind: Any) -> str | None:
    """Return the parquet column path of the image bytes ('image' or 'image.bytes'), or None when there are none."""
    import pyarrow as pa

    if _is_bytes(kind):
        return "image"
    if pa.types.is_struct(kind):
        names = [kind.field(i).name for i in range(kind.num_fields)]
        if "bytes" in names and _is_bytes(kind.field("bytes").type):
            return "image.bytes"
    return None


def column_problem(schema: Any) -> str | None:
    """Return None when an arrow schema's columns are the authors' record fields with usable types, else why not."""
    import pyarrow as pa

    columns = {name: schema.field(name).type for name in schema.names}
    missing = [c for c in AUTHORS_COLUMNS if c not in columns]
    if missing:
        return f"no column {', '.join(missing)}"
    ident, levels, image = columns["id"], columns["qa_levels"], columns["image"]
    if not (pa.types.is_string(ident) or pa.types.is_large_string(ident) or pa.types.is_integer(ident)):
        return f"column id holds {_type_text(ident)}, not text or an integer"
    text = pa.types.is_string(levels) or pa.types.is_large_string(levels)
    if not (text or pa.types.is_list(levels) or pa.types.is_large_list(levels)):
        return f"column qa_levels holds {_type_text(levels)}, not a list or its JSON text"
    if _image_bytes_path(image) is None:
        return f"column image holds {_type_text(image)}, not encoded image bytes (binary or a struct with binary bytes)"
    return None


def null_image_rows(metadata: Any) -> int:
    """Return how many rows the footer's statistics say have no image bytes (0 when it keeps no statistics)."""
    schema = metadata.schema.to_arrow_schema()
    path = _image_bytes_path(schema.field("image").type)
    nulls = 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for index in range(row_group.num_columns):
            column = row_group.column(index)
            stats = column.statistics
            if column.path_in_schema == path and stats is not None and stats.has_null_count:
                nulls += stats.null_count
    return nulls


def footer_problem(metadata: Any, shard: str) -> str | None:
    """Return None when a parquet footer describes the authors' records with image bytes in every row, else why not."""
    schema = metadata.schema.to_arrow_schema()
    why = column_problem(schema)
    if why is not None:
        return f"the parquet columns {sorted(schema.names)} are not the authors' fields ({why})"
    nulls = null_image_rows(metadata)
    if nulls:
        return f"{nulls} of {metadata.num_rows} rows of {shard} have no image bytes (the footer's null counts)"
    return None


def parse_footer(tail: bytes, shard: str) -> Any:
    """Return the parquet FileMetaData held in a file's last bytes (at least footer + 8)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    size = footer_size(tail, shard)
    return pq.ParquetFile(pa.BufferReader(b"PAR1" + tail[-size:])).metadata


def footer_size(tail: bytes, shard: str) -> int:
    """Return how many bytes from the end hold a parquet file's footer (footer + length + magic)."""
    if len(tail) < 12 or tail[-4:] != b"PAR1":
        raise ValueError(f"{shard} is not a parquet file ({len(tail)} bytes at its end, no PAR1 magic)")
    return int.from_bytes(tail[-8:-4], "little") + 8


def remote_footer(url: str, shard: str) -> Any:
    """Return the FileMetaData of a remote parquet file, reading only its end (range requests with retries)."""
    from huggingface_hub import constants
    from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, http_backoff

    def tail(size: int) -> bytes:
        response = http_backoff(
            "GET",
            url,
            headers={**build_hf_headers(), "Range": f"bytes=-{size}"},
            timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT,
            max_retries=FOOTER_RETRIES,
            base_wait_time=FOOTER_WAIT,
        )
        hf_raise_for_status(response)
        return response.content[-size:]  # a server that ignores Range sends the whole file

    data = tail(FOOTER_PROBE)
    need = footer_size(data, shard)
    if need > len(data):
        data = tail(need)
    return parse_footer(data, shard)
