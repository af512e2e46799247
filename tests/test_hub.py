"""First contact with the hub through the real `huggingface_hub` and `datasets` clients, against the stand-in hub.

The stand-in (tests/standins/hub.py) serves a repository in the published layout: the card with its `benchmark`
config, one parquet file per split under assets/, the authors' JSON files and `Image/<stem>/<id>.png`. Every test
also asserts that no request went anywhere but the stand-in.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
from pathlib import Path

import datasets
import pytest
from conftest import BIN, item
from PIL import Image
from standins.hub import AUTHORS_FEATURES, client_environment, published_files

from hvcu_tasks import harness
from hvcu_tasks.cli import main
from hvcu_tasks.loaders import load_source
from hvcu_tasks.schema import DataError

REPO = "Chime316/HVCU-Bench"
ITEMS = {
    "implication": [item("metaphor_001"), item("symbolism_001", "BCD")],
    "aesthetic": [item("color_001", "CCA")],
    "affective": [item("joy_001", "ABD")],
}
COLOURS = {"metaphor_001": "red", "symbolism_001": "blue", "color_001": "green", "joy_001": "yellow"}
STEM = {
    "implication": "Implication-Understanding",
    "aesthetic": "Aesthetic-Appreciation",
    "affective": "Affective-Reasoning",
}
SAID = "HVCU-Bench: reading "


def png(colour: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (6, 6), colour).save(buffer, format="PNG")
    return buffer.getvalue()


IMAGES = {f: {r["id"]: png(COLOURS[r["id"]]) for r in records} for f, records in ITEMS.items()}


def publish(hub, revision: str = "main", items=ITEMS, **kwargs) -> str:
    """Commit the published layout of `items` to the stand-in's repository; return the commit sha."""
    images = {f: {r["id"]: IMAGES[f].get(r["id"]) or png("black") for r in records} for f, records in items.items()}
    return hub.repo(REPO).commit(published_files(items, images, **kwargs), revision)


def local_copy(root: Path, items=ITEMS) -> Path:
    """Write the same data as a local authors'-layout copy (JSON + Image/<stem>/<id>.png, the same bytes)."""
    for family, records in items.items():
        (root / "Image" / STEM[family]).mkdir(parents=True)
        (root / f"{STEM[family]}.json").write_text(json.dumps(records))
        for r in records:
            (root / "Image" / STEM[family] / f"{r['id']}.png").write_bytes(IMAGES[family][r["id"]])
    return root


def identity(family: str, source: str = "hub") -> dict:
    """The data identity a task load records (the task's own load path: process_docs)."""
    docs = harness.process_docs(datasets.Dataset.from_list([{"family": family, "source": source}]))
    return json.loads(docs[0]["data_identity"])


def said(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(SAID)]


@pytest.fixture(autouse=True)
def _no_override(monkeypatch) -> None:
    monkeypatch.delenv("HVCU_BENCH_DATA", raising=False)
    monkeypatch.delenv("HVCU_BENCH_REVISION", raising=False)


# ---------------------------------------------------------------- the default source: parquet columns nobody knows


def test_unknown_parquet_columns_read_the_json_of_the_same_commit_and_say_so_once(stand_in_hub, caplog) -> None:
    commit = publish(stand_in_hub, parquet="unknown")
    caplog.set_level(logging.WARNING, "hvcu_tasks")
    loaded = {f: load_source("hub", f).raise_for_problems() for f in ITEMS}
    assert {f: [s.id for s in samples] for f, samples in loaded.items()} == {
        f: [r["id"] for r in records] for f, records in ITEMS.items()
    }
    assert all(s.image is not None and s.image.path is not None for samples in loaded.values() for s in samples)
    (line,) = said(caplog)
    assert f"{REPO}@{commit}" in line and "the authors' JSON + image folders" in line
    assert "['conversations', 'img', 'question_id']" in line  # the columns found, named
    fetched = stand_in_hub.downloads()
    assert not [p for p in fetched if p.endswith(".parquet")]  # only the footer was read (a range request)
    assert sorted(p for p in fetched if p != "README.md") == sorted(
        [f"{STEM[f]}.json" for f in ITEMS] + [f"Image/{STEM[f]}/{r['id']}.png" for f in ITEMS for r in ITEMS[f]]
    )
    assert stand_in_hub.foreign() == []


def test_only_the_asked_familys_files_are_downloaded_and_only_once(stand_in_hub) -> None:
    publish(stand_in_hub, parquet="unknown")
    load_source("hub", "aesthetic").raise_for_problems()
    assert sorted(p for p in stand_in_hub.downloads() if p != "README.md") == [
        "Aesthetic-Appreciation.json",
        "Image/Aesthetic-Appreciation/color_001.png",
    ]
    stand_in_hub.clear()
    load_source("hub", "aesthetic").raise_for_problems()
    assert stand_in_hub.downloads() == []  # a second run asks what `main` is, and downloads nothing
    assert stand_in_hub.foreign() == []


def test_the_hub_fingerprint_equals_a_local_copys_and_the_identity_names_commit_and_layout(
    stand_in_hub, tmp_path
) -> None:
    commit = publish(stand_in_hub, parquet="unknown")
    local = local_copy(tmp_path / "copy")
    for family in ITEMS:
        hub = identity(family)
        assert hub["fingerprint"] == identity(family, str(local))["fingerprint"]
        assert (hub["kind"], hub["location"], hub["revision"], hub["requested_revision"], hub["layout"]) == (
            "hub",
            REPO,
            commit,
            None,
            "json",
        )
    assert stand_in_hub.foreign() == []


# ---------------------------------------------------------------- the parquet config in the authors' field names


@pytest.mark.parametrize("features", [None, AUTHORS_FEATURES], ids=["footer", "card-features"])
def test_parquet_in_the_authors_fields_is_read_from_parquet(stand_in_hub, tmp_path, caplog, features) -> None:
    commit = publish(stand_in_hub, parquet="authors", features=features, json_files=False)
    caplog.set_level(logging.WARNING, "hvcu_tasks")
    hub = identity("implication")
    assert hub["layout"] == "parquet" and hub["revision"] == commit and hub["samples"] == 2
    assert hub["fingerprint"] == identity("implication", str(local_copy(tmp_path / "copy")))["fingerprint"]
    (line,) = said(caplog)
    assert "the parquet config 'benchmark'" in line and f"{REPO}@{commit}" in line
    ranged = [r for r in stand_in_hub.requests if r.range]
    assert bool(ranged) == (features is None)  # the card's features decide without even the footer
    assert not [p for p in stand_in_hub.downloads() if p.endswith(".json") or p.startswith("Image/")]
    assert stand_in_hub.foreign() == []


# ---------------------------------------------------------------- HVCU_BENCH_REVISION


def test_the_revision_env_pins_another_revision_with_its_own_content(stand_in_hub, monkeypatch) -> None:
    older = {**ITEMS, "implication": [item("metaphor_001")]}  # v1.0: one implication sample fewer
    v1 = publish(stand_in_hub, "v1.0", items=older, parquet="unknown")
    main_commit = publish(stand_in_hub, parquet="unknown")
    latest = identity("implication")
    monkeypatch.setenv("HVCU_BENCH_REVISION", "v1.0")
    pinned = identity("implication")
    assert (latest["revision"], latest["samples"]) == (main_commit, 2)
    assert (pinned["revision"], pinned["requested_revision"], pinned["samples"]) == (v1, "v1.0", 1)
    assert pinned["fingerprint"] != latest["fingerprint"]
    assert stand_in_hub.foreign() == []


# ---------------------------------------------------------------- offline, warm cache


@pytest.mark.parametrize("parquet", ["unknown", "authors"])
def test_a_warm_cache_loads_offline_with_no_request_at_all(stand_in_hub, parquet) -> None:
    commit = publish(stand_in_hub, parquet=parquet)
    online = identity("affective")
    stand_in_hub.clear()
    stand_in_hub.go_offline()
    offline = identity("affective")
    assert stand_in_hub.requests == []
    assert offline["fingerprint"] == online["fingerprint"] and offline["revision"] == commit
    assert offline["layout"] == ("json" if parquet == "unknown" else "parquet")


def test_offline_with_a_cold_cache_is_one_clear_error(stand_in_hub) -> None:
    publish(stand_in_hub, parquet="unknown")
    stand_in_hub.go_offline()
    with pytest.raises(DataError) as err:
        load_source("hub", "affective")
    (problem,) = err.value.problems
    assert "offline mode is on" in problem.message and "not in the Hugging Face cache" in problem.message
    assert "HVCU_BENCH_DATA" in problem.message and REPO in str(problem)
    assert stand_in_hub.requests == []


# ---------------------------------------------------------------- what goes wrong, in one line


def test_a_wrong_revision_is_one_clear_line(stand_in_hub) -> None:
    publish(stand_in_hub, parquet="unknown")
    with pytest.raises(DataError) as err:
        load_source("hub:Chime316/HVCU-Bench@v9.9", "implication")
    (problem,) = err.value.problems
    assert str(problem).count("\n") == 0
    assert f"{REPO}@v9.9" in str(problem) and "has no revision 'v9.9'" in problem.message
    assert stand_in_hub.foreign() == []


def test_a_missing_repository_is_one_clear_line(stand_in_hub) -> None:
    with pytest.raises(DataError) as err:
        load_source("hub:someone/elsewhere", "implication")
    (problem,) = err.value.problems
    assert "no dataset repository 'someone/elsewhere'" in problem.message
    assert stand_in_hub.foreign() == []


def test_a_missing_image_names_repo_commit_and_file(stand_in_hub) -> None:
    files = published_files(ITEMS, IMAGES, parquet="unknown")
    del files["Image/Implication-Understanding/symbolism_001.png"]
    commit = stand_in_hub.repo(REPO).commit(files)
    loaded = load_source("hub", "implication")
    (problem,) = loaded.problems
    assert (problem.record, problem.field) == ("symbolism_001", "image")
    assert problem.source == f"{REPO}@{commit}/Implication-Understanding.json"
    assert f"{REPO}@{commit}/Image/Implication-Understanding/symbolism_001" in problem.message
    assert stand_in_hub.foreign() == []


def test_neither_usable_parquet_nor_json_names_the_columns_and_the_files_found(stand_in_hub) -> None:
    commit = publish(stand_in_hub, parquet="unknown", json_files=False)
    with pytest.raises(DataError) as err:
        load_source("hub", "affective")
    (problem,) = err.value.problems
    text = str(problem)
    assert text.count("\n") == 0 and f"{REPO}@{commit}/Affective-Reasoning.json" in text
    assert "['conversations', 'img', 'question_id']" in text and "no Affective-Reasoning.json" in text
    assert "files present: ['Image/', 'README.md', 'assets/']" in text
    assert stand_in_hub.foreign() == []


def test_no_parquet_config_and_no_json_is_one_error(stand_in_hub) -> None:
    commit = publish(stand_in_hub, parquet=None, json_files=False)
    files = dict(stand_in_hub.repo(REPO).commits[commit])
    files["README.md"] = b"# no card metadata\n"
    commit = stand_in_hub.repo(REPO).commit(files)
    with pytest.raises(DataError, match=r"declares no parquet split 'Aesthetic_Appreciation'.*files present"):
        load_source("hub", "aesthetic")


def test_a_request_to_another_host_is_caught_by_the_stand_in(stand_in_hub) -> None:
    """The guard itself: a client request meant for huggingface.co lands on the stand-in (the proxy) and is listed."""
    from huggingface_hub.utils import get_session

    with pytest.raises(Exception):  # noqa: B017 - refused by the stand-in, whatever the client raises
        get_session().get("https://huggingface.co/api/datasets/Chime316/HVCU-Bench").raise_for_status()
    assert [r.host for r in stand_in_hub.foreign()] == ["huggingface.co:443"]


# ---------------------------------------------------------------- hvcu data validate hub


def test_validate_hub_prints_the_fingerprints_and_the_layout(stand_in_hub, tmp_path, capsys) -> None:
    commit = publish(stand_in_hub, parquet="unknown")
    code = main(["data", "validate", "hub"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0, out
    local = local_copy(tmp_path / "copy")
    for family in ITEMS:
        fingerprint = identity(family, str(local))["fingerprint"]
        line = f"  {family}: {fingerprint} (hub {REPO}@{commit} from the authors' JSON + image folders)"
        assert line in out
    assert stand_in_hub.foreign() == []


def test_validate_hub_end_to_end_in_a_fresh_process(stand_in_hub, tmp_path) -> None:
    """`hvcu data validate hub` as a user runs it: the clients read the stand-in from the environment at import."""
    commit = publish(stand_in_hub, parquet="unknown")
    keep = {k: v for k, v in os.environ.items() if not k.upper().startswith(("HF_", "HTTP", "ALL_PROXY", "NO_PROXY"))}
    env = keep | client_environment(stand_in_hub, tmp_path / "hf")
    done = subprocess.run(
        [str(BIN / "hvcu"), "data", "validate", "hub", "--no-decode"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"hub {REPO}@{commit} from the authors' JSON + image folders" in done.stdout
    assert done.stderr.count(SAID) == 1 and "Traceback" not in done.stderr
    assert stand_in_hub.foreign() == [] and stand_in_hub.requests
