"""First contact with the hub through the real `huggingface_hub` client, against the stand-in hub.

The stand-in (tests/standins/hub.py) serves a repository in the published layout: the card with its `benchmark`
config, one parquet file per split under assets/, the authors' JSON files and `Image/<stem>/<id>.png`, large files
through a redirect to its "CDN" host. The tests assert that no request went anywhere but the stand-in.
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

from hvcu_tasks.cli import main
from hvcu_tasks.core.schema import DataError
from hvcu_tasks.data.loaders import load_source
from hvcu_tasks.lmms import hooks

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


def png(colour: str | tuple[int, int, int]) -> bytes:
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
    docs = hooks.process_docs(datasets.Dataset.from_list([{"family": family, "source": source}]))
    return json.loads(docs[0]["data_identity"])


def with_token(monkeypatch, token: str) -> None:
    """Make the clients send `token` (the stand-in fixture turns implicit tokens off)."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", False)


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
    assert {r.status for r in stand_in_hub.requests} <= {200, 206, 302}  # every endpoint asked is one it serves
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
    ranged = [r for r in stand_in_hub.requests if r.range and r.host == stand_in_hub.host]
    assert ranged  # the footer decides, with or without features on the card
    assert sorted(stand_in_hub.downloads()) == ["README.md", "assets/Implication_Understanding-00000-of-00001.parquet"]
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


def test_offline_a_file_the_cache_lost_is_one_error_naming_it(stand_in_hub) -> None:
    from huggingface_hub import try_to_load_from_cache

    from hvcu_tasks.data import hub

    commit = publish(stand_in_hub, parquet="unknown")
    identity("affective")
    lost = "Image/Affective-Reasoning/joy_001.png"
    Path(try_to_load_from_cache(REPO, lost, revision=commit, repo_type="dataset")).unlink()
    stand_in_hub.clear()
    stand_in_hub.go_offline()
    hub.reset()  # a new process
    with pytest.raises(DataError) as err:
        load_source("hub", "affective")
    (problem,) = err.value.problems
    assert problem.source == f"{REPO}@{commit}/{lost}" and "\n" not in str(problem)
    assert f"offline mode is on and {lost} of '{REPO}' is not in the Hugging Face cache" in problem.message
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


def test_a_missing_repository_is_one_clear_line(stand_in_hub, monkeypatch) -> None:
    with pytest.raises(DataError) as err:  # no token: the hub answers 401 for a missing and a private repo alike
        load_source("hub:someone/elsewhere", "implication")
    (problem,) = err.value.problems
    assert str(problem).count("\n") == 0 and problem.field == "access"
    assert "the hub refused access to 'someone/elsewhere' (401): it does not exist, or it is private" in str(problem)
    with_token(monkeypatch, "hf_somebody")
    with pytest.raises(DataError) as err:
        load_source("hub:someone/elsewhere", "implication")
    (problem,) = err.value.problems
    assert "no dataset repository 'someone/elsewhere' on the hub (404 RepoNotFound)" in problem.message
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


# ---------------------------------------------------------------- review: the layout decision reads the files


def authors_parquet(records, images, levels_type: str = "string", image_bytes: bool = True) -> bytes:
    """A parquet file in the authors' field names, written here by hand (qa_levels as JSON text or an int)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("id", pa.string()),
            ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
            ("qa_levels", pa.int64() if levels_type == "int" else pa.string()),
        ]
    )
    rows = [
        {
            "id": r["id"],
            "image": {"bytes": images[r["id"]] if image_bytes else None, "path": f"{r['id']}.png"},
            "qa_levels": 3 if levels_type == "int" else json.dumps(r["qa_levels"]),
        }
        for r in records
    ]
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), buffer)
    return buffer.getvalue()


SHARD = {
    "implication": "assets/Implication_Understanding-00000-of-00001.parquet",
    "aesthetic": "assets/Aesthetic_Appreciation-00000-of-00001.parquet",
    "affective": "assets/Affective_Reasoning-00000-of-00001.parquet",
}


def test_card_features_that_differ_from_the_files_are_not_trusted(stand_in_hub, caplog) -> None:
    commit = publish(stand_in_hub, parquet="unknown", features=AUTHORS_FEATURES)  # card: authors; files: not
    caplog.set_level(logging.WARNING, "hvcu_tasks")
    hub = identity("aesthetic")
    assert (hub["layout"], hub["revision"], hub["samples"]) == ("json", commit, 1)
    (line,) = said(caplog)
    assert "the parquet columns ['conversations', 'img', 'question_id'] are not the authors' fields" in line


@pytest.mark.parametrize(
    "variant, reason",
    [
        ("levels-int", "column qa_levels holds int64, not a list or its JSON text"),
        ("no-image-bytes", f"1 of 1 rows of {SHARD['aesthetic']} have no image bytes"),
    ],
)
def test_authors_names_with_unusable_content_read_the_json(stand_in_hub, caplog, variant, reason) -> None:
    files = published_files(ITEMS, IMAGES, parquet=None)
    for family, records in ITEMS.items():
        files[SHARD[family]] = authors_parquet(
            records, IMAGES[family], "int" if variant == "levels-int" else "string", variant != "no-image-bytes"
        )
    commit = stand_in_hub.repo(REPO).commit(files)
    caplog.set_level(logging.WARNING, "hvcu_tasks")
    hub = identity("aesthetic")
    assert (hub["layout"], hub["revision"], hub["samples"]) == ("json", commit, 1)
    (line,) = said(caplog)
    assert reason in line and "the authors' JSON + image folders" in line


def fail_footer(hub, status: int, times: int):
    """Answer the first `times` footer (range) requests with `status`; return the list of those answered."""
    answered = []

    def intercept(request):
        if request.range and request.host == hub.host and len(answered) < times:
            answered.append(request)
            return status, b"Too many requests" if status == 429 else b"oops\n\nmore lines"
        return None

    hub.intercept = intercept
    return answered


@pytest.fixture
def quick_retries(monkeypatch):
    """Record the client's waits between retries instead of sleeping them (its backoff runs up to 23 s)."""
    import time

    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)
    return waits


@pytest.mark.parametrize("status", [429, 500, 503])
def test_a_failed_footer_request_is_retried(stand_in_hub, quick_retries, status) -> None:
    commit = publish(stand_in_hub, parquet="authors", json_files=False)
    answered = fail_footer(stand_in_hub, status, times=2)
    hub = identity("aesthetic")
    assert len(answered) == 2 and (hub["layout"], hub["revision"]) == ("parquet", commit)


@pytest.mark.parametrize("status", [429, 503])
def test_a_footer_that_stays_unreadable_reads_the_json_saying_why(stand_in_hub, quick_retries, caplog, status):
    publish(stand_in_hub, parquet="authors")
    fail_footer(stand_in_hub, status, times=1000)
    caplog.set_level(logging.WARNING, "hvcu_tasks")
    assert identity("aesthetic")["layout"] == "json"
    (line,) = said(caplog)
    assert f"the parquet footer of {SHARD['aesthetic']} cannot be read (HfHubHTTPError: " in line
    assert str(status) in line and "\n" not in line


def test_an_empty_shard_reads_the_json_saying_why(stand_in_hub, caplog) -> None:
    files = published_files(ITEMS, IMAGES, parquet="authors")
    files[SHARD["aesthetic"]] = b""
    stand_in_hub.repo(REPO).commit(files)
    caplog.set_level(logging.WARNING, "hvcu_tasks")
    assert identity("aesthetic")["layout"] == "json"
    (line,) = said(caplog)
    assert f"the parquet footer of {SHARD['aesthetic']} cannot be read (" in line and "0 bytes" in line


def test_a_stalled_footer_request_times_out(stand_in_hub, monkeypatch, quick_retries, caplog) -> None:
    import threading
    import time

    from huggingface_hub import constants

    publish(stand_in_hub, parquet="authors")
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 0.3)
    stalled: list[object] = []

    def stall(request) -> None:  # the footer's answer comes after 3 s (not time.sleep: that one is recorded)
        if request.range and request.host == stand_in_hub.host:
            stalled.append(request)
            threading.Event().wait(3)

    stand_in_hub.intercept = stall
    caplog.set_level(logging.WARNING, "hvcu_tasks")
    started = time.monotonic()
    assert identity("aesthetic")["layout"] == "json"
    assert time.monotonic() - started < 3 * len(stalled)  # each try gave up before the stalled answer came
    (line,) = said(caplog)
    assert "cannot be read (ReadTimeout" in line


# ---------------------------------------------------------------- review: only the files the JSON needs


def test_only_the_images_the_json_names_are_downloaded_in_the_authors_extension_order(stand_in_hub) -> None:
    files = published_files(ITEMS, IMAGES, parquet="unknown")
    folder = "Image/Aesthetic-Appreciation"
    files[f"{folder}/originals/huge.tif"] = b"x" * 1000  # a sub-folder
    files[f"{folder}/unused_001.png"] = png("white")  # no record names it
    files[f"{folder}/color_001.JPG"] = b"y"  # not an extension of the authors' list
    files[f"{folder}/color_001.jpg"] = files.pop(f"{folder}/color_001.png")  # .jpg comes before .png
    files[f"{folder}/color_001.webp"] = b"z"
    stand_in_hub.repo(REPO).commit(files)
    (sample,) = load_source("hub", "aesthetic").raise_for_problems()
    assert sample.image.path.name == "color_001.jpg"
    assert sorted(stand_in_hub.downloads()) == ["Aesthetic-Appreciation.json", f"{folder}/color_001.jpg", "README.md"]


def test_a_failing_image_download_names_the_file(stand_in_hub) -> None:
    commit = publish(stand_in_hub, parquet="unknown")
    bad = "Image/Implication-Understanding/symbolism_001.png"
    stand_in_hub.intercept = lambda r: (404, b"gone") if r.path.split("?")[0].endswith(bad) else None
    with pytest.raises(DataError) as err:
        load_source("hub", "implication")
    (problem,) = err.value.problems
    assert problem.source == f"{REPO}@{commit}/{bad}" and f"cannot download {bad}: " in problem.message
    assert "\n" not in str(problem)


# ---------------------------------------------------------------- review: gated, private, unreadable cards


def test_a_gated_repository_says_how_to_get_access(stand_in_hub, monkeypatch) -> None:
    publish(stand_in_hub, parquet="unknown")
    stand_in_hub.repo(REPO).gated = True
    for token, status in ((None, 401), ("hf_not_accepted", 403)):
        if token:
            with_token(monkeypatch, token)
        with pytest.raises(DataError) as err:
            load_source("hub", "aesthetic")
        (problem,) = err.value.problems
        assert problem.field == "access" and "\n" not in str(problem)
        assert f"the dataset '{REPO}' is gated and the hub refused access ({status} GatedRepo)" in problem.message
        assert "`hf auth login`" in problem.message and "HF_TOKEN" in problem.message
        assert f"accept the dataset's terms at {stand_in_hub.endpoint}/datasets/{REPO}" in problem.message
    stand_in_hub.repo(REPO).readers.add("hf_not_accepted")  # terms accepted: the same token now reads everything
    assert identity("aesthetic")["samples"] == 1
    assert stand_in_hub.foreign() == []


def test_a_private_repository_without_a_token_is_an_access_problem(stand_in_hub) -> None:
    publish(stand_in_hub, parquet="unknown")
    stand_in_hub.repo(REPO).private = True
    with pytest.raises(DataError) as err:
        load_source("hub", "aesthetic")
    (problem,) = err.value.problems
    assert problem.field == "access" and "no dataset repository" not in problem.message
    assert "(401): it does not exist, or it is private or gated" in problem.message and "hf auth login" in str(problem)


@pytest.mark.parametrize("text", [b"---\nconfigs: [unclosed\n---\n# x\n", b"---\nlicense: caf\xe9\n---\n"])
def test_an_unparsable_card_reads_the_json_saying_so(stand_in_hub, caplog, text) -> None:
    files = published_files(ITEMS, IMAGES, parquet="authors")
    files["README.md"] = text
    commit = stand_in_hub.repo(REPO).commit(files)
    caplog.set_level(logging.WARNING, "hvcu_tasks")
    hub = identity("aesthetic")
    assert (hub["layout"], hub["revision"], hub["samples"]) == ("json", commit, 1)
    (line,) = said(caplog)
    assert "the dataset card README.md cannot be parsed (" in line and "so it declares no parquet config" in line
    assert "cannot reach" not in line


# ---------------------------------------------------------------- review: one commit per process and run


def test_the_revision_is_resolved_once_and_every_family_reads_that_commit(stand_in_hub) -> None:
    first = publish(stand_in_hub, parquet="unknown")
    identity("aesthetic")
    publish(stand_in_hub, parquet="unknown", items={**ITEMS, "affective": []})  # main moves on mid-run
    later = [identity(f) for f in ("affective", "implication")]
    assert [i["revision"] for i in later] == [first, first] and later[0]["samples"] == 1
    repo = [p for p in stand_in_hub.paths() if f"/{REPO}" in p]
    assert [p for p in repo if first not in p] == [f"/api/datasets/{REPO}"]  # `main` asked once, the rest pinned


class FakeGroup:
    """torch.distributed as a rank of an initialized group sees it: rank 0 broadcast `payload`."""

    def __init__(self, rank: int, payload) -> None:
        self.rank, self.payload, self.calls = rank, payload, 0

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return True

    def get_world_size(self) -> int:
        return 2

    def get_rank(self) -> int:
        return self.rank

    def broadcast_object_list(self, objects, src=0) -> None:
        self.calls += 1
        if self.rank != 0:
            objects[0] = self.payload


def test_other_ranks_read_the_commit_rank_0_resolved(stand_in_hub, monkeypatch) -> None:
    import sys

    older = publish(stand_in_hub, parquet="unknown", items={**ITEMS, "implication": [ITEMS["implication"][0]]})
    newer = publish(stand_in_hub, parquet="unknown")  # pushed after rank 0 resolved `main`
    group = FakeGroup(1, (older, None))
    monkeypatch.setitem(sys.modules, "torch.distributed", group)
    monkeypatch.setenv("WORLD_SIZE", "2")
    hub = identity("implication")
    assert (hub["revision"], hub["requested_revision"], hub["samples"]) == (older, None, 1) and newer != older
    assert not [p for p in stand_in_hub.paths() if "/resolve/main/" in p or "/revision/main" in p]
    assert group.calls == 1


def test_rank_0s_error_is_every_ranks_error(stand_in_hub, monkeypatch) -> None:
    import sys

    from hvcu_tasks.core.schema import Problem

    said_by_0 = Problem(f"{REPO}@v9", "-", "revision", f"the dataset '{REPO}' has no revision 'v9'")
    monkeypatch.setitem(sys.modules, "torch.distributed", FakeGroup(1, (None, [said_by_0])))
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(DataError) as err:
        load_source("hub", "implication")
    assert err.value.problems == [said_by_0] and stand_in_hub.requests == []


def test_ranks_without_a_process_group_are_warned_once(stand_in_hub, monkeypatch, caplog) -> None:
    publish(stand_in_hub, parquet="unknown")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    caplog.set_level(logging.WARNING, "hvcu_tasks")
    load_source("hub", "implication")
    load_source("hub:Chime316/HVCU-Bench@main", "implication")
    warned = [r.getMessage() for r in caplog.records if "no torch.distributed process group" in r.getMessage()]
    assert len(warned) == 1 and "HVCU_BENCH_REVISION=<commit>" in warned[0]


# ---------------------------------------------------------------- review: warm cache, the stand-in's hub behaviour


def test_a_repository_without_a_card_loads_offline_from_a_warm_cache(stand_in_hub) -> None:
    files = published_files(ITEMS, IMAGES, parquet=None)
    del files["README.md"]
    commit = stand_in_hub.repo(REPO).commit(files)
    online = identity("aesthetic")
    stand_in_hub.clear()
    stand_in_hub.go_offline()
    from hvcu_tasks.data import hub

    hub.reset()  # a new process
    offline = identity("aesthetic")
    assert stand_in_hub.requests == []
    assert (offline["revision"], offline["fingerprint"]) == (commit, online["fingerprint"])


def test_a_slash_revision_name_is_one_revision(stand_in_hub) -> None:
    from huggingface_hub import HfApi

    files = published_files(ITEMS, IMAGES, parquet="unknown")
    del files["README.md"]  # resolved through the dataset info: /api/datasets/{repo}/revision/fix%2Fv1
    commit = stand_in_hub.repo(REPO).commit(files, "fix/v1")
    assert HfApi().dataset_info(REPO, revision="fix/v1").sha == commit
    load_source("hub:Chime316/HVCU-Bench@fix/v1", "aesthetic").raise_for_problems()
    assert any(p.endswith("/revision/fix%2Fv1") for p in stand_in_hub.paths())


def test_cdn_redirects_and_paged_listings_are_followed(stand_in_hub) -> None:
    stand_in_hub.page_size = 5
    many = {"implication": [item(f"metaphor_{i:03d}") for i in range(1, 9)]}
    images = {"implication": {r["id"]: png((30 * i, 0, 0)) for i, r in enumerate(many["implication"])}}  # distinct
    commit = stand_in_hub.repo(REPO).commit(published_files(many, images, parquet="authors"))
    assert identity("implication")["samples"] == 8
    stand_in_hub.clear()
    from hvcu_tasks.data import hub

    hub.reset()
    files = published_files(many, images, parquet="unknown")
    commit = stand_in_hub.repo(REPO).commit(files)
    assert (identity("implication")["samples"], identity("implication")["revision"]) == (8, commit)
    pages = [r for r in stand_in_hub.requests if "/tree/" in r.path and "recursive=true" in r.path.lower()]
    # 11 files and 3 folders (Image/, Image/Implication-Understanding/, assets/), 5 entries a page: 3 pages
    assert len(files) == 11 and len(pages) == 3 and "cursor=5" in pages[1].path and "cursor=10" in pages[2].path
    cdn = {r.path.split("?")[0].rsplit("/", 1)[1] for r in stand_in_hub.requests if r.host == stand_in_hub.cdn_host}
    assert cdn == {f"metaphor_{i:03d}.png" for i in range(1, 9)} | {"Implication_Understanding-00000-of-00001.parquet"}
    assert stand_in_hub.foreign() == []


def test_validate_hub_follows_the_revision_env(stand_in_hub, monkeypatch, capsys) -> None:
    v1 = publish(stand_in_hub, "v1.0", parquet="unknown")
    publish(stand_in_hub, parquet="unknown", items={**ITEMS, "affective": [item("joy_002", "ABD")]})
    monkeypatch.setenv("HVCU_BENCH_REVISION", "v1.0")
    assert main(["data", "validate", "hub", "--no-decode"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"(hub {REPO}@{v1} from the authors' JSON + image folders)") == 3
