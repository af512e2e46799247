"""First contact with the real hub data (the stand-in hub of tests/standins/hub.py): unknown parquet columns without
the authors' JSON fail naming found and expected columns, and
`hvcu data validate` compares per-family and per-aspect counts with the published dataset card. And `make demo`:
a visible output folder, `hvcu report` on its run, the next commands.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import item
from PIL import Image
from standins.hub import card, parquet_bytes

from hvcu_tasks.cli import main
from hvcu_tasks.core.families import FAMILIES

# The published dataset card of Chime316/HVCU-Bench, as the issue quotes it.
CARD = {
    "implication": {"metaphor": 319, "symbolism": 21, "contrast": 22, "exaggeration": 22, "dislocation": 16},
    "aesthetic": {"color": 37, "composition": 122, "font": 97, "graphics": 94},
    "affective": {"joy": 25, "affection": 83, "wonder": 47, "anger": 31, "fear": 81, "sadness": 33},
}
EXPECTED_MAPPING = "expected an id column (one of ['id', 'sample_id'"
HUB_EXPECTED = "are not the authors' fields"


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), "green").save(buffer, format="PNG")
    return buffer.getvalue()


PNG = _png()


def _rows(family: str, counts: dict[str, int]) -> list[dict]:
    """Hub-layout rows (id, image struct, qa_levels as JSON text) for the given per-aspect counts."""
    levels = json.dumps(item("x")["qa_levels"])
    return [
        {"id": f"{aspect}_{i:03d}", "image": {"bytes": PNG, "path": None}, "qa_levels": levels}
        for aspect, n in counts.items()
        for i in range(1, n + 1)
    ]


def _write_parquet_copy(root: Path, card: dict[str, dict[str, int]]) -> Path:
    """Write a local copy in the hub's parquet layout: data/<Split>-00000-of-00001.parquet per family."""
    (root / "data").mkdir(parents=True)
    for family, counts in card.items():
        split = FAMILIES[family][0]
        pq.write_table(pa.Table.from_pylist(_rows(family, counts)), root / "data" / f"{split}-00000-of-00001.parquet")
    return root


def _validate(capsys, *args: str) -> tuple[int, list[str], str]:
    code = main(["data", "validate", *args])
    out = capsys.readouterr()
    return code, out.out.splitlines(), out.err


def _fake_hub(hub, rows_of) -> str:
    """Publish `rows_of(split)` as the parquet config of the stand-in hub's Chime316/HVCU-Bench (card and splits, no
    JSON files); return the commit."""
    files = {"README.md": card()}
    for _family, (split, _stem, _short) in FAMILIES.items():
        files[f"assets/{split}-00000-of-00001.parquet"] = parquet_bytes(rows_of(split))
    return hub.repo("Chime316/HVCU-Bench").commit(files)


# --- unknown columns ---------------------------------------------------------------------------------------------


def test_hub_columns_without_an_image_column_name_what_was_found_and_expected(stand_in_hub, capsys) -> None:
    _fake_hub(stand_in_hub, lambda split: [{"question_id": "1", "img_path": "a.png", "conversations": "[]"}])
    code, lines, err = _validate(capsys, "hub")
    problems = [line for line in lines if ": files: " in line]
    assert code == 1 and "INVALID" in err and "Traceback" not in err
    assert len(problems) == 3  # one per family split, not only the first
    impl = next(p for p in problems if "/Implication-Understanding.json" in p)
    assert "the parquet columns ['conversations', 'img_path', 'question_id']" in impl
    assert HUB_EXPECTED in impl and "no column id, qa_levels, image" in impl
    assert stand_in_hub.foreign() == []


def test_hub_rows_with_an_image_but_no_known_id_or_levels_name_both(stand_in_hub, capsys) -> None:
    rows = [{"uuid": "7", "image": {"bytes": PNG, "path": None}, "prompt": "?", "answer": "A"}]
    _fake_hub(stand_in_hub, lambda split: rows)
    code, lines, _ = _validate(capsys, "hub")
    problems = [line for line in lines if ": files: " in line]
    assert code == 1 and len(problems) == 3
    assert all("['answer', 'image', 'prompt', 'uuid']" in p and "no column id, qa_levels)" in p for p in problems)
    assert all(HUB_EXPECTED in p for p in problems)


def test_every_local_parquet_file_with_unknown_columns_gets_its_own_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "data").mkdir()
    for family in FAMILIES:
        split = FAMILIES[family][0]
        rows = [{"qid": 1, "picture": PNG, "text": "?"}]
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / "data" / f"{split}-00000-of-00001.parquet")
    code, lines, _ = _validate(capsys, str(tmp_path))
    problems = [line for line in lines if ": columns: " in line]
    assert code == 1 and len(problems) == 3
    assert all("found columns ['picture', 'qid', 'text']" in p and EXPECTED_MAPPING in p for p in problems)
    assert {p.split(": id=")[0].rsplit("/", 1)[-1] for p in problems} == {
        f"{FAMILIES[f][0]}-00000-of-00001.parquet" for f in FAMILIES
    }


# --- counts against the published dataset card --------------------------------------------------------------------


def test_the_published_counts_are_the_dataset_cards() -> None:
    from hvcu_tasks.data.validate import PUBLISHED_COUNTS, PUBLISHED_SOURCE

    assert {f: dict(c) for f, c in PUBLISHED_COUNTS.items()} == CARD
    assert "dataset card" in PUBLISHED_SOURCE and "Chime316/HVCU-Bench" in PUBLISHED_SOURCE


def test_a_full_copy_matching_the_card_says_so(tmp_path: Path, capsys) -> None:
    code, lines, _ = _validate(capsys, str(_write_parquet_copy(tmp_path, CARD)), "--no-decode")
    assert code == 0 and lines[-1] == "OK"
    assert "1050 sample(s)" in lines
    assert not [line for line in lines if line.startswith("warning:")]
    assert any(line.startswith("counts match the published dataset card") for line in lines)


def test_a_full_copy_with_other_counts_warns_per_aspect_and_family(tmp_path: Path, capsys) -> None:
    card = json.loads(json.dumps(CARD))
    card["implication"]["metaphor"] = 318  # one item lost
    card["aesthetic"]["font"] = 96
    card["aesthetic"]["graphics"] = 95  # one item under the wrong aspect: the family total still matches
    code, lines, _ = _validate(capsys, str(_write_parquet_copy(tmp_path, card)), "--no-decode")
    warnings = [line for line in lines if line.startswith("warning:")]
    assert code == 0 and lines[-1].startswith("OK")  # a warning, not an error
    assert warnings == [
        "warning: 1049 sample(s) in all; the published dataset card has 1050",
        "warning: implication: 399 sample(s); the published dataset card has 400",
        "warning: implication/metaphor: 318 sample(s); the published dataset card has 319",
        "warning: aesthetic/font: 96 sample(s); the published dataset card has 97",
        "warning: aesthetic/graphics: 95 sample(s); the published dataset card has 94",
    ]


def test_samples_in_no_published_aspect_are_a_warning(tmp_path: Path, capsys) -> None:
    card = json.loads(json.dumps(CARD))
    card["affective"]["joy"] = 24
    card["affective"]["surprise"] = 1  # an id prefix the card does not know: aspect 'unknown'
    code, lines, _ = _validate(capsys, str(_write_parquet_copy(tmp_path, card)), "--no-decode")
    warnings = [line for line in lines if line.startswith("warning:")]
    assert code == 0
    assert warnings == [
        "warning: affective/joy: 24 sample(s); the published dataset card has 25",
        "warning: affective/unknown: 1 sample(s) in no aspect of the published dataset card"
        " (the aspect is read from a column among ['aspect', 'sub_category', 'subcategory', 'category',"
        " 'sub_task', 'subtask', 'type'], else from the id's prefix)",
    ]


def test_the_hub_is_always_compared(stand_in_hub, capsys) -> None:
    by_split = {FAMILIES[f][0]: _rows(f, c) for f, c in CARD.items()}
    by_split["Affective_Reasoning"] = by_split["Affective_Reasoning"][:-10]  # a smaller revision: 290 rows
    _fake_hub(stand_in_hub, lambda split: by_split[split])
    code, lines, _ = _validate(capsys, "hub", "--no-decode")
    warnings = [line for line in lines if line.startswith("warning:")]
    assert code == 0
    assert "warning: affective: 290 sample(s); the published dataset card has 300" in warnings
    assert "warning: affective/sadness: 23 sample(s); the published dataset card has 33" in warnings


@pytest.mark.parametrize("source", ["smoke", "small"])
def test_the_smoke_sample_and_small_custom_data_are_not_compared(source: str, write_dataset, capsys) -> None:
    if source == "small":
        source = str(write_dataset({f: [item(f"{next(iter(CARD[f]))}_001")] for f in FAMILIES}))
    code, lines, _ = _validate(capsys, source)
    total = 15 if source == "smoke" else 3
    assert code == 0 and lines[-1] == "OK"
    assert not [line for line in lines if line.startswith("warning:")]
    assert f"not the published benchmark: {total} samples vs 1,050; counts not compared with its dataset card" in lines


def test_a_null_levels_cell_is_that_records_problem_not_an_unknown_layout(tmp_path: Path) -> None:
    from hvcu_tasks.data.loaders import load_parquet

    rows = _rows("implication", {"metaphor": 3})
    rows[1]["qa_levels"] = None
    path = tmp_path / "Implication_Understanding-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    result = load_parquet(path)
    assert [s.id for s in result.samples] == ["metaphor_001", "metaphor_002", "metaphor_003"]
    (problem,) = result.problems
    assert (problem.record, problem.field) == ("metaphor_002", "qa_levels")


def test_the_layout_error_says_which_part_is_missing() -> None:
    from hvcu_tasks.core.schema import DataError
    from hvcu_tasks.data.loaders import rows_to_samples

    with pytest.raises(DataError, match=r"unrecognised layout \(no id column\).*found columns \['image', 'qa_levels'"):
        rows_to_samples([{"image": PNG, "qa_levels": "[]", "question_id": "1"}], "implication", "hub[x]")


# --- make demo -----------------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]

# Stand-ins for the venv's programs (the real run is `make demo` itself): they log their arguments; lmms-eval writes
# a results file, `hvcu report --out DIR` an index.html.
FAKE = """
import json, sys
from pathlib import Path
with open(Path(__file__).resolve().parents[2] / "calls.jsonl", "a") as fh:
    fh.write(json.dumps([Path(sys.argv[0]).name, *sys.argv[1:]]) + "\\n")
if "--output_path" in sys.argv:
    out = Path(sys.argv[sys.argv.index("--output_path") + 1]) / "model"
    out.mkdir(parents=True)
    (out / "20250101_results.json").write_text("{}")
if sys.argv[1] == "report" and "--out" in sys.argv:
    site = Path(sys.argv[sys.argv.index("--out") + 1])
    site.mkdir(parents=True)
    (site / "index.html").write_text("<html></html>")
"""


def make_demo(tmp_path: Path, *variables: str) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """Run `make demo` with stand-in programs; return the run and the logged calls."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name in ("hvcu", "lmms-eval"):
        (venv / "bin" / name).write_text(f"#!{sys.executable}\n{FAKE}")
        (venv / "bin" / name).chmod(0o755)
    (venv / ".installed").touch()  # newer than pyproject.toml: `setup` has nothing to do
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    done = subprocess.run(
        ["make", "--no-print-directory", "demo", f"VENV={venv}", *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    log = tmp_path / "calls.jsonl"
    return done, [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_make_demo_reports_its_run_as_a_site_and_a_summary(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    done, calls = make_demo(tmp_path, f"DEMO={demo}")
    assert done.returncode == 0, done.stdout + done.stderr
    reports = [call for call in calls if call[:2] == ["hvcu", "report"]]
    # one report: the site written, the terminal gets the short table, where the page is and the full command
    assert reports == [["hvcu", "report", f"{demo}/runs", "--format", "html", "--out", f"{demo}/site", "--summary"]]
    assert calls[-1] == reports[0]  # the last thing the demo runs
    assert (demo / "site" / "index.html").is_file()


def test_make_demo_ends_with_the_next_commands_after_the_summary(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    done, _ = make_demo(tmp_path, f"DEMO={demo}")
    tail = done.stdout[done.stdout.index(f"--out {demo}/site --summary") :]
    assert "the numbers mean nothing" in tail and len(tail.splitlines()) <= 10
    assert "hvcu mock serve" in tail and "docs/offline-recipes.md" in tail and "lmms-eval --model vllm" in tail


def test_make_demo_writes_to_a_visible_folder_that_git_ignores() -> None:
    dry = subprocess.run(["make", "-n", "demo", "VENV=.venv"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "--output_path hvcu-demo/runs" in dry.stdout
    ignored = subprocess.run(["git", "check-ignore", "-q", "hvcu-demo/runs"], cwd=ROOT)
    assert ignored.returncode == 0  # 0: ignored
