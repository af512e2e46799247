"""The hvcu_context wrapper runs chains in bounded chunks: memory does not grow with the number of samples."""

from __future__ import annotations

import weakref
from collections import Counter

import pytest
from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms

from hvcu_tasks.lmms.models.wrapper import ContextWrapper

ROUNDS = 3


class Picture:
    """Stands in for a decoded image: one per document fetch, weak-referenceable so tests can count live ones."""


class Doc(dict):
    """A document row (a dict, weak-referenceable, hashed by identity)."""

    __hash__ = object.__hash__


class Chat(list):
    """A round's chat messages (a list, weak-referenceable)."""


class Table:
    """A document table that builds a fresh row, with a freshly 'decoded' picture, on every fetch (as datasets does)."""

    def __init__(self, n: int, short: frozenset[int] = frozenset()) -> None:
        self.n, self.short = n, short
        self.fetches: Counter[int] = Counter()
        self.live_docs: weakref.WeakSet = weakref.WeakSet()
        self.live_pictures: weakref.WeakSet = weakref.WeakSet()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Doc:
        self.fetches[i] += 1
        picture = Picture()
        doc = Doc(sample_id=f"s{i}", rounds=1 if i in self.short else ROUNDS, image=picture)
        self.live_docs.add(doc)
        self.live_pictures.add(picture)
        return doc


def chat(doc: Doc, round_idx: int, previous: list) -> Chat:
    """The round's messages: earlier replies as assistant turns, then the question with the document's picture."""
    messages = Chat()
    for r, reply in enumerate(previous):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"{doc['sample_id']} q{r}"}]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": str(reply)}]})
    question = {"type": "text", "text": f"{doc['sample_id']} q{round_idx}"}
    messages.append({"role": "user", "content": [question, {"type": "image", "url": doc["image"]}]})
    return messages


def doc_to_messages(doc, round_idx=None, previous_output=None, previous_round_info=None):
    """The generate_until_multi_round protocol over `chat`, ending a chain after doc['rounds'] rounds."""
    if round_idx is None:
        return chat(doc, 0, [])
    if round_idx >= doc["rounds"]:
        return None, True, previous_output, previous_round_info
    return chat(doc, round_idx, list(previous_output)), False, previous_output, previous_round_info


def requests_for(doc_ids: list[int], task: str = "t") -> list[Instance]:
    return [
        Instance(
            request_type="generate_until_multi_round",
            arguments=("ctx", doc_to_messages, {"max_new_tokens": 8}, i, task, "test"),
            idx=0,
            metadata={"task": task, "doc_id": i, "repeats": 1},
        )
        for i in doc_ids
    ]


class Echo(lmms):
    """A chat model that looks each request's document up (as lmms-eval backends do) and answers
    '<sample>:<round>' read from the last question; records batch sizes and what was alive at each call."""

    is_simple = False

    def __init__(self, table: Table | None = None, drop: int = 0, none_for: tuple[str, int] | None = None) -> None:
        super().__init__()
        self.table, self.drop, self.none_for = table, drop, none_for
        self.batches: list[int] = []
        self.live_docs: list[int] = []
        self.live_pictures: list[int] = []

    def answer(self, messages: list[dict]) -> str | None:
        sample, question = messages[-1]["content"][0]["text"].split()
        reply = f"{sample}:{question[1:]}"
        return None if self.none_for == (sample, int(question[1:])) else reply

    def generate_until(self, requests):
        self.batches.append(len(requests))
        if self.table is not None:
            self.live_docs.append(len(self.table.live_docs))
            self.live_pictures.append(len(self.table.live_pictures))
        replies = [self.answer(r.args[1](self.task_dict[r.args[4]][r.args[5]][r.args[3]])) for r in requests]
        return replies[: len(replies) - self.drop]

    def loglikelihood(self, requests):
        raise NotImplementedError

    def generate_until_multi_round(self, requests):
        raise NotImplementedError


def wrapped(table: Table, chunk_size: int, model: Echo | None = None) -> ContextWrapper:
    wrapper = ContextWrapper.around(model or Echo(table), chunk_size=chunk_size)
    wrapper.task_dict["t"] = {"test": table}
    return wrapper


@pytest.mark.parametrize("chunk_size", [1, 2, 7, 50])
def test_replies_do_not_depend_on_the_chunk_size(chunk_size: int) -> None:
    outputs = wrapped(Table(7), chunk_size).generate_until_multi_round(requests_for(list(range(7))))
    assert outputs == [[f"s{i}:0", f"s{i}:1", f"s{i}:2"] for i in range(7)]


def test_replies_come_back_in_request_order_whatever_the_document_order() -> None:
    outputs = wrapped(Table(7), 2).generate_until_multi_round(requests_for([5, 0, 6, 3, 1]))
    assert [chain[0] for chain in outputs] == ["s5:0", "s0:0", "s6:0", "s3:0", "s1:0"]


def test_each_round_of_a_chunk_is_one_inner_call() -> None:
    wrapper = wrapped(Table(7), 3)
    wrapper.generate_until_multi_round(requests_for(list(range(7))))
    assert wrapper.rounds_sent == [3, 3, 3, 3, 3, 3, 1, 1, 1]
    assert wrapper.inner.batches == wrapper.rounds_sent


def test_the_default_chunk_holds_a_small_run_in_one_call_per_round() -> None:
    wrapper = ContextWrapper.around(Echo())
    wrapper.task_dict["t"] = {"test": Table(5)}
    wrapper.generate_until_multi_round(requests_for(list(range(5))))
    assert wrapper.rounds_sent == [5, 5, 5]


def test_at_most_one_chunk_of_documents_is_alive_at_any_inner_call() -> None:
    table = Table(10)
    wrapper = wrapped(table, 3)
    wrapper.generate_until_multi_round(requests_for(list(range(10))))
    assert max(wrapper.inner.live_docs) <= 3
    assert max(wrapper.inner.live_pictures) <= 3


def test_each_document_is_fetched_once_per_chain() -> None:
    """The wrapper reuses a chunk's document rows across its rounds, and the inner model's own lookups
    get the round's messages instead of a freshly fetched (and freshly decoded) row."""
    table = Table(7)
    wrapped(table, 3).generate_until_multi_round(requests_for(list(range(7))))
    assert table.fetches == Counter({i: 1 for i in range(7)})


def test_the_inner_models_lookup_table_is_left_as_it_was() -> None:
    wrapper = wrapped(Table(4), 2)
    before = dict(wrapper.task_dict)
    wrapper.generate_until_multi_round(requests_for(list(range(4))))
    assert wrapper.task_dict == before


def test_a_batched_backend_that_reuses_the_first_requests_function_still_gets_each_documents_chat() -> None:
    """Some lmms-eval chat backends call the first request's doc_to_messages for every document of a batch."""

    class FirstFunction(Echo):
        def generate_until(self, requests):
            first = requests[0].args[1]
            return [self.answer(first(self.task_dict[r.args[4]][r.args[5]][r.args[3]])) for r in requests]

    outputs = wrapped(Table(3), 3, FirstFunction()).generate_until_multi_round(requests_for([0, 1, 2]))
    assert [chain[2] for chain in outputs] == ["s0:2", "s1:2", "s2:2"]


def test_an_inner_model_that_reads_the_looked_up_document_sees_its_fields() -> None:
    """hvcu_replay, for one, finds its reply by the looked-up document's sample_id."""

    class ReadsDoc(Echo):
        def generate_until(self, requests):
            return [str(self.task_dict[r.args[4]][r.args[5]][r.args[3]]["sample_id"]) for r in requests]

    outputs = wrapped(Table(3), 2, ReadsDoc()).generate_until_multi_round(requests_for([2, 0, 1]))
    assert outputs == [["s2"] * 3, ["s0"] * 3, ["s1"] * 3]


def test_chains_of_different_tasks_with_the_same_doc_ids_stay_apart() -> None:
    wrapper = wrapped(Table(2), 4)
    wrapper.task_dict["u"] = {"test": Table(2, short=frozenset({0}))}
    outputs = wrapper.generate_until_multi_round(requests_for([0, 1]) + requests_for([0, 1], task="u"))
    assert [len(chain) for chain in outputs] == [3, 3, 1, 3]


def test_a_chain_that_ends_early_leaves_its_chunk_the_others_go_on() -> None:
    wrapper = wrapped(Table(4, short=frozenset({1})), 2)
    outputs = wrapper.generate_until_multi_round(requests_for(list(range(4))))
    assert [len(chain) for chain in outputs] == [3, 1, 3, 3]
    assert wrapper.rounds_sent == [2, 1, 1, 2, 2, 2]


def test_a_none_reply_stays_none_in_a_later_chunk() -> None:
    wrapper = wrapped(Table(3), 2, Echo(none_for=("s2", 1)))
    outputs = wrapper.generate_until_multi_round(requests_for([0, 1, 2]))
    assert outputs[2] == ["s2:0", None, "s2:2"]


def test_an_inner_model_that_loses_replies_is_an_error() -> None:
    wrapper = wrapped(Table(5), 3, Echo(drop=1))
    with pytest.raises(RuntimeError, match="returned 2 replies for 3 requests"):
        wrapper.generate_until_multi_round(requests_for(list(range(5))))


def test_no_requests_make_no_inner_call() -> None:
    wrapper = wrapped(Table(1), 2)
    assert wrapper.generate_until_multi_round([]) == []
    assert wrapper.inner.batches == []


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "many", ""])
def test_a_bad_chunk_size_is_a_clear_error(bad) -> None:
    with pytest.raises(ValueError, match=r"hvcu_context: chunk_size must be a positive integer.*got"):
        ContextWrapper.around(Echo(), chunk_size=bad)


def test_chunk_size_is_a_model_argument_for_the_wrapper_not_the_inner_model(monkeypatch) -> None:
    import lmms_eval.models

    seen: dict = {}

    class Inner(Echo):
        def __init__(self, **kwargs) -> None:
            seen.update(kwargs)
            super().__init__()

    monkeypatch.setattr(lmms_eval.models, "get_model", lambda name: Inner)
    wrapper = ContextWrapper(inner="inner", chunk_size="4", model_version="m")
    assert wrapper.chunk_size == 4
    assert seen == {"model_version": "m"}


def test_a_bad_chunk_size_fails_before_the_inner_model_is_built(monkeypatch) -> None:
    import lmms_eval.models

    def no_model(name):
        raise AssertionError("the inner model must not be built")

    monkeypatch.setattr(lmms_eval.models, "get_model", no_model)
    with pytest.raises(ValueError, match="chunk_size"):
        ContextWrapper(inner="openai", chunk_size="0")
