"""`hvcu build-bench`: run the construction over a manifest, then write the benchmark in the authors' layout.

OUT holds `items/<key>.json` (one finished item each; resume skips them), `cache.sqlite` (every model
reply), and, rebuilt from the item files at the end of every run: `<Family-Stem>.json` +
`Image/<Family-Stem>/<id>.<ext>` (the benchmark, loadable by `hvcu data validate OUT` and the lmms-eval
tasks via HVCU_BENCH_DATA=OUT), `rejected.jsonl` (items that never passed, with every attempt) and
`build_report.json` (counts, answer-position distribution, attempts, usage).
"""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from generation.bench.build import BuildConfig, build_item
from generation.bench.manifest import ManifestRow
from generation.client import ChatClient, ClientConfig, image_data_url
from generation.jobs import path_key, read_records, run_jobs, write_atomic
from hvcu_tasks.families import FAMILIES, LEVELS, OPTION_KEYS
from hvcu_tasks.loaders import IMAGE_EXTENSIONS


def balanced_positions(n: int, seed: int, salt: str) -> list[str]:
    """Return n answer letters, each of A-D used n//4 or n//4+1 times, in a seeded order."""
    rng = random.Random(f"{seed}:{salt}")
    letters: list[str] = []
    while len(letters) < n:
        block = list(OPTION_KEYS)
        rng.shuffle(block)
        letters.extend(block)
    return letters[:n]


def to_benchmark_item(record: dict[str, Any], answers: Sequence[str], seed: int, model: str) -> dict[str, Any]:
    """Turn a finished build record into an authors'-format item with the given correct letters per level."""
    qa_levels = []
    for level, letter in zip(record["levels"], answers, strict=True):
        rng = random.Random(f"{seed}:{record['id']}:{level['level']}")
        distractors = list(level["distractors"])
        rng.shuffle(distractors)
        texts = distractors[:]
        texts.insert(OPTION_KEYS.index(letter), level["answer"])
        qa_levels.append(
            {
                "level": level["level"],
                "question": level["question"],
                "options": [{"option_key": k, "option_text": t} for k, t in zip(OPTION_KEYS, texts, strict=True)],
                "correct_answer_key": letter,
            }
        )
    return {
        "id": record["id"],
        "aspect": record["aspect"],
        "anchor": record.get("anchor"),
        "qa_levels": qa_levels,
        "generation": {"model": model, "source_image": record["image"], "attempts": len(record["attempts"])},
    }


def _copy_image(src: Path, target_dir: Path, sid: str) -> None:
    """Copy an item's image to `<target_dir>/<id><ext>`, converting to PNG when the loader would not find it."""
    target_dir.mkdir(parents=True, exist_ok=True)
    suffix = src.suffix.lower()
    if suffix in IMAGE_EXTENSIONS:
        shutil.copyfile(src, target_dir / f"{sid}{suffix}")
        return
    from PIL import Image

    with Image.open(src) as img:
        img.convert("RGB").save(target_dir / f"{sid}.png")


def assemble(out: Path, seed: int = 0, model: str = "", keys: set[str] | None = None) -> dict[str, Any]:
    """Write the benchmark files, rejected.jsonl and the report from OUT/items; return the report."""
    out = Path(out)
    records = [r for k, r in read_records(out / "items").items() if keys is None or k in keys]
    done = sorted((r for r in records if r["status"] == "done"), key=lambda r: r["id"])
    positions: dict[str, dict[int, Counter[str]]] = {}
    for family, (_split, stem, _short) in FAMILIES.items():
        mine = [r for r in done if r["family"] == family]
        json_path, image_dir = out / f"{stem}.json", out / "Image" / stem
        if image_dir.exists():
            shutil.rmtree(image_dir)  # rebuilt from the item files, so nothing stale survives
        if not mine:
            json_path.unlink(missing_ok=True)
            continue
        letters = {lv: balanced_positions(len(mine), seed, f"{family}:{lv}") for lv in LEVELS}
        items = [
            to_benchmark_item(r, [letters[lv][i] for lv in LEVELS], seed, model or r.get("model", ""))
            for i, r in enumerate(mine)
        ]
        for r in mine:
            _copy_image(Path(r["image"]), image_dir, r["id"])
        write_atomic(json_path, json.dumps(items, indent=2, ensure_ascii=False) + "\n")
        positions[family] = {lv: Counter(letters[lv]) for lv in LEVELS}
    rejected = sorted((r for r in records if r["status"] == "rejected"), key=lambda r: r["id"])
    write_atomic(out / "rejected.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rejected))
    return report(records, positions)


def report(records: list[dict[str, Any]], positions: dict[str, dict[int, Counter[str]]]) -> dict[str, Any]:
    """Summarise a build: items per status and family, attempts per level, answer-position distribution."""
    attempts: dict[int, Counter[int]] = {lv: Counter() for lv in LEVELS}
    for r in records:
        per_level = Counter(a["level"] for a in r.get("attempts", []))
        for lv, n in per_level.items():
            attempts[lv][n] += 1
    overall = {lv: sum((positions[f][lv] for f in positions), Counter()) for lv in LEVELS}
    return {
        "items": len(records),
        "emitted": sum(r["status"] == "done" for r in records),
        "rejected": {
            r["id"]: {"level": r["rejected_at"], "reasons": r["reasons"]} for r in records if r["status"] == "rejected"
        },
        "failed": {r.get("id", r["key"]): r["error"] for r in records if r["status"] == "failed"},
        "emitted_per_family": dict(Counter(r["family"] for r in records if r["status"] == "done")),
        "attempts_per_level": {f"L{lv}": {str(k): v for k, v in sorted(c.items())} for lv, c in attempts.items()},
        "answer_positions": {
            "all": {f"L{lv}": {k: overall[lv][k] for k in OPTION_KEYS} for lv in LEVELS},
            **{f: {f"L{lv}": {k: c[lv][k] for k in OPTION_KEYS} for lv in LEVELS} for f, c in positions.items()},
        },
    }


async def build_bench(
    rows: Sequence[ManifestRow],
    out: Path,
    client_config: ClientConfig,
    config: BuildConfig | None = None,
    seed: int = 0,
    progress: bool = True,
) -> dict[str, Any]:
    """Build every manifest row not already finished in OUT; write the benchmark and the report."""
    out = Path(out)
    config = config or BuildConfig()
    # Keyed by the whole row: an item whose image, aspect or anchor changed in the manifest is built anew.
    todo = [(path_key(f"{row.id}|{row.image}|{row.family}|{row.aspect}|{row.anchor}"), row) for row in rows]

    async def work(client: ChatClient, key: str, row: ManifestRow) -> dict[str, Any]:
        record = await build_item(client, row, config, image_data_url(row.image), seed)
        return {**record, "key": key, "model": client_config.model}

    def postfix(record: dict[str, Any]) -> dict[str, Any]:
        counts[record["status"]] += 1
        return {"done": counts["done"], "rejected": counts["rejected"]}

    counts: Counter[str] = Counter()
    job = await run_jobs(
        todo,
        out / "items",
        client_config,
        work,
        final=("done", "rejected"),
        desc="build-bench items",
        progress=progress,
        postfix=postfix,
        describe=lambda row: {"id": row.id, "image": str(row.image), "family": row.family},
    )
    summary = assemble(out, seed, client_config.model, {k for k, _row in todo})
    summary["usage_this_run"] = job.usage.to_dict()
    summary["model_replies_stored"] = job.replies_stored
    summary["calls_per_item"] = job.replies_stored / summary["items"] if summary["items"] else None
    write_atomic(out / "build_report.json", json.dumps(summary, indent=2) + "\n")
    return summary
