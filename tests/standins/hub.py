"""A stand-in for the Hugging Face Hub on 127.0.0.1: the endpoints the installed `huggingface_hub` and `datasets` call.

It serves dataset repositories held in memory as git-like commits (revision name -> commit sha -> file tree) and
records every request it receives, so a test can assert that nothing was asked elsewhere. It is also the proxy
(`HTTP_PROXY`/`HTTPS_PROXY` point at it, `NO_PROXY` is cleared): a request meant for any other host lands here,
is recorded with that host and refused (502), and `foreign()` lists it.

Endpoints (read from huggingface_hub 1.x and datasets 4.x; what they call to load a dataset or download files):

- `GET /api/datasets/{repo}` and `GET /api/datasets/{repo}/revision/{rev}`: the dataset info (`sha`, `siblings`,
  `cardData`), as `HfApi.dataset_info` and `HfFileSystem` read it;
- `GET /api/datasets/{repo}/tree/{rev}[/{path}]` (`recursive`, `expand`) and `POST /api/datasets/{repo}/paths-info/
  {rev}`: listings, as `HfFileSystem` (glob of the card's `data_files`) reads them;
- `HEAD`/`GET /datasets/{repo}/resolve/{rev}/{path}` (`Range` honoured): a file kept in git (JSON, the card), with
  `X-Repo-Commit`, `ETag` (the git blob sha1 of the content), `Content-Length` and `Accept-Ranges`; a large file
  kept in LFS (parquet, images: `LFS_SUFFIXES`) is a 302 to a second loopback host:port (127.0.0.2), the "CDN"
  (`hub.cdn_host`, signed-URL style `/cdn/{repo}/{sha}/{path}?X-Amz-Signature=...`, `Range` honoured), with
  `X-Linked-Size` and `X-Linked-Etag` (the sha256 of the content), as the hub answers for LFS files
  (`hub.lfs_redirect = False` serves them directly);
- `tree` listings paged with a `Link: <...&cursor=N>; rel="next"` header past `hub.page_size` entries (the hub pages
  at 1,000), an LFS file's entry with its `lfs` object (sha256, size), as `snapshot_download` caches it;
- `GET /api/agent-harnesses`: the registry the client fetches once per process for its user agent (empty here);
- 404 with the hub's `X-Error-Code` (`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`) where the hub answers so;
  a gated repository (`Repo.gated`) answers its files with 401 `GatedRepo` without a token and 403 `GatedRepo` with
  a token not in `Repo.readers`; a private one (`Repo.private`) answers everything with 401 `RepoNotFound`
  without a token and 404 with a token not in `Repo.readers`.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def git_blob_sha(data: bytes) -> str:
    """Return the git blob sha1 of a file's content (the ETag the hub gives a file kept in git)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def commit_sha(files: dict[str, bytes], parent: str = "") -> str:
    """Return a git-like commit sha: 40 hex digits that depend on the tree and the parent."""
    tree = "\n".join(f"{path}\0{git_blob_sha(data)}" for path, data in sorted(files.items()))
    return hashlib.sha1(f"commit\0{parent}\0{tree}".encode()).hexdigest()


@dataclass
class Repo:
    """One dataset repository: commits (sha -> path -> bytes) and revision names (branch or tag -> sha)."""

    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    gated: bool = False
    private: bool = False
    readers: set[str] = field(default_factory=set)
    """Tokens with access (a gated repository: terms accepted)."""

    def commit(self, files: dict[str, bytes], revision: str = "main") -> str:
        """Record a commit holding exactly `files` on `revision` (a branch or tag name); return its sha."""
        sha = commit_sha(files, self.refs.get(revision, ""))
        self.commits[sha] = dict(files)
        self.refs[revision] = sha
        return sha

    def resolve(self, revision: str) -> str | None:
        """Return the commit a revision names (a ref, or a commit sha; unquoted), or None."""
        if revision in self.refs:
            return self.refs[revision]
        return revision if revision in self.commits else None


@dataclass(frozen=True)
class Request:
    """One request the stand-in received: method, host it was meant for, path (with the query), Range, status sent."""

    method: str
    host: str
    path: str
    range: str = ""
    status: int = 0


LFS_SUFFIXES = (".parquet", ".png", ".jpg", ".jpeg", ".webp")
"""Files the stand-in keeps "in LFS": their `resolve` is a 302 to the CDN host."""


class StandInHub:
    """A threaded HTTP server on 127.0.0.1 that plays the hub for the repositories in `repos`."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[Request] = []
        self.home: Path | None = None
        """The Hugging Face cache folder of the clients pointed here (set by the `stand_in_hub` fixture)."""
        self.go_offline: Any = None
        """Turns on the clients' offline mode over the warm cache (set by the `stand_in_hub` fixture)."""
        self.page_size = 1000
        """Entries per page of a `tree` listing (the hub's is 1,000)."""
        self.lfs_redirect = True
        """Whether `resolve` of an LFS file redirects to the CDN host (the hub's way)."""
        self.intercept: Any = None
        """A test's hook: called with each Request; may sleep, or return (status, body) to answer it instead."""
        self._lock = threading.Lock()
        # the CDN needs another host name (the client keeps following a redirect to the same name, any port)
        self._servers = [ThreadingHTTPServer((name, 0), _handler(self)) for name in ("127.0.0.1", "127.0.0.2")]
        for server in self._servers:
            server.daemon_threads = True
        self._server = self._servers[0]
        self.host = f"127.0.0.1:{self._servers[0].server_address[1]}"
        self.cdn_host = f"127.0.0.2:{self._servers[1].server_address[1]}"
        self.endpoint = f"http://{self.host}"
        self._threads = [
            threading.Thread(target=server.serve_forever, args=(0.05,), name=f"stand-in-hub-{i}", daemon=True)
            for i, server in enumerate(self._servers)
        ]

    def start(self) -> StandInHub:
        """Start serving (the hub and its CDN host) in background threads."""
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the sockets."""
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def repo(self, repo_id: str) -> Repo:
        """Return the repository `repo_id`, created empty when new."""
        return self.repos.setdefault(repo_id, Repo())

    def record(self, request: Request) -> None:
        """Remember one request."""
        with self._lock:
            self.requests.append(request)

    def foreign(self) -> list[Request]:
        """Return the requests meant for a host other than the stand-in itself (the hub or its CDN host)."""
        return [r for r in self.requests if r.host not in (self.host, self.cdn_host)]

    def paths(self, method: str | None = None) -> list[str]:
        """Return the paths (no query) of the requests received, optionally of one method only."""
        return [r.path.split("?")[0] for r in self.requests if method is None or r.method == method]

    def downloads(self) -> list[str]:
        """Return the repository files fetched whole (a GET without a Range answered 200, from the hub or the CDN)."""
        out = []
        for r in self.requests:
            if r.method != "GET" or r.range or r.status != 200:
                continue
            path = urllib.parse.unquote(r.path.split("?")[0])
            if "/resolve/" in path:
                out.append(path.split("/resolve/", 1)[1].split("/", 1)[1])
            elif match := CDN.match(path):
                out.append(match["path"])
        return out

    def clear(self) -> None:
        """Forget the requests received so far."""
        with self._lock:
            self.requests.clear()


API = re.compile(r"^/api/datasets/(?P<repo>[^/]+/[^/]+)(?:/(?P<kind>revision|tree|paths-info)/(?P<rest>.*))?$")
RESOLVE = re.compile(r"^/datasets/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
CDN = re.compile(r"^/cdn/(?P<repo>[^/]+/[^/]+)/(?P<sha>[0-9a-f]{40})/(?P<path>.+)$")


def _card_data(files: dict[str, bytes]) -> dict[str, Any] | None:
    """Return the YAML front matter of README.md as the hub's `cardData`, if any."""
    import yaml

    try:
        text = files.get("README.md", b"").decode("utf-8")
        data = yaml.safe_load(text[4:].split("\n---", 1)[0]) if text.startswith("---\n") else None
    except (UnicodeDecodeError, yaml.YAMLError):  # the hub shows no card data for a card it cannot parse
        return None
    return data if isinstance(data, dict) else None


def _entries(files: dict[str, bytes], folder: str, recursive: bool) -> list[dict[str, Any]]:
    """Return the hub's tree entries below `folder` ('' = root): files with oid and size, and folders."""
    prefix = folder.strip("/") + "/" if folder.strip("/") else ""
    out: dict[str, dict[str, Any]] = {}
    for path, data in sorted(files.items()):
        if not path.startswith(prefix):
            continue
        parts = path[len(prefix) :].split("/")
        for depth in range(1, len(parts)):
            sub = prefix + "/".join(parts[:depth])
            if recursive or depth == 1:
                out.setdefault(sub, {"type": "directory", "oid": git_blob_sha(sub.encode()), "size": 0, "path": sub})
        if recursive or len(parts) == 1:
            out[path] = {"type": "file", "oid": git_blob_sha(data), "size": len(data), "path": path}
            if path.endswith(LFS_SUFFIXES):  # the hub names an LFS file's content: sha256, size, pointer size
                out[path]["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
    return list(out.values())


def _handler(hub: StandInHub) -> type[BaseHTTPRequestHandler]:
    """Return the request handler class bound to one stand-in hub."""

    class Handler(BaseHTTPRequestHandler):
        """Answers one request the way the hub does, or refuses a request meant for another host."""

        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            """Stay quiet: the requests are recorded, not printed."""

        def _target(self) -> tuple[str, str]:
            """Return (host, path) of the request, whether sent to the server or through it as a proxy."""
            if self.path.startswith(("http://", "https://")):
                url = urllib.parse.urlsplit(self.path)
                return url.netloc, url.path + (f"?{url.query}" if url.query else "")
            return self.headers.get("Host", ""), self.path

        def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
            """Record the request with its status, then send a whole response (no body for HEAD)."""
            pending = getattr(self, "_pending", None)
            if pending is not None:
                hub.record(Request(*pending, status=status))
                self._pending = None
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _error(self, status: int, code: str, message: str) -> None:
            """Send a hub error: `X-Error-Code` and `X-Error-Message` headers and a JSON body."""
            body = json.dumps({"error": message}).encode()
            self._send(
                status, body, {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"}
            )

        def _json(self, value: Any, commit: str | None = None) -> None:
            """Send a JSON body."""
            headers = {"Content-Type": "application/json"} | ({"X-Repo-Commit": commit} if commit else {})
            self._send(200, json.dumps(value).encode(), headers)

        def do_CONNECT(self) -> None:  # noqa: N802 - http.server's naming
            """Refuse a tunnel to another host (an https request through the proxy) and record it."""
            hub.record(Request("CONNECT", self.path, ""))
            self._send(502)
            self.close_connection = True

        def do_HEAD(self) -> None:  # noqa: N802
            """Answer a HEAD request."""
            self._dispatch()

        def do_GET(self) -> None:  # noqa: N802
            """Answer a GET request."""
            self._dispatch()

        def do_POST(self) -> None:  # noqa: N802
            """Answer a POST request (paths-info)."""
            self._dispatch()

        def _dispatch(self) -> None:
            """Answer the request as the hub or its CDN host, or refuse it when meant for another host (recorded)."""
            host, target = self._target()
            self._pending = (self.command, host, target, self.headers.get("Range", ""))
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            url = urllib.parse.urlsplit(target)
            path = urllib.parse.unquote(url.path)
            query = urllib.parse.parse_qs(url.query)
            answer = hub.intercept(Request(*self._pending)) if hub.intercept else None
            if answer is not None:
                self._send(answer[0], answer[1], {"Content-Type": "text/plain"})
            elif host == hub.cdn_host and (match := CDN.match(path)):
                self._cdn(match["repo"], match["sha"], match["path"])
            elif host != hub.host:
                self._send(502, b"the stand-in hub refuses requests to other hosts")
            elif match := RESOLVE.match(url.path):
                self._resolve(match["repo"], urllib.parse.unquote(match["rev"]), urllib.parse.unquote(match["path"]))
            elif url.path == "/api/agent-harnesses":  # the registry the client reads for its user agent: none here
                self._json({"standardEnvVars": [], "harnesses": {}})
            elif match := API.match(url.path):
                self._api(match["repo"], match["kind"], match["rest"] or "", query, body)
            else:
                self._error(404, "NotFound", f"the stand-in hub does not serve {path}")

        def _token(self) -> str | None:
            """Return the bearer token the request carries, if any."""
            value = self.headers.get("Authorization", "")
            return value[7:].strip() if value.lower().startswith("bearer ") else None

        def _allowed(self, repo_id: str, repo: Repo, files: bool) -> bool:
            """Whether the request may see the repository (its files, when `files`); else send the hub's refusal."""
            token = self._token()
            if token in repo.readers:
                return True
            if repo.private:
                self._error(401 if token is None else 404, "RepoNotFound", "Repository not found")
                return False
            if repo.gated and files:
                message = (
                    f"Access to dataset {repo_id} is restricted. You must have access to it and be authenticated "
                    "to access it. Please log in."
                    if token is None
                    else f"Access to dataset {repo_id} is restricted and you are not in the authorized list. "
                    f"Visit https://huggingface.co/datasets/{repo_id} to ask for access."
                )
                self._error(401 if token is None else 403, "GatedRepo", message)
                return False
            return True

        def _commit(self, repo_id: str, revision: str, files: bool = False) -> tuple[Repo, str] | None:
            """Return (repo, commit) or send the hub's refusal or 404 for a missing repo or revision."""
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(401 if self._token() is None else 404, "RepoNotFound", "Repository not found")
                return None
            if not self._allowed(repo_id, repo, files):
                return None
            sha = repo.resolve(revision)
            if sha is None:
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                return None
            return repo, sha

        def _resolve(self, repo_id: str, revision: str, path: str) -> None:
            """Serve one file of one revision, whole or the asked byte range; an LFS file: a 302 to the CDN host."""
            found = self._commit(repo_id, revision, files=True)
            if found is None:
                return
            repo, sha = found
            data = repo.commits[sha].get(path)
            if data is None:
                self._error(404, "EntryNotFound", f"Entry not found: {path}")
                return
            if hub.lfs_redirect and path.endswith(LFS_SUFFIXES):
                digest = hashlib.sha256(data).hexdigest()
                where = f"http://{hub.cdn_host}/cdn/{repo_id}/{sha}/{urllib.parse.quote(path)}"
                self._send(
                    302,
                    b"",
                    {
                        "Location": f"{where}?X-Amz-Signature=stand-in",
                        "X-Repo-Commit": sha,
                        "X-Linked-Etag": f'"{digest}"',
                        "X-Linked-Size": str(len(data)),
                        "ETag": f'"{git_blob_sha(data)}"',
                    },
                )
                return
            self._file(data, {"X-Repo-Commit": sha, "ETag": f'"{git_blob_sha(data)}"'})

        def _cdn(self, repo_id: str, sha: str, path: str) -> None:
            """Serve an LFS file from the CDN host (a signed URL: no token asked)."""
            data = hub.repos.get(repo_id, Repo()).commits.get(sha, {}).get(path)
            if data is None:
                self._send(404, b"NoSuchKey")
                return
            self._file(data, {"ETag": f'"{hashlib.sha256(data).hexdigest()}"'})

        def _file(self, data: bytes, headers: dict[str, str]) -> None:
            """Send file content, whole or the asked byte range."""
            headers = {**headers, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
            wanted = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", "").strip())
            if wanted and self.command == "GET" and data:
                first, last = wanted.groups()
                start = len(data) - int(last) if not first else int(first)
                end = len(data) - 1 if not first or not last else min(int(last), len(data) - 1)
                headers["Content-Range"] = f"bytes {max(start, 0)}-{end}/{len(data)}"
                self._send(206, data[max(start, 0) : end + 1], headers)
                return
            self._send(200, data, headers)

        def _api(self, repo_id: str, kind: str | None, rest: str, query: dict[str, list[str]], body: bytes) -> None:
            """Serve the dataset info, a tree listing or paths-info."""
            revision, _, folder = rest.partition("/") if kind else ("main", "", "")  # still quoted: `fix%2Fv1`
            revision, folder = urllib.parse.unquote(revision), urllib.parse.unquote(folder)
            found = self._commit(repo_id, revision)
            if found is None:
                return
            repo, sha = found
            files = repo.commits[sha]
            if kind in (None, "revision"):
                info = {
                    "_id": sha[:24],
                    "id": repo_id,
                    "author": repo_id.split("/")[0],
                    "sha": sha,
                    "private": repo.private,
                    "gated": "auto" if repo.gated else False,
                    "disabled": False,
                    "downloads": 0,
                    "likes": 0,
                    "tags": [],
                    "siblings": [{"rfilename": p} for p in sorted(files)],
                    "cardData": _card_data(files),
                }
                self._json(info, sha)
            elif kind == "tree":
                recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
                if folder and folder.strip("/") not in {e["path"] for e in _entries(files, "", True)}:
                    self._error(404, "EntryNotFound", f"{folder} does not exist on {revision}")
                    return
                entries = _entries(files, folder, recursive)
                start = int(query.get("cursor", ["0"])[0])
                page = entries[start : start + hub.page_size]
                headers = {"Content-Type": "application/json", "X-Repo-Commit": sha}
                if start + hub.page_size < len(entries):
                    rest_query = {k: v[0] for k, v in query.items() if k != "cursor"}
                    rest_query["cursor"] = str(start + hub.page_size)
                    url = f"{hub.endpoint}{urllib.parse.urlsplit(self._target()[1]).path}"
                    headers["Link"] = f'<{url}?{urllib.parse.urlencode(rest_query)}>; rel="next"'
                self._send(200, json.dumps(page).encode(), headers)
            else:  # paths-info
                form = urllib.parse.parse_qs(body.decode())
                if "paths" not in form and body.startswith(b"{"):
                    form = {"paths": json.loads(body).get("paths", [])}
                everything = {e["path"]: e for e in _entries(files, "", True)}
                self._json([everything[p] for p in form.get("paths", []) if p in everything], sha)

    return Handler


# ------------------------------------------------------------------------------------------ the published layout

SPLITS = {
    "aesthetic": "Aesthetic_Appreciation",
    "affective": "Affective_Reasoning",
    "implication": "Implication_Understanding",
}
STEMS = {
    "aesthetic": "Aesthetic-Appreciation",
    "affective": "Affective-Reasoning",
    "implication": "Implication-Understanding",
}
"""The published repository's split names and JSON stems (written out here, not imported from the toolkit)."""


def card(features: list[dict[str, Any]] | None = None) -> bytes:
    """Return a dataset card (README.md) declaring the `benchmark` config, one parquet split per family under assets/.

    `features`, when given, is the card's `dataset_info.features` (the YAML list form `push_to_hub` writes).
    """
    import yaml

    meta: dict[str, Any] = {
        "license": "cc-by-4.0",
        "configs": [
            {
                "config_name": "benchmark",
                "data_files": [{"split": s, "path": f"assets/{s}-*.parquet"} for s in SPLITS.values()],
            }
        ],
    }
    if features is not None:
        meta["dataset_info"] = {"config_name": "benchmark", "features": features}
    return f"---\n{yaml.safe_dump(meta, sort_keys=False)}---\n# HVCU-Bench (stand-in)\n".encode()


AUTHORS_FEATURES = [
    {"name": "id", "dtype": "string"},
    {"name": "image", "dtype": "image"},
    {"name": "qa_levels", "dtype": "string"},
]
"""The card features of a parquet config in the authors' field names (qa_levels kept as JSON text)."""


def parquet_bytes(rows: list[dict[str, Any]]) -> bytes:
    """Return a parquet file holding the rows (no rows: the authors' columns, empty)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    authors = pa.schema(
        [
            ("id", pa.string()),
            ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
            ("qa_levels", pa.string()),
        ]
    )
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=None if rows else authors), buffer)
    return buffer.getvalue()


def published_files(
    items: dict[str, list[dict[str, Any]]],
    images: dict[str, dict[str, bytes]],
    parquet: str | None = "unknown",
    features: list[dict[str, Any]] | None = None,
    json_files: bool = True,
) -> dict[str, bytes]:
    """Return the files of a repository in the published layout: card, parquet splits, JSON files, image folders.

    `items`: family -> authors' records; `images`: family -> id -> PNG bytes. `parquet`: "authors" (columns
    id, image, qa_levels), "unknown" (columns nobody here knows: question_id, img, conversations), or None.
    """
    files = {"README.md": card(features)}
    for family, records in items.items():
        split, stem = SPLITS[family], STEMS[family]
        if json_files:
            files[f"{stem}.json"] = json.dumps(records).encode()
        for record in records:
            if record["id"] in images.get(family, {}):
                files[f"Image/{stem}/{record['id']}.png"] = images[family][record["id"]]
        if parquet == "authors":
            rows = [
                {
                    "id": r["id"],
                    "image": {"bytes": images[family][r["id"]], "path": None},
                    "qa_levels": json.dumps(r["qa_levels"]),
                }
                for r in records
            ]
        elif parquet == "unknown":
            rows = [
                {"question_id": r["id"], "img": images[family][r["id"]], "conversations": json.dumps(r["qa_levels"])}
                for r in records
            ]
        else:
            continue
        files[f"assets/{split}-00000-of-00001.parquet"] = parquet_bytes(rows)
    return files


# ------------------------------------------------------------------------------------------ pointing the clients here

HUB_CONSTANTS = (
    "ENDPOINT",
    "HUGGINGFACE_CO_URL_TEMPLATE",
    "HF_HUB_OFFLINE",
    "HF_HUB_CACHE",
    "HF_HOME",
    "HF_TOKEN_PATH",
)
DATASETS_CONFIG = (
    "HF_ENDPOINT",
    "HUB_DATASETS_URL",
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "HF_CACHE_HOME",
    "HF_DATASETS_CACHE",
    "DOWNLOADED_DATASETS_PATH",
    "EXTRACTED_DATASETS_PATH",
    "HF_UPDATE_DOWNLOAD_COUNTS",
)
"""The settings `huggingface_hub.constants` and `datasets.config` read from the environment once, at import."""


def client_environment(hub: StandInHub, home: Path, offline: bool = False) -> dict[str, str]:
    """Return the environment variables that point both clients at the stand-in, with caches under `home`."""
    return {
        "HF_ENDPOINT": hub.endpoint,
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_DATASETS_CACHE": str(home / "datasets"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
        "HF_UPDATE_DOWNLOAD_COUNTS": "0",
        "HF_HUB_OFFLINE": "1" if offline else "0",
        "HF_DATASETS_OFFLINE": "1" if offline else "0",
        "HTTP_PROXY": hub.endpoint,
        "HTTPS_PROXY": hub.endpoint,
        "ALL_PROXY": hub.endpoint,
        "http_proxy": hub.endpoint,
        "https_proxy": hub.endpoint,
        "all_proxy": hub.endpoint,
        "NO_PROXY": "",
        "no_proxy": "",
    }


def point_clients(monkeypatch: Any, hub: StandInHub, home: Path, offline: bool = False) -> None:
    """Point this process's `huggingface_hub` and `datasets` at the stand-in: the environment and what they read
    from it at import (their module constants), and a fresh HTTP client that sees the proxy variables."""
    import datasets
    from huggingface_hub import constants
    from huggingface_hub.utils import _http

    for key in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in client_environment(hub, home, offline).items():
        monkeypatch.setenv(key, value)
    values = {
        "ENDPOINT": hub.endpoint,
        "HUGGINGFACE_CO_URL_TEMPLATE": hub.endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HUB_OFFLINE": offline,
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_HOME": str(home),
        "HF_TOKEN_PATH": str(home / "token"),
    }
    for name in HUB_CONSTANTS:
        monkeypatch.setattr(constants, name, values[name])
    config = {
        "HF_ENDPOINT": hub.endpoint,
        "HUB_DATASETS_URL": hub.endpoint + "/datasets/{repo_id}/resolve/{revision}/{path}",
        "HF_HUB_OFFLINE": offline,
        "HF_DATASETS_OFFLINE": offline,
        "HF_CACHE_HOME": str(home),
        "HF_DATASETS_CACHE": home / "datasets",
        "DOWNLOADED_DATASETS_PATH": home / "datasets" / "downloads",
        "EXTRACTED_DATASETS_PATH": home / "datasets" / "downloads" / "extracted",
        "HF_UPDATE_DOWNLOAD_COUNTS": False,
    }
    for name in DATASETS_CONFIG:
        monkeypatch.setattr(datasets.config, name, config[name])
    _http.close_session()  # the next request builds a client that reads the proxy variables set above
