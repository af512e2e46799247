"""What the published site (`hvcu report RUNS --format html --out SITE`) says about the runs, and what it never says.

Nothing of the publisher's machine: paths are shown from the runs folder given to `hvcu report` (a path outside it
by its base name); no secret of a URL (user, password, a key in its query); and each setting's failed requests.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from conftest import run_lmms_eval, smoke_predictions
from test_chain_browser import hand_run, local_run, picture
from test_run_record import results_json, with_identity

from hvcu_tasks.cli import main

STAMP = "20261202_093830"


def build_site(runs: Path, site: Path) -> Path:
    """Run `hvcu report RUNS --format html --out SITE` and return the site folder."""
    assert main(["report", str(runs), "--format", "html", "--out", str(site)]) == 0
    return site


def site_files(site: Path) -> dict[Path, str]:
    """Every file of the site with its text (bytes that are not UTF-8 replaced)."""
    return {p: p.read_bytes().decode("utf-8", "replace") for p in sorted(site.rglob("*")) if p.is_file()}


def holding(site: Path, text: str) -> list[str]:
    """The site's files that hold `text` (also HTML-escaped or JSON-escaped), relative to the site."""
    forms = {text, html.escape(text), json.dumps(text)[1:-1]}
    return [p.relative_to(site).as_posix() for p, body in site_files(site).items() if any(f in body for f in forms)]


def write_results(runs: Path, data: dict, model: str = "model-a") -> Path:
    """Write a results file into a model's folder under the runs folder, as lmms-eval lays them out."""
    folder = runs / model
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{STAMP}_results.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# ---------------------------------------------------------------- nothing of the machine


def machine_paths_run(root: Path) -> Path:
    """A runs folder under `root` whose files name absolute paths in and outside it: the output path, the replies
    file, a local data copy, a checkpoint in the model identity, and a samples log of the chain browser."""
    runs, _samples = hand_run(root, picture(root / "media" / "color_001.png"))
    data = results_json(f"model=m,predictions={root / 'replies.jsonl'}")
    data["config"]["resolved_cli_args"]["output_path"] = str(runs)
    data["configs"]["hvcu_bench_context_aesth"]["metadata"]["hvcu_data_identity"] |= {
        "kind": "local",
        "location": str(root / "data"),
        "revision": None,
    }
    write_results(runs, with_identity(data, {"backend": "qwen2_5_vl", "args": {"pretrained": str(root / "ckpt")}}))
    return runs


def test_no_file_of_the_site_holds_the_absolute_path_of_the_runs_folder(tmp_path: Path) -> None:
    site = build_site(machine_paths_run(tmp_path), tmp_path / "site")
    assert holding(site, str(tmp_path)) == []


def test_the_model_page_names_the_results_file_from_the_runs_folder(tmp_path: Path) -> None:
    site = build_site(machine_paths_run(tmp_path), tmp_path / "site")
    assert f"context setting: run/model-a/{STAMP}_results.json" in (site / "models" / "m.html").read_text()


def test_the_chain_browser_names_the_samples_file_from_the_runs_folder(tmp_path: Path) -> None:
    site = build_site(machine_paths_run(tmp_path), tmp_path / "site")
    assert '"source":"run/m/20260101_samples_hvcu_bench_aesth.jsonl:1,2,3"' in (site / "chains.html").read_text()


@pytest.mark.slow
def test_no_file_of_a_site_of_real_runs_holds_the_absolute_path_of_their_folder(tmp_path: Path) -> None:
    _data, runs = local_run(tmp_path)  # local data and replies outside the runs folder
    predictions = smoke_predictions(tmp_path / "smoke.jsonl")
    args = ["--model", "hvcu_replay", "--model_args", f"model=m2,predictions={predictions}", "--limit", "2"]
    run_lmms_eval([*args, "--tasks", "hvcu_bench_sample", "--log_samples"], runs / "smoke")
    site = build_site(runs, tmp_path / "site")
    assert holding(site, str(tmp_path)) == []


# ---------------------------------------------------------------- no secret of a URL


def test_no_file_of_the_site_holds_a_key_or_password_of_a_url(tmp_path: Path) -> None:
    url = "http://user:hunter2@127.0.0.1:8000/v1?api-key=SECRET"
    identity = {"backend": "openai", "args": {"base_url": url}, "resolved": {"base_url": url}, "endpoint": url}
    write_results(tmp_path / "runs", with_identity(results_json(f"model=m,base_url={url}"), identity))
    site = build_site(tmp_path / "runs", tmp_path / "site")
    assert (holding(site, "SECRET"), holding(site, "hunter2")) == ([], [])


# ---------------------------------------------------------------- failed requests


def family_results(setting: str, n_chains: int, n_incomplete: int, n_failed: int | None) -> dict[str, dict]:
    """One setting's three family tasks as a results file holds them (n_failed None: a file without the count)."""
    prefix = "hvcu_bench_context" if setting == "context" else "hvcu_bench"
    counts = {"n_chains,none": n_chains, "n_incomplete,none": n_incomplete}
    if n_failed is not None:
        counts["n_failed_requests,none"] = n_failed
    return {
        f"{prefix}_{short}": {"alias": f"{prefix}_{short}", "acc_full,none": 0.0, **counts}
        for short in ("impl", "aesth", "affect")
    }


def failed_line(tmp_path: Path, *settings: dict[str, dict]) -> str:
    """The model page's line on failed requests, for a results file of these settings' family tasks."""
    results = {task: values for setting in settings for task, values in setting.items()}
    write_results(tmp_path / "runs", {"results": results, "config": {"model": "hvcu_replay", "model_args": "model=m"}})
    page = (build_site(tmp_path / "runs", tmp_path / "site") / "models" / "m.html").read_text()
    (line,) = [html.unescape(n) for n in re.findall(r"<li>(Failed requests: .*?)</li>", page)]
    return line


def test_the_model_page_shows_each_settings_failed_requests_and_their_share(tmp_path: Path) -> None:
    line = failed_line(tmp_path, family_results("base", 350, 0, 1050), family_results("context", 350, 0, 0))
    assert line.startswith("Failed requests: base 3,150 of 3,150 (100%) · context 0 of 3,150 (0%) (")


def test_a_share_of_failed_requests_is_shown_to_one_decimal(tmp_path: Path) -> None:
    assert "base 21 of 3,150 (0.7%)" in failed_line(tmp_path, family_results("base", 350, 0, 7))


def test_a_share_under_a_tenth_of_a_percent_is_not_shown_as_none(tmp_path: Path) -> None:
    assert "base 3 of 3,150 (<0.1%)" in failed_line(tmp_path, family_results("base", 350, 0, 1))


def test_a_run_with_incomplete_chains_shows_at_most_how_many_requests_it_asked(tmp_path: Path) -> None:
    assert "base 3 of at most 18 (at least 16.7%)" in failed_line(tmp_path, family_results("base", 1, 1, 1))


def test_a_file_without_the_count_of_failed_requests_says_not_recorded(tmp_path: Path) -> None:
    assert "Failed requests: base not recorded (" in failed_line(tmp_path, family_results("base", 350, 0, None))
