"""The HTML answer sheet in headless Chromium: choices made on the page come back as an importable CSV."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from pathlib import Path

from conftest import item, level
from test_human import NAMES, hvcu
from test_report_page import chromium

from generation.human.answers import read_answers
from generation.human.assign import read_assignment
from generation.human.sheets import COLUMNS

QUESTION = 'Is it "this", or that?\nSecond line & <more>'
# Appended to a copy of the sheet: make choices, click the download button and put the CSV into the DOM.
DRIVER = """
<script>
(function () {
  var captured = null, RealBlob = window.Blob;
  window.Blob = function (parts, options) { captured = parts.join(""); return new RealBlob(parts, options); };
  URL.createObjectURL = function () { return "#"; };
  HTMLAnchorElement.prototype.click = function () {};
  var picks = PICKS;
  document.querySelectorAll("section.item").forEach(function (s) {
    var letter = picks[s.dataset.family + "/" + s.dataset.id];
    if (!letter) { return; }
    var radio = s.querySelector('input[value="' + letter + '"]');
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
  });
  document.getElementById("download").click();
  var pre = document.createElement("pre");
  pre.id = "captured";
  pre.textContent = captured;
  document.body.appendChild(pre);
})();
</script>
"""


def test_choices_on_the_page_download_as_a_csv_the_importer_accepts(write_dataset, tmp_path: Path) -> None:
    raw = item("metaphor_001", "ABC")
    raw["qa_levels"][0] = level(1, "A", question=QUESTION)
    bench = write_dataset(
        {"implication": [raw, item("metaphor_002")], "aesthetic": [item("color_001")], "affective": [item("joy_001")]}
    )
    sheets = tmp_path / "sheets"
    assert hvcu("sheets", str(bench), "--out", str(sheets), "--names", *NAMES) == 0
    assignment = read_assignment(sheets)
    annotator = assignment.groups[1][0]
    picks = {"implication/metaphor_001": "C", "aesthetic/color_001": "A", "affective/joy_001": "D"}
    page = sheets / "sheets" / f"{annotator}_level1.html"
    driven = tmp_path / "driven.html"
    driven.write_text(page.read_text().replace("</body>", DRIVER.replace("PICKS", json.dumps(picks)) + "</body>"))

    dom = chromium("--dump-dom", driven.as_uri(), tmp=tmp_path)

    assert re.search(r'id="progress">3 / 4 answered<', dom)
    text = html.unescape(re.search(r'<pre id="captured">(.*?)</pre>', dom, re.S).group(1))
    assert text.startswith("\ufeff")
    rows = list(csv.DictReader(io.StringIO(text.removeprefix("\ufeff"))))
    assert tuple(rows[0]) == COLUMNS
    assert {f"{r['family']}/{r['id']}": r["answer"] for r in rows} == {**picks, "implication/metaphor_002": ""}
    first = next(r for r in rows if r["id"] == "metaphor_001")
    assert first["question"] == QUESTION and first["annotator"] == annotator and first["level"] == "1"
    assert first["B"] == "option B of level 1"

    answers_dir = tmp_path / "answers"
    answers_dir.mkdir()
    (answers_dir / f"{annotator}_level1_answers.csv").write_text(text, encoding="utf-8")
    for lv, members in assignment.groups.items():
        for name in members:
            if name != annotator:
                blank = (sheets / "sheets" / f"{name}_level{lv}.csv").read_bytes()
                (answers_dir / f"{name}_level{lv}_answers.csv").write_bytes(blank)
    answers = read_answers([answers_dir], assignment)
    assert answers[annotator][("implication", "metaphor_001")] == "C"
    assert answers[annotator][("implication", "metaphor_002")] is None
