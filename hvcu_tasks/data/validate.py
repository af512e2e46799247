"""The one dataset validator, behind both `hvcu data validate` and the lmms-eval task load.

`check_samples` adds duplicate ids and undecodable images to what loaders.py refuses; each image is decoded once
per process, and a "decodes" verdict is remembered on disk by the SHA-256 of the bytes under a folder named by the
checker's rules, Pillow's version and the pixel limit (`cache_folder`; failures never; `HVCU_CACHE_DIR=off`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hvcu_tasks import settings
from hvcu_tasks.core.families import ASPECTS, FAMILIES
from hvcu_tasks.core.fingerprint import SCHEME
from hvcu_tasks.core.records import ASPECT_COLUMNS
from hvcu_tasks.core.schema import DataError, ImageRef, Problem, Sample
from hvcu_tasks.data import files, provenance
from hvcu_tasks.data.files import ImageError, check_image
from hvcu_tasks.data.hub import LAYOUT_TEXT, load_record
from hvcu_tasks.data.loaders import LoadResult, family_counts, load_path, load_source
from hvcu_tasks.data.public import name_key
from hvcu_tasks.settings import hub_spec, pinned_source

DECODE_THREADS = min(8, os.cpu_count() or 1)
"""Threads that decode a family's images at once when checking them."""

CACHE_OFF = frozenset({"off", "0", "false", "no", "none"})
CHECKS_FOLDER = "image-checks-v1"
"""Subfolder of the cache that holds the remembered image verdicts (its layout's version in the name)."""

log = logging.getLogger(__name__)

PUBLISHED_COUNTS = ASPECTS
"""Samples per family and aspect in the published benchmark (families.ASPECTS: one table, not a copy)."""
PUBLISHED_SOURCE = (
    "the dataset card of Chime316/HVCU-Bench (huggingface.co/datasets/Chime316/HVCU-Bench), "
    "whose counts agree with the paper's Table 5"
)
PUBLISHED_TOTAL = sum(sum(c.values()) for c in PUBLISHED_COUNTS.values())
FULL_COPY_SHARE = 0.9
"""A local copy with at least this share of the published samples is taken for a copy of the benchmark."""
CARD = "the published dataset card"
ASPECT_HINT = f" (the aspect is read from a column among {list(ASPECT_COLUMNS)}, else from the id's prefix)"

# Behaviour: the base and context tasks of one run load the same images; each is decoded once per process.
_VERDICTS: dict[tuple, str | None] = {}
"""Image key -> None (it decodes) or why it does not."""
# Behaviour: the fingerprint reuses the digest the check computed, so each image is read and hashed once.
_DIGESTS: dict[tuple, str] = {}
# Behaviour: an unwritable cache folder is one warning per process, not one per image.
_UNWRITABLE: set[Path] = set()
PUBLISHED_FINGERPRINTS: Mapping[str, str] = MappingProxyType({})
"""Family -> `provenance` fingerprint of the published release, once known; until then the card's counts decide."""


@dataclass
class ValidationReport:
    """Everything `hvcu data validate` prints: problems and family/aspect counts."""

    problems: list[Problem] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    count_warnings: list[str] = field(default_factory=list)
    """One line per difference from the published dataset card (warnings: they do not make the data invalid)."""
    count_note: str | None = None
    """Whether the counts were compared with the card and matched, or why they were not compared."""
    identities: dict[str, dict] = field(default_factory=dict)
    """Family -> data identity (`provenance`): source, hub commit and layout, fingerprint; only for valid data."""

    @property
    def ok(self) -> bool:
        """Whether the dataset has no problems."""
        return not self.problems


def _image_key(ref: ImageRef) -> tuple | None:
    """Return the in-process key of an image (`files.image_identity`), None when its file cannot be read."""
    try:
        return files.image_identity(ref.path, ref.data)
    except OSError:
        return None


def _decode(ref: ImageRef, data: bytes | None = None) -> str | None:
    """Decode an image (or its bytes `data`, read already) fully, see `files.open_image`; None when it decodes."""
    source = data if data is not None else ref.path if ref.path is not None else (ref.data or b"")
    try:
        check_image(source, ref.describe())
    except ImageError as exc:
        return f"too large to decode safely (a decompression bomb?): {exc}" if exc.too_large else f"cannot decode {exc}"
    return None


def cache_root() -> Path | None:
    """Return the folder of the toolkit's caches, or None when $HVCU_CACHE_DIR turns caching off."""
    value = settings.current().cache_dir
    if value.lower() in CACHE_OFF:
        return None
    if value:
        return Path(value).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():  # the XDG spec ignores a relative path
        return Path(xdg) / "hvcu"
    try:
        return Path.home() / ".cache" / "hvcu"
    except RuntimeError:  # no home folder to be found
        return None


def cache_folder() -> Path | None:
    """Return the folder of remembered image verdicts, named by the checker's rules and limits (None: caching off)."""
    import PIL.Image

    root = cache_root()
    version = f"rules{files.IMAGE_CHECK_RULES}-pillow{PIL.__version__}-max{PIL.Image.MAX_IMAGE_PIXELS}"
    return None if root is None else root / CHECKS_FOLDER / version


def _remember(folder: Path, digest: str) -> None:
    """Record that the content with this SHA-256 decodes; an unwritable cache is warned about once and skipped."""
    if folder in _UNWRITABLE:
        return
    marker = folder / digest[:2] / f"{digest}.ok"  # says that the content with this SHA-256 decodes
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        marker.parent.mkdir(exist_ok=True)
        files.write_atomic(marker, b"")  # several processes may record the same digest: each rename is whole
    except OSError as exc:
        _UNWRITABLE.add(folder)
        why = f"cannot write the image check cache {folder} ({exc.strerror or exc}); images are decoded at every load"
        log.warning("%s (set %s to a writable folder, or to 'off')", why, settings.CACHE_DIR_ENV)


def _judge(ref: ImageRef, folder: Path | None) -> tuple[str | None, str | None, bool]:
    """Return (verdict, SHA-256 of the bytes judged, whether the cache answered) for one image."""
    try:
        data = ref.data or b"" if ref.path is None else ref.path.read_bytes()
    except OSError:
        return _decode(ref), None, False  # a missing file or a folder: the decoder names it
    digest = hashlib.sha256(data).hexdigest()
    if folder is not None and (folder / digest[:2] / f"{digest}.ok").is_file():
        return None, digest, True
    return _decode(ref, data), digest, False


def image_sha256(ref: ImageRef | None) -> str:
    """Return the hex SHA-256 of an image's encoded bytes (file or cell), once per image and process; '' if none."""
    key = None if ref is None else _image_key(ref)
    if key is None:
        return ""
    if key not in _DIGESTS:
        data = ref.data if ref.path is None else ref.path.read_bytes()
        _DIGESTS[key] = hashlib.sha256(data or b"").hexdigest()
    return _DIGESTS[key]


def _decode_all(refs: list[ImageRef], use_cache: bool = True) -> list[str | None]:
    """Return each image's verdict (None: it decodes), judging those not judged in this process on several threads.

    Content the cache remembers as decoding is not decoded (unless `use_cache` is False); fresh verdicts are recorded.
    """
    from PIL import Image, ImageFile

    keys = [_image_key(ref) for ref in refs]
    todo = {key: ref for key, ref in zip(keys, refs, strict=True) if key is not None and key not in _VERDICTS}
    folder = cache_folder()
    # `files.open_image` sets these two process-wide switches around each decode and restores them after;
    # set here first, every thread saves and restores the same values, and this frame restores the caller's.
    lenient = ImageFile.LOAD_TRUNCATED_IMAGES
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        ImageFile.LOAD_TRUNCATED_IMAGES = False
        try:
            with ThreadPoolExecutor(max(1, min(DECODE_THREADS, len(todo)))) as pool:
                judged = list(pool.map(lambda ref: _judge(ref, folder if use_cache else None), todo.values()))
        finally:
            ImageFile.LOAD_TRUNCATED_IMAGES = lenient
    for key, (verdict, digest, cached) in zip(todo, judged, strict=True):
        _VERDICTS[key] = verdict
        if digest is not None:
            _DIGESTS.setdefault(key, digest)
        if verdict is None and digest is not None and folder is not None and not cached:
            _remember(folder, digest)
    return [f"cannot read {r.describe()}" if k is None else _VERDICTS[k] for k, r in zip(keys, refs, strict=True)]


def image_problems(samples: list[Sample], use_cache: bool = True) -> list[Problem]:
    """Return one problem per sample whose image cannot be decoded (`use_cache` False: decode every image)."""
    with_image = [s for s in samples if s.image is not None]  # no image: already reported by the loader
    verdicts = _decode_all([s.image for s in with_image], use_cache)
    return [Problem(s.source, s.id, "image", why) for s, why in zip(with_image, verdicts, strict=True) if why]


def duplicate_problems(samples: list[Sample]) -> list[Problem]:
    """Return one problem per id that occurs more than once within a family, compared as file names compare.

    Ids that differ only by case or Unicode normalisation (`A1`/`a1`, NFC/NFD) name one image file on macOS/Windows.
    """
    groups: dict[tuple[str, str], list[Sample]] = {}
    for s in samples:
        groups.setdefault((s.family, name_key(s.id)), []).append(s)
    problems = []
    for same in (group for group in groups.values() if len(group) > 1):
        ids = list(dict.fromkeys(s.id for s in same))
        why = f"duplicate id ({len(same)} items) in family {same[0].family!r}"
        if len(ids) > 1:
            why += f": {' and '.join(map(repr, ids))} differ only by case or Unicode normalisation and would share "
            why += "one image file on macOS/Windows"
        problems.append(Problem(same[0].source, same[0].id, "id", why))
    return problems


def check_samples(samples: list[Sample], decode_images: bool = True, use_cache: bool = True) -> list[Problem]:
    """Return the problems that need a whole family or the image itself: duplicate ids, undecodable images."""
    return duplicate_problems(samples) + (image_problems(samples, use_cache) if decode_images else [])


def load_family(source: str, family: str) -> list[Sample]:
    """Load and fully check one family for a task (images decoded); raise DataError listing every problem."""
    loaded = load_source(source, family)
    problems = loaded.problems + check_samples(loaded.samples)
    if not problems and not loaded.samples:
        problems.append(Problem(source, "-", "data", f"holds no items for family {family!r}"))
    if problems:
        raise DataError(problems)
    return loaded.samples


def data_identity(family: str, source: str, samples: Sequence[Sample]) -> dict[str, Any]:
    """Return the data identity of one family load (`provenance.data_identity`), the hub's commit and layout too."""
    spec = hub_spec(source)
    read = load_record(*spec, family) if spec else None
    return provenance.data_identity(family, samples, source, lambda s: image_sha256(s.image), read)


def identity_lines(identities: dict[str, dict]) -> list[str]:
    """Return the lines `hvcu data validate` prints for the data identities: fingerprint, and source and layout."""
    lines = [f"data fingerprints ({SCHEME}; the values PUBLISHED_FINGERPRINTS holds for the release):"]
    for family, identity in identities.items():
        where = provenance.location_text(identity)
        if identity.get("kind") == "hub":
            where = f"hub {identity['location']}@{identity['revision']} from {LAYOUT_TEXT[identity['layout']]}"
        lines.append(f"  {family}: {identity['fingerprint']} ({where})")
    return lines


def compare_with_card(counts: dict[str, dict[str, int]], source: str) -> tuple[list[str], str | None]:
    """Return (warnings, note): one warning per count (in all, family, aspect) that differs from the dataset card.

    Only the hub and local copies of at least FULL_COPY_SHARE of the published samples are compared; a note says so.
    """
    total = sum(sum(c.values()) for c in counts.values())
    if total == 0:
        return [], None  # nothing loaded: the problems say why
    if not hub_spec(source) and (source == "smoke" or total < FULL_COPY_SHARE * PUBLISHED_TOTAL):
        why = f"not the published benchmark: {total} samples vs {PUBLISHED_TOTAL:,}"
        return [], f"{why}; counts not compared with its dataset card"
    lines = [f"warning: {total} sample(s) in all; {CARD} has {PUBLISHED_TOTAL}"] if total != PUBLISHED_TOTAL else []
    for family, published in PUBLISHED_COUNTS.items():
        found = counts.get(family, {})
        size, expected = sum(found.values()), sum(published.values())
        lines += [f"warning: {family}: {size} sample(s); {CARD} has {expected}"] if size != expected else []
        for aspect in dict.fromkeys([*published, *found]) if size else ():  # no sample: the family line says it all
            got, want = found.get(aspect, 0), published.get(aspect)
            if want is None:
                lines.append(f"warning: {family}/{aspect}: {got} sample(s) in no aspect of {CARD}{ASPECT_HINT}")
            elif got != want:
                lines.append(f"warning: {family}/{aspect}: {got} sample(s); {CARD} has {want}")
    if lines:
        return lines, f"counts compared with {PUBLISHED_SOURCE}: {len(lines)} difference(s)"
    families = ", ".join(f"{f} {sum(c.values())}" for f, c in PUBLISHED_COUNTS.items())
    return [], f"counts match {CARD}: {total} samples ({families}) and every aspect"


def validate(source: str, decode_images: bool = True, use_cache: bool = True) -> ValidationReport:
    """Check a dataset given as a local path, 'hub[:REPO[@REV]]' (pinned as the hub tasks pin it) or 'smoke'.

    With `use_cache` False every image is decoded, even one whose content the verdict cache remembers.
    """
    report, loaded = ValidationReport(), LoadResult()
    source = pinned_source(source, settings.current().revision)  # `hub` reads what the hub tasks read
    if hub_spec(source) or source == "smoke":
        for family in FAMILIES:
            try:
                loaded.extend(load_source(source, family))
            except DataError as exc:  # one family's split, or the hub itself: said once, the other families checked
                report.problems += [p for p in exc.problems if p not in report.problems]
    else:
        loaded.extend(load_path(Path(source).expanduser()))
    report.problems.extend(loaded.problems)
    report.problems.extend(check_samples(loaded.samples, decode_images, use_cache))
    report.counts = family_counts(loaded.samples)
    report.count_warnings, report.count_note = compare_with_card(report.counts, source)
    for family in FAMILIES if report.ok else ():
        samples = [s for s in loaded.samples if s.family == family]
        if samples:
            report.identities[family] = data_identity(family, source, samples)
    return report
