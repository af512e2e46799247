"""Download exactly the hub files one family needs, at one commit, into the Hugging Face cache.

Every download names the resolved commit (`hf_hub_download(revision=<commit>)`), so a file already in the cache
is not asked for again; offline, only the cache is read. A file that cannot be had is one error naming it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.core.names import IMAGE_EXTENSIONS
from hvcu_tasks.data import jsonio
from hvcu_tasks.data.hub import OFFLINE_HINT, HubRevision, Layout, cache_dir, fail, hub_problem, listing

WORKERS = 8
"""Files downloaded at once."""


def download(rev: HubRevision, path: str) -> Path:
    """Return one file of the commit from the cache, downloading it first when online; one error naming it."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    source = f"{rev.where}/{path}"
    try:
        return Path(
            hf_hub_download(
                rev.repo, path, repo_type="dataset", revision=rev.commit, local_files_only=rev.files is None
            )
        )
    except LocalEntryNotFoundError as exc:
        if rev.files is None:
            raise fail(
                source,
                "files",
                f"offline mode is on and {path} of {rev.where} is not in the Hugging Face cache ({cache_dir()}); "
                f"run once online, or {OFFLINE_HINT}",
            ) from exc
        raise fail(source, "download", f"cannot download {path}: {hub_problem(exc, rev.repo)[1]}") from exc
    except Exception as exc:  # network, access, a name the client refuses
        raise fail(source, "download", f"cannot download {path}: {hub_problem(exc, rev.repo)[1]}") from exc


def download_all(rev: HubRevision, paths: Sequence[str]) -> list[Path]:
    """Download files of the commit, several at once; the first that fails is the error (naming it)."""
    if not paths:
        return []
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    group = "huggingface_hub.http_get"  # one bar per file would be one line per image
    quiet = not are_progress_bars_disabled(group)
    if quiet:
        disable_progress_bars(group)
    try:
        with ThreadPoolExecutor(min(WORKERS, len(paths))) as pool:
            return list(pool.map(lambda p: download(rev, p), paths))
    finally:
        if quiet:
            enable_progress_bars(group)


def image_paths(json_file: Path, stem: str, files: Iterable[str]) -> list[str]:
    """Return the repository paths of the images a family's JSON names: per id the first extension the commit has."""
    try:
        records = jsonio.read_json(json_file)
    except (OSError, ValueError):
        return []  # the JSON reader reports the broken file itself
    present = set(files)
    wanted: list[str] = []
    for record in records if isinstance(records, list) else []:
        ident = record.get("id") if isinstance(record, dict) else None
        if ident is None or isinstance(ident, (dict, list)):
            continue
        for ext in IMAGE_EXTENSIONS:  # the authors' order
            path = f"Image/{stem}/{ident}{ext}"
            if path in present:
                wanted.append(path)
                break
    return sorted(set(wanted))


def json_files(rev: HubRevision, family: str, chosen: Layout) -> tuple[Path, Path]:
    """Return one family's JSON file and image folder of the commit, downloading the JSON and its images only."""
    stem = FAMILIES[family][1]
    json_path = f"{stem}.json"
    if rev.files is not None and json_path not in rev.files:
        raise fail(
            f"{rev.where}/{json_path}",
            "files",
            f"no usable layout: the parquet split is not usable ({chosen.reason}) and there is no {json_path}; "
            f"files present: {listing(rev.files)}",
        )
    json_file = download(rev, json_path)
    if rev.files is not None:
        download_all(rev, image_paths(json_file, stem, rev.files))
    return json_file, json_file.parent / "Image" / stem


def parquet_shards(rev: HubRevision, shards: Sequence[str]) -> list[Path]:
    """Return the parquet files of one split of the commit (downloaded when online; only these)."""
    return download_all(rev, list(shards))
