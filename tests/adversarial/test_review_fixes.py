"""Faults a review of issue 11 found: offline flags, unsafe file names, `inside`, null counts, chains, pipes.

Each test pins one behaviour: `HF_DATASETS_OFFLINE` is honoured like `HF_HUB_OFFLINE`; names that Windows or
macOS cannot store safely are refused; ids that collide on a case-insensitive or normalising file system are
duplicates; `inside` never hands out the folder itself; a null or NaN count in a results file is an error; a
samples line whose levels do not line up is an error naming file:line; only a closed stdout is a quiet exit.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from conftest import item
from PIL import Image

from hvcu_tasks.cli import main
from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.core.names import UnsafeNameError, check_name
from hvcu_tasks.core.schema import DataError
from hvcu_tasks.data import hub as hub_module
from hvcu_tasks.data import validate as validate_module
from hvcu_tasks.data.files import inside
from hvcu_tasks.results.chains import chains_of_file
from hvcu_tasks.results.runs import ReportError, read_runs

DEAD_ENDPOINT = "http://127.0.0.1:9"  # the discard port: nothing listens, a connection is refused at once


def write_family(root: Path, family: str, items: list[dict]) -> Path:
    """Write one family as a local authors'-format copy (JSON + one PNG per id) and return the folder."""
    stem = FAMILIES[family][1]
    (root / "Image" / stem).mkdir(parents=True, exist_ok=True)
    (root / f"{stem}.json").write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    for it in items:
        Image.new("RGB", (8, 8), "red").save(root / "Image" / stem / f"{it['id']}.png")
    return root


# ---------------------------------------------------------------- 7: HF_DATASETS_OFFLINE


def serve_hub_from_cache(hub) -> None:
    """Warm the Hugging Face cache from the stand-in hub (the authors' JSON layout), then forget its requests."""
    import io

    from standins.hub import published_files

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buf, format="PNG")
    files = published_files({"implication": [item("metaphor_001")]}, {"implication": {"metaphor_001": buf.getvalue()}})
    hub.repo("Chime316/HVCU-Bench").commit(files)
    validate_module.load_family("hub", "implication")
    hub.clear()


def offline_env(monkeypatch: pytest.MonkeyPatch, **flags: str) -> None:
    """Point the hub at a dead endpoint (no proxy) and set exactly the given offline flags, in the environment only."""
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in flags.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HF_ENDPOINT", DEAD_ENDPOINT)


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_hf_datasets_offline_reads_the_cache_instead_of_probing_the_hub(monkeypatch, value: str, stand_in_hub) -> None:
    serve_hub_from_cache(stand_in_hub)
    offline_env(monkeypatch, HF_DATASETS_OFFLINE=value)
    samples = validate_module.load_family("hub", "implication")
    assert [s.id for s in samples] == ["metaphor_001"]
    assert stand_in_hub.requests == []


def test_hf_hub_offline_still_reads_the_cache(monkeypatch, stand_in_hub) -> None:
    serve_hub_from_cache(stand_in_hub)
    offline_env(monkeypatch, HF_HUB_OFFLINE="1")
    assert [s.id for s in validate_module.load_family("hub", "implication")] == ["metaphor_001"]
    assert stand_in_hub.requests == []


def test_hf_datasets_offline_zero_is_online_and_a_dead_hub_fails_fast(monkeypatch, stand_in_hub) -> None:
    serve_hub_from_cache(stand_in_hub)
    offline_env(monkeypatch, HF_DATASETS_OFFLINE="0")
    stand_in_hub.stop()  # the hub (and the proxy of the client) is gone; the cache is warm
    hub_module.reset()  # a new process
    with pytest.raises(DataError) as err:
        validate_module.load_family("hub", "implication")
    assert f"cannot reach the Hugging Face Hub at {stand_in_hub.endpoint}" in str(err.value)
    assert "HF_HUB_OFFLINE=1" in str(err.value)


@pytest.mark.slow
def test_lmms_eval_with_hf_datasets_offline_goes_to_the_cache_not_the_hub_probe(tmp_path: Path) -> None:
    preds = tmp_path / "preds.jsonl"
    preds.write_text("", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in {"HVCU_BENCH_DATA", *hub_module.OFFLINE_FLAGS}}
    env |= {"HF_DATASETS_OFFLINE": "1", "HF_ENDPOINT": DEAD_ENDPOINT, "HF_HOME": str(tmp_path / "hf")}
    cmd = [str(Path(sys.executable).with_name("lmms-eval")), "--model", "hvcu_replay"]
    cmd += ["--model_args", f"predictions={preds}", "--tasks", "hvcu_bench_impl", "--output_path", str(tmp_path / "o")]
    proc = subprocess.run(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=600, cwd=tmp_path
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert proc.returncode != 0, "\n".join(lines[-30:])
    assert "cannot reach the Hugging Face Hub" not in proc.stdout  # offline: the cache was asked, not the network
    assert "offline mode is on" in lines[-1] and "not in the Hugging Face cache" in lines[-1]
    assert "HVCU_BENCH_DATA" in lines[-1]


# ---------------------------------------------------------------- 11: check_name


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("CON", "Windows device name"),
        ("con", "Windows device name"),
        ("nul.txt", "Windows device name"),
        ("Nul.tar.gz", "Windows device name"),
        ("COM1", "Windows device name"),
        ("com9.png", "Windows device name"),
        ("LPT1", "Windows device name"),
        ("lpt3.json", "Windows device name"),
        ("PRN", "Windows device name"),
        ("aux", "Windows device name"),
        ("a<b", "'<'"),
        ("a>b", "'>'"),
        ("a|b", "'|'"),
        ("a*b", "'*'"),
        ("what?", "'?'"),
        ('say"hi"', "'\"'"),
        ("metaphor_001.", "ends with '.'"),
        ("metaphor_001 ", "whitespace"),
        ("metaphor\u202e100_", "invisible"),  # right-to-left override: shows as another name
        ("meta\u200bphor_001", "invisible"),  # zero-width space
        ("metaphor\u2066_001", "invisible"),  # left-to-right isolate
        ("\ufeffmetaphor_001", "invisible"),  # a byte-order mark copied from a file's start
    ],
)
def test_names_no_file_system_stores_safely_are_refused_with_a_reason(name: str, reason: str) -> None:
    with pytest.raises(UnsafeNameError) as err:
        check_name(name, "id")
    message = str(err.value)
    assert message.startswith(f"id {name!r} ")
    assert reason in message, message


@pytest.mark.parametrize(
    "name", ["metaphor_001", 7, "console", "con_001", "COM10", "nullable.png", "LPT", "a.b", "caf\u00e9", "joy-2"]
)
def test_ordinary_names_still_pass(name: object) -> None:
    assert check_name(name, "id") == str(name)


def write_benchmark(root: Path, impl: list[dict]) -> Path:
    """Write all three families: the given implication items, one valid item in each other family."""
    write_family(root, "aesthetic", [item("font_001")])
    write_family(root, "affective", [item("joy_001")])
    return write_family(root, "implication", impl)


def duplicate_lines(capsys, root: Path) -> list[str]:
    """Run `hvcu data validate` on a folder and return its problem lines about ids."""
    code = main(["data", "validate", str(root)])
    lines = [line for line in capsys.readouterr().out.splitlines() if ": id=" in line]
    assert code == 1, lines
    return lines


def test_ids_differing_only_by_case_are_duplicates_naming_both(capsys, tmp_path: Path) -> None:
    root = write_benchmark(tmp_path / "data", [item("A1"), item("metaphor_001"), item("a1", "BBB")])
    lines = duplicate_lines(capsys, root)
    (line,) = lines
    assert "Implication-Understanding.json" in line and "duplicate id" in line
    assert "'A1'" in line and "'a1'" in line
    with pytest.raises(DataError) as err:
        validate_module.load_family(str(root), "implication")
    assert "'A1'" in str(err.value) and "'a1'" in str(err.value)


def test_ids_differing_only_by_unicode_normalisation_are_duplicates_naming_both(capsys, tmp_path: Path) -> None:
    nfc, nfd = unicodedata.normalize("NFC", "caf\u00e9_001"), unicodedata.normalize("NFD", "caf\u00e9_001")
    assert nfc != nfd
    root = write_benchmark(tmp_path / "data", [item(nfc), item(nfd)])
    (line,) = duplicate_lines(capsys, root)
    assert "duplicate id" in line and repr(nfc) in line and repr(nfd) in line


def test_exact_duplicates_keep_their_message(capsys, tmp_path: Path) -> None:
    root = write_benchmark(tmp_path / "data", [item("metaphor_001"), item("metaphor_001", "BBB")])
    (line,) = duplicate_lines(capsys, root)
    assert "id=metaphor_001: id: duplicate id (2 items) in family 'implication'" in line


def test_the_same_id_in_two_families_is_not_a_duplicate(capsys, tmp_path: Path) -> None:
    root = write_family(tmp_path / "data", "implication", [item("x_001")])
    write_family(root, "aesthetic", [item("X_001")])
    write_family(root, "affective", [item("joy_001")])
    assert main(["data", "validate", str(root)]) == 0, capsys.readouterr().out


# ---------------------------------------------------------------- 12: inside


@pytest.mark.parametrize("parts", [("",), (".",), ("sub", ".."), ("", "")], ids=["empty", "dot", "sub-up", "empties"])
def test_inside_never_returns_the_folder_itself_as_a_target(tmp_path: Path, parts: tuple[str, ...]) -> None:
    (tmp_path / "sub").mkdir()
    with pytest.raises(UnsafeNameError) as err:
        inside(tmp_path, *parts)
    assert str(tmp_path) in str(err.value)


def test_inside_still_resolves_a_file_in_the_folder(tmp_path: Path) -> None:
    assert inside(tmp_path, "a.json") == tmp_path.resolve() / "a.json"
    assert inside(tmp_path, "forms", "ann.csv") == tmp_path.resolve() / "forms" / "ann.csv"


def test_inside_with_no_parts_is_the_folder(tmp_path: Path) -> None:
    assert inside(tmp_path) == tmp_path.resolve()


# ---------------------------------------------------------------- 15: counts in results files


def results_file(folder: Path, impl: dict, limit=None) -> Path:
    """Write an lmms-eval results file (json.dumps: NaN as the bare token) with the implication task given."""
    good = {"acc_l1_perc": 80.0, "acc_l2_bridge": 70.0, "acc_l3_conn": 60.0, "acc_full": 50.0}
    good |= {"n_chains": 5, "n_incomplete": 0, "n_failed_requests": 0, "errors_at_perc": 1}
    per_task = {
        f"hvcu_bench_{short}": {f"{k},none": v for k, v in (good | (impl if short == "impl" else {})).items()}
        for short in ("impl", "aesth", "affect")
    }
    folder.mkdir(parents=True, exist_ok=True)
    data = {"results": per_task, "config": {"model": "vllm", "model_args": "model=Qwen/X", "limit": limit}}
    path = folder / "20260101_000000_results.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("metric", ["n_incomplete", "n_chains", "n_failed_requests", "errors_at_perc"])
@pytest.mark.parametrize("value", [None, float("nan")], ids=["null", "NaN"])
def test_a_null_or_nan_count_is_an_error_naming_file_task_and_metric(tmp_path: Path, metric: str, value) -> None:
    path = results_file(tmp_path / "run", {metric: value})
    with pytest.raises(ReportError) as err:
        read_runs([tmp_path / "run"])
    message = str(err.value)
    assert str(path) in message and "hvcu_bench_impl" in message and metric in message
    assert "\n" not in message


def test_a_null_percentage_is_still_not_available(tmp_path: Path) -> None:
    results_file(tmp_path / "run", {"acc_full": None})
    (model,) = read_runs([tmp_path / "run"])
    value = model.settings["base"]["implication"].get("acc_full")
    assert isinstance(value, float) and value != value  # NaN: printed as n/a


def test_incomplete_chains_mark_the_setting_partial(tmp_path: Path) -> None:
    results_file(tmp_path / "run", {"n_incomplete": 2})
    (model,) = read_runs([tmp_path / "run"])
    assert model.partial("base")


def test_no_incomplete_chain_and_no_limit_is_not_partial(tmp_path: Path) -> None:
    results_file(tmp_path / "run", {})
    (model,) = read_runs([tmp_path / "run"])
    assert not model.partial("base")


# ---------------------------------------------------------------- 18a: chains whose levels do not line up


def outcome(sid: str, lv: int) -> dict:
    return {"sample_id": sid, "family": "implication", "aspect": "metaphor", "level": lv, "gold": "A", "pred": "A"}


def context_line(n_outcomes: int, n_questions: int, n_replies: int, n_gold: int) -> dict:
    """One context-setting samples line with the given numbers of scored levels, questions, replies and gold keys."""
    outcomes = [outcome("metaphor_001", lv) | {"correct": True} for lv in range(1, n_outcomes + 1)]
    entry = {
        "outcomes": outcomes,
        "sample_id": "metaphor_001",
        "questions": [f"question {i}" for i in range(1, n_questions + 1)],
        "replies": ["A"] * n_replies,
        "gold": ["A"] * n_gold,
    }
    return {"doc_id": 0, "filtered_resps": [["A"] * n_replies], "acc_full": entry}


def write_samples(folder: Path, task: str, lines: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"20260101_000000_samples_{task}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "counts", [(3, 2, 3, 3), (3, 3, 2, 3), (2, 3, 3, 3), (3, 3, 3, 2)], ids=["questions", "replies", "scored", "gold"]
)
def test_a_context_line_whose_levels_do_not_line_up_is_an_error_naming_file_and_line(
    tmp_path: Path, counts: tuple[int, int, int, int]
) -> None:
    good = context_line(3, 3, 3, 3)
    bad = context_line(*counts)
    path = write_samples(tmp_path / "run", "hvcu_bench_context_impl", [good, bad])
    with pytest.raises(ValueError) as err:
        chains_of_file("hvcu_bench_context_impl", path)
    assert f"{path}:2:" in str(err.value) and "metaphor_001" in str(err.value)


def test_a_base_line_with_two_scored_levels_for_one_question_is_an_error(tmp_path: Path) -> None:
    line = {
        "doc_id": 0,
        "filtered_resps": ["A"],
        "acc_full": {"outcomes": [outcome("metaphor_001", 1) | {"correct": True}] * 2, "question": "q"},
    }
    path = write_samples(tmp_path / "run", "hvcu_bench_impl", [line])
    with pytest.raises(ValueError) as err:
        chains_of_file("hvcu_bench_impl", path)
    assert f"{path}:1:" in str(err.value)


def test_hvcu_chains_reports_the_mismatch_as_one_line(tmp_path: Path, capsys) -> None:
    path = write_samples(tmp_path / "run", "hvcu_bench_context_impl", [context_line(3, 3, 2, 3)])
    code = main(["chains", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}:1:"), err


def test_a_full_context_line_still_gives_its_chain(tmp_path: Path) -> None:
    path = write_samples(tmp_path / "run", "hvcu_bench_context_impl", [context_line(3, 3, 3, 3)])
    (chain,) = chains_of_file("hvcu_bench_context_impl", path)
    assert chain["replies"] == ["A", "A", "A"] and chain["chain_correct"] is True


# ---------------------------------------------------------------- 18b: broken pipes


def test_a_broken_pipe_that_is_not_stdout_is_an_error(tmp_path: Path, capsys, monkeypatch) -> None:
    write_samples(tmp_path / "run", "hvcu_bench_context_impl", [context_line(3, 3, 3, 3)])

    def server_gone(task: str, path: Path) -> list:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")  # e.g. a socket to a model server closed under us

    monkeypatch.setattr("hvcu_tasks.results.chains.chains_of_file", server_gone)
    code = main(["chains", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code not in (0, 141)
    assert "error:" in err and "Broken pipe" in err


class ClosedPipe:
    """A stdout whose reader has gone away (`hvcu chains | head` after head exits)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        raise OSError("no file descriptor")


def test_a_closed_stdout_is_a_quiet_exit(tmp_path: Path, capsys, monkeypatch) -> None:
    write_samples(tmp_path / "run", "hvcu_bench_context_impl", [context_line(3, 3, 3, 3)])
    monkeypatch.setattr("sys.stdout", ClosedPipe())
    code = main(["chains", str(tmp_path / "run")])
    assert code == 141
    assert capsys.readouterr().err == ""
