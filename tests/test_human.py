"""Human baseline: disjoint level groups, level-only answer sheets, strict import, scores, and the report row."""

from __future__ import annotations

import argparse
import base64
import csv
import html
import io
import json
import re
from pathlib import Path

import pytest
from conftest import item, level
from PIL import Image

from generation.human.answers import read_answers
from generation.human.assign import check_groups, deal_groups, read_assignment
from generation.human.cli import add_parser
from generation.human.results import DEFINITION
from hvcu_tasks.core.families import LEVELS
from hvcu_tasks.core.schema import DataError
from hvcu_tasks.data.loaders import load_source
from hvcu_tasks.report.tables import all_tables
from hvcu_tasks.results.runs import read_runs

NAMES = [f"s{i}" for i in range(9)]
GROUPS = ["--group", "perc=p0,p1,p2", "--group", "bridge=b0,b1,b2", "--group", "conn=c0,c1,c2"]

# The hand-computed example: 2 implication samples, 1 aesthetic, 1 affective; gold answers per level.
GOLD = {"metaphor_001": "ABC", "metaphor_002": "DCB", "color_001": "BDA", "joy_001": "CAD"}
FAMILY_OF = {"metaphor_001": "implication", "metaphor_002": "implication", "color_001": "aesthetic"}
# Who got what wrong ('x') or left blank ('-'); everything not listed is answered correctly.
MARKS = {
    ("p1", "metaphor_002"): "x",
    ("p2", "metaphor_002"): "-",
    ("b2", "metaphor_001"): "x",
    ("c0", "metaphor_002"): "x",
    ("c2", "color_001"): "x",
}


def hvcu(*args: str) -> int:
    """Run `hvcu human ...` in-process through its own parser."""
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command", required=True))
    ns = parser.parse_args(["human", *args])
    return ns.func(ns)


def fill(sheets: Path, annotator: str, lv: int, out: Path, answer=None) -> Path:
    """Fill an annotator's CSV sheet: `answer(id, gold) -> letter` (default: by MARKS against GOLD)."""
    text = (sheets / "sheets" / f"{annotator}_level{lv}.csv").read_text(encoding="utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))
    for row in rows:
        gold = GOLD[row["id"]][lv - 1] if row["id"] in GOLD else None
        if answer is not None:
            row["answer"] = answer(row["id"], gold)
        else:
            mark = MARKS.get((annotator, row["id"]))
            row["answer"] = {"x": "A" if gold != "A" else "B", "-": ""}.get(mark or "", gold)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{annotator}_level{lv}_answers.csv"
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture
def hand_bench(write_dataset) -> Path:
    items = {
        "implication": [item(s, GOLD[s]) for s in ("metaphor_001", "metaphor_002")],
        "aesthetic": [item("color_001", GOLD["color_001"])],
        "affective": [item("joy_001", GOLD["joy_001"])],
    }
    return write_dataset(items)


@pytest.fixture
def hand_sheets(hand_bench: Path, tmp_path: Path) -> Path:
    out = tmp_path / "sheets"
    assert hvcu("sheets", str(hand_bench), "--out", str(out), *GROUPS) == 0
    return out


@pytest.fixture
def hand_answers(hand_sheets: Path, tmp_path: Path) -> Path:
    answers = tmp_path / "answers"
    for lv, prefix in zip(LEVELS, "pbc", strict=True):
        for k in range(3):
            fill(hand_sheets, f"{prefix}{k}", lv, answers)
    return answers


@pytest.fixture
def smoke_sheets(tmp_path: Path) -> Path:
    out = tmp_path / "smoke_sheets"
    assert hvcu("sheets", "smoke", "--out", str(out), "--names", *NAMES, "--seed", "7") == 0
    return out


# --- groups ----------------------------------------------------------------------------------------------


def test_names_are_dealt_into_disjoint_groups_reproducibly_by_seed() -> None:
    groups = deal_groups(NAMES, 3, seed=1)
    members = [n for lv in LEVELS for n in groups[lv]]
    assert sorted(members) == sorted(NAMES) and all(len(groups[lv]) == 3 for lv in LEVELS)
    assert deal_groups(NAMES, 3, seed=1) == groups
    assert any(deal_groups(NAMES, 3, seed=s) != groups for s in range(2, 6))


def test_one_person_in_two_levels_is_refused() -> None:
    with pytest.raises(ValueError, match="'ann' is in groups perc and conn; one person may answer only one level"):
        check_groups({1: ["ann", "b", "c"], 2: ["d", "e", "f"], 3: ["g", "h", "ann"]})


@pytest.mark.parametrize(
    ("names", "per_level", "message"),
    [
        (NAMES[:8], 3, "got 8 annotator name.*need exactly 9"),
        (NAMES + ["s9"], 3, "got 10 annotator name"),
        (["a", "b", "a"], 1, r"name\(s\) \['a'\] given twice"),
        (["a b", "c", "d"], 1, "annotator name 'a b'"),
        (NAMES, 0, "at least 1"),
    ],
)
def test_too_few_or_bad_names_are_refused(names: list[str], per_level: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        deal_groups(names, per_level)


def test_explicit_groups_must_all_have_the_configured_size(hand_bench: Path, tmp_path: Path) -> None:
    groups = ["--group", "perc=a,b,c", "--group", "bridge=d,e", "--group", "conn=f,g,h"]
    with pytest.raises(ValueError, match="group bridge has 2 annotator"):
        hvcu("sheets", str(hand_bench), "--out", str(tmp_path / "o"), *groups)


def test_assignment_records_groups_in_order_and_every_item(hand_sheets: Path, hand_bench: Path) -> None:
    assignment = read_assignment(hand_sheets)
    assert assignment.groups == {1: ("p0", "p1", "p2"), 2: ("b0", "b1", "b2"), 3: ("c0", "c1", "c2")}
    assert [i.id for i in assignment.items] == ["metaphor_001", "metaphor_002", "color_001", "joy_001"]
    assert assignment.bench == str(hand_bench.resolve())
    assert assignment.virtual_annotators()[1] == {1: "p1", 2: "b1", 3: "c1"}


def test_an_assignment_with_an_unknown_key_is_refused(hand_sheets: Path) -> None:
    path = hand_sheets / "assignment.json"
    data = json.loads(path.read_text())
    data["deadline"] = "friday"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"assignment.json: unknown key\(s\) \['deadline'\]"):
        read_assignment(hand_sheets)


# --- sheets ----------------------------------------------------------------------------------------------


def test_each_sheet_holds_only_its_own_level(smoke_sheets: Path) -> None:
    samples = [s for f in ("implication", "aesthetic", "affective") for s in load_source("smoke", f).samples]
    assignment = read_assignment(smoke_sheets)
    for lv, members in assignment.groups.items():
        for name in members:
            for ext in ("html", "csv"):
                text = (smoke_sheets / "sheets" / f"{name}_level{lv}.{ext}").read_text(encoding="utf-8-sig")
                if ext == "html":
                    text = html.unescape(text)
                for s in samples:
                    for other in s.levels:
                        assert (other.question in text) == (other.level == lv), (name, s.id, other.level, ext)


def test_sheets_do_not_depend_on_the_correct_answers(write_dataset, tmp_path: Path) -> None:
    produced = []
    for n, answers in enumerate(("ABC", "DDA")):
        bench = write_dataset({f: [item(f"x_{f}", answers)] for f in ("implication", "aesthetic", "affective")})
        out = tmp_path / f"run{n}"
        assert hvcu("sheets", str(bench), "--out", str(out), "--names", *NAMES) == 0
        produced.append({p.name: p.read_bytes() for p in sorted((out / "sheets").iterdir())})
    assert produced[0] == produced[1] and len(produced[0]) == 18


def test_csv_sheet_has_the_columns_and_a_blank_answer(hand_sheets: Path) -> None:
    text = (hand_sheets / "sheets" / "b1_level2.csv").read_text(encoding="utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["annotator", "level", "family", "id", "question", "A", "B", "C", "D", "answer"]
    assert sorted(r["id"] for r in rows) == sorted(GOLD)
    assert {(r["annotator"], r["level"], r["answer"]) for r in rows} == {("b1", "2", "")}
    assert rows[0]["question"] == "Question at level 2?" and rows[0]["C"] == "option C of level 2"


def test_html_sheet_is_self_contained_with_embedded_images(hand_sheets: Path) -> None:
    text = (hand_sheets / "sheets" / "p0_level1.html").read_text()
    assert not re.search(r"""(?:src|href)=["'](?!#|data:)""", text)  # nothing fetched
    urls = re.findall(r"src='data:image/png;base64,([^']+)'", text)
    assert len(urls) == 4
    with Image.open(io.BytesIO(base64.b64decode(urls[0]))) as img:
        assert img.size == (8, 8) and img.convert("RGB").getpixel((0, 0)) == (255, 0, 0)
    assert text.count("type='radio'") == 16 and "Download answers (CSV)" in text


def test_sheet_text_is_escaped(write_dataset, tmp_path: Path) -> None:
    evil = "<script>alert('x')</script> & \"quoted\""
    raw = item("x_1", "ABC")
    raw["qa_levels"][0] = level(1, "A", question=evil)
    raw["qa_levels"][0]["options"][1]["option_text"] = "<b>bold</b>"
    bench = write_dataset({f: [raw] for f in ("implication", "aesthetic", "affective")})
    out = tmp_path / "o"
    assert hvcu("sheets", str(bench), "--out", str(out), "--names", *NAMES) == 0
    (name,) = read_assignment(out).groups[1][:1]
    html_text = (out / "sheets" / f"{name}_level1.html").read_text()
    assert "<script>alert" not in html_text and "<b>bold</b>" not in html_text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;quoted&quot;" in html_text
    rows = list(csv.DictReader(io.StringIO((out / "sheets" / f"{name}_level1.csv").read_text(encoding="utf-8-sig"))))
    assert rows[0]["question"] == evil and rows[0]["B"] == "<b>bold</b>"


def test_sheets_are_byte_stable_and_each_annotator_has_an_own_order(smoke_sheets: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    assert hvcu("sheets", "smoke", "--out", str(again), "--names", *NAMES, "--seed", "7") == 0
    for p in sorted(smoke_sheets.rglob("*.*")):
        assert (again / p.relative_to(smoke_sheets)).read_bytes() == p.read_bytes(), p.name
    groups = read_assignment(smoke_sheets).groups
    orders = []
    for name in groups[1]:
        text = (smoke_sheets / "sheets" / f"{name}_level1.csv").read_text(encoding="utf-8-sig")
        orders.append([r["id"] for r in csv.DictReader(io.StringIO(text))])
    assert len({tuple(o) for o in orders}) == 3 and all(sorted(o) == sorted(orders[0]) for o in orders)


def test_a_different_assignment_in_the_same_folder_is_refused(smoke_sheets: Path) -> None:
    with pytest.raises(ValueError, match="already holds a different assignment"):
        hvcu("sheets", "smoke", "--out", str(smoke_sheets), "--names", *NAMES, "--seed", "8")


# --- import ----------------------------------------------------------------------------------------------


def _corrupt(answers: Path, name: str, edit) -> None:
    """Rewrite one filled answer file through `edit(rows) -> rows`."""
    path = answers / f"{name}_answers.csv"
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"))))
    rows = edit(rows)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _row_with(rows: list[dict], sid: str) -> int:
    return next(i for i, r in enumerate(rows) if r["id"] == sid)


@pytest.mark.parametrize(
    ("name", "edit", "message"),
    [
        (
            "p0_level1",
            lambda rows: [*rows[:1], {**rows[1], "id": "metaphor_999"}, *rows[2:]],
            r"p0_level1_answers.csv:3: id=metaphor_999: id: unknown item \w+/metaphor_999",
        ),
        (
            "b1_level2",
            lambda rows: [{**r, "answer": "E"} if r["id"] == "joy_001" else r for r in rows],
            r"b1_level2_answers.csv:\d: id=joy_001: answer: 'E' is not one of A, B, C, D or blank",
        ),
        (
            "c2_level3",
            lambda rows: [*rows, rows[_row_with(rows, "color_001")]],
            r"c2_level3_answers.csv:6: id=color_001: id: c2 answered aesthetic/color_001 twice \(first at .*:\d\)",
        ),
        (
            "p1_level1",
            lambda rows: [{**r, "level": "3"} for r in rows],
            r"p1_level1_answers.csv:2: id=\w+: level: p1 was assigned level 1 \(perc\), row says 3",
        ),
        (
            "p2_level1",
            lambda rows: [{**r, "annotator": "zz"} for r in rows],
            r"p2_level1_answers.csv:2: id=\w+: annotator: 'zz' is in no group",
        ),
        (
            "c0_level3",
            lambda rows: [r for r in rows if r["id"] != "metaphor_002"],
            r"answer files: id=implication/metaphor_002: id: c0 \(level 3\) left 1 item\(s\) of their sheet out",
        ),
    ],
)
def test_bad_answer_rows_are_refused_naming_file_line_id_and_field(
    hand_sheets: Path, hand_answers: Path, name: str, edit, message: str
) -> None:
    _corrupt(hand_answers, name, edit)
    with pytest.raises(DataError, match=message):
        read_answers([hand_answers], read_assignment(hand_sheets))


def test_an_annotator_without_answers_is_refused(hand_sheets: Path, hand_answers: Path) -> None:
    (hand_answers / "b2_level2_answers.csv").unlink()
    with pytest.raises(DataError, match=r"no answers from b2 \(level 2\)"):
        read_answers([hand_answers], read_assignment(hand_sheets))


def test_a_file_without_the_answer_column_is_refused(hand_sheets: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("annotator,level,family,id\np0,1,implication,metaphor_001\n")
    with pytest.raises(ValueError, match=r"bad.csv: line 1: header lacks column\(s\) \['answer'\]"):
        read_answers([bad], read_assignment(hand_sheets))


def test_lower_case_letters_and_blanks_are_read(hand_sheets: Path, hand_answers: Path) -> None:
    _corrupt(hand_answers, "p0_level1", lambda rows: [{**r, "answer": r["answer"].lower()} for r in rows])
    answers = read_answers([hand_answers], read_assignment(hand_sheets))
    assert answers["p0"][("implication", "metaphor_002")] == "D"
    assert answers["p2"][("implication", "metaphor_002")] is None


# --- scores and the report -------------------------------------------------------------------------------

THIRD = 100 / 3
EXPECTED = {  # computed by hand from MARKS (see the docstring of generation.human.score)
    "implication": {
        "acc_l1_perc": 200 / 3,  # p0 100, p1 50, p2 50
        "acc_l2_bridge": 500 / 6,  # b0 100, b1 100, b2 50
        "acc_l3_conn": 500 / 6,  # c0 50, c1 100, c2 100
        "acc_full": THIRD,  # virtual 0: 50, 1: 50, 2: 0
        "invalid_perc": 50 / 3,
        "errors_at_perc": 2,
        "errors_at_bridge": 1,
        "errors_at_conn": 1,
        "error_share_perc": 50.0,
        "full_metaphor": THIRD,
        "n_chains": 2,
    },
    "aesthetic": {"acc_l1_perc": 100.0, "acc_l2_bridge": 100.0, "acc_l3_conn": 200 / 3, "acc_full": 200 / 3},
    "affective": {"acc_l1_perc": 100.0, "acc_l2_bridge": 100.0, "acc_l3_conn": 100.0, "acc_full": 100.0},
}
OVERALL = 66.67  # (33.33 + 66.67 + 100) / 3


def test_scores_match_the_hand_computed_example(hand_sheets: Path, hand_answers: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert hvcu("score", str(hand_sheets), str(hand_answers), "--out", str(run)) == 0
    summary = json.loads((run / "human_summary.json").read_text())
    assert summary["overall_score"] == OVERALL and summary["definition"] == DEFINITION
    for family, expected in EXPECTED.items():
        for metric, value in expected.items():
            assert summary["families"][family][metric] == pytest.approx(value), (family, metric)
    virtual = summary["virtual_annotators"]
    assert [v["members"] for v in virtual][2] == {"perc": "p2", "bridge": "b2", "conn": "c2"}
    assert [v["acc_full"]["implication"] for v in virtual] == [50.0, 50.0, 0.0]
    assert [v["overall_score"] for v in virtual] == [83.33, 83.33, 33.33]
    p2 = next(a for a in summary["annotators"] if a["annotator"] == "p2")
    assert p2 == {
        "annotator": "p2",
        "level": "perc",
        "answered": 3,
        "blank": 1,
        "acc": {"implication": 50.0, "aesthetic": 100.0, "affective": 100.0},
        "acc_all": 75.0,
    }


def test_the_report_shows_a_human_row_with_those_numbers(hand_sheets: Path, hand_answers: Path, tmp_path: Path):
    run = tmp_path / "run"
    assert hvcu("score", str(hand_sheets), str(hand_answers), "--out", str(run)) == 0
    assert (run / "Human" / "human_results.json").is_file()
    (model,) = read_runs([run])
    assert model.model == "Human" and model.score("base") == OVERALL
    tables = {t.name: t for t in all_tables([model])}
    row = tables["table2_base"].rows[-1]
    expected_cells = [
        EXPECTED[f][m] for f in EXPECTED for m in ("acc_l1_perc", "acc_l2_bridge", "acc_l3_conn", "acc_full")
    ]
    assert row[0] == "Human*"  # 2 + 1 + 1 samples: a subset of the benchmark, flagged
    assert row[1:-2] == pytest.approx(expected_cells) and row[-2] == OVERALL  # Score, then Score (official)
    assert tables["table2_base"].rows[0][0] == "Human [paper]"
    assert any("ran on a subset" in n for n in tables["table2_base"].notes)
    errors = tables["errors_base"].rows[0]
    assert errors[:6] == ["Human*", "Impl.", 4, "2 (50.00%)", "1 (25.00%)", "1 (25.00%)"]
    assert tables["aspects_base"].rows[0][1] == pytest.approx(THIRD)


def test_a_smoke_sample_run_is_marked_as_such_in_the_report(smoke_sheets: Path, tmp_path: Path) -> None:
    answers = tmp_path / "answers"
    impl = load_source("smoke", "implication").samples
    for lv, members in read_assignment(smoke_sheets).groups.items():
        for name in members:
            fill(smoke_sheets, name, lv, answers, lambda sid, _g: "A")
    run = tmp_path / "run"
    assert hvcu("score", str(smoke_sheets), str(answers), "--out", str(run), "--label", "Students") == 0
    data = json.loads((run / "Students" / "human_results.json").read_text())
    assert sorted(data["results"]) == [
        "hvcu_bench_sample",
        "hvcu_bench_sample_aesth",
        "hvcu_bench_sample_affect",
        "hvcu_bench_sample_impl",
    ]
    assert data["config"]["model_args"] == "model_version=Students" and data["config"]["limit"] is None
    (model,) = read_runs([run])
    table = all_tables([model])[0]
    assert table.rows[-1][0] == "Students†"
    expected_perc = 100 * sum(s.levels[0].answer == "A" for s in impl) / len(impl)
    assert table.rows[-1][1] == pytest.approx(expected_perc)


def test_scoring_against_a_changed_bench_is_refused(hand_bench: Path, hand_sheets: Path, hand_answers: Path, tmp_path):
    path = hand_bench / "Implication-Understanding.json"
    data = json.loads(path.read_text())
    data[1]["qa_levels"][2]["question"] = "A reworded question?"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="id=metaphor_002: qa_levels: questions or options differ"):
        hvcu("score", str(hand_sheets), str(hand_answers), "--out", str(tmp_path / "run"))


def test_scoring_is_byte_stable(hand_sheets: Path, hand_answers: Path, tmp_path: Path) -> None:
    for n in (1, 2):
        assert hvcu("score", str(hand_sheets), str(hand_answers), "--out", str(tmp_path / f"run{n}")) == 0
    for name in ("human_summary.json", "Human/human_results.json"):
        assert (tmp_path / "run1" / name).read_bytes() == (tmp_path / "run2" / name).read_bytes()
