"""One source of truth for metric names: what the tasks report, what human scoring and `hvcu chains` give."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hvcu_tasks.core import metrics
from hvcu_tasks.core.families import ASPECTS, FAMILIES
from hvcu_tasks.core.metrics import TABLE_METRICS, Outcome
from hvcu_tasks.lmms.taskgen import GROUP_METRICS, higher_is_better
from hvcu_tasks.results import scores
from hvcu_tasks.results.diagnostics import diagnostic_metric_names
from hvcu_tasks.results.runs import COUNT_PREFIXES, PERCENT_PREFIXES

LEVELS = ("perc", "bridge", "conn")
# Written from the README's metric table, not read from the code.
EXPECTED_AESTHETIC = [
    "acc_l1_perc",
    "acc_l2_bridge",
    "acc_l3_conn",
    "acc_full",
    "acc_l1_perc_official",
    "acc_l2_bridge_official",
    "acc_l3_conn_official",
    "acc_full_official",
    "invalid_perc",
    "invalid_bridge",
    "invalid_conn",
    "errors_at_perc",
    "errors_at_bridge",
    "errors_at_conn",
    "error_share_perc",
    "error_share_bridge",
    "error_share_conn",
    "n_chains",
    "n_incomplete",
    "n_failed_requests",
    "full_color",
    "full_composition",
    "full_font",
    "full_graphics",
    # answer-position bias and error propagation (issue 15), after the paper's metrics
    "pred_share_A",
    "pred_share_B",
    "pred_share_C",
    "pred_share_D",
    "gold_share_A",
    "gold_share_B",
    "gold_share_C",
    "gold_share_D",
    "position_bias",
    "wrong_bridge_after_wrong",
    "wrong_bridge_after_right",
    "wrong_conn_after_wrong",
    "wrong_conn_after_right",
]
# Written from the README: what a family task (any setting, circular too) reports to lmms-eval, in table order;
# every other metric above is a diagnostic `hvcu report` computes from the sample logs.
EXPECTED_PRINTED = [
    "acc_l1_perc",
    "acc_l2_bridge",
    "acc_l3_conn",
    "acc_full",
    "acc_l1_perc_official",
    "acc_l2_bridge_official",
    "acc_l3_conn_official",
    "acc_full_official",
    "n_chains",
    "n_incomplete",
    "n_failed_requests",
]
# Written from the README's circular-evaluation metric table.
EXPECTED_CIRCULAR = [
    "acc_l1_perc",
    "acc_l2_bridge",
    "acc_l3_conn",
    "acc_full",
    "acc_l1_perc_official",
    "acc_l2_bridge_official",
    "acc_l3_conn_official",
    "acc_full_official",
    "plain_acc_l1_perc",
    "plain_acc_l2_bridge",
    "plain_acc_l3_conn",
    "invalid_perc",
    "invalid_bridge",
    "invalid_conn",
    "n_chains",
    "n_incomplete",
    "n_failed_requests",
    "pred_share_A",
    "pred_share_B",
    "pred_share_C",
    "pred_share_D",
    "gold_share_A",
    "gold_share_B",
    "gold_share_C",
    "gold_share_D",
    "position_bias",
]


def table_part(names: list[str]) -> list[str]:
    """The names among `names` a task reports to lmms-eval, in their order."""
    return [n for n in names if n in TABLE_METRICS]


def _chain(sid: str, aspect: str, preds: str, golds: str = "AAA", failed: str = "---") -> list[Outcome]:
    return [
        Outcome(sid, "aesthetic", aspect, lv, g, None if p == "-" else p, p, failed=f == "x")
        for lv, p, g, f in zip((1, 2, 3), preds, golds, failed, strict=True)
    ]


def test_the_scores_object_names_exactly_the_metrics_of_the_table_in_its_order() -> None:
    task = scores.score_task(_chain("c1", "color", "AAA"))
    assert list(task.as_metrics(ASPECTS["aesthetic"])) == EXPECTED_AESTHETIC
    assert scores.metric_names(ASPECTS["aesthetic"]) == EXPECTED_AESTHETIC


def test_the_core_scores_name_exactly_what_lmms_eval_prints_in_its_order() -> None:
    assert list(metrics.TABLE_METRICS) == EXPECTED_PRINTED
    assert list(metrics.score_table(_chain("c1", "color", "AAA"))) == EXPECTED_PRINTED
    assert list(metrics.score_circular([])) == EXPECTED_PRINTED


def test_the_circular_scores_name_exactly_the_circular_metrics_in_order() -> None:
    assert scores.circular_metric_names() == EXPECTED_CIRCULAR


def test_the_scores_object_gives_both_rules_and_the_failed_requests() -> None:
    outcomes = [
        *_chain("c1", "color", "AAA"),
        *_chain("c2", "font", "A-A", failed="-x-"),
        # our parser reads B, the authors' rule reads A (the gold): right only under theirs
        Outcome("c3", "aesthetic", "font", 1, "A", "B", "x", pred_official="A"),
        *_chain("c3", "font", "AAA")[1:],
    ]
    got = scores.score_task(outcomes).as_metrics(ASPECTS["aesthetic"])
    assert got["acc_l1_perc"] == pytest.approx(200 / 3) and got["acc_l1_perc_official"] == 100.0
    assert got["acc_full"] == pytest.approx(100 / 3) and got["acc_full_official"] == pytest.approx(200 / 3)
    assert got["n_failed_requests"] == 1 and got["n_chains"] == 3 and got["n_incomplete"] == 0
    assert got["errors_at_perc"] == 1 and got["errors_at_bridge"] == 1 and got["error_share_bridge"] == 50.0
    assert got["full_color"] == 100.0 and got["full_font"] == 0.0 and math.isnan(got["full_graphics"])


def test_what_a_task_reports_is_both_rules_and_the_counts_by_hand() -> None:
    outcomes = [
        *_chain("c1", "color", "AAA"),  # right at every level
        *_chain("c2", "font", "A-A", failed="-x-"),  # no reply at L2: wrong under both rules, a failed request
        Outcome("c3", "aesthetic", "font", 1, "A", "B", "x", pred_official="A"),  # wrong for us, right for theirs
        *_chain("c3", "font", "AAA")[1:],
    ]
    assert metrics.score_table(outcomes) == {
        **{"acc_l1_perc": pytest.approx(200 / 3), "acc_l2_bridge": pytest.approx(200 / 3), "acc_l3_conn": 100.0},
        "acc_full": pytest.approx(100 / 3),  # c1
        **{
            "acc_l1_perc_official": 100.0,
            "acc_l2_bridge_official": pytest.approx(200 / 3),
            "acc_l3_conn_official": 100.0,
        },
        "acc_full_official": pytest.approx(200 / 3),  # c1, c3
        **{"n_chains": 3, "n_incomplete": 0, "n_failed_requests": 1},
    }


def test_failed_is_a_field_that_survives_the_logged_record() -> None:
    failed = Outcome("s", "aesthetic", "color", 2, "A", None, "", failed=True)
    record = failed.to_dict()
    assert record["failed"] is True and record["correct"] is False
    assert Outcome.from_dict(record) == failed
    assert Outcome.from_dict({k: v for k, v in record.items() if k != "failed"}).failed is False  # older logs


def test_the_logged_record_keeps_its_keys() -> None:
    record = Outcome("s", "aesthetic", "color", 1, "A", "A", "A", failed=False).to_dict()
    assert set(record) == {
        "sample_id", "family", "aspect", "level", "gold", "pred", "response", "pred_official", "failed", "correct",
        "correct_official", "data",
    }  # fmt: skip


def test_the_data_source_is_a_field_of_the_logged_record() -> None:
    record = Outcome("s", "aesthetic", "color", 1, "A", "A", "A", data="sha256:0f").to_dict()
    assert record["data"] == "sha256:0f" and Outcome.from_dict(record).data == "sha256:0f"
    assert Outcome.from_dict({k: v for k, v in record.items() if k != "data"}).data is None  # older logs


def test_one_grouping_finds_complete_chains_and_refuses_a_repeated_level() -> None:
    outcomes = [*_chain("c1", "color", "AAA"), *_chain("c2", "font", "AAA")[:2]]
    grouped = metrics.group_chains(outcomes)
    assert sorted(grouped) == [("aesthetic", "c1"), ("aesthetic", "c2")]
    assert sorted(grouped[("aesthetic", "c2")]) == [1, 2]
    with pytest.raises(ValueError, match="duplicate outcome for sample 'c1' level 1"):
        metrics.group_chains(outcomes + _chain("c1", "color", "AAA")[:1])


def test_human_scoring_reports_the_task_names() -> None:
    from generation.human.score import average_family

    for family, aspects in ASPECTS.items():
        assert list(average_family([metrics.score_family([])], family)) == scores.metric_names(aspects)


def _replay_outputs(tmp_path: Path, authors_results: Path) -> dict:
    from conftest import run_lmms_eval

    args = ["--model", "hvcu_replay", "--model_args", f"predictions={authors_results}", "--tasks", "hvcu_bench_sample"]
    return run_lmms_eval(args, tmp_path / "out")


@pytest.mark.slow
def test_every_metric_lmms_eval_prints_is_named_by_the_one_source(authors_results: Path, tmp_path: Path) -> None:
    results = _replay_outputs(tmp_path, authors_results)
    printed: dict[str, set[str]] = {}
    for task, values in results["results"].items():
        # numbers (NaN written as NaN, or null) are metrics; an object is a record such as the data identity
        numbers = {
            k.split(",")[0] for k, v in values.items() if "," in k and "_stderr" not in k and not isinstance(v, dict)
        }
        printed[task] = numbers
    for family, (_split, _stem, short) in FAMILIES.items():
        assert printed.pop(f"hvcu_bench_sample_{short}") == set(EXPECTED_PRINTED), family
        assert set(EXPECTED_PRINTED) == set(table_part(scores.metric_names(ASPECTS[family])))
    assert printed == {"hvcu_bench_sample": {"acc_full", "acc_full_official"}}  # the Score under both rules


def test_what_lmms_eval_prints_and_what_the_report_computes_split_every_metric() -> None:
    for family, aspects in ASPECTS.items():
        names = scores.metric_names(aspects)
        assert table_part(names) == EXPECTED_PRINTED, family
        diagnostics = diagnostic_metric_names(names)
        assert diagnostics == [n for n in EXPECTED_AESTHETIC if n not in EXPECTED_PRINTED] or family != "aesthetic"
        assert set(diagnostics) | set(EXPECTED_PRINTED) == set(names) and not set(diagnostics) & set(EXPECTED_PRINTED)
    circular = scores.circular_metric_names()
    assert table_part(circular) == EXPECTED_PRINTED
    assert diagnostic_metric_names(circular) == [n for n in EXPECTED_CIRCULAR if n not in EXPECTED_PRINTED]


# --- hvcu chains: the metrics' grouping, both parsing rules ------------------------------------------------


def _base_line(sid: str, level: int, reply: str, pred: str | None, gold: str = "B", **extra: object) -> dict:
    """One base-setting samples line as the harness logs it (the payload has no raw reply; resps has it)."""
    record = {"sample_id": sid, "family": "implication", "aspect": "metaphor", "level": level, "gold": gold}
    record |= {"pred": pred, "correct": pred == gold, "failed": False, **extra}
    return {"doc_id": level, "resps": [[reply]], "acc_full": {"outcomes": [record], "question": f"q{level}"}}


def _samples(tmp_path: Path, lines: list[dict]) -> Path:
    path = tmp_path / "20260101_000000_samples_hvcu_bench_impl.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_hvcu_chains_gives_the_authors_parse_and_verdict(tmp_path: Path) -> None:
    from hvcu_tasks.results.chains import chains_of_file

    lines = [
        _base_line("metaphor_001", 1, "The answer is (B).", "B", pred_official=None, correct_official=False),
        _base_line("metaphor_001", 2, "B", "B", pred_official="B", correct_official=True),
        _base_line("metaphor_001", 3, "B.", "B", pred_official="B", correct_official=True),
    ]
    (chain,) = chains_of_file("hvcu_bench_impl", _samples(tmp_path, lines))
    assert chain["parsed"] == ["B", "B", "B"] and chain["chain_correct"] is True
    assert chain["parsed_official"] == [None, "B", "B"] and chain["chain_correct_official"] is False


def test_hvcu_chains_reads_a_log_written_before_the_authors_parse_was_logged(tmp_path: Path) -> None:
    from hvcu_tasks.results.chains import chains_of_file

    lines = [_base_line("metaphor_001", lv, reply, "B") for lv, reply in ((1, "B"), (2, "(B)"), (3, "B"))]
    (chain,) = chains_of_file("hvcu_bench_impl", _samples(tmp_path, lines))
    assert chain["parsed_official"] == ["B", None, "B"] and chain["chain_correct_official"] is False


def test_hvcu_chains_leaves_the_verdicts_of_a_cut_chain_open(tmp_path: Path) -> None:
    from hvcu_tasks.results.chains import chains_of_file

    lines = [_base_line("metaphor_001", lv, "B", "B", pred_official="B") for lv in (1, 2)]
    (chain,) = chains_of_file("hvcu_bench_impl", _samples(tmp_path, lines))
    assert chain["chain_correct"] is None and chain["chain_correct_official"] is None


def test_hvcu_chains_refuses_a_level_logged_twice(tmp_path: Path) -> None:
    from hvcu_tasks.results.chains import chains_of_file

    lines = [_base_line("metaphor_001", lv, "B", "B") for lv in (1, 2, 3, 2)]
    path = _samples(tmp_path, lines)
    with pytest.raises(ValueError, match="metaphor_001' level 2") as err:
        chains_of_file("hvcu_bench_impl", path)
    assert str(path) in str(err.value)


def test_every_metric_is_a_percentage_or_a_count_and_says_which_way_is_better() -> None:
    names = scores.metric_names(ASPECTS["implication"])
    percent = {n for n in names if n.startswith(PERCENT_PREFIXES)}
    counts = {n for n in names if n.startswith(COUNT_PREFIXES)}
    assert percent | counts == set(names) and not percent & counts
    expected_counts = {"errors_at_perc", "errors_at_bridge", "errors_at_conn"}
    assert counts == expected_counts | {"n_chains", "n_incomplete", "n_failed_requests"}
    # what a task YAML declares for each metric it lists: the accuracies up, the counts neither (no arrow printed)
    expected = {n: True if n.startswith("acc_") else None for n in EXPECTED_PRINTED}
    assert {n: higher_is_better(n) for n in EXPECTED_PRINTED} == expected


def test_every_circular_metric_is_a_percentage_or_a_count() -> None:
    names = scores.circular_metric_names()
    percent = {n for n in names if n.startswith(PERCENT_PREFIXES)}
    counts = {n for n in names if n.startswith(COUNT_PREFIXES)}
    assert percent | counts == set(names) and not percent & counts
    assert counts == {"n_chains", "n_incomplete", "n_failed_requests"}


def test_a_group_reports_the_score_under_both_rules() -> None:
    assert GROUP_METRICS == ("acc_full", "acc_full_official")
