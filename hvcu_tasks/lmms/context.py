"""The "context" setting: each level asked after the model's own earlier questions and answers (three rounds of
lmms-eval's `generate_until_multi_round` per sample document). The history shows OUR parse (`parsing.parse_choice`,
else the model's own words); the authors' rule only scores the `*_official` metrics of the same conversation.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from hvcu_tasks.core.documents import earlier_answers, level_options, level_texts, next_round, sample_rows
from hvcu_tasks.core.metrics import Outcome
from hvcu_tasks.core.prompts import context_messages
from hvcu_tasks.core.scoring import score_reply
from hvcu_tasks.lmms.hooks import doc_fingerprint, doc_image, family_payloads, loaded_table
from hvcu_tasks.settings import NO_ROUND_ROUTING_ENV, current

NATIVE_KEY = "multi_round"
"""Key of the task's per-model `lmms_eval_specific_kwargs`: 'native' for backends that run the rounds, 'routed'
for lmms-eval backends that run them through this package's round driver (models/routing.py)."""
BACKEND_KEY = "backend"
"""Key of the same entry naming its model id, whose resolution (`route_record`) require_native checks."""

WRAPPER_MODEL = "hvcu_context"


class UnsupportedBackend(SystemExit):
    """Ends a run whose model cannot hold a multi-turn chat: exit status 1, the fix as its last line (a SystemExit as
    core.schema.TaskLoadError is: lmms-eval's CLI prints any Exception as a traceback and exits 0)."""

    def __init__(self, message: str) -> None:
        sys.stdout.flush()  # lmms-eval's log, piped, stays before the line Python prints at exit
        super().__init__(f"error: {message}")


def process_docs(stub: Any) -> Any:
    """Replace a context task's stub with that family's sample documents."""
    return loaded_table(stub, "chains", sample_rows)


def require_native(lmms_eval_specific_kwargs: Mapping[str, Any] | None) -> None:
    """Raise a clear error unless the running model can drive multi-round chats."""
    kwargs = lmms_eval_specific_kwargs or {}
    mode = kwargs.get(NATIVE_KEY)
    if mode not in {"native", "routed"}:
        raise UnsupportedBackend(
            "the HVCU-Bench context setting needs a model that holds multi-turn chats; this backend does not. "
            f"Wrap it: --model {WRAPPER_MODEL} --model_args inner=<model>,<that model's args> "
            "(e.g. inner=openai,model_version=gpt-4o), or use --model vllm, qwen2_5_vl, qwen3_vl or llava_hf"
        )
    problem = backend_problem(mode, kwargs.get(BACKEND_KEY))
    if problem:
        raise UnsupportedBackend(problem)


def backend_problem(mode: str, backend: Any) -> str | None:
    """Return why the model lmms-eval resolved for `backend` cannot run a `mode` ('native'/'routed') entry, or None."""
    wrap = f"--model {WRAPPER_MODEL} --model_args inner={backend or '<model>'},<that model's args>"
    record = route_record()
    found = record.get(backend) if record is not None and isinstance(backend, str) else None
    if found is not None and found.simple:
        return (
            f"the HVCU-Bench context settings send multi-turn chats, but lmms-eval resolved --model {backend} to its "
            "simple (text-prompt) class (--force_simple), which would get only the level's text, without the earlier "
            f"turns. Drop --force_simple, or wrap the model (the wrapper builds its chat class): {wrap}"
        )
    if mode != "routed":
        return None
    if not isinstance(backend, str) or not backend:
        return f"a 'routed' {NATIVE_KEY} entry must name its model id under {BACKEND_KEY!r}; got {backend!r}"
    driver = f"the HVCU-Bench context setting runs {backend}'s rounds through hvcu-toolkit's round driver, which"
    if record is None:
        return (
            f"{driver} is not active: lmms-eval's model registry is not hooked (hvcu-toolkit is not installed, or "
            "its hook failed to install: see the log's error). Install hvcu-toolkit "
            f"(pip install hvcu-toolkit), or wrap the model: {wrap}; --model vllm runs it without the toolkit"
        )
    if found is None:
        return (
            f"{driver} is not active: {backend} was not built through lmms-eval's model registry "
            f"(lmms_eval.models.get_model), so it is not the routed class. Build it with get_model({backend!r}), "
            f"or wrap it: {wrap} (in Python: ContextWrapper.around(model))"
        )
    if not found.routed:
        unset = f"Unset {NO_ROUND_ROUTING_ENV}, or wrap" if current().no_round_routing else "Wrap"
        return f"{driver} is not active: {found.why}. {unset} the model: {wrap}"
    return None


def route_record() -> dict[str, Any] | None:
    """Return the toolkit's record of model resolutions (model id -> Resolution; None: its route hook is not installed).

    Read through lmms-eval's registry (plugin.install_route_hook keeps it there), so an exported task folder's copy
    of this module sees the installed toolkit's record too.
    """
    try:
        from lmms_eval.models.registry_v2 import ModelRegistryV2
    except ImportError:
        return None
    return getattr(ModelRegistryV2.get_model_class, "_hvcu_resolved", None)


def doc_to_text(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> str:
    """Return level 1's text (lmms-eval's request context), after checking the backend can run rounds."""
    require_native(lmms_eval_specific_kwargs)
    return level_texts(doc)[0]


def doc_to_messages(
    doc: Mapping[str, Any],
    lmms_eval_specific_kwargs: Mapping[str, Any] | None = None,
    round_idx: int | None = None,
    previous_output: Sequence[str] | None = None,
    previous_round_info: Any = None,
) -> Any:
    """Multi-round protocol: round 0 returns L1's messages; later rounds return (messages, done, outputs, info)."""

    def messages(replies: list[str]) -> list[dict]:
        return context_messages(level_texts(doc), earlier_answers(doc, replies), doc_image(doc))

    return next_round(doc, round_idx, previous_output, previous_round_info, messages)


def outcomes_of(doc: Mapping[str, Any], replies: Sequence[object]) -> list[Outcome]:
    """Score the replies of one chain (fewer replies than levels leave those levels unasked)."""
    return [
        score_reply(doc, doc["levels"][i], level_options(doc, i), doc["answers"][i], reply, doc_fingerprint(doc))
        for i, reply in enumerate(replies[: len(doc["questions"])])
    ]


def process_results(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Mapping[str, Any]]:
    """Score a chain; the `acc_full` entry logs questions, raw replies, parsed letters and the verdicts (both rules).

    A round with no reply (missing, None, not text) is scored wrong and counted in n_failed_requests.
    """
    replies = list(results[0]) if results and isinstance(results[0], (list, tuple)) else list(results)
    n = len(doc["questions"])
    replies = replies[:n] + [None] * (n - len(replies))
    outcomes = outcomes_of(doc, replies)
    entry = {
        "sample_id": doc["sample_id"],
        "questions": level_texts(doc),
        "replies": [r if isinstance(r, str) else None for r in replies],
        "parsed": [o.pred for o in outcomes],
        "gold": list(doc["answers"]),
        "chain_correct": len(outcomes) == len(doc["questions"]) and all(o.correct for o in outcomes),
        "parsed_official": [o.pred_official for o in outcomes],
        "chain_correct_official": len(outcomes) == len(doc["questions"]) and all(o.correct_official for o in outcomes),
    }
    return family_payloads(doc, outcomes, entry)
