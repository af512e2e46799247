"""Run MCTS (or the direct baseline) over many images: async, sharded, resumable, written atomically.

Layout of OUT: `images/<key>.json` one finished image each (written by rename, so never half-written),
`cache.sqlite` every model reply (a rerun or resume re-issues no stored call), and, rebuilt from the
per-image files at the end of every run, `chains.jsonl` and `stats.json`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from generation.client import ChatClient, ClientConfig, image_data_url
from generation.jobs import in_shard, load_settings, read_records, run_jobs, write_atomic
from generation.mcts import MCTSConfig, Tree, search
from generation.policy import ModelPolicy, call_seed, prompt, user_message
from generation.replies import ReplyError, parse_json_reply, text_fields
from hvcu_tasks.data import jsonio
from hvcu_tasks.data.files import ImageError, check_image

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp"}


def list_images(source: Path) -> list[Path]:
    """Return the images of a folder (recursive, sorted) or of a text file listing one path per line.

    An empty folder or list, or a listed path that is not a file, is an error naming the source (and line).
    """
    source = Path(source)
    kinds = ", ".join(sorted(IMAGE_SUFFIXES))
    if source.is_dir():
        found = sorted(p for p in source.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
        if not found:
            raise ValueError(f"{source}: no images ({kinds}) in this folder")
        return found
    if not source.is_file():
        raise FileNotFoundError(f"{source}: no such folder or list file")
    found = []
    for number, raw in enumerate(source.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not Path(line).is_file():
            raise ValueError(f"{source}:{number}: {line}: no such image file")
        found.append(Path(line))
    if not found:
        raise ValueError(f"{source}: no images listed (one path per line; '#' starts a comment)")
    return found


def image_key(path: Path) -> str:
    """Return the stable id of an image: a hash of its bytes, so every path spelling and machine agrees."""
    return hashlib.sha1(Path(path).read_bytes()).hexdigest()[:16]


def check_images(images: Sequence[Path]) -> None:
    """Decode every image fully before any paid call; raise ValueError listing each unreadable one."""
    problems = []
    for image in images:
        try:
            check_image(image)
        except ImageError as exc:
            problems.append(str(exc))
    if problems:
        shown = "\n".join(problems[:20]) + (f"\n... and {len(problems) - 20} more" if len(problems) > 20 else "")
        raise ValueError(f"{len(problems)} image(s) cannot be used; nothing was sent:\n{shown}")


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


def direct_levels(reply: str) -> list[dict[str, str]]:
    """Return the three (question, answer) levels of a direct reply; raise ReplyError when it has not got them."""
    levels = parse_json_reply(reply, ("levels",))["levels"]
    if not isinstance(levels, list) or len(levels) != 3 or not all(isinstance(lv, dict) for lv in levels):
        raise ReplyError(f"direct reply needs three levels with question and answer: {reply[:200]!r}")
    return [text_fields(lv, ("question", "answer")) for lv in levels]


async def direct_record(client: ChatClient, image: Path, key: str, seed: int) -> dict[str, Any]:
    """Three levels in one prompt, no validation between them (the paper's direct baseline).

    A reply the model wrote that holds no three levels makes the image 'rejected' (with the reason); a failed
    call raises, so the image is recorded failed and retried by the next run.
    """
    try:
        reply = await client.complete(
            user_message(prompt("direct").format(), image_data_url(image)),
            temperature=0.8,
            max_tokens=1024,
            seed=call_seed(key, "direct", seed),
            accept=direct_levels,
        )
        levels = direct_levels(reply)
    except ReplyError as exc:
        return {"image": str(image), "key": key, "status": "rejected", "error": str(exc), "chains": []}
    chain = {
        "image": str(image),
        "method": "direct",
        "path_score": None,
        "levels": [
            {"level": i + 1, "question": lv["question"], "answer": lv["answer"], "score": None}
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


def _flat(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Return nested settings as one level of dotted names."""
    flat: dict[str, Any] = {}
    for name, value in settings.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


def check_identity(out: Path, identity: dict[str, Any]) -> None:
    """Record what OUT is made with (method, model, seed, search settings) or refuse a run that differs.

    Finished images are never redone, so a second run with other settings would silently mix two datasets.
    """
    identity = _flat(jsonio.loads(json.dumps(identity)))  # tuples as lists, nested settings as "search.x"
    path = Path(out) / "run.json"
    if not path.exists():
        Path(out).mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(identity, indent=2, sort_keys=True) + "\n")
        return
    try:
        recorded = jsonio.read_json(path)
    except jsonio.JsonReadError as exc:
        raise ValueError(f"{path}: damaged ({exc.reason}); it records how {out} was made") from exc
    recorded = _flat(recorded)
    differs = [
        f"{name} {recorded.get(name)!r} -> {identity.get(name)!r}"
        for name in sorted(set(recorded) | set(identity))
        if recorded.get(name) != identity.get(name)
    ]
    if differs:
        raise ValueError(
            f"{out} was made with other settings ({'; '.join(differs)}): its finished images would be mixed "
            "with new ones. Use another --out, or the settings recorded in run.json."
        )


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
    config = config or MCTSConfig()
    search_settings = dataclasses.asdict(config) if method == "mcts" else None
    check_identity(out, {"method": method, "model": client_config.model, "seed": seed, "search": search_settings})
    keyed: dict[str, Path] = {}
    for path in images:  # one image under two names (or path spellings) is one item: the first name is kept
        keyed.setdefault(image_key(path), path)
    todo = [(key, path) for key, path in keyed.items() if in_shard(key, shard)]
    check_images([path for _key, path in todo])
    counts = [0, 0]  # nodes admitted, candidates rejected (for the progress bar)

    async def work(client: ChatClient, key: str, image: Path) -> dict[str, Any]:
        if method == "direct":
            return await direct_record(client, image, key, seed)
        policy = ModelPolicy(client, image_data_url(image), key, seed)
        return mcts_record(image, key, await search(policy, config))

    def postfix(record: dict[str, Any]) -> dict[str, Any]:
        counts[0] += record.get("accepted", 0)
        counts[1] += sum(record.get("rejections", {}).values())
        return {"accept": f"{counts[0] / sum(counts):.0%}" if sum(counts) else "-"}

    job = await run_jobs(
        todo,
        out / "images",
        client_config,
        work,
        final=("done", "rejected"),
        desc=f"{method} images",
        progress=progress,
        postfix=postfix,
        describe=lambda image: {"image": str(image)},
    )
    stats = assemble(out)
    stats["method"] = method
    stats["images_not_attempted"] = job.not_attempted
    stats["endpoint_down"] = job.endpoint_down
    stats["usage_this_run"] = job.usage.to_dict()
    stats["model_replies_stored"] = job.replies_stored
    stats["calls_per_chain"] = job.replies_stored / stats["chains"] if stats["chains"] else None
    write_atomic(out / "stats.json", json.dumps(stats, indent=2))
    return stats


def summary_line(stats: dict[str, Any], out: Path) -> str:
    """Return the one-line outcome of a run: images done / rejected / failed / not attempted, chains."""
    parts = [f"{stats['images_done']} done"]
    if stats.get("images_rejected"):
        parts.append(f"{stats['images_rejected']} rejected")
    parts.append(f"{stats['images_failed']} failed")
    if stats.get("images_not_attempted"):
        parts.append(f"{stats['images_not_attempted']} not attempted")
    line = f"{stats.get('method', 'synthesis')}: images {', '.join(parts)}; {stats['chains']} chains in {out}"
    limited = (stats.get("usage_this_run") or {}).get("rate_limited", 0)
    if limited:
        line += f"; {limited} rate-limited answer(s) (HTTP 429)"
    if stats["images_failed"] or stats.get("images_not_attempted"):
        line += " (rerun the same command to retry the failed images)"
    return line


def assemble(out: Path) -> dict[str, Any]:
    """Rebuild chains.jsonl from every per-image file in OUT (in key order); return the summary statistics."""
    records = list(read_records(Path(out) / "images").values())
    lines = [json.dumps(c, ensure_ascii=False) for r in records if r["status"] == "done" for c in r["chains"]]
    write_atomic(Path(out) / "chains.jsonl", "".join(line + "\n" for line in lines))
    rejected = sum(sum(r.get("rejections", {}).values()) for r in records)
    accepted = sum(r.get("accepted", 0) for r in records if r["status"] == "done")
    return {
        "images_done": sum(r["status"] == "done" for r in records),
        "images_rejected": sum(r["status"] == "rejected" for r in records),
        "images_failed": sum(r["status"] == "failed" for r in records),
        "failed": {r.get("image", r["key"]): r["error"] for r in records if r["status"] == "failed"},
        "rejected": {r.get("image", r["key"]): r["error"] for r in records if r["status"] == "rejected"},
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
        if not (Path(shard) / "images").is_dir():
            raise ValueError(f"{shard}: not an `hvcu mcts` output folder (no images/ in it)")
        identity = Path(shard) / "run.json"
        if identity.exists():
            check_identity(out, jsonio.read_json(identity))
        for f in sorted((Path(shard) / "images").glob("*.json")):
            target = out / "images" / f.name
            if target.exists() and target.read_text() != f.read_text():
                raise ValueError(f"{f.name} differs between shards: were the shards run with different --shard?")
            write_atomic(target, f.read_text())
    stats = assemble(out)
    write_atomic(out / "stats.json", json.dumps(stats, indent=2))
    return stats
