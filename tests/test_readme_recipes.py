"""The offline recipes (docs/offline-recipes.md) run literally and do what they promise.

Recipes are found in README.md and every docs/*.md page, so a recipe moved between pages is still run. Each block
marked `<!-- recipe: NAME [slow] -->` is run as it stands with `bash -e`, in a temporary folder laid out as the
pages assume (a set-up clone: `.venv`, `hvcu_tasks/`, `Makefile`), `.venv/bin` first on PATH. A recipe that leaves a
process behind (the mock started with `&`) is cleaned up with its whole process group.

What a recipe promises is read from the page's own sentences below its block (the paths, counts and scores they
state), never typed in here, so a page that says something the recipe does not do fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO
from test_train_e2e import changed_weights

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.results.chains import chains_of_file, samples_files

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RECIPE = re.compile(r"<!-- recipe: ([\w-]+)( slow)? -->\n```bash\n(.*?)```\n(.*?)(?=\n\*\*\d+\. |\n#+ |\Z)", re.S)
PORT = 8765  # the port the recipes name
NEEDS = {"train-loop": ["synthesis"], "report": ["evaluate"]}
NAMES = ["synthesis", "train-loop", "build-bench", "evaluate", "report"]
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
RECIPES_BEFORE_THE_DOCS_TREE = 5  # blocks RECIPE found in README.md alone before its sections moved to docs/


def found() -> list[tuple[Path, re.Match[str]]]:
    """Return every recipe block of README.md and docs/*.md, with its page, in page order."""
    return [(page, m) for page in PAGES for m in RECIPE.finditer(page.read_text(encoding="utf-8"))]


def recipes() -> dict[str, str]:
    """Return the recipe blocks by name."""
    return {m.group(1): m.group(3) for _page, m in found()}


def prose(name: str) -> str:
    """Return the sentences below a recipe's block (up to the next recipe or heading), whitespace collapsed."""
    below = {m.group(1): m.group(4) for _page, m in found()}
    return " ".join(below[name].split())


def stated(name: str, pattern: str) -> re.Match[str]:
    """Return the one match of pattern in the sentences below a recipe; fail when its page no longer says it."""
    matches = list(re.finditer(pattern, prose(name)))
    assert len(matches) == 1, f"the text below recipe {name} should say {pattern!r} once: {prose(name)!r}"
    return matches[0]


def stated_paths(name: str) -> list[str]:
    """Return every `runs/...` path the "It writes ..." sentence below a recipe names, `{a,b}` expanded."""
    paths = []
    for quoted in re.findall(r"`([^`]+)`", stated(name, r"It writes (.*?)\.(?= [A-Z]|$)").group(1)):
        for token in quoted.split():
            if token.startswith("runs/"):
                if m := re.search(r"\{([^}]+)\}", token):
                    paths += [token[: m.start()] + part + token[m.end() :] for part in m.group(1).split(",")]
                else:
                    paths.append(token)
    return paths


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
STRAY: dict[str, list[str]] = {}  # recipe -> paths it created or changed outside runs/recipes/<recipe>/


def snapshot(root: Path) -> dict[str, tuple[int, int] | None]:
    """Return every path below root (links not followed): files with (mtime, size), folders with None."""
    found: dict[str, tuple[int, int] | None] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(folder, name), root)] = None
        for name in files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            found[os.path.relpath(path, root)] = (info.st_mtime_ns, info.st_size)
    return found


def strays(name: str, before: dict, after: dict) -> list[str]:
    """Return the paths created or changed outside the recipe's own folder (its parent folders excepted)."""
    own = Path("runs", "recipes", name)

    def allowed(path: Path) -> bool:
        return path == own or own in path.parents or path in own.parents

    return sorted(path for path, stamp in after.items() if before.get(path, "new") != stamp and not allowed(Path(path)))


def run_recipe(name: str, root: Path, timeout: int = 600, again: bool = False) -> subprocess.CompletedProcess:
    """Run a recipe (after the ones it needs) once per module, or once more with again=True; fail with its output."""
    if name in DONE and not again:
        return DONE[name]
    for before in NEEDS.get(name, []):
        run_recipe(before, root, timeout)
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", PORT)) != 0, f"port {PORT} is in use: the recipes serve the mock there"
    script = root.parent / f"{root.name}-recipe-{name}.sh"  # beside the clone: the recipe's writes are all in it
    script.write_text(recipes()[name], encoding="utf-8")
    env = {**os.environ, "PATH": f"{root / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    before = snapshot(root)
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
    assert done.returncode == 0, f"recipe {name} failed ({done.returncode}){' on a rerun' * again}:\n{out[-6000:]}"
    STRAY.setdefault(name, []).extend(strays(name, before, snapshot(root)))
    DONE[name] = done
    return done


def lines(path: Path) -> list[str]:
    """Return a file's non-empty lines."""
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def results(folder: Path) -> dict[str, dict]:
    """Return lmms-eval's results by task from every results file below folder."""
    found: dict[str, dict] = {}
    for path in sorted(folder.rglob("*_results.json")):  # rglob, not glob: the model folder may be hidden
        found.update(json.loads(path.read_text())["results"])
    return found


def items(folder: Path) -> dict[str, list]:
    """Return an authors'-layout benchmark's items by family (a family without a file: none)."""
    files = {family: folder / f"{stem}.json" for family, (_split, stem, *_rest) in FAMILIES.items()}
    return {
        family: json.loads(path.read_text(encoding="utf-8")) if path.is_file() else [] for family, path in files.items()
    }


def results_files(root: Path) -> tuple[int, list[Path]]:
    """Return how many results files recipe 4's page says it writes, and the files its path pattern finds."""
    said = stated("evaluate", r"(\w+) results files, `(runs/\S+_results\.json)`")
    return NUMBERS[said.group(1)], sorted(root.glob(said.group(2)))


def scores(root: Path) -> tuple[float, float, float]:
    """Return the Overall Score (acc_full) of recipe 4's strong model (base, context) and weak model (base)."""
    folder = root / "runs" / "recipes" / "evaluate"
    strong, weak = results(folder / "mock-strong"), results(folder / "mock-weak")
    base, context = "hvcu_bench_sample", "hvcu_bench_context_sample"
    return strong[base]["acc_full,none"], strong[context]["acc_full,none"], weak[base]["acc_full,none"]


def test_no_recipe_is_lost_across_the_readme_and_the_docs_pages() -> None:
    names = [m.group(1) for _page, m in found()]
    assert len(names) >= RECIPES_BEFORE_THE_DOCS_TREE
    assert len(set(names)) == len(names), f"a recipe name is used twice: {names}"


def test_the_offline_recipes_page_has_the_five_recipes_in_order() -> None:
    page = REPO / "docs" / "offline-recipes.md"
    assert [m.group(1) for p, m in found() if p == page] == NAMES


def test_only_the_training_loop_is_marked_slow() -> None:
    slow = [m.group(1) for _page, m in found() if m.group(2)]
    assert slow == ["train-loop"]


def test_the_readme_names_output_paths_below_each_recipe() -> None:
    assert all(stated_paths(name) for name in NAMES)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_a_recipe_writes_nothing_outside_its_own_runs_recipes_folder(workdir: Path, name: str) -> None:
    run_recipe(name, workdir, timeout=1800)
    assert STRAY[name] == []


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_path_the_readme_says_a_recipe_writes_exists(workdir: Path, name: str) -> None:
    run_recipe(name, workdir, timeout=1800)
    for path in stated_paths(name):
        assert list(workdir.glob(path)), f"recipe {name}: its page names {path}, which it did not write"


@pytest.mark.slow
def test_synthesis_recipe_writes_the_chains_the_readme_states(workdir: Path) -> None:
    done = run_recipe("synthesis", workdir)
    said = stated("synthesis", r"`(\S+/mcts/chains\.jsonl)` \((\d+) chains, (\d+) per image of the (\d+) smoke images")
    chains = [json.loads(line) for line in lines(workdir / said.group(1))]
    per_image = Counter(chain["image"] for chain in chains)
    assert len(chains) == int(said.group(2))
    assert set(per_image.values()) == {int(said.group(3))}
    assert len(per_image) == int(said.group(4))
    assert "mock: stopped" in done.stdout  # the block's `kill` stopped the mock


@pytest.mark.slow
def test_synthesis_recipe_writes_the_direct_chains_the_readme_states(workdir: Path) -> None:
    run_recipe("synthesis", workdir)
    said = stated("synthesis", r"`(\S+/direct/chains\.jsonl)` \((\d+) chains\)")
    assert len(lines(workdir / said.group(1))) == int(said.group(2))


@pytest.mark.slow
def test_synthesis_recipe_writes_the_training_samples_the_readme_states(workdir: Path) -> None:
    run_recipe("synthesis", workdir)
    folder = stated("synthesis", r"`(\S+/train-data/)`").group(1)
    said = stated("synthesis", r"`(hvcu_mcts_full_data\.json)` with (\d+) samples")
    assert len(json.loads((workdir / folder / said.group(1)).read_text())) == int(said.group(2))
    assert set(json.loads((workdir / folder / "dataset_info.json").read_text())) == {
        "hvcu_mcts_full_data",
        "hvcu_mcts_l3_only",
    }


@pytest.mark.slow
def test_synthesis_recipe_reruns_in_the_same_folder_with_the_same_chains(workdir: Path) -> None:
    run_recipe("synthesis", workdir)
    paths = [
        workdir / stated("synthesis", rf"`(\S+/{method}/chains\.jsonl)`").group(1) for method in ("mcts", "direct")
    ]
    first = [path.read_text(encoding="utf-8") for path in paths]
    run_recipe("synthesis", workdir, again=True)
    assert [path.read_text(encoding="utf-8") for path in paths] == first


@pytest.mark.slow
def test_build_bench_recipe_builds_the_items_the_readme_states(workdir: Path) -> None:
    run_recipe("build-bench", workdir)
    said = stated("build-bench", r"`(\S+/bench/)` \((\d+) items, (\d+) per family;")
    built = items(workdir / said.group(1))
    assert sum(len(family) for family in built.values()) == int(said.group(2))
    assert {len(family) for family in built.values()} == {int(said.group(3))}


@pytest.mark.slow
def test_build_bench_recipe_benchmark_passes_validation_as_the_readme_says(workdir: Path) -> None:
    run_recipe("build-bench", workdir)
    command = stated("build-bench", r"`(hvcu data validate \S+)` prints `OK`").group(1)
    done = subprocess.run(
        [str(workdir / ".venv" / "bin" / "hvcu"), *command.split()[1:]],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "OK"


@pytest.mark.slow
def test_build_bench_recipe_audit_accepts_the_items_the_readme_states(workdir: Path) -> None:
    run_recipe("build-bench", workdir)
    said = stated("build-bench", r"`(\S+/audit/final/)` \(the (\d+) accepted items")
    assert sum(len(family) for family in items(workdir / said.group(1)).values()) == int(said.group(2))


@pytest.mark.slow
def test_build_bench_recipe_writes_the_human_sheets_the_readme_states(workdir: Path) -> None:
    run_recipe("build-bench", workdir)
    said = stated(
        "build-bench", r"`(\S+/sheets/)` \(`assignment\.json` and (\d+) sheet files: (\d+) annotators × HTML \+ CSV"
    )
    sheets = workdir / said.group(1)
    files = list((sheets / "sheets").iterdir())
    assert (sheets / "assignment.json").is_file()
    assert len(files) == int(said.group(2))
    assert Counter(path.suffix for path in files) == {".html": int(said.group(3)), ".csv": int(said.group(3))}


@pytest.mark.slow
def test_build_bench_recipe_reruns_in_the_same_folder_with_the_same_benchmark(workdir: Path) -> None:
    run_recipe("build-bench", workdir)
    folders = [stated("build-bench", rf"`(\S+/{part}/)`").group(1) for part in ("bench", "audit/final")]
    first = [items(workdir / folder) for folder in folders]
    sheets = workdir / stated("build-bench", r"`(\S+/sheets/)`").group(1)
    first_sheets = sorted(path.name for path in (sheets / "sheets").iterdir())
    run_recipe("build-bench", workdir, again=True)
    assert [items(workdir / folder) for folder in folders] == first
    assert sorted(path.name for path in (sheets / "sheets").iterdir()) == first_sheets


@pytest.mark.slow
def test_evaluate_recipe_writes_the_results_files_the_readme_states(workdir: Path) -> None:
    run_recipe("evaluate", workdir)
    count, files = results_files(workdir)
    assert len(files) == count


@pytest.mark.slow
def test_evaluate_recipe_gives_the_scores_the_readme_states(workdir: Path) -> None:
    run_recipe("evaluate", workdir)
    said = stated(
        "evaluate",
        r"of `mock-strong` is ([\d.]+) in the base setting and ([\d.]+) in the context setting, that of `mock-weak` "
        r"([\d.]+) in the base setting",
    )
    assert scores(workdir) == tuple(float(said.group(k)) for k in (1, 2, 3))


@pytest.mark.slow
def test_evaluate_recipe_context_run_keeps_no_request_cache(workdir: Path) -> None:
    # The cache key has no mock --seed/--accuracy: with it on, a rerun after an interrupted run resumes old replies.
    done = run_recipe("evaluate", workdir)
    assert [line for line in done.stdout.splitlines() if "request cache off (cache=off)" in line]


@pytest.mark.slow
def test_report_recipe_prints_the_mock_rows_and_writes_the_page(workdir: Path) -> None:
    done = run_recipe("report", workdir)
    page = stated("report", r"It writes `(\S+/index\.html)`").group(1)
    rows = [line.split("|")[2].strip() for line in done.stdout.splitlines() if line.startswith("|")]
    assert "mock-strong†" in rows and "mock-weak†" in rows  # the leaderboard's Model column
    assert (workdir / page).is_file()


@pytest.mark.slow
def test_report_recipe_finds_the_strong_mock_significantly_above_the_weak_one(workdir: Path) -> None:
    run_recipe("report", workdir)
    board = json.loads((workdir / stated("report", r"`(\S+/leaderboard\.json)`").group(1)).read_text())
    said = stated(
        "report",
        r"significantly above `mock-weak` on the Score \(authors' parser\): ([\d.]+) against "
        r"([\d.]+), p \(Holm\) ([\d.]+)\.",
    )
    (pair,) = [p for p in board["pairs"] if {p["a"]["model"], p["b"]["model"]} == {"mock-strong", "mock-weak"}]
    assert (pair["a"]["model"], pair["b"]["model"], pair["paired"]) == ("mock-weak", "mock-strong", True)
    assert pair["significant"] and pair["interval"][0] > 0  # Δ = Score(strong) - Score(weak), its 95% CI above 0
    assert pair["p_adjusted"] < 0.05 and f"{pair['p_adjusted']:.3g}" == said.group(3)
    score = {e["model"]: e["score_base"] for e in board["entries"] if e["model"].startswith("mock-")}
    assert (f"{score['mock-strong']:.2f}", f"{score['mock-weak']:.2f}") == (said.group(1), said.group(2))


@pytest.mark.slow
def test_evaluate_then_report_rerun_in_the_same_folder_give_the_same_scores(workdir: Path) -> None:
    run_recipe("report", workdir)
    first = scores(workdir)
    run_recipe("evaluate", workdir, again=True)
    done = run_recipe("report", workdir, again=True)
    count, files = results_files(workdir)
    assert len(files) == count
    assert scores(workdir) == first
    rows = [line.split("|")[2].strip() for line in done.stdout.splitlines() if line.startswith("|")]
    assert "mock-strong†" in rows  # the leaderboard's Model column


# The training loop is checked on the recipe's own run (tests/test_train_e2e.py runs the LLaVA-NeXT loop): a tiny
# Qwen3-VL, one LoRA step, merge, both models evaluated in both settings, `hvcu report --compare`.


def base_model() -> str:
    """Return the base model folder recipe 2 trains (its BASE_MODEL=)."""
    (path,) = re.findall(r"BASE_MODEL=(\S+)", recipes()["train-loop"])
    return path


@pytest.mark.slow
def test_train_loop_recipe_evaluates_both_models_in_both_settings(workdir: Path) -> None:
    run_recipe("train-loop", workdir, timeout=1800)
    evals = [path for path in stated_paths("train-loop") if "/eval/" in path]
    assert len(evals) == 2
    for folder in evals:
        assert set(results(workdir / folder)) >= {"hvcu_bench_sample", "hvcu_bench_context_sample"}


@pytest.mark.slow
def test_train_loop_recipe_logs_every_chain_with_three_replies_of_real_text(workdir: Path) -> None:
    run_recipe("train-loop", workdir, timeout=1800)
    for folder in (path for path in stated_paths("train-loop") if "/eval/" in path):
        chains = [c for task, path in samples_files([workdir / folder]) for c in chains_of_file(task, path)]
        assert {c["setting"] for c in chains} == {"base", "context"}
        assert all(len(c["replies"]) == 3 and all(r.strip() for r in c["replies"]) for c in chains), folder


@pytest.mark.slow
def test_train_loop_recipe_lora_step_changes_the_language_model_only(workdir: Path) -> None:
    run_recipe("train-loop", workdir, timeout=1800)
    merged = stated("train-loop", r"`(\S+/merged/)` \(the tuned model\)").group(1)
    changed = changed_weights(workdir / base_model(), workdir / merged)
    assert changed and all("language_model" in name for name in changed)  # the vision tower is frozen


@pytest.mark.slow
def test_train_loop_recipe_compares_the_tuned_model_b_with_its_base_a(workdir: Path) -> None:
    run_recipe("train-loop", workdir, timeout=1800)
    merged = workdir / stated("train-loop", r"`(\S+/merged/)` \(the tuned model\)").group(1)
    report = workdir / stated("train-loop", r"comparison tables in `(\S+/)`").group(1)
    tables = re.findall(r"`(compare_(\w+)\.md)`", prose("train-loop"))
    assert [setting for _name, setting in tables] == ["base", "context"]
    for name, setting in tables:
        title = (report / name).read_text(encoding="utf-8").splitlines()[0]
        assert f"{merged} (B) vs {base_model()} (A), {setting} setting" in title, title
