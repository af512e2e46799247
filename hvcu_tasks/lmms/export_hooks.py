"""The hooks of an exported task folder (`hvcu export-task`): data loading, prompts, scoring and aggregations.

`hvcu export-task` copies this module as `hvcu_lib/hooks.py` beside the toolkit's pure core (`hvcu_lib/core/`, its
imports of `hvcu_tasks.core` made relative), and the folder's `utils.py` hands the YAMLs the names in HOOKS. It
needs nothing but the core and lmms-eval's own dependencies (datasets, pyarrow, Pillow, huggingface_hub), patches
nothing of lmms-eval and writes nothing: the hub data goes where huggingface_hub keeps it, like any lmms-eval task's.

It asks every model the package's requests and scores them with the package's numbers, with less around them than
the installed package (the exported README lists what): it reads the authors' layouts only (their JSON + image
folders, locally or from the hub; a local parquet copy with their columns), checks records and ids but does not
decode every image before the first request, and holds no request cache, image hook or round driver of its own.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import io
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hvcu_tasks.core.aggregate import AGGREGATIONS, CIRCULAR_AGGREGATIONS, overall_score_group
from hvcu_tasks.core.documents import (
    circular_rows,
    earlier_answers,
    gold_entry,
    gold_rows,
    level_options,
    level_rows,
    level_texts,
    next_round,
    sample_rows,
)
from hvcu_tasks.core.families import ASPECTS, FAMILIES, UNKNOWN_ASPECT
from hvcu_tasks.core.fingerprint import SCHEME, fingerprint
from hvcu_tasks.core.metrics import Outcome
from hvcu_tasks.core.names import IMAGE_EXTENSIONS, UnsafeNameError, check_name
from hvcu_tasks.core.payloads import IDENTITY_KEY, ROTATION_KEY, payloads, rotation_payloads
from hvcu_tasks.core.prompts import SYSTEM_PROMPT, base_messages, context_messages, level_text
from hvcu_tasks.core.records import record_to_sample
from hvcu_tasks.core.schema import DataError, ImageRef, Problem, Sample, TaskLoadError
from hvcu_tasks.core.scoring import score_reply
from hvcu_tasks.data.jsonio import loads, loads_field, read_json
from hvcu_tasks.settings import DATA_ENV, Settings, current

log = logging.getLogger("hvcu_tasks")

HUB_DATASET = "Chime316/HVCU-Bench"
SMOKE_DIR = Path(__file__).resolve().parents[1] / "data"
"""The bundled smoke sample: the export folder's `data/` (this file is `<export>/hvcu_lib/hooks.py`)."""

# ---- reading the data ----


def resolve_source(declared: str, config: Settings) -> str:
    """Return the source a task reads: $HVCU_BENCH_DATA for a hub task, the hub pinned by $HVCU_BENCH_REVISION."""
    source = config.data if declared == "hub" and config.data else declared
    revision = config.revision
    if revision and (source == "hub" or source.startswith("hub:")) and "@" not in source:
        return f"hub:{source[4:] or HUB_DATASET}@{revision}"
    return source


def record_sample(
    record: Any, family: str, source: str, index: int, image: Callable[[str], ImageRef | None]
) -> tuple[Sample | None, list[Problem]]:
    """Map one authors'-format record to a Sample and its problems (the core's rules; `image` finds it by id)."""
    if not isinstance(record, Mapping):
        return None, [Problem(source, f"#{index}", "item", "expected a JSON object")]
    try:
        ref = image(check_name(record.get("id"), "id"))
    except UnsafeNameError:
        ref = None  # record_to_sample names what is wrong with the id
    return record_to_sample(record, family, source, ref, index, loads_field)


def read_json_family(
    path: Path, family: str, image_dir: Path, label: str | None = None
) -> list[tuple[Sample | None, list[Problem]]]:
    """Read the authors' JSON file of one family, each id's image found as `image_dir/<id>.<ext>`."""
    source = label or str(path)
    try:
        records = read_json(path, unique_keys=True)
    except (OSError, ValueError) as exc:
        return [(None, [Problem(source, "-", "file", f"cannot read JSON: {exc}")])]
    if not isinstance(records, list) or not records:
        return [(None, [Problem(source, "-", "file", "expected a non-empty JSON array of items")])]

    def image(sid: str) -> ImageRef | None:
        found = next(
            (image_dir / f"{sid}{ext}" for ext in IMAGE_EXTENSIONS if (image_dir / f"{sid}{ext}").is_file()), None
        )
        return ImageRef(path=found) if found else None

    return [record_sample(r, family, source, i, image) for i, r in enumerate(records)]


def read_parquet_family(paths: Sequence[Path], family: str) -> list[tuple[Sample | None, list[Problem]]]:
    """Read a local parquet copy of one family with the authors' columns (id, qa_levels, image: {bytes})."""
    import pyarrow.parquet as pq

    read = []
    for path in paths:
        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow raises many types for a bad file
            read.append((None, [Problem(str(path), "-", "file", f"cannot read parquet: {exc}")]))
            continue
        for i, row in enumerate(rows):
            cell = row.get("image") if isinstance(row, Mapping) else None
            data = cell.get("bytes") if isinstance(cell, Mapping) else cell
            ref = ImageRef(data=bytes(data)) if isinstance(data, (bytes, bytearray)) and data else None
            read.append(record_sample(row, family, str(path), i, lambda _sid, ref=ref: ref))
    return read


def read_local(root: Path, family: str) -> list[tuple[Sample | None, list[Problem]]]:
    """Read one family from a local copy: the authors' `<stem>.json` + `Image/<stem>/`, or `<split>*.parquet` files."""
    split, stem, _short = FAMILIES[family]
    if root.is_file():
        return read_json_family(root, family, root.parent / "Image" / root.stem)
    if (root / f"{stem}.json").is_file():
        return read_json_family(root / f"{stem}.json", family, root / "Image" / stem)
    shards = sorted(p for p in root.rglob("*.parquet") if split.lower() in p.name.lower().replace("-", "_"))
    if shards:
        return read_parquet_family(shards, family)
    what = "no such file or folder" if not root.exists() else f"no {stem}.json and no {split}*.parquet in it"
    return [(None, [Problem(str(root), "-", "files", f"no data for family {family!r}: {what}")])]


def read_hub(repo: str, revision: str | None, family: str) -> tuple[list[tuple[Sample | None, list[Problem]]], str]:
    """Read one family of the hub dataset in the authors' JSON layout; return it and the commit read."""
    from huggingface_hub import snapshot_download

    _split, stem, _short = FAMILIES[family]
    try:
        folder = Path(
            snapshot_download(
                repo, repo_type="dataset", revision=revision, allow_patterns=[f"{stem}.json", f"Image/{stem}/*"]
            )
        )
    except Exception as exc:  # the hub client raises many types (network, auth, missing revision)
        why = " ".join(f"{type(exc).__name__}: {exc}".split())
        hint = f"set {DATA_ENV}=/path/to/a/local/copy, or HF_HUB_OFFLINE=1 to read the Hugging Face cache"
        raise DataError(
            [Problem(f"{repo}@{revision or 'main'}", "-", "hub", f"cannot download {stem}.json ({why}); {hint}")]
        ) from None
    commit = folder.name
    return read_json_family(
        folder / f"{stem}.json", family, folder / "Image" / stem, f"{repo}@{commit}/{stem}.json"
    ), commit


def load_family(source: str, family: str) -> tuple[list[Sample], dict[str, Any]]:
    """Load and check one family; return the samples and where they came from, or raise DataError (every problem)."""
    where: dict[str, Any]
    if source == "hub" or source.startswith("hub:"):
        repo, _, requested = (source[4:] or HUB_DATASET).partition("@")
        read, commit = read_hub(repo, requested or None, family)
        where = {"kind": "hub", "location": repo, "requested_revision": requested or None, "revision": commit}
        where["layout"] = "json"
    elif source == "smoke":
        _split, stem, _short = FAMILIES[family]
        read, where = (
            read_json_family(SMOKE_DIR / f"{stem}.json", family, SMOKE_DIR / "Image" / stem),
            {"kind": "smoke"},
        )
        where["location"] = "smoke"
    else:
        root = Path(source).expanduser()
        read, where = read_local(root, family), {"kind": "local", "location": str(root.resolve())}
    samples = [s for s, _ in read if s is not None]
    problems = [p for _, found in read for p in found]
    seen: dict[str, str] = {}
    for s in samples:
        if s.id.casefold() in seen:
            problems.append(
                Problem(s.source, s.id, "id", f"duplicate id in family {family!r} (also {seen[s.id.casefold()]!r})")
            )
        seen.setdefault(s.id.casefold(), s.id)
    if not problems and not samples:
        problems.append(Problem(source, "-", "data", f"holds no items for family {family!r}"))
    if problems:
        raise DataError(problems)
    return samples, where


def image_sha256(sample: Sample) -> str:
    """Return the hex SHA-256 of a sample's encoded image bytes as stored."""
    ref = sample.image
    return hashlib.sha256(ref.path.read_bytes() if ref.path else ref.data or b"").hexdigest()


def identity_of(family: str, samples: Sequence[Sample], where: Mapping[str, Any]) -> str:
    """Return the data identity (the toolkit's scheme): source, counts, content fingerprint, as JSON."""
    aspects = {a: n for a in (*ASPECTS[family], UNKNOWN_ASPECT) if (n := sum(s.aspect == a for s in samples))}
    identity = {"scheme": SCHEME, "family": family, **where, "samples": len(samples), "aspects": aspects}
    identity["fingerprint"] = fingerprint(samples, image_sha256)
    return json.dumps(identity, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def task_data(stub: Any) -> tuple[list[Sample], str]:
    """Return a task's checked samples and data identity, or end the run (TaskLoadError) before any request."""
    row = stub[0] if len(stub) else {}
    if len(stub) != 1 or not {"family", "source"} <= set(stub.column_names):
        raise TaskLoadError(
            "?",
            "?",
            [Problem("task stub", "-", "rows", f"expected one row with family and source, got {stub.column_names}")],
        )
    family, declared = str(row["family"]), str(row["source"])
    source = resolve_source(declared, current())
    if source != declared:
        log.warning("HVCU-Bench %s: reading %s (from $%s) instead of %s", family, source, DATA_ENV, declared)
    try:
        with gc_paused():
            samples, where = load_family(source, family)
            return samples, identity_of(family, samples, where)
    except DataError as exc:
        raise TaskLoadError(family, source, exc.problems) from exc
    except Exception as exc:  # anything else would be retried for a minute, then swallowed by lmms-eval (exit 0)
        raise TaskLoadError(
            family, source, [Problem(source, "-", "load", f"unexpected {type(exc).__name__}: {exc}")]
        ) from exc


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a block (a load's many small objects make it walk lmms-eval's heap)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# ---- document tables ----


def features(kind: str) -> Any:
    """Return the column types of one document table: 'levels', 'chains', 'rotations' or 'gold-context'."""
    import datasets

    text, strings = datasets.Value("string"), datasets.Sequence(datasets.Value("string"))
    head = {"sample_id": text, "family": text, "aspect": text}
    tail = {"image_path": text, "image_bytes": datasets.Value("binary"), IDENTITY_KEY: text}
    if kind in {"levels", "rotations"}:
        body = {"level": datasets.Value("int32"), "question": text, "option_keys": strings, "option_texts": strings}
        columns = {**head, **body, "answer": text, **tail}
        return datasets.Features({**columns, ROTATION_KEY: datasets.Value("int32")} if kind == "rotations" else columns)
    body = {"levels": datasets.Sequence(datasets.Value("int32")), "questions": strings}
    body |= {"option_keys": datasets.Sequence(strings), "option_texts": datasets.Sequence(strings), "answers": strings}
    columns = {**head, **body, **tail}
    return datasets.Features({**columns, "level": datasets.Value("int32")} if kind == "gold-context" else columns)


def document_table(rows: list[dict[str, Any]], kind: str, identity: str) -> Any:
    """Build a `datasets.Dataset` straight from Arrow, fingerprinted by the data identity (not by hashing rows)."""
    import datasets
    import pyarrow as pa

    columns = features(kind)
    fingerprint = hashlib.blake2b(f"{kind}\0{identity}".encode(), digest_size=16).hexdigest()
    table = pa.Table.from_pylist(rows, schema=columns.arrow_schema)
    return datasets.Dataset(table, info=datasets.DatasetInfo(features=columns), fingerprint=fingerprint)


# ---- images ----

_IMAGES: OrderedDict[tuple, Any] = OrderedDict()
"""The last few decoded RGB images, by their file (path, size, mtime) or bytes digest: a chain decodes once."""
_IMAGES_KEPT = 32
_IMAGES_LOCK = threading.Lock()


def document_image(doc: Mapping[str, Any]) -> Any:
    """Return a document's image as RGB (a private copy: backends may edit it), or raise ValueError naming it."""
    from PIL import Image

    path, data = doc.get("image_path"), doc.get("image_bytes")
    label = f"sample {doc.get('family', '?')}/{doc.get('sample_id', '?')}"
    try:
        key = (path, os.stat(path).st_mtime_ns, os.stat(path).st_size) if path else (hashlib.sha256(data).digest(),)
        with _IMAGES_LOCK:
            image = _IMAGES.get(key)
        if image is None:
            with Image.open(path or io.BytesIO(data)) as opened:
                image = opened.convert("RGB") if opened.mode != "RGB" else opened.copy()
            with _IMAGES_LOCK:
                _IMAGES[key] = image
                while len(_IMAGES) > _IMAGES_KEPT:
                    _IMAGES.popitem(last=False)
    except Exception as exc:  # a missing file, no image at all, or bytes PIL cannot decode
        where = path or f"<{len(data or b'')} image bytes>"
        raise ValueError(f"HVCU-Bench {label}: image {where}: {type(exc).__name__}: {exc}") from None
    return image.copy()


# ---- base setting ----


def options_of(doc: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Return a level document's options as (key, text) pairs."""
    return tuple(zip(doc["option_keys"], doc["option_texts"], strict=True))


def process_docs(stub: Any) -> Any:
    """Replace a base task's one-row stub with that family's level documents."""
    samples, identity = task_data(stub)
    return document_table(list(level_rows(samples, identity)), "levels", identity)


def doc_to_text(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> str:
    """Return the protocol's user text for one level document."""
    return level_text(doc["question"], options_of(doc))


def doc_to_visual(doc: Mapping[str, Any]) -> list[Any]:
    """Return the document's image (RGB) in a list."""
    return [document_image(doc)]


def doc_to_messages(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> list[dict]:
    """Return the base-setting chat: the authors' system prompt, then user [text, image]."""
    return base_messages(doc_to_text(doc), document_image(doc))


def identity_of_doc(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Return the data identity a document carries ({} for one built without)."""
    identity = doc.get(IDENTITY_KEY)
    return loads(identity) if identity else {}


def score(doc: Mapping[str, Any], level: int, options: Sequence[tuple[str, str]], gold: str, reply: object) -> Outcome:
    """Score one reply to one level of a document (the core's rule), naming the data it came from."""
    fingerprint = identity_of_doc(doc).get("fingerprint")
    return score_reply(doc, int(level), tuple(options), str(gold), reply, data=fingerprint)


def family_payloads(doc: Mapping[str, Any], outcomes: Sequence[Outcome], entry: Mapping[str, Any]) -> dict:
    """Return the payloads of a family task (the metrics of the document's family)."""
    return payloads(str(doc["family"]), outcomes, entry, identity_of_doc(doc))


def process_results(doc: Mapping[str, Any], results: Sequence[object]) -> dict[str, Mapping[str, Any]]:
    """Score a base-setting document; the acc_full entry also logs the question."""
    outcome = score(doc, int(doc["level"]), options_of(doc), str(doc["answer"]), results[0] if results else None)
    return family_payloads(doc, [outcome], {"question": doc_to_text(doc)})


# ---- context setting ----


class UnsupportedBackend(RuntimeError):
    """Raised when the chosen lmms-eval model cannot run the context setting's multi-turn chats here."""


WRAP = "--model hvcu_context --model_args inner=<model>,... (hvcu-toolkit's wrapper)"


def toolkit_record(backend: str) -> tuple[bool, Any]:
    """Return (whether hvcu-toolkit's route hook is installed, its record of `backend`), read through lmms-eval."""
    from lmms_eval.models.registry_v2 import ModelRegistryV2

    record = getattr(ModelRegistryV2.get_model_class, "_hvcu_resolved", None)
    return record is not None, record.get(backend) if isinstance(record, Mapping) else None


def require_native(kwargs: Mapping[str, Any] | None) -> None:
    """Raise UnsupportedBackend unless the running model can hold the multi-turn chats (never a silent wrong run)."""
    kwargs = kwargs or {}
    mode, backend = kwargs.get("multi_round"), kwargs.get("backend")
    if mode not in {"native", "routed"}:
        raise UnsupportedBackend(
            "the HVCU-Bench context settings need a model that holds multi-turn chats; this backend does not. "
            f"Use --model vllm, or with hvcu-toolkit installed {WRAP}"
        )
    hooked, found = toolkit_record(str(backend))
    if found is not None and getattr(found, "simple", False):
        raise UnsupportedBackend(
            f"lmms-eval resolved --model {backend} to its simple (text-prompt) class (--force_simple), which would get "
            "only the level's text, without the earlier turns; drop --force_simple"
        )
    if mode != "routed":
        return
    if not hooked:
        raise UnsupportedBackend(
            f"the HVCU-Bench context setting runs {backend}'s rounds through hvcu-toolkit's round driver, and "
            "hvcu-toolkit is not installed (an exported task folder has no round driver of its own). Install it "
            "(pip install hvcu-toolkit), or use --model vllm, which runs the rounds itself"
        )
    if found is None or not getattr(found, "routed", False):
        why = getattr(found, "why", "") or f"{backend} was not built through lmms-eval's model registry"
        raise UnsupportedBackend(f"hvcu-toolkit's round driver is not active for {backend}: {why}. Wrap it: {WRAP}")


def context_process_docs(stub: Any) -> Any:
    """Replace a context task's stub with that family's sample documents (one per chain)."""
    samples, identity = task_data(stub)
    return document_table(list(sample_rows(samples, identity)), "chains", identity)


def context_doc_to_text(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> str:
    """Return level 1's text (lmms-eval's request context), after checking the backend can run the rounds."""
    require_native(lmms_eval_specific_kwargs)
    return level_texts(doc)[0]


def context_doc_to_messages(
    doc: Mapping[str, Any],
    lmms_eval_specific_kwargs: Mapping[str, Any] | None = None,
    round_idx: int | None = None,
    previous_output: Sequence[str] | None = None,
    previous_round_info: Any = None,
) -> Any:
    """Multi-round protocol: round 0 returns L1's messages; later rounds return (messages, done, outputs, info)."""

    def messages(replies: list[str]) -> list[dict]:
        return context_messages(level_texts(doc), earlier_answers(doc, replies), document_image(doc))

    return next_round(doc, round_idx, previous_output, previous_round_info, messages)


def context_process_results(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Mapping[str, Any]]:
    """Score a chain; the acc_full entry logs questions, raw replies, parsed letters and verdicts (both rules)."""
    replies = list(results[0]) if results and isinstance(results[0], (list, tuple)) else list(results)
    n = len(doc["questions"])
    replies = replies[:n] + [None] * (n - len(replies))
    outcomes = [
        score(doc, doc["levels"][i], level_options(doc, i), doc["answers"][i], r) for i, r in enumerate(replies)
    ]
    entry = {
        "sample_id": doc["sample_id"],
        "questions": level_texts(doc),
        "replies": [r if isinstance(r, str) else None for r in replies],
        "parsed": [o.pred for o in outcomes],
        "gold": list(doc["answers"]),
        "chain_correct": all(o.correct for o in outcomes),
        "parsed_official": [o.pred_official for o in outcomes],
        "chain_correct_official": all(o.correct_official for o in outcomes),
    }
    return family_payloads(doc, outcomes, entry)


# ---- blind, circular and gold-context settings ----


def blind_doc_to_visual(doc: Mapping[str, Any]) -> list[Any]:
    """Return no visual: the blind setting never sends the image."""
    return []


def blind_doc_to_messages(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> list:
    """Return the blind chat: the base setting's system prompt and text, no image."""
    system = {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]}
    return [system, {"role": "user", "content": [{"type": "text", "text": doc_to_text(doc)}]}]


def circular_process_docs(stub: Any) -> Any:
    """Replace a circular task's stub with four rotations of every level's option texts (keys A-D in place)."""
    samples, identity = task_data(stub)
    return document_table(list(circular_rows(samples, identity)), "rotations", identity)


def circular_process_results(doc: Mapping[str, Any], results: Sequence[object]) -> dict[str, Mapping[str, Any]]:
    """Score one rotated question; the circular verdicts are made in the aggregation, over all ranks' records."""
    outcome = score(doc, int(doc["level"]), options_of(doc), str(doc["answer"]), results[0] if results else None)
    return rotation_payloads(outcome, int(doc[ROTATION_KEY]), doc_to_text(doc), identity_of_doc(doc))


def gold_process_docs(stub: Any) -> Any:
    """Replace a gold-context task's stub with one document per (sample, level)."""
    samples, identity = task_data(stub)
    return document_table(list(gold_rows(samples, identity)), "gold-context", identity)


def gold_index(doc: Mapping[str, Any]) -> int:
    """Return the position of the asked level among the sample's levels."""
    return list(doc["levels"]).index(int(doc["level"]))


def gold_doc_to_text(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> str:
    """Return the asked level's text, after checking the backend takes multi-turn chats."""
    require_native(lmms_eval_specific_kwargs)
    return level_texts(doc)[gold_index(doc)]


def gold_doc_to_messages(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> list:
    """Return the context chat for the asked level with the GOLD letters as the earlier assistant turns."""
    k = gold_index(doc)
    return context_messages(level_texts(doc), list(doc["answers"][:k]), document_image(doc))


def gold_process_results(doc: Mapping[str, Any], results: Sequence[object]) -> dict[str, Mapping[str, Any]]:
    """Score one level asked after gold answers; the acc_full entry logs it in the context setting's list form."""
    k = gold_index(doc)
    reply = results[0] if results else None
    outcome = score(doc, int(doc["level"]), level_options(doc, k), doc["answers"][k], reply)
    entry = gold_entry(doc, reply, outcome.pred)
    return family_payloads(doc, [outcome], entry)


# ---- the names the YAMLs reference ----

_NAMED = (
    process_docs,
    doc_to_text,
    doc_to_visual,
    doc_to_messages,
    process_results,
    overall_score_group,
    context_process_docs,
    context_doc_to_text,
    context_doc_to_messages,
    context_process_results,
    blind_doc_to_visual,
    blind_doc_to_messages,
    circular_process_docs,
    circular_process_results,
    gold_process_docs,
    gold_doc_to_text,
    gold_doc_to_messages,
    gold_process_results,
)
HOOKS: dict[str, Callable] = {
    **{f.__name__: f for f in _NAMED},
    **{f"agg_{name}": aggregation for name, aggregation in AGGREGATIONS.items()},
    **{f"agg_circular_{name}": aggregation for name, aggregation in CIRCULAR_AGGREGATIONS.items()},
}
"""`!function utils.<name>` -> hook; the aggregations are the core's (`core.aggregate`)."""
