"""`hvcu export-task DIR`: a task folder for plain lmms-eval, generated from the package, with the package's numbers.

The exported `utils.py` must need nothing but lmms-eval (and what lmms-eval itself installs), define every hook the
YAMLs name, and score exactly as the package does: checked hook by hook here against the hand-computed numbers of
tests/test_harness_scores.py, and end to end (slow) through the real CLI in a process where `import hvcu_tasks`
fails, against a run of the package's own tasks on the same replies.
"""

from __future__ import annotations

import ast
import glob
import importlib.util
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import datasets
import pytest
from conftest import REPO, one_line_error, run, run_lmms_eval
from test_harness_scores import EXPECTED, MIX, OVERALL, OVERALL_OFFICIAL, write_mix_predictions

from hvcu_tasks.cli import main
from hvcu_tasks.export import ExportError, Module, check_scopes
from hvcu_tasks.smoke import SMOKE_DIR

FAMILIES = ("implication", "aesthetic", "affective")
SHORT = {"implication": "impl", "aesthetic": "aesth", "affective": "affect"}
PLAIN = REPO / "tests" / "tools" / "plain_lmms_eval.py"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("export") / "hvcu_bench"
    assert main(["export-task", str(folder)]) == 0
    return folder


def load_utils(folder: Path) -> ModuleType:
    """Execute the exported utils.py the way lmms-eval does (a fresh, unregistered module per load)."""
    spec = importlib.util.spec_from_file_location("utils", folder / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stub(family: str) -> datasets.Dataset:
    return datasets.Dataset.from_list([{"family": family, "source": "smoke"}])


def test_utils_imports_only_lmms_eval_and_its_own_dependencies(exported: Path) -> None:
    tree = ast.parse((exported / "utils.py").read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"relative import at line {node.lineno}"
            imported.add(node.module.split(".")[0])
    # lmms-eval 0.7.3 requires datasets (which requires pyarrow), pillow and packaging.
    assert imported - set(sys.stdlib_module_names) == {"PIL", "datasets", "pyarrow", "packaging", "lmms_eval"}


def test_folder_holds_the_yamls_the_smoke_sample_and_one_python_file(exported: Path) -> None:
    files = {str(p.relative_to(exported)) for p in exported.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert [f for f in files if f.endswith(".py")] == ["utils.py"]
    for name in (
        "hvcu_bench.yaml",
        "hvcu_bench_context.yaml",
        "hvcu_bench_sample.yaml",
        "hvcu_bench_context_sample.yaml",
    ):
        assert name in files, name
    assert len([f for f in files if f.startswith("data/Image/") and f.endswith(".png")]) == 15
    assert {f for f in files if f.startswith("data/") and f.endswith(".json")} == {
        "data/Implication-Understanding.json",
        "data/Aesthetic-Appreciation.json",
        "data/Affective-Reasoning.json",
    }


def test_every_hook_the_yamls_name_is_defined(exported: Path) -> None:
    named = set()
    for path in exported.iterdir():
        if path.name.endswith(("yaml", "_yaml")):
            named |= set(re.findall(r"!function\s+utils\.(\w+)", path.read_text(encoding="utf-8")))
    utils = load_utils(exported)
    assert {"doc_to_messages", "context_doc_to_messages", "process_results", "agg_acc_full"} <= named
    assert [n for n in sorted(named) if not callable(getattr(utils, n, None))] == []


@pytest.mark.parametrize("family", FAMILIES)
def test_base_hooks_give_the_hand_computed_metrics(exported: Path, family: str) -> None:
    utils = load_utils(exported)
    docs = utils.process_docs(stub(family))
    items = [utils.process_results(d, [MIX[(family, d["sample_id"])][d["level"] - 1]])["acc_full"] for d in docs]
    for metric, value in EXPECTED[family].items():
        assert getattr(utils, f"agg_{metric}")(items) == pytest.approx(value), metric


@pytest.mark.parametrize("family", FAMILIES)
def test_context_hooks_give_the_hand_computed_metrics(exported: Path, family: str) -> None:
    utils = load_utils(exported)
    docs = utils.context_process_docs(stub(family))
    items = [utils.context_process_results(d, [list(MIX[(family, d["sample_id"])])])["acc_full"] for d in docs]
    for metric, value in EXPECTED[family].items():
        assert getattr(utils, f"agg_{metric}")(items) == pytest.approx(value), metric


def test_prompts_are_the_packages(exported: Path) -> None:
    from hvcu_tasks import context, harness

    utils = load_utils(exported)
    base = utils.process_docs(stub("aesthetic"))
    rows = harness.process_docs(stub("aesthetic")).to_list()
    assert [Path(r["image_path"]).relative_to(exported / "data") for r in base] == [
        Path(r["image_path"]).relative_to(SMOKE_DIR) for r in rows
    ]
    drop_path = lambda rs: [{k: v for k, v in r.items() if k != "image_path"} for r in rs]  # noqa: E731
    assert drop_path(base.to_list()) == drop_path(rows)  # same data identity (content fingerprint) too
    assert [utils.doc_to_text(d) for d in base] == [harness.doc_to_text(d) for d in base]
    chains = utils.context_process_docs(stub("aesthetic"))
    replies = ["C", "B"]
    ours = utils.context_doc_to_messages(chains[0], {"multi_round": "native"}, 2, replies, None)[0]
    theirs = context.doc_to_messages(chains[0], {"multi_round": "native"}, 2, replies, None)[0]
    # Round 2 (asking L3): system prompt, then L1 and L2 as user/assistant turns, then L3 with the image.
    assert [m["role"] for m in ours] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [[c.get("text") for c in m["content"]] for m in ours] == [
        [c.get("text") for c in m["content"]] for m in theirs
    ]
    assert ours[-1]["content"][-1]["url"].tobytes() == theirs[-1]["content"][-1]["url"].tobytes()


def test_every_load_by_lmms_eval_shares_one_instance(exported: Path) -> None:
    from lmms_eval.utils import load_yaml_config

    impl = load_yaml_config(str(exported / "hvcu_bench_sample_impl.yaml"))
    aesth = load_yaml_config(str(exported / "hvcu_bench_sample_aesth.yaml"))
    assert impl["process_results"] is aesth["process_results"]
    assert impl["metric_list"][0]["aggregation"] is aesth["metric_list"][0]["aggregation"]


def test_payloads_pickle_across_processes(exported: Path) -> None:
    utils = load_utils(exported)
    doc = utils.process_docs(stub("aesthetic"))[0]
    payload = utils.process_results(doc, ["D"])
    shared = payload["acc_perc"]  # what lmms-eval gathers from every process in a data-parallel run
    back = pickle.loads(pickle.dumps(shared))
    assert type(back) is type(shared) and back["outcomes"] == payload["acc_full"]["outcomes"]


def test_a_folder_that_is_not_empty_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    code, _out, err = run("export-task", str(tmp_path), capsys=capsys)
    assert code == 2
    assert "not empty" in one_line_error(err) and str(tmp_path) in err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_a_local_variable_named_like_a_renamed_global_stops_the_export() -> None:
    source = b"log = 1\n\n\ndef f(log):\n    return log\n"
    module = Module("hvcu_tasks.fake", Path("fake.py"), source, ast.parse(source))
    with pytest.raises(ExportError, match=r"^fake\.py:4: f binds 'log' locally"):
        check_scopes(module, {"log"})


def test_force_replaces_the_folder(tmp_path: Path, capsys) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "stale.yaml").write_text("task: old\n")
    code, out, _err = run("export-task", str(tmp_path / "out"), "--force", capsys=capsys)
    assert code == 0 and "utils.py" in out
    assert not (tmp_path / "out" / "stale.yaml").exists() and (tmp_path / "out" / "utils.py").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging folder left behind


def test_two_exports_are_byte_identical(exported: Path, tmp_path: Path) -> None:
    assert main(["export-task", str(tmp_path / "again")]) == 0

    def listing(root: Path) -> list[Path]:  # Python's bytecode cache of a loaded utils.py is not part of the export
        return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)

    files = listing(exported)
    assert files == listing(tmp_path / "again")
    assert all((exported / f).read_bytes() == (tmp_path / "again" / f).read_bytes() for f in files)


def results_of(out: Path) -> dict:
    found = sorted(glob.glob(str(out / "**" / "*_results.json"), recursive=True))
    assert found, f"no results under {out}"
    return json.loads(Path(found[0]).read_text())["results"]


@pytest.mark.slow
def test_plain_lmms_eval_runs_the_export_with_the_packages_numbers(exported: Path, tmp_path: Path) -> None:
    predictions = write_mix_predictions(tmp_path / "mix.jsonl")
    tasks = "hvcu_bench_sample,hvcu_bench_context_sample"
    package = run_lmms_eval(
        ["--model", "hvcu_context", "--model_args", f"inner=hvcu_replay,predictions={predictions}", "--tasks", tasks],
        tmp_path / "package",
    )["results"]
    plain_out = tmp_path / "plain"
    cmd = [sys.executable, str(PLAIN), "--model", "hvcu_context", "--model_args", f"predictions={predictions}"]
    cmd += ["--include_path", str(exported), "--tasks", tasks, "--output_path", str(plain_out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path, env=dict(os.environ))
    log = proc.stdout + proc.stderr
    assert "hvcu_tasks is not importable" in log and "Failed to load model entry-point manifests" in log, log[-3000:]
    plain = results_of(plain_out)
    assert plain == package
    for group in ("hvcu_bench_sample", "hvcu_bench_context_sample"):
        assert plain[group]["acc_full,none"] == OVERALL and plain[group]["acc_full_official,none"] == OVERALL_OFFICIAL
