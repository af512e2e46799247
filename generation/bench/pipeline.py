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
import re
import shutil
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from generation.audit.bench import SourceItem, bench_families, clear_leftovers, image_path, read_bench, swapped_in
from generation.bench.build import BuildConfig, build_item, calls_of
from generation.bench.manifest import ManifestRow
from generation.client import ChatClient, ClientConfig, image_data_url
from generation.jobs import path_key, read_records, run_jobs, write_atomic
from hvcu_tasks.core.families import FAMILIES, LEVELS, OPTION_KEYS
from hvcu_tasks.core.names import IMAGE_EXTENSIONS, check_name
from hvcu_tasks.data.files import atomic_path, inside


def assign_letters(n: int, seed: int, salt: str, start: Counter[str] | None = None) -> list[str]:
    """Return n correct-answer letters, each the least used so far (seeded tie-break), counting `start` as used.

    From zero the letters come in shuffled blocks of A-D, so counts differ by at most one; when extending a
    benchmark, `start` holds its letters and the new items even the totals out.
    """
    rng = random.Random(f"{seed}:{salt}")
    counts = Counter({k: (start or Counter())[k] for k in OPTION_KEYS})
    letters = []
    for _ in range(n):
        low = min(counts.values())
        choice = rng.choice([k for k in OPTION_KEYS if counts[k] == low])
        counts[choice] += 1
        letters.append(choice)
    return letters


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
    """Copy an item's image to `<target_dir>/<id><ext>` (atomically, never outside the folder); PNG when needed."""
    target_dir.mkdir(parents=True, exist_ok=True)
    suffix = src.suffix.lower()
    if suffix in IMAGE_EXTENSIONS:
        with atomic_path(inside(target_dir, f"{check_name(sid, 'item id')}{suffix}")) as tmp:
            shutil.copyfile(src, tmp)
        return
    from PIL import Image

    with Image.open(src) as img, atomic_path(inside(target_dir, f"{check_name(sid, 'item id')}.png")) as tmp:
        img.convert("RGB").save(tmp, format="PNG")


_LEFTOVER_FILE = re.compile(r"\..+\.\d+\.tmp")
"""A temporary file of `write_atomic` (`.<name>.<pid>.tmp`) that a killed run left in OUT."""


def _clear_leftovers(out: Path) -> None:
    """Remove what a killed run left half-written: temporary image folders and temporary files in OUT."""
    for family_stem in (stem for _split, stem, _short in FAMILIES.values()):
        clear_leftovers(out / "Image" / family_stem)
    if out.is_dir():
        for path in out.iterdir():
            if _LEFTOVER_FILE.fullmatch(path.name) and path.is_file():
                path.unlink()


def _write_family(
    json_path: Path, image_dir: Path, items: list[dict[str, Any]], images: list[tuple[Path, str]]
) -> None:
    """Replace a family's JSON and image folder so that at any moment the JSON finds its images.

    The images are copied into a temporary sibling folder and the JSON into a temporary file; only when both
    are complete are they renamed into place, back to back (the images first: a benchmark that only grows
    keeps every image its old JSON names). A failure before that leaves the previous family untouched.
    """
    # Exits innermost first: the image folder is swapped in, then the JSON is renamed over the old one.
    with atomic_path(json_path) as tmp, swapped_in(image_dir) as new:
        for src, sid in images:
            _copy_image(src, new, sid)
        tmp.write_text(json.dumps(items, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def read_base(base: Path) -> dict[str, list[SourceItem]]:
    """Return an existing benchmark's items (raw records, parsed samples) per family, after checking it loads."""
    base = Path(base)
    found: dict[str, list[SourceItem]] = {}
    for it in read_bench(base, bench_families(base)).values():
        found.setdefault(it.sample.family, []).append(it)
    return found


def assemble(
    out: Path,
    seed: int = 0,
    keys: set[str] | None = None,
    base: Path | None = None,
    kept: dict[str, list[SourceItem]] | None = None,
) -> dict[str, Any]:
    """Write the benchmark (`kept`, read from `base`, first and unchanged), rejected.jsonl and the report."""
    out = Path(out)
    _clear_leftovers(out)
    records = [r for k, r in read_records(out / "items").items() if keys is None or k in keys]
    done = sorted((r for r in records if r["status"] == "done"), key=lambda r: r["id"])
    kept = kept or {}
    positions: dict[str, dict[int, Counter[str]]] = {}
    for family, (_split, stem, _short) in FAMILIES.items():
        mine = [r for r in done if r["family"] == family]
        old = kept.get(family, [])
        clash = sorted({it.sample.id for it in old} & {r["id"] for r in mine})
        if clash:
            raise ValueError(f"{base}: id(s) {clash} exist in the base benchmark; give the new rows other ids")
        start = {lv: Counter(q.answer for it in old for q in it.sample.levels if q.level == lv) for lv in LEVELS}
        letters = {lv: assign_letters(len(mine), seed, f"{family}:{lv}", start[lv]) for lv in LEVELS}
        new = [to_benchmark_item(r, [letters[lv][i] for lv in LEVELS], seed, r["model"]) for i, r in enumerate(mine)]
        items = [dict(it.record) for it in old] + new
        json_path, image_dir = out / f"{stem}.json", out / "Image" / stem
        if not items:  # no file rather than an empty one, which the benchmark validator refuses
            json_path.unlink(missing_ok=True)  # the JSON first: images without it are harmless
            shutil.rmtree(image_dir, ignore_errors=True)
            positions[family] = {lv: Counter() for lv in LEVELS}
            continue
        _write_family(
            json_path,
            image_dir,
            items,
            [(image_path(it.sample), it.sample.id) for it in old] + [(Path(r["image"]), r["id"]) for r in mine],
        )
        positions[family] = {lv: start[lv] + Counter(letters[lv]) for lv in LEVELS}
    rejected = sorted((r for r in records if r["status"] == "rejected"), key=lambda r: r["id"])
    write_atomic(out / "rejected.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rejected))
    summary = report(records, positions)
    summary["base_items"] = {f: len(v) for f, v in kept.items()}
    return summary


def report(records: list[dict[str, Any]], positions: dict[str, dict[int, Counter[str]]]) -> dict[str, Any]:
    """Summarise a build: items per status and family, attempts per level, answer-position distribution."""
    attempts: dict[int, Counter[int]] = {lv: Counter() for lv in LEVELS}
    for r in records:
        per_level = Counter(a["level"] for a in r.get("attempts", []))
        for lv, n in per_level.items():
            attempts[lv][n] += 1
    overall = {lv: sum((positions[f][lv] for f in positions), Counter()) for lv in LEVELS}
    built = [r for r in records if r["status"] in ("done", "rejected")]
    return {
        "items": len(records),
        "calls_per_item": sum(calls_of(r) for r in built) / len(built) if built else None,
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


def item_key(row: ManifestRow, model: str) -> str:
    """Return an item's resume key: its manifest row (image by content) and the model that builds it."""
    return path_key(f"{row.id}|{row.digest}|{row.family}|{row.aspect}|{row.anchor}|{model}")


def check_out(out: Path) -> None:
    """Refuse an output folder that holds a benchmark this tool did not build (it would be overwritten)."""
    out = Path(out)
    stems = [stem for _split, stem, _short in FAMILIES.values() if (out / f"{stem}.json").exists()]
    if stems and not (out / "items").is_dir():
        raise ValueError(
            f"{out} holds a benchmark ({', '.join(stems)}.json) that build-bench did not write: it would be "
            "replaced. Build into a new --out and pass the existing benchmark as --base to extend it."
        )


async def build_bench(
    rows: Sequence[ManifestRow],
    out: Path,
    client_config: ClientConfig,
    config: BuildConfig | None = None,
    seed: int = 0,
    progress: bool = True,
    base: Path | None = None,
    retry_rejected: bool = False,
) -> dict[str, Any]:
    """Build every manifest row not already finished in OUT; write the benchmark (after `base`'s items) and report."""
    out = Path(out)
    check_out(out)
    kept = read_base(base) if base is not None else {}  # before any paid call: a broken base stops the run
    config = config or BuildConfig()
    # Keyed by the row and the model: an edited row, or another model, builds the item anew.
    todo = [(item_key(row, client_config.model), row) for row in rows]

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
        final=("done",) if retry_rejected else ("done", "rejected"),
        desc="build-bench items",
        progress=progress,
        postfix=postfix,
        describe=lambda row: {"id": row.id, "image": str(row.image), "family": row.family},
    )
    summary = assemble(out, seed, {k for k, _row in todo}, base, kept)
    summary["not_attempted"] = job.not_attempted
    summary["endpoint_down"] = job.endpoint_down
    summary["usage_this_run"] = job.usage.to_dict()
    write_atomic(out / "build_report.json", json.dumps(summary, indent=2) + "\n")
    return summary
