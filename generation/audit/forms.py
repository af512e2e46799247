"""Review forms for one annotator: a self-contained HTML page and a spreadsheet CSV with the same fields.

The page embeds every image as a data URL and needs no server or network: the annotator ticks yes/no
per level and for the chain, may comment, and a button downloads the verdicts as CSV (a JavaScript
Blob). Progress is kept in the browser's localStorage, so closing the page loses nothing. Every text
from the data is HTML-escaped. Item order is shuffled per annotator from a seed, reproducibly.
"""

from __future__ import annotations

import base64
import html
import io
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from generation.audit.verdicts import QUESTION_LABELS, QUESTIONS, VERDICT_COLUMNS
from generation.client import image_data_url
from hvcu_tasks.core.schema import Sample

SHEET_COLUMNS: tuple[str, ...] = (
    "annotator",
    "round",
    "family",
    "id",
    "aspect",
    "image",
    *(f"l{n}_{part}" for n in (1, 2, 3) for part in ("question", "options", "answer", "supported")),
    "coherent",
    "comment",
)
LEVEL_TITLES = {1: "Level 1 · perception", 2: "Level 2 · bridge", 3: "Level 3 · connotation"}


@dataclass(frozen=True)
class FormItem:
    """One candidate chain as shown to annotators: the sample, its image as a data URL, its image path."""

    sample: Sample
    image_url: str
    image_path: str


def shuffled(items: Sequence[FormItem], seed: int, round_no: int, annotator: str) -> list[FormItem]:
    """Return the items in this annotator's order for this round (same seed, same order)."""
    order = list(items)
    random.Random(f"hvcu-audit:{seed}:{round_no}:{annotator}").shuffle(order)
    return order


def embed_image(path: Path, max_side: int = 0) -> str:
    """Return an image as a data URL: the file itself, or a JPEG shrunk to `max_side` pixels when larger."""
    if max_side <= 0:
        return image_data_url(path)
    with Image.open(path) as img:
        if max(img.size) <= max_side:
            return image_data_url(path)
        small = img.convert("RGB")
        small.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    small.save(buffer, format="JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


def options_text(sample: Sample, level: int) -> str:
    """Render one level's options on one line for the spreadsheet: 'A. text | B. text | ...'."""
    lv = sample.levels[level - 1]
    return " | ".join(f"{k}. {t}" for k, t in lv.options)


def sheet_rows(items: Sequence[FormItem], annotator: str, round_no: int) -> list[dict[str, str]]:
    """Return the spreadsheet rows (verdict columns empty) in the order given."""
    rows = []
    for it in items:
        s = it.sample
        row = {"annotator": annotator, "round": str(round_no), "family": s.family, "id": s.id, "aspect": s.aspect}
        row["image"] = it.image_path
        for lv in s.levels:
            row[f"l{lv.level}_question"] = lv.question
            row[f"l{lv.level}_options"] = options_text(s, lv.level)
            row[f"l{lv.level}_answer"] = lv.answer
        rows.append({c: row.get(c, "") for c in SHEET_COLUMNS})
    return rows


def _e(text: object) -> str:
    """Escape text for HTML content and attribute values."""
    return html.escape(str(text), quote=True)


def _radios(name: str, label: str) -> str:
    """Render a yes/no question as a fieldset of two radio buttons."""
    choices = "".join(f'<label><input type="radio" name="{_e(name)}" value="{v}"> {v}</label>' for v in ("yes", "no"))
    return f'<fieldset class="yn"><legend>{_e(label)}</legend>{choices}</fieldset>'


def _item_html(index: int, total: int, it: FormItem) -> str:
    """Render one candidate chain: image, three levels with the marked answer, the questions, a comment box."""
    s = it.sample
    uid = f"i{index}"
    parts = [
        f'<section class="item" id="{uid}" data-family="{_e(s.family)}" data-id="{_e(s.id)}">',
        f"<h2>Item {index} of {total} <small>{_e(s.family)} / {_e(s.aspect)} · {_e(s.id)}</small></h2>",
        f'<img src="{_e(it.image_url)}" alt="image of {_e(s.id)}">',
    ]
    for lv in s.levels:
        options = "".join(
            f'<li class="correct"><b>{_e(k)}.</b> {_e(t)} <span class="mark">✓ marked correct</span></li>'
            if k == lv.answer
            else f"<li><b>{_e(k)}.</b> {_e(t)}</li>"
            for k, t in lv.options
        )
        question = f"l{lv.level}_supported"
        parts.append(
            f'<div class="level"><h3>{_e(LEVEL_TITLES.get(lv.level, f"Level {lv.level}"))}</h3>'
            f'<p class="q">{_e(lv.question)}</p><ul class="opts">{options}</ul>'
            f"{_radios(f'{uid}-{question}', 'Is the marked answer unambiguously supported by the image?')}</div>"
        )
    parts.append(_radios(f"{uid}-coherent", QUESTION_LABELS["coherent"]))
    parts.append(
        f'<label class="comment">Comment (optional)<textarea name="{uid}-comment" rows="2"></textarea></label>'
    )
    parts.append("</section>")
    return "\n".join(parts)


_CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:980px;padding:1em;color:#1b1b1b}
header{border-bottom:2px solid #333;margin-bottom:1em}
.item{border:1px solid #bbb;border-radius:6px;padding:.8em 1em;margin:1em 0}
.item.done{border-color:#2e7d32;border-width:2px}
.item img{max-width:100%;max-height:70vh;display:block;margin:.5em auto}
h2 small{font-weight:normal;color:#555;font-size:.7em}
h3{margin:.6em 0 .2em;font-size:1em}.q{margin:.2em 0;font-weight:600}
.opts{list-style:none;padding-left:.5em;margin:.2em 0}.correct{background:#e8f5e9}
.mark{color:#2e7d32;font-weight:600;font-size:.85em}
fieldset.yn{border:0;padding:.2em 0;margin:0}fieldset.yn label{margin-right:1.5em}
legend{padding:0;font-size:.92em}
.comment{display:block;margin-top:.4em;font-size:.92em}.comment textarea{display:block;width:100%}
footer{position:sticky;bottom:0;background:#fff;border-top:2px solid #333;padding:.6em 0}
button{font-size:1em;padding:.4em 1em}
"""

# Reads its settings from <body data-*> (no data is ever pasted into the script itself).
_JS = """
(function () {
  var body = document.body;
  var columns = JSON.parse(body.dataset.columns);
  var questions = JSON.parse(body.dataset.questions);
  var storeKey = "hvcu-audit:" + body.dataset.formKey;
  var items = Array.prototype.slice.call(document.querySelectorAll("section.item"));
  function field(item, name) { return item.id + "-" + name; }
  function answer(item, q) {
    var r = item.querySelector('input[name="' + field(item, q) + '"]:checked');
    return r ? r.value : "";
  }
  function rows() {
    return items.map(function (item) {
      var row = {annotator: body.dataset.annotator, round: body.dataset.round,
                 family: item.dataset.family, id: item.dataset.id,
                 comment: item.querySelector("textarea").value};
      questions.forEach(function (q) { row[q] = answer(item, q); });
      return row;
    });
  }
  function finished(row) { return questions.every(function (q) { return row[q] !== ""; }); }
  // The rule of hvcu_tasks.data.files.csv_cell: a "'" before text a spreadsheet would run as a formula.
  var PLAIN_NUMBER = /^[+-]?(\\d+(\\.\\d*)?|\\.\\d+)([eE][+-]?\\d+)?%?$/;
  function unformula(v) {
    var risky = /^[=+\\-@\\t\\r]/.test(v) && !PLAIN_NUMBER.test(v);
    return v.charAt(0) === "'" || risky ? "'" + v : v;
  }
  function cell(v) {
    v = unformula(String(v));
    return /[",\\r\\n]/.test(v) ? '"' + v.replace(/"/g, '""') + '"' : v;
  }
  function csv() {
    var lines = [columns.join(",")];
    rows().forEach(function (r) { lines.push(columns.map(function (c) { return cell(r[c]); }).join(",")); });
    return lines.join("\\n") + "\\n";
  }
  function refresh() {
    var all = rows(), done = 0;
    all.forEach(function (r, i) { var ok = finished(r); items[i].classList.toggle("done", ok); done += ok; });
    document.getElementById("progress").textContent = done + " of " + all.length + " items answered";
    return all.length - done;
  }
  function save() {
    var state = {};
    rows().forEach(function (r, i) { state[items[i].id] = r; });
    try { localStorage.setItem(storeKey, JSON.stringify(state)); } catch (e) { /* storage off: no autosave */ }
    refresh();
  }
  function restore() {
    var state = null;
    try { state = JSON.parse(localStorage.getItem(storeKey) || "null"); } catch (e) { state = null; }
    if (!state) { return; }
    items.forEach(function (item) {
      var r = state[item.id];
      if (!r || r.family !== item.dataset.family || r.id !== item.dataset.id) { return; }
      questions.forEach(function (q) {
        var box = item.querySelector('input[name="' + field(item, q) + '"][value="' + r[q] + '"]');
        if (box) { box.checked = true; }
      });
      item.querySelector("textarea").value = r.comment || "";
    });
  }
  window.hvcuAuditCsv = csv;
  document.addEventListener("change", save);
  document.addEventListener("input", save);
  document.getElementById("download").addEventListener("click", function () {
    var missing = refresh();
    if (missing && !window.confirm(missing + " item(s) are not fully answered; the import will refuse "
                                   + "the file until they are. Download anyway?")) { return; }
    var link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([csv()], {type: "text/csv;charset=utf-8"}));
    link.download = body.dataset.annotator + "-round" + body.dataset.round + ".csv";
    document.body.appendChild(link);
    link.click();
    setTimeout(function () { URL.revokeObjectURL(link.href); link.remove(); }, 1000);
  });
  restore();
  refresh();
})();
"""


def render_form(
    items: Sequence[FormItem], annotator: str, round_no: int, audit_name: str = "", version: str = ""
) -> str:
    """Return the self-contained HTML review form of one annotator for one round (items in the order given).

    `version` (a hash of the items' contents) is part of the key the browser saves answers under, so a form
    re-exported after an edit does not restore answers given on the old version.
    """
    total = len(items)
    data = {
        "annotator": annotator,
        "round": str(round_no),
        "columns": json.dumps(list(VERDICT_COLUMNS)),
        "questions": json.dumps(list(QUESTIONS)),
        "form-key": f"{audit_name}:{round_no}:{annotator}" + (f":{version}" if version else ""),
    }
    attrs = " ".join(f'data-{k}="{_e(v)}"' for k, v in data.items())
    checks = "".join(f"<li>{_e(QUESTION_LABELS[q])}</li>" for q in QUESTIONS)
    body = "\n".join(_item_html(i, total, it) for i, it in enumerate(items, start=1))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>HVCU-Bench audit, round {round_no}: {_e(annotator)}</title>
<style>{_CSS}</style>
</head>
<body {attrs}>
<header>
<h1>HVCU-Bench audit, round {round_no}</h1>
<p>Annotator <b>{_e(annotator)}</b> · {total} item(s). Work alone; do not discuss items before the round closes.</p>
<p>Each item shows an image and a three-level question chain, the marked answer highlighted.
For every item answer yes or no:</p>
<ol>{checks}</ol>
<p>Answer <i>yes</i> only when the marked option is clearly right and no other option is equally defensible.
Use the comment box for what is wrong (a typo, a second correct option, an artifact of the generator).
Answers are kept in this browser as you go; when done, press <b>Download verdicts</b> and send the CSV file.</p>
</header>
<main>
{body}
</main>
<footer><button type="button" id="download">Download verdicts (CSV)</button> <span id="progress"></span></footer>
<script>{_JS}</script>
</body>
</html>
"""
