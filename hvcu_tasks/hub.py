"""Read one family of HVCU-Bench from a Hugging Face Hub dataset repository, in a layout known for certain.

The repository holds two layouts of the same data: the parquet config `benchmark` declared in the card
(README.md YAML `configs:`, one split per family) and the authors' JSON files with their image folders
(`<stem>.json`, `Image/<stem>/<id>.<ext>`), the layout the authors' evaluator reads. Nothing is guessed:

1. The requested revision (branch, tag or commit; default `main`) is resolved to one commit by downloading the
   card (README.md) at that revision; every later download names that commit, so card, parquet, JSON and images
   come from one revision. With `HF_HUB_OFFLINE=1` the commit is read from the Hugging Face cache (its
   `refs/<revision>`), with no request at all.
2. The parquet split is used only when its columns are the authors' own record fields: `id`, `qa_levels` and an
   `image` holding the encoded image (a `datasets.Image` feature, a {bytes, path} struct, or binary). The columns
   are read without downloading the data: from the card's `dataset_info` features when it declares them, else
   from the parquet file's footer (two small range requests; offline: the cached file's footer).
3. Otherwise the family's JSON file and image folder of the same commit are downloaded with `huggingface_hub`
   (only that family's files, kept in its cache and not downloaded again) and read exactly as a local copy is.
4. A repository with neither is one DataError naming repo, commit, the parquet columns found and the files
   present.

The layout used is said once per process and repo@commit (a warning on the `hvcu_tasks` logger) and kept, with
the commit, for the data identity (`load_record`).
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvcu_tasks.families import FAMILIES
from hvcu_tasks.schema import DataError, Problem

log = logging.getLogger("hvcu_tasks")

CONFIG = "benchmark"
CARD_FILE = "README.md"
AUTHORS_COLUMNS = ("id", "qa_levels", "image")
"""The authors' record fields a parquet split must have as columns to be read as parquet."""
PARQUET, JSON = "parquet", "json"
"""The two layouts a family can be read from (the `layout` of the data identity)."""
LAYOUT_TEXT = {PARQUET: f"the parquet config {CONFIG!r}", JSON: "the authors' JSON + image folders"}
OFFLINE_HINT = "set HVCU_BENCH_DATA=/path/to/a/local/copy (check it with `hvcu data validate PATH`)"
FOOTER_PROBE = 64 * 1024
"""Bytes read from the end of a parquet file to find its footer (more only when the footer is larger)."""
COMMIT = re.compile(r"[0-9a-f]{40}")
LISTED_FILES = 12
"""How many of a repository's files an error names before it says how many more there are."""


@dataclass(frozen=True)
class HubRevision:
    """One revision of a hub dataset repository, resolved: its commit, card and (online) its files."""

    repo: str
    requested: str | None
    commit: str
    card: Mapping[str, Any]
    files: tuple[str, ...] | None
    """Every file of the commit; None offline (the listing needs the hub)."""

    @property
    def where(self) -> str:
        """Return 'repo@commit' for messages."""
        return f"{self.repo}@{self.commit}"


@dataclass(frozen=True)
class Layout:
    """The layout one family is read from, and why."""

    kind: str
    reason: str
    parquet_files: tuple[str, ...] = ()


_LOADS: dict[tuple[str, str | None, str], tuple[str, str]] = {}
"""(repo, requested revision, family) -> (commit, layout) of every hub load of this process."""
_ANNOUNCED: set[tuple[str, str, str]] = set()
"""(repo, commit, layout) already said in this process."""


def offline() -> bool:
    """Whether Hugging Face offline mode is on (the hub client's setting, or the environment's at call time)."""
    from huggingface_hub import constants

    flags = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
    return bool(constants.HF_HUB_OFFLINE) or any(
        os.environ.get(flag, "").strip().upper() in {"1", "TRUE", "YES", "ON"} for flag in flags
    )


def _fail(source: str, field: str, message: str) -> DataError:
    """Return the one-line DataError of a hub load."""
    return DataError([Problem(source, "-", field, message)])


def _card_yaml(path: Path) -> dict[str, Any]:
    """Return the YAML front matter of a dataset card file ({} when it has none)."""
    import yaml

    text = path.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return {}
    head = text[3:].split("\n---", 1)[0]
    data = yaml.safe_load(head)
    return data if isinstance(data, dict) else {}


def _hub_errors() -> tuple[type[BaseException], ...]:
    """Return huggingface_hub's (repo missing, revision missing, entry missing, cache miss) error types."""
    from huggingface_hub.errors import (
        LocalEntryNotFoundError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    return RepositoryNotFoundError, RevisionNotFoundError, RemoteEntryNotFoundError, LocalEntryNotFoundError


def resolve(repo: str, requested: str | None) -> HubRevision:
    """Resolve a revision of a hub dataset to its commit, card and file list (offline: from the cache)."""
    from huggingface_hub import HfApi, hf_hub_download

    missing_repo, missing_revision, missing_entry, not_cached = _hub_errors()
    source = f"{repo}@{requested or 'main'}"
    is_offline = offline()
    card: dict[str, Any] = {}
    try:
        try:
            readme = Path(
                hf_hub_download(repo, CARD_FILE, repo_type="dataset", revision=requested, local_files_only=is_offline)
            )
            commit = readme.parent.name
            card = _card_yaml(readme)
        except missing_entry:  # no card: the revision still resolves
            commit = HfApi().dataset_info(repo, revision=requested).sha or ""
        files = None if is_offline else tuple(HfApi().list_repo_files(repo, repo_type="dataset", revision=commit))
    except missing_repo as exc:
        raise _fail(source, "dataset", f"no dataset repository {repo!r} on the hub ({_first_line(exc)})") from exc
    except missing_revision as exc:
        raise _fail(source, "revision", f"the dataset {repo!r} has no revision {requested!r}") from exc
    except not_cached as exc:
        if not is_offline:  # the client found neither the hub nor a cached copy: say why it could not ask
            raise _unreachable(source, exc.__cause__ or exc) from exc
        raise _fail(
            source,
            "revision",
            f"offline mode is on and revision {requested or 'main'!r} of {repo!r} is not in the Hugging Face "
            f"cache ({_cache_dir()}); run once online, or {OFFLINE_HINT}",
        ) from exc
    except Exception as exc:  # network, auth, a broken card: all end here
        raise _unreachable(source, exc) from exc
    if not COMMIT.fullmatch(commit):
        raise _fail(source, "revision", f"the hub gave no commit for revision {requested or 'main'!r} ({commit!r})")
    return HubRevision(repo, requested, commit, card, files)


def _unreachable(source: str, exc: BaseException) -> DataError:
    """Return the DataError of a hub that could not be asked (network, auth), with the local-copy hint."""
    return _fail(
        source, "dataset", f"cannot reach the dataset: {type(exc).__name__}: {_first_line(exc)}; {OFFLINE_HINT}"
    )


def _first_line(exc: BaseException) -> str:
    """Return the first non-empty line of an exception's message."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


def _cache_dir() -> str:
    """Return the Hugging Face hub cache folder in use."""
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


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
            return tuple([paths] if isinstance(paths, str) else list(paths or []))
    return ()


def card_features(card: Mapping[str, Any]) -> Any | None:
    """Return the `datasets.Features` the card's `dataset_info` declares for the benchmark config, if any."""
    import datasets

    infos = card.get("dataset_info")
    for info in infos if isinstance(infos, list) else [infos] if isinstance(infos, Mapping) else []:
        if isinstance(info, Mapping) and info.get("config_name", "default") == CONFIG and info.get("features"):
            try:
                return datasets.Features._from_yaml_list(info["features"])
            except Exception:  # a card we cannot read: decide from the parquet footer instead
                return None
    return None


def _image_type_ok(kind: Any) -> bool:
    """Whether an `image` column's type holds encoded image bytes (an Image feature, {bytes, path} or binary)."""
    import datasets
    import pyarrow as pa

    if isinstance(kind, datasets.Image):
        return True
    if isinstance(kind, datasets.Value):
        return kind.dtype in ("binary", "large_binary")
    if isinstance(kind, Mapping):
        return "bytes" in kind and _image_type_ok(kind["bytes"])
    if isinstance(kind, pa.DataType):
        if pa.types.is_struct(kind):
            names = [kind.field(i).name for i in range(kind.num_fields)]
            return "bytes" in names and _image_type_ok(kind.field("bytes").type)
        return pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
    return False


def certain(columns: Mapping[str, Any]) -> str | None:
    """Return None when columns (name -> type) are the authors' record fields, else what is missing or wrong."""
    missing = [c for c in AUTHORS_COLUMNS if c not in columns]
    if missing:
        return f"no column {', '.join(missing)}"
    if not _image_type_ok(columns["image"]):
        return f"column image holds {columns['image']}, not encoded image bytes"
    return None


def _footer_schema(data: bytes) -> Any:
    """Return the arrow schema of a parquet file from its last bytes (at least footer + 8)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pq.read_schema(pa.BufferReader(b"PAR1" + data))


def _footer_bytes(tail: bytes, where: str) -> int:
    """Return how many bytes from the end hold a parquet file's footer (footer + length + magic)."""
    if len(tail) < 8 or tail[-4:] != b"PAR1":
        raise ValueError(f"{where} is not a parquet file (no PAR1 at its end)")
    return int.from_bytes(tail[-8:-4], "little") + 8


def remote_schema(rev: HubRevision, path: str) -> Any:
    """Return the arrow schema of a parquet file of the commit, reading only its footer (HTTP range requests)."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    url = hf_hub_url(rev.repo, path, repo_type="dataset", revision=rev.commit)

    def tail(size: int) -> bytes:
        response = get_session().get(url, headers={**build_hf_headers(), "Range": f"bytes=-{size}"})
        hf_raise_for_status(response)
        return response.content

    data = tail(FOOTER_PROBE)
    need = _footer_bytes(data, path)
    if need > len(data):
        data = tail(need)
    return _footer_schema(data[-need:])


def cached_file(rev: HubRevision, path: str) -> Path | None:
    """Return a file of the commit from the Hugging Face cache, or None when it is not there (no request)."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(rev.repo, path, revision=rev.commit, repo_type="dataset")
    return Path(found) if isinstance(found, str) else None


def _cached_parquet(rev: HubRevision, patterns: Iterable[str]) -> list[Path]:
    """Return the cached parquet files of the commit that match the split's patterns."""
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    snapshot = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=rev.repo, repo_type="dataset")
    snapshot = snapshot / "snapshots" / rev.commit
    found = [p for p in snapshot.rglob("*.parquet") if _matches(p.relative_to(snapshot).as_posix(), patterns)]
    return sorted(found)


def _matches(path: str, patterns: Iterable[str]) -> bool:
    """Whether a repository path matches one of the card's data_files patterns."""
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)


def _columns(schema: Any) -> dict[str, Any]:
    """Return name -> type of an arrow schema."""
    return {name: schema.field(name).type for name in schema.names}


def layout(rev: HubRevision, family: str) -> Layout:
    """Decide which layout one family is read from (see the module docstring), without downloading data."""
    split = FAMILIES[family][0]
    patterns = split_patterns(rev.card, split)
    if not patterns:
        return Layout(JSON, f"the card declares no parquet split {split!r} in config {CONFIG!r}")
    features = card_features(rev.card)
    if features is not None:
        why = certain(dict(features))
        if why is None:
            return Layout(PARQUET, f"the card's features are the authors' fields {list(AUTHORS_COLUMNS)}", patterns)
        return Layout(JSON, f"the card's features {sorted(features)} are not the authors' fields ({why})")
    if rev.files is not None:
        shards = sorted(p for p in rev.files if _matches(p, patterns))
        if not shards:
            return Layout(JSON, f"no file of the repository matches the card's {split} paths {list(patterns)}")
        try:
            schema = remote_schema(rev, shards[0])
        except Exception as exc:  # a footer that cannot be read: that is said, not guessed around
            raise _fail(
                f"{rev.where}/{shards[0]}", "columns", f"cannot read the parquet footer: {type(exc).__name__}: {exc}"
            ) from exc
    else:
        local = _cached_parquet(rev, patterns)
        if not local:
            return Layout(JSON, f"the {split} parquet file is not in the cache (offline)")
        import pyarrow.parquet as pq

        schema = pq.read_schema(local[0])
    columns = _columns(schema)
    why = certain(columns)
    if why is None:
        return Layout(PARQUET, f"its columns are the authors' fields {list(AUTHORS_COLUMNS)}", patterns)
    return Layout(JSON, f"the parquet columns {sorted(columns)} are not the authors' fields ({why})")


def announce(rev: HubRevision, family: str, chosen: Layout) -> None:
    """Say once per process and repo@commit which layout is read, and record it for the data identity."""
    _LOADS[(rev.repo, rev.requested, family)] = (rev.commit, chosen.kind)
    key = (rev.repo, rev.commit, chosen.kind)
    if key in _ANNOUNCED:
        return
    _ANNOUNCED.add(key)
    log.warning(
        "HVCU-Bench: reading %s (revision %s) from %s: %s",
        rev.where,
        rev.requested or "main",
        LAYOUT_TEXT[chosen.kind],
        chosen.reason,
    )


def load_record(repo: str, requested: str | None, family: str) -> tuple[str, str] | None:
    """Return (commit, layout) of this process's last hub load of one family at a requested revision, if any."""
    return _LOADS.get((repo, requested, family))


def _listing(files: Iterable[str]) -> str:
    """Return a short list of a repository's files for an error message (top-level entries, folders once)."""
    top = sorted({p.split("/")[0] + ("/" if "/" in p else "") for p in files})
    more = f" and {len(top) - LISTED_FILES} more" if len(top) > LISTED_FILES else ""
    return f"{top[:LISTED_FILES]}{more}"


def json_files(rev: HubRevision, family: str, chosen: Layout) -> tuple[Path, Path]:
    """Download (or find in the cache) one family's JSON file and image folder of the commit; return both paths."""
    from huggingface_hub import snapshot_download

    stem = FAMILIES[family][1]
    json_path = f"{stem}.json"
    source = f"{rev.where}/{json_path}"
    if rev.files is not None and json_path not in rev.files:
        raise _fail(
            source,
            "files",
            f"no usable layout: the parquet split is not usable ({chosen.reason}) and there is no {json_path}; "
            f"files present: {_listing(rev.files)}",
        )
    try:
        folder = Path(
            snapshot_download(
                rev.repo,
                repo_type="dataset",
                revision=rev.commit,
                allow_patterns=[json_path, f"Image/{stem}/*"],
                local_files_only=rev.files is None,
            )
        )
    except Exception as exc:  # network, a cache miss offline
        raise _fail(
            source, "download", f"cannot download {json_path}: {type(exc).__name__}: {_first_line(exc)}; {OFFLINE_HINT}"
        ) from exc
    if not (folder / json_path).is_file():
        raise _fail(
            source,
            "files",
            f"offline mode is on and {json_path} of {rev.where} is not in the Hugging Face cache ({_cache_dir()}) "
            f"({chosen.reason}); run once online, or {OFFLINE_HINT}",
        )
    return folder / json_path, folder / "Image" / stem
