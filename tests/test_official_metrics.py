"""The *_official metrics: the paper-comparable accuracies under the authors' parsing rule, beside ours.

Replies are chosen so that the two rules read them differently; every expected number is worked out by
hand from the smoke sample's gold keys, our parser's documented behaviour and the authors' rule.
"""

from __future__ import annotations

import glob
import json
import math
import shutil
from pathlib import Path

import datasets
import pytest
from conftest import report_metrics, run_lmms_eval

from hvcu_tasks.core import aggregate, payloads
from hvcu_tasks.core.families import ASPECTS
from hvcu_tasks.core.metrics import Outcome, overall_score
from hvcu_tasks.core.prompts import NO_ANSWER
from hvcu_tasks.lmms import context, hook_table, hooks
from hvcu_tasks.results.scores import family_metrics

ECHO_SYMBOLISM_L1 = "A. A green branch\nB. A letter\nC. A fish\nD. Nothing"

# (family, sample id) -> replies to levels 1-3. Gold keys in comments; (ours | authors') where they differ.
REPLIES: dict[tuple[str, str], tuple[str, str, str]] = {
    # implication
    ("implication", "metaphor_001"): ("The answer is (B).", "A", "C"),  # BAC; L1 (B | none)
    ("implication", "symbolism_001"): (ECHO_SYMBOLISM_L1, "D", "B"),  # ADB; L1 (none | A)
    ("implication", "contrast_001"): ("C", "A", "B"),  # CAB
    ("implication", "exaggeration_001"): ("D", "Option B", "A"),  # DBA; L2 (B | none)
    ("implication", "dislocation_001"): ("C", "C", "B)"),  # CCB; L3 (B | none)
    # aesthetic
    ("aesthetic", "color_001"): ("Red.", "B", "A"),  # DBA; L1 (none | D)
    ("aesthetic", "composition_001"): ("(C)", "A", "D"),  # CAD; L1 (C | none)
    ("aesthetic", "font_001"): ("C", "B", "A"),  # CBA
    ("aesthetic", "graphics_001"): ("B", "C", "Solid."),  # BCD; L3 (none | D)
    # affective
    ("affective", "joy_001"): ("A", "B", "C"),
    ("affective", "affection_001"): ("B", "D", "A"),
    ("affective", "wonder_001"): ("C", "A", "B"),
    ("affective", "anger_001"): ("D", "**C**", "B"),  # DCB; both read C
    ("affective", "fear_001"): ("A", "B", "C"),
    ("affective", "sadness_001"): ("Based on the image, D.", "B", "A"),  # DBA; L1 (D | none)
}

# By hand. Implication: ours misses symbolism L1; the authors' misses metaphor L1, exaggeration L2,
# dislocation L3. Aesthetic: ours misses color L1 and graphics L3; the authors' misses composition L1.
# Affective: ours gets everything; the authors' misses sadness L1.
EXPECTED = {
    "implication": {
        "acc_l1_perc": 80.0,
        "acc_l2_bridge": 100.0,
        "acc_l3_conn": 100.0,
        "acc_full": 80.0,
        "invalid_perc": 20.0,
        "acc_l1_perc_official": 80.0,
        "acc_l2_bridge_official": 80.0,
        "acc_l3_conn_official": 80.0,
        "acc_full_official": 40.0,
    },
    "aesthetic": {
        "acc_l1_perc": 75.0,
        "acc_l2_bridge": 100.0,
        "acc_l3_conn": 75.0,
        "acc_full": 50.0,
        "invalid_perc": 25.0,
        "invalid_conn": 25.0,
        "acc_l1_perc_official": 75.0,
        "acc_l2_bridge_official": 100.0,
        "acc_l3_conn_official": 100.0,
        "acc_full_official": 75.0,
    },
    "affective": {
        "acc_l1_perc": 100.0,
        "acc_l2_bridge": 100.0,
        "acc_l3_conn": 100.0,
        "acc_full": 100.0,
        "acc_l1_perc_official": 500 / 6,
        "acc_l2_bridge_official": 100.0,
        "acc_l3_conn_official": 100.0,
        "acc_full_official": 500 / 6,
    },
}
OVERALL = round((80.0 + 50.0 + 100.0) / 3, 2)  # 76.67
OVERALL_OFFICIAL = round((40.0 + 75.0 + 500 / 6) / 3, 2)  # 66.11
SHORT = {"implication": "impl", "aesthetic": "aesth", "affective": "affect"}


def stub(family: str) -> datasets.Dataset:
    return datasets.Dataset.from_list([{"family": family, "source": "smoke"}])


def base_items(family: str) -> list[dict]:
    docs = hooks.process_docs(stub(family))
    return [hooks.process_results(d, [REPLIES[(family, d["sample_id"])][d["level"] - 1]])["acc_full"] for d in docs]


def context_items(family: str) -> list[dict]:
    docs = context.process_docs(stub(family))
    return [context.process_results(d, [list(REPLIES[(family, d["sample_id"])])])["acc_full"] for d in docs]


def metric_of(items: list[dict], metric: str, family: str) -> float:
    """A reported metric by its aggregation; a diagnostic (invalid_*) as `hvcu report` scores the logged outcomes."""
    if metric in hook_table.AGGREGATIONS:
        return hook_table.AGGREGATIONS[metric](items)
    return family_metrics([Outcome.from_dict(r) for r in payloads.flatten(items)], ASPECTS[family])[metric]


@pytest.mark.parametrize("family", list(EXPECTED))
def test_base_setting_reports_both_rules(family: str) -> None:
    items = base_items(family)
    for metric, value in EXPECTED[family].items():
        assert metric_of(items, metric, family) == pytest.approx(value), metric


@pytest.mark.parametrize("family", list(EXPECTED))
def test_context_setting_reports_both_rules(family: str) -> None:
    items = context_items(family)
    for metric, value in EXPECTED[family].items():
        assert metric_of(items, metric, family) == pytest.approx(value), metric


def test_the_overall_scores_by_hand() -> None:
    assert OVERALL == 76.67 and OVERALL_OFFICIAL == 66.11
    assert aggregate.overall_score_group([40.0, 75.0, 500 / 6], [15, 12, 18]) == 66.11


def test_every_family_task_names_the_four_official_metrics() -> None:
    doc = hooks.process_docs(stub("aesthetic"))[0]
    names = set(hooks.process_results(doc, ["D"]))
    assert {"acc_l1_perc_official", "acc_l2_bridge_official", "acc_l3_conn_official", "acc_full_official"} <= names


@pytest.mark.parametrize(
    "group", ["hvcu_bench", "hvcu_bench_context", "hvcu_bench_sample", "hvcu_bench_context_sample"]
)
def test_every_group_reports_the_overall_score_under_both_rules(group: str) -> None:
    from lmms_eval.utils import load_yaml_config

    from hvcu_tasks.lmms.plugin import TASKS_DIR

    config = load_yaml_config(str(TASKS_DIR / f"{group}.yaml"), mode="full")
    assert [m["metric"] for m in config["aggregate_metric_list"]] == ["acc_full", "acc_full_official"]
    # utils.py is loaded as its own module per YAML, so compare by name, not identity.
    assert {m["aggregation"].__name__ for m in config["aggregate_metric_list"]} == {"overall_score_group"}


REPORTED = [
    *("acc_l1_perc", "acc_l2_bridge", "acc_l3_conn", "acc_full"),
    *("acc_l1_perc_official", "acc_l2_bridge_official", "acc_l3_conn_official", "acc_full_official"),
    *("n_chains", "n_incomplete", "n_failed_requests"),
]
"""What a family task (any setting) reports to lmms-eval, from the README's metric table."""


def test_one_aggregation_per_reported_metric_and_none_for_a_diagnostic() -> None:
    assert list(hook_table.AGGREGATIONS) == REPORTED
    assert list(hook_table.CIRCULAR_AGGREGATIONS) == REPORTED
    doc = hooks.process_docs(stub("aesthetic"))[0]
    assert sorted(hooks.process_results(doc, ["D"])) == sorted(REPORTED)


def test_a_yaml_that_names_a_diagnostics_aggregation_is_refused_when_lmms_eval_reads_it(tmp_path: Path) -> None:
    from lmms_eval.utils import load_yaml_config

    from hvcu_tasks.lmms.plugin import TASKS_DIR

    shutil.copy(TASKS_DIR / "utils.py", tmp_path / "utils.py")  # lmms-eval finds utils.py beside the YAML
    yaml = tmp_path / "mine.yaml"
    yaml.write_text(
        "task: mine\nmetric_list:\n  - metric: position_bias\n    aggregation: !function utils.agg_position_bias\n"
    )
    with pytest.raises(AttributeError) as err:
        load_yaml_config(str(yaml), mode="full")
    assert str(err.value).startswith(f"utils.agg_position_bias: an HVCU-Bench task reports only {', '.join(REPORTED)}")
    assert "`hvcu report` computes them from a --log_samples run" in str(err.value)


def test_the_per_document_record_carries_both_parses() -> None:
    doc = hooks.process_docs(stub("aesthetic"))[0]  # color_001 L1, gold D
    record = hooks.process_results(doc, ["Red."])["acc_full"]["outcomes"][0]
    assert (record["pred"], record["correct"]) == (None, False)
    assert (record["pred_official"], record["correct_official"]) == ("D", True)


def test_a_failed_request_is_wrong_under_the_authors_rule_too() -> None:
    # On its own the authors' rule would read the last line "A" (the gold key of metaphor_001 L2).
    doc = hooks.process_docs(stub("implication"))[1]
    record = hooks.process_results(doc, ["[LMMS_EVAL_REQUEST_FAILED after 5 retries]\nA"])["acc_full"]["outcomes"][0]
    assert record["failed"] is True
    assert record["pred_official"] is None and record["correct_official"] is False


def test_the_context_log_entry_shows_both_verdicts() -> None:
    doc = context.process_docs(stub("implication"))[0]  # metaphor_001, gold BAC
    entry = context.process_results(doc, [list(REPLIES[("implication", "metaphor_001")])])["acc_full"]
    assert entry["parsed"] == ["B", "A", "C"] and entry["chain_correct"] is True
    assert entry["parsed_official"] == [None, "A", "C"] and entry["chain_correct_official"] is False


def test_the_context_history_keeps_our_parse() -> None:
    docs = context.process_docs(stub("aesthetic"))
    composition = next(d for d in docs if d["sample_id"] == "composition_001")
    messages, _done, _replies, _info = context.doc_to_messages(composition, round_idx=1, previous_output=["(C)"])
    assert messages[2]["content"] == [{"type": "text", "text": "C"}]  # ours reads C; the authors' reads nothing
    color = next(d for d in docs if d["sample_id"] == "color_001")
    messages, _done, _replies, _info = context.doc_to_messages(color, round_idx=1, previous_output=["Red."])
    assert messages[2]["content"] == [{"type": "text", "text": "Red."}]  # ours reads nothing: its own words
    assert messages[2]["content"][0]["text"] != NO_ANSWER


def test_an_empty_denominator_is_not_available_under_the_authors_rule() -> None:
    items = base_items("aesthetic")[:2]  # color_001 L1 and L2 only: no complete chain
    assert math.isnan(hook_table.AGGREGATIONS["acc_full_official"](items))
    assert math.isnan(hook_table.AGGREGATIONS["acc_l3_conn_official"](items))
    assert hook_table.AGGREGATIONS["acc_l1_perc_official"](items) == 100.0
    assert math.isnan(aggregate.overall_score_group([math.nan, 75.0, 80.0], [1, 12, 18]))


def test_an_outcome_built_without_the_official_parse_takes_it_from_the_reply() -> None:
    # Code that builds outcomes itself (human scoring, `hvcu score`) gets the authors' reading of the reply.
    assert Outcome("s", "implication", "metaphor", 1, "B", "B", "(B)").pred_official is None
    assert Outcome("s", "implication", "metaphor", 1, "B", "B", "B.").pred_official == "B"
    given = Outcome("s", "implication", "metaphor", 1, "B", "B", "(B)", pred_official="B")
    assert given.pred_official == "B"
    assert Outcome.from_dict(given.to_dict()) == given


def test_overall_score_of_the_official_accuracies_is_the_plain_mean() -> None:
    assert overall_score([40.0, 75.0, 500 / 6]) == OVERALL_OFFICIAL


def write_replies(path: Path) -> Path:
    lines = [
        json.dumps({"family": family, "sample_id": sid, "level": level, "response": reply})
        for (family, sid), replies in REPLIES.items()
        for level, reply in enumerate(replies, start=1)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_both_rules_through_the_lmms_eval_cli_in_both_settings(tmp_path: Path) -> None:
    replies = write_replies(tmp_path / "replies.jsonl")
    out = tmp_path / "out"
    results = run_lmms_eval(
        [
            "--model",
            "hvcu_context",
            "--model_args",
            f"inner=hvcu_replay,predictions={replies}",
            "--tasks",
            "hvcu_bench_sample,hvcu_bench_context_sample",
            "--log_samples",
        ],
        out,
    )
    assert results["results"]["hvcu_bench_sample"]["acc_full,none"] == OVERALL
    got = report_metrics(out)  # invalid_* (a diagnostic): from the sample logs, as `hvcu report` reads them
    for prefix in ("hvcu_bench_sample", "hvcu_bench_context_sample"):
        assert got[prefix]["acc_full,none"] == OVERALL, prefix
        assert got[prefix]["acc_full_official,none"] == OVERALL_OFFICIAL, prefix
        for family, expected in EXPECTED.items():
            task = f"{prefix}_{SHORT[family]}"
            for metric, value in expected.items():
                assert got[task][f"{metric},none"] == pytest.approx(value), (task, metric)
    base_log = glob.glob(str(out / "**" / "*_samples_hvcu_bench_sample_aesth.jsonl"), recursive=True)
    records = [
        r for line in Path(base_log[0]).read_text().splitlines() for r in json.loads(line)["acc_full"]["outcomes"]
    ]
    color_l1 = next(r for r in records if r["sample_id"] == "color_001" and r["level"] == 1)
    assert (color_l1["pred"], color_l1["pred_official"], color_l1["correct_official"]) == (None, "D", True)
    context_log = glob.glob(str(out / "**" / "*_samples_hvcu_bench_context_sample_impl.jsonl"), recursive=True)
    entries = [json.loads(line)["acc_full"] for line in Path(context_log[0]).read_text().splitlines()]
    metaphor = next(e for e in entries if e["sample_id"] == "metaphor_001")
    assert metaphor["parsed"] == ["B", "A", "C"] and metaphor["parsed_official"] == [None, "A", "C"]
    assert metaphor["chain_correct"] is True and metaphor["chain_correct_official"] is False
