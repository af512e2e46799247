"""Regenerate the bundled smoke sample (images and JSON) deterministically: `python tests/tools/build_smoke.py`.

The chains' texts are data (smoke_chains.tsv beside this file); the images are drawn here, one per aspect.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable
from pathlib import Path

from PIL import Image, ImageDraw

from hvcu_tasks.core.families import ASPECTS, FAMILIES
from hvcu_tasks.dev.smoke import SMOKE_DIR

SIZE = 96
Draw = Callable[[ImageDraw.ImageDraw], None]


def _heart(d: ImageDraw.ImageDraw, x: int, y: int, r: int, fill: str) -> None:
    """Draw a simple heart centred at (x, y)."""
    d.ellipse([x - r, y - r, x, y], fill=fill)
    d.ellipse([x, y - r, x + r, y], fill=fill)
    d.polygon([(x - r, y - r // 2), (x + r, y - r // 2), (x, y + r)], fill=fill)


def _metaphor(d: ImageDraw.ImageDraw) -> None:
    _heart(d, 48, 46, 18, "#d22")
    for x in range(18, 80, 12):  # a cage of vertical bars
        d.line([(x, 14), (x, 82)], fill="#555555", width=3)
    d.line([(14, 14), (82, 14)], fill="#555555", width=3)
    d.line([(14, 82), (82, 82)], fill="#555555", width=3)


def _symbolism(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#cfe8ff")
    d.ellipse([30, 30, 66, 58], fill="white")
    d.polygon([(60, 40), (84, 34), (66, 50)], fill="#3a7d2c")  # olive branch in the beak


def _contrast(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, 47, SIZE], fill="#2b2b2b")
    d.rectangle([48, 0, SIZE, SIZE], fill="#f4e27a")
    d.ellipse([12, 40, 36, 64], fill="#777777")
    d.ellipse([60, 40, 84, 64], fill="#ff9900")


def _exaggeration(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([10, 70, 86, 74], fill="#333333")
    d.ellipse([36, 6, 60, 30], fill="#e0b080")
    d.rectangle([44, 30, 52, 70], fill="#e0b080")
    d.rectangle([20, 40, 76, 46], fill="#e0b080")  # enormous arms


def _dislocation(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 60, SIZE, SIZE], fill="#1f5fbf")  # sea
    d.polygon([(30, 60), (48, 20), (66, 60)], fill="#8a6d3b")  # tree trunk shape
    d.ellipse([26, 8, 70, 40], fill="#2e8b57")  # a tree growing out of the sea


def _color(d: ImageDraw.ImageDraw) -> None:
    for i in range(SIZE):
        d.line([(i, 0), (i, SIZE)], fill=(255, 120 + i // 2, 40))


def _composition(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#f5f5f0")
    d.ellipse([70, 70, 90, 90], fill="#222222")  # tiny subject pushed into a corner


def _font(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="white")
    d.text((8, 20), "SALE", fill="black", font_size=34)
    d.text((8, 64), "ends today", fill="#888888", font_size=10)


def _graphics(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="white")
    for i in range(6, SIZE, 10):
        d.line([(i, 6), (SIZE - i, SIZE - 6)], fill="#0a0a8a", width=4)


def _joy(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#fff6cc")
    d.ellipse([18, 18, 78, 78], fill="#ffd23f")
    d.ellipse([34, 36, 40, 42], fill="black")
    d.ellipse([56, 36, 62, 42], fill="black")
    d.arc([32, 40, 64, 66], start=20, end=160, fill="black", width=3)


def _affection(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#ffe4ec")
    d.ellipse([16, 30, 44, 58], fill="#c08060")
    d.ellipse([52, 30, 80, 58], fill="#a06040")
    _heart(d, 48, 22, 8, "#e0306a")


def _wonder(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#0b1030")
    for x, y in [(10, 12), (30, 40), (70, 20), (85, 60), (50, 8), (20, 75), (60, 50)]:
        d.ellipse([x, y, x + 3, y + 3], fill="white")
    d.polygon([(0, 96), (30, 60), (60, 96)], fill="#1a1a1a")


def _anger(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#ffdddd")
    d.ellipse([18, 18, 78, 78], fill="#e53935")
    d.line([(30, 32), (44, 40)], fill="black", width=3)
    d.line([(66, 32), (52, 40)], fill="black", width=3)
    d.arc([34, 56, 62, 76], start=200, end=340, fill="black", width=3)


def _fear(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#101010")
    d.polygon([(40, 96), (48, 30), (56, 96)], fill="#3a3a3a")  # long shadow
    d.ellipse([44, 70, 52, 78], fill="#dddddd")  # small figure


def _sadness(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#9aa5b1")
    for x in range(4, SIZE, 9):
        d.line([(x, 0), (x - 6, 30)], fill="#5c6b7a", width=1)
    d.ellipse([36, 50, 60, 74], fill="#6d7b8a")
    d.ellipse([44, 58, 48, 66], fill="#2c5aa0")  # a tear


DRAWINGS: dict[str, Draw] = {aspect: globals()[f"_{aspect}"] for aspects in ASPECTS.values() for aspect in aspects}
"""The image of each aspect's one smoke chain: the function `_<aspect>` above."""

CHAINS = Path(__file__).resolve().parent / "smoke_chains.tsv"
"""The chains' texts, one level a row: id, family, aspect, level, question, options A-D and the answer key."""
COLUMNS = ("id", "family", "aspect", "level", "question", "A", "B", "C", "D", "answer")
NOTE = "SMOKE SAMPLE for offline tests, not HVCU-Bench data"


def _chains() -> dict[str, tuple[str, dict]]:
    """Return id -> (family, authors'-format record) of every chain in CHAINS, or raise ValueError naming the field."""
    chains: dict[str, tuple[str, dict]] = {}
    with CHAINS.open(encoding="utf-8", newline="") as rows:
        for line, row in enumerate(csv.DictReader(rows, delimiter="\t", quoting=csv.QUOTE_NONE), start=2):
            where = f"{CHAINS}:{line}: chain {row.get('id')}"
            missing = [column for column in COLUMNS if not row.get(column)]
            if missing:
                raise ValueError(f"{where}: field {missing[0]}: empty or missing")
            if row["family"] not in FAMILIES:
                raise ValueError(f"{where}: field family: {row['family']!r} is not one of {list(FAMILIES)}")
            if row["aspect"] not in DRAWINGS:
                raise ValueError(f"{where}: field aspect: {row['aspect']!r} has no drawing in DRAWINGS")
            record = {"id": row["id"], "aspect": row["aspect"], "note": NOTE, "qa_levels": []}
            family, record = chains.setdefault(row["id"], (row["family"], record))
            if row["level"] != str(len(record["qa_levels"]) + 1):
                raise ValueError(f"{where}: field level: {row['level']!r}, expected {len(record['qa_levels']) + 1}")
            record["qa_levels"].append(
                {
                    "level": int(row["level"]),
                    "question": row["question"],
                    "options": [{"option_key": key, "option_text": row[key]} for key in "ABCD"],
                    "correct_answer_key": row["answer"],
                }
            )
    return chains


def build(out: Path = SMOKE_DIR) -> None:
    """Write the smoke sample's three family JSON files and PNG images under `out`."""
    records: dict[str, list[dict]] = {f: [] for f in FAMILIES}
    for sid, (family, record) in _chains().items():
        img = Image.new("RGB", (SIZE, SIZE), "white")
        DRAWINGS[record["aspect"]](ImageDraw.Draw(img))
        img_dir = out / "Image" / FAMILIES[family][1]
        img_dir.mkdir(parents=True, exist_ok=True)
        img.save(img_dir / f"{sid}.png", optimize=True)
        records[family].append(record)
    for family, items in records.items():
        text = json.dumps(items, indent=2, ensure_ascii=False) + "\n"
        (out / f"{FAMILIES[family][1]}.json").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else SMOKE_DIR)
