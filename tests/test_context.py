"""The context setting: per-round messages, the model's own answers in the history, and the wrapper."""

from __future__ import annotations

import datasets
import pytest
from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms
from lmms_eval.protocol import ChatMessages

from hvcu_tasks.core import prompts
from hvcu_tasks.core.documents import sample_rows
from hvcu_tasks.lmms import context, documents, hooks
from hvcu_tasks.lmms.models.wrapper import ContextWrapper

# Typed from the protocol note ("Prompting"), never imported from the code under test.
SYSTEM_PROMPT = (
    "You are a helpful assistant that answers multiple-choice questions based on images. Respond with ONLY the "
    "single letter (A, B, C, or D) of the best option. Do not include any explanation or additional text."
)
CONTEXT_PREFIX = "The above Q&As provide context. Now carefully consider:\n"
NO_ANSWER = "(no answer)"  # README: what an empty earlier reply is sent as
# The user text of each level of the smoke sample metaphor_001 (gold B, A, C), written out by hand.
L1 = "What object is drawn behind the grey bars?\nOptions:\nA. A star\nB. A red heart\nC. A key\nD. A bird"
L2 = (
    "What does placing the heart behind bars suggest?\nOptions:\nA. Feelings are kept confined\n"
    "B. The heart is being repaired\nC. Hearts are for sale\nD. The bars are decorative"
)
L3 = (
    "Which message does the image most likely convey?\nOptions:\nA. Shopping brings joy\n"
    "B. Exercise keeps the heart healthy\nC. Love can feel like a prison\nD. Zoos protect animals"
)


@pytest.fixture(scope="module")
def docs() -> datasets.Dataset:
    return context.process_docs(datasets.Dataset.from_list([{"family": "implication", "source": "smoke"}]))


def roles(messages: list[dict]) -> list[str]:
    return [m["role"] for m in messages]


def image_turns(messages: list[dict]) -> list[int]:
    return [i for i, m in enumerate(messages) for part in m["content"] if part["type"] == "image"]


def test_one_document_per_sample(docs) -> None:
    assert len(docs) == 5
    assert docs[0]["sample_id"] == "metaphor_001" and docs[0]["answers"] == ["B", "A", "C"]


def test_round_zero_is_the_base_setting_chat(docs) -> None:
    messages = context.doc_to_messages(docs[0])
    ChatMessages(messages=messages)
    assert roles(messages) == ["system", "user"]
    assert messages[0]["content"][0]["text"] == SYSTEM_PROMPT
    assert [p["type"] for p in messages[1]["content"]] == ["text", "image"]


def test_round_zero_asks_level_one(docs) -> None:
    messages = context.doc_to_messages(docs[0])
    assert messages[1]["content"][0] == {"type": "text", "text": L1}


def test_level_two_sees_level_one_then_asks_level_two_with_the_prefix(docs) -> None:
    messages, done, _replies, _info = context.doc_to_messages(docs[0], round_idx=1, previous_output=["B"])
    assert not done
    assert [m["content"][0]["text"] for m in messages] == [SYSTEM_PROMPT, L1, "B", CONTEXT_PREFIX + L2]
    assert image_turns(messages) == [3]


def test_level_three_sees_both_earlier_levels_and_the_models_own_answers(docs) -> None:
    doc = docs[0]
    messages, done, replies, _info = context.doc_to_messages(doc, round_idx=2, previous_output=["D", "(A)"])
    ChatMessages(messages=messages)
    assert not done and replies == ["D", "(A)"]
    assert roles(messages) == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"] == [{"type": "text", "text": L1}]
    assert messages[2]["content"] == [{"type": "text", "text": "D"}]  # the model's own (wrong) answer, not gold B
    assert messages[3]["content"] == [{"type": "text", "text": L2}]
    assert messages[4]["content"] == [{"type": "text", "text": "A"}]  # parsed letter of "(A)"
    assert messages[5]["content"][0] == {"type": "text", "text": CONTEXT_PREFIX + L3}
    assert image_turns(messages) == [5]  # the image only in the final turn


def test_an_unparsable_earlier_reply_is_sent_as_the_models_own_words(docs) -> None:
    messages, *_ = context.doc_to_messages(
        docs[0], round_idx=2, previous_output=["<think>hmm</think>It is a heart, I think.", "   "]
    )
    assert messages[2]["content"][0]["text"] == "It is a heart, I think."
    assert messages[4]["content"][0]["text"] == NO_ANSWER  # empty reply: never an empty assistant turn


def test_the_chain_ends_after_three_rounds(docs) -> None:
    assert context.doc_to_messages(docs[0], round_idx=3, previous_output=["B", "A", "C"])[:3] == (
        None,
        True,
        ["B", "A", "C"],
    )


def test_a_fourth_level_is_never_asked() -> None:
    with pytest.raises(ValueError, match="need 0 <= answered levels < 3, got 3"):
        prompts.context_messages([L1, L2, L3], ["B", "A", "C"], image=None)


def test_round_and_history_length_must_agree(docs) -> None:
    with pytest.raises(ValueError, match="round 2 of sample metaphor_001 got 1 earlier replies"):
        context.doc_to_messages(docs[0], round_idx=2, previous_output=["B"])


def test_chain_results_are_scored_and_logged(docs) -> None:
    result = context.process_results(docs[0], [["B", "A", "The answer is C."]])
    entry = result["acc_full"]
    assert [o["correct"] for o in entry["outcomes"]] == [True, True, True]
    assert entry["parsed"] == ["B", "A", "C"] and entry["chain_correct"] is True
    assert entry["replies"][2] == "The answer is C." and entry["questions"][0].startswith("What object")
    assert set(result) >= {"acc_l1_perc", "acc_full", "n_incomplete"}


def test_a_chain_with_a_wrong_level_is_not_correct(docs) -> None:
    entry = context.process_results(docs[0], [["B", "D", "C"]])["acc_full"]  # gold B, A, C
    assert [o["correct"] for o in entry["outcomes"]] == [True, False, True]
    assert entry["parsed"] == ["B", "D", "C"] and entry["parsed_official"] == ["B", "D", "C"]
    assert entry["chain_correct"] is False and entry["chain_correct_official"] is False


def test_a_chain_cut_after_one_round_is_scored_wrong_at_the_missing_levels(docs) -> None:
    entry = context.process_results(docs[0], [["B"]])["acc_full"]
    assert entry["replies"] == ["B", None, None] and entry["parsed"] == ["B", None, None]
    assert [(o["level"], o["correct"], o["failed"]) for o in entry["outcomes"]] == [
        (1, True, False),
        (2, False, True),
        (3, False, True),
    ]
    assert entry["chain_correct"] is False and entry["chain_correct_official"] is False


def test_backends_without_multi_round_get_a_clear_error(docs) -> None:
    with pytest.raises(context.UnsupportedBackend, match="--model hvcu_context --model_args inner="):
        context.doc_to_text(docs[0], {"multi_round": "unsupported"})
    assert context.doc_to_text(docs[0], {"multi_round": "native"}).startswith("What object")


class Recorder(lmms):
    """A chat model that answers 'B' and records each generate_until batch's messages."""

    is_simple = False

    def __init__(self, **kwargs) -> None:
        super().__init__()
        self.batches: list[list[list[dict]]] = []

    def generate_until(self, requests):
        self.batches.append([r.args[1](self.task_dict[r.args[4]][r.args[5]][r.args[3]]) for r in requests])
        return ["B"] * len(requests)

    def loglikelihood(self, requests):
        raise NotImplementedError

    def generate_until_multi_round(self, requests):
        raise NotImplementedError


def _requests(docs, n: int) -> list[Instance]:
    def doc_to_messages(doc, round_idx=None, previous_output=None, previous_round_info=None):
        if round_idx is None:
            return context.doc_to_messages(doc)
        return context.doc_to_messages(
            doc, round_idx=round_idx, previous_output=previous_output, previous_round_info=previous_round_info
        )

    return [
        Instance(
            request_type="generate_until_multi_round",
            arguments=("ctx", doc_to_messages, {"max_new_tokens": 8}, i, "t", "train"),
            idx=0,
            metadata={"task": "t", "doc_id": i, "repeats": 1},
        )
        for i in range(n)
    ]


def test_wrapper_sends_each_round_of_all_documents_as_one_batch(docs) -> None:
    wrapper = ContextWrapper.around(Recorder())
    wrapper.task_dict["t"] = {"train": docs}
    outputs = wrapper.generate_until_multi_round(_requests(docs, 5))
    assert outputs == [["B", "B", "B"]] * 5
    assert wrapper.rounds_sent == [5, 5, 5]
    first, second, third = wrapper.inner.batches
    assert [roles(m) for m in first] == [["system", "user"]] * 5
    assert [roles(m) for m in third] == [["system", "user", "assistant", "user", "assistant", "user"]] * 5
    assert all(m[2]["content"][0]["text"] == "B" for m in third)


def test_wrapper_rejects_a_simple_inner_model(monkeypatch) -> None:
    import lmms_eval.models

    class Simple(Recorder):
        is_simple = True

    with pytest.raises(ValueError, match="'Simple' resolves to a simple"):
        ContextWrapper.around(Simple())
    monkeypatch.setattr(lmms_eval.models, "get_model", lambda name: Simple)
    with pytest.raises(ValueError, match="'simple_thing' resolves to a simple"):
        ContextWrapper(inner="simple_thing")


def test_wrapper_finishes_chains_of_different_lengths(docs) -> None:
    """A chain that ends early (the task says terminal) leaves the batch; the others go on."""

    def doc_to_messages(doc, round_idx=None, previous_output=None, previous_round_info=None):
        if round_idx is None:
            return context.doc_to_messages(doc)
        if doc["sample_id"] == "contrast_001":
            return None, True, previous_output, None
        return context.doc_to_messages(doc, round_idx=round_idx, previous_output=previous_output)

    wrapper = ContextWrapper.around(Recorder())
    wrapper.task_dict["t"] = {"train": docs}
    requests = _requests(docs, 5)
    for r in requests:
        r.arguments = (r.arguments[0], doc_to_messages, *r.arguments[2:])
    outputs = wrapper.generate_until_multi_round(requests)
    assert [len(o) for o in outputs] == [3, 3, 1, 3, 3]
    assert wrapper.rounds_sent == [5, 4, 4]


def test_wrapper_needs_an_inner_model() -> None:
    with pytest.raises(ValueError, match="inner=<lmms-eval model>"):
        ContextWrapper()


@pytest.mark.usefixtures("lmms_eval_tasks_indexed_once")
def test_lmms_eval_task_object_speaks_vllms_round_protocol() -> None:
    """lmms-eval's own vllm loop calls task.doc_to_messages(doc) then (doc, round_idx=..., ...): replay it."""
    from lmms_eval.tasks import TaskManager, get_task_dict

    manager = TaskManager(model_name="vllm", include_path=None)
    task = get_task_dict(["hvcu_bench_context_sample_impl"], manager, task_type="chat")[
        "hvcu_bench_context_sample_impl"
    ]
    assert task.OUTPUT_TYPE == "generate_until_multi_round"
    assert task.lmms_eval_specific_kwargs == {"multi_round": "native", "backend": "vllm"}
    doc = task.dataset[task.config.test_split][0]
    replies: list[str] = []
    seen = []
    while True:  # the loop vllm's generate_until_multi_round runs, one document at a time
        if not replies:
            messages = task.doc_to_messages(doc)
        else:
            messages, terminal, _out, _info = task.doc_to_messages(
                doc, round_idx=len(replies), previous_output=list(replies), previous_round_info=None
            )
            if terminal:
                break
        ChatMessages(messages=messages)
        seen.append(roles(messages))
        replies.append("C")
    assert seen == [
        ["system", "user"],
        ["system", "user", "assistant", "user"],
        ["system", "user", "assistant", "user", "assistant", "user"],
    ]


def test_a_lost_earlier_reply_is_shown_as_no_answer(docs) -> None:
    messages, *_ = context.doc_to_messages(docs[0], round_idx=1, previous_output=[None])
    assert messages[2] == {"role": "assistant", "content": [{"type": "text", "text": NO_ANSWER}]}


def test_replies_passed_flat_are_scored_like_one_chain(docs) -> None:
    entry = context.process_results(docs[0], ["B", "A", "C"])["acc_full"]  # gold B, A, C
    assert entry["parsed"] == ["B", "A", "C"] and entry["chain_correct"] is True


def test_no_results_at_all_leave_every_level_unanswered(docs) -> None:
    entry = context.process_results(docs[0], [])["acc_full"]
    assert entry["replies"] == [None, None, None]
    assert [o["failed"] for o in entry["outcomes"]] == [True, True, True]


def test_the_logged_chain_names_its_sample(docs) -> None:
    assert context.process_results(docs[0], [["B", "A", "C"]])["acc_full"]["sample_id"] == "metaphor_001"


def test_the_logged_chain_holds_the_gold_keys(docs) -> None:
    assert context.process_results(docs[0], [["D", "D", "D"]])["acc_full"]["gold"] == ["B", "A", "C"]


def test_a_non_text_reply_is_logged_as_null(docs) -> None:
    entry = context.process_results(docs[0], [["B", {"error": "timeout"}, "C"]])["acc_full"]
    assert entry["replies"] == ["B", None, "C"]


def test_a_chain_right_under_the_authors_rule_is_logged_right_under_it(docs) -> None:
    assert context.process_results(docs[0], [["B", "A", "C"]])["acc_full"]["chain_correct_official"] is True


def test_the_logged_chain_names_the_data_it_came_from(docs) -> None:
    identity = context.process_results(docs[0], [["B", "A", "C"]])["acc_full"]["data_identity"]
    assert (identity["scheme"], identity["family"], identity["kind"]) == ("hvcu-data/1", "implication", "smoke")


def test_the_multi_round_error_says_how_to_wrap_the_model(docs) -> None:
    with pytest.raises(context.UnsupportedBackend) as exc:
        context.doc_to_text(docs[0], None)
    assert exc.value.code == (  # a SystemExit: the message is the run's last line, its exit status 1
        "error: the HVCU-Bench context setting needs a model that holds multi-turn chats; this backend does not. "
        "Wrap it: --model hvcu_context --model_args inner=<model>,<that model's args> "
        "(e.g. inner=openai,model_version=gpt-4o), or use --model vllm, qwen2_5_vl, qwen3_vl or llava_hf"
    )  # those four run the rounds directly (qwen2_5_vl no longer needs the wrapper)


def smoke_samples() -> list:
    """The implication family's smoke samples and their data identity text."""
    return documents.task_data(datasets.Dataset.from_list([{"family": "implication", "source": "smoke"}]))


def test_documents_built_without_an_identity_carry_none() -> None:
    samples, _identity = smoke_samples()
    assert [row["data_identity"] for row in sample_rows(samples[:2])] == ["", ""]


def test_a_table_built_without_an_identity_carries_none() -> None:
    samples, _identity = smoke_samples()
    assert hooks.document_table(list(sample_rows(samples[:2])), "chains")["data_identity"] == ["", ""]


def test_the_document_table_carries_the_identity_it_was_given() -> None:
    samples, _identity = smoke_samples()
    identity = '{"kind": "smoke"}'
    table = hooks.document_table(list(sample_rows(samples[:1], identity)), "chains", identity)
    assert table["data_identity"] == [identity]


def test_the_document_table_has_a_fixed_schema_whatever_the_images_are() -> None:
    """Images given as files leave image_bytes empty in every row: the column still has the binary type."""
    samples, _identity = smoke_samples()
    text = datasets.Value("string")
    assert hooks.document_table(list(sample_rows(samples[:2])), "chains").features == datasets.Features(
        {
            "sample_id": text,
            "family": text,
            "aspect": text,
            "levels": datasets.Sequence(datasets.Value("int32")),
            "questions": datasets.Sequence(text),
            "option_keys": datasets.Sequence(datasets.Sequence(text)),
            "option_texts": datasets.Sequence(datasets.Sequence(text)),
            "answers": datasets.Sequence(text),
            "image_path": text,
            "image_bytes": datasets.Value("binary"),
            "data_identity": text,
        }
    )


def test_a_non_text_earlier_reply_is_shown_as_no_answer(docs) -> None:
    """A backend that hands back something other than text (here a list holding "B") gave no answer to show."""
    messages, *_ = context.doc_to_messages(docs[0], round_idx=1, previous_output=[["B"]])
    assert messages[2]["content"][0]["text"] == NO_ANSWER
