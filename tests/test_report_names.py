"""Names and texts read from files are data: every renderer shows them as the text they are, or the report refuses
them in one line naming the file and field; the chain browser publishes only pictures of the data the user passed.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from conftest import item
from PIL import Image

from hvcu_tasks.cli import main
from hvcu_tasks.report import browser
from hvcu_tasks.report.render import to_markdown
from hvcu_tasks.report.tables import Table
from hvcu_tasks.results.runs import sample_logs


def write_browser(runs, site, **options):
    """The chain browser of the run folders, read as `hvcu report` reads them."""
    return browser.write_browser(sample_logs(runs), site, runs=runs, **options)


FULL = {"acc_l1_perc": 90.0, "acc_l2_bridge": 80.0, "acc_l3_conn": 70.0, "acc_full": 60.0, "n_incomplete": 0}
INJECTED = "evil\n| GPT-9 [paper] | 99.99 |"
MARKUP = r"a|b *c* <i>x</i> m$x^$ 5% _u_ [l](http://e) \q"
"""A model name holding what each format reads as markup (Markdown, LaTeX, HTML, mathtext)."""


def write_run(folder: Path, model: str, tasks: tuple[str, ...] = ("impl", "aesth", "affect")) -> Path:
    """Write a minimal lmms-eval results file whose model name (config.model_args model=) is `model`."""
    folder.mkdir(parents=True, exist_ok=True)
    results = {f"hvcu_bench_{t}": {f"{k},none": v for k, v in FULL.items()} for t in tasks}
    data = {"results": results, "config": {"model": "vllm", "model_args": f"model={model}", "limit": None}}
    path = folder / "20260101_000000_results.json"
    path.write_text(json.dumps(data), encoding="utf-8")  # json.dumps writes a lone surrogate as \ud800
    return path


# ---- Markdown: a cell never leaves its row ------------------------------------------------------------------


def test_a_line_break_in_a_cell_stays_in_its_row() -> None:
    table = Table("t", "T", ["Model", "Score"], [[INJECTED, 1.0]], ["note with a\nbreak"])
    lines = to_markdown(table).splitlines()
    assert lines == [
        "### T",
        "",
        "| Model | Score |",
        "|---|---:|",
        "| evil\\n\\| GPT-9 [paper] \\| 99.99 \\| | 1.00 |",
        "",
        "- note with a\\nbreak",
    ]


def test_markup_in_a_cell_is_escaped() -> None:
    row = to_markdown(Table("t", "T", ["Model"], [[MARKUP]])).splitlines()[4]
    assert row == r"| a\|b \*c\* \<i\>x\</i\> m\$x^\$ 5% \_u\_ [l\](http://e) \\q |"


# ---- the boundary: a name that is not one line of text is refused, naming file and field ----------------------


@pytest.mark.parametrize(
    ("name", "code"), [(INJECTED, "U+000A"), ("model\ud800x", "U+D800"), ("a\u202eb", "U+202E")], ids=str
)
@pytest.mark.parametrize("fmt", ["md", "html"])
def test_a_name_that_is_not_one_line_of_text_is_refused_in_one_line(
    tmp_path: Path, capsys, name: str, code: str, fmt: str
) -> None:
    results = write_run(tmp_path / "run", name)
    assert main(["report", str(tmp_path / "run"), "--format", fmt, "--out", str(tmp_path / "out")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {results}: field config.model_args model: model name ")
    assert f"({code})" in lines[0]
    assert not (tmp_path / "out" / "leaderboard.md").exists() and not (tmp_path / "out" / "index.html").exists()


def test_a_name_in_a_results_file_field_other_than_model_args_is_named(tmp_path: Path, capsys) -> None:
    results = write_run(tmp_path / "run", "")
    data = json.loads(results.read_text(encoding="utf-8"))
    data["config"]["model_args"] = ""
    data["model_name"] = INJECTED
    results.write_text(json.dumps(data), encoding="utf-8")
    assert main(["report", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.startswith(f"error: {results}: field model_name: model name 'evil\\n")


# ---- every format shows markup in a name as the text it is --------------------------------------------------


def test_a_dollar_in_a_name_is_no_formula_in_the_figures(tmp_path: Path) -> None:
    write_run(tmp_path / "run", "m$x^$")
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "out")]) == 0
    assert "| m\\$x^\\$ |" in (tmp_path / "out" / "leaderboard.md").read_text(encoding="utf-8")
    svg = (tmp_path / "out" / "figures" / "degradation_base.svg").read_text(encoding="utf-8")
    assert "<!-- m$x^$ -->" in svg  # matplotlib names each text it draws: the label is the literal name


def rendered(tmp_path: Path, capsys, fmt: str) -> str:
    """Return `hvcu report` of one run named MARKUP in a format, as printed."""
    write_run(tmp_path / "run", MARKUP)
    assert main(["report", str(tmp_path / "run"), "--format", fmt, "--no-reference"]) == 0
    return capsys.readouterr().out


def test_csv_holds_the_name_as_it_is(tmp_path: Path, capsys) -> None:
    rows = list(csv.reader(io.StringIO(rendered(tmp_path, capsys, "csv"))))
    assert rows[1][1] == MARKUP


def test_json_holds_the_name_as_it_is(tmp_path: Path, capsys) -> None:
    tables = json.loads(rendered(tmp_path, capsys, "json"))
    assert tables[0]["rows"][0][1] == MARKUP


def test_latex_typesets_the_name_as_it_is(tmp_path: Path, capsys) -> None:
    text = rendered(tmp_path, capsys, "latex")
    escaped = (
        r"a\textbar{}b *c* \textless{}i\textgreater{}x\textless{}/i\textgreater{} m\$x\textasciicircum{}\$ 5\% "
        r"\_u\_ [l](http://e) \textbackslash{}q"
    )
    assert f"& {escaped} &" in text


def test_html_shows_the_name_as_it_is(tmp_path: Path) -> None:
    write_run(tmp_path / "run", MARKUP)
    assert main(["report", str(tmp_path / "run"), "--format", "html", "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "a|b *c* &lt;i&gt;x&lt;/i&gt; m$x^$ 5% _u_ [l](http://e) \\q</a>" in page
    assert "<i>x</i>" not in page


# ---- the chain browser: pictures only from the data the user passed, checked against the fingerprint ---------


def local_data(root: Path) -> tuple[Path, dict]:
    """Write a two-sample local copy of the aesthetic family (red color_001, blue font_001); return the folder and
    the data identity a run on it records."""
    from hvcu_tasks.core.fingerprint import fingerprint
    from hvcu_tasks.data.loaders import load_source
    from hvcu_tasks.data.validate import image_sha256

    data = root / "data"
    images = data / "Image" / "Aesthetic-Appreciation"
    images.mkdir(parents=True)
    items = [item("color_001", "ABC"), item("font_001", "BCD")]
    (data / "Aesthetic-Appreciation.json").write_text(json.dumps(items), encoding="utf-8")
    for it, colour in zip(items, ("red", "blue"), strict=True):
        Image.new("RGB", (64, 48), colour).save(images / f"{it['id']}.png")
    loaded = load_source(str(data), "aesthetic")
    assert not loaded.problems
    found = fingerprint(loaded.samples, lambda s: image_sha256(s.image))
    return data, {"family": "aesthetic", "kind": "local", "location": str(data.resolve()), "fingerprint": found}


def samples_run(root: Path, identity: dict, media: dict[str, Path]) -> Path:
    """Write a base-setting samples log (all levels right) of the samples in `media`, each logging that image file."""
    folder = root / "run" / "m"
    folder.mkdir(parents=True)
    lines = []
    for n, (sid, path) in enumerate(media.items()):
        for level, gold in enumerate("ABC", start=1):
            outcome = {"sample_id": sid, "family": "aesthetic", "aspect": sid.split("_")[0], "level": level}
            outcome |= {"gold": gold, "pred": gold, "pred_official": gold}
            entry = {"outcomes": [outcome], "question": f"Level {level}?", "data_identity": identity}
            line = {
                "doc_id": 3 * n + level - 1,
                "filtered_resps": [gold],
                "input_media": [str(path)],
                "acc_full": entry,
            }
            lines.append(json.dumps(line))
    (folder / "20260101_samples_hvcu_bench_aesth.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root / "run"


def page_cards(page: Path) -> dict[str, dict]:
    """The page's cards by sample id (one model)."""
    text = page.read_text(encoding="utf-8")
    start = text.index('<script type="application/json" id="chain-data">') + len(
        '<script type="application/json" id="chain-data">'
    )
    data = json.loads(text[start : text.index("</script>", start)])
    return {c["id"]: c for c in data["cards"]}


def test_the_passed_data_unchanged_shows_its_pictures(tmp_path: Path) -> None:
    data, identity = local_data(tmp_path)
    folder = data / "Image" / "Aesthetic-Appreciation"
    run = samples_run(tmp_path, identity, {"color_001": folder / "color_001.png", "font_001": folder / "font_001.png"})
    cards = page_cards(write_browser([run], tmp_path / "site", data=[str(data)]))
    assert all(cards[sid]["image"] and cards[sid]["note"] is None for sid in ("color_001", "font_001"))
    assert len(list((tmp_path / "site" / "thumbs").iterdir())) == 2


@pytest.mark.parametrize("passed", [False, True], ids=["no --data", "--data DATA"])
def test_a_picture_replaced_and_another_deleted_after_the_run_is_never_published(
    tmp_path: Path, capsys, passed: bool
) -> None:
    data, identity = local_data(tmp_path)
    folder = data / "Image" / "Aesthetic-Appreciation"
    run = samples_run(tmp_path, identity, {"color_001": folder / "color_001.png", "font_001": folder / "font_001.png"})
    Image.new("RGB", (64, 48), "green").save(folder / "color_001.png")  # replaced
    (folder / "font_001.png").unlink()  # deleted
    passing = {"data": [str(data)]} if passed else {}
    cards = page_cards(write_browser([run], tmp_path / "site", **passing))
    for sid in ("color_001", "font_001"):
        assert cards[sid]["image"] is None and cards[sid]["note"].startswith("image not shown: ")
    assert list((tmp_path / "site" / "thumbs").iterdir()) == []
    assert list((tmp_path / "site" / "images").iterdir()) == []
    assert "image not shown" in capsys.readouterr().err


def test_a_log_naming_the_root_as_its_data_publishes_nothing_and_searches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hvcu_tasks.data.loaders

    secret = tmp_path / "home" / "private.png"
    secret.parent.mkdir()
    Image.new("RGB", (32, 24), "red").save(secret)
    loaded: list[str] = []

    def load_source(source: str, family: str):  # noqa: ANN202 - the loader's stand-in
        loaded.append(source)
        raise OSError("not read in this test")

    monkeypatch.setattr(hvcu_tasks.data.loaders, "load_source", load_source)
    identity = {"family": "aesthetic", "kind": "local", "location": "/", "fingerprint": "sha256:" + "0" * 64}
    run = samples_run(tmp_path, identity, {"color_001": secret})
    cards = page_cards(write_browser([run], tmp_path / "site"))
    assert cards["color_001"]["image"] is None
    assert list((tmp_path / "site" / "thumbs").iterdir()) == []
    assert loaded == []  # the folder a log names is never loaded, let alone searched for parquet files


def test_other_data_passed_is_not_the_data_the_run_read(tmp_path: Path) -> None:
    data, identity = local_data(tmp_path / "first")
    other, _ = local_data(tmp_path / "second")
    Image.new("RGB", (64, 48), "green").save(other / "Image" / "Aesthetic-Appreciation" / "color_001.png")
    run = samples_run(tmp_path, identity, {"color_001": data / "Image" / "Aesthetic-Appreciation" / "color_001.png"})
    cards = page_cards(write_browser([run], tmp_path / "site", data=[str(other)]))
    assert cards["color_001"]["image"] is None and "is not what the run read" in cards["color_001"]["note"]


def test_an_undecodable_picture_of_the_data_the_run_read_is_a_placeholder_with_a_note(tmp_path: Path, capsys) -> None:
    data, _ = local_data(tmp_path)
    folder = data / "Image" / "Aesthetic-Appreciation"
    (folder / "font_001.png").write_bytes(b"not an image")  # before the run: the run read these very bytes
    from hvcu_tasks.core.fingerprint import fingerprint
    from hvcu_tasks.data.loaders import load_source
    from hvcu_tasks.data.validate import image_sha256

    found = fingerprint(load_source(str(data), "aesthetic").samples, lambda s: image_sha256(s.image))
    identity = {"family": "aesthetic", "kind": "local", "location": str(data), "fingerprint": found}
    run = samples_run(tmp_path, identity, {"color_001": folder / "color_001.png", "font_001": folder / "font_001.png"})
    cards = page_cards(write_browser([run], tmp_path / "site", data=[str(data)]))
    assert cards["color_001"]["image"] is not None and cards["color_001"]["note"] is None
    assert cards["font_001"]["image"] is None and "not a readable image" in cards["font_001"]["note"]
    assert "aesthetic/font_001: image not shown (" in capsys.readouterr().err


def test_a_name_in_a_published_leaderboard_that_is_not_one_line_of_text_is_refused(tmp_path: Path, capsys) -> None:
    write_run(tmp_path / "old", "old-model")
    assert main(["report", str(tmp_path / "old"), "--out", str(tmp_path / "board")]) == 0
    board = tmp_path / "board" / "leaderboard.json"
    data = json.loads(board.read_text(encoding="utf-8"))
    last = len(data["entries"]) - 1
    data["entries"][last]["model"] = data["entries"][last]["label"] = INJECTED
    board.write_text(json.dumps(data), encoding="utf-8")
    write_run(tmp_path / "new", "new-model")
    capsys.readouterr()
    assert main(["report", str(tmp_path / "new"), "--base", str(board)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"error: {board}: entries[{last}].model: text 'evil\\n")


# ---- hvcu score: the authors' result files name their model too ---------------------------------------------


@pytest.mark.parametrize("name", [INJECTED, "gpt\ud800", "gpt\u202eevil"])
def test_score_refuses_a_model_name_that_is_not_one_line_of_text(authors_results: Path, name: str, capsys) -> None:
    path = next(authors_results.iterdir())
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**data, "model_name": name}), encoding="utf-8")
    assert main(["score", str(path)]) != 0
    out, err = capsys.readouterr()
    assert "GPT-9" not in out
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and "model_name" in lines[0]


def test_score_shows_a_name_with_markup_as_it_is(authors_results: Path, capsys) -> None:
    path = next(authors_results.iterdir())
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**data, "model_name": "org/m$x^$"}), encoding="utf-8")
    assert main(["score", str(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["model_name"] == "org/m$x^$"
