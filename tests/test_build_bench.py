"""`hvcu build-bench` against a deterministic fake MLLM: refinement, rejection, balance, loadable output."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import run_lmms_eval
from fake_openai import FakeOpenAI
from PIL import Image

from generation.bench.build import BuildConfig
from generation.bench.manifest import read_manifest
from generation.bench.stages import parse_draft, parse_verdict
from generation.replies import ReplyError
from hvcu_tasks.cli import main
from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.data.loaders import load_path
from hvcu_tasks.data.validate import validate
from hvcu_tasks.dev.smoke import SMOKE_DIR

# Anchors script the fake model's behaviour per item (the anchor is echoed into the level-3 question).
FAIL_ONCE = "fail-once"  # the first bridge draft is too vague; the second passes
NEVER = "never-concrete"  # every bridge draft is too vague: the item is rejected
GARBLED = "garbled"  # the first perception reply is not JSON
AMBIGUOUS = "two-right"  # the first connotation draft has two defensible answers


def fake_mllm(request: dict) -> str:
    """Generator and validator of the tests: replies depend only on the request."""
    text = request["messages"][-1]["content"][0]["text"]
    temperature = request["temperature"]
    digest = hashlib.sha256((text + str(request["seed"])).encode()).hexdigest()[:6]
    if text.startswith("You check the top level"):
        if "ambiguous" in text:
            return '{"single_answer": false, "reason": "two options fit"}'
        return '{"single_answer": true, "reason": "one clear answer"}'
    if text.startswith("You check one step"):
        lower = text.split("(new):", 1)[1]
        if "vague" in lower:
            return json.dumps(
                {"dependency": True, "progression": False, "single_answer": True, "reason": "too abstract"}
            )
        return 'Verdict: {"dependency": true, "progression": true, "single_answer": true, "reason": "fine"}'
    level = int(re.search(r"Write the LEVEL (\d)", text).group(1))
    anchor = re.search(r'reference concept: "([^"]*)"', text)
    tag = anchor.group(1) if anchor else ""
    if level == 2 and (NEVER in text or (FAIL_ONCE in text and temperature < 0.75)):
        question = f"What vague idea does it show {digest}?"
    elif level == 1 and GARBLED in text and temperature < 0.75:
        return "Sorry, I cannot help with that."
    elif level == 3 and AMBIGUOUS in text and temperature < 0.75:
        question = f"Which ambiguous reading {tag} {digest}?"
    else:
        question = f"Level {level} question {tag} {digest}?"
    reply = {"question": question, "answer": f"right {level} {digest}", "distractors": [f"wrong {i}" for i in "xyz"]}
    return "```json\n" + json.dumps(reply) + "\n```"


def write_manifest(folder: Path, rows: list[tuple[str, str, str]]) -> Path:
    """Write images and a CSV manifest of (family, aspect, anchor) rows; return the manifest path."""
    (folder / "imgs").mkdir(parents=True)
    lines = ["image,family,aspect,anchor"]
    for i, (family, aspect, anchor) in enumerate(rows):
        Image.new("RGB", (16, 16), (i * 20 % 256, 80, 160)).save(folder / "imgs" / f"{i:02d}.png")
        lines.append(f"imgs/{i:02d}.png,{family},{aspect},{anchor}")
    (folder / "manifest.csv").write_text("\n".join(lines) + "\n")
    return folder / "manifest.csv"


ROWS = [
    ("affective", "joy", ""),
    ("affective", "fear", FAIL_ONCE),
    ("affective", "anger", ""),
    ("affective", "wonder", ""),
    ("affective", "sadness", ""),
    ("affective", "affection", GARBLED),
    ("affective", "joy", "hope at dawn"),
    ("affective", "fear", ""),
    ("implication", "metaphor", ""),
    ("implication", "contrast", NEVER),
    ("aesthetic", "color", ""),
    ("aesthetic", "font", AMBIGUOUS),
]


def build(server: FakeOpenAI, manifest: Path, out: Path, *extra: str) -> int:
    args = ["build-bench", "--manifest", str(manifest), "--out", str(out), "--model", "fake"]
    return main([*args, "--base-url", server.base_url, "--api-key", "x", "--quiet", *extra])


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, list[dict]]:
    manifest = write_manifest(tmp_path, ROWS)
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, manifest, tmp_path / "bench") == 0
    return tmp_path / "bench", server.requests


def generation_requests(requests: list[dict], level: int, needle: str) -> list[dict]:
    """Return the generator requests for one level whose prompt mentions needle, in order sent."""
    return [
        r
        for r in requests
        if f"Write the LEVEL {level}" in r["messages"][-1]["content"][0]["text"]
        and needle in r["messages"][-1]["content"][0]["text"]
    ]


def test_levels_are_generated_top_down_each_conditioned_on_those_above(built) -> None:
    out, requests = built
    texts = [r["messages"][-1]["content"][0]["text"] for r in generation_requests(requests, 1, "hope at dawn")]
    assert len(texts) == 1
    assert "Level 3 (connotation)" in texts[0] and "Level 2 (bridge)" in texts[0]
    assert texts[0].index("Level 3 (connotation)") < texts[0].index("Level 2 (bridge)")


def test_a_failed_validation_regenerates_the_stage_with_the_reason_and_a_higher_temperature(built) -> None:
    out, requests = built
    attempts = generation_requests(requests, 2, FAIL_ONCE)
    assert [r["temperature"] for r in attempts] == [0.7, 0.8]
    assert "too abstract" not in attempts[0]["messages"][-1]["content"][0]["text"]
    retry = attempts[1]["messages"][-1]["content"][0]["text"]
    assert "An earlier attempt was rejected" in retry and "(validator: too abstract)" in retry
    assert "not clearly more objective and observable" in retry
    record = next(r for r in json.loads((out / "Affective-Reasoning.json").read_text()) if r["anchor"] == FAIL_ONCE)
    assert "vague" not in record["qa_levels"][1]["question"]


def test_an_unusable_reply_is_a_failed_attempt_with_its_reason_fed_back(built) -> None:
    _out, requests = built
    attempts = generation_requests(requests, 1, GARBLED)
    assert [r["temperature"] for r in attempts] == [0.7, 0.8]
    assert "unusable reply: no JSON object" in attempts[1]["messages"][-1]["content"][0]["text"]


def test_an_item_that_never_passes_is_reported_not_emitted(built) -> None:
    out, requests = built
    assert len(generation_requests(requests, 2, NEVER)) == 3  # max_attempts
    assert len(generation_requests(requests, 1, NEVER)) == 0  # stage 3 never starts
    items = json.loads((out / "Implication-Understanding.json").read_text())
    assert [r["aspect"] for r in items] == ["metaphor"]
    rejected = [json.loads(line) for line in (out / "rejected.jsonl").read_text().splitlines()]
    assert [(r["anchor"], r["rejected_at"]) for r in rejected] == [(NEVER, 2)]
    assert [a["temperature"] for a in rejected[0]["attempts"] if a["level"] == 2] == [0.7, 0.8, 0.9]
    report = json.loads((out / "build_report.json").read_text())
    assert report["items"] == 12 and report["emitted"] == 11
    assert list(report["rejected"].values())[0]["level"] == 2


def test_answer_positions_are_balanced_and_reported(built) -> None:
    out, _requests = built
    items = json.loads((out / "Affective-Reasoning.json").read_text())
    assert len(items) == 8
    for level in range(3):
        counts = Counter(item["qa_levels"][level]["correct_answer_key"] for item in items)
        assert counts == {"A": 2, "B": 2, "C": 2, "D": 2}
    report = json.loads((out / "build_report.json").read_text())
    assert report["answer_positions"]["affective"]["L1"] == {"A": 2, "B": 2, "C": 2, "D": 2}
    assert sum(report["answer_positions"]["all"]["L3"].values()) == 11


def test_the_correct_text_sits_at_the_answer_key_and_distractors_fill_the_rest(built) -> None:
    out, _requests = built
    for item in json.loads((out / "Affective-Reasoning.json").read_text()):
        for level in item["qa_levels"]:
            options = {o["option_key"]: o["option_text"] for o in level["options"]}
            assert options.pop(level["correct_answer_key"]).startswith("right")
            assert sorted(options.values()) == ["wrong x", "wrong y", "wrong z"]


def test_the_output_validates_and_loads_as_a_benchmark(built) -> None:
    out, _requests = built
    report = validate(str(out))
    assert report.problems == []
    loaded = load_path(out).raise_for_problems()
    assert Counter(s.family for s in loaded) == {"affective": 8, "implication": 1, "aesthetic": 2}
    assert {s.aspect for s in loaded if s.family == "aesthetic"} == {"color", "font"}


def test_the_lmms_eval_task_reads_the_built_benchmark(built, monkeypatch) -> None:
    import datasets

    from hvcu_tasks import settings
    from hvcu_tasks.lmms import hooks

    out, _requests = built
    monkeypatch.setenv(settings.DATA_ENV, str(out))
    docs = hooks.process_docs(datasets.Dataset.from_list([{"family": "affective", "source": "hub"}]))
    assert len(docs) == 24 and {d["level"] for d in docs} == {1, 2, 3}


def test_a_rerun_pays_for_nothing_and_writes_the_same_files(built, tmp_path: Path) -> None:
    out, _requests = built
    before = {p.name: p.read_bytes() for p in out.glob("*.json*")}
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, tmp_path / "manifest.csv", out) == 0
    assert server.requests == []
    after = {p.name: p.read_bytes() for p in out.glob("*.json*")}
    assert {k: v for k, v in after.items() if k != "build_report.json"} == {
        k: v for k, v in before.items() if k != "build_report.json"
    }


def test_a_fresh_build_with_the_same_seed_is_byte_identical(built, tmp_path: Path) -> None:
    out, _requests = built
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, tmp_path / "manifest.csv", tmp_path / "again") == 0
    for name in ["Affective-Reasoning.json", "Implication-Understanding.json", "rejected.jsonl"]:
        assert (tmp_path / "again" / name).read_bytes() == (out / name).read_bytes()


def test_a_server_error_is_retried_on_the_next_run_not_rejected(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, [("affective", "joy", "")])
    with FakeOpenAI(fake_mllm, fault=lambda n, _r: (400, {}, b'{"error": {"message": "bad"}}')) as server:
        assert build(server, manifest, tmp_path / "bench") == 1
    record = json.loads(next((tmp_path / "bench" / "items").glob("*.json")).read_text())
    assert record["status"] == "failed" and "400" in record["error"]
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, manifest, tmp_path / "bench") == 0
    assert len(json.loads((tmp_path / "bench" / "Affective-Reasoning.json").read_text())) == 1


def test_max_attempts_comes_from_the_config_file(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, [("implication", "contrast", NEVER)])
    (tmp_path / "cfg.yaml").write_text("max_attempts: 5\ntemperature_step: 0.2\n")
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, manifest, tmp_path / "bench", "--config", str(tmp_path / "cfg.yaml")) == 0
    assert [r["temperature"] for r in generation_requests(server.requests, 2, NEVER)] == [0.7, 0.9, 1.1, 1.2, 1.2]


def test_unknown_config_keys_are_errors(tmp_path: Path, capsys) -> None:
    manifest = write_manifest(tmp_path, [("affective", "joy", "")])
    (tmp_path / "cfg.json").write_text('{"max_attempt": 2}')
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, manifest, tmp_path / "bench", "--config", str(tmp_path / "cfg.json")) == 2
    assert "cfg.json: unknown key(s) ['max_attempt']" in capsys.readouterr().err


def png(path: Path) -> Path:
    Image.new("RGB", (8, 8), "navy").save(path)
    return path


def test_manifest_problems_name_the_file_row_and_field(tmp_path: Path) -> None:
    png(tmp_path / "a.png")
    (tmp_path / "notes.png").write_text("not an image")
    (tmp_path / "m.csv").write_text(
        "image,family,aspect\na.png,affective,metaphor\nmissing.png,affective,joy\na.png,cooking,joy\n"
        "notes.png,affective,joy\n"
    )
    with pytest.raises(ValueError) as err:
        read_manifest(tmp_path / "m.csv")
    text = str(err.value)
    assert "m.csv: id=row 2: aspect: 'metaphor' is not an aspect of affective" in text
    assert "id=row 3: image: no such file" in text
    assert "id=row 4: family: unknown family 'cooking'" in text
    assert "id=row 5: image:" in text and "notes.png: not a readable image" in text


def test_manifest_rows_with_more_cells_than_the_header_are_named(tmp_path: Path) -> None:
    png(tmp_path / "a.png")
    (tmp_path / "m.csv").write_text("image,family,aspect,anchor\na.png,affective,joy,hope, despair\n")
    with pytest.raises(ValueError, match="m.csv: id=row 2: -: more cells than the header has columns"):
        read_manifest(tmp_path / "m.csv")


def test_a_spreadsheet_byte_order_mark_is_not_part_of_the_header(tmp_path: Path) -> None:
    png(tmp_path / "a.png")
    (tmp_path / "m.csv").write_bytes("\ufeffimage,family,aspect\na.png,affective,joy\n".encode())
    assert read_manifest(tmp_path / "m.csv")[0].aspect == "joy"


def test_manifest_rejects_duplicate_ids_and_reads_jsonl(tmp_path: Path) -> None:
    png(tmp_path / "a.png")
    rows = [{"image": "a.png", "family": "Affective_Reasoning", "aspect": "joy", "id": "joy_1"}] * 2
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(ValueError, match=r"m.jsonl: id=line 2: id: 'joy_1' repeats line 1"):
        read_manifest(tmp_path / "m.jsonl")
    (tmp_path / "m.jsonl").write_text(json.dumps({**rows[0], "anchor": ["hope", "joy"]}))
    with pytest.raises(ValueError, match=r"id=line 1: anchor: expected text, got list"):
        read_manifest(tmp_path / "m.jsonl")
    (tmp_path / "m.jsonl").write_text(json.dumps(rows[0]))
    assert read_manifest(tmp_path / "m.jsonl")[0].family == "affective"


def test_default_ids_follow_the_image_content_not_its_path(tmp_path: Path) -> None:
    png(tmp_path / "a.png")
    (tmp_path / "sub").mkdir()
    (tmp_path / "m.csv").write_text("image,family,aspect\na.png,affective,joy\n")
    (tmp_path / "sub" / "m.csv").write_text(f"image,family,aspect\n{tmp_path / 'a.png'},affective,joy\n")
    assert read_manifest(tmp_path / "m.csv")[0].id == read_manifest(tmp_path / "sub" / "m.csv")[0].id


def test_a_resume_from_another_working_folder_pays_for_nothing(built, tmp_path: Path, monkeypatch) -> None:
    out, _requests = built
    monkeypatch.chdir(tmp_path)
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, Path("manifest.csv"), out) == 0
    assert server.requests == []


def test_the_top_level_is_checked_for_one_right_answer_and_refined(built) -> None:
    out, requests = built
    attempts = generation_requests(requests, 3, AMBIGUOUS)
    assert [r["temperature"] for r in attempts] == [0.7, 0.8]
    assert "(validator: two options fit)" in attempts[1]["messages"][-1]["content"][0]["text"]
    item = next(r for r in json.loads((out / "Aesthetic-Appreciation.json").read_text()) if r["anchor"] == AMBIGUOUS)
    assert "ambiguous" not in item["qa_levels"][2]["question"]


def test_an_existing_benchmark_folder_is_never_overwritten(tmp_path: Path, capsys) -> None:
    existing = tmp_path / "existing"
    shutil.copytree(SMOKE_DIR, existing)
    manifest = write_manifest(tmp_path, [("affective", "joy", "")])
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, manifest, existing) == 2
    assert server.requests == []
    assert "pass the existing benchmark as --base" in capsys.readouterr().err
    assert (existing / "Affective-Reasoning.json").read_bytes() == (SMOKE_DIR / "Affective-Reasoning.json").read_bytes()


def test_extending_a_benchmark_keeps_its_items_and_evens_out_the_answer_letters(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, ROWS[:8])
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, manifest, tmp_path / "out", "--base", str(SMOKE_DIR)) == 0
    for stem in ("Affective-Reasoning", "Implication-Understanding", "Aesthetic-Appreciation"):
        base = json.loads((SMOKE_DIR / f"{stem}.json").read_text())
        assert json.loads((tmp_path / "out" / f"{stem}.json").read_text())[: len(base)] == base
    assert validate(str(tmp_path / "out")).problems == []
    base = json.loads((SMOKE_DIR / "Affective-Reasoning.json").read_text())
    both = json.loads((tmp_path / "out" / "Affective-Reasoning.json").read_text())
    for level in range(3):
        before = Counter(it["qa_levels"][level]["correct_answer_key"] for it in base)
        after = Counter(it["qa_levels"][level]["correct_answer_key"] for it in both)
        spread = max(after[k] for k in "ABCD") - min(after[k] for k in "ABCD")
        assert spread <= max(1, max(before[k] for k in "ABCD") - min(before[k] for k in "ABCD") - 2)


def test_an_id_already_in_the_base_benchmark_is_refused(tmp_path: Path) -> None:
    png(tmp_path / "a.png")
    (tmp_path / "m.csv").write_text("image,family,aspect,id\na.png,affective,joy,joy_001\n")
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, tmp_path / "m.csv", tmp_path / "out", "--base", str(SMOKE_DIR)) == 2


def test_rejected_items_are_built_again_on_request(built, tmp_path: Path) -> None:
    out, _requests = built
    (tmp_path / "cfg.yaml").write_text("max_attempts: 4\n")
    args = ["--config", str(tmp_path / "cfg.yaml")]
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, tmp_path / "manifest.csv", out, *args) == 0
    assert server.requests == []  # rejected is final by default
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, tmp_path / "manifest.csv", out, *args, "--retry-rejected") == 0
    assert len(generation_requests(server.requests, 2, NEVER)) == 1  # attempts 1-3 come from the cache
    (rejected,) = [json.loads(line) for line in (out / "rejected.jsonl").read_text().splitlines()]
    assert [a["attempt"] for a in rejected["attempts"] if a["level"] == 2] == [1, 2, 3, 4]


def test_a_family_without_items_gets_no_file_so_the_folder_loads_as_the_families_it_has(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, [("affective", "joy", "")])
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, manifest, tmp_path / "out") == 0
    assert not (tmp_path / "out" / "Implication-Understanding.json").exists()
    assert len(load_path(tmp_path / "out", ["affective"]).raise_for_problems()) == 1


def test_config_files_that_do_not_parse_or_hold_bad_values_are_named(tmp_path: Path, capsys) -> None:
    manifest = write_manifest(tmp_path, [("affective", "joy", "")])
    for name, text, message in [
        ("bad.json", "{max_attempts: 2", "bad.json: not valid JSON"),
        ("bad.yaml", "max_attempts: [2", "bad.yaml: not valid YAML"),
        ("levels.yaml", "validate_levels: 2", "validate_levels must be a list drawn from 1, 2, 3"),
        ("tokens.yaml", "max_tokens: -5", "max_tokens must be a positive integer"),
    ]:
        (tmp_path / name).write_text(text)
        with FakeOpenAI(fake_mllm) as server:
            assert build(server, manifest, tmp_path / "out", "--config", str(tmp_path / name)) == 2
        assert message in capsys.readouterr().err


def test_the_report_counts_the_calls_each_item_made(built) -> None:
    out, requests = built
    report = json.loads((out / "build_report.json").read_text())
    assert report["calls_per_item"] == len(requests) / 12


def test_a_draft_needs_three_distinct_distractors() -> None:
    good = {"question": "Q?", "answer": "Calm", "distractors": ["Anger", "Fear", "Joy"]}
    assert parse_draft(json.dumps(good), 3).distractors == ("Anger", "Fear", "Joy")
    with pytest.raises(ReplyError, match="exactly three"):
        parse_draft(json.dumps({**good, "distractors": ["Anger", "Fear"]}), 3)
    with pytest.raises(ReplyError, match="not distinct"):
        parse_draft(json.dumps({**good, "distractors": ["Anger", "calm.", "Joy"]}), 3)
    with pytest.raises(ReplyError, match="question is empty"):
        parse_draft(json.dumps({**good, "question": " "}), 3)


def test_a_verdict_needs_every_check_as_a_boolean() -> None:
    verdict = parse_verdict('{"dependency": "yes", "progression": false, "single_answer": true, "reason": "abstract"}')
    assert not verdict.passed and len(verdict.failures()) == 1
    with pytest.raises(ReplyError, match="'progression' must be true or false"):
        parse_verdict('{"dependency": true, "progression": "maybe", "single_answer": true}')


def test_the_temperature_rises_per_attempt_up_to_the_cap() -> None:
    config = BuildConfig(temperature=0.9, temperature_step=0.2, temperature_cap=1.2)
    assert [config.temperature_at(n) for n in (1, 2, 3)] == [0.9, 1.1, 1.2]
    with pytest.raises(ValueError, match="max_attempts"):
        BuildConfig(max_attempts=0)


@pytest.mark.slow
def test_lmms_eval_scores_a_built_benchmark_through_the_hub_tasks(built, tmp_path: Path) -> None:
    out, _requests = built
    preds = tmp_path / "gold_answers"
    preds.mkdir()
    for _family, (_split, stem, _short) in FAMILIES.items():
        items = json.loads((out / f"{stem}.json").read_text())
        turns = [
            {
                "id": it["id"],
                "conversation_turns": [
                    {
                        "level": lv["level"],
                        "correct_answer_key": lv["correct_answer_key"],
                        "model_response_key": lv["correct_answer_key"],
                    }
                    for lv in it["qa_levels"]
                ],
            }
            for it in items
        ]
        (preds / f"results_{stem}.json").write_text(json.dumps({"predictions": turns}))
    results = run_lmms_eval(
        ["--model", "hvcu_replay", "--model_args", f"predictions={preds}", "--tasks", "hvcu_bench"],
        tmp_path / "runs",
        env={"HVCU_BENCH_DATA": str(out), "HF_HUB_OFFLINE": "1"},
    )
    assert results["results"]["hvcu_bench"]["acc_full,none"] == 100.0
    assert results["results"]["hvcu_bench_affect"]["n_chains,none"] == 8


def test_an_item_whose_manifest_row_changed_is_built_again(built, tmp_path: Path) -> None:
    out, _requests = built
    manifest = tmp_path / "manifest.csv"
    manifest.write_text(manifest.read_text().replace("hope at dawn", "quiet dusk"))
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, manifest, out) == 0
    assert len(generation_requests(server.requests, 3, "quiet dusk")) == 1
    assert len(server.requests) == 6  # that item's three stages and three validations; the rest is resumed
    anchors = [it["anchor"] for it in json.loads((out / "Affective-Reasoning.json").read_text())]
    assert "quiet dusk" in anchors and "hope at dawn" not in anchors
