"""Run MCTS (or the direct baseline) over many images: async, sharded, resumable, written atomically.

Layout of OUT: `images/<key>.json` one finished image each (written by rename, so never half-written),
`cache.sqlite` every model reply (a rerun or resume re-issues no stored call), and, rebuilt from the
per-image files at the end of every run, `chains.jsonl` and `stats.json`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from generation.client import ChatClient, ClientConfig, ResponseCache, image_data_url
from generation.mcts import MCTSConfig, Tree, search
from generation.policy import ModelPolicy, call_seed, prompt, user_message
from generation.replies import ReplyError, parse_json_reply

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp"}


def list_images(source: Path) -> list[Path]:
    """Return the images of a folder (recursive, sorted) or of a text file listing one path per line."""
    source = Path(source)
    if source.is_dir():
        return sorted(p for p in source.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if source.is_file():
        lines = [line.strip() for line in source.read_text(encoding="utf-8").splitlines()]
        return [Path(line) for line in lines if line and not line.startswith("#")]
    raise FileNotFoundError(f"{source}: no such folder or list file")


def image_key(path: Path) -> str:
    """Return the stable id of an image: a hash of its path as given."""
    return hashlib.sha1(str(path).encode()).hexdigest()[:16]


def parse_shard(text: str) -> tuple[int, int]:
    """Parse 'I/N' (0 <= I < N)."""
    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError as exc:
        raise ValueError(f"--shard must look like I/N, got {text!r}") from exc
    if not 0 <= index < count:
        raise ValueError(f"--shard {text}: need 0 <= I < N")
    return index, count


def in_shard(key: str, shard: tuple[int, int]) -> bool:
    """Whether an image belongs to shard I of N (by its key, so every machine agrees)."""
    return int(key, 16) % shard[1] == shard[0]


def load_config(path: Path | None) -> MCTSConfig:
    """Read an MCTSConfig from a JSON/YAML file; unknown keys are errors."""
    if path is None:
        return MCTSConfig()
    text = Path(path).read_text(encoding="utf-8")
    if Path(path).suffix in {".yaml", ".yml"}:
        import yaml

        data = yaml.safe_load(text) or {}
    else:
        data = json.loads(text)
    known = {f.name for f in dataclasses.fields(MCTSConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {unknown}; known: {sorted(known)}")
    if "capacity" in data:
        data["capacity"] = tuple(data["capacity"])
    return MCTSConfig(**data)


def _write_atomic(path: Path, text: str) -> None:
    """Write a file by rename, so a crash leaves either the old or the new content."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def mcts_record(image: Path, key: str, tree: Tree) -> dict[str, Any]:
    """Return the per-image result: selected chains, tree state and rejection counts."""
    chains = [
        {
            "image": str(image),
            "method": "mcts",
            "path_score": round(mean, 6),
            "levels": [{"level": n.level, "question": n.question, "answer": n.answer, "score": n.score} for n in path],
        }
        for mean, path in tree.top_paths()
    ]
    nodes = [dataclasses.asdict(n) for n in tree.nodes]
    return {
        "image": str(image),
        "key": key,
        "status": "done",
        "chains": chains,
        "tree": nodes,
        "rejections": tree.rejections,
        "accepted": len(tree.nodes) - 1,
    }


async def direct_record(client: ChatClient, image: Path, key: str, seed: int) -> dict[str, Any]:
    """Three levels in one prompt, no validation between them (the paper's direct baseline)."""
    reply = await client.complete(
        user_message(prompt("direct"), image_data_url(image)),
        temperature=0.8,
        max_tokens=1024,
        seed=call_seed(key, "direct", seed),
    )
    obj = parse_json_reply(reply, ("levels",))
    levels = obj["levels"]
    if (
        not isinstance(levels, list)
        or len(levels) != 3
        or not all(isinstance(lv, dict) and lv.get("question") and lv.get("answer") for lv in levels)
    ):
        raise ReplyError(f"direct reply needs three levels with question and answer: {reply[:200]!r}")
    chain = {
        "image": str(image),
        "method": "direct",
        "path_score": None,
        "levels": [
            {"level": i + 1, "question": str(lv["question"]), "answer": str(lv["answer"]), "score": None}
            for i, lv in enumerate(levels)
        ],
    }
    return {
        "image": str(image),
        "key": key,
        "status": "done",
        "chains": [chain],
        "tree": [],
        "rejections": {},
        "accepted": 3,
    }


async def run(
    images: Sequence[Path],
    out: Path,
    client_config: ClientConfig,
    config: MCTSConfig | None = None,
    method: str = "mcts",
    shard: tuple[int, int] = (0, 1),
    seed: int = 0,
    progress: bool = True,
) -> dict[str, Any]:
    """Process every image of the shard not already done in OUT, then rebuild chains.jsonl and stats.json."""
    out = Path(out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    cache = ResponseCache(out / "cache.sqlite")
    client = ChatClient(client_config, cache)
    todo = [(p, image_key(p)) for p in images if in_shard(image_key(p), shard)]
    done = {p.stem for p in (out / "images").glob("*.json") if json.loads(p.read_text())["status"] == "done"}
    pending = [(p, k) for p, k in todo if k not in done]
    # More images than call slots in flight: while one image waits on a generate->judge barrier, others
    # keep the endpoint busy; the client itself caps the calls at `concurrency`.
    slots = asyncio.Semaphore(4 * client_config.concurrency)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(pending), desc=f"{method} images", unit="img")

    accepted = [0, 0]  # nodes admitted, candidates rejected (for the progress bar)

    async def one(image: Path, key: str) -> None:
        async with slots:
            try:
                if method == "mcts":
                    policy = ModelPolicy(client, image_data_url(image), key, seed)
                    record = mcts_record(image, key, await search(policy, config or MCTSConfig()))
                else:
                    record = await direct_record(client, image, key, seed)
            except Exception as exc:  # one bad image must not stop the run; it is recorded and retried next time
                record = {"image": str(image), "key": key, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
            _write_atomic(out / "images" / f"{key}.json", json.dumps(record, ensure_ascii=False))
            accepted[0] += record.get("accepted", 0)
            accepted[1] += sum(record.get("rejections", {}).values())
            if bar is not None:
                bar.update(1)
                rate = accepted[0] / sum(accepted) if sum(accepted) else 0.0
                bar.set_postfix(calls=client.usage.calls, cached=client.usage.cached, accept=f"{rate:.0%}")

    try:
        await asyncio.gather(*(one(p, k) for p, k in pending))
    finally:
        stored = len(cache)
        await client.close()
        cache.close()
        if bar is not None:
            bar.close()
    stats = assemble(out, [k for _p, k in todo])
    stats["usage_this_run"] = client.usage.to_dict()
    stats["model_replies_stored"] = stored
    stats["calls_per_chain"] = stored / stats["chains"] if stats["chains"] else None
    _write_atomic(out / "stats.json", json.dumps(stats, indent=2))
    return stats


def assemble(out: Path, keys: Iterable[str] | None = None) -> dict[str, Any]:
    """Rebuild chains.jsonl from the per-image files (in key order) and return the summary statistics."""
    files = sorted((Path(out) / "images").glob("*.json"))
    wanted = set(keys) if keys is not None else None
    records = [json.loads(f.read_text()) for f in files if wanted is None or f.stem in wanted]
    lines = [json.dumps(c, ensure_ascii=False) for r in records if r["status"] == "done" for c in r["chains"]]
    _write_atomic(Path(out) / "chains.jsonl", "".join(line + "\n" for line in lines))
    rejected = sum(sum(r.get("rejections", {}).values()) for r in records)
    accepted = sum(r.get("accepted", 0) for r in records if r["status"] == "done")
    return {
        "images_done": sum(r["status"] == "done" for r in records),
        "images_failed": sum(r["status"] == "failed" for r in records),
        "failed": {r["image"]: r["error"] for r in records if r["status"] == "failed"},
        "chains": len(lines),
        "nodes_accepted": accepted,
        "candidates_rejected": rejected,
        "acceptance_rate": accepted / (accepted + rejected) if accepted + rejected else None,
    }


def merge(shards: Sequence[Path], out: Path) -> dict[str, Any]:
    """Combine shard outputs: copy every per-image file (one image is in one shard) and reassemble."""
    out = Path(out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    for shard in shards:
        for f in sorted((Path(shard) / "images").glob("*.json")):
            target = out / "images" / f.name
            if target.exists() and target.read_text() != f.read_text():
                raise ValueError(f"{f.name} differs between shards: were the shards run with different --shard?")
            _write_atomic(target, f.read_text())
    stats = assemble(out)
    _write_atomic(out / "stats.json", json.dumps(stats, indent=2))
    return stats
