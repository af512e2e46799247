"""Annotator forms: a self-contained HTML page whose download button yields an importable CSV, and a CSV sheet."""

from __future__ import annotations

import base64
import csv
import html
import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import item, level
from PIL import Image

from generation.audit.forms import SHEET_COLUMNS, FormItem, embed_image, render_form, sheet_rows, shuffled
from generation.audit.rounds import import_verdicts, round_verdicts, start_audit
from generation.audit.verdicts import CONTEXT_COLUMNS, VERDICT_COLUMNS
from hvcu_tasks.data.loaders import load_path
from hvcu_tasks.dev.smoke import SMOKE_DIR

EVIL = "<script>alert('x')</script> & \"quoted\""


@pytest.fixture(scope="module")
def smoke_items() -> list[FormItem]:
    samples = load_path(SMOKE_DIR).raise_for_problems()
    return [FormItem(s, embed_image(s.image.path), f"source/{s.image.path.name}") for s in samples]


def test_form_is_self_contained(smoke_items: list[FormItem]) -> None:
    page = render_form(smoke_items, "a1", 1)
    assert "http://" not in page and "https://" not in page and "//cdn" not in page
    assert not re.search(r"""(?:src|href)=["'](?!data:)""", page)  # nothing is fetched
    assert page.count('src="data:image/png;base64,') == len(smoke_items) == 15
    assert page.count("<script") == 1  # our own script, inline


def test_form_shows_every_item_with_its_marked_answer(smoke_items: list[FormItem]) -> None:
    page = render_form(smoke_items, "a1", 1)
    for it in smoke_items:
        assert f'data-family="{it.sample.family}" data-id="{it.sample.id}"' in page
    first = page[page.index('data-id="metaphor_001"') :]
    first = first[: first.index("</section>")]
    # metaphor_001 answers B, A, C; each level has one marked option and a yes/no question.
    assert re.findall(r'<li class="correct"><b>(\w)\.</b>', first) == ["B", "A", "C"]
    uid = re.search(r'<section class="item" id="(i\d+)" data-family="implication" data-id="metaphor_001"', page)[1]
    for q in ("l1_supported", "l2_supported", "l3_supported", "coherent"):
        assert first.count(f'name="{uid}-{q}" value=') == 2  # yes and no
    assert "<textarea" in first


def test_form_escapes_text_from_the_data(write_dataset, tmp_path: Path) -> None:
    bad = item("metaphor_001", "ABC")
    bad["qa_levels"][0] = level(1, "A", question=EVIL)
    bad["qa_levels"][1]["options"][2]["option_text"] = "</li><img src=x onerror=alert(1)>"
    data = write_dataset({"implication": [bad, item("metaphor_002")]})
    folder = start_audit(data, tmp_path / "audit", ["a1", "a2", "a3", "a4", "a5"])
    page = (folder / "forms" / "a1.html").read_text(encoding="utf-8")
    assert EVIL not in page and "<script>alert" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;quoted&quot;" in page
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_item_order_is_seeded_per_annotator(smoke_items: list[FormItem]) -> None:
    ids = lambda items: [i.sample.id for i in items]  # noqa: E731
    a1 = ids(shuffled(smoke_items, 7, 1, "a1"))
    assert a1 == ids(shuffled(smoke_items, 7, 1, "a1"))  # reproducible
    assert sorted(a1) == sorted(ids(smoke_items))  # a permutation
    assert a1 != ids(shuffled(smoke_items, 7, 1, "a2"))  # another annotator, another order
    assert a1 != ids(shuffled(smoke_items, 8, 1, "a1"))  # another seed, another order
    assert a1 != ids(shuffled(smoke_items, 7, 2, "a1"))  # another round, another order


def test_sheet_has_the_verdict_columns_empty_and_the_chain_as_context(smoke_items: list[FormItem]) -> None:
    assert set(SHEET_COLUMNS) == set(VERDICT_COLUMNS) | set(CONTEXT_COLUMNS)
    rows = sheet_rows(smoke_items[:1], "bob", 2)
    row = rows[0]
    assert list(row) == list(SHEET_COLUMNS)
    assert (row["annotator"], row["round"], row["family"], row["id"]) == ("bob", "2", "implication", "metaphor_001")
    assert row["l1_question"] == "What object is drawn behind the grey bars?"
    assert row["l1_options"] == "A. A star | B. A red heart | C. A key | D. A bird"
    assert row["l1_answer"] == "B"
    assert all(row[c] == "" for c in ("l1_supported", "l2_supported", "l3_supported", "coherent", "comment"))


def test_embed_image_shrinks_large_images_only(tmp_path: Path) -> None:
    big, small = tmp_path / "big.png", tmp_path / "small.png"
    Image.new("RGB", (400, 200), "blue").save(big)
    Image.new("RGB", (40, 20), "blue").save(small)
    url = embed_image(big, max_side=100)
    assert url.startswith("data:image/jpeg;base64,")
    with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as img:
        assert img.size == (100, 50)
    assert embed_image(small, max_side=100) == "data:image/png;base64," + base64.b64encode(small.read_bytes()).decode()
    assert embed_image(big) == "data:image/png;base64," + base64.b64encode(big.read_bytes()).decode()


# Appended to a copy of a form: answers every item, clicks the real download button and prints what the
# page handed to the browser (the Blob's text and the file name) into the DOM for --dump-dom to read.
DRIVER = """
<script>
(function () {
  var captured = document.createElement("pre"); captured.id = "captured"; document.body.appendChild(captured);
  var name = document.createElement("pre"); name.id = "filename"; document.body.appendChild(name);
  var makeUrl = URL.createObjectURL;
  URL.createObjectURL = function (blob) {
    blob.text().then(function (t) { captured.textContent = t; });
    return makeUrl(blob);
  };
  HTMLAnchorElement.prototype.click = function () { name.textContent = this.download; };
  document.querySelectorAll("section.item").forEach(function (item, i) {
    ["l1_supported", "l2_supported", "l3_supported", "coherent"].forEach(function (q, j) {
      var value = (item.dataset.id === "font_001" && j === 2) ? "no" : "yes";
      item.querySelector('input[name="' + item.id + "-" + q + '"][value="' + value + '"]').click();
    });
    if (item.dataset.id === "font_001") {
      var box = item.querySelector("textarea");
      box.value = 'L3: "elegant", or modern?\\nsecond line, with a comma';
      box.dispatchEvent(new Event("input", {bubbles: true}));
    }
  });
  document.getElementById("download").click();
})();
</script>
"""


def dump_dom(page: Path, profile: Path) -> str:
    """Load a page in headless Chromium, let its scripts run, and return the resulting DOM."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "headless Chromium is required (make browser installs Debian's chromium)"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    proc = subprocess.run(
        [binary, *flags, "--virtual-time-budget=5000", f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_download_button_writes_the_csv_that_imports(tmp_path: Path) -> None:
    folder = start_audit(SMOKE_DIR, tmp_path / "audit", ["a1", "a2", "a3", "a4", "a5"])
    form = (folder / "forms" / "a3.html").read_text(encoding="utf-8")
    driven = tmp_path / "driven.html"
    driven.write_text(form.replace("</body>", DRIVER + "</body>"), encoding="utf-8")
    dom = dump_dom(driven, tmp_path / "profile")
    assert re.search(r'<pre id="filename">a3-round1\.csv</pre>', dom)
    text = html.unescape(re.search(r'<pre id="captured">(.*?)</pre>', dom, re.S).group(1))
    assert "15 of 15 items answered" in dom
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == list(VERDICT_COLUMNS) and len(rows) == 15
    saved = tmp_path / "a3-round1.csv"
    saved.write_text(text, encoding="utf-8")
    assert import_verdicts(tmp_path / "audit", [saved]) == ["a3"]
    font = next(v for v in round_verdicts(tmp_path / "audit", 1)["a3"] if v.id == "font_001")
    assert (font.l1_supported, font.l2_supported, font.l3_supported, font.coherent) == (True, True, False, True)
    assert font.comment == 'L3: "elegant", or modern?\nsecond line, with a comma'


def test_answers_survive_reloading_the_form(tmp_path: Path) -> None:
    folder = start_audit(SMOKE_DIR, tmp_path / "audit", ["a1", "a2", "a3", "a4", "a5"])
    form = folder / "forms" / "a2.html"
    assert "0 of 15 items answered" in dump_dom(form, tmp_path / "profile")
    driven = tmp_path / "driven.html"
    driven.write_text(form.read_text(encoding="utf-8").replace("</body>", DRIVER + "</body>"), encoding="utf-8")
    dump_dom(driven, tmp_path / "profile")  # answers everything; the page keeps the answers in localStorage
    reloaded = dump_dom(form, tmp_path / "profile")
    assert "15 of 15 items answered" in reloaded
    assert reloaded.count('class="item done"') == 15
    assert "0 of 15 items answered" in dump_dom(folder / "forms" / "a4.html", tmp_path / "profile")  # not a2's
