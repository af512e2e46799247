"""The model page's "How this run was made" section: one block per results file, escaped, "not recorded" gaps."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from importlib.metadata import version
from pathlib import Path

import pytest
from conftest import run_lmms_eval, smoke_predictions
from test_run_record import FILE, FINGERPRINT, older_json, results_json, with_identity

from hvcu_tasks.cli import main
from hvcu_tasks.data.provenance import toolkit_version
from hvcu_tasks.report.html import ModelPage, render_model_page
from hvcu_tasks.results.run_record import run_record


def page_of(*records_json: dict) -> str:
    """A model page holding the records of the given results files."""
    records = [run_record(data, FILE) for data in records_json]
    return render_model_page(ModelPage("gpt-4o", "gpt-4o.html", records=records))


def section(page: str) -> str:
    """The page's how-it-was-made section."""
    found = re.search(r"<section id='s-how-made'>.*?</section>", page, re.S)
    assert found, "no 'How this run was made' section"
    return found.group()


def text_of(fragment: str) -> str:
    """The visible text of an HTML fragment, whitespace collapsed."""
    parts: list[str] = []
    parser = HTMLParser()
    parser.handle_data = parts.append  # type: ignore[method-assign]
    parser.feed(fragment)
    return " ".join(" ".join(parts).split())


def test_the_section_names_the_setting_and_the_results_file() -> None:
    text = text_of(section(page_of(results_json())))
    assert "How this run was made" in text and f"context setting: {FILE}" in text


def test_the_section_shows_the_model_and_its_arguments() -> None:
    text = text_of(section(page_of(results_json())))
    assert "lmms-eval --model hvcu_context" in text and "model_name gpt-4o" in text
    assert "Model arguments model=gpt-4o,api_key=[REDACTED],num_concurrent=8" in text


def test_the_section_shows_the_command_line() -> None:
    text = text_of(section(page_of(results_json())))
    assert "--tasks hvcu_bench_context --batch_size 1 --log_samples --output_path /runs/ctx" in text


def test_the_section_shows_the_versions() -> None:
    text = text_of(section(page_of(results_json())))
    assert "lmms-eval 0.7.3 (recorded by lmms-eval: main@fb4f2110, git fb4f211) · HVCU toolkit 0.1.0" in text


def test_a_file_without_the_installed_release_shows_lmms_evals_own_string_labelled() -> None:
    data = results_json()
    for config in data["configs"].values():
        del config["metadata"]["hvcu_lmms_eval_version"]
    text = text_of(section(page_of(data)))
    assert "lmms-eval release not recorded (recorded by lmms-eval: main@fb4f2110, git fb4f211)" in text


def test_the_section_names_the_results_file_from_the_runs_folder() -> None:
    records = [run_record(results_json(), FILE, (FILE.parents[1],))]
    text = text_of(section(render_model_page(ModelPage("gpt-4o", "gpt-4o.html", records=records))))
    assert "context setting: ctx/model-a/20261202_093830_results.json" in text


def test_the_section_shows_each_familys_fingerprint_and_source() -> None:
    text = text_of(section(page_of(results_json())))
    assert f"aesthetic hvcu_bench_context_aesth {FINGERPRINT} hub Chime316/HVCU-Bench@0123456789ab" in text


def test_an_older_file_says_not_recorded() -> None:
    text = text_of(section(page_of(older_json())))
    assert "HVCU toolkit not recorded" in text and "git not recorded)" in text
    assert "hvcu_bench_context_impl not recorded not recorded" in text


def test_local_data_has_no_revision_to_record() -> None:
    data = results_json()
    data["configs"]["hvcu_bench_context_impl"]["metadata"]["hvcu_data_identity"] |= {
        "kind": "local",
        "location": "/data/hvcu",
        "revision": None,
    }
    text = text_of(section(page_of(data)))
    assert f"implication hvcu_bench_context_impl {FINGERPRINT} /data/hvcu – 1" in text


def test_one_block_per_results_file() -> None:
    assert section(page_of(results_json(), older_json())).count("<article class='run'>") == 2


def test_a_script_in_the_model_args_is_shown_as_text() -> None:
    block = section(page_of(results_json("model=<script>alert(1)</script>")))
    assert "<script>" not in block and "model=&lt;script&gt;alert(1)&lt;/script&gt;" in block


def test_the_section_shows_the_model_identity_compactly() -> None:
    text = text_of(section(page_of(with_identity(results_json()))))
    assert (
        "Model identity backend openai · model_version gpt-4o · base_url https://api.example.com/v1 · "
        "endpoint https://api.example.com/v1/ · request cache run 20261202T093830-ab12" in text
    )


def test_a_local_models_identity_shows_its_lmms_eval_release() -> None:
    local = {"backend": "qwen2_5_vl", "args": {"pretrained": "Qwen/X"}, "resolved": {}, "lmms_eval": "0.7.3"}
    text = text_of(section(page_of(with_identity(results_json(), local))))
    assert "Model identity backend qwen2_5_vl · pretrained Qwen/X · lmms-eval 0.7.3" in text


def test_a_run_without_hvcu_context_has_no_model_identity() -> None:
    data = results_json()
    data["config"]["model"] = data["config"]["resolved_cli_args"]["model"] = "vllm"
    text = text_of(section(page_of(data)))
    assert "Model identity not recorded (the run did not go through hvcu_context)" in text


def test_an_older_hvcu_context_file_says_its_identity_was_not_recorded() -> None:
    text = text_of(section(page_of(older_json())))
    assert "Model identity not recorded (written before the toolkit recorded it)" in text


def test_a_script_in_the_model_identity_is_shown_as_text() -> None:
    hostile = {"backend": "<script>alert(1)</script>", "resolved": {"<b>model</b>": "<script>x</script>"}}
    block = section(page_of(with_identity(results_json(), hostile)))
    assert "<script>" not in block and "<b>" not in block
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in block and "&lt;b&gt;model&lt;/b&gt; &lt;script&gt;x" in block


def test_a_page_without_records_has_no_section() -> None:
    assert "s-how-made" not in render_model_page(ModelPage("m", "m.html"))


# ---------------------------------------------------------------- through the real lmms-eval and `hvcu report`


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A smoke run through lmms-eval, then its HTML report: (the site folder, the results JSON)."""
    root = tmp_path_factory.mktemp("made")
    predictions = smoke_predictions(root / "p.jsonl")
    args = ["--model", "hvcu_replay", "--model_args", f"model=m,predictions={predictions}", "--limit", "2"]
    results = run_lmms_eval([*args, "--tasks", "hvcu_bench_sample", "--log_samples"], root / "run")
    assert main(["report", str(root / "run"), "--format", "html", "--out", str(root / "site")]) == 0
    return root / "site", results


@pytest.mark.slow
def test_a_run_records_the_toolkit_version_beside_the_data_identity(site: tuple[Path, dict]) -> None:
    _site, results = site
    metadata = results["configs"]["hvcu_bench_sample_impl"]["metadata"]
    assert metadata["hvcu_toolkit_version"] == toolkit_version() and "hvcu_data_identity" in metadata


@pytest.mark.slow
def test_a_run_records_the_installed_lmms_eval_release_beside_the_toolkit_version(site: tuple[Path, dict]) -> None:
    _site, results = site
    metadata = results["configs"]["hvcu_bench_sample_impl"]["metadata"]
    assert metadata["hvcu_lmms_eval_version"] == version("lmms_eval")


@pytest.mark.slow
def test_the_report_page_shows_how_the_run_was_made(site: tuple[Path, dict]) -> None:
    folder, results = site
    text = text_of(section((folder / "models" / "m.html").read_text()))
    identity = results["configs"]["hvcu_bench_sample_impl"]["metadata"]["hvcu_data_identity"]
    assert "base setting" in text and "--tasks hvcu_bench_sample --batch_size 1 --limit 2 --log_samples" in text
    assert f"HVCU toolkit {toolkit_version()}" in text and f"hvcu_bench_sample_impl {identity['fingerprint']}" in text
    shown = f"lmms-eval {version('lmms_eval')} (recorded by lmms-eval: {results['lmms_eval_version']}, "
    assert shown + f"git {results['git_hash']})" in text


def test_the_section_with_long_values_open_needs_no_horizontal_scrolling(tmp_path: Path) -> None:
    from test_report_page import LONG, probed

    identity = {"backend": "qwen2_5_vl", "args": {"pretrained": LONG}, "resolved": {"pretrained": LONG}}
    data = with_identity(results_json(f"model={LONG},pretrained={LONG}"), identity)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "20261202_093830_results.json").write_text(json.dumps(data))
    assert main(["report", str(tmp_path / "run"), "--format", "html", "--out", str(tmp_path / "site")]) == 0
    (page,) = (tmp_path / "site" / "models").glob("*.html")
    script = (
        "document.querySelectorAll('details').forEach(d => d.open = true);"
        "document.title = JSON.stringify({width: innerWidth, scroll: document.documentElement.scrollWidth});"
    )
    seen = probed(page, script, tmp_path)
    assert seen["scroll"] <= seen["width"] <= 1280
