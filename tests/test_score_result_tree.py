"""`hvcu score` on the authors' own output tree: Result/<Family>/<Indep|Context>/<model>.json.

Expected numbers are hand-computed from the per-item patterns of the shipped example tree
(hvcu_tasks/examples/authors_result): for every file, which of the three levels each item got right.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hvcu_tasks.cli import main
from hvcu_tasks.core.schema import DataError
from hvcu_tasks.results.rescore import score_runs

TREE = Path(__file__).resolve().parents[1] / "hvcu_tasks" / "examples" / "authors_result" / "Result"
FAMILY_DIRS = ("Implication-Understanding", "Aesthetic-Appreciation", "Affective-Reasoning")

# (model, setting) -> (Acc_full implication, aesthetic, affective), each out of 4 items, and the Overall Score.
EXPECTED = {
    ("gpt_4o", "base"): ((75.0, 50.0, 50.0), 58.33),
    ("gpt_4o", "context"): ((50.0, 50.0, 25.0), 41.67),
    ("Qwen3_VL_8B_Instruct", "base"): ((25.0, 50.0, 75.0), 50.0),
    ("Qwen3_VL_8B_Instruct", "context"): ((100.0, 25.0, 75.0), 66.67),
}


def _runs(summary: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r["model"], r["setting"]): r for r in summary}


def _copy_tree(tmp_path: Path) -> Path:
    return Path(shutil.copytree(TREE, tmp_path / "Result"))


def test_whole_tree_gives_one_overall_score_per_model_and_setting() -> None:
    runs = _runs(score_runs([TREE]))
    assert set(runs) == set(EXPECTED)
    for key, (full, overall) in EXPECTED.items():
        run = runs[key]
        fams = run["families_official"]
        assert (fams["implication"]["acc_full"], fams["aesthetic"]["acc_full"], fams["affective"]["acc_full"]) == full
        assert run["overall_score_official"] == overall, key
        assert run["missing_families"] == []


def test_stored_keys_are_the_official_numbers_and_robust_needs_reparse() -> None:
    run = _runs(score_runs([TREE]))[("gpt_4o", "base")]
    assert run["families"] == {} and run["overall_score"] is None
    assert "--reparse" in run["note"]
    # gpt_4o Indep aesthetic: items 111, 111, 011, n11 (n = model_response_key null).
    aesth = run["families_official"]["aesthetic"]
    assert aesth["acc"] == {"perc": 50.0, "bridge": 100.0, "conn": 100.0}
    assert aesth["invalid"] == {"perc": 25.0, "bridge": 0.0, "conn": 0.0}
    assert aesth["error_counts"] == {"perc": 2, "bridge": 0, "conn": 0}


def test_model_name_from_the_file_content_is_kept() -> None:
    run = _runs(score_runs([TREE]))[("Qwen3_VL_8B_Instruct", "context")]
    assert run["model_name"] == "Qwen/Qwen3-VL-8B-Instruct"
    assert run["files"]["affective"].endswith("Affective-Reasoning/Context/Qwen3_VL_8B_Instruct.json")


def test_whole_folder_equals_per_file_calls() -> None:
    whole = _runs(score_runs([TREE]))
    files = sorted(TREE.rglob("*.json"))
    assert len(files) == 12
    assert _runs(score_runs(files)) == whole
    for path in files:
        (one,) = score_runs([path])
        family = next(iter(one["families_official"]))
        expected = whole[(one["model"], one["setting"])]["families_official"][family]
        assert one["families_official"][family] == expected


def test_same_file_named_twice_counts_once() -> None:
    file = TREE / "Aesthetic-Appreciation" / "Indep" / "gpt_4o.json"
    assert _runs(score_runs([TREE, file])) == _runs(score_runs([TREE]))


def test_cli_json_has_one_entry_per_model_and_setting(capsys) -> None:
    assert main(["score", str(TREE), "--format", "json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert {(e["model"], e["setting"]): e["overall_score_official"] for e in entries} == {
        k: v[1] for k, v in EXPECTED.items()
    }


def test_cli_table_shows_each_run_and_its_overall_score(capsys) -> None:
    assert main(["score", str(TREE)]) == 0
    out = capsys.readouterr().out
    for model, setting in EXPECTED:
        assert f"{model} · {setting}" in out
    for score in ("58.33", "41.67", "50.00", "66.67"):
        assert f"Overall Score (authors' rule): {score}" in out


def test_duplicate_model_setting_family_is_refused_naming_both_files(tmp_path: Path) -> None:
    extra = tmp_path / "rerun" / "Result" / "Aesthetic-Appreciation" / "Indep"
    extra.mkdir(parents=True)
    shutil.copy(TREE / "Aesthetic-Appreciation" / "Indep" / "gpt_4o.json", extra / "gpt_4o.json")
    with pytest.raises(DataError, match=r"rerun/Result/Aesthetic-Appreciation/Indep/gpt_4o\.json") as err:
        score_runs([TREE, tmp_path / "rerun"])
    assert "Aesthetic-Appreciation/Indep/gpt_4o.json" in str(err.value).replace(str(extra), "")


def test_duplicate_is_refused_by_the_cli_with_exit_2(tmp_path: Path, capsys) -> None:
    root = _copy_tree(tmp_path)
    shutil.copy(
        root / "Affective-Reasoning" / "Context" / "gpt_4o.json",
        root / "Affective-Reasoning" / "Context" / "gpt-4o.json",
    )
    assert main(["score", str(root)]) == 2
    err = capsys.readouterr().err
    assert "gpt-4o.json" in err and "gpt_4o.json" in err and "affective" in err


def test_family_in_the_path_and_another_in_the_content_is_refused(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    path = root / "Affective-Reasoning" / "Indep" / "gpt_4o.json"
    data = json.loads(path.read_text())
    data["task"] = "Aesthetic-Appreciation"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"Affective-Reasoning/Indep/gpt_4o\.json.*family") as err:
        score_runs([root])
    assert "affective" in str(err.value) and "aesthetic" in str(err.value)


def test_setting_in_the_path_and_another_in_the_content_is_refused(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    # An Indep file copied into the Context folder: its evaluation_type still says independent_level.
    shutil.copy(
        root / "Implication-Understanding" / "Indep" / "gpt_4o.json",
        root / "Implication-Understanding" / "Context" / "gpt_4o.json",
    )
    with pytest.raises(DataError, match=r"Implication-Understanding/Context/gpt_4o\.json.*evaluation_type"):
        score_runs([root])


def test_a_model_name_that_names_another_family_is_read_by_its_folder(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    for family in FAMILY_DIRS:  # rename gpt_4o to a model whose name says "affective"
        folder = root / family / "Indep"
        (folder / "gpt_4o.json").rename(folder / "affective_llava.json")
    run = _runs(score_runs([root]))[("affective_llava", "base")]
    assert run["overall_score_official"] == 58.33
    assert run["files"]["aesthetic"].endswith("Aesthetic-Appreciation/Indep/affective_llava.json")


def test_family_flag_that_contradicts_the_path_is_refused(tmp_path: Path, capsys) -> None:
    path = TREE / "Aesthetic-Appreciation" / "Indep" / "gpt_4o.json"
    assert main(["score", str(path), "--family", "affective"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "--family says affective but the file says aesthetic" in err


def test_a_null_prediction_is_refused_naming_file_and_index(tmp_path: Path, capsys) -> None:
    root = _copy_tree(tmp_path)
    path = root / "Aesthetic-Appreciation" / "Indep" / "gpt_4o.json"
    data = json.loads(path.read_text())
    data["predictions"].insert(1, None)  # what the authors' evaluator writes for an item whose image is missing
    path.write_text(json.dumps(data))
    assert main(["score", str(root)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "predictions[1]" in err and "image was missing" in err


def test_folder_without_result_files_is_refused(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "Result"
    (empty / "Aesthetic-Appreciation" / "Indep").mkdir(parents=True)
    (empty / "notes.txt").write_text("nothing here")
    with pytest.raises(DataError, match=r"Result.*no result files"):
        score_runs([empty])
    assert main(["score", str(empty)]) == 2
    assert "no result files" in capsys.readouterr().err


def test_missing_family_gives_no_overall_score_and_names_it(tmp_path: Path, capsys) -> None:
    root = _copy_tree(tmp_path)
    (root / "Affective-Reasoning" / "Context" / "gpt_4o.json").unlink()
    runs = _runs(score_runs([root]))
    run = runs[("gpt_4o", "context")]
    assert run["overall_score_official"] is None and run["overall_score"] is None
    assert run["missing_families"] == ["affective"]
    assert "affective" in run["note"]
    assert run["families_official"]["implication"]["acc_full"] == 50.0
    assert runs[("gpt_4o", "base")]["overall_score_official"] == 58.33
    assert main(["score", str(root)]) == 0
    out = capsys.readouterr().out
    assert "Overall Score (authors' rule): 41.67" not in out
    assert "missing: affective" in out


# --reparse: raw replies ("model_response") that the two rules read differently, one model, Indep.
# Each turn: (gold, raw reply, the authors' rule's reading = the stored model_response_key).
REPARSE_ITEMS = {
    "Implication-Understanding": {
        # "The answer is (B)." is rejected by the authors' rule; ours reads B.
        "metaphor_001": [("B", "The answer is (B).", None), ("A", "A", "A"), ("C", "C.", "C")],
        # "Red." is D under the authors' period rule; ours matches option C's text "Red".
        "metaphor_002": [("C", "Red.", "D"), ("C", "C", "C"), ("B", "B", "B")],
    },
    "Aesthetic-Appreciation": {
        "color_001": [("A", "A", "A"), ("B", "B", "B"), ("C", "C", "C")],
        # "(A)" and "Answer: D Sadness" are rejected by the authors' rule; ours reads A and D.
        "font_001": [("A", "(A)", None), ("B", "B", "B"), ("D", "Answer: D Sadness", None)],
    },
    "Affective-Reasoning": {
        "joy_001": [("B", "B", "B"), ("B", "B", "B"), ("B", "B", "B")],
        "fear_001": [("A", "A", "A"), ("C", "C", "C"), ("D", "B", "B")],
    },
}
OPTIONS = {"A": "Blue", "B": "Green", "C": "Red", "D": "Yellow"}


def _write_reparse_tree(tmp_path: Path, with_raw: bool = True) -> Path:
    root = tmp_path / "Result"
    for family, items in REPARSE_ITEMS.items():
        preds = []
        for sid, turns in items.items():
            out_turns = []
            for level, (gold, raw, key) in enumerate(turns, start=1):
                turn = {"level": level, "options": OPTIONS, "correct_answer_key": gold, "model_response_key": key}
                if with_raw:
                    turn["model_response"] = raw
                out_turns.append(turn)
            preds.append({"id": sid, "conversation_turns": out_turns})
        folder = root / family / "Indep"
        folder.mkdir(parents=True)
        doc = {"model_name": "m-1", "evaluation_type": "independent_level", "predictions": preds}
        (folder / "m_1.json").write_text(json.dumps(doc))
    return root


def test_reparse_reports_both_rules_side_by_side(tmp_path: Path) -> None:
    (run,) = score_runs([_write_reparse_tree(tmp_path)], reparse=True)
    robust, official = run["families"], run["families_official"]
    # Ours: every implication and aesthetic chain right; affective fear_001 wrong at L3.
    assert [robust[f]["acc_full"] for f in ("implication", "aesthetic", "affective")] == [100.0, 100.0, 50.0]
    assert run["overall_score"] == 83.33
    # Authors' rule: both implication chains fail at L1 (one unparsable, one D), font_001 fails at L1.
    assert [official[f]["acc_full"] for f in ("implication", "aesthetic", "affective")] == [0.0, 50.0, 50.0]
    assert run["overall_score_official"] == 33.33
    assert official["implication"]["acc"]["perc"] == 0.0 and official["implication"]["invalid"]["perc"] == 50.0
    assert official["aesthetic"]["invalid"] == {"perc": 50.0, "bridge": 0.0, "conn": 50.0}
    assert robust["aesthetic"]["invalid"] == {"perc": 0.0, "bridge": 0.0, "conn": 0.0}


def test_without_reparse_the_stored_keys_give_the_official_numbers(tmp_path: Path) -> None:
    (run,) = score_runs([_write_reparse_tree(tmp_path)])
    assert run["overall_score_official"] == 33.33 and run["overall_score"] is None


def test_reparse_table_shows_both_scores(tmp_path: Path, capsys) -> None:
    assert main(["score", str(_write_reparse_tree(tmp_path)), "--reparse"]) == 0
    out = capsys.readouterr().out
    assert "Overall Score (hvcu parser): 83.33" in out
    assert "Overall Score (authors' rule): 33.33" in out


def test_reparse_without_raw_replies_is_an_error_naming_the_file(tmp_path: Path, capsys) -> None:
    assert main(["score", str(_write_reparse_tree(tmp_path, with_raw=False)), "--reparse"]) == 2
    err = capsys.readouterr().err
    assert "m_1.json" in err and "--reparse needs them" in err
    assert main(["score", str(TREE), "--reparse"]) == 2
    assert "--reparse needs them" in capsys.readouterr().err


def test_reparse_agrees_with_the_stored_keys_when_they_come_from_the_authors_rule(tmp_path: Path) -> None:
    (run,) = score_runs([_write_reparse_tree(tmp_path)], reparse=True)
    assert run["stored_key_disagreements"] == 0


def test_reparse_says_where_a_stored_key_differs_from_the_authors_rule(tmp_path: Path) -> None:
    root = _write_reparse_tree(tmp_path)
    path = root / "Affective-Reasoning" / "Indep" / "m_1.json"
    data = json.loads(path.read_text())
    data["predictions"][1]["conversation_turns"][2]["model_response_key"] = "D"  # raw reply "B"
    path.write_text(json.dumps(data))
    (run,) = score_runs([root], reparse=True)
    assert run["stored_key_disagreements"] == 1
    assert "fear_001" in run["note"] and "level 3" in run["note"] and str(path) in run["note"]
    assert run["overall_score_official"] == 33.33  # the numbers come from the raw replies, not the edited key
