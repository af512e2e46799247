"""`hvcu chains`: per-sample chains read from hand-written lmms-eval `--log_samples` files, expected rows by hand.

The base-setting file logs one line per (sample, level); the context-setting file one line per sample with the
whole chain. Each expected record below was written out by hand from the lines, the gold keys and the
authors' parsing rule as the protocol note states it ("(B)" is unparsable under it; a closed <think> block is
removed; "C." is C).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import one_line_error, run

from hvcu_tasks.results.chains import chains_of_file, samples_files

BASE_TASK = "hvcu_bench_sample_aesth"
CONTEXT_TASK = "hvcu_bench_context_sample_impl"


def record(sid: str, family: str, aspect: str, level: int, gold: str, pred: str | None, **extra: Any) -> dict:
    """One logged outcome as the harness writes it (without the raw reply, which lmms-eval keeps)."""
    return {"sample_id": sid, "family": family, "aspect": aspect, "level": level, "gold": gold, "pred": pred, **extra}


def base_line(sid: str, aspect: str, level: int, gold: str, pred: str | None, reply: str, question: str, **extra):
    """One base-setting samples line: one level of one sample."""
    outcome = record(sid, "aesthetic", aspect, level, gold, pred, failed=False, **extra)
    return {
        "doc_id": 0,
        "resps": [[reply]],
        "filtered_resps": [reply],
        "acc_full": {"outcomes": [outcome], "question": question},
    }


# color_001 (gold D B A): all right under our rule; "(B)" is unparsable under the authors' (pred_official not
# logged: read from the reply). font_001 (gold C B A): logged L3 first; L2 unparsable. graphics_001: only L1 (--limit).
BASE_LINES = [
    base_line("color_001", "color", 1, "D", "D", "D", "Colours? (L1)", pred_official="D"),
    base_line("color_001", "color", 2, "B", "B", "(B)", "Warm tones? (L2)"),
    base_line("color_001", "color", 3, "A", "A", "Answer: A", "Impression? (L3)", pred_official="A"),
    base_line("font_001", "font", 3, "A", "A", "A", "Mood of the type? (L3)", pred_official="A"),
    base_line("font_001", "font", 1, "C", "C", "C", "Typeface? (L1)", pred_official="C"),
    base_line("font_001", "font", 2, "B", None, "I am not sure", "Serifs? (L2)", pred_official=None),
    base_line("graphics_001", "graphics", 1, "B", "B", "B", "Shape? (L1)", pred_official="B"),
]

BASE_EXPECTED = [
    {
        "task": BASE_TASK,
        "setting": "base",
        "family": "aesthetic",
        "sample_id": "color_001",
        "questions": ["Colours? (L1)", "Warm tones? (L2)", "Impression? (L3)"],
        "replies": ["D", "(B)", "Answer: A"],
        "parsed": ["D", "B", "A"],
        "gold": ["D", "B", "A"],
        "chain_correct": True,
        "parsed_official": ["D", None, "A"],
        "chain_correct_official": False,
    },
    {
        "task": BASE_TASK,
        "setting": "base",
        "family": "aesthetic",
        "sample_id": "font_001",
        "questions": ["Typeface? (L1)", "Serifs? (L2)", "Mood of the type? (L3)"],
        "replies": ["C", "I am not sure", "A"],
        "parsed": ["C", None, "A"],
        "gold": ["C", "B", "A"],
        "chain_correct": False,
        "parsed_official": ["C", None, "A"],
        "chain_correct_official": False,
    },
    {
        "task": BASE_TASK,
        "setting": "base",
        "family": "aesthetic",
        "sample_id": "graphics_001",
        "questions": ["Shape? (L1)"],
        "replies": ["B"],
        "parsed": ["B"],
        "gold": ["B"],
        "chain_correct": None,
        "parsed_official": ["B"],
        "chain_correct_official": None,
    },
]


def context_line(sid: str, aspect: str, golds: str, preds: list, officials: list, replies: list, failed: list):
    """One context-setting samples line: the whole chain of one sample."""
    outcomes = [
        record(sid, "implication", aspect, k, g, p, pred_official=o, failed=f)
        for k, (g, p, o, f) in enumerate(zip(golds, preds, officials, failed, strict=True), start=1)
    ]
    questions = [f"{sid} L{k}?" for k in (1, 2, 3)]
    return {
        "doc_id": 0,
        "resps": [[replies]],
        "acc_full": {"outcomes": outcomes, "sample_id": sid, "questions": questions, "replies": replies},
    }


# metaphor_001 (gold B A C): right at every level, a think block before L2's letter. symbolism_001 (gold A D B):
# the chain was cut after L1 (no reply at L2, L3). contrast_001 (gold C A B): wrong at L2.
NO = [False, False, False]
CONTEXT_LINES = [
    context_line(
        "metaphor_001", "metaphor", "BAC", ["B", "A", "C"], ["B", "A", "C"], ["B", "<think>x</think>A", "C."], NO
    ),
    context_line(
        "symbolism_001",
        "symbolism",
        "ADB",
        ["A", None, None],
        ["A", None, None],
        ["A", None, None],
        [False, True, True],
    ),
    context_line("contrast_001", "contrast", "CAB", ["C", "B", "B"], ["C", "B", "B"], ["C", "B", "B"], NO),
]


def context_expected(sid: str, replies: list, parsed: list, gold: list, correct: bool) -> dict:
    """The chain record of one context-setting sample (both rules agree on these replies)."""
    return {
        "task": CONTEXT_TASK,
        "setting": "context",
        "family": "implication",
        "sample_id": sid,
        "questions": [f"{sid} L1?", f"{sid} L2?", f"{sid} L3?"],
        "replies": replies,
        "parsed": parsed,
        "gold": gold,
        "chain_correct": correct,
        "parsed_official": parsed,
        "chain_correct_official": correct,
    }


CONTEXT_EXPECTED = [
    context_expected("metaphor_001", ["B", "<think>x</think>A", "C."], ["B", "A", "C"], ["B", "A", "C"], True),
    context_expected("symbolism_001", ["A", None, None], ["A", None, None], ["A", "D", "B"], False),
    context_expected("contrast_001", ["C", "B", "B"], ["C", "B", "B"], ["C", "A", "B"], False),
]


def write_lines(path: Path, lines: list[dict]) -> Path:
    """Write a samples file, one JSON object per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def run_folder(tmp_path: Path) -> Path:
    """A run folder as lmms-eval leaves it: a results file and both settings' samples files."""
    folder = tmp_path / "run" / "model"
    write_lines(folder / f"20260101_a_samples_{BASE_TASK}.jsonl", BASE_LINES)
    write_lines(folder / f"20260101_b_samples_{CONTEXT_TASK}.jsonl", CONTEXT_LINES)
    (folder / "20260101_results.json").write_text("{}", encoding="utf-8")
    return tmp_path / "run"


def test_base_setting_levels_are_gathered_into_chains(tmp_path: Path) -> None:
    path = write_lines(tmp_path / f"x_samples_{BASE_TASK}.jsonl", BASE_LINES)
    assert chains_of_file(BASE_TASK, path) == BASE_EXPECTED


def test_context_setting_lines_are_chains(tmp_path: Path) -> None:
    path = write_lines(tmp_path / f"x_samples_{CONTEXT_TASK}.jsonl", CONTEXT_LINES)
    assert chains_of_file(CONTEXT_TASK, path) == CONTEXT_EXPECTED


def test_only_hvcu_samples_files_are_read(tmp_path: Path) -> None:
    folder = run_folder(tmp_path)
    write_lines(folder / "model" / "20260101_samples_mmmu_val.jsonl", [{"doc_id": 0}])
    assert [(task, path.name) for task, path in samples_files([folder])] == [
        (BASE_TASK, f"20260101_a_samples_{BASE_TASK}.jsonl"),
        (CONTEXT_TASK, f"20260101_b_samples_{CONTEXT_TASK}.jsonl"),
    ]


def test_the_analysis_tasks_logs_are_not_read_as_base_or_context_chains(tmp_path: Path) -> None:
    folder = run_folder(tmp_path)
    for task in ("hvcu_bench_circular_sample_impl", "hvcu_bench_blind_impl", "hvcu_bench_context_gold_sample_impl"):
        write_lines(folder / "model" / f"20260101_c_samples_{task}.jsonl", [{"doc_id": 0}])
    assert [task for task, _ in samples_files([folder])] == [BASE_TASK, CONTEXT_TASK]


def test_hvcu_chains_prints_one_json_line_per_sample(tmp_path: Path, capsys) -> None:
    code, out, err = run("chains", str(run_folder(tmp_path)), capsys=capsys)
    assert (code, err) == (0, "")
    assert [json.loads(line) for line in out.splitlines()] == BASE_EXPECTED + CONTEXT_EXPECTED


def test_hvcu_chains_out_writes_the_same_lines_to_a_file(tmp_path: Path, capsys) -> None:
    target = tmp_path / "chains.jsonl"
    code, out, _err = run("chains", str(run_folder(tmp_path)), "--out", str(target), capsys=capsys)
    assert (code, out) == (0, "")
    assert [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()] == (
        BASE_EXPECTED + CONTEXT_EXPECTED
    )


def chains_error(tmp_path: Path, capsys, files: dict[str, str]) -> tuple[int, str]:
    """Run `hvcu chains` on a run folder holding only `files` (name -> text); return its status and error line."""
    folder = tmp_path / "run" / "model"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    code, _out, err = run("chains", str(tmp_path / "run"), capsys=capsys)
    return code, one_line_error(err)


def test_hvcu_chains_on_a_run_without_log_samples_says_to_log_samples(tmp_path: Path, capsys) -> None:
    code, err = chains_error(tmp_path, capsys, {"20250101_120000_results.json": "{}"})
    assert code == 2
    assert err == (
        f"error: no *_samples_hvcu_bench*.jsonl under {[str(tmp_path / 'run')]}: the results files there have no "
        "samples files beside them: rerun with --log_samples"
    )


def test_hvcu_chains_on_a_run_that_logged_other_tasks_names_them_not_log_samples(tmp_path: Path, capsys) -> None:
    files = {"r_results.json": "{}", "r_samples_mmstar.jsonl": "{}\n", "r_samples_hvcu_bench_blind_sample.jsonl": ""}
    code, err = chains_error(tmp_path, capsys, files)
    assert code == 2
    assert err.endswith(": the samples files there are of other tasks only: hvcu_bench_blind_sample, mmstar")
    assert "--log_samples" not in err  # the run did log its samples


def test_hvcu_chains_on_a_folder_without_lmms_eval_output_says_so(tmp_path: Path, capsys) -> None:
    code, err = chains_error(tmp_path, capsys, {"notes.txt": "x"})
    assert (code, err.endswith(": no lmms-eval output there (no *_results.json, no *_samples_*.jsonl)")) == (2, True)


def test_hvcu_chains_on_a_path_that_does_not_exist_names_it(tmp_path: Path, capsys) -> None:
    code, _out, err = run("chains", str(tmp_path / "nowhere"), capsys=capsys)
    assert code == 2
    assert one_line_error(err).endswith(f": no such file or folder: {tmp_path / 'nowhere'}")


def logged_chain(sid: str, replies: list, gold: str = "ADB", **entry: Any) -> dict:
    """A context-setting line as the harness logs it today: outcomes, questions, replies and gold keys."""
    outcomes = [
        record(sid, "implication", "symbolism", k, g, r, pred_official=r, failed=r is None)
        for k, (g, r) in enumerate(zip(gold, replies, strict=True), start=1)
    ]
    acc_full = {"outcomes": outcomes, "sample_id": sid, "questions": [f"{sid} L{k}?" for k in (1, 2, 3)]}
    acc_full |= {"replies": replies, "gold": list(gold), **entry}
    return {"doc_id": 0, "resps": [[replies]], "filtered_resps": [replies], "acc_full": acc_full}


DAMAGED = " each level needs one of each (the line is damaged)"


def test_a_damaged_line_is_named_by_its_line_number_counting_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / f"x_samples_{CONTEXT_TASK}.jsonl"
    good, short = logged_chain("metaphor_001", ["A", "D", "B"]), logged_chain("symbolism_001", ["A", "D", "B"])
    short["acc_full"]["replies"] = ["A", "D"]
    path.write_text(json.dumps(good) + "\n\n" + json.dumps(short) + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as exc:
        chains_of_file(CONTEXT_TASK, path)
    assert str(exc.value) == (
        f"{path}:3: sample 'symbolism_001': 3 scored levels, 3 questions, 2 replies, 3 gold keys;" + DAMAGED
    )


def test_a_line_without_outcomes_is_named_by_its_logged_sample(tmp_path: Path) -> None:
    line = logged_chain("symbolism_001", ["A", "D", "B"])
    line["acc_full"]["outcomes"] = []
    path = write_lines(tmp_path / f"x_samples_{CONTEXT_TASK}.jsonl", [line])
    with pytest.raises(ValueError) as exc:
        chains_of_file(CONTEXT_TASK, path)
    assert str(exc.value) == (
        f"{path}:1: sample 'symbolism_001': 0 scored levels, 3 questions, 3 replies, 3 gold keys;" + DAMAGED
    )


def test_a_line_with_too_few_gold_keys_is_damaged(tmp_path: Path) -> None:
    line = logged_chain("symbolism_001", ["A", "D", "B"])
    line["acc_full"]["gold"] = ["A", "D"]
    path = write_lines(tmp_path / f"x_samples_{CONTEXT_TASK}.jsonl", [line])
    with pytest.raises(ValueError) as exc:
        chains_of_file(CONTEXT_TASK, path)
    assert str(exc.value) == (
        f"{path}:1: sample 'symbolism_001': 3 scored levels, 3 questions, 3 replies, 2 gold keys;" + DAMAGED
    )


def test_a_line_of_another_task_is_named_with_what_it_lacks(tmp_path: Path) -> None:
    path = write_lines(tmp_path / f"x_samples_{BASE_TASK}.jsonl", [BASE_LINES[0], {"doc_id": 7, "resps": [["B"]]}])
    with pytest.raises(ValueError) as exc:
        chains_of_file(BASE_TASK, path)
    assert str(exc.value) == f"{path}:2: not an HVCU-Bench samples line (KeyError: 'acc_full')"


def test_the_harness_record_of_a_cut_chain_gives_its_replies(tmp_path: Path) -> None:
    """lmms-eval keeps only the replies that came ("A"); the harness logs one per level, null where none came."""
    line = logged_chain("symbolism_001", ["A", None, None])
    line["resps"], line["filtered_resps"] = [[["A"]]], [["A"]]
    path = write_lines(tmp_path / f"x_samples_{CONTEXT_TASK}.jsonl", [line])
    assert chains_of_file(CONTEXT_TASK, path)[0]["replies"] == ["A", None, None]


def test_an_older_context_line_takes_the_replies_lmms_eval_logged(tmp_path: Path) -> None:
    line = logged_chain("symbolism_001", ["A", "D", "B."])
    del line["acc_full"]["replies"], line["acc_full"]["gold"]
    line["resps"], line["filtered_resps"] = [[["A", "D", "B."]]], [["A", "D", "B."]]
    path = write_lines(tmp_path / f"x_samples_{CONTEXT_TASK}.jsonl", [line])
    assert chains_of_file(CONTEXT_TASK, path)[0]["replies"] == ["A", "D", "B."]


def test_an_older_context_line_with_a_single_text_reply_keeps_it_whole(tmp_path: Path) -> None:
    line = logged_chain("symbolism_001", ["A", "D", "B"])
    line["acc_full"]["outcomes"] = line["acc_full"]["outcomes"][:1]
    line["acc_full"]["questions"] = ["symbolism_001 L1?"]
    del line["acc_full"]["replies"], line["acc_full"]["gold"]
    line["resps"], line["filtered_resps"] = "It is A", "It is A"
    path = write_lines(tmp_path / f"x_samples_{CONTEXT_TASK}.jsonl", [line])
    assert chains_of_file(CONTEXT_TASK, path)[0]["replies"] == ["It is A"]


def test_an_older_context_line_without_any_reply_is_damaged(tmp_path: Path) -> None:
    line = logged_chain("symbolism_001", ["A", "D", "B"])
    del line["acc_full"]["replies"], line["acc_full"]["gold"]
    line["resps"], line["filtered_resps"] = [], []
    path = write_lines(tmp_path / f"x_samples_{CONTEXT_TASK}.jsonl", [line])
    with pytest.raises(ValueError) as exc:
        chains_of_file(CONTEXT_TASK, path)
    assert str(exc.value) == f"{path}:1: sample 'symbolism_001': 3 scored levels, 3 questions, 0 replies;" + DAMAGED


def test_the_base_reply_shown_is_the_filtered_one_that_was_scored(tmp_path: Path) -> None:
    line = base_line("graphics_001", "graphics", 1, "B", "B", "B", "Shape? (L1)", pred_official="B")
    line["resps"] = [["<think>round or square?</think>B"]]
    path = write_lines(tmp_path / f"x_samples_{BASE_TASK}.jsonl", [line])
    assert chains_of_file(BASE_TASK, path)[0]["replies"] == ["B"]


def test_a_base_reply_logged_as_bare_text_is_kept_whole(tmp_path: Path) -> None:
    line = base_line("graphics_001", "graphics", 1, "B", "B", "B", "Shape? (L1)", pred_official="B")
    line["filtered_resps"] = "Answer: B"
    path = write_lines(tmp_path / f"x_samples_{BASE_TASK}.jsonl", [line])
    assert chains_of_file(BASE_TASK, path)[0]["replies"] == ["Answer: B"]


def test_the_authors_parse_a_log_holds_is_reported_as_logged(tmp_path: Path) -> None:
    """The run's acc_*_official were computed from the logged parse: the chains agree with them, never re-parse."""
    line = base_line("graphics_001", "graphics", 1, "B", "B", "(B)", "Shape? (L1)", pred_official="B")
    path = write_lines(tmp_path / f"x_samples_{BASE_TASK}.jsonl", [line])
    assert chains_of_file(BASE_TASK, path)[0]["parsed_official"] == ["B"]


def test_an_older_logs_failed_request_gets_no_authors_parse(tmp_path: Path) -> None:
    """lmms-eval's failure text can read as a letter under the authors' rule ("answer: C."): it is no answer."""
    failure = "[LMMS_EVAL_REQUEST_FAILED after 5 retries] Error code: 400 - answer: C."
    line = base_line("graphics_001", "graphics", 1, "C", None, failure, "Shape? (L1)")
    line["acc_full"]["outcomes"][0]["failed"] = True
    path = write_lines(tmp_path / f"x_samples_{BASE_TASK}.jsonl", [line])
    assert chains_of_file(BASE_TASK, path)[0]["parsed_official"] == [None]


def test_a_chain_line_without_levels_gives_an_empty_chain_without_verdicts(tmp_path: Path) -> None:
    line = {"doc_id": 0, "resps": [[[]]], "acc_full": {"outcomes": [], "sample_id": "x_001", "questions": []}}
    line["acc_full"] |= {"replies": [], "gold": []}
    path = write_lines(tmp_path / f"x_samples_{CONTEXT_TASK}.jsonl", [line])
    chain = chains_of_file(CONTEXT_TASK, path)
    assert [(c["sample_id"], c["questions"], c["chain_correct"], c["chain_correct_official"]) for c in chain] == [
        ("x_001", [], None, None)
    ]


def test_a_samples_file_given_by_name_is_read(tmp_path: Path) -> None:
    path = write_lines(tmp_path / f"20260101_samples_{BASE_TASK}.jsonl", BASE_LINES)
    assert samples_files([path]) == [(BASE_TASK, path)]


@pytest.fixture
def ascii_locale():
    """Run under the plain C locale (ASCII), as on a machine without a UTF-8 locale; restored afterwards."""
    import locale

    old = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    yield
    locale.setlocale(locale.LC_CTYPE, old)


def test_a_samples_file_is_read_as_utf8_whatever_the_locale(tmp_path: Path, ascii_locale) -> None:
    line = base_line("color_001", "color", 1, "D", "D", "D", "Welche Farbtöne? (L1)", pred_official="D")
    path = write_lines(tmp_path / f"x_samples_{BASE_TASK}.jsonl", [line])
    path.write_text(path.read_text(encoding="utf-8").replace("\\u00f6", "ö"), encoding="utf-8")  # raw UTF-8 bytes
    assert chains_of_file(BASE_TASK, path)[0]["questions"] == ["Welche Farbtöne? (L1)"]


def test_a_samples_data_identity_is_the_first_one_its_lines_logged(tmp_path: Path) -> None:
    first = {"fingerprint": "f" * 16, "source": "hub"}
    later = {"fingerprint": "e" * 16, "source": "local"}
    l1, l2, l3 = (line for line in BASE_LINES if line["acc_full"]["outcomes"][0]["sample_id"] == "color_001")
    l2 = {**l2, "acc_full": {**l2["acc_full"], "data_identity": first}}
    l3 = {**l3, "acc_full": {**l3["acc_full"], "data_identity": later}}
    path = write_lines(tmp_path / f"x_samples_{BASE_TASK}.jsonl", [l1, l2, l3])
    (chain,) = chains_of_file(BASE_TASK, path, details=True)
    assert chain["data_identity"] == first  # the line without one is passed over; the later one does not replace it


def test_the_details_of_a_chain_name_its_lines_first_image_aspect_and_per_level_verdicts(tmp_path: Path) -> None:
    color = [line for line in BASE_LINES if line["acc_full"]["outcomes"][0]["sample_id"] == "color_001"]
    lines = [
        {**color[0], "input_media": "not a list"},  # ignored: not a list of file names
        {**color[1], "input_media": ["/data/color_001.png"]},  # the first image logged
        {**color[2], "input_media": ["/data/other.png"]},  # a later one does not replace it
    ]
    path = tmp_path / f"x_samples_{BASE_TASK}.jsonl"
    path.write_text("\n" + "".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")  # a blank line 1
    (chain,) = chains_of_file(BASE_TASK, path, details=True)
    assert {k: chain[k] for k in ("aspect", "correct", "correct_official", "failed", "lines", "input_media")} == {
        "aspect": "color",
        "correct": [True, True, True],
        "correct_official": [True, False, True],  # "(B)" is unparsable under the authors' rule
        "failed": [False, False, False],
        "lines": [2, 3, 4],  # file line numbers, the blank first line counted
        "input_media": "/data/color_001.png",
    }
    assert chain["data_identity"] is None  # none logged


def test_a_line_that_is_not_json_is_named_by_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / f"x_samples_{BASE_TASK}.jsonl"
    path.write_text(json.dumps(BASE_LINES[0]) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(ValueError) as exc:
        chains_of_file(BASE_TASK, path)
    assert str(exc.value).startswith(f"{path}:2: not an HVCU-Bench samples line (not valid JSON: ")
