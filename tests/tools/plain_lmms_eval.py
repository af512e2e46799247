"""Run the lmms-eval CLI as a user without hvcu-toolkit would: `python plain_lmms_eval.py <lmms-eval arguments>`.

Importing `hvcu_tasks` (or the toolkit's `generation` / `training`) fails here, so lmms-eval skips the toolkit's
entry point (it logs "Failed to load model entry-point manifests") and indexes none of its tasks; the tasks come
only from `--include_path`. One model is added, standing in for the toolkit's `hvcu_context` with
`inner=hvcu_replay` and written without the toolkit: `--model hvcu_context --model_args predictions=PATH` answers
each request from a JSONL of {family, sample_id, level, response} lines, single rounds and multi-round chains
alike. It takes the name `hvcu_context` because the task YAMLs name that model as one that runs the context
setting's rounds itself. A request with no stored reply is an error.

`record=FILE` (a model argument) appends every request the model gets, one JSON line per request and round:
{task, doc_id, family, sample_id, level, messages, gen_kwargs}, the messages exactly as the task built them (an
image as its mode, size and a SHA-256 of its pixels). `python plain_lmms_eval.py --with-toolkit <arguments>` leaves
the toolkit importable and registers the same model as `plain_record`, to sit behind the toolkit's own wrapper
(`--model hvcu_context --model_args inner=plain_record,predictions=PATH,record=FILE`): both runs then record what
their tasks send, for a file-to-file comparison.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import json
import runpy
import sys
import types
from pathlib import Path
from typing import Any

BLOCKED = ("hvcu_tasks", "generation", "training")


class BlockToolkit(importlib.abc.MetaPathFinder):
    """Make every import of the toolkit's packages fail, as in an environment that lacks it."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        """Refuse the toolkit's packages; leave every other import to the next finder."""
        if fullname.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {fullname!r} (blocked: plain lmms-eval)", name=fullname)


def stored_replies(path: str) -> dict[tuple[str, str, int], str]:
    """Read {family, sample_id, level, response} lines into a lookup."""
    replies = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            replies[(str(r["family"]), str(r["sample_id"]), int(r["level"]))] = r["response"]
    return replies


def plain(value: Any) -> Any:
    """Return a request value as JSON: text, numbers and containers as they are, an image as a pixel digest."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "tobytes") and hasattr(value, "mode") and hasattr(value, "size"):
        pixels = hashlib.sha256(value.tobytes()).hexdigest()
        return {"image": f"{value.mode} {value.size[0]}x{value.size[1]} sha256:{pixels}"}
    raise TypeError(f"plain replay: cannot record a {type(value).__name__} in a request")


def level_of(doc: Any, messages: list[dict]) -> int:
    """Return the level a request asks: a base document names it; a context chat asks level = its user turns."""
    return int(doc["level"]) if "level" in doc else sum(m["role"] == "user" for m in messages)


def _model_class() -> type:
    """Build the replay model on lmms-eval's base class (imported only once lmms-eval is)."""
    from lmms_eval.api.model import lmms
    from lmms_eval.protocol import ChatMessages

    class PlainReplay(lmms):
        """Answer every request, single- or multi-round, from stored replies keyed by family, sample and level."""

        is_simple = False

        def __init__(self, predictions: str = "", record: str = "", **_kwargs: Any) -> None:
            super().__init__()
            if not predictions:
                raise ValueError("plain replay needs --model_args predictions=PATH")
            self.replies = stored_replies(predictions)
            self.record = Path(record) if record else None

        def _reply(self, request: Any, doc: Any, messages: list[dict]) -> str:
            ChatMessages(messages=messages)  # the task built well-formed chat messages
            level = level_of(doc, messages)
            key = (str(doc["family"]), str(doc["sample_id"]), level)
            if self.record is not None:
                line = {"task": request.task_name, "doc_id": request.doc_id, "family": key[0], "sample_id": key[1]}
                line |= {"level": level, "messages": plain(messages), "gen_kwargs": plain(request.args[2])}
                with self.record.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(line, sort_keys=True) + "\n")
            if key not in self.replies:
                raise KeyError(f"plain replay: no stored reply for {key}")
            return self.replies[key]

        def generate_until(self, requests: list) -> list[str]:
            out = []
            for request in requests:
                _ctx, doc_to_messages, _gen, doc_id, task, split = request.args
                doc = self.task_dict[task][split][doc_id]
                out.append(self._reply(request, doc, doc_to_messages(doc)))
            return out

        def generate_until_multi_round(self, requests: list) -> list[list[str]]:
            out = []
            for request in requests:
                _ctx, doc_to_messages, _gen, doc_id, task, split = request.args
                doc = self.task_dict[task][split][doc_id]
                replies: list[str] = []
                info = None
                messages = doc_to_messages(doc)
                while messages is not None:
                    replies.append(self._reply(request, doc, messages))
                    step = doc_to_messages(
                        doc, round_idx=len(replies), previous_output=list(replies), previous_round_info=info
                    )
                    messages, terminal, _previous, info = step
                    if terminal:
                        messages = None
                out.append(replies)
            return out

        def loglikelihood(self, requests: list) -> list:
            raise NotImplementedError("plain replay answers generation requests only")

    return PlainReplay


MODEL_MODULE = "plain_replay_model"


def main(argv: list[str]) -> None:
    """Block the toolkit (unless `--with-toolkit` comes first), register the replay model, run `lmms-eval ARGV`."""
    with_toolkit = argv[:1] == ["--with-toolkit"]
    argv = argv[1:] if with_toolkit else argv
    if not with_toolkit:
        sys.meta_path.insert(0, BlockToolkit())
        try:
            import hvcu_tasks  # noqa: F401
        except ModuleNotFoundError:
            print("plain lmms-eval: hvcu_tasks is not importable", file=sys.stderr)
        else:
            raise SystemExit("plain lmms-eval: hvcu_tasks is still importable")
    from lmms_eval.models import MODEL_REGISTRY_V2
    from lmms_eval.models.registry_v2 import ModelManifest

    holder = types.ModuleType(MODEL_MODULE)
    holder.PlainReplay = _model_class()
    holder.PlainReplay.__module__ = MODEL_MODULE
    sys.modules[MODEL_MODULE] = holder
    name = "plain_record" if with_toolkit else "hvcu_context"
    MODEL_REGISTRY_V2.register_manifest(
        ModelManifest(model_id=name, chat_class_path=f"{MODEL_MODULE}.PlainReplay"), overwrite=True
    )
    sys.argv = ["lmms-eval", *argv]
    runpy.run_module("lmms_eval", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
