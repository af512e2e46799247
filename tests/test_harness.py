"""The lmms-eval glue: level documents, the data-source switch, per-document payloads, aggregations."""

from __future__ import annotations

import gc
import math

import datasets
import pytest
from conftest import item
from lmms_eval.protocol import ChatMessages

from hvcu_tasks import settings
from hvcu_tasks.core import aggregate, payloads
from hvcu_tasks.core.documents import level_rows, sample_rows
from hvcu_tasks.core.families import ASPECTS
from hvcu_tasks.core.metrics import TABLE_METRICS, Outcome
from hvcu_tasks.core.prompts import SYSTEM_PROMPT
from hvcu_tasks.core.schema import TaskLoadError
from hvcu_tasks.lmms import documents, hook_table, hooks
from hvcu_tasks.results.scores import family_metrics


def stub(family: str, source: str) -> datasets.Dataset:
    return datasets.Dataset.from_list([{"family": family, "source": source}])


def test_documents_are_one_per_level_in_sample_order() -> None:
    docs = hooks.process_docs(stub("implication", "smoke"))
    assert len(docs) == 15
    assert [(d["sample_id"], d["level"]) for d in docs][:4] == [
        ("metaphor_001", 1),
        ("metaphor_001", 2),
        ("metaphor_001", 3),
        ("symbolism_001", 1),
    ]
    assert docs[0]["image_path"].endswith("metaphor_001.png") and docs[0]["image_bytes"] is None
    assert hooks.doc_to_visual(docs[0])[0].size == (96, 96)


def test_env_variable_points_hub_tasks_at_a_local_copy(write_dataset, monkeypatch) -> None:
    root = write_dataset({"aesthetic": [item("font_001"), item("color_001")]})
    monkeypatch.setenv(settings.DATA_ENV, str(root))
    docs = hooks.process_docs(stub("aesthetic", "hub"))
    assert sorted({d["sample_id"] for d in docs}) == ["color_001", "font_001"]


def test_env_variable_does_not_redirect_the_smoke_tasks(monkeypatch) -> None:
    monkeypatch.setenv(settings.DATA_ENV, "/nowhere")
    assert settings.resolve_source("smoke", settings.current({settings.DATA_ENV: "/nowhere"})) == "smoke"
    assert len(hooks.process_docs(stub("affective", "smoke"))) == 18


def test_a_broken_local_copy_stops_the_task_with_every_problem(write_dataset, monkeypatch) -> None:
    root = write_dataset({"affective": [item("joy_001"), item("fear_001")]}, images=False)
    monkeypatch.setenv(settings.DATA_ENV, str(root))
    with pytest.raises(TaskLoadError, match=r"(?s)id=joy_001: image.*id=fear_001: image"):
        hooks.process_docs(stub("affective", "hub"))


def test_the_garbage_collector_is_back_on_after_a_load_that_fails(write_dataset, monkeypatch) -> None:
    root = write_dataset({"affective": [item("joy_001")]}, images=False)
    monkeypatch.setenv(settings.DATA_ENV, str(root))
    with pytest.raises(TaskLoadError):
        hooks.process_docs(stub("affective", "hub"))
    assert gc.isenabled()


def test_a_load_leaves_a_paused_garbage_collector_paused() -> None:
    gc.disable()
    try:
        hooks.process_docs(stub("implication", "smoke"))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_table_fingerprint_follows_the_data_identity() -> None:
    smoke = documents.task_data(stub("implication", "smoke"))
    samples, identity = smoke

    def table(rows, kind: str, identity: str) -> datasets.Dataset:
        return hooks.document_table(list(rows(samples, identity)), kind, identity)

    again = table(level_rows, "levels", identity)
    assert again._fingerprint == table(level_rows, "levels", identity)._fingerprint
    assert table(level_rows, "levels", identity + " ")._fingerprint != again._fingerprint
    assert len({again._fingerprint, table(sample_rows, "chains", identity)._fingerprint}) == 2


def test_messages_follow_the_protocol_and_lmms_eval_schema() -> None:
    doc = hooks.process_docs(stub("implication", "smoke"))[0]
    messages = hooks.doc_to_messages(doc)
    ChatMessages(messages=messages)
    assert messages[0]["content"][0]["text"] == SYSTEM_PROMPT
    assert messages[1]["content"][0]["text"].startswith("What object is drawn behind the grey bars?\nOptions:\nA. ")
    assert hooks.doc_to_visual(doc)[0].mode == "RGB"


def test_process_results_payload_names_sample_level_and_parsed_letter() -> None:
    doc = hooks.process_docs(stub("implication", "smoke"))[1]
    result = hooks.process_results(doc, ["The answer is (A)."])
    assert set(result) == set(TABLE_METRICS)
    identity = result["acc_full"]["data_identity"]
    assert identity["kind"] == "smoke"  # every sample-log line names the data it read
    assert identity["fingerprint"].startswith("sha256:")
    assert result["acc_l1_perc"]["outcomes"] == [
        {
            "sample_id": "metaphor_001",
            "family": "implication",
            "aspect": "metaphor",
            "level": 2,
            "gold": "A",
            "pred": "A",
            "pred_official": None,  # the authors' rule rejects "(A)"
            "correct": True,
            "correct_official": False,
            "failed": False,
            "data": identity["fingerprint"],  # each outcome names the data its question came from
        }
    ]
    assert result["acc_full"]["question"].startswith("What does placing the heart behind bars suggest?")


def test_failed_api_requests_are_counted() -> None:
    doc = hooks.process_docs(stub("implication", "smoke"))[0]
    payload = hooks.process_results(doc, ["[LMMS_EVAL_REQUEST_FAILED after 5 retries] 503"])["n_failed_requests"]
    assert payload["outcomes"][0]["failed"] and payload["outcomes"][0]["pred"] is None
    assert hook_table.AGGREGATIONS["n_failed_requests"]([payload]) == 1


def test_aggregations_and_the_missing_aspect() -> None:
    docs = hooks.process_docs(stub("aesthetic", "smoke"))
    items = [hooks.process_results(d, [d["answer"]])["acc_full"] for d in docs if d["sample_id"] != "font_001"]
    assert hook_table.AGGREGATIONS["acc_full"](items) == 100.0
    assert hook_table.AGGREGATIONS["n_chains"](items) == 3
    outcomes = [Outcome.from_dict(r) for r in payloads.flatten(items)]  # the report's diagnostics, as logged
    assert math.isnan(family_metrics(outcomes, ASPECTS["aesthetic"])["full_font"])  # not available, never a made-up 0


def test_cut_chains_are_reported(caplog) -> None:
    docs = hooks.process_docs(stub("aesthetic", "smoke"))
    items = [hooks.process_results(d, [d["answer"]])["acc_full"] for d in list(docs)[:4]]
    assert hook_table.AGGREGATIONS["n_incomplete"](items) == 1
    assert hook_table.AGGREGATIONS["acc_full"](items) == 100.0
    assert "lack one of their three levels" in caplog.text


def test_group_aggregation_is_the_unweighted_overall_score() -> None:
    assert aggregate.overall_score_group([53.25, 53.14, 50.33], [1200, 1050, 900], False) == 52.24
    with pytest.raises(ValueError, match="unweighted"):
        aggregate.overall_score_group([1.0], [1], True)
