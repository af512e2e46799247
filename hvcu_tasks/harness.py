"""The lmms-eval side of the base setting: level documents, prompts, per-document results, aggregations.

The functions here are pure over documents; `tasks/utils.py` only re-exports them for the YAMLs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from hvcu_tasks.families import ASPECTS, LEVEL_NAMES
from hvcu_tasks.loaders import load_source
from hvcu_tasks.metrics import FamilyScores, Outcome, score_family
from hvcu_tasks.parsing import parse_choice
from hvcu_tasks.prompts import base_messages, level_text
from hvcu_tasks.schema import Sample

log = logging.getLogger("hvcu_tasks")

DATA_ENV = "HVCU_BENCH_DATA"
"""Environment variable that points the hub-backed tasks at a local copy ('/path', 'hub:REPO@REV')."""

FAILED_REQUEST_MARKER = "[LMMS_EVAL_REQUEST_FAILED"
"""Prefix lmms-eval's API backends put in place of a reply when every retry failed."""


def resolve_source(declared: str, environ: Mapping[str, str]) -> str:
    """Return the data source a task should read: the env override for hub tasks, else as declared."""
    override = environ.get(DATA_ENV, "").strip()
    if declared == "hub" and override:
        return override
    return declared


def level_rows(samples: Iterable[Sample]) -> Iterator[dict[str, Any]]:
    """Yield one document per (sample, level), sample-major, carrying the image reference."""
    for s in samples:
        image = (
            {"path": str(s.image.path), "bytes": None}
            if s.image and s.image.path
            else {"path": None, "bytes": s.image.data if s.image else None}
        )
        for lv in s.levels:
            yield {
                "sample_id": s.id,
                "family": s.family,
                "aspect": s.aspect,
                "level": lv.level,
                "question": lv.question,
                "option_keys": [k for k, _ in lv.options],
                "option_texts": [t for _, t in lv.options],
                "answer": lv.answer,
                "image": image,
            }


def level_dataset(samples: Sequence[Sample]):  # -> datasets.Dataset
    """Build the lmms-eval document table (one row per level, image as a lazy `datasets.Image`)."""
    import datasets

    features = datasets.Features(
        {
            "sample_id": datasets.Value("string"),
            "family": datasets.Value("string"),
            "aspect": datasets.Value("string"),
            "level": datasets.Value("int32"),
            "question": datasets.Value("string"),
            "option_keys": datasets.Sequence(datasets.Value("string")),
            "option_texts": datasets.Sequence(datasets.Value("string")),
            "answer": datasets.Value("string"),
            "image": datasets.Image(),
        }
    )
    return datasets.Dataset.from_list(list(level_rows(samples)), features=features)


def process_docs(stub) -> Any:
    """Replace a task's one-row stub ({family, source}) with that family's level documents."""
    if len(stub) != 1 or not {"family", "source"} <= set(stub.column_names):
        raise ValueError(f"HVCU task stub must hold one row with 'family' and 'source', got {stub.column_names}")
    family, declared = stub[0]["family"], stub[0]["source"]
    source = resolve_source(declared, os.environ)
    if source != declared:
        log.warning("HVCU-Bench %s: reading %s (from $%s) instead of %s", family, source, DATA_ENV, declared)
    samples = load_source(source, family).raise_for_problems()
    if not samples:
        raise ValueError(f"HVCU-Bench {family}: source {source!r} holds no samples")
    return level_dataset(samples)


def doc_options(doc: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Return a document's options as (key, text) pairs."""
    return tuple(zip(doc["option_keys"], doc["option_texts"], strict=True))


def doc_to_text(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> str:
    """Return the protocol's user text for one level document."""
    return level_text(doc["question"], doc_options(doc))


def doc_to_visual(doc: Mapping[str, Any]) -> list[Any]:
    """Return the document's image as an RGB PIL image in a list."""
    return [doc["image"].convert("RGB")]


def doc_to_messages(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> list[dict]:
    """Return the base-setting chat: the authors' system prompt, then user [text, image]."""
    return base_messages(doc_to_text(doc), doc["image"].convert("RGB"))


def outcome_of(doc: Mapping[str, Any], response: str) -> Outcome:
    """Score one reply against its document."""
    options = dict(doc_options(doc))
    return Outcome(
        sample_id=str(doc["sample_id"]),
        family=str(doc["family"]),
        aspect=str(doc["aspect"]),
        level=int(doc["level"]),
        gold=str(doc["answer"]),
        pred=parse_choice(response, options),
        response=response,
    )


def family_metric_names(family: str) -> list[str]:
    """Return every metric a family task reports, in table order."""
    levels = list(LEVEL_NAMES.values())
    return (
        [f"acc_{n}" for n in levels]
        + ["acc_full"]
        + [f"invalid_{n}" for n in levels]
        + [f"errors_at_{n}" for n in levels]
        + [f"error_share_{n}" for n in levels]
        + ["n_chains", "n_incomplete", "n_failed_requests"]
        + [f"full_{a}" for a in ASPECTS[family]]
    )


def process_results(doc: Mapping[str, Any], results: Sequence[str]) -> dict[str, dict]:
    """Return the per-document payload under every metric name of the document's family.

    The payload is small (ids, gold, parsed letter); the `acc_full` entry also carries the question so
    that `--log_samples` files can be read without the dataset (the raw reply is lmms-eval's `resps`).
    """
    response = results[0] if results else ""
    core = outcome_of(doc, response).to_dict()
    core.pop("response")
    core["failed"] = str(response).startswith(FAILED_REQUEST_MARKER)
    payloads = {name: core for name in family_metric_names(str(doc["family"]))}
    payloads["acc_full"] = {**core, "question": doc_to_text(doc)}
    return payloads


def scores_of(items: Sequence[Mapping[str, Any]]) -> FamilyScores:
    """Aggregate the logged payloads of one family task into its scores, warning about cut chains."""
    scores = score_family([Outcome.from_dict(i) for i in items])
    if scores.n_incomplete:
        log.warning(
            "HVCU-Bench: %d sample(s) lack one of their three levels (e.g. --limit) and are left out of "
            "acc_full, error attribution and per-aspect scores",
            scores.n_incomplete,
        )
    return scores


Aggregation = Callable[[Sequence[Mapping[str, Any]]], "float | int | None"]


def _metric(pick: Callable[[FamilyScores], float | int | None]) -> Aggregation:
    """Make an lmms-eval aggregation that scores the payloads and picks one number."""

    def aggregate(items: Sequence[Mapping[str, Any]]) -> float | int | None:
        """Aggregate per-document payloads into one metric value."""
        return pick(scores_of(items))

    return aggregate


def failed_requests(items: Sequence[Mapping[str, Any]]) -> int:
    """Count replies that are lmms-eval's failed-request marker (scored wrong, and warned about)."""
    n = sum(bool(i.get("failed")) for i in items)
    if n:
        log.warning("HVCU-Bench: %d request(s) failed after all retries and are scored as wrong answers", n)
    return n


def _aspect_metric(aspect: str) -> Aggregation:
    """Make the per-aspect full-chain accuracy aggregation (None, shown N/A, when no chain has it)."""
    return _metric(lambda s: s.aspect_acc_full.get(aspect))


AGGREGATIONS: dict[str, Aggregation] = {
    **{f"acc_{n}": _metric(lambda s, n=n: s.acc[n]) for n in LEVEL_NAMES.values()},
    "acc_full": _metric(lambda s: s.acc_full),
    **{f"invalid_{n}": _metric(lambda s, n=n: s.invalid[n]) for n in LEVEL_NAMES.values()},
    **{f"errors_at_{n}": _metric(lambda s, n=n: s.error_counts[n]) for n in LEVEL_NAMES.values()},
    **{f"error_share_{n}": _metric(lambda s, n=n: s.error_share[n]) for n in LEVEL_NAMES.values()},
    "n_chains": _metric(lambda s: s.n_samples),
    "n_incomplete": _metric(lambda s: s.n_incomplete),
    "n_failed_requests": failed_requests,
    **{f"full_{a}": _aspect_metric(a) for fam in ASPECTS.values() for a in fam},
}


def overall_score_group(metrics: Sequence[float], sizes: Sequence[int], weight_by_size: bool = False) -> float:
    """lmms-eval group aggregation: the paper's Overall Score (unweighted mean, 2 decimals)."""
    from hvcu_tasks.metrics import overall_score

    if weight_by_size:
        raise ValueError("the Overall Score is an unweighted mean; set weight_by_size: false")
    return overall_score(list(metrics))
