"""Write the variants of one input: PNGs, perturbed design files and the `variants.jsonl` manifest.

Layout of the output folder: `<stem>_<aspect>_<NN>.png` per variant, `<stem>_<aspect>_<NN>.json` beside
it for font/graphics variants of a design (the perturbed design, paths relative to the folder), and
`variants.jsonl` with one record per variant for every input and aspect written there. Every file is
written to a temporary name and renamed, so a killed run leaves no half-written file; a rerun with the same
arguments rewrites identical bytes, and files of an earlier run of the same stem and aspect that the new
run does not produce are removed.

The variants are drawn from an effective seed that mixes --seed with the input's SHA-256, so different
inputs get different variants under one --seed, while the same input bytes and seed always give the same
ones (a renamed or copied file too; an edited file gets new ones). Both seeds are recorded.

Two different input files with the same stem (d1/photo.png, d2/photo.jpg) would write the same file names:
when the manifest already holds variants of that stem and aspect from a file with other content, the run is
refused unless `replace` is set (then the new input's variants replace the old ones).

Every name that becomes a file name is checked where it enters: the input's stem, and the stem, image and design
of every record of an existing manifest (a record naming `../x` is refused, never followed), and every file is
resolved inside the output folder. An input image is decoded fully before anything is written, so a truncated
file or a decompression bomb is one error naming it.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

from PIL import Image, ImageOps

from generation.perturb.design import Design, design_json, load_design
from generation.perturb.raster import to_rgb
from generation.perturb.variants import ASPECTS, make_variant, sample_variants
from hvcu_tasks.core.names import UnsafeNameError, check_name
from hvcu_tasks.data import jsonio
from hvcu_tasks.data.files import ImageError, check_folder, inside, make_folder, open_image, write_atomic

MANIFEST = "variants.jsonl"


def load_source(path: Path) -> Design | Image.Image:
    """Read an input: a design for `.json` files, otherwise a raster image (as RGB)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a folder; give one image file or design .json")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: input file not found")
    if path.suffix.lower() == ".json":
        return load_design(path)
    try:
        image = open_image(path)
    except ImageError as exc:
        if exc.unknown_format:
            raise ValueError(f"{path}: not an image PIL can read, nor a design .json") from None
        raise
    with image:
        return to_rgb(ImageOps.exif_transpose(image))


def output_stem(stem: str, aspect: str, index: int) -> str:
    """Return the file name (without suffix) of variant `index`."""
    return f"{stem}_{aspect}_{index:02d}"


def png_bytes(image: Image.Image) -> bytes:
    """Encode an image as PNG bytes (deterministic for equal pixels)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _check_record(record: Any, where: str) -> dict[str, Any]:
    """Return a manifest record whose names are safe file names in the output folder, or raise naming the field."""
    if not isinstance(record, dict) or not all(k in record for k in ("stem", "aspect", "index", "image")):
        raise ValueError(f"{where}: a variant record needs stem, aspect, index and image")
    if record["aspect"] not in ASPECTS:
        raise ValueError(f"{where}: field 'aspect': must be one of {', '.join(ASPECTS)}, got {record['aspect']!r}")
    index = record["index"]
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"{where}: field 'index': must be an integer >= 0, got {index!r}")
    for field in ("stem", "image", "design"):
        if field != "design" or record.get("design") is not None:
            try:
                check_name(record[field], f"field {field!r}:")
            except UnsafeNameError as exc:
                raise ValueError(
                    f"{where}: {exc}; hvcu perturb never writes such a name: fix or remove the line"
                ) from None
    return record


def read_manifest(path: Path) -> list[dict[str, Any]]:
    """Read an existing manifest (missing file: empty); each line must be a record whose names are safe file names."""
    if not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            record = jsonio.loads(line, source=path, line=number)
        except jsonio.JsonReadError as exc:
            raise ValueError(f"{path}: line {number}: not JSON ({exc.reason})") from None
        records.append(_check_record(record, f"{path}: line {number}"))
    return records


def effective_seed(seed: int, source_sha256: str) -> int:
    """Return the sampling seed of one input: --seed mixed with the input's SHA-256 (below 2^48, JSON-safe)."""
    mixed = hashlib.sha256(f"hvcu-perturb:{seed}:{source_sha256}".encode()).digest()
    return int.from_bytes(mixed[:6], "big")


def _check_stem_clash(
    manifest: Path, old: list[dict[str, Any]], stem: str, aspect: str, source: Path, digest: str
) -> None:
    """Refuse to overwrite variants that the manifest says came from a different file with the same stem."""
    for r in old:
        if (r["stem"], r["aspect"]) == (stem, aspect) and r.get("source_sha256") != digest:
            theirs = str(r.get("source_sha256") or "unknown")[:12]
            raise ValueError(
                f"{manifest}: the {aspect} variants of stem {stem!r} come from {r.get('source')} (sha256 {theirs}), "
                f"not from {source.as_posix()} (sha256 {digest[:12]}); both would write {stem}_{aspect}_NN files. "
                "Rename one input or use another --out; pass --replace to replace the old variants"
            )


def perturb(
    source_path: Path, aspect: str, n: int, seed: int, out: Path, replace: bool = False
) -> list[dict[str, Any]]:
    """Make `n` variants of one input for one aspect into folder `out`; return their manifest records."""
    source_path, out = Path(source_path), check_folder(out)
    stem = check_name(source_path.stem, f"input {str(source_path)!r}: its file stem (it names the outputs)")
    source = load_source(source_path)
    design = source if isinstance(source, Design) else None
    digest = hashlib.sha256(source_path.read_bytes()).hexdigest()
    mixed = effective_seed(seed, digest)
    try:
        variants = sample_variants(aspect, n, mixed, design)
    except ValueError as exc:
        raise ValueError(f"{source_path}: {exc}") from exc
    manifest = out / MANIFEST
    old = read_manifest(manifest)
    if not replace:
        _check_stem_clash(manifest, old, stem, aspect, source_path, digest)
    names = [check_name(output_stem(stem, aspect, i), "output name") for i in range(len(variants))]
    out = make_folder(out)
    records = []
    for index, variant in enumerate(variants):
        image, changed = make_variant(variant, source)
        name = names[index]
        write_atomic(inside(out, f"{name}.png"), png_bytes(image))
        if changed is not None:
            write_atomic(inside(out, f"{name}.json"), design_json(changed, out))
        records.append(
            {
                "stem": stem,
                "aspect": aspect,
                "index": index,
                "factor": variant.factor,
                "params": variant.params,
                "seed": seed,
                "effective_seed": mixed,
                "source": source_path.as_posix(),
                "source_sha256": digest,
                "image": f"{name}.png",
                "design": f"{name}.json" if changed is not None else None,
            }
        )
    kept = [r for r in old if (r["stem"], r["aspect"]) != (stem, aspect)]
    merged = sorted(kept + records, key=lambda r: (str(r["stem"]), str(r["aspect"]), int(r["index"])))
    write_atomic(inside(out, MANIFEST), "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in merged))
    produced = {name for r in records for name in (r["image"], r["design"]) if name}
    for r in old:
        if (r["stem"], r["aspect"]) == (stem, aspect):
            for name in (r.get("image"), r.get("design")):
                if name and name not in produced:
                    inside(out, name).unlink(missing_ok=True)  # names checked by read_manifest
    return records
