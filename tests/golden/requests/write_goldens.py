"""Write the golden request files from the protocol note alone (run once by hand; never imports hvcu_tasks).

Every string below is typed from ../shared/reference/official-protocol.md ("Prompting") and docs/evaluation.md (the
"(no answer)" turn); the questions, options and gold keys come from the bundled smoke sample's JSON. The
replies are chosen by hand: a right letter, a wrong answer in words (the history shows its parsed letter),
an unparsable reply (the history shows the model's own words) and an empty one ("(no answer)").

    python tests/golden/requests/write_goldens.py   # rewrites tests/golden/requests/**.json
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SMOKE = HERE.parents[2] / "hvcu_tasks" / "dev" / "smoke" / "data"

# From the note, "Prompting": system prompt, exact text.
SYSTEM = (
    "You are a helpful assistant that answers multiple-choice questions based on images. Respond with ONLY the "
    "single letter (A, B, C, or D) of the best option. Do not include any explanation or additional text."
)
# From the note, "Context" setting: the final user message's prefix.
PREFIX = "The above Q&As provide context. Now carefully consider:\n"
# From docs/evaluation.md (documented deviation): an empty earlier reply is sent as this assistant turn.
NO_ANSWER = "(no answer)"
IMAGE = {"type": "image", "url": "<image>"}

# One fixed sample per family: (family, JSON stem, sample id).
SAMPLES = [
    ("implication", "Implication-Understanding", "metaphor_001"),
    ("aesthetic", "Aesthetic-Appreciation", "color_001"),
    ("affective", "Affective-Reasoning", "joy_001"),
]
UNPARSABLE = "I cannot tell from this picture."
WRONG_OF = {"A": "B", "B": "C", "C": "D", "D": "A"}


def text(level: dict) -> str:
    """The note's user text: question, 'Options:', one 'K. text' line per option, no trailing newline."""
    lines = [f"{o['option_key']}. {o['option_text']}" for o in level["options"]]
    return level["question"] + "\nOptions:\n" + "\n".join(lines)


def say(role: str, words: str) -> dict:
    """One text-only message."""
    return {"role": role, "content": [{"type": "text", "text": words}]}


def base(level: dict) -> list[dict]:
    """Base setting: [system, user(text, image)]."""
    return [say("system", SYSTEM), {"role": "user", "content": [{"type": "text", "text": text(level)}, IMAGE]}]


def context(levels: list[dict], shown: list[str]) -> list[dict]:
    """Context setting for level len(shown)+1: earlier levels as user/assistant turns, then prefix + text + image."""
    if not shown:
        return base(levels[0])
    messages = [say("system", SYSTEM)]
    for level, answer in zip(levels[: len(shown)], shown, strict=True):
        messages += [say("user", text(level)), say("assistant", answer)]
    final = {"role": "user", "content": [{"type": "text", "text": PREFIX + text(levels[len(shown)])}, IMAGE]}
    return [*messages, final]


def cases(levels: list[dict]) -> dict[str, tuple[list[str], list[str]]]:
    """Case name -> (the replies the model gave, what the history must show for them)."""
    gold = [lv["correct_answer_key"] for lv in levels]
    right = [(g, g) for g in gold]
    wrong = [(f"The answer is {WRONG_OF[g]}.", WRONG_OF[g]) for g in gold]
    unparsable = (UNPARSABLE, UNPARSABLE)
    empty = ("", NO_ANSWER)
    chosen = {
        "context_L1": [],
        "context_L2_after_right": [right[0]],
        "context_L2_after_wrong": [wrong[0]],
        "context_L2_after_unparsable": [unparsable],
        "context_L2_after_empty": [empty],
        "context_L3_after_right_right": [right[0], right[1]],
        "context_L3_after_right_wrong": [right[0], wrong[1]],
        "context_L3_after_wrong_unparsable": [wrong[0], unparsable],
    }
    return {name: ([r for r, _ in pairs], [s for _, s in pairs]) for name, pairs in chosen.items()}


def dump(messages: list[dict]) -> str:
    """The golden file text."""
    return json.dumps(messages, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    """Write every golden file and the manifest that says which request each one is."""
    manifest = {}
    for family, stem, sid in SAMPLES:
        record = next(r for r in json.loads((SMOKE / f"{stem}.json").read_text("utf-8")) if r["id"] == sid)
        levels = record["qa_levels"]
        folder = HERE / family / sid
        folder.mkdir(parents=True, exist_ok=True)
        for k, level in enumerate(levels, start=1):
            name = f"{family}/{sid}/base_L{k}.json"
            (HERE / name).write_text(dump(base(level)), encoding="utf-8")
            manifest[name] = {"family": family, "sample_id": sid, "setting": "base", "level": k}
        for case, (replies, shown) in cases(levels).items():
            name = f"{family}/{sid}/{case}.json"
            (HERE / name).write_text(dump(context(levels, shown)), encoding="utf-8")
            manifest[name] = {"family": family, "sample_id": sid, "setting": "context", "replies": replies}
    (HERE / "cases.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
