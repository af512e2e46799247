"""Issue 13: a task's scores are computed once for all its metrics (the memo of `lmms.hook_table`, the aggregations
the YAMLs name; issue 35 moved it out of the core), and a sample-log line holds each outcome once.

The hand-built task below is scored by hand from the paper's definitions (level accuracy over the levels asked,
full-chain accuracy over complete chains, a failed chain attributed to its first wrong level); the expected
numbers are written out here, never taken from the code under test.
"""

from __future__ import annotations

import json
import logging
import math
import pickle
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from lmms_eval.utils import handle_non_serializable

from hvcu_tasks.core import aggregate as aggregations
from hvcu_tasks.core import metrics, payloads
from hvcu_tasks.core.families import ASPECTS
from hvcu_tasks.lmms import context, hook_table, hooks
from hvcu_tasks.results.chains import chains_of_file
from hvcu_tasks.results.scores import family_metrics

OPTIONS = ("A", "B", "C", "D")
TEXTS = ["a cat", "a dog", "a fish", "a bird"]

# sample -> (aspect, replies to L1-L3); every gold key is A. None: no reply came (a failed request).
# "(A)" is A under our rule and nothing under the authors' one. s3 answered L1 only (an incomplete chain).
CHAINS: dict[str, tuple[str, tuple[Any, ...]]] = {
    "m1": ("metaphor", ("A", "A", "(A)")),  # right, right, right       (authors': L3 wrong)
    "m2": ("metaphor", ("B", "A", "A")),  # wrong at L1
    "s1": ("symbolism", ("A", "C", "A")),  # wrong at L2
    "s2": ("symbolism", (None, "A", "D")),  # no reply at L1 (wrong, invalid, failed), wrong at L3 too
    "s3": ("symbolism", ("A",)),  # L1 only
}
# By hand. L1 asked 5 times, right m1 s1 s3; L2 and L3 asked 4 times, 3 right each. Complete chains: m1 m2 s1 s2,
# only m1 all right. First wrong levels: m2 L1, s1 L2, s2 L1 -> 2, 1, 0 of 3 failed chains.
EXPECTED: dict[str, float] = {
    "acc_l1_perc": 60.0,
    "acc_l2_bridge": 75.0,
    "acc_l3_conn": 75.0,
    "acc_full": 25.0,
    "acc_l1_perc_official": 60.0,
    "acc_l2_bridge_official": 75.0,
    "acc_l3_conn_official": 50.0,  # m1's "(A)" is no answer under the authors' rule
    "acc_full_official": 0.0,
    "invalid_perc": 20.0,
    "invalid_bridge": 0.0,
    "invalid_conn": 0.0,
    "errors_at_perc": 2,
    "errors_at_bridge": 1,
    "errors_at_conn": 0,
    "error_share_perc": 200 / 3,
    "error_share_bridge": 100 / 3,
    "error_share_conn": 0.0,
    "n_chains": 4,
    "n_incomplete": 1,
    "n_failed_requests": 1,
    "full_metaphor": 50.0,
    "full_symbolism": 0.0,
    "full_contrast": math.nan,
    "full_exaggeration": math.nan,
    "full_dislocation": math.nan,
}
NAMES = list(EXPECTED)  # the implication task's metrics
SEE_FULL = "see acc_full"


def base_doc(sample_id: str, aspect: str, level: int, family: str = "implication") -> dict[str, Any]:
    """One base-setting document (one level), gold A."""
    return {
        "sample_id": sample_id,
        "family": family,
        "aspect": aspect,
        "level": level,
        "question": f"What is drawn in {sample_id}, level {level}?",
        "option_keys": list(OPTIONS),
        "option_texts": TEXTS,
        "answer": "A",
        "data_identity": "",
    }


def context_doc(sample_id: str, aspect: str, family: str = "implication") -> dict[str, Any]:
    """One context-setting document (a whole chain), gold A at every level."""
    return {
        "sample_id": sample_id,
        "family": family,
        "aspect": aspect,
        "levels": [1, 2, 3],
        "questions": [f"What is drawn in {sample_id}, level {n}?" for n in (1, 2, 3)],
        "option_keys": [list(OPTIONS)] * 3,
        "option_texts": [TEXTS] * 3,
        "answers": ["A", "A", "A"],
        "data_identity": "",
    }


def base_results(tag: str = "", chains: Mapping[str, tuple[str, tuple]] = CHAINS) -> list[dict[str, Any]]:
    """process_results of every document of a base task (sample ids prefixed with `tag`)."""
    return [
        hooks.process_results(base_doc(tag + sid, aspect, n), [reply])
        for sid, (aspect, replies) in chains.items()
        for n, reply in enumerate(replies, start=1)
    ]


def by_metric(results: list[dict[str, Any]]) -> dict[str, list]:
    """What lmms-eval hands each metric's aggregation: that metric's value of every document."""
    return {name: [r[name] for r in results] for name in results[0]}


def aggregate(items: Mapping[str, list], names: list[str] = NAMES) -> dict[str, float | int]:
    """Every metric of one task: each reported one by its aggregation over its own items, as lmms-eval runs them."""
    return {name: metric_of(items, name) for name in names}


def metric_of(items: Mapping[str, list], name: str) -> float | int:
    """One metric of a task: its aggregation over its own items when reported to lmms-eval, else (a diagnostic,
    which has no items of its own) as `hvcu report` scores it from the acc_full payloads a sample log keeps."""
    if name in items:
        return hook_table.AGGREGATIONS[name](items[name])
    outcomes = [metrics.Outcome.from_dict(r) for r in payloads.flatten(items["acc_full"])]
    return family_metrics(outcomes, ASPECTS[outcomes[0].family])[name]


def assert_expected(got: Mapping[str, float | int], expected: Mapping[str, float] = EXPECTED) -> None:
    for name, value in expected.items():
        if math.isnan(value):
            assert math.isnan(got[name]), name
        else:
            assert got[name] == pytest.approx(value), name


def logged_line(metrics: Mapping[str, Any], reply: Any) -> str:
    """One `--log_samples` line as lmms-eval 0.7.3 writes it: the document's fields, then its metric values."""
    sample = {"doc_id": 0, "target": "A", "filtered_resps": reply, "token_counts": [None], "doc_hash": "0" * 64}
    sample.update(metrics)
    return json.dumps(sample, default=handle_non_serializable, ensure_ascii=False) + "\n"


def outcome_records(value: Any) -> int:
    """Count the per-level outcome records anywhere in a parsed JSON value."""
    if isinstance(value, dict):
        own = 1 if {"sample_id", "level", "correct_official"} <= set(value) else 0
        return own + sum(outcome_records(v) for v in value.values())
    if isinstance(value, list):
        return sum(outcome_records(v) for v in value)
    return 0


@pytest.fixture
def scoring_calls(monkeypatch) -> list[int]:
    """Count the calls of the function that scores a family's outcomes."""
    calls: list[int] = []
    real = metrics.score_table

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(aggregations, "score_table", counted)
    return calls


# ---------------------------------------------------------------- the sample log


def test_a_base_log_line_holds_its_outcome_once() -> None:
    metrics = hooks.process_results(base_doc("m1", "metaphor", 2), ["A"])
    line = json.loads(logged_line(metrics, "A"))
    assert outcome_records(line) == 1
    assert line["acc_full"]["outcomes"][0]["level"] == 2


def test_a_context_log_line_holds_each_level_once() -> None:
    metrics = context.process_results(context_doc("m1", "metaphor"), [["A", "B", "A"]])
    line = json.loads(logged_line(metrics, ["A", "B", "A"]))
    assert outcome_records(line) == 3
    assert [r["level"] for r in line["acc_full"]["outcomes"]] == [1, 2, 3]


def test_every_other_metric_is_logged_as_a_pointer_to_acc_full() -> None:
    result = hooks.process_results(base_doc("m1", "metaphor", 1), ["A"])
    line = json.loads(logged_line(result, "A"))
    others = [name for name in metrics.TABLE_METRICS if name != "acc_full"]
    assert {name: line[name] for name in others} == dict.fromkeys(others, SEE_FULL)
    assert not {"errors_at_perc", "full_metaphor", "position_bias"} & set(line)  # diagnostics: not reported


def test_the_chains_reader_reads_the_deduplicated_log(tmp_path: Path) -> None:
    metrics = context.process_results(context_doc("m2", "metaphor"), [["B", "A", "A"]])
    path = tmp_path / "20260101_000000_samples_hvcu_bench_context_impl.jsonl"
    path.write_text(logged_line(metrics, ["B", "A", "A"]), encoding="utf-8")
    (chain,) = chains_of_file("hvcu_bench_context_impl", path)
    assert chain["parsed"] == ["B", "A", "A"] and chain["chain_correct"] is False


def test_an_aggregation_fed_a_logged_pointer_says_where_the_outcomes_are() -> None:
    with pytest.raises(ValueError, match=r"item 0 .*acc_full"):
        hook_table.AGGREGATIONS["acc_l1_perc"]([SEE_FULL])


# ---------------------------------------------------------------- the numbers


def test_every_metric_matches_the_hand_computed_value() -> None:
    assert_expected(aggregate(by_metric(base_results("hand-"))))


def test_the_context_setting_gives_the_same_numbers_for_the_same_replies() -> None:
    docs = [(context_doc("ctx-" + sid, aspect), list(replies)) for sid, (aspect, replies) in CHAINS.items()]
    results = [context.process_results(doc, [replies]) for doc, replies in docs]
    expected = {**EXPECTED, "n_incomplete": 0, "n_chains": 5, "n_failed_requests": 3}
    # s3's two missing rounds count as failed requests scored wrong, so s3 is a complete chain failed at L2
    expected |= {
        "acc_l2_bridge": 60.0,
        "acc_l3_conn": 60.0,
        "acc_full": 20.0,
        "invalid_bridge": 20.0,
        "invalid_conn": 20.0,
    }
    expected |= {"acc_l2_bridge_official": 60.0, "acc_l3_conn_official": 40.0, "acc_full_official": 0.0}
    expected |= {"errors_at_bridge": 2, "error_share_perc": 50.0, "error_share_bridge": 50.0, "full_symbolism": 0.0}
    assert_expected(aggregate(by_metric(results)), expected)


# ---------------------------------------------------------------- scored once


def test_a_task_is_scored_once_for_all_its_metrics(scoring_calls: list[int]) -> None:
    aggregate(by_metric(base_results(f"once-{uuid.uuid4()}-")))
    assert len(scoring_calls) == 1


def test_copies_of_each_metrics_items_give_the_same_numbers_scored_once(scoring_calls: list[int]) -> None:
    items = {
        name: pickle.loads(pickle.dumps(values))
        for name, values in by_metric(base_results(f"copy-{uuid.uuid4()}-")).items()
    }
    assert_expected(aggregate(items))
    assert len(scoring_calls) == 1


def test_two_families_aggregated_in_turn_do_not_mix() -> None:
    impl = by_metric(base_results("mix-"))
    chains = {"a1": ("color", ("A", "A", "A")), "a2": ("font", ("A", "B", "A"))}  # a2 wrong at L2
    aesth = by_metric(
        [
            hooks.process_results(base_doc("mix-" + sid, aspect, n, "aesthetic"), [reply])
            for sid, (aspect, replies) in chains.items()
            for n, reply in enumerate(replies, start=1)
        ]
    )
    aesth_expected = {"acc_full": 50.0, "acc_l2_bridge": 50.0, "n_chains": 2, "errors_at_bridge": 1}
    for name, value in aesth_expected.items():  # one family, then the other, metric by metric
        assert metric_of(impl, name) == EXPECTED[name], name
        assert metric_of(aesth, name) == value, name
    assert metric_of(aesth, "full_color") == 100.0


def test_the_same_family_in_both_settings_does_not_mix() -> None:
    base = by_metric(base_results("both-"))
    all_right = [
        context.process_results(context_doc("both-" + sid, a), [["A", "A", "A"]]) for sid, (a, _) in CHAINS.items()
    ]
    chain = by_metric(all_right)  # the same samples, every level right
    chain_expected = {"acc_full": 100.0, "acc_l1_perc": 100.0, "n_chains": 5, "n_incomplete": 0, "errors_at_perc": 0}
    for name, value in chain_expected.items():
        assert metric_of(base, name) == EXPECTED[name], name
        assert metric_of(chain, name) == value, name


def test_warnings_are_logged_once_per_task(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="hvcu_tasks"):
        aggregate(by_metric(base_results("warn-")))
    messages = [r.getMessage() for r in caplog.records]
    assert sum("got no usable reply" in m for m in messages) == 1
    assert sum("lack one of their three levels" in m for m in messages) == 1
