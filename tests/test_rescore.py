"""`hvcu score`: re-scoring the authors' result files, with their parser's keys or ours."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SMOKE_EXPECTED, SMOKE_SCORE

from hvcu_tasks.cli import main
from hvcu_tasks.results.rescore import read_result_file, score_runs

LEVEL = {"perc": 1, "bridge": 2, "conn": 3}


def test_scores_every_family_and_the_overall_score(authors_results: Path) -> None:
    (summary,) = score_runs(sorted(authors_results.iterdir()))  # no model name or setting: one unnamed run
    assert summary["overall_score_official"] == SMOKE_SCORE  # the stored keys are the authors' rule's output
    for family, expected in SMOKE_EXPECTED.items():
        fam = summary["families_official"][family]
        flat = {
            **{f"acc_l{LEVEL[k]}_{k}": v for k, v in fam["acc"].items()},  # the reported names
            "acc_full": fam["acc_full"],
            **{f"invalid_{k}": v for k, v in fam["invalid"].items()},
            **{f"errors_at_{k}": v for k, v in fam["error_counts"].items()},
            **{f"error_share_{k}": v for k, v in fam["error_share"].items()},
            **{f"full_{k}": v for k, v in fam["aspect_acc_full"].items()},
        }
        for metric, value in expected.items():
            assert flat[metric] == pytest.approx(value), (family, metric)


def test_one_family_gives_no_overall_score(authors_results: Path) -> None:
    (summary,) = score_runs([authors_results / "results_Aesthetic-Appreciation.json"])
    assert summary["overall_score_official"] is None
    assert "missing: implication, affective" in summary["note"]


def test_json_output_of_the_cli(authors_results: Path, capsys) -> None:
    assert main(["score", *map(str, sorted(authors_results.iterdir())), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["overall_score_official"] == SMOKE_SCORE


def test_table_output_of_the_cli(authors_results: Path, capsys) -> None:
    assert main(["score", *map(str, sorted(authors_results.iterdir()))]) == 0
    out = capsys.readouterr().out
    assert f"Overall Score (authors' rule): {SMOKE_SCORE:.2f}" in out
    assert "implication" in out and "80.00" in out


def test_reparse_applies_our_parser_to_raw_replies(tmp_path: Path) -> None:
    turns = [
        {"level": 1, "correct_answer_key": "B", "model_response_key": None, "model_response": "The answer is (B)."},
        {"level": 2, "correct_answer_key": "A", "model_response_key": "A", "model_response": "A"},
        {"level": 3, "correct_answer_key": "C", "model_response_key": "D", "model_response": "Red."},
    ]
    path = tmp_path / "Implication-Understanding_results.json"
    path.write_text(json.dumps({"predictions": [{"id": 1, "conversation_turns": turns}]}))
    theirs = score_runs([path])[0]["families_official"]["implication"]
    ours = score_runs([path], reparse=True)[0]["families"]["implication"]
    assert theirs["acc_full"] == 0.0 and theirs["invalid"]["perc"] == 100.0
    assert ours["acc"] == {"perc": 100.0, "bridge": 100.0, "conn": 0.0}  # 'Red.' names no option C text here


def test_family_comes_from_the_flag_when_the_name_does_not_say(tmp_path: Path, capsys) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"predictions": []}))
    assert main(["score", str(path)]) == 2
    assert "pass --family" in capsys.readouterr().err
    assert read_result_file(path, "affective").predictions == ()


def test_malformed_turns_are_reported_with_id_and_field(tmp_path: Path) -> None:
    path = tmp_path / "Affective-Reasoning.json"
    path.write_text(json.dumps({"predictions": [{"id": "joy_1", "conversation_turns": [{"level": 1}]}]}))
    with pytest.raises(Exception, match=r"id=joy_1: conversation_turns\[0\]\.correct_answer_key: missing"):
        read_result_file(path)
