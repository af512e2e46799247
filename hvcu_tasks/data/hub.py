"""Read one family of HVCU-Bench from a Hugging Face Hub dataset repository, in a layout known for certain.

The repository holds two layouts of the same data: the parquet config `benchmark` declared in the card
(README.md YAML `configs:`, one split per family) and the authors' JSON files with their image folders
(`<stem>.json`, `Image/<stem>/<id>.<ext>`), the layout the authors' evaluator reads. Nothing is guessed:

1. The requested revision (branch, tag or commit; default `main`) is resolved to one commit once per process
   (by downloading the card at that revision; a repository without a card: its dataset info), and every family
   and every later download of the process names that commit. Under data parallelism (`WORLD_SIZE` > 1 with an
   initialized `torch.distributed` group) rank 0 resolves it and the other ranks take its commit. With
   `HF_HUB_OFFLINE=1` the commit is read from the Hugging Face cache (its `refs/<revision>`), no request at all.
2. The parquet split is used only when its files' footers say it holds the authors' own record fields with usable
   types (`hub_parquet`); the card's `dataset_info` is not trusted. A card that cannot be parsed counts as one
   declaring no parquet config.
3. Otherwise the family's JSON file of the same commit is downloaded, then only the images its ids need
   (`hub_files`), and read exactly as a local copy is.
4. A repository with neither is one DataError naming repo, commit, why the parquet is not used and the files.

The layout used is said once per process, repo@commit and reason (a warning on the `hvcu_tasks` logger) and kept,
with the commit, for the data identity (`load_record`).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.core.schema import DataError, Problem
from hvcu_tasks.data.hub_parquet import AUTHORS_COLUMNS, CONFIG, footer_problem, matches, remote_footer, split_patterns

log = logging.getLogger("hvcu_tasks")

CARD_FILE = "README.md"
PARQUET, JSON = "parquet", "json"
"""The two layouts a family can be read from (the `layout` of the data identity)."""
LAYOUT_TEXT = {PARQUET: f"the parquet config {CONFIG!r}", JSON: "the authors' JSON + image folders"}
OFFLINE_HINT = "set HVCU_BENCH_DATA=/path/to/a/local/copy (check it with `hvcu data validate PATH`)"
COMMIT = re.compile(r"[0-9a-f]{40}")
NETWORK_MODULES = ("httpx", "httpcore", "requests", "urllib3")
"""Where the HTTP errors of the hub client come from (httpx for huggingface_hub 1.x, requests before)."""
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
    card_problem: str | None = None
    """Why the card could not be parsed, if it could not."""

    @property
    def where(self) -> str:
        """Return 'repo@commit' for messages."""
        return f"{self.repo}@{self.commit}"


@dataclass(frozen=True)
class Layout:
    """The layout one family is read from, why, and (parquet) the split's files in the repository."""

    kind: str
    reason: str
    shards: tuple[str, ...] = ()


_RESOLVED: dict[tuple[str, str | None], HubRevision] = {}
"""(repo, requested revision) -> the revision this process resolved it to, once."""
_LAYOUTS: dict[tuple[str, str, str], Layout] = {}
"""(repo, commit, family) -> the layout decided, once per process."""
_LOADS: dict[tuple[str, str | None, str], tuple[str, str]] = {}
"""(repo, requested revision, family) -> (commit, layout) of every hub load of this process."""
_ANNOUNCED: set[tuple[str, str, str, str]] = set()
"""(repo, commit, layout, reason) already said in this process."""
_WARNED: set[str] = set()
"""Process-wide warnings already given."""


def reset() -> None:
    """Forget what this process resolved, decided, loaded and said (a fresh process, for tests)."""
    for memory in (_RESOLVED, _LAYOUTS, _LOADS, _ANNOUNCED, _WARNED):
        memory.clear()


def offline() -> bool:
    """Whether Hugging Face offline mode is on (the hub client's setting, or the environment's at call time)."""
    from huggingface_hub import constants

    flags = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
    return bool(constants.HF_HUB_OFFLINE) or any(
        os.environ.get(flag, "").strip().upper() in {"1", "TRUE", "YES", "ON"} for flag in flags
    )


def fail(source: str, field: str, message: str) -> DataError:
    """Return the one-line DataError of a hub load."""
    return DataError([Problem(source, "-", field, " ".join(message.split()))])


def first_line(exc: BaseException) -> str:
    """Return the first non-empty line of an exception's message."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


def cause_text(exc: BaseException) -> str:
    """Return 'Type: first line' of an exception and of the exceptions that caused it, on one line."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(parts) < 4:
        seen.add(id(current))
        text = f"{type(current).__name__}: {first_line(current)}"
        if text not in parts:
            parts.append(text)
        current = current.__cause__ or current.__context__
    return "; caused by ".join(parts)


def cache_dir() -> str:
    """Return the Hugging Face hub cache folder in use."""
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def hub_problem(exc: BaseException, repo: str, requested: str | None = None) -> tuple[str, str]:
    """Return (field, message) saying what a hub client error means for the user, on one line."""
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    status = getattr(getattr(exc, "response", None), "status_code", None)
    access = (
        f"log in with `hf auth login` (or set HF_TOKEN) and accept the dataset's terms at "
        f"{constants.ENDPOINT}/datasets/{repo}"
    )
    if isinstance(exc, GatedRepoError):  # a subclass of RepositoryNotFoundError: first
        return "access", f"the dataset {repo!r} is gated and the hub refused access ({status} GatedRepo); {access}"
    if isinstance(exc, RepositoryNotFoundError):
        if status in (401, 403):
            return "access", (
                f"the hub refused access to {repo!r} ({status}): it does not exist, or it is private or gated and "
                f"no token with access was sent; {access}"
            )
        return "dataset", f"no dataset repository {repo!r} on the hub ({status} RepoNotFound)"
    if isinstance(exc, RevisionNotFoundError):
        return "revision", f"the dataset {repo!r} has no revision {requested or 'main'!r}"
    if isinstance(exc, RemoteEntryNotFoundError):
        return "files", f"not in the commit ({status} EntryNotFound)"
    if isinstance(exc, HfHubHTTPError) and status in (401, 403):
        return "access", f"the hub refused access to {repo!r} ({status}); {access}"
    if isinstance(exc, LocalEntryNotFoundError):  # online: the client could not ask the hub
        exc = exc.__cause__ or exc
    if isinstance(exc, (HfHubHTTPError, OSError)) or type(exc).__module__.split(".")[0] in NETWORK_MODULES:
        return "dataset", f"cannot reach the dataset: {cause_text(exc)}; {OFFLINE_HINT}"
    return "dataset", cause_text(exc)


# ------------------------------------------------------------------------------------------ the revision


def resolve(repo: str, requested: str | None) -> HubRevision:
    """Return the commit, card and files a revision of a hub dataset names, resolved once per process."""
    key = (repo, requested)
    if key not in _RESOLVED:
        dist = None if requested and COMMIT.fullmatch(requested) else _distributed()
        _RESOLVED[key] = _resolve_here(repo, requested) if dist is None else _agree(dist, repo, requested)
    return _RESOLVED[key]


def _distributed() -> Any | None:
    """Return `torch.distributed` when this process is one rank of an initialized group of several, else None."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    except ValueError:
        world = 1
    if world <= 1:
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
    """Resolve a revision on rank 0 and give its commit (or its error) to every rank of the group."""
    mine: HubRevision | None = None
    payload: list[Any] = [None]
    if dist.get_rank() == 0:
        try:
            mine = _resolve_here(repo, requested)
            payload = [(mine.commit, None)]
        except DataError as exc:
            payload = [(None, list(exc.problems))]
    dist.broadcast_object_list(payload, src=0)
    commit, problems = payload[0]
    if problems:
        raise DataError(problems)
    if mine is not None:
        return mine
    return replace(_resolve_here(repo, commit), requested=requested)


def _storage(repo: str) -> Path:
    """Return the Hugging Face cache folder of a dataset repository."""
    from huggingface_hub.file_download import repo_folder_name

    return Path(cache_dir()) / repo_folder_name(repo_id=repo, repo_type="dataset")


def read_ref(repo: str, revision: str) -> str | None:
    """Return the commit the cache's `refs/<revision>` names, if any."""
    ref = _storage(repo) / "refs" / revision
    text = ref.read_text().strip() if ref.is_file() else ""
    return text if COMMIT.fullmatch(text) else None


def write_ref(repo: str, revision: str, commit: str) -> None:
    """Record in the cache which commit a revision named (`refs/<revision>`), as the client does for a card."""
    if revision == commit or read_ref(repo, revision) == commit:
        return
    ref = _storage(repo) / "refs" / revision
    try:
        ref.parent.mkdir(parents=True, exist_ok=True)
        tmp = ref.with_name(f"{ref.name}.{os.getpid()}.tmp")
        tmp.write_text(commit)
        tmp.replace(ref)
    except OSError as exc:
        log.warning(
            "HVCU-Bench: cannot record %s@%s = %s in the Hugging Face cache (%s); offline loads of it will need "
            "HVCU_BENCH_REVISION=%s",
            repo,
            revision,
            commit,
            first_line(exc),
            commit,
        )


def _card(path: Path | None) -> tuple[dict[str, Any], str | None]:
    """Return (YAML front matter, None) of a dataset card file, or ({}, why) when it cannot be parsed."""
    import yaml

    if path is None:
        return {}, None
    try:
        text = path.read_text(encoding="utf-8")
        if not text.startswith("---"):
            return {}, None
        data = yaml.safe_load(text[3:].split("\n---", 1)[0])
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return {}, f"the dataset card {CARD_FILE} cannot be parsed ({type(exc).__name__}: {first_line(exc)})"
    return (data if isinstance(data, dict) else {}), None


def _resolve_here(repo: str, requested: str | None) -> HubRevision:
    """Resolve a revision in this process: ask the hub, or offline read the cache."""
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import RemoteEntryNotFoundError

    source = f"{repo}@{requested or 'main'}"
    if offline():
        return _resolve_offline(repo, requested)
    readme: Path | None = None
    try:
        try:
            readme = Path(hf_hub_download(repo, CARD_FILE, repo_type="dataset", revision=requested))
            commit = readme.parent.name
        except RemoteEntryNotFoundError:  # no card: the revision still resolves, and the cache is told
            commit = HfApi().dataset_info(repo, revision=requested).sha or ""
            if COMMIT.fullmatch(commit):
                write_ref(repo, requested or "main", commit)
        files = tuple(HfApi().list_repo_files(repo, repo_type="dataset", revision=commit))
    except Exception as exc:  # network, access, a missing repo or revision: each said in one line
        field, message = hub_problem(exc, repo, requested)
        raise fail(source, field, message) from exc
    if not COMMIT.fullmatch(commit):
        raise fail(source, "revision", f"the hub gave no commit for revision {requested or 'main'!r} ({commit!r})")
    card, problem = _card(readme)
    return HubRevision(repo, requested, commit, card, files, problem)


def _resolve_offline(repo: str, requested: str | None) -> HubRevision:
    """Resolve a revision from the Hugging Face cache alone (no request)."""
    commit = requested if requested and COMMIT.fullmatch(requested) else read_ref(repo, requested or "main")
    snapshot = _storage(repo) / "snapshots" / commit if commit else None
    if snapshot is None or not snapshot.is_dir():
        raise fail(
            f"{repo}@{requested or 'main'}",
            "revision",
            f"offline mode is on and revision {requested or 'main'!r} of {repo!r} is not in the Hugging Face "
            f"cache ({cache_dir()}); run once online, or {OFFLINE_HINT}",
        )
    readme = snapshot / CARD_FILE
    card, problem = _card(readme if readme.is_file() else None)
    return HubRevision(repo, requested, str(commit), card, None, problem)


# ------------------------------------------------------------------------------------------ the layout


def layout(rev: HubRevision, family: str) -> Layout:
    """Return the layout one family is read from (decided once per commit), reading no data, only footers."""
    key = (rev.repo, rev.commit, family)
    if key not in _LAYOUTS:
        _LAYOUTS[key] = _decide(rev, family)
    return _LAYOUTS[key]


def _decide(rev: HubRevision, family: str) -> Layout:
    """Decide the layout of one family: parquet only when every shard's footer is the authors' records."""
    split = FAMILIES[family][0]
    if rev.card_problem:
        return Layout(JSON, f"{rev.card_problem}, so it declares no parquet config")
    patterns = split_patterns(rev.card, split)
    if not patterns:
        return Layout(JSON, f"the card declares no parquet split {split!r} in config {CONFIG!r}")
    if rev.files is not None:
        shards = sorted(p for p in rev.files if matches(p, patterns))
        if not shards:
            return Layout(JSON, f"no file of the repository matches the card's {split} paths {list(patterns)}")
        footers = [(shard, lambda s=shard: _remote_footer(rev, s)) for shard in shards]
    else:
        snapshot = _storage(rev.repo) / "snapshots" / rev.commit
        cached = sorted(
            p.relative_to(snapshot).as_posix()
            for p in snapshot.rglob("*.parquet")
            if matches(p.relative_to(snapshot).as_posix(), patterns)
        )
        if not cached:
            return Layout(JSON, f"the {split} parquet file is not in the cache (offline)")
        shards = cached
        footers = [(shard, lambda s=shard: _local_footer(snapshot / s)) for shard in shards]
    for shard, read in footers:
        try:
            metadata = read()
        except Exception as exc:  # a footer that cannot be read: the JSON layout, saying why
            return Layout(JSON, f"the parquet footer of {shard} cannot be read ({cause_text(exc)})")
        why = footer_problem(metadata, shard)
        if why:
            return Layout(JSON, why)
    return Layout(
        PARQUET, f"its footer names the authors' fields {list(AUTHORS_COLUMNS)} with image bytes", tuple(shards)
    )


def _remote_footer(rev: HubRevision, shard: str) -> Any:
    """Return the parquet FileMetaData of a shard of the commit (range requests)."""
    from huggingface_hub import hf_hub_url

    return remote_footer(hf_hub_url(rev.repo, shard, repo_type="dataset", revision=rev.commit), shard)


def _local_footer(path: Path) -> Any:
    """Return the parquet FileMetaData of a cached shard."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata


# ------------------------------------------------------------------------------------------ what was read


def announce(rev: HubRevision, family: str, chosen: Layout) -> None:
    """Say once per process, repo@commit and reason which layout is read, and record it for the data identity."""
    _LOADS[(rev.repo, rev.requested, family)] = (rev.commit, chosen.kind)
    key = (rev.repo, rev.commit, chosen.kind, chosen.reason)
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


def listing(files: Iterable[str]) -> str:
    """Return a short list of a repository's files for an error message (top-level entries, folders once)."""
    top = sorted({p.split("/")[0] + ("/" if "/" in p else "") for p in files})
    more = f" and {len(top) - LISTED_FILES} more" if len(top) > LISTED_FILES else ""
    return f"{top[:LISTED_FILES]}{more}"
