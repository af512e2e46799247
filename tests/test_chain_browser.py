"""The chain browser (`chains.html`): built from real lmms-eval runs of the replay model, checked in Chromium.

Model A answers the smoke sample in both settings, model B in the base setting only. Every reply is chosen by
hand per level: R = the gold key, W = a wrong key, E = an empty reply, H = hostile HTML (no option letter, so
wrong). The expected first wrong levels and filter counts below are worked out by hand from these tables.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import item, run_lmms_eval
from PIL import Image
from test_report_page import CHROMIUM_FLAGS, SIZES, layout

from hvcu_tasks.report import browser
from hvcu_tasks.report.browser import embed_json, first_wrong_level, split_question
from hvcu_tasks.results.runs import sample_logs


def write_browser(runs, site, **options):
    """The chain browser of the run folders, read as `hvcu report` reads them."""
    return browser.write_browser(sample_logs(runs), site, runs=runs, **options)


HOSTILE = "</script><img src=x onerror=\"document.title='pwned'\"><b>bold</b> & more"

# Gold keys of the smoke sample (hvcu_tasks/dev/smoke/data), per family and sample.
GOLD = {
    ("implication", "metaphor_001"): "BAC",
    ("implication", "symbolism_001"): "ADB",
    ("implication", "contrast_001"): "CAB",
    ("implication", "exaggeration_001"): "DBA",
    ("implication", "dislocation_001"): "CCB",
    ("aesthetic", "color_001"): "DBA",
    ("aesthetic", "composition_001"): "CAD",
    ("aesthetic", "font_001"): "CBA",
    ("aesthetic", "graphics_001"): "BCD",
    ("affective", "joy_001"): "ABC",
    ("affective", "affection_001"): "BDA",
    ("affective", "wonder_001"): "CAB",
    ("affective", "anger_001"): "DCB",
    ("affective", "fear_001"): "ABC",
    ("affective", "sadness_001"): "DBA",
}
A_BASE = {
    "metaphor_001": "RRR",
    "symbolism_001": "WRR",
    "contrast_001": "RWR",
    "exaggeration_001": "RRW",
    "dislocation_001": "RRE",
    "color_001": "RRR",
    "composition_001": "RRR",
    "font_001": "WRW",
    "graphics_001": "RHR",
    "joy_001": "RRR",
    "affection_001": "RRR",
    "wonder_001": "RRR",
    "anger_001": "RWW",
    "fear_001": "RRR",
    "sadness_001": "ERR",
}
A_CONTEXT = {
    "metaphor_001": "RRW",
    "symbolism_001": "RRR",
    "contrast_001": "RWR",
    "exaggeration_001": "RRR",
    "dislocation_001": "RRR",
    "color_001": "RRR",
    "composition_001": "WRR",
    "font_001": "WRW",
    "graphics_001": "RRR",
    "joy_001": "RRR",
    "affection_001": "RER",
    "wonder_001": "RRR",
    "anger_001": "RWW",
    "fear_001": "RRR",
    "sadness_001": "RRR",
}
B_BASE = {sid: "RRR" for sid in A_BASE} | {"metaphor_001": "WWW", "color_001": "RRW"}

# First wrong level per sample, by hand from the tables above.
A_BASE_FIRST = {
    "none": {"metaphor_001", "color_001", "composition_001", "joy_001", "affection_001", "wonder_001", "fear_001"},
    "L1": {"symbolism_001", "font_001", "sadness_001"},
    "L2": {"contrast_001", "graphics_001", "anger_001"},
    "L3": {"exaggeration_001", "dislocation_001"},
}
A_CONTEXT_FIRST = {
    "none": {
        "symbolism_001",
        "exaggeration_001",
        "dislocation_001",
        "color_001",
        "graphics_001",
        "joy_001",
        "wonder_001",
        "fear_001",
        "sadness_001",
    },
    "L1": {"composition_001", "font_001"},
    "L2": {"contrast_001", "affection_001", "anger_001"},
    "L3": {"metaphor_001"},
}
BASE_RIGHT_CONTEXT_WRONG = {"metaphor_001", "composition_001", "affection_001"}
BASE_WRONG_CONTEXT_RIGHT = {"symbolism_001", "exaggeration_001", "dislocation_001", "graphics_001", "sadness_001"}


def reply(plan: str, gold: str) -> str:
    """The reply a plan letter stands for at a level whose gold key is `gold`."""
    return {"R": gold, "W": "A" if gold != "A" else "B", "E": "", "H": HOSTILE}[plan]


def write_predictions(path: Path, plans: dict[str, str]) -> Path:
    """Write replay predictions for the smoke sample from per-sample plans (one letter per level)."""
    lines = []
    for (family, sid), gold in GOLD.items():
        for level, (plan, key) in enumerate(zip(plans[sid], gold, strict=True), start=1):
            lines.append(json.dumps({"family": family, "sample_id": sid, "level": level, "response": reply(plan, key)}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def lmms_eval(root: Path, name: str, model: str, plans: dict[str, str], context: bool) -> Path:
    """Run the real lmms-eval CLI with the replay model on one setting of the smoke sample; return its folder."""
    predictions = write_predictions(root / f"{name}.jsonl", plans)
    if context:
        args = ["--model", "hvcu_context", "--model_args", f"inner=hvcu_replay,model={model},predictions={predictions}"]
        args += ["--tasks", "hvcu_bench_context_sample"]
    else:
        args = ["--model", "hvcu_replay", "--model_args", f"model={model},predictions={predictions}"]
        args += ["--tasks", "hvcu_bench_sample"]
    run_lmms_eval([*args, "--log_samples"], root / name)
    return root / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("browser_runs")
    return [
        lmms_eval(root, "a_base", "model-a", A_BASE, context=False),
        lmms_eval(root, "a_context", "model-a", A_CONTEXT, context=True),
        lmms_eval(root, "b_base", "model-b", B_BASE, context=False),
    ]


@pytest.fixture(scope="module")
def site(runs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    assert write_browser(runs, out) == out / "chains.html"
    return out


def page_data(page: Path) -> dict:
    """The data the page embeds (what its script renders)."""
    text = page.read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="chain-data">(.*?)</script>', text, re.S)
    assert found
    return json.loads(found.group(1))


def cards(data: dict) -> dict[tuple[str, str], dict]:
    """The page's cards by (model, sample id)."""
    return {(data["models"][c["model"]], c["id"]): c for c in data["cards"]}


def chromium_dom(url: str, tmp: Path) -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "headless Chromium is required (make browser installs Debian's chromium)"
    proc = subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'profile'}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def shown(dom: str) -> list[tuple[str, str]]:
    """(model, sample id) of every card the rendered page shows, in order."""
    return re.findall(r'<article class="card" data-model="([^"]*)" data-id="([^"]*)"', dom)


def count_line(dom: str) -> str:
    found = re.search(r'<p id="count"[^>]*>(.*?)</p>', dom)
    assert found
    return re.sub(r"<[^>]+>", "", found.group(1))


# ---- pure parts ---------------------------------------------------------------------------------------------


def test_a_logged_question_is_split_into_question_and_options() -> None:
    text = "What is shown?\nOptions:\nA. A cat\nB. A dog\nC. Two birds\nD. Nothing"
    assert split_question(text) == (
        "What is shown?",
        [["A", "A cat"], ["B", "A dog"], ["C", "Two birds"], ["D", "Nothing"]],
    )


def test_a_question_in_another_layout_is_kept_whole() -> None:
    assert split_question("Pick one: A or B?") == ("Pick one: A or B?", None)


@pytest.mark.parametrize(
    ("correct", "expected"),
    [
        ([True, True, True], "none"),
        ([False, True, True], "L1"),
        ([True, False, False], "L2"),
        ([True, True, False], "L3"),
        ([True, True], "incomplete"),
        ([False], "incomplete"),
    ],
)
def test_first_wrong_level_of_a_chain(correct: list[bool], expected: str) -> None:
    assert first_wrong_level(correct) == expected


def test_embedded_json_cannot_close_its_script_element() -> None:
    text = embed_json({"reply": HOSTILE, "more": "<!-- <script>"})
    assert "<" not in text and ">" not in text
    assert json.loads(text) == {"reply": HOSTILE, "more": "<!-- <script>"}


def test_embedded_json_keeps_a_lone_surrogate_a_reply_held() -> None:
    text = embed_json({"reply": "broken \ud800 text"})
    assert json.loads(text.encode("utf-8").decode("utf-8")) == {"reply": "broken \ud800 text"}


def test_a_run_folder_without_sample_logs_gives_no_page(tmp_path: Path) -> None:
    run = tmp_path / "run" / "model"
    run.mkdir(parents=True)
    (run / "20260101_results.json").write_text("{}", encoding="utf-8")
    assert write_browser([tmp_path / "run"], tmp_path / "site") is None
    assert not (tmp_path / "site" / "chains.html").exists()


def test_a_damaged_samples_line_is_one_error_naming_file_and_line(tmp_path: Path) -> None:
    folder = tmp_path / "run" / "model"
    folder.mkdir(parents=True)
    path = folder / "20260101_samples_hvcu_bench_sample_aesth.jsonl"
    outcome = {"sample_id": "color_001", "family": "aesthetic", "aspect": "color", "level": 1, "gold": "D", "pred": "D"}
    good = {"doc_id": 0, "filtered_resps": "D", "acc_full": {"outcomes": [outcome], "question": "Colours?"}}
    path.write_text(json.dumps(good) + '\n{"doc_id": 1, "acc_full": \n', encoding="utf-8")
    with pytest.raises(ValueError) as exc:
        write_browser([tmp_path / "run"], tmp_path / "site")
    assert str(exc.value).startswith(f"{path}:2: not an HVCU-Bench samples line (not valid JSON: ")
    assert "\n" not in str(exc.value)


# ---- real runs ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_sample_is_listed_once_per_model(site: Path) -> None:
    data = page_data(site / "chains.html")
    listed = [(data["models"][c["model"]], c["id"]) for c in data["cards"]]
    expected = {(model, sid) for model in ("model-a", "model-b") for _family, sid in GOLD}
    assert len(listed) == 30 and set(listed) == expected


@pytest.mark.slow
@pytest.mark.parametrize(("setting", "table"), [("base", A_BASE_FIRST), ("context", A_CONTEXT_FIRST)])
def test_first_wrong_level_of_each_sample(site: Path, setting: str, table: dict[str, set[str]]) -> None:
    by_card = cards(page_data(site / "chains.html"))
    got = {sid: by_card[("model-a", sid)][setting]["first"] for _family, sid in GOLD}
    assert got == {sid: level for level, sids in table.items() for sid in sids}


@pytest.mark.slow
def test_model_b_has_no_context_chain(site: Path) -> None:
    by_card = cards(page_data(site / "chains.html"))
    assert all(by_card[("model-b", sid)]["context"] is None for _family, sid in GOLD)


@pytest.mark.slow
def test_the_base_right_context_wrong_samples(site: Path) -> None:
    data = page_data(site / "chains.html")
    both = [c for c in data["cards"] if c["base"] and c["context"]]
    assert {c["id"] for c in both if c["base"]["full"] and c["context"]["full"] is False} == BASE_RIGHT_CONTEXT_WRONG
    assert {c["id"] for c in both if c["base"]["full"] is False and c["context"]["full"]} == BASE_WRONG_CONTEXT_RIGHT


@pytest.mark.slow
def test_a_card_carries_questions_options_gold_replies_and_letters(site: Path) -> None:
    data = page_data(site / "chains.html")
    card = cards(data)[("model-a", "color_001")]
    question, options = data["questions"][card["base"]["questions"][0]]
    assert question == "Which colours make up the gradient?"
    assert options == [
        ["A", "Blue to purple"],
        ["B", "Black to grey"],
        ["C", "Green to teal"],
        ["D", "Red-orange to yellow-orange"],
    ]
    assert card["base"]["gold"] == ["D", "B", "A"] and card["base"]["replies"] == ["D", "B", "A"]
    assert card["base"]["parsed"] == ["D", "B", "A"] and card["context"]["parsed"] == ["D", "B", "A"]
    assert (card["family"], card["aspect"]) == ("aesthetic", "color")


@pytest.mark.slow
def test_an_empty_reply_is_no_reply_and_no_letter(site: Path) -> None:
    card = cards(page_data(site / "chains.html"))[("model-a", "sadness_001")]
    assert card["base"]["failed"] == [True, False, False] and card["base"]["parsed"][0] is None


@pytest.mark.slow
def test_every_image_is_one_small_thumbnail_shared_by_models_and_settings(site: Path) -> None:
    data = page_data(site / "chains.html")
    names = {c["image"] for c in data["cards"]}
    assert None not in names and len(names) == 15  # 15 distinct smoke images, 30 cards in 2 settings
    assert sorted(p.name for p in (site / "thumbs").iterdir()) == sorted(f"{n}.jpg" for n in names)
    for name in names:
        with Image.open(site / "thumbs" / f"{name}.jpg") as thumb:
            assert thumb.format == "JPEG" and max(thumb.size) <= 240
        assert (site / "images" / f"{name}.jpg").is_file()


@pytest.mark.slow
def test_the_page_fetches_nothing_from_outside_the_site(site: Path) -> None:
    text = (site / "chains.html").read_text(encoding="utf-8")
    assert not re.search(r"""(?:src|href)=["'](?!#|data:)""", text)
    assert text.count("</script>") == 2  # the data block and the script: the hostile reply closed nothing


@pytest.mark.slow
def test_all_cards_are_counted_without_filters(site: Path, tmp_path: Path) -> None:
    dom = chromium_dom((site / "chains.html").as_uri(), tmp_path)
    assert count_line(dom) == "30 of 30 cards shown (one per sample and model)"
    assert len(shown(dom)) == 30


@pytest.mark.slow
def test_a_hostile_reply_is_shown_as_text(site: Path, tmp_path: Path) -> None:
    dom = chromium_dom((site / "chains.html").as_uri() + "#model=model-a&aspect=graphics", tmp_path)
    assert shown(dom) == [("model-a", "graphics_001")]
    assert (
        "&lt;/script&gt;&lt;img src=x onerror=\"document.title='pwned'\"&gt;&lt;b&gt;bold&lt;/b&gt; &amp; more" in dom
    )
    assert "<b>bold</b>" not in dom and 'src="x"' not in dom
    assert "<title>HVCU-Bench chain browser</title>" in dom


@pytest.mark.slow
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("model=model-a&base=L1", {("model-a", s) for s in A_BASE_FIRST["L1"]}),
        ("model=model-a&base=none", {("model-a", s) for s in A_BASE_FIRST["none"]}),
        ("model=model-a&context=L2", {("model-a", s) for s in A_CONTEXT_FIRST["L2"]}),
        ("model=model-a&context=L3", {("model-a", "metaphor_001")}),
        ("delta=base-only", {("model-a", s) for s in BASE_RIGHT_CONTEXT_WRONG}),
        ("delta=context-only", {("model-a", s) for s in BASE_WRONG_CONTEXT_RIGHT}),
        (
            "family=aesthetic&base=none",
            {
                ("model-a", "color_001"),
                ("model-a", "composition_001"),
                ("model-b", "composition_001"),
                ("model-b", "font_001"),
                ("model-b", "graphics_001"),
            },
        ),
        ("aspect=metaphor", {("model-a", "metaphor_001"), ("model-b", "metaphor_001")}),
        ("model=model-b&base=L3", {("model-b", "color_001")}),
        ("model=model-b&context=none", set()),
    ],
)
def test_filters_show_exactly_the_expected_samples(site: Path, tmp_path: Path, query: str, expected: set) -> None:
    dom = chromium_dom((site / "chains.html").as_uri() + "#" + query, tmp_path)
    assert set(shown(dom)) == expected and len(shown(dom)) == len(expected)
    assert count_line(dom) == f"{len(expected)} of 30 cards shown (one per sample and model)"


@pytest.mark.slow
def test_a_page_of_cards_in_family_aspect_then_model_order(site: Path, tmp_path: Path) -> None:
    dom = chromium_dom((site / "chains.html").as_uri() + "#per=10&page=2", tmp_path)
    aesthetic = ["color_001", "composition_001", "font_001", "graphics_001"]
    expected = [(m, s) for s in aesthetic for m in ("model-a", "model-b")] + [
        ("model-a", "joy_001"),
        ("model-b", "joy_001"),
    ]
    assert shown(dom) == expected
    assert count_line(dom) == "30 of 30 cards shown (one per sample and model)"


# ---- images that cannot be shown ----------------------------------------------------------------------------


def local_run(root: Path) -> tuple[Path, Path]:
    """Run the base setting on a two-sample local copy (distinct images); return (data folder, run folder)."""
    data = root / "data"
    (data / "Image" / "Aesthetic-Appreciation").mkdir(parents=True)
    items = [item("color_001", "ABC"), item("font_001", "BCD")]
    (data / "Aesthetic-Appreciation.json").write_text(json.dumps(items), encoding="utf-8")
    for it, colour in zip(items, ("red", "blue"), strict=True):
        Image.new("RGB", (64, 48), colour).save(data / "Image" / "Aesthetic-Appreciation" / f"{it['id']}.png")
    predictions = root / "p.jsonl"
    predictions.write_text(
        "".join(
            json.dumps({"family": "aesthetic", "sample_id": it["id"], "level": k, "response": "A"}) + "\n"
            for it in items
            for k in (1, 2, 3)
        ),
        encoding="utf-8",
    )
    run = root / "run"
    args = ["--model", "hvcu_replay", "--model_args", f"model=m,predictions={predictions}"]
    run_lmms_eval([*args, "--tasks", "hvcu_bench_aesth", "--log_samples"], run, env={"HVCU_BENCH_DATA": str(data)})
    return data, run


@pytest.mark.slow
def test_images_of_the_data_passed_are_shown_and_only_with_it(tmp_path: Path, capsys) -> None:
    data, run = local_run(tmp_path)
    by_card = cards(page_data(write_browser([run], tmp_path / "site", data=[str(data)])))
    for sid in ("color_001", "font_001"):
        assert by_card[("m", sid)]["image"] is not None and by_card[("m", sid)]["note"] is None
    by_card = cards(page_data(write_browser([run], tmp_path / "bare")))  # the folder the log names is not read
    for sid in ("color_001", "font_001"):
        assert by_card[("m", sid)]["image"] is None and "hvcu report --data" in by_card[("m", sid)]["note"]
    err = capsys.readouterr().err
    both = r"2 samples \(aesthetic/color_001, aesthetic/font_001\)"
    assert re.search(rf"^warning: .*_samples_hvcu_bench_aesth\.jsonl: {both}: image not shown \(", err, re.M)


@pytest.mark.slow
def test_images_of_data_changed_since_the_run_are_not_shown(tmp_path: Path, capsys) -> None:
    data, run = local_run(tmp_path)
    Image.new("RGB", (64, 48), "green").save(data / "Image" / "Aesthetic-Appreciation" / "color_001.png")
    page = write_browser([run], tmp_path / "site", data=[str(data)])
    by_card = cards(page_data(page))
    for sid in ("color_001", "font_001"):
        assert by_card[("m", sid)]["image"] is None
        assert "has changed since the run" in by_card[("m", sid)]["note"]
    err = capsys.readouterr().err
    both = r"2 samples \(aesthetic/color_001, aesthetic/font_001\)"
    line = rf"^warning: .*_samples_hvcu_bench_aesth\.jsonl: {both}: image not shown \(.*has changed since the run"
    assert re.search(line, err, re.M)


def test_a_model_logged_twice_in_one_setting_is_one_error_naming_both_files(tmp_path: Path) -> None:
    outcome = {"sample_id": "color_001", "family": "aesthetic", "aspect": "color", "level": 1, "gold": "D", "pred": "D"}
    line = {"doc_id": 0, "filtered_resps": "D", "acc_full": {"outcomes": [outcome], "question": "Colours?"}}
    paths = []
    for run in ("first", "second"):
        folder = tmp_path / run / "m"
        folder.mkdir(parents=True)
        results = {"results": {}, "config": {"model_args": "model=same-model"}}
        (folder / "20260101_results.json").write_text(json.dumps(results), encoding="utf-8")
        paths.append(folder / "20260101_samples_hvcu_bench_sample_aesth.jsonl")
        paths[-1].write_text(json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as exc:
        write_browser([tmp_path / "first", tmp_path / "second"], tmp_path / "site")
    assert str(exc.value) == (
        f"{paths[1]}: same-model has base aesthetic/color_001 also in {paths[0]}; pass one run per model and setting"
    )


def test_samples_files_of_other_hvcu_variants_are_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "run" / "model"
    folder.mkdir(parents=True)
    for task in ("hvcu_bench_context_gold_sample_aesth", "hvcu_bench_blind_aesth", "hvcu_bench_circular_sample_impl"):
        (folder / f"20260101_samples_{task}.jsonl").write_text("not read\n", encoding="utf-8")
    assert write_browser([tmp_path / "run"], tmp_path / "site") is None


# ---- logged image files: never published (the data passed with --data is the only source) --------------------


def hand_run(root: Path, media: Path) -> tuple[Path, Path]:
    """A base-setting samples file of one sample (color_001, all levels right) whose run read local data at
    root/data that can no longer be loaded (its JSON is gone), and that logged `media` as its image file.
    Return (run folder, samples file)."""
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    identity = {"family": "aesthetic", "kind": "local", "location": str(data.resolve()), "fingerprint": "sha256:0"}
    folder = root / "run" / "m"
    folder.mkdir(parents=True)
    path = folder / "20260101_samples_hvcu_bench_aesth.jsonl"
    lines = []
    for level, gold in enumerate("DBA", start=1):
        outcome = {"sample_id": "color_001", "family": "aesthetic", "aspect": "color", "level": level}
        outcome |= {"gold": gold, "pred": gold, "pred_official": gold}
        entry = {"outcomes": [outcome], "question": f"Level {level}?", "data_identity": identity}
        line = {"doc_id": level - 1, "filtered_resps": [gold], "input_media": [str(media)], "acc_full": entry}
        lines.append(json.dumps(line))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root / "run", path


def picture(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (32, 24), "red").save(path)
    return path


def test_a_logged_image_file_outside_the_run_is_not_published(tmp_path: Path, capsys) -> None:
    secret = picture(tmp_path / "home" / "private.png")
    run, samples = hand_run(tmp_path, secret)
    page = write_browser([run], tmp_path / "site")
    card = cards(page_data(page))[("m", "color_001")]
    assert card["image"] is None and "hvcu report --data" in card["note"]
    assert list((tmp_path / "site" / "thumbs").iterdir()) == []
    err = capsys.readouterr().err
    assert f"warning: {samples}: aesthetic/color_001: image not shown (" in err


def test_a_logged_image_file_linked_from_inside_the_run_to_outside_is_not_published(tmp_path: Path) -> None:
    secret = picture(tmp_path / "home" / "private.png")
    link = tmp_path / "run" / "m" / "image.png"
    run, _samples = hand_run(tmp_path, link)
    link.symlink_to(secret)
    card = cards(page_data(write_browser([run], tmp_path / "site")))[("m", "color_001")]
    assert card["image"] is None and card["note"].startswith("image not shown: ")


@pytest.mark.parametrize("where", ["data/Image/Aesthetic-Appreciation/color_001.png", "run/m/color_001.png"])
def test_a_logged_image_file_in_the_data_or_the_run_folder_is_not_published_either(tmp_path: Path, where: str) -> None:
    run, _samples = hand_run(tmp_path, tmp_path / where)
    picture(tmp_path / where)
    card = cards(page_data(write_browser([run], tmp_path / "site", data=[str(tmp_path / "data")])))[("m", "color_001")]
    assert card["image"] is None and "cannot be loaded" in card["note"]
    assert list((tmp_path / "site" / "thumbs").iterdir()) == []


# ---- the two-model view -------------------------------------------------------------------------------------

# Base setting, model A = model-a, model B = model-b, by hand from A_BASE and B_BASE (the authors' rule reads the
# same letters here: every reply is one letter, empty, or the hostile text, in which it finds no answer).
PAIRS_BASE = {
    "both-hold": {"composition_001", "joy_001", "affection_001", "wonder_001", "fear_001"},
    "a-holds-L1": {"metaphor_001"},
    "a-holds-L3": {"color_001"},
    "b-holds-L1": {"symbolism_001", "font_001", "sadness_001"},
    "b-holds-L2": {"contrast_001", "graphics_001", "anger_001"},
    "b-holds-L3": {"exaggeration_001", "dislocation_001"},
}
GROUP_KEYS = [
    "both-hold",
    "a-holds",
    "a-holds-L1",
    "a-holds-L2",
    "a-holds-L3",
    "b-holds",
    "b-holds-L1",
    "b-holds-L2",
    "b-holds-L3",
    "both-break",
    "only-a",
    "only-b",
    "incomplete",
]


def expected_counts(groups: dict[str, set[str]]) -> dict[str, int]:
    """The summary's count per group key (the two discordant totals included) from samples per group."""
    counts = {key: len(groups.get(key, ())) for key in GROUP_KEYS}
    for side in ("a-holds", "b-holds"):
        counts[side] = sum(counts[f"{side}-L{k}"] for k in (1, 2, 3))
    return counts


def summary_counts(dom: str) -> dict[str, int]:
    """The two-model summary's counts by group key, read from the rendered page."""
    cells = re.findall(r'<td data-key="([^"]+)">(.*?)</td>', dom)
    return {key: int(re.sub(r"<[^>]+>", "", text)) for key, text in cells}


def pair_list(dom: str) -> list[tuple[str, str, str]]:
    """(family, sample id, level the breaking model first broke at) of every listed discordant sample, in order."""
    return re.findall(r'<section class="pair" data-family="([^"]*)" data-id="([^"]*)" data-broken="([^"]*)"', dom)


def python_list(groups: dict[str, list], keys: list[str]) -> list[tuple[str, str, str]]:
    """The pure function's samples of the given group keys as pair_list reads them from the page."""
    return [(family, sid, key[-2:]) for key in keys for family, sid in groups[key]]


@pytest.mark.slow
def test_the_pure_pairing_of_the_real_runs(runs: list[Path]) -> None:
    from hvcu_tasks.report.browser import read_cards
    from hvcu_tasks.report.pairs import chain_pairs

    found = chain_pairs(read_cards(sample_logs(runs)), "model-a", "model-b", "base")
    assert {key: {sid for _f, sid in samples} for key, samples in found.items() if samples} == PAIRS_BASE


@pytest.mark.slow
def test_the_two_model_summary_and_list_match_the_pure_function(runs: list[Path], site: Path, tmp_path: Path) -> None:
    from hvcu_tasks.report.browser import read_cards
    from hvcu_tasks.report.pairs import chain_pairs

    dom = chromium_dom((site / "chains.html").as_uri() + "#pair=b-holds", tmp_path)  # defaults: model-a, model-b
    assert summary_counts(dom) == expected_counts(PAIRS_BASE)
    listed = pair_list(dom)
    expected = {(level, sid) for level in ("L1", "L2", "L3") for sid in PAIRS_BASE[f"b-holds-{level}"]}
    assert {(level, sid) for _family, sid, level in listed} == expected and len(listed) == 8
    python = chain_pairs(read_cards(sample_logs(runs)), "model-a", "model-b", "base", official=True)
    assert listed == python_list(python, ["b-holds-L1", "b-holds-L2", "b-holds-L3"])
    assert count_line(dom).startswith("8 samples where model-b's chain holds and model-a's breaks (base setting")


@pytest.mark.slow
def test_each_listed_sample_shows_the_two_models_cards_side_by_side(site: Path, tmp_path: Path) -> None:
    dom = chromium_dom((site / "chains.html").as_uri() + "#a=model-a&b=model-b&pair=a-holds-L3", tmp_path)
    assert pair_list(dom) == [("aesthetic", "color_001", "L3")]
    assert shown(dom) == [("model-a", "color_001"), ("model-b", "color_001")]
    assert "color_001 (aesthetic · color): model-a holds, model-b first breaks at L3 connotation" in dom


@pytest.mark.slow
def test_swapping_the_models_swaps_the_groups_on_the_page(site: Path, tmp_path: Path) -> None:
    dom = chromium_dom((site / "chains.html").as_uri() + "#a=model-b&b=model-a&rule=ours&pair=a-holds-L2", tmp_path)
    swapped = {key.replace("a-", "x-").replace("b-", "a-").replace("x-", "b-"): s for key, s in PAIRS_BASE.items()}
    assert summary_counts(dom) == expected_counts(swapped)
    assert {(sid, level) for _f, sid, level in pair_list(dom)} == {(s, "L2") for s in PAIRS_BASE["b-holds-L2"]}


@pytest.mark.slow
def test_samples_only_one_model_answered_are_counted(site: Path, tmp_path: Path) -> None:
    dom = chromium_dom((site / "chains.html").as_uri() + "#setting=context", tmp_path)  # model-b ran base only
    assert summary_counts(dom) == expected_counts({"only-a": set(A_BASE)})


@pytest.mark.slow
def test_the_same_model_twice_is_refused_on_the_page(site: Path, tmp_path: Path) -> None:
    dom = chromium_dom((site / "chains.html").as_uri() + "#a=model-a&b=model-a&pair=a-holds", tmp_path)
    assert "Model A and model B are both model-a: pick two different models." in dom
    assert summary_counts(dom) == {} and pair_list(dom) == []
    assert count_line(dom) == "30 of 30 cards shown (one per sample and model)"


HOSTILE_MODEL = "<img src=x onerror=\"document.title='pwned'\">\"'&<b>m</b>"


def chain(correct: list[bool]) -> dict:
    """What the page embeds of one chain in one setting, judged the same by both rules."""
    first = first_wrong_level(correct)
    letters = ["A" if right else "B" for right in correct]
    return {
        "questions": [0, 0, 0],
        "gold": ["A", "A", "A"],
        "replies": letters,
        "cut": [0, 0, 0],
        "parsed": letters,
        "official": letters,
        "correct": correct,
        "correct_official": correct,
        "failed": [False] * 3,
        "first": first,
        "first_official": first,
        "full": all(correct),
        "source": "samples.jsonl:1",
    }


def test_hostile_model_names_stay_text_in_the_two_model_view(tmp_path: Path) -> None:
    from urllib.parse import urlencode

    from hvcu_tasks.report.browser import render_page

    models = [HOSTILE_MODEL + "1", HOSTILE_MODEL + "2"]
    base = {"family": "aesthetic", "aspect": "color", "id": "color_001", "image": None, "note": "no image"}
    cards = [base | {"model": 0, "base": chain([True] * 3), "context": None}]
    cards.append(base | {"model": 1, "base": chain([True, False, True]), "context": None})
    data = {"models": models, "families": [], "aspects": [], "questions": [["Q?", [["A", "a"], ["B", "b"]]]]}
    page = tmp_path / "chains.html"
    page.write_text(render_page(data | {"cards": cards}, []), encoding="utf-8")
    dom = chromium_dom(page.as_uri() + "#" + urlencode({"a": models[0], "b": models[1], "pair": "a-holds"}), tmp_path)
    assert pair_list(dom) == [("aesthetic", "color_001", "L2")]
    assert "<title>HVCU-Bench chain browser</title>" in dom
    assert "<b>m</b>" not in dom and 'src="x"' not in dom
    escaped = "&lt;img src=x onerror=\"document.title='pwned'\"&gt;\"'&amp;&lt;b&gt;m&lt;/b&gt;"
    assert f"{escaped}1 holds, {escaped}2 first breaks at L2 bridge" in dom


def two_model_page(tmp_path: Path, chains: dict[str, tuple[dict | None, dict | None]]) -> Path:
    """A hand-written page of models m1 and m2 with, per aesthetic sample id, each one's base chain (or none)."""
    from hvcu_tasks.report.browser import render_page

    cards = []
    for sid, pair in chains.items():
        for model, one in enumerate(pair):
            if one is not None:
                cards.append({"family": "aesthetic", "aspect": "color", "id": sid, "image": None, "note": "no image"})
                cards[-1] |= {"model": model, "base": one, "context": None}
    data = {"models": ["m1", "m2"], "families": [], "aspects": [], "questions": [["Q?", None]], "cards": cards}
    page = tmp_path / "chains.html"
    page.write_text(render_page(data, []), encoding="utf-8")
    return page


def cut(correct: list[bool]) -> dict:
    """An embedded chain of fewer than three levels."""
    found = chain(correct) | {"first": "incomplete", "first_official": "incomplete"}
    kept = ("questions", "gold", "replies", "parsed", "official", "correct_official")
    return found | {key: found[key][: len(correct)] for key in kept}


# s1: m1 holds under our rule only (the authors' rule reads no letter at L3); s2: m2's chain was cut after L2;
# s3: m1's chain was cut after L1 and m2 broke at L1; s4: only m2 has it; s5: both break.
HAND_CHAINS = {
    "s1": (
        chain([True] * 3)
        | {"first_official": "L3", "official": ["A", "A", None], "correct_official": [True] * 2 + [False]},
        chain([True] * 3),
    ),
    "s2": (chain([True] * 3), cut([True, True])),
    "s3": (cut([True]), chain([False, True, True])),
    "s4": (None, chain([True] * 3)),
    "s5": (chain([True, False, True]), chain([False, False, False])),
}


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("", {"b-holds-L3": {"s1"}, "incomplete": {"s2", "s3"}, "only-b": {"s4"}, "both-break": {"s5"}}),
        ("ours", {"both-hold": {"s1"}, "incomplete": {"s2", "s3"}, "only-b": {"s4"}, "both-break": {"s5"}}),
    ],
)
def test_the_page_groups_by_the_chosen_rule_and_counts_incomplete_chains(tmp_path: Path, rule: str, expected) -> None:
    page = two_model_page(tmp_path, HAND_CHAINS)
    dom = chromium_dom(page.as_uri() + f"#rule={rule}", tmp_path)
    assert summary_counts(dom) == expected_counts(expected)
    rule_name = "this toolkit's rule" if rule else "the authors' rule"
    assert f"<caption>base setting, {rule_name}</caption>" in dom


def badges(dom: str, sid: str) -> list[str]:
    """The verdict badges of the cards listed for one sample in the two-model view, in order."""
    section = re.search(rf'<section class="pair" data-family="[^"]*" data-id="{sid}".*?</section>', dom, re.S)
    assert section, dom[-2000:]
    return re.findall(r'<span class="badge[^"]*">([^<]*)</span>', section.group(0))


def test_the_listed_cards_are_judged_by_the_rule_of_the_summary_above_them(tmp_path: Path) -> None:
    # s1: m1's L3 reply has no letter for the authors' rule: under it (the default) m2 holds and m1 breaks at L3.
    dom = chromium_dom(two_model_page(tmp_path, HAND_CHAINS).as_uri() + "#pair=b-holds-L3", tmp_path)
    assert [sid for _family, sid, _level in pair_list(dom)] == ["s1"]
    assert badges(dom, "s1") == [
        "base: first wrong L3 (authors' rule)",
        "context: not run",
        "base: all right (authors' rule)",
        "context: not run",
    ]
    assert dom.count('<span class="bad">✗ </span>A (authors\' —)') == 1  # m1's L3, wrong by that rule


def test_the_card_list_keeps_our_rule_and_says_what_a_dash_means(tmp_path: Path) -> None:
    dom = chromium_dom(two_model_page(tmp_path, HAND_CHAINS).as_uri() + "#model=m1&id=s1", tmp_path)
    assert shown(dom) == [("m1", "s1")]
    assert re.findall(r'<span class="badge[^"]*">([^<]*)</span>', dom) == ["base: all right", "context: not run"]
    assert '<span class="ok">✓ </span>A (authors\' —)<span class="note"> (—: no letter read)</span>' in dom


VIEWS = {"cards": "", "two-model list": "#pair=b-holds-L1"}
"""The page as it opens (the two-model summary, the filters, the first cards) and a list of the two models' cards
side by side."""


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("size", SIZES)
def test_the_page_never_scrolls_sideways_each_table_scrolls_in_its_box(site, tmp_path, view, size) -> None:
    seen = layout(site / "chains.html", size, tmp_path, VIEWS[view])
    assert seen["width"] == size[0] and seen["scroll"] <= seen["width"]
    assert seen["unboxed"] == []


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("size", SIZES)
def test_questions_and_replies_wrap_at_words_never_a_word_per_line(site, tmp_path, view, size) -> None:
    assert layout(site / "chains.html", size, tmp_path, VIEWS[view])["wrapped"] == []


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("size", SIZES)
def test_no_header_overlaps_another(site, tmp_path, view, size) -> None:
    assert layout(site / "chains.html", size, tmp_path, VIEWS[view])["overlap"] == []
