"""Read one family of HVCU-Bench from a Hugging Face Hub dataset repository, in a layout known for certain.

The repository holds the same data twice: the parquet config `benchmark` its card declares (README.md YAML
`configs:`, one split per family) and the authors' JSON files with their image folders (`<stem>.json`,
`Image/<stem>/<id>.<ext>`). Everything goes through huggingface_hub's public API and its own cache:

1. The requested revision (default `main`) is pinned to one commit once per process (`resolve_revision`, which
   records it in the cache and, offline, reads it back). Under data parallelism (`WORLD_SIZE` > 1 and an
   initialized `torch.distributed` group) rank 0 resolves it and the other ranks take its commit. The card and the
   commit's file listing come with `snapshot_download(revision=<commit>, allow_patterns=[card])`.
2. The parquet split is used only when every shard's footer (read remotely through `HfFileSystem`, or from the
   cache offline) holds the authors' record fields with usable types and image bytes in every row (its null
   counts); the card's `dataset_info` is not trusted, and a card that cannot be parsed declares no parquet config.
3. Otherwise the family's JSON file, then only the images its ids need, are fetched at that commit.
4. A repository with neither is one DataError naming repo, commit, why the parquet is not used and the files.

The layout read is said once per process, repo@commit and reason (a warning on the `hvcu_tasks` logger), and kept
with the commit for the data identity (`load_record`).
"""

from __future__ import annotations

import fnmatch
import glob
import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.core.names import IMAGE_EXTENSIONS
from hvcu_tasks.core.schema import DataError, Problem
from hvcu_tasks.data import jsonio

log = logging.getLogger("hvcu_tasks")

CARD_FILE, CONFIG, DATASET = "README.md", "benchmark", "dataset"
PARQUET, JSON = "parquet", "json"
"""The two layouts a family can be read from (the `layout` of the data identity)."""
LAYOUT_TEXT = {PARQUET: f"the parquet config {CONFIG!r}", JSON: "the authors' JSON + image folders"}
AUTHORS_COLUMNS = ("id", "qa_levels", "image")
"""The authors' record fields a parquet split must have as columns to be read as parquet."""
OFFLINE_FLAGS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
"""Environment variables that put `huggingface_hub` or `datasets` in offline mode (read the cache, no network)."""
OFFLINE_HINT = "set HVCU_BENCH_DATA=/path/to/a/local/copy (check it with `hvcu data validate PATH`)"
LISTED_FILES = 12
"""How many of a repository's top-level entries an error names before it says how many more there are."""


@dataclass(frozen=True)
class HubRevision:
    """One revision of a hub dataset repository pinned to a commit: its cache folder, files and card."""

    repo: str
    requested: str | None
    commit: str
    folder: Path
    files: tuple[str, ...]
    card: Mapping[str, Any]
    card_problem: str | None
    local: bool
    """Offline: only the Hugging Face cache is read."""

    @property
    def where(self) -> str:
        """Return 'repo@commit' for messages."""
        return f"{self.repo}@{self.commit}"


@dataclass(frozen=True)
class Layout:
    """The layout one family is read from, why, and (parquet) the split's files."""

    kind: str
    reason: str
    shards: tuple[str, ...] = ()


_RESOLVED: dict[tuple[str, str | None], HubRevision] = {}
"""(repo, requested revision) -> the commit this process pinned it to: one commit per process."""
_LAYOUTS: dict[tuple[str, str, str], Layout] = {}
"""(repo, commit, family) -> the layout decided (and said) once per process."""
_WARNED: set[str] = set()


def reset() -> None:
    """Forget what this process pinned, decided and said (a fresh process, for tests)."""
    for memory in (_RESOLVED, _LAYOUTS, _WARNED):
        memory.clear()


def offline() -> bool:
    """Whether Hugging Face offline mode is on (the hub client's setting, or the environment's at call time)."""
    from huggingface_hub import constants

    on = {"1", "TRUE", "YES", "ON"}
    return bool(constants.HF_HUB_OFFLINE) or any(os.environ.get(f, "").strip().upper() in on for f in OFFLINE_FLAGS)


def fail(source: str, field: str, message: str) -> DataError:
    """Return the one-line DataError of a hub load."""
    return DataError([Problem(source, "-", field, " ".join(message.split()))])


def cause_text(exc: BaseException) -> str:
    """Return 'Type: first line' of an exception and of the exceptions that caused it, on one line."""
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(parts) < 4:
        first = next((line.strip() for line in str(current).splitlines() if line.strip()), "")
        text = f"{type(current).__name__}: {first}".rstrip(": ")
        parts += [text] if text not in parts else []
        current = current.__cause__ or current.__context__
    return "; caused by ".join(parts)


def hub_problem(exc: BaseException, repo: str, requested: str | None = None, what: str = "") -> tuple[str, str]:
    """Return (field, message) saying what a hub client error means for the user, on one line."""
    from huggingface_hub import constants, errors

    status = getattr(getattr(exc, "response", None), "status_code", None)
    access = f"log in with `hf auth login` (or set HF_TOKEN) and accept the dataset's terms at {constants.ENDPOINT}"
    access += f"/datasets/{repo}"
    if isinstance(exc, errors.GatedRepoError):  # a subclass of RepositoryNotFoundError: first
        return "access", f"the dataset {repo!r} is gated and the hub refused access ({status} GatedRepo); {access}"
    if isinstance(exc, errors.RepositoryNotFoundError) and status in (401, 403):
        return "access", f"the hub refused access to {repo!r} ({status}): it does not exist, or it is private or " + (
            f"gated and no token with access was sent; {access}"
        )
    if isinstance(exc, errors.RepositoryNotFoundError):
        return "dataset", f"no dataset repository {repo!r} on the hub ({status} RepoNotFound)"
    if isinstance(exc, errors.RevisionNotFoundError):
        return "revision", f"the dataset {repo!r} has no revision {requested or 'main'!r}"
    if isinstance(exc, errors.HfHubHTTPError) and status in (401, 403):
        return "access", f"the hub refused access to {repo!r} ({status}); {access}"
    if offline():
        where = what or f"revision {requested or 'main'!r}"
        return "files" if what else "revision", (
            f"offline mode is on and {where} of {repo!r} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}); "
            f"run once online, or {OFFLINE_HINT}"
        )
    if isinstance(exc, (errors.RemoteEntryNotFoundError, errors.EntryNotFoundError)) and status == 404:
        return "files", f"not in the commit ({status} EntryNotFound)"
    if isinstance(exc, (errors.LocalEntryNotFoundError, errors.RevisionResolutionError)) and exc.__cause__:
        exc = exc.__cause__  # online: the client could not ask the hub
    if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in ("httpx", "httpcore"):
        return "dataset", f"cannot reach the dataset: {cause_text(exc)}; {OFFLINE_HINT}"
    return "dataset", cause_text(exc)


# ------------------------------------------------------------------------------------------ the revision


def resolve(repo: str, requested: str | None) -> HubRevision:
    """Return the commit, files and card a revision of a hub dataset names, pinned once per process."""
    if (repo, requested) not in _RESOLVED:
        dist = _distributed()
        _RESOLVED[(repo, requested)] = _pin(repo, requested) if dist is None else _agree(dist, repo, requested)
    return _RESOLVED[(repo, requested)]


def _distributed() -> Any | None:
    """Return `torch.distributed` when this process is one rank of an initialized group of several, else None."""
    world = os.environ.get("WORLD_SIZE", "1").strip()
    if not world.isdigit() or int(world) <= 1:
        return None
    dist = sys.modules.get("torch.distributed")  # no group can exist where torch was never imported
    if dist is not None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist
    if "no-group" not in _WARNED:
        _WARNED.add("no-group")
        log.warning(
            "HVCU-Bench: WORLD_SIZE=%s but no torch.distributed process group is initialized, so this rank (RANK=%s) "
            "resolves the hub revision itself; a push during start-up can give ranks different commits: pin "
            "HVCU_BENCH_REVISION=<commit> for such runs",
            world,
            os.environ.get("RANK", "?"),
        )
    return None


def _agree(dist: Any, repo: str, requested: str | None) -> HubRevision:
    """Pin a revision on rank 0 and give its commit (or its error) to every rank of the group."""
    mine, payload = None, [(None, None)]
    if dist.get_rank() == 0:
        try:
            mine = _pin(repo, requested)
            payload = [(mine.commit, None)]
        except DataError as exc:
            payload = [(None, list(exc.problems))]
    dist.broadcast_object_list(payload, src=0)
    commit, problems = payload[0]
    if problems:
        raise DataError(problems)
    return mine or _pin(repo, requested, commit)


def _pin(repo: str, requested: str | None, commit: str | None = None) -> HubRevision:
    """Resolve a revision to its commit (online: ask the hub; offline: the cache), with its files and card."""
    from huggingface_hub import HfApi, get_cached_repo_tree, metadata_load, snapshot_download

    local = offline()
    try:
        if commit is None:
            commit = HfApi().resolve_revision(repo, repo_type=DATASET, revision=requested, local_files_only=local)
            commit = commit.resolved
        cached = snapshot_download(
            repo, repo_type=DATASET, revision=commit, allow_patterns=[CARD_FILE], local_files_only=local
        )
        files = tuple(sorted(f.path for f in get_cached_repo_tree(repo, repo_type=DATASET, revision=commit)))
    except Exception as exc:  # network, access, a missing repo or revision, a cold cache: each said in one line
        raise fail(f"{repo}@{requested or 'main'}", *hub_problem(exc, repo, requested)) from exc
    folder, card, problem = Path(cached), {}, None
    if (folder / CARD_FILE).is_file():
        try:
            card = metadata_load(folder / CARD_FILE) or {}
        except Exception as exc:  # YAML, encoding: the card counts as one declaring no parquet config
            problem = f"the dataset card {CARD_FILE} cannot be parsed ({cause_text(exc)})"
    return HubRevision(repo, requested, commit, folder, files, card, problem, local)


def fetch(rev: HubRevision, paths: Sequence[str]) -> list[Path]:
    """Return files of the commit from the Hugging Face cache, downloading only these first (online)."""
    from huggingface_hub import snapshot_download, try_to_load_from_cache

    patterns = [glob.escape(p) for p in paths]
    try:
        if paths:
            snapshot_download(
                rev.repo, repo_type=DATASET, revision=rev.commit, allow_patterns=patterns, local_files_only=rev.local
            )
    except Exception as exc:  # the other files were fetched: the first one not in the cache is named
        have = [try_to_load_from_cache(rev.repo, p, revision=rev.commit, repo_type=DATASET) for p in paths]
        path = next((p for p, got in zip(paths, have, strict=True) if not isinstance(got, str)), paths[0])
        field, why = hub_problem(exc, rev.repo, what=path)
        raise fail(f"{rev.where}/{path}", field, why if rev.local else f"cannot download {path}: {why}") from exc
    return [rev.folder / p for p in paths]


# ------------------------------------------------------------------------------------------ the layout


def split_patterns(card: Mapping[str, Any], split: str) -> tuple[str, ...]:
    """Return the path patterns the card declares for one split of the benchmark config (none: no such split)."""
    config = next(
        (c for c in card.get("configs") or [] if isinstance(c, Mapping) and c.get("config_name") == CONFIG), {}
    )
    files = config.get("data_files") or []
    entries = [{"split": k, "path": v} for k, v in files.items()] if isinstance(files, Mapping) else files
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("split") == split:
            paths = entry.get("path")
            return tuple(str(p) for p in ([paths] if isinstance(paths, str) else list(paths or [])))
    return ()


def layout(rev: HubRevision, family: str) -> Layout:
    """Return the layout one family is read from (decided and said once per commit), reading only footers."""
    key = (rev.repo, rev.commit, family)
    if key not in _LAYOUTS:
        _LAYOUTS[key] = chosen = _decide(rev, FAMILIES[family][0])
        said = f"HVCU-Bench: reading {rev.where} (revision {rev.requested or 'main'}) from "
        said += f"{LAYOUT_TEXT[chosen.kind]}: {chosen.reason}"
        if said not in _WARNED:  # the same reason for several families: said once
            _WARNED.add(said)
            log.warning("%s", said)
    return _LAYOUTS[key]


def _decide(rev: HubRevision, split: str) -> Layout:
    """Decide the layout of one split: parquet only when every shard's footer is the authors' records."""
    from huggingface_hub import HfFileSystem

    if rev.card_problem:
        return Layout(JSON, f"{rev.card_problem}, so it declares no parquet config")
    patterns = split_patterns(rev.card, split)
    if not patterns:
        return Layout(JSON, f"the card declares no parquet split {split!r} in config {CONFIG!r}")
    shards = tuple(p for p in rev.files if any(fnmatch.fnmatchcase(p, pattern) for pattern in patterns))
    if not shards:
        return Layout(JSON, f"no file of the repository matches the card's {split} paths {list(patterns)}")
    for shard in shards:
        cached = rev.folder / shard
        if rev.local and not cached.is_file():
            return Layout(JSON, f"the {split} parquet file is not in the cache (offline)")
        try:
            metadata = _footer(cached if rev.local else HfFileSystem().open(f"datasets/{rev.where}/{shard}"))
        except Exception as exc:  # a footer that cannot be read: the JSON layout, saying why
            return Layout(JSON, f"the parquet footer of {shard} cannot be read ({cause_text(exc)})")
        why = footer_problem(metadata, shard)
        if why:
            return Layout(JSON, why)
    return Layout(PARQUET, f"its footer names the authors' fields {list(AUTHORS_COLUMNS)} with image bytes", shards)


def _footer(source: Any) -> Any:
    """Return the parquet FileMetaData of a local path or an open remote file (closing it)."""
    import pyarrow.parquet as pq

    if isinstance(source, Path):
        return pq.read_metadata(source)
    with source:
        return pq.read_metadata(source)


def _image_bytes(kind: Any) -> str | None:
    """Return the column path of an image column's bytes ('image' or 'image.bytes'), or None when it has none."""
    import pyarrow as pa

    def binary(t: Any) -> bool:
        return pa.types.is_binary(t) or pa.types.is_large_binary(t)

    if binary(kind):
        return "image"
    at = kind.get_field_index("bytes") if pa.types.is_struct(kind) else -1
    return "image.bytes" if at >= 0 and binary(kind.field(at).type) else None


def column_problem(columns: Mapping[str, Any]) -> str | None:
    """Return None when parquet columns (name -> arrow type) are the authors' record fields with usable types."""
    import pyarrow as pa

    missing = [c for c in AUTHORS_COLUMNS if c not in columns]
    if missing:
        return f"no column {', '.join(missing)}"
    ident, levels, image = (columns[c] for c in AUTHORS_COLUMNS)
    text = {c: " ".join(str(columns[c]).split()) for c in AUTHORS_COLUMNS}
    if not (pa.types.is_string(ident) or pa.types.is_large_string(ident) or pa.types.is_integer(ident)):
        return f"column id holds {text['id']}, not text or an integer"
    if not (pa.types.is_string(levels) or pa.types.is_large_string(levels) or pa.types.is_list(levels)):
        if not pa.types.is_large_list(levels):
            return f"column qa_levels holds {text['qa_levels']}, not a list or its JSON text"
    if _image_bytes(image) is None:
        return f"column image holds {text['image']}, not encoded image bytes (binary or a struct with binary bytes)"
    return None


def footer_problem(metadata: Any, shard: str) -> str | None:
    """Return None when a parquet footer describes the authors' records with image bytes in every row, else why."""
    schema = metadata.schema.to_arrow_schema()
    why = column_problem({name: schema.field(name).type for name in schema.names})
    if why:
        return f"the parquet columns {sorted(schema.names)} are not the authors' fields ({why})"
    path, nulls = _image_bytes(schema.field("image").type), 0
    for group in (metadata.row_group(g) for g in range(metadata.num_row_groups)):
        for stats in (
            group.column(i).statistics for i in range(group.num_columns) if group.column(i).path_in_schema == path
        ):
            nulls += stats.null_count if stats is not None and stats.has_null_count else 0
    return (
        f"{nulls} of {metadata.num_rows} rows of {shard} have no image bytes (the footer's null counts)"
        if nulls
        else None
    )


# ------------------------------------------------------------------------------------------ the files


def json_files(rev: HubRevision, family: str, chosen: Layout) -> tuple[Path, Path]:
    """Return one family's JSON file and image folder of the commit, fetching the JSON and its images only."""
    stem = FAMILIES[family][1]
    name = f"{stem}.json"
    if name not in rev.files:
        top = sorted({p.split("/")[0] + ("/" if "/" in p else "") for p in rev.files})
        more = f" and {len(top) - LISTED_FILES} more" if len(top) > LISTED_FILES else ""
        raise fail(
            f"{rev.where}/{name}",
            "files",
            f"no usable layout: the parquet split is not usable ({chosen.reason}) and there is no {name}; "
            f"files present: {top[:LISTED_FILES]}{more}",
        )
    (json_file,) = fetch(rev, [name])
    fetch(rev, image_paths(json_file, stem, rev.files))
    return json_file, rev.folder / "Image" / stem


def image_paths(json_file: Path, stem: str, files: Iterable[str]) -> list[str]:
    """Return the repository paths of the images a family's JSON names: per id the first extension the commit has."""
    try:
        records = jsonio.read_json(json_file)
    except (OSError, ValueError):
        return []  # the JSON reader reports the broken file itself
    present, wanted = set(files), set()
    for record in records if isinstance(records, list) else []:
        ident = record.get("id") if isinstance(record, dict) else None
        if ident is not None and not isinstance(ident, (dict, list)):
            found = (f"Image/{stem}/{ident}{ext}" for ext in IMAGE_EXTENSIONS)  # the authors' order
            wanted.update(p for p in [next((p for p in found if p in present), None)] if p)
    return sorted(wanted)


def load_record(repo: str, requested: str | None, family: str) -> tuple[str, str] | None:
    """Return (commit, layout) of this process's hub load of one family at a requested revision, if any."""
    rev = _RESOLVED.get((repo, requested))
    chosen = _LAYOUTS.get((repo, rev.commit, family)) if rev else None
    return (rev.commit, chosen.kind) if rev and chosen else None
