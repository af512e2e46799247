"""Read one family of HVCU-Bench from a Hugging Face Hub dataset repository, in a layout known for certain.

Through huggingface_hub's public API and its cache only: one commit per process (rank 0 pins it for every rank),
the parquet split only when every shard's footer holds the authors' fields, else the JSON file and the images its
ids name (docs/data.md, "What the `hub` source reads").
"""

from __future__ import annotations

import fnmatch
import glob
import logging
import os
import socket
import sys
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.core.names import IMAGE_EXTENSIONS
from hvcu_tasks.core.schema import DataError, Problem

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
PROBE_TIMEOUT_S = 3.0
"""How long the hub may take to accept a connection before a run says it cannot be reached."""


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
"""(repo, requested revision) -> the revision pinned: one commit per process, also for data identities."""
_LAYOUTS: dict[tuple[str, str, str], Layout] = {}
"""(repo, commit, family) -> the layout decided (and said) once per process."""
_SAID: set[str] = set()


def reset() -> None:
    """Forget what this process pinned, decided and said (a fresh process, for tests)."""
    for memory in (_RESOLVED, _LAYOUTS, _SAID):
        memory.clear()


def _say(text: str) -> None:
    """Log a warning once per process (the same layout and reason for several families: said once)."""
    if text not in _SAID:
        _SAID.add(text)
        log.warning("HVCU-Bench: %s", text)


def offline() -> bool:
    """Whether Hugging Face offline mode is on (the hub client's setting, or the environment's at call time)."""
    from huggingface_hub import constants

    on = {"1", "TRUE", "YES", "ON"}  # the environment's flags at call time
    return bool(constants.HF_HUB_OFFLINE) or any(os.environ.get(f, "").strip().upper() in on for f in OFFLINE_FLAGS)


def fail(source: str, field: str, message: str) -> DataError:
    """Return the one-line DataError of a hub load."""
    return DataError([Problem(source, "-", field, " ".join(message.split()))])


def cause_text(exc: BaseException) -> str:
    """Return 'Type: first line' of an exception and of the exceptions that caused it, on one line."""
    parts: list[str] = []
    for _ in range(4):
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
        parts += [] if text in parts else [text]
        if (exc := exc.__cause__ or exc.__context__) is None:
            break
    return "; caused by ".join(parts)


def hub_problem(exc: BaseException, repo: str, requested: str | None = None, what: str = "") -> tuple[str, str]:
    """Return (field, message) saying what a hub client error means for the user, on one line."""
    from huggingface_hub import constants, errors

    unasked = (errors.LocalEntryNotFoundError, errors.RevisionResolutionError)  # online: the hub could not be asked
    exc = exc.__cause__ if isinstance(exc, unasked) and exc.__cause__ and not offline() else exc
    status = getattr(getattr(exc, "response", None), "status_code", None)
    login = "log in with `hf auth login` (or set HF_TOKEN) and accept the dataset's terms at "
    access = f"{login}{constants.ENDPOINT}/datasets/{repo}"
    if isinstance(exc, errors.GatedRepoError):  # a subclass of RepositoryNotFoundError: first
        return "access", f"the dataset {repo!r} is gated and the hub refused access ({status} GatedRepo); {access}"
    if isinstance(exc, errors.HfHubHTTPError) and status in (401, 403):
        private = "it does not exist, or it is private or gated and no token with access was sent; "
        return "access", f"the hub refused access to {repo!r} ({status}): {private}{access}"
    if isinstance(exc, errors.RepositoryNotFoundError):
        return "dataset", f"no dataset repository {repo!r} on the hub ({status} RepoNotFound)"
    if isinstance(exc, errors.RevisionNotFoundError):
        return "revision", f"the dataset {repo!r} has no revision {requested or 'main'!r}"
    if offline():
        thing, cache = what or f"revision {requested or 'main'!r}", f"the Hugging Face cache ({constants.HF_HUB_CACHE})"
        why = f"offline mode is on and {thing} of {repo!r} is not in {cache}; run once online, or {OFFLINE_HINT}"
        return ("files" if what else "revision"), why
    if isinstance(exc, errors.HfHubHTTPError) and status:  # the hub answered, with an error
        hint = f"; {OFFLINE_HINT}" if status >= 500 else ""
        return "dataset", f"the hub answered {status} ({type(exc).__name__}: {str(exc).splitlines()[0]}){hint}"
    if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in ("httpx", "httpcore"):
        return "dataset", f"cannot reach the dataset: {cause_text(exc)}; {OFFLINE_HINT}"
    return "dataset", cause_text(exc)


def unreachable() -> str | None:
    """Return why the hub endpoint (or its proxy) accepts no TCP connection within PROBE_TIMEOUT_S; None if it does.

    Online, `resolve_revision` answers from a ref cached earlier when the hub is unreachable: a commit maybe stale.
    """
    from huggingface_hub import constants

    url = urllib.parse.urlsplit(constants.ENDPOINT)
    host, port = url.hostname or "", url.port or (443 if url.scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(url.scheme) or urllib.request.getproxies().get("all")
    if proxy and not urllib.request.proxy_bypass(host):
        purl = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        host, port = purl.hostname or "", purl.port or 80
    try:
        socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        why = f"cannot reach the Hugging Face Hub at {constants.ENDPOINT} ({type(exc).__name__}: {exc})"
        return f"{why}; {OFFLINE_HINT} or HF_HUB_OFFLINE=1 to read the Hugging Face cache"
    return None


# ------------------------------------------------------------------------------------------ the revision


def resolve(repo: str, requested: str | None) -> HubRevision:
    """Return the commit, files and card a revision of a hub dataset names, pinned once per process."""
    if (repo, requested) not in _RESOLVED:
        group = _group()
        _RESOLVED[(repo, requested)] = _pin(repo, requested) if group is None else _agree(group, repo, requested)
    return _RESOLVED[(repo, requested)]


def _group() -> Any | None:
    """Return `torch.distributed` when this process is one rank of an initialized group of several, else None."""
    world = os.environ.get("WORLD_SIZE", "1").strip()
    if not world.isdigit() or int(world) <= 1:
        return None
    dist = sys.modules.get("torch.distributed")  # no group can exist where torch was never imported
    if dist is not None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist
    why = f"WORLD_SIZE={world} but no torch.distributed process group is initialized, so this rank"
    pin = "a push during start-up can give ranks different commits: pin HVCU_BENCH_REVISION=<commit> for such runs"
    _say(f"{why} (RANK={os.environ.get('RANK', '?')}) resolves the hub revision itself; {pin}")
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
    from huggingface_hub import HfApi, get_cached_repo_tree, metadata_load

    local = offline()
    if commit is None and not local and (why := unreachable()):
        raise fail(f"{repo}@{requested or 'main'}", "dataset", why)
    try:
        if commit is None:
            api = HfApi()
            commit = api.resolve_revision(repo, repo_type=DATASET, revision=requested, local_files_only=local).resolved
        folder = _snapshot(repo, commit, [CARD_FILE], local)
        files = tuple(sorted(f.path for f in get_cached_repo_tree(repo, repo_type=DATASET, revision=commit)))
    except Exception as exc:  # network, access, a missing repo or revision, a cold cache: each said in one line
        raise fail(f"{repo}@{requested or 'main'}", *hub_problem(exc, repo, requested)) from exc
    card, problem = {}, None
    try:
        card = metadata_load(folder / CARD_FILE) or {} if (folder / CARD_FILE).is_file() else {}
    except Exception as exc:  # YAML, encoding: the card counts as one declaring no parquet config
        problem = f"the dataset card {CARD_FILE} cannot be parsed ({cause_text(exc)})"
    return HubRevision(repo, requested, commit, folder, files, card, problem, local)


def _snapshot(repo: str, commit: str, patterns: list[str], local: bool) -> Path:
    """Return the cache folder of a commit, downloading the files matching `patterns` into it first (online)."""
    from huggingface_hub import snapshot_download

    return Path(
        snapshot_download(repo, repo_type=DATASET, revision=commit, allow_patterns=patterns, local_files_only=local)
    )


def fetch(rev: HubRevision, paths: Sequence[str]) -> list[Path]:
    """Return files of the commit from the Hugging Face cache, downloading only these first (online)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        if paths:
            _snapshot(rev.repo, rev.commit, [glob.escape(p) for p in paths], rev.local)
    except Exception as exc:  # the other files were fetched: the first one not in the cache is named
        have = [try_to_load_from_cache(rev.repo, p, revision=rev.commit, repo_type=DATASET) for p in paths]
        path = next((p for p, got in zip(paths, have, strict=True) if not isinstance(got, str)), paths[0])
        field, why = hub_problem(exc, rev.repo, what=path)
        if not rev.local:
            field, why = "download", f"cannot download {path}: {why}"
        raise fail(f"{rev.where}/{path}", field, why) from exc
    return [rev.folder / p for p in paths]


# ------------------------------------------------------------------------------------------ the layout


def split_patterns(card: Mapping[str, Any], split: str) -> tuple[str, ...]:
    """Return the path patterns the card declares for one split of the benchmark config (none: no such split)."""
    configs = [c for c in card.get("configs") or [] if isinstance(c, Mapping) and c.get("config_name") == CONFIG]
    files = configs[0].get("data_files") or [] if configs else []
    for entry in [{"split": k, "path": v} for k, v in files.items()] if isinstance(files, Mapping) else files:
        if isinstance(entry, Mapping) and entry.get("split") == split:
            paths = entry.get("path")
            return tuple(str(p) for p in ([paths] if isinstance(paths, str) else list(paths or [])))
    return ()


def layout(rev: HubRevision, family: str) -> Layout:
    """Return the layout one family is read from (decided once per commit; said once), reading only footers."""
    if (key := (rev.repo, rev.commit, family)) not in _LAYOUTS:
        _LAYOUTS[key] = chosen = _decide(rev, FAMILIES[family][0])
        _say(
            f"reading {rev.where} (revision {rev.requested or 'main'}) from {LAYOUT_TEXT[chosen.kind]}: {chosen.reason}"
        )
    return _LAYOUTS[key]


def _decide(rev: HubRevision, split: str) -> Layout:
    """Decide the layout of one split: parquet only when every shard's footer is the authors' records."""
    import pyarrow.parquet as pq
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
        if rev.local and not (rev.folder / shard).is_file():
            return Layout(JSON, f"the {split} parquet file is not in the cache (offline)")
        try:  # offline the cached copy, else the hub's: range requests for the footer only
            path = f"datasets/{rev.where}/{shard}"
            with open(rev.folder / shard, "rb") if rev.local else HfFileSystem().open(path) as file:
                metadata = pq.read_metadata(file)
        except Exception as exc:  # a footer that cannot be read: the JSON layout, saying why
            return Layout(JSON, f"the parquet footer of {shard} cannot be read ({cause_text(exc)})")
        why = footer_problem(metadata, shard)
        if why:
            return Layout(JSON, why)
    return Layout(PARQUET, f"its footer names the authors' fields {list(AUTHORS_COLUMNS)} with image bytes", shards)


def footer_problem(metadata: Any, shard: str) -> str | None:
    """Return None when a parquet footer describes the authors' records with image bytes in every row, else why."""
    import pyarrow as pa

    t, schema = pa.types, metadata.schema.to_arrow_schema()
    kinds, columns = {name: schema.field(name).type for name in schema.names}, sorted(schema.names)
    if missing := [c for c in AUTHORS_COLUMNS if c not in kinds]:
        return f"the parquet columns {columns} are not the authors' fields (no column {', '.join(missing)})"
    image, text, binary = kinds["image"], (t.is_string, t.is_large_string), (t.is_binary, t.is_large_binary)
    inner = image.field("bytes").type if t.is_struct(image) and image.get_field_index("bytes") >= 0 else pa.null()
    path = "image" if any(b(image) for b in binary) else "image.bytes" if any(b(inner) for b in binary) else None
    rules = {
        "id": ("text or an integer", (*text, t.is_integer)),
        "qa_levels": ("a list or its JSON text", (*text, t.is_list, t.is_large_list)),
        "image": ("encoded image bytes (binary or a struct with binary bytes)", (lambda _kind: path is not None,)),
    }
    for column, (wanted, usable) in rules.items():
        if not any(check(kinds[column]) for check in usable):
            why = f"column {column} holds {' '.join(str(kinds[column]).split())}, not {wanted}"
            return f"the parquet columns {columns} are not the authors' fields ({why})"
    groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
    stats = [g.column(i).statistics for g in groups for i in range(g.num_columns) if g.column(i).path_in_schema == path]
    nulls = sum(s.null_count for s in stats if s is not None and s.has_null_count)
    if nulls:
        return f"{nulls} of {metadata.num_rows} rows of {shard} have no image bytes (the footer's null counts)"
    return None


# ------------------------------------------------------------------------------------------ the files


def json_file(rev: HubRevision, stem: str, chosen: Layout) -> Path:
    """Return a family's JSON file of the commit, fetched; a commit without one is one DataError naming the files."""
    if f"{stem}.json" not in rev.files:
        top = sorted({p.split("/")[0] + ("/" if "/" in p else "") for p in rev.files})
        more = f" and {len(top) - LISTED_FILES} more" if len(top) > LISTED_FILES else ""
        why = f"the parquet split is not usable ({chosen.reason}) and there is no {stem}.json"
        raise fail(
            f"{rev.where}/{stem}.json", "files", f"no usable layout: {why}; files present: {top[:LISTED_FILES]}{more}"
        )
    return fetch(rev, [f"{stem}.json"])[0]


def fetch_images(rev: HubRevision, stem: str, ids: list[str]) -> None:
    """Fetch the images of these ids of a family: per id the first of the authors' extensions the commit holds."""
    present = set(rev.files)
    wanted = (next((p for e in IMAGE_EXTENSIONS if (p := f"Image/{stem}/{i}{e}") in present), None) for i in ids)
    fetch(rev, sorted({p for p in wanted if p}))


def load_record(repo: str, requested: str | None, family: str) -> tuple[str, str] | None:
    """Return (commit, layout) of this process's hub load of one family at a requested revision, if any."""
    rev = _RESOLVED.get((repo, requested))
    chosen = _LAYOUTS.get((repo, rev.commit, family)) if rev else None
    return (rev.commit, chosen.kind) if rev and chosen else None
