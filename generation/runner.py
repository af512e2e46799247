"""Run MCTS (or the direct baseline) over many images: async, sharded, resumable, written atomically.

Layout of OUT: `images/<key>.json` one finished image each (written by rename, so never half-written),
`cache.sqlite` every model reply (a rerun or resume re-issues no stored call), and, rebuilt from the
per-image files at the end of every run, `chains.jsonl` and `stats.json`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from generation.client import ChatClient, ClientConfig, image_data_url
from generation.jobs import in_shard, load_settings, path_key, run_jobs, write_atomic
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
    return path_key(path)


def load_config(path: Path | None) -> MCTSConfig:
    """Read an MCTSConfig from a JSON/YAML file; unknown keys are errors."""
    return load_settings(path, MCTSConfig)


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
    todo = [(image_key(p), p) for p in images if in_shard(image_key(p), shard)]
    counts = [0, 0]  # nodes admitted, candidates rejected (for the progress bar)

    async def work(client: ChatClient, key: str, image: Path) -> dict[str, Any]:
        if method == "direct":
            return await direct_record(client, image, key, seed)
        policy = ModelPolicy(client, image_data_url(image), key, seed)
        return mcts_record(image, key, await search(policy, config or MCTSConfig()))

    def postfix(record: dict[str, Any]) -> dict[str, Any]:
        counts[0] += record.get("accepted", 0)
        counts[1] += sum(record.get("rejections", {}).values())
        return {"accept": f"{counts[0] / sum(counts):.0%}" if sum(counts) else "-"}

    job = await run_jobs(
        todo,
        out / "images",
        client_config,
        work,
        desc=f"{method} images",
        progress=progress,
        postfix=postfix,
        describe=lambda image: {"image": str(image)},
    )
    stats = assemble(out, [k for k, _p in todo])
    stats["usage_this_run"] = job.usage.to_dict()
    stats["model_replies_stored"] = job.replies_stored
    stats["calls_per_chain"] = job.replies_stored / stats["chains"] if stats["chains"] else None
    write_atomic(out / "stats.json", json.dumps(stats, indent=2))
    return stats


def assemble(out: Path, keys: Iterable[str] | None = None) -> dict[str, Any]:
    """Rebuild chains.jsonl from the per-image files (in key order) and return the summary statistics."""
    files = sorted((Path(out) / "images").glob("*.json"))
    wanted = set(keys) if keys is not None else None
    records = [json.loads(f.read_text()) for f in files if wanted is None or f.stem in wanted]
    lines = [json.dumps(c, ensure_ascii=False) for r in records if r["status"] == "done" for c in r["chains"]]
    write_atomic(Path(out) / "chains.jsonl", "".join(line + "\n" for line in lines))
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
            write_atomic(target, f.read_text())
    stats = assemble(out)
    write_atomic(out / "stats.json", json.dumps(stats, indent=2))
    return stats
