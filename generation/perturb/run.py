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
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

from PIL import Image, ImageOps, UnidentifiedImageError

from generation.perturb.design import Design, design_json, load_design
from generation.perturb.raster import to_rgb
from generation.perturb.variants import make_variant, sample_variants

MANIFEST = "variants.jsonl"


def load_source(path: Path) -> Design | Image.Image:
    """Read an input: a design for `.json` files, otherwise a raster image (as RGB)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: input file not found")
    if path.suffix.lower() == ".json":
        return load_design(path)
    try:
        with Image.open(path) as image:
            return to_rgb(ImageOps.exif_transpose(image))
    except UnidentifiedImageError:
        raise ValueError(f"{path}: not an image PIL can read, nor a design .json") from None


def output_stem(stem: str, aspect: str, index: int) -> str:
    """Return the file name (without suffix) of variant `index`."""
    return f"{stem}_{aspect}_{index:02d}"


def png_bytes(image: Image.Image) -> bytes:
    """Encode an image as PNG bytes (deterministic for equal pixels)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def write_atomic(path: Path, data: bytes) -> None:
    """Write bytes to `path` through a temporary file in the same folder and a rename."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_manifest(path: Path) -> list[dict[str, Any]]:
    """Read an existing manifest (missing file: empty); each line must be a record with stem and aspect."""
    if not path.is_file():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {number}: not JSON ({exc})") from None
        if not isinstance(record, dict) or not all(k in record for k in ("stem", "aspect", "index", "image")):
            raise ValueError(f"{path}: line {number}: a variant record needs stem, aspect, index and image")
        records.append(record)
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
    source_path = Path(source_path)
    source = load_source(source_path)
    design = source if isinstance(source, Design) else None
    stem, digest = source_path.stem, hashlib.sha256(source_path.read_bytes()).hexdigest()
    mixed = effective_seed(seed, digest)
    try:
        variants = sample_variants(aspect, n, mixed, design)
    except ValueError as exc:
        raise ValueError(f"{source_path}: {exc}") from exc
    out = Path(out)
    manifest = out / MANIFEST
    old = read_manifest(manifest)
    if not replace:
        _check_stem_clash(manifest, old, stem, aspect, source_path, digest)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for index, variant in enumerate(variants):
        image, changed = make_variant(variant, source)
        name = output_stem(stem, aspect, index)
        write_atomic(out / f"{name}.png", png_bytes(image))
        if changed is not None:
            write_atomic(out / f"{name}.json", design_json(changed, out).encode("utf-8"))
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
    write_atomic(manifest, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in merged).encode("utf-8"))
    produced = {name for r in records for name in (r["image"], r["design"]) if name}
    for r in old:
        if (r["stem"], r["aspect"]) == (stem, aspect):
            for name in (r.get("image"), r.get("design")):
                if name and name not in produced and Path(name).name == name:
                    (out / name).unlink(missing_ok=True)
    return records
