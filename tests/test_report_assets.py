"""The report's page style and scripts are package data files (hvcu_tasks/report/assets/), and the pages built from
them are byte for byte the pages built when they were Python strings.

The expected SHA-256 values were recorded from the pages as the code wrote them before the move (the requirement is
"unchanged"); a change that alters a page on purpose records them again (last: the report's note lines for
diagnostics a results file without sample logs lacks, recorded from the same code with the inline strings
restored; chains.html: the two-model view; the model pages: "How this run was made"; index.html and the model
pages: the leaderboard's intervals, rank ranges and groups; the model pages: the Model identity row; the model
pages: the failed requests and the installed lmms-eval release, chains.html: paths from the runs folder; index.html
and the model pages: exact intervals, letter groups and the Failed column; every page: the layout at 390 px,
tables in scroll boxes). index.html inlines the figures' SVG, so a matplotlib release that draws differently
changes its hash too.
"""

from __future__ import annotations

import fnmatch
import hashlib
from pathlib import Path

import pytest
from conftest import REPO, pyproject
from test_chains import run_folder
from test_report import families, write_results

from hvcu_tasks.cli import main
from hvcu_tasks.report import browser
from hvcu_tasks.results.runs import sample_logs


def write_browser(runs, site, **options):
    """The chain browser of the run folders, read as `hvcu report` reads them."""
    return browser.write_browser(sample_logs(runs), site, runs=runs, **options)


PAGES = {
    "site/index.html": "629ae8a1acba81f38b96dbd0020b640e20a9e17390ac51037aec9d0f1f6a5a53",
    "site/models/Qwen-X.html": "ef9aa67bbcce04877fb6080b287587b97b562f18b4f7e15f81fa16b739fc202e",
    "site/models/Strong-Y.html": "dd6ca40774cfa8c362acbf187446df97733d3350d66af5486e3bcc5fd73cb812",
    "site/models/Tiny-Z.html": "03d712bd900805c596fbae238bc0d20a93f6dc05e24564d922dbd85dc70f01e0",
    "browser/chains.html": "411211c383983ccd729aa751aa8bf6ff6d09101da711addf5a7703ba2f222b6a",
}
ASSETS = REPO / "hvcu_tasks" / "report" / "assets"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site of four fixed runs (`hvcu report --format html`) and the chain browser of a fixed samples log."""
    root = tmp_path_factory.mktemp("pages")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)  # relative run folders: the pages name them as given
        write_results(Path("a"), families("hvcu_bench", acc_full=33.0, acc_full_official=33.0))
        write_results(Path("b"), families("hvcu_bench_context", acc_full=44.0, acc_full_official=44.0))
        write_results(
            Path("c"), families("hvcu_bench", acc_full=95.0, acc_full_official=95.0), model_args="model=Strong/Y"
        )
        write_results(Path("d"), families("hvcu_bench_sample", acc_full=20.0), model_args="model=Tiny/Z")
        assert main(["report", "a", "b", "c", "d", "--format", "html", "--out", "site"]) == 0
        run_folder(Path("chains"))
        assert write_browser([Path("chains/run")], Path("browser")) == Path("browser/chains.html")
    return root


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_pages_are_byte_identical_to_those_of_the_inline_strings(built: Path, page: str) -> None:
    assert hashlib.sha256((built / page).read_bytes()).hexdigest() == PAGES[page]


def test_the_style_and_scripts_are_files_in_the_package() -> None:
    names = sorted(p.name for p in ASSETS.iterdir() if p.is_file())
    assert names == ["browser-controls.html", "browser-pairs.html", "browser.css", "browser.js", "page.css", "page.js"]


def test_the_package_data_globs_carry_every_asset() -> None:
    globs = pyproject()["tool"]["setuptools"]["package-data"]["hvcu_tasks"]
    for asset in ASSETS.iterdir():
        relative = asset.relative_to(REPO / "hvcu_tasks").as_posix()
        assert any(fnmatch.fnmatch(relative, g) for g in globs), relative


@pytest.mark.parametrize("module", ["browser", "html"])
def test_no_report_module_holds_a_style_or_script_inline(module: str) -> None:
    text = (REPO / "hvcu_tasks" / "report" / f"{module}.py").read_text(encoding="utf-8")
    for marker in ("{ font-family", "function ", "addEventListener", "border-collapse", "<select"):
        assert marker not in text, marker
