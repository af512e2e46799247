"""The end-to-end smoke against the lowest and the highest supported lmms-eval release (pyproject's range).

Only the lmms-eval package is swapped: `pip install --no-deps --target <cache>/lmms-eval-V lmms-eval==V` (from
PyPI, once; kept in pytest's cache folder) and `python -m lmms_eval` with that folder first on PYTHONPATH, so
everything else is this environment. The smoke is the base and the context setting of the smoke sample through
the real CLI (the replay model behind the hvcu_context wrapper); the numbers must be the hand-computed ones of
tests/test_harness_scores.py, and `hvcu chains` must read the run's sample logs.

HVCU_LMMS_VERSIONS="0.7.3 0.8.0" runs the same checks on other releases (to widen the range: see docs/lmms-eval.md).
Verdicts for the releases before 0.7.3 are in docs/lmms-eval.md ("Supported lmms-eval releases").
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from test_harness_scores import EXPECTED, OVERALL, OVERALL_OFFICIAL, write_mix_predictions

from hvcu_tasks.cli import main
from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.lmms import plugin
from hvcu_tasks.lmms.plugin import TESTED_LMMS_EVAL, IncompatibleLmmsEval, untested_release, version_problem

VERSIONS = os.environ.get("HVCU_LMMS_VERSIONS", "").split() or sorted({TESTED_LMMS_EVAL[0], TESTED_LMMS_EVAL[-1]})


def install(version: str, cache: Path) -> Path:
    """Return a folder holding only lmms-eval `version` (installed from PyPI without dependencies, once)."""
    folder = cache / f"lmms-eval-{version}"
    if (folder / f"lmms_eval-{version}.dist-info").is_dir():
        return folder
    staging = cache / f".lmms-eval-{version}.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile", "--target", str(staging)]
    proc = subprocess.run([*cmd, f"lmms-eval=={version}"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"pip could not install lmms-eval=={version}:\n{proc.stderr[-2000:]}"
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    return folder


@pytest.fixture(scope="module", params=VERSIONS)
def release(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    stored = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    cache = stored.mkdir("lmms-eval-releases") if stored else tmp_path_factory.mktemp("rel")
    return request.param, install(request.param, Path(cache))


def with_release(folder: Path) -> dict[str, str]:
    """Return this environment with the release folder first on PYTHONPATH."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}


@pytest.mark.slow
def test_the_swapped_release_is_the_one_imported(release: tuple[str, Path]) -> None:
    version, folder = release
    probe = "import importlib.metadata as m, lmms_eval; print(m.version('lmms_eval')); print(lmms_eval.__file__)"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=with_release(folder))
    found, where = proc.stdout.split()
    assert found == version and Path(where).is_relative_to(folder)


@pytest.mark.slow
def test_both_settings_give_the_hand_computed_numbers(release: tuple[str, Path], tmp_path: Path) -> None:
    version, folder = release
    if version == plugin.installed_lmms_eval():
        pytest.skip(
            f"lmms-eval {version} is the installed release: tests/test_e2e.py::"
            "test_replay_of_a_hand_chosen_mix_gives_the_hand_computed_numbers_in_both_settings runs this mix through it"
        )
    predictions = write_mix_predictions(tmp_path / "mix.jsonl")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "hvcu_context"]
    cmd += ["--model_args", f"inner=hvcu_replay,predictions={predictions}"]
    cmd += ["--tasks", "hvcu_bench_sample,hvcu_bench_context_sample", "--output_path", str(out), "--log_samples"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path, env=with_release(folder))
    found = sorted(out.rglob("*_results.json"))
    assert found, f"no results (rc={proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    results = json.loads(found[0].read_text())["results"]
    for group in ("hvcu_bench_sample", "hvcu_bench_context_sample"):
        assert results[group]["acc_full,none"] == OVERALL, group
        assert results[group]["acc_full_official,none"] == OVERALL_OFFICIAL, group
    for family, (_split, _stem, short) in FAMILIES.items():
        for task in (f"hvcu_bench_sample_{short}", f"hvcu_bench_context_sample_{short}"):
            for metric, value in EXPECTED[family].items():
                assert results[task][f"{metric},none"] == pytest.approx(value), (task, metric)
    assert main(["chains", str(out), "--out", str(tmp_path / "chains.jsonl")]) == 0
    chains = [json.loads(line) for line in (tmp_path / "chains.jsonl").read_text().splitlines()]
    assert sorted(c["setting"] for c in chains) == ["base"] * 15 + ["context"] * 15


@pytest.mark.parametrize("installed", ["0.7.2", "0.7", "0.6.1", "0.5.0"])
def test_an_older_release_is_refused_naming_the_supported_range(installed: str) -> None:
    problem = version_problem(installed)
    assert problem is not None
    assert f"lmms-eval {installed} is older" in problem and "lmms-eval >=0.7.3" in problem


@pytest.mark.parametrize("installed", ["0.7.3", "0.7.4", "0.8.0", "0.7.4.dev0", "1.0"])
def test_the_lowest_and_newer_releases_and_git_checkouts_pass(installed: str) -> None:
    assert version_problem(installed) is None


@pytest.mark.parametrize("installed", ["0.7.4", "0.8.0", "0.7.4.dev0", "1.0"])
def test_a_release_newer_than_the_tested_one_is_named_with_the_tested_release(installed: str) -> None:
    note = untested_release(installed)
    assert note is not None
    assert note.startswith(
        f"lmms-eval {installed} is newer than the newest release hvcu-toolkit was tested with (0.7.3)"
    )
    assert "pip install 'lmms-eval==0.7.3'" in note and "report it as an hvcu-toolkit issue" in note


@pytest.mark.parametrize("installed", ["0.7.3", "0.7.2", "unknown"])
def test_the_tested_an_older_or_an_unreadable_release_gets_no_untested_warning(installed: str) -> None:
    assert untested_release(installed) is None


def entry_point_records(monkeypatch, caplog, installed: str, loads: int) -> list:
    """Load the entry point `loads` times with lmms-eval `installed`; return the hvcu_tasks log records."""
    monkeypatch.setattr(plugin, "installed_lmms_eval", lambda: installed)
    monkeypatch.setattr(plugin, "_warned", set())
    with caplog.at_level("WARNING", logger="hvcu_tasks"):
        for _ in range(loads):
            plugin.manifests()
    return [r for r in caplog.records if r.name == "hvcu_tasks"]


def test_a_newer_release_is_one_warning_not_an_error(monkeypatch, caplog) -> None:
    records = entry_point_records(monkeypatch, caplog, "0.9.0", loads=2)
    assert [(r.levelname, r.getMessage().split(";")[0]) for r in records] == [
        ("WARNING", "lmms-eval 0.9.0 is newer than the newest release hvcu-toolkit was tested with (0.7.3)")
    ]


def test_the_tested_release_loads_without_a_warning(monkeypatch, caplog) -> None:
    assert entry_point_records(monkeypatch, caplog, "0.7.3", loads=1) == []


def test_a_changed_lmms_eval_internal_names_the_supported_range_and_the_installed_release() -> None:
    message = str(IncompatibleLmmsEval("lmms_eval X no longer matches Y"))
    assert message.startswith("lmms_eval X no longer matches Y; hvcu-toolkit supports lmms-eval >=0.7.3")
    assert "installed: 0.7.3" in message  # the release in this environment (constraints.txt)


def test_pyproject_requires_the_range_and_constraints_pin_the_highest_tested_release() -> None:
    assert re.findall(r'"lmms-eval([^"]*)"', (REPO / "pyproject.toml").read_text()) == [">=0.7.3"]
    pins = re.findall(r"^lmms_eval==(\S+)$", (REPO / "constraints.txt").read_text(), re.M)
    assert pins == ["0.7.3"] == [TESTED_LMMS_EVAL[-1]]
