"""The `hvcu` command line as a newcomer meets it: help on every argument, required options shown as required,
`hvcu --version`, `hvcu mcts merge` as a form of its own, quiet broken pipes, a "did you mean" for mistyped
`--set` keys, and `hvcu train config` naming `hvcu train run` only where this machine can train.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import BIN, REPO, one_line_error, run
from test_chains import run_folder
from test_report import families, write_results

from hvcu_tasks.cli import build_parser, main

EXAMPLE_RESULTS = REPO / "hvcu_tasks" / "examples" / "authors_result" / "Result"


def parsers(parser: argparse.ArgumentParser, path: str = "hvcu") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Yield every parser of the command tree with its command path: subcommands and other forms (`mcts merge`)."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from parsers(child, f"{path} {name}")
    for word, form in getattr(parser, "forms", {}).items():
        yield from parsers(form, f"{path} {word}")


def test_every_argument_and_option_of_every_command_has_help() -> None:
    missing = [
        f"{path}: {'/'.join(action.option_strings) or action.dest}"
        for path, parser in parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) and not action.help
    ]
    assert missing == []


def test_every_subcommand_has_help() -> None:
    missing = [
        f"{path} {choice.dest}"
        for path, parser in parsers(build_parser())
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for choice in action._choices_actions
        if not choice.help
    ]
    assert missing == []


REQUIRED = {  # what each command cannot run without (README's usage lines)
    "hvcu mcts": ["--images", "--out", "--model", "--base-url"],
    "hvcu direct": ["--images", "--out", "--model", "--base-url"],
    "hvcu mcts merge": ["--out"],
    "hvcu build-bench": ["--manifest", "--out", "--model", "--base-url"],
    "hvcu perturb": ["--aspect", "--out"],
    "hvcu audit export": ["--out", "--annotators"],
    "hvcu human sheets": ["--out"],
    "hvcu human score": ["--out"],
    "hvcu train prepare": ["--chains", "--out", "--composition"],
    "hvcu train config": ["--model", "--dataset", "--dataset-dir", "--out"],
}


@pytest.mark.parametrize("command", sorted(REQUIRED))
def test_options_a_command_cannot_run_without_are_required_in_its_usage(command: str) -> None:
    parser = dict(parsers(build_parser()))[command]
    required = [a.option_strings[0] for a in parser._actions if a.required and a.option_strings]
    assert required == REQUIRED[command]
    usage = parser.format_usage()
    assert all(re.search(rf"(^|\s){re.escape(option)}\s", usage) for option in required), usage


def test_every_command_is_in_the_command_groups_of_the_top_level_help(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["-h"])
    groups = capsys.readouterr().out.split("command groups")[1].split("positional arguments")[0]
    listed = {word.strip(",") for line in groups.splitlines() if line.startswith("  ") for word in line.split()[:4]}
    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert done.value.code == 0 and set(commands.choices) <= listed


def test_version_names_the_installed_hvcu_and_lmms_eval(capsys) -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', pyproject, re.M)[1]
    lmms_eval = re.search(r"^lmms_eval==(\S+)$", (REPO / "constraints.txt").read_text(), re.M)[1]
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"hvcu {version} (lmms-eval {lmms_eval})\n"


def test_no_numeric_option_of_any_command_takes_a_bare_int_or_float() -> None:
    # A bare int or float takes any number (-1 seeds numpy's "expected non-negative integer" deep in a command);
    # hvcu_tasks.argtypes' range-checked types refuse it up front, naming the option.
    bare = [
        f"{path} {'/'.join(action.option_strings) or action.dest}"
        for path, parser in parsers(build_parser())
        for action in parser._actions
        if action.type in (int, float)
    ]
    assert bare == []


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["report", "run", "--seed", "-1"], "--seed"),  # the report has no seed (exact intervals, no bootstrap)
        (["tiny-model", "out", "--seed", "-1"], "--seed"),
        (["train", "prepare", "--seed", "-1"], "--seed"),
        (["perturb", "in.png", "--seed", "-1"], "--seed"),
        (["human", "sheets", "--seed", "-1"], "--seed"),
        (["human", "sheets", "--annotators-per-level", "0"], "--annotators-per-level"),
        (["audit", "export", "bench", "--seed", "-1"], "--seed"),
        (["audit", "export", "bench", "--rounds", "0"], "--rounds"),
        (["audit", "export", "bench", "--min-annotators", "1"], "--min-annotators"),  # agreement needs two
        (["audit", "export", "bench", "--threshold", "0.5"], "--threshold"),  # a share above one half
        (["audit", "export", "bench", "--threshold", "nan"], "--threshold"),
        (["audit", "export", "bench", "--max-side", "-1"], "--max-side"),
        (["audit", "import", "a", "f.csv", "--round", "0"], "--round"),
        (["audit", "stats", "a", "--round", "-2"], "--round"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_a_bad_number_is_a_usage_error_naming_the_option(argv: list[str], option: str, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2
    assert f"argument {option}:" in err or f"unrecognized arguments: {option} " in err, err
    assert "Traceback" not in err


# --- hvcu mcts and its other form, hvcu mcts merge ------------------------------------------------------------------


def test_mcts_usage_shows_its_options_as_required_and_merge_as_another_form(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["mcts", "-h"])
    out = capsys.readouterr().out
    usage = out.split("\n\n")[0]
    assert usage.startswith("usage: hvcu mcts [-h] --images PATH --out DIR --model MODEL --base-url")
    assert "\n   or: hvcu mcts merge [-h] --out DIR SHARD [SHARD ...]" in usage
    assert "{merge}" not in out


def test_mcts_without_its_required_options_names_them_all(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["mcts", "--images", "photos"])
    err = capsys.readouterr().err
    assert done.value.code == 2
    assert "hvcu mcts: error: the following arguments are required: --out, --model, --base-url" in err


def test_mcts_merge_needs_none_of_the_synthesis_options(tmp_path: Path, capsys) -> None:
    (tmp_path / "s0").mkdir()
    code, _, err = run("mcts", "merge", str(tmp_path / "s0"), "--out", str(tmp_path / "m"), capsys=capsys)
    assert code == 2  # reached the merge itself, which refuses a folder that is no `hvcu mcts` output
    assert one_line_error(err) == f"error: {tmp_path / 's0'}: not an `hvcu mcts` output folder (no images/ in it)"


def test_mcts_merge_without_out_is_a_usage_error_of_the_merge(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["mcts", "merge", str(tmp_path)])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "hvcu mcts merge: error: the following arguments are required: --out" in err


def test_human_sheets_needs_names_or_groups_as_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["human", "sheets", "smoke", "--out", "x"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "one of the arguments --names --group is required" in err


# --- names that do not explain themselves --------------------------------------------------------------------------


def command_help(name: str) -> str:
    """Return the one-line help `hvcu -h` shows for a command."""
    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return next(c.help for c in commands._choices_actions if c.dest == name)


def test_direct_says_it_is_the_baseline_of_mcts_synthesis() -> None:
    text = command_help("direct")
    assert "baseline for MCTS synthesis" in text and "no search" in text


def test_score_says_it_scores_the_authors_files_and_points_to_report_and_human_score() -> None:
    text = command_help("score")
    assert "authors' own result files" in text and "`report`" in text and "`human score`" in text


# --- a closed stdout ------------------------------------------------------------------------------------------------


def closed_reader(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run `hvcu ARGV` with stdout a pipe whose reading end is closed already: every write to it fails."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [str(BIN / "hvcu"), *argv], stdout=write, stderr=subprocess.PIPE, text=True, cwd=cwd, timeout=120
        )
    finally:
        os.close(write)


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A folder with both settings' lmms-eval results (for `hvcu report`) and samples files (for `hvcu chains`)."""
    write_results(tmp_path / "run" / "base", families("hvcu_bench"))
    write_results(tmp_path / "run" / "context", families("hvcu_bench_context"), "inner=openai,model=Qwen/X")
    run_folder(tmp_path / "chains")
    return tmp_path


@pytest.mark.parametrize(
    "argv",
    [
        ["score", str(EXAMPLE_RESULTS)],
        ["score", str(EXAMPLE_RESULTS), "--format", "json"],
        ["chains", "chains/run"],
        ["report", "run"],
        ["--version"],
        ["--help"],
        ["mock", "serve", "-h"],
        ["report", "-h"],
    ],
    ids=["score-table", "score-json", "chains", "report", "version", "help", "mock-serve-help", "report-help"],
)
def test_a_closed_stdout_ends_the_command_quietly(argv: list[str], runs: Path) -> None:
    done = closed_reader(*argv, cwd=runs)
    assert (done.returncode, done.stderr) == (141, "")  # 128 + SIGPIPE, as a shell reports it; nothing on stderr


def test_train_config_with_a_closed_stdout_still_writes_the_configs(tmp_path: Path) -> None:
    data = dataset_dir(tmp_path)
    argv = ["train", "config", "--model", "qwen3_vl_4b", "--dataset", "d", "--dataset-dir", str(data), "--out", "o"]
    done = closed_reader(*argv, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (141, "")
    assert (tmp_path / "o" / "train.yaml").is_file() and (tmp_path / "o" / "export.yaml").is_file()


def test_piped_into_head_the_first_line_comes_and_nothing_else_is_said() -> None:
    done = subprocess.run(
        ["bash", "-c", f"'{BIN / 'hvcu'}' score '{EXAMPLE_RESULTS}' --format json | head -1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "[\n", "")


# --- hvcu train config ----------------------------------------------------------------------------------------------


def dataset_dir(tmp_path: Path) -> Path:
    """A prepared dataset folder with one (empty) dataset named `d`."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "d.json").write_text("[]")
    (folder / "dataset_info.json").write_text(json.dumps({"d": {"file_name": "d.json", "formatting": "sharegpt"}}))
    return folder


def train_config(tmp_path: Path, capsys, *extra: str) -> tuple[int, str, str]:
    """Run `hvcu train config` for qwen3_vl_4b on the dataset `d` into tmp_path/out."""
    data = str(dataset_dir(tmp_path))
    out = str(tmp_path / "out")
    argv = ["train", "config", "--model", "qwen3_vl_4b", "--dataset", "d", "--dataset-dir", data, "--out", out]
    return run(*argv, *extra, capsys=capsys)


def test_train_config_offers_train_run_on_a_machine_with_a_gpu(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("training.run.machine_has_gpu", lambda: True)
    code, out, _ = train_config(tmp_path, capsys)
    run_line = f"hvcu train run {tmp_path / 'out' / 'train.yaml'} --export {tmp_path / 'out' / 'export.yaml'}"
    assert code == 0 and out.splitlines()[-1] == f"or, on this machine: {run_line}"


def test_train_config_does_not_offer_train_run_on_a_machine_without_a_gpu(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("training.run.machine_has_gpu", lambda: False)
    code, out, _ = train_config(tmp_path, capsys)
    assert code == 0 and "on this machine:" not in out
    assert out.splitlines()[-1].startswith("this machine shows no GPU: run these on the training machine")


def test_a_cpu_config_offers_train_run_on_a_machine_without_a_gpu(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("training.run.machine_has_gpu", lambda: False)
    code, out, _ = train_config(tmp_path, capsys, "--cpu")
    assert code == 0 and out.splitlines()[-1].startswith("or, on this machine: hvcu train run ")


def fresh_process_with_devices(monkeypatch, tmp_path: Path, *nodes: str) -> None:
    """Pose as a fresh `hvcu` process (torch not loaded) on a machine whose /dev holds `nodes`."""
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    dev = tmp_path / "dev"
    dev.mkdir()
    for node in nodes:
        (dev / node).touch()
    monkeypatch.setattr("training.run.DEV_DIR", dev)


@pytest.mark.parametrize("value", ["", "-1", "NoDevFiles", "none", "gpu0", " ", "-1,0", "NoDevFiles,0"])
def test_no_gpu_is_seen_when_cuda_visible_devices_names_no_device(value: str, tmp_path: Path, monkeypatch) -> None:
    from training.run import machine_has_gpu

    fresh_process_with_devices(monkeypatch, tmp_path, "nvidia0", "nvidiactl")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    assert machine_has_gpu() is False


@pytest.mark.parametrize(
    "value", [None, "0", "1,0", "0, 1", "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", "MIG-GPU-8932f937/1/0"]
)
def test_a_gpu_is_seen_when_cuda_visible_devices_names_devices(value, tmp_path: Path, monkeypatch) -> None:
    from training.run import machine_has_gpu

    fresh_process_with_devices(monkeypatch, tmp_path, "nvidia0", "nvidiactl")
    if value is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    assert machine_has_gpu() is True


def test_no_gpu_is_seen_without_a_numbered_nvidia_device_node(tmp_path: Path, monkeypatch) -> None:
    from training.run import machine_has_gpu

    # A CPU-only container on a GPU host: driver files, control nodes, no /dev/nvidiaN.
    fresh_process_with_devices(monkeypatch, tmp_path, "nvidiactl", "nvidia-uvm", "nvidia-caps")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert machine_has_gpu() is False


def test_a_rocm_device_counts_as_a_gpu(tmp_path: Path, monkeypatch) -> None:
    from training.run import machine_has_gpu

    fresh_process_with_devices(monkeypatch, tmp_path, "kfd")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert machine_has_gpu() is True


@pytest.mark.parametrize("available", [True, False])
def test_a_loaded_torch_answers_whether_there_is_a_gpu(available: bool, monkeypatch) -> None:
    from training.run import machine_has_gpu

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: available))
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert machine_has_gpu() is available


def test_a_mistyped_set_key_gets_the_closest_argument_in_one_line(tmp_path: Path, capsys) -> None:
    code, _, err = train_config(tmp_path, capsys, "--set", "lora_rnak=8")
    assert code == 2
    expected = "error: --set: unknown LLaMA-Factory argument(s) ['lora_rnak']; did you mean lora_rank?"
    assert one_line_error(err) == expected


def test_each_mistyped_set_key_gets_its_own_suggestion(tmp_path: Path, capsys) -> None:
    code, _, err = train_config(tmp_path, capsys, "--set", "lora_rnak=8", "--set", "learnig_rate=1e-4")
    assert code == 2
    assert one_line_error(err) == (
        "error: --set: unknown LLaMA-Factory argument(s) ['learnig_rate', 'lora_rnak']; "
        "did you mean learning_rate (for learnig_rate), lora_rank (for lora_rnak)?"
    )


def test_a_set_key_like_no_argument_gets_no_suggestion(tmp_path: Path, capsys) -> None:
    code, _, err = train_config(tmp_path, capsys, "--set", "zqxj=1")
    assert code == 2 and one_line_error(err) == "error: --set: unknown LLaMA-Factory argument(s) ['zqxj']"


def test_llamafactory_arguments_are_read_once_then_from_the_cache(tmp_path: Path, monkeypatch) -> None:
    import training.render as render

    monkeypatch.setenv("HVCU_CACHE_DIR", str(tmp_path / "cache"))
    render.known_keys.cache_clear()
    try:
        first = render.known_keys()

        def no_import() -> frozenset[str]:
            raise AssertionError("LLaMA-Factory imported again")

        monkeypatch.setattr(render, "_import_keys", no_import)
        render.known_keys.cache_clear()
        assert render.known_keys() == first and {"lora_rank", "learning_rate", "max_steps"} <= first
    finally:
        render.known_keys.cache_clear()


def test_a_stale_cached_argument_list_never_rejects_a_real_argument(tmp_path: Path, capsys, monkeypatch) -> None:
    import training.render as render

    monkeypatch.setenv("HVCU_CACHE_DIR", str(tmp_path / "cache"))
    stale = tmp_path / "cache" / render.KEYS_FOLDER / f"{render.keys_tag()}.json"
    stale.parent.mkdir(parents=True)
    stale.write_text(json.dumps(["learning_rate", "max_steps"]))  # remembered before lora_rank existed
    render.known_keys.cache_clear()
    try:
        code, _out, err = train_config(tmp_path, capsys, "--set", "lora_rank=8")
        assert code == 0, err
        assert "lora_rank: 8" in (tmp_path / "out" / "train.yaml").read_text()
        assert "lora_rank" in json.loads(stale.read_text())  # the list is read again from LLaMA-Factory and kept
    finally:
        render.known_keys.cache_clear()


def test_an_unknown_argument_is_refused_after_the_cached_list_is_read_again(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    import training.render as render

    monkeypatch.setenv("HVCU_CACHE_DIR", str(tmp_path / "cache"))
    stale = tmp_path / "cache" / render.KEYS_FOLDER / f"{render.keys_tag()}.json"
    stale.parent.mkdir(parents=True)
    stale.write_text(json.dumps(["learning_rate"]))
    render.known_keys.cache_clear()
    try:
        code, _out, err = train_config(tmp_path, capsys, "--set", "lora_rnak=8")
        assert code == 2 and one_line_error(err).endswith("['lora_rnak']; did you mean lora_rank?")
    finally:
        render.known_keys.cache_clear()
