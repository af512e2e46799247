"""`hvcu audit` and `hvcu human`: hostile names, formula cells in every CSV (Python and browser), full disks.

Expected values come from the issue's spec: a cell starting with = + - @ tab CR (or ') gets a "'" prefix and
is read back exactly; a name that could leave its folder is refused with one line and nothing is written.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import full_disk, one_line_error, run
from PIL import Image

from generation.audit.rounds import import_verdicts, round_verdicts, start_audit
from generation.audit.verdicts import VERDICT_COLUMNS
from generation.human.answers import read_answers
from generation.human.assign import read_assignment
from hvcu_tasks.cli import main
from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.dev.smoke import SMOKE_DIR

GOOD_ANNOTATORS = ["a1", "a2", "a3", "a4"]
ANNOTATORS5 = ["a1", "a2", "a3", "a4", "a5"]
HOSTILE = ["../../x", "..", "a/b", "../escaped", ".hidden", "x\\y", "c:evil"]
NINE = [f"s{i}" for i in range(8)]
FORMULA = '=HYPERLINK("http://evil.example","click")'


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def level(n: int, question: str | None = None, options: dict[str, str] | None = None) -> dict:
    texts = options or {k: f"option {k} of level {n}" for k in "ABCD"}
    return {
        "level": n,
        "question": question or f"Question at level {n}?",
        "options": [{"option_key": k, "option_text": t} for k, t in texts.items()],
        "correct_answer_key": "A",
    }


def bench_with_formulas(root: Path) -> Path:
    """An authors'-layout benchmark whose first item's texts start like spreadsheet formulas."""
    hostile = {
        "id": "metaphor_001",
        "qa_levels": [
            level(1, question="=1+1", options={"A": "@SUM(A1)", "B": "-3", "C": "+cmd", "D": "'quoted"}),
            level(2, question="\tTabbed question?"),
            level(3, question=FORMULA),
        ],
    }
    items = {
        "implication": [hostile, {"id": "metaphor_002", "qa_levels": [level(n) for n in (1, 2, 3)]}],
        "aesthetic": [{"id": "color_001", "qa_levels": [level(n) for n in (1, 2, 3)]}],
        "affective": [{"id": "joy_001", "qa_levels": [level(n) for n in (1, 2, 3)]}],
    }
    for family, records in items.items():
        stem = FAMILIES[family][1]
        (root / "Image" / stem).mkdir(parents=True, exist_ok=True)
        (root / f"{stem}.json").write_text(json.dumps(records), encoding="utf-8")
        for record in records:
            Image.new("RGB", (8, 8), "blue").save(root / "Image" / stem / f"{record['id']}.png")
    return root


# --- names --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", HOSTILE)
def test_audit_export_refuses_a_hostile_annotator_name(tmp_path: Path, capsys, name: str) -> None:
    out = tmp_path / "work" / "audit"
    code, _out, err = run(
        "audit", "export", str(SMOKE_DIR), "--out", str(out), "--annotators", *GOOD_ANNOTATORS, name, capsys=capsys
    )
    assert code == 2
    assert "annotator" in one_line_error(err) and repr(name) in err
    assert files_under(tmp_path) == set()


def test_audit_refuses_a_hostile_name_edited_into_audit_json(tmp_path: Path, capsys) -> None:
    audit = tmp_path / "work" / "audit"
    start_audit(SMOKE_DIR, audit, ["a1", "a2", "a3", "a4", "a5"])
    config = json.loads((audit / "audit.json").read_text())
    config["annotators"][4] = "../../x"
    (audit / "audit.json").write_text(json.dumps(config))
    before = files_under(tmp_path)
    code, _out, err = run("audit", "forms", str(audit), capsys=capsys)
    assert code == 2
    line = one_line_error(err)
    assert "audit.json" in line and "'../../x'" in line
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("name", HOSTILE)
def test_human_sheets_refuse_a_hostile_annotator_name(tmp_path: Path, capsys, name: str) -> None:
    out = tmp_path / "work" / "human"
    code, _out, err = run("human", "sheets", "smoke", "--out", str(out), "--names", *NINE, name, capsys=capsys)
    assert code == 2
    assert repr(name) in one_line_error(err)
    assert files_under(tmp_path) == set()


def test_human_sheets_refuse_a_hostile_name_in_a_group(tmp_path: Path, capsys) -> None:
    out = tmp_path / "work" / "human"
    groups = ["--group", "perc=p0,p1,p2", "--group", "bridge=b0,b1,b2", "--group", "conn=c0,c1,../../x"]
    code, _out, err = run("human", "sheets", "smoke", "--out", str(out), *groups, capsys=capsys)
    assert code == 2 and "'../../x'" in one_line_error(err)
    assert files_under(tmp_path) == set()


@pytest.fixture
def smoke_human(tmp_path: Path) -> tuple[Path, Path]:
    """Sheets for the smoke sample and every annotator's sheet copied back as a (blank) answer file."""
    sheets = tmp_path / "work" / "human"
    assert main(["human", "sheets", "smoke", "--out", str(sheets), "--names", *NINE, "s8"]) == 0
    answers = tmp_path / "work" / "answers"
    answers.mkdir()
    for sheet in (sheets / "sheets").glob("*.csv"):
        shutil.copy(sheet, answers / sheet.name)
    return sheets, answers


@pytest.mark.parametrize("label", ["..", "../x/..", "."])
def test_human_score_refuses_a_label_that_leaves_the_out_folder(
    smoke_human: tuple[Path, Path], tmp_path: Path, capsys, label: str
) -> None:
    sheets, answers = smoke_human
    capsys.readouterr()
    before = files_under(tmp_path)
    out = tmp_path / "work" / "run"
    code, _out, err = run(
        "human", "score", str(sheets), str(answers), "--out", str(out), "--label", label, capsys=capsys
    )
    assert code == 2 and "--label" in one_line_error(err)
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("stamp", ["../x", "..", "a/b"])
def test_human_score_refuses_a_stamp_that_is_not_one_file_name(
    smoke_human: tuple[Path, Path], tmp_path: Path, capsys, stamp: str
) -> None:
    sheets, answers = smoke_human
    capsys.readouterr()
    before = files_under(tmp_path)
    code, _out, err = run(
        "human",
        "score",
        str(sheets),
        str(answers),
        "--out",
        str(tmp_path / "work" / "run"),
        "--stamp",
        stamp,
        capsys=capsys,
    )
    assert code == 2 and "--stamp" in one_line_error(err)
    assert files_under(tmp_path) == before


# --- formula cells in the audit's CSV files -----------------------------------------------------------------


def verdict_file(path: Path, annotator: str, keys: list[tuple[str, str]], comments: dict[str, str]) -> Path:
    """Write an annotator's verdicts as a spreadsheet would save them: every answer yes, comments as given."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(VERDICT_COLUMNS))
        writer.writeheader()
        for family, sid in keys:
            votes = dict.fromkeys(VERDICT_COLUMNS[4:8], "yes")
            row = {"annotator": annotator, "round": 1, "family": family, "id": sid, **votes}
            writer.writerow(row | {"comment": comments.get(sid, "")})
    return path


def audit_keys(audit: Path) -> list[tuple[str, str]]:
    data = json.loads((audit / "round-1" / "candidates.json").read_text())
    return [(e["family"], e["id"]) for e in data["items"]]


def test_audit_sheet_neutralises_formula_cells(tmp_path: Path) -> None:
    bench = bench_with_formulas(tmp_path / "bench")
    audit = tmp_path / "audit"
    start_audit(bench, audit, ["a1", "a2", "a3", "a4", "a5"])
    raw = (audit / "round-1" / "forms" / "a1.csv").read_text(encoding="utf-8")
    row = next(r for r in csv.DictReader(io.StringIO(raw)) if r["id"] == "metaphor_001")
    assert row["l1_question"] == "'=1+1"
    assert row["l2_question"] == "'\tTabbed question?"
    assert row["l3_question"] == "'" + FORMULA
    assert row["l1_options"] == "A. @SUM(A1) | B. -3 | C. +cmd | D. 'quoted"  # starts with 'A.': harmless


def test_verdict_comments_that_look_like_formulas_are_stored_safely_and_read_back_exactly(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ["a1", "a2", "a3", "a4", "a5"])
    keys = audit_keys(audit)
    comments = {keys[0][1]: FORMULA, keys[1][1]: "-2+3", keys[2][1]: "+1 vote", keys[3][1]: "@mention"}
    given = verdict_file(tmp_path / "a1.csv", "a1", keys, comments)
    assert import_verdicts(audit, [given]) == ["a1"]
    stored = list(csv.DictReader(io.StringIO((audit / "round-1" / "verdicts" / "a1.csv").read_text("utf-8"))))
    by_id = {r["id"]: r["comment"] for r in stored}
    assert by_id[keys[0][1]] == "'" + FORMULA and by_id[keys[1][1]] == "'-2+3"
    assert by_id[keys[2][1]] == "'+1 vote" and by_id[keys[3][1]] == "'@mention"
    read = {v.id: v.comment for v in round_verdicts(audit, 1)["a1"]}
    assert {k: read[k] for k in comments} == comments


def test_a_quoted_cell_from_a_spreadsheet_imports_as_its_text(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ["a1", "a2", "a3", "a4", "a5"])
    keys = audit_keys(audit)
    given = verdict_file(tmp_path / "a2.csv", "a2", keys, {keys[0][1]: "'=1+1"})  # as the sheet wrote it
    import_verdicts(audit, [given])
    assert {v.id: v.comment for v in round_verdicts(audit, 1)["a2"]}[keys[0][1]] == "=1+1"


# --- formula cells in the human sheets ----------------------------------------------------------------------


def assert_neutralised_row(row: dict) -> None:
    """The sheet row of bench_with_formulas' metaphor_001: formula cells prefixed, plain numbers left alone."""
    assert (row["question"], row["A"], row["B"], row["C"], row["D"]) == (
        "'=1+1",
        "'@SUM(A1)",
        "-3",
        "'+cmd",
        "''quoted",
    )


def test_human_sheet_neutralises_formula_cells_and_imports_back(tmp_path: Path, capsys) -> None:
    bench = bench_with_formulas(tmp_path / "bench")
    sheets = tmp_path / "human"
    assert main(["human", "sheets", str(bench), "--out", str(sheets), "--names", *NINE, "s8"]) == 0
    assignment = read_assignment(sheets)
    name = assignment.groups[1][0]
    raw = (sheets / "sheets" / f"{name}_level1.csv").read_text(encoding="utf-8-sig")
    row = next(r for r in csv.DictReader(io.StringIO(raw)) if r["id"] == "metaphor_001")
    assert_neutralised_row(row)
    answers = tmp_path / "answers"
    answers.mkdir()
    for sheet in (sheets / "sheets").glob("*.csv"):
        shutil.copy(sheet, answers / sheet.name)
    got = read_answers([answers], assignment)
    assert got[name][("implication", "metaphor_001")] is None


# --- full disk ----------------------------------------------------------------------------------------------


def test_audit_export_on_a_full_disk_leaves_nothing_and_can_be_rerun(tmp_path: Path, capsys, monkeypatch) -> None:
    out = tmp_path / "work" / "audit"
    full_disk(monkeypatch, at_call=5)
    code, _out, err = run("audit", "export", str(SMOKE_DIR), "--out", str(out), "--annotators", "5", capsys=capsys)
    monkeypatch.undo()
    assert code != 0 and "No space left on device" in one_line_error(err)
    assert not out.exists()
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    code, _out, err = run("audit", "export", str(SMOKE_DIR), "--out", str(out), "--annotators", "5", capsys=capsys)
    assert code == 0, err
    assert len(list((out / "round-1" / "forms").glob("*.html"))) == 5


def test_audit_export_into_an_empty_folder_given_keeps_the_folder_after_a_failure(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    out = tmp_path / "audit"
    out.mkdir()
    full_disk(monkeypatch, at_call=3)
    code, _out, _err = run("audit", "export", str(SMOKE_DIR), "--out", str(out), "--annotators", "5", capsys=capsys)
    monkeypatch.undo()
    assert code != 0
    assert out.is_dir() and files_under(out) == set()
    assert run("audit", "export", str(SMOKE_DIR), "--out", str(out), "--annotators", "5", capsys=capsys)[0] == 0


def test_human_sheets_on_a_full_disk_leave_no_partial_file_and_can_be_rerun(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    out = tmp_path / "human"
    full_disk(monkeypatch, at_call=4)
    code, _out, err = run("human", "sheets", "smoke", "--out", str(out), "--names", *NINE, "s8", capsys=capsys)
    monkeypatch.undo()
    assert code != 0 and "No space left on device" in one_line_error(err)
    assert not (out / "assignment.json").exists()
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    for sheet in (out / "sheets").glob("*.csv"):  # what was written is whole
        assert sheet.read_bytes().count(b"\r\n") == 16
    code, _out, err = run("human", "sheets", "smoke", "--out", str(out), "--names", *NINE, "s8", capsys=capsys)
    assert code == 0, err
    assert len(list((out / "sheets").glob("*"))) == 18


# --- the browser's CSV download -----------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (make browser)")


def dump_dom(page: Path, profile: Path) -> str:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    proc = subprocess.run(
        [CHROMIUM, *flags, "--virtual-time-budget=5000", f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


AUDIT_DRIVER = """
<script>
(function () {
  var captured = document.createElement("pre"); captured.id = "captured"; document.body.appendChild(captured);
  var makeUrl = URL.createObjectURL;
  URL.createObjectURL = function (blob) { blob.text().then(function (t) { captured.textContent = t; });
                                          return makeUrl(blob); };
  HTMLAnchorElement.prototype.click = function () {};
  var comments = COMMENTS;
  document.querySelectorAll("section.item").forEach(function (item) {
    ["l1_supported", "l2_supported", "l3_supported", "coherent"].forEach(function (q) {
      item.querySelector('input[name="' + item.id + "-" + q + '"][value="yes"]').click();
    });
    var box = item.querySelector("textarea");
    box.value = comments[item.dataset.id] || "";
    box.dispatchEvent(new Event("input", {bubbles: true}));
  });
  document.getElementById("download").click();
})();
</script>
"""


@needs_chromium
def test_audit_form_download_neutralises_formula_comments_and_imports_back(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ["a1", "a2", "a3", "a4", "a5"])
    comments = {
        "metaphor_001": FORMULA,
        "font_001": "-12.5",
        "joy_001": "+cmd",
        "fear_001": "'quoted",
        "color_001": "\tTab",
        "sadness_001": "@x, with a comma",
    }
    form = (audit / "round-1" / "forms" / "a3.html").read_text(encoding="utf-8")
    driven = tmp_path / "driven.html"
    driver = AUDIT_DRIVER.replace("COMMENTS", json.dumps(comments))
    driven.write_text(form.replace("</body>", driver + "</body>"), encoding="utf-8")
    text = html.unescape(re.search(r'<pre id="captured">(.*?)</pre>', dump_dom(driven, tmp_path / "p"), re.S).group(1))
    cells = {r["id"]: r["comment"] for r in csv.DictReader(io.StringIO(text))}
    assert cells["metaphor_001"] == "'" + FORMULA and cells["joy_001"] == "'+cmd" and cells["color_001"] == "'\tTab"
    assert (
        cells["font_001"] == "-12.5" and cells["fear_001"] == "''quoted" and cells["sadness_001"] == "'@x, with a comma"
    )
    saved = tmp_path / "a3-round1.csv"
    saved.write_text(text, encoding="utf-8")
    assert import_verdicts(audit, [saved]) == ["a3"]
    read = {v.id: v.comment for v in round_verdicts(audit, 1)["a3"]}
    assert {k: read[k] for k in comments} == comments


HUMAN_DRIVER = """
<script>
(function () {
  var captured = null, RealBlob = window.Blob;
  window.Blob = function (parts, options) { captured = parts.join(""); return new RealBlob(parts, options); };
  URL.createObjectURL = function () { return "#"; };
  HTMLAnchorElement.prototype.click = function () {};
  document.querySelectorAll("section.item").forEach(function (s) {
    var radio = s.querySelector('input[value="B"]');
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
  });
  document.getElementById("download").click();
  var pre = document.createElement("pre"); pre.id = "captured"; pre.textContent = captured;
  document.body.appendChild(pre);
})();
</script>
"""


@needs_chromium
def test_human_page_download_neutralises_formula_cells_and_imports_back(tmp_path: Path) -> None:
    bench = bench_with_formulas(tmp_path / "bench")
    sheets = tmp_path / "human"
    assert main(["human", "sheets", str(bench), "--out", str(sheets), "--names", *NINE, "s8"]) == 0
    assignment = read_assignment(sheets)
    name = assignment.groups[1][0]
    page = (sheets / "sheets" / f"{name}_level1.html").read_text(encoding="utf-8")
    driven = tmp_path / "driven.html"
    driven.write_text(page.replace("</body>", HUMAN_DRIVER + "</body>"), encoding="utf-8")
    text = html.unescape(re.search(r'<pre id="captured">(.*?)</pre>', dump_dom(driven, tmp_path / "p"), re.S).group(1))
    rows = list(csv.DictReader(io.StringIO(text.removeprefix("\ufeff"))))
    row = next(r for r in rows if r["id"] == "metaphor_001")
    assert_neutralised_row(row)
    answers = tmp_path / "answers"
    answers.mkdir()
    for sheet in (sheets / "sheets").glob("*.csv"):
        shutil.copy(sheet, answers / sheet.name)
    (answers / f"{name}_level1.csv").write_text(text, encoding="utf-8")
    got = read_answers([answers], assignment)
    assert got[name][("implication", "metaphor_001")] == "B"


def test_audit_forms_cut_short_by_a_full_disk_keep_import_refused_until_rerun(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ["a1", "a2", "a3", "a4", "a5"])
    source = audit / "source" / "Implication-Understanding.json"
    records = json.loads(source.read_text(encoding="utf-8"))
    records[0]["qa_levels"][0]["question"] = "A corrected question?"
    source.write_text(json.dumps(records), encoding="utf-8")
    full_disk(monkeypatch, at_call=3)  # a1's form and sheet are rewritten, a2's form is not
    code, _out, err = run("audit", "forms", str(audit), capsys=capsys)
    monkeypatch.undo()
    assert code != 0 and "No space left on device" in one_line_error(err)
    keys = audit_keys(audit)
    given = verdict_file(tmp_path / "a1.csv", "a1", keys, {})
    code, _out, err = run("audit", "import", str(audit), str(given), capsys=capsys)
    assert code == 2 and "changed or removed" in err
    assert run("audit", "forms", str(audit), capsys=capsys)[0] == 0
    assert run("audit", "import", str(audit), str(given), capsys=capsys)[0] == 0


def test_discarding_every_item_of_a_family_leaves_it_out_of_final_with_a_warning(tmp_path: Path, capsys) -> None:
    bench = bench_with_formulas(tmp_path / "bench")
    audit = tmp_path / "audit"
    start_audit(bench, audit, ["a1", "a2", "a3", "a4", "a5"])
    keys = audit_keys(audit)
    for name in ("a1", "a2", "a3", "a4", "a5"):
        path = verdict_file(tmp_path / f"{name}.csv", name, keys, {})
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("aesthetic,color_001,yes,yes", "aesthetic,color_001,no,no"), encoding="utf-8")
    assert run("audit", "import", str(audit), *(str(tmp_path / f"{n}.csv") for n in ANNOTATORS5), capsys=capsys)[0] == 0
    assert run("audit", "stats", str(audit), capsys=capsys)[0] == 0
    decisions = audit / "round-1" / "decisions.csv"
    decisions.write_text(decisions.read_text(encoding="utf-8").replace("color_001,,", "color_001,discard,"), "utf-8")
    code, _out, err = run("audit", "decide", str(audit), capsys=capsys)
    assert code == 0, err
    assert "warning:" in err and "aesthetic" in err
    final = audit / "final"
    assert sorted(p.name for p in final.glob("*.json")) == [
        "Affective-Reasoning.json",
        "Implication-Understanding.json",
    ]
    assert json.loads((audit / "summary.json").read_text())["families_without_items"] == ["aesthetic"]


def test_audit_export_out_that_is_a_file_is_one_clear_line(tmp_path: Path, capsys) -> None:
    taken = tmp_path / "audit"
    taken.write_text("keep me", encoding="utf-8")
    code, _out, err = run("audit", "export", str(SMOKE_DIR), "--out", str(taken), "--annotators", "5", capsys=capsys)
    assert code == 2 and str(taken) in one_line_error(err)
    assert taken.read_text(encoding="utf-8") == "keep me"
