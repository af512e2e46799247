"""The requests of the blind, circular and gold-context tasks, built by their real hooks on the smoke sample.

Expected chats are typed from the spec (issue 15 and the README's protocol), never produced by the code under test.
"""

from __future__ import annotations

from functools import cache

import datasets
import pytest
from PIL import Image
from test_context import CONTEXT_PREFIX, L1, L2, L3, SYSTEM_PROMPT

from hvcu_tasks.core import aggregate
from hvcu_tasks.lmms import analysis_tasks as analysis
from hvcu_tasks.lmms import context, hooks

# The smoke sample implication/metaphor_001 (gold B, A, C), typed by hand in test_context.
SYSTEM, PREFIX = SYSTEM_PROMPT, CONTEXT_PREFIX


def stub(family: str) -> datasets.Dataset:
    return datasets.Dataset.from_list([{"family": family, "source": "smoke"}])


@cache
def docs(kind: str, family: str = "implication") -> list[dict]:
    build = {
        "base": hooks.process_docs,
        "circular": analysis.circular_process_docs,
        "gold": analysis.gold_process_docs,
    }[kind]
    return list(build(stub(family)))


def doc(kind: str, sample_id: str, level: int, rotation: int | None = None) -> dict:
    return next(
        d
        for d in docs(kind)
        if d["sample_id"] == sample_id and d["level"] == level and (rotation is None or d["rotation"] == rotation)
    )


def placeholder(messages: list[dict]) -> list[dict]:
    """The messages with every PIL image part replaced by '<image>'."""
    return [
        {
            **m,
            "content": [
                {**p, "url": "<image>"} if p.get("type") == "image" and isinstance(p.get("url"), Image.Image) else p
                for p in m["content"]
            ],
        }
        for m in messages
    ]


# --- blind ---------------------------------------------------------------------------------------------------


def test_blind_chat_is_the_base_system_prompt_and_text_without_the_image() -> None:
    assert analysis.blind_doc_to_messages(doc("base", "metaphor_001", 1)) == [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
        {"role": "user", "content": [{"type": "text", "text": L1}]},
    ]


@pytest.mark.parametrize("family", ["implication", "aesthetic", "affective"])
def test_no_blind_request_carries_an_image(family: str) -> None:
    for d in hooks.process_docs(stub(family)):
        parts = [p["type"] for m in analysis.blind_doc_to_messages(d) for p in m["content"]]
        assert parts == ["text", "text"]
        assert analysis.blind_doc_to_visual(d) == []


def test_blind_text_equals_the_base_text() -> None:
    d = doc("base", "metaphor_001", 3)
    assert analysis.blind_doc_to_messages(d)[1]["content"][0]["text"] == hooks.doc_to_text(d) == L3


# --- circular ------------------------------------------------------------------------------------------------


def test_each_level_is_asked_in_four_rotations() -> None:
    assert len(docs("circular")) == 4 * len(docs("base")) == 60


def test_four_distinct_option_orders_with_the_same_texts_and_keys_a_to_d() -> None:
    texts = ["A star", "A red heart", "A key", "A bird"]
    rotations = [doc("circular", "metaphor_001", 1, r) for r in range(4)]
    assert [list(d["option_keys"]) for d in rotations] == [["A", "B", "C", "D"]] * 4
    assert [d["option_texts"] for d in rotations] == [
        texts,
        ["A red heart", "A key", "A bird", "A star"],
        ["A key", "A bird", "A star", "A red heart"],
        ["A bird", "A star", "A red heart", "A key"],
    ]


def test_the_circular_gold_key_is_where_the_gold_text_went() -> None:
    # the gold of L1 is B, "A red heart"
    assert [doc("circular", "metaphor_001", 1, r)["answer"] for r in range(4)] == ["B", "A", "D", "C"]


def test_rotation_zero_is_the_base_request() -> None:
    first = doc("circular", "metaphor_001", 1, 0)
    assert placeholder(hooks.doc_to_messages(first)) == placeholder(
        hooks.doc_to_messages(doc("base", "metaphor_001", 1))
    )


def test_a_rotated_request_shows_the_rotated_options_with_the_image() -> None:
    messages = placeholder(hooks.doc_to_messages(doc("circular", "metaphor_001", 1, 2)))
    assert messages[1]["content"] == [
        {
            "type": "text",
            "text": "What object is drawn behind the grey bars?\nOptions:\n"
            "A. A key\nB. A bird\nC. A star\nD. A red heart",
        },
        {"type": "image", "url": "<image>"},
    ]


def test_circular_results_carry_the_rotation_for_the_aggregation() -> None:
    d = doc("circular", "metaphor_001", 1, 3)
    entry = analysis.circular_process_results(d, ["C"])["acc_full"]
    (record,) = entry["outcomes"]
    assert record["rotation"] == 3 and record["gold"] == "C" and record["correct"] is True


def test_a_record_without_a_rotation_is_refused_by_name() -> None:
    entry = hooks.process_results(doc("base", "metaphor_001", 1), ["B"])["acc_full"]
    with pytest.raises(ValueError, match="implication/metaphor_001 L1.*no integer 'rotation'"):
        aggregate.circular_task_metrics([entry])


# --- gold context --------------------------------------------------------------------------------------------


def test_gold_context_l3_holds_the_gold_letters_in_the_assistant_turns() -> None:
    assert placeholder(analysis.gold_doc_to_messages(doc("gold", "metaphor_001", 3))) == [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
        {"role": "user", "content": [{"type": "text", "text": L1}]},
        {"role": "assistant", "content": [{"type": "text", "text": "B"}]},
        {"role": "user", "content": [{"type": "text", "text": L2}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A"}]},
        {"role": "user", "content": [{"type": "text", "text": PREFIX + L3}, {"type": "image", "url": "<image>"}]},
    ]


def test_gold_context_l2_holds_the_gold_l1_letter() -> None:
    assert placeholder(analysis.gold_doc_to_messages(doc("gold", "metaphor_001", 2))) == [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
        {"role": "user", "content": [{"type": "text", "text": L1}]},
        {"role": "assistant", "content": [{"type": "text", "text": "B"}]},
        {"role": "user", "content": [{"type": "text", "text": PREFIX + L2}, {"type": "image", "url": "<image>"}]},
    ]


def test_gold_context_l1_is_the_base_request() -> None:
    assert placeholder(analysis.gold_doc_to_messages(doc("gold", "metaphor_001", 1))) == [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
        {"role": "user", "content": [{"type": "text", "text": L1}, {"type": "image", "url": "<image>"}]},
    ]


def test_gold_context_equals_own_context_after_right_answers() -> None:
    own, *_rest = context.doc_to_messages(
        next(d for d in context.process_docs(stub("implication")) if d["sample_id"] == "metaphor_001"),
        round_idx=2,
        previous_output=["B", "A"],
    )
    assert placeholder(analysis.gold_doc_to_messages(doc("gold", "metaphor_001", 3))) == placeholder(own)


def test_gold_context_asks_every_level_once() -> None:
    assert sorted((d["sample_id"], d["level"]) for d in docs("gold")) == sorted(
        (d["sample_id"], d["level"]) for d in docs("base")
    )


def test_gold_context_refuses_a_backend_without_multi_turn_chats() -> None:
    with pytest.raises(context.UnsupportedBackend, match="--model hvcu_context --model_args inner="):
        analysis.gold_doc_to_text(doc("gold", "metaphor_001", 2), {"multi_round": "unsupported"})
    assert analysis.gold_doc_to_text(doc("gold", "metaphor_001", 2), {"multi_round": "native"}) == L2


def test_gold_context_logs_one_level_in_the_context_list_form() -> None:
    entry = analysis.gold_process_results(doc("gold", "metaphor_001", 3), ["C"])["acc_full"]
    assert entry["questions"] == [L3] and entry["replies"] == ["C"] and entry["gold"] == ["C"]
    assert entry["shown_answers"] == ["B", "A"] and entry["outcomes"][0]["correct"] is True
