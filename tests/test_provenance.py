"""Provenance: every HVCU task load records what data it read, and `hvcu report` keeps other data apart."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import item, run_lmms_eval, smoke_predictions

from hvcu_tasks import settings
from hvcu_tasks.cli import main
from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.data import validate
from hvcu_tasks.lmms import hooks, plugin
from hvcu_tasks.results.runs import ReportError, read_runs

COMMIT = "0123456789abcdef0123456789abcdef01234567"
FAKE_CARD = {"implication": {"metaphor": 2, "symbolism": 1}, "aesthetic": {"color": 1}, "affective": {"joy": 1}}
"""A small stand-in for the dataset card's counts, so a 'full' benchmark fits in a test."""
FULL_ITEMS = {
    "implication": [item("metaphor_001"), item("metaphor_002", "BCD"), item("symbolism_001", "DAB")],
    "aesthetic": [item("color_001", "CCA")],
    "affective": [item("joy_001", "ABD")],
}
METRICS = {"acc_l1_perc": 90.0, "acc_l2_bridge": 80.0, "acc_l3_conn": 70.0, "acc_full": 60.0, "n_incomplete": 0}


def stub(family: str, source: str = "hub") -> datasets.Dataset:
    return datasets.Dataset.from_list([{"family": family, "source": source}])


def identity(family: str, source: str) -> dict:
    """The data identity a task load records (through the task's own loading path)."""
    docs = hooks.process_docs(stub(family, source))
    return json.loads(docs[0]["data_identity"])


def hub_layout(root: Path, out: Path) -> Path:
    """Copy an authors'-layout folder into hub-layout parquet shards (image bytes as stored)."""
    out.mkdir(parents=True, exist_ok=True)
    for _family, (split, stem, _short) in FAMILIES.items():
        if not (root / f"{stem}.json").is_file():
            continue
        rows = [
            {
                "id": rec["id"],
                "image": {"bytes": (root / "Image" / stem / f"{rec['id']}.png").read_bytes(), "path": None},
                "qa_levels": json.dumps(rec["qa_levels"]),
            }
            for rec in json.loads((root / f"{stem}.json").read_text())
        ]
        pq.write_table(pa.Table.from_pylist(rows), out / f"{split}-00000-of-00001.parquet")
    return out


def results_file(folder: Path, model: str, identities: dict[str, dict | None], prefix: str = "hvcu_bench") -> Path:
    """Write an lmms-eval results file for the three families, with the given data identities (None: not recorded)."""
    folder.mkdir(parents=True, exist_ok=True)
    results, configs = {}, {}
    for family, (_split, _stem, short) in FAMILIES.items():
        task = f"{prefix}_{short}"
        results[task] = {f"{k},none": v for k, v in METRICS.items()} | {"alias": task}
        configs[task] = {"task": task, "metadata": {"version": 1}}
        if identities.get(family) is not None:
            configs[task]["metadata"]["hvcu_data_identity"] = identities[family]
    data = {
        "results": results,
        "configs": configs,
        "config": {"model": "vllm", "model_args": f"model={model}", "limit": None},
    }
    (folder / "20260101_000000_results.json").write_text(json.dumps(data))
    return folder


@pytest.fixture
def fake_card(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validate, "PUBLISHED_COUNTS", FAKE_CARD)
    monkeypatch.setattr(validate, "PUBLISHED_FINGERPRINTS", {})


def identities_of(source: str) -> dict[str, dict]:
    return {f: identity(f, source) for f in FAMILIES}


# ---------------------------------------------------------------- the fingerprint


def test_identity_names_the_local_path_the_counts_and_a_fingerprint(write_dataset, monkeypatch) -> None:
    root = write_dataset(FULL_ITEMS)
    monkeypatch.setenv("HVCU_BENCH_DATA", str(root))
    got = identity("implication", "hub")
    assert got["kind"] == "local" and got["location"] == str(root.resolve())
    assert got["samples"] == 3 and got["aspects"] == {"metaphor": 2, "symbolism": 1}
    assert got["scheme"] == "hvcu-data/1" and got["fingerprint"].startswith("sha256:")
    assert len(got["fingerprint"]) == len("sha256:") + 64


def test_the_fingerprint_is_the_documented_canonical_serialisation(write_dataset) -> None:
    root = write_dataset({"affective": [item("joy_001", "ABD")]})
    image = hashlib.sha256((root / "Image" / "Affective-Reasoning" / "joy_001.png").read_bytes()).hexdigest()
    levels = [
        [n, f"Question at level {n}?", [[k, f"option {k} of level {n}"] for k in "ABCD"], gold]
        for n, gold in zip((1, 2, 3), "ABD", strict=True)
    ]
    line = json.dumps(["joy_001", levels, image], ensure_ascii=False, separators=(",", ":"))
    assert identity("affective", str(root))["fingerprint"] == "sha256:" + hashlib.sha256(line.encode()).hexdigest()


def test_the_hub_parquet_and_the_authors_layout_of_one_release_have_one_fingerprint(write_dataset, tmp_path) -> None:
    root = write_dataset(FULL_ITEMS)
    parquet = hub_layout(root, tmp_path / "hub_copy")
    for family in FAMILIES:
        assert identity(family, str(root))["fingerprint"] == identity(family, str(parquet))["fingerprint"]


def test_a_hub_load_records_the_pinned_revision_and_the_same_fingerprint(
    write_dataset, tmp_path, monkeypatch, stand_in_hub
) -> None:
    from standins.hub import card

    root = write_dataset(FULL_ITEMS)
    parquet = hub_layout(root, tmp_path / "hub_copy")
    files = {"README.md": card()} | {f"assets/{p.name}": p.read_bytes() for p in parquet.glob("*.parquet")}
    pinned = stand_in_hub.repo("Chime316/HVCU-Bench").commit(files)
    stand_in_hub.repo("Chime316/HVCU-Bench").commit({**files, "README.md": card() + b"newer"})  # main moved on
    monkeypatch.delenv("HVCU_BENCH_DATA", raising=False)
    monkeypatch.setenv("HVCU_BENCH_REVISION", pinned)
    hub = identity("implication", "hub")
    assert all(pinned in path for path in stand_in_hub.paths() if "/resolve/" in path)
    assert hub["kind"] == "hub" and hub["location"] == "Chime316/HVCU-Bench" and hub["revision"] == pinned
    assert hub["requested_revision"] == pinned and hub["layout"] == "parquet"
    assert hub["fingerprint"] == identity("implication", str(root))["fingerprint"]
    assert stand_in_hub.foreign() == []


def test_the_revision_env_pins_only_hub_sources_that_name_none() -> None:
    env = {"HVCU_BENCH_REVISION": "v1.0"}
    assert settings.resolve_source("hub", settings.current(env)) == "hub:Chime316/HVCU-Bench@v1.0"
    assert (
        settings.resolve_source("hub", settings.current(env | {"HVCU_BENCH_DATA": "hub:me/copy@abc"}))
        == "hub:me/copy@abc"
    )
    assert settings.resolve_source("hub", settings.current(env | {"HVCU_BENCH_DATA": "/data"})) == "/data"
    assert settings.resolve_source("smoke", settings.current(env)) == "smoke"


@pytest.mark.parametrize(
    "change",
    ["option text", "gold key", "question", "image bytes", "one sample removed"],
)
def test_any_content_change_changes_the_fingerprint(write_dataset, change: str) -> None:
    root = write_dataset(FULL_ITEMS)
    before = identity("implication", str(root))["fingerprint"]
    path = root / "Implication-Understanding.json"
    records = json.loads(path.read_text())
    if change == "option text":
        records[0]["qa_levels"][0]["options"][1]["option_text"] = "something else"
    elif change == "gold key":
        records[0]["qa_levels"][2]["correct_answer_key"] = "D"
    elif change == "question":
        records[1]["qa_levels"][1]["question"] += " "
    elif change == "one sample removed":
        records.pop()
    path.write_text(json.dumps(records))
    if change == "image bytes":
        image = root / "Image" / "Implication-Understanding" / "metaphor_001.png"
        image.write_bytes(image.read_bytes() + b"\0")  # same pixels, other bytes
    validate._DIGESTS.clear()
    validate._VERDICTS.clear()
    assert identity("implication", str(root))["fingerprint"] != before


def test_record_order_and_folder_do_not_change_the_fingerprint(write_dataset, tmp_path) -> None:
    root = write_dataset(FULL_ITEMS)
    before = identity("implication", str(root))["fingerprint"]
    moved = tmp_path / "elsewhere"
    root.rename(moved)
    path = moved / "Implication-Understanding.json"
    path.write_text(json.dumps(list(reversed(json.loads(path.read_text())))))
    assert identity("implication", str(moved))["fingerprint"] == before


def test_each_image_is_hashed_once_per_process(write_dataset, monkeypatch) -> None:
    root = write_dataset(FULL_ITEMS)
    validate._DIGESTS.clear()
    reads: list[str] = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: reads.append(self.name) or real(self))
    identity("implication", str(root))
    identity("implication", str(root))
    assert sorted(reads) == ["metaphor_001.png", "metaphor_002.png", "symbolism_001.png"]


# ---------------------------------------------------------------- the task's outputs


def test_every_scored_document_and_the_task_config_carry_the_identity(write_dataset) -> None:
    root = write_dataset(FULL_ITEMS)
    docs = hooks.process_docs(stub("implication", str(root)))
    expected = json.loads(docs[0]["data_identity"])
    payloads = [hooks.process_results(doc, ["A"]) for doc in docs]
    assert all(p["acc_full"]["data_identity"] == expected for p in payloads)
    assert "data_identity" not in payloads[0]  # not a metric: never a row of lmms-eval's table
    assert plugin.dataset_identity(docs) == expected


def test_context_documents_carry_the_identity_too(write_dataset) -> None:
    from hvcu_tasks.lmms import context

    root = write_dataset(FULL_ITEMS)
    doc = context.process_docs(stub("implication", str(root)))[0]
    assert context.process_results(doc, [["A", "B", "C"]])["acc_full"]["data_identity"] == json.loads(
        doc["data_identity"]
    )


# ---------------------------------------------------------------- the report


def test_a_copy_with_one_sample_removed_is_reported_as_custom_data(write_dataset, tmp_path, fake_card) -> None:
    root = write_dataset({**FULL_ITEMS, "implication": FULL_ITEMS["implication"][:2]})
    run = results_file(tmp_path / "run", "Qwen/X", identities_of(str(root)))
    out = tmp_path / "out"
    assert main(["report", str(run), "--format", "json", "--out", str(out)]) == 0
    tables = {t["name"]: t for t in json.loads((out / "report.json").read_text())}
    assert "table2_base" not in tables  # nothing is ranked beside the paper
    custom = tables["custom1_table2_base"]
    assert custom["title"].startswith(f"[custom data: {root.resolve()}, 4 samples]")
    assert [r[0] for r in custom["rows"]] == ["Qwen/X"]  # no [paper] rows beside it


def test_the_full_published_data_is_ranked_beside_the_paper(write_dataset, tmp_path, fake_card) -> None:
    root = write_dataset(FULL_ITEMS)
    run = results_file(tmp_path / "run", "Qwen/X", identities_of(str(root)))
    out = tmp_path / "out"
    assert main(["report", str(run), "--format", "json", "--out", str(out)]) == 0
    tables = {t["name"]: t for t in json.loads((out / "report.json").read_text())}
    rows = [r[0] for r in tables["table2_base"]["rows"]]
    assert "GPT-4o [paper]" in rows and rows[-1] == "Qwen/X"
    assert not any(name.startswith("custom") for name in tables)


def test_a_benchmark_run_and_a_custom_run_are_kept_apart(write_dataset, tmp_path, fake_card) -> None:
    full = write_dataset(FULL_ITEMS)
    grown = tmp_path / "grown"
    shutil.copytree(full, grown)
    shutil.copy(
        grown / "Image" / "Aesthetic-Appreciation" / "color_001.png",
        grown / "Image" / "Aesthetic-Appreciation" / "color_002.png",
    )
    (grown / "Aesthetic-Appreciation.json").write_text(json.dumps([item("color_001", "CCA"), item("color_002")]))
    bench, custom = identities_of(str(full)), identities_of(str(grown))
    results_file(tmp_path / "a", "model-a", bench)
    results_file(tmp_path / "b", "model-b", custom)
    models = read_runs([tmp_path / "a", tmp_path / "b"])
    from hvcu_tasks.report.render import report_tables

    tables = {t.name: t for t in report_tables(models)}
    ranked = [r[0] for r in tables["table2_base"].rows]
    assert "model-a" in ranked and "model-b" not in ranked
    assert [r[0] for r in tables["custom1_table2_base"].rows] == ["model-b"]
    assert "not the published HVCU-Bench" in " ".join(tables["custom1_table2_base"].notes)


def test_one_model_on_two_different_data_is_an_error(write_dataset, tmp_path, fake_card) -> None:
    root = write_dataset(FULL_ITEMS)
    same = identities_of(str(root))
    other = {**same, "implication": {**same["implication"], "fingerprint": "sha256:" + "2" * 64}}
    results_file(tmp_path / "a", "Qwen/X", same)
    results_file(tmp_path / "b", "Qwen/X", other, prefix="hvcu_bench_context")
    with pytest.raises(ReportError, match="Qwen/X: implication ran on different data"):
        read_runs([tmp_path / "a", tmp_path / "b"])


def test_results_without_an_identity_are_reported_as_before_with_a_note(tmp_path) -> None:
    run = results_file(tmp_path / "old", "Qwen/X", {})
    out = tmp_path / "out"
    assert main(["report", str(run), "--format", "json", "--out", str(out)]) == 0
    table = {t["name"]: t for t in json.loads((out / "report.json").read_text())}["table2_base"]
    assert table["rows"][-1][0] == "Qwen/X" and table["rows"][-1][-2] == 60.0
    assert any("Qwen/X: data identity not recorded" in n for n in table["notes"])


def test_a_damaged_identity_is_refused_naming_the_file_and_task(tmp_path) -> None:
    run = results_file(tmp_path / "run", "Qwen/X", {"implication": {"kind": "local"}})
    with pytest.raises(ReportError, match=r"hvcu_bench_impl: configs metadata hvcu_data_identity: not a data identity"):
        read_runs([run])


# ---------------------------------------------------------------- through the real lmms-eval


@pytest.mark.slow
def test_the_identity_lands_in_the_results_and_samples_files(tmp_path: Path) -> None:
    predictions = smoke_predictions(tmp_path / "p.jsonl")
    args = ["--model", "hvcu_replay", "--model_args", f"model=m,predictions={predictions}"]
    results = run_lmms_eval([*args, "--tasks", "hvcu_bench_sample", "--log_samples"], tmp_path / "run")
    for family, (_split, _stem, short) in FAMILIES.items():
        task = f"hvcu_bench_sample_{short}"
        got = results["configs"][task]["metadata"]["hvcu_data_identity"]
        assert got["kind"] == "smoke" and got["family"] == family and got["fingerprint"].startswith("sha256:")
        assert not any(k.startswith("data_identity") for k in results["results"][task])
        (samples,) = (tmp_path / "run").rglob(f"*_samples_{task}.jsonl")
        lines = [json.loads(line) for line in samples.read_text().splitlines()]
        assert lines and all(line["acc_full"]["data_identity"] == got for line in lines)
    assert main(["report", str(tmp_path / "run"), "--format", "md"]) == 0


def test_the_summary_shows_a_run_on_a_local_copy_unranked_with_a_note(write_dataset, tmp_path, fake_card, capsys):
    root = write_dataset({**FULL_ITEMS, "implication": FULL_ITEMS["implication"][:2]})
    run = results_file(tmp_path / "run", "Qwen/X", identities_of(str(root)))
    assert main(["report", str(run), "--summary"]) == 0
    out = capsys.readouterr().out
    (row,) = [[c.strip() for c in line.split("|")] for line in out.splitlines() if "|Qwen/X " in line]
    assert row[1:4] == ["–", "–", "Qwen/X"]  # a row, first, and no rank among the paper's
    text = " ".join(out.split())
    assert f"custom data: {root.resolve()}, 4 samples: not the published HVCU-Bench, never ranked with it." in text
