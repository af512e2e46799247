"""The README's offline recipes (section "Offline recipes (mock endpoint)") run literally and do what they promise.

Each block marked `<!-- recipe: NAME [slow] -->` is run as it stands with `bash -e`, in a temporary folder laid
out as the README assumes (a set-up clone: `.venv`, `hvcu_tasks/`, `Makefile`), `.venv/bin` first on PATH. A
recipe that leaves a process behind (the mock started with `&`) is cleaned up with its whole process group.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

README = REPO / "README.md"
RECIPE = re.compile(r"<!-- recipe: ([\w-]+)( slow)? -->\n```bash\n(.*?)```", re.S)
PORT = 8765  # the port the recipes name
NEEDS = {"train-loop": ["synthesis"], "report": ["evaluate"]}


def recipes() -> dict[str, str]:
    """Return the README's recipe blocks by name."""
    return {m.group(1): m.group(3) for m in RECIPE.finditer(README.read_text(encoding="utf-8"))}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out as a set-up clone: the venv and package data linked, the Makefile and its inputs copied."""
    root = tmp_path_factory.mktemp("clone")
    for name in (".venv", "hvcu_tasks"):
        (root / name).symlink_to(REPO / name)
    installed = (REPO / ".venv" / ".installed").stat().st_mtime
    for name in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copyfile(REPO / name, root / name)
        os.utime(root / name, (installed - 60, installed - 60))  # setup is done: make must not reinstall
    return root


DONE: dict[str, subprocess.CompletedProcess] = {}


def run_recipe(name: str, root: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run a recipe (after the ones it needs) once per module; fail with its output when it fails."""
    if name in DONE:
        return DONE[name]
    for before in NEEDS.get(name, []):
        run_recipe(before, root, timeout)
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", PORT)) != 0, (
            f"port {PORT} is in use: the README recipes serve the mock there"
        )
    script = root / f"recipe-{name}.sh"
    script.write_text(recipes()[name], encoding="utf-8")
    env = {**os.environ, "PATH": f"{root / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.Popen(
        ["bash", "-e", str(script)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything the block left running (a mock it did not stop)
        except ProcessLookupError:
            pass
        proc.wait()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out)
    assert done.returncode == 0, f"recipe {name} failed ({done.returncode}):\n{out[-6000:]}"
    DONE[name] = done
    return done


def lines(path: Path) -> list[str]:
    """Return a file's non-empty lines."""
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def results(folder: Path) -> dict[str, dict]:
    """Return lmms-eval's results by task from every results file below folder."""
    found: dict[str, dict] = {}
    for path in sorted(folder.rglob("*_results.json")):  # rglob, not glob: the model folder may be hidden (.tiny__q3)
        found.update(json.loads(path.read_text())["results"])
    return found


def test_the_readme_has_the_five_recipes_in_order() -> None:
    assert list(recipes()) == ["synthesis", "train-loop", "build-bench", "evaluate", "report"]


def test_only_the_training_loop_is_marked_slow() -> None:
    slow = [m.group(1) for m in RECIPE.finditer(README.read_text(encoding="utf-8")) if m.group(2)]
    assert slow == ["train-loop"]


@pytest.mark.slow
def test_synthesis_recipe_writes_chains_and_training_data(workdir: Path) -> None:
    done = run_recipe("synthesis", workdir)
    assert len(lines(workdir / "runs" / "mcts" / "chains.jsonl")) == 150
    assert len(lines(workdir / "runs" / "direct" / "chains.jsonl")) == 15
    data = workdir / "runs" / "train-data"
    assert len(json.loads((data / "hvcu_mcts_full_data.json").read_text())) == 150
    assert set(json.loads((data / "dataset_info.json").read_text())) == {"hvcu_mcts_full_data", "hvcu_mcts_l3_only"}
    assert "mock: stopped" in done.stdout  # the block's `kill` stopped the mock


@pytest.mark.slow
def test_build_bench_recipe_ends_with_an_audited_benchmark_and_human_sheets(workdir: Path) -> None:
    run_recipe("build-bench", workdir)
    for stem in ("Implication-Understanding", "Aesthetic-Appreciation", "Affective-Reasoning"):
        assert len(json.loads((workdir / "bench" / f"{stem}.json").read_text())) == 2
        assert len(json.loads((workdir / "audit" / "final" / f"{stem}.json").read_text())) == 2
    assert len(list((workdir / "sheets" / "sheets").iterdir())) == 18
    assert (workdir / "sheets" / "assignment.json").is_file()


@pytest.mark.slow
def test_evaluate_recipe_gives_the_scores_the_readme_states(workdir: Path) -> None:
    run_recipe("evaluate", workdir)
    got = results(workdir / "runs" / "mock-eval")
    assert got["hvcu_bench_sample"]["acc_full,none"] == 13.33
    assert got["hvcu_bench_context_sample"]["acc_full,none"] == 26.11


@pytest.mark.slow
def test_report_recipe_prints_the_mock_row_and_writes_the_page(workdir: Path) -> None:
    done = run_recipe("report", workdir)
    assert "| mock" in done.stdout
    assert (workdir / "runs" / "mock-report" / "index.html").is_file()


@pytest.mark.slow
def test_train_loop_recipe_writes_the_comparison(workdir: Path) -> None:
    run_recipe("train-loop", workdir, timeout=1800)
    loop = workdir / "runs" / "train-loop"
    assert (loop / "train" / "merged" / "config.json").is_file()
    assert results(loop / "eval" / "base")["hvcu_bench_sample"]
    assert results(loop / "eval" / "tuned")["hvcu_bench_context_sample"]
    assert (loop / "report" / "compare_base.md").is_file()
    assert (loop / "report" / "compare_context.md").is_file()
