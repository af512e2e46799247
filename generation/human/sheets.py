"""Level-specific answer sheets: a self-contained offline HTML page and the same sheet as CSV.

A sheet holds one level's question and options for every sample, in an order shuffled per annotator,
and never the correct answer nor any other level. The page embeds its images as data URLs, keeps the
choices in the browser's local storage as they are made, and downloads them as a CSV with the same
columns as the CSV sheet (which can be filled in a spreadsheet instead).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import random
from collections.abc import Callable, Iterator, Sequence
from html import escape
from pathlib import Path

from PIL import Image

from generation.human.assign import Assignment
from hvcu_tasks.core.families import OPTION_KEYS
from hvcu_tasks.core.schema import ImageRef, Level, Sample
from hvcu_tasks.data.files import atomic_path, csv_cell, inside, write_atomic
from hvcu_tasks.data.images import open_ref

COLUMNS: tuple[str, ...] = ("annotator", "level", "family", "id", "question", *OPTION_KEYS, "answer")
LEVEL_TITLES = {1: "perception", 2: "bridge", 3: "connotation"}
WEB_IMAGE_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}


def sheet_stem(annotator: str, level: int) -> str:
    """Return the file stem of an annotator's sheet: `<name>_level<k>`."""
    return f"{annotator}_level{level}"


def sheet_order(samples: Sequence[Sample], annotator: str, level: int, seed: int) -> list[Sample]:
    """Return the samples in this annotator's own order, shuffled reproducibly from (seed, name, level)."""
    order = list(samples)
    random.Random(f"{seed}/{annotator}/{level}").shuffle(order)
    return order


def level_of(sample: Sample, level: int) -> Level:
    """Return one level of a sample's chain."""
    for lv in sample.levels:
        if lv.level == level:
            return lv
    raise ValueError(f"{sample.source}: id={sample.id}: qa_levels: no level {level}")


def csv_text(samples: Sequence[Sample], annotator: str, level: int) -> str:
    """Return the CSV sheet: one row per sample with the question, its options and a blank answer (no formulas)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for s in samples:
        options = dict(level_of(s, level).options)
        row = [annotator, level, s.family, s.id, level_of(s, level).question, *(options[k] for k in OPTION_KEYS), ""]
        writer.writerow([csv_cell(c) for c in row])
    return buffer.getvalue()


def image_data_url(ref: ImageRef) -> str:
    """Return an image as a data URL: its own bytes when browsers show the format, else re-encoded as PNG."""
    data = ref.path.read_bytes() if ref.path is not None else ref.data
    if not data:
        raise ValueError(f"{ref.describe()}: no image data")
    try:
        with Image.open(io.BytesIO(data)) as img:
            mime = WEB_IMAGE_TYPES.get(str(img.format))
    except OSError as exc:
        raise ValueError(f"{ref.describe()}: not a readable image ({exc})") from exc
    if mime is None:
        buffer = io.BytesIO()
        open_ref(ref).save(buffer, format="PNG")
        data, mime = buffer.getvalue(), "image/png"
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 0 auto; padding: 0 1rem 4rem; color: #222; }
header { position: sticky; top: 0; background: #fff; border-bottom: 1px solid #ccc; padding: .5rem 0; }
h1 { font-size: 1.3rem; margin: .3rem 0; }
.item { border-bottom: 1px solid #ddd; padding: 1rem 0; }
.item h2 { font-size: 1rem; color: #666; margin: 0 0 .5rem; }
.item img { display: block; max-width: 100%; max-height: 70vh; margin-bottom: .7rem; }
.question { font-weight: 600; }
fieldset { border: none; padding: 0; margin: 0; }
label { display: block; padding: .35rem .5rem; border-radius: .3rem; cursor: pointer; }
label:hover { background: #eef3ff; }
button { font-size: 1rem; padding: .4rem 1rem; }
#progress { margin-left: 1rem; }
"""

SCRIPT = """
(function () {
  "use strict";
  var annotator = document.body.dataset.annotator, level = document.body.dataset.level;
  var storeKey = "hvcu-human/" + annotator + "/level" + level;
  var items = Array.prototype.slice.call(document.querySelectorAll("section.item"));
  var saved = {};
  try { saved = JSON.parse(window.localStorage.getItem(storeKey) || "{}") || {}; } catch (e) { saved = {}; }
  function itemKey(s) { return s.dataset.family + "/" + s.dataset.id; }
  function chosen(s) { var c = s.querySelector("input:checked"); return c ? c.value : ""; }
  function showProgress() {
    var done = items.filter(function (s) { return chosen(s) !== ""; }).length;
    document.getElementById("progress").textContent = done + " / " + items.length + " answered";
  }
  items.forEach(function (s) {
    var previous = saved[itemKey(s)];
    if (/^[A-D]$/.test(previous || "")) { s.querySelector('input[value="' + previous + '"]').checked = true; }
    s.addEventListener("change", function () {
      saved[itemKey(s)] = chosen(s);
      try { window.localStorage.setItem(storeKey, JSON.stringify(saved)); } catch (e) { /* storage off */ }
      showProgress();
    });
  });
  // The rule of hvcu_tasks.data.files.csv_cell: a "'" before text a spreadsheet would run as a formula.
  var PLAIN_NUMBER = /^[+-]?(\\d+(\\.\\d*)?|\\.\\d+)([eE][+-]?\\d+)?%?$/;
  function unformula(v) {
    var risky = /^[=+\\-@\\t\\r]/.test(v) && !PLAIN_NUMBER.test(v);
    return v.charAt(0) === "'" || risky ? "'" + v : v;
  }
  function cell(text) { return '"' + unformula(String(text)).replace(/"/g, '""') + '"'; }
  document.getElementById("download").addEventListener("click", function () {
    var lines = [COLUMNS.map(cell).join(",")];
    items.forEach(function (s) {
      var options = Array.prototype.map.call(s.querySelectorAll(".option"), function (o) { return o.textContent; });
      var row = [annotator, level, s.dataset.family, s.dataset.id, s.querySelector(".question").textContent];
      lines.push(row.concat(options, [chosen(s)]).map(cell).join(","));
    });
    var blob = new Blob(["\\ufeff" + lines.join("\\r\\n") + "\\r\\n"], { type: "text/csv;charset=utf-8" });
    var link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = annotator + "_level" + level + "_answers.csv";
    document.body.appendChild(link);
    link.click();
    link.remove();
  });
  showProgress();
})();
"""


def html_parts(
    samples: Sequence[Sample], annotator: str, level: int, image_url: Callable[[Sample], str] | None = None
) -> Iterator[str]:
    """Yield the HTML sheet piece by piece (one piece per sample), every text escaped."""
    image_url = image_url or (lambda s: image_data_url(s.image) if s.image else "")
    title = f"HVCU-Bench answer sheet: {annotator}, level {level} ({LEVEL_TITLES[level]})"
    yield (
        "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>\n"
        f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
        f"<body data-annotator='{escape(annotator)}' data-level='{level}'>\n<header>\n<h1>{escape(title)}</h1>\n"
        "<p>Look at each image and choose the one option that best answers its question. Your choices are kept "
        "in this browser as you go. When you are done, click the button and send the downloaded CSV file to "
        "the organiser.</p>\n"
        "<noscript><p><strong>JavaScript is off: fill in the CSV sheet you received instead.</strong></p></noscript>\n"
        f"<p><button type='button' id='download'>Download answers (CSV)</button><span id='progress'>"
        f"0 / {len(samples)} answered</span></p>\n</header>\n<main>\n"
    )
    for n, s in enumerate(samples, start=1):
        lv = level_of(s, level)
        options = "".join(
            f"<label><input type='radio' name='q{n}' value='{k}'> <b>{k}.</b> "
            f"<span class='option'>{escape(text)}</span></label>\n"
            for k, text in lv.options
        )
        yield (
            f"<section class='item' data-family='{escape(s.family)}' data-id='{escape(s.id)}'>\n"
            f"<h2>{n} / {len(samples)}</h2>\n<img src='{image_url(s)}' alt='image {n}'>\n"
            f"<p class='question'>{escape(lv.question)}</p>\n<fieldset>\n{options}</fieldset>\n</section>\n"
        )
    yield f"</main>\n<script>\nvar COLUMNS = {json.dumps(list(COLUMNS))};{SCRIPT}</script>\n</body>\n</html>\n"


def write_sheets(samples: Sequence[Sample], assignment: Assignment, out: Path) -> list[Path]:
    """Write `<name>_level<k>.html` and `.csv` under `out` for every annotator; return the paths."""
    by_key = {(s.family, s.id): s for s in samples}
    ordered = [by_key[item.key] for item in assignment.items]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for level, members in assignment.groups.items():
        for annotator in members:
            order = sheet_order(ordered, annotator, level, assignment.seed)
            stem = sheet_stem(annotator, level)
            csv_path, html_path = inside(out, f"{stem}.csv"), inside(out, f"{stem}.html")
            write_atomic(csv_path, csv_text(order, annotator, level).encode("utf-8-sig"))
            with atomic_path(html_path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as f:
                f.writelines(html_parts(order, annotator, level))
            written += [html_path, csv_path]
    return written
