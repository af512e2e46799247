"""`hvcu export-task DIR`: a task folder for plain lmms-eval, generated from the package, with the package's numbers.

The folder holds the package's YAMLs, a small `utils.py`, and in `hvcu_lib/` the installed task folder's own hook
modules, its `documents.py` and a file-for-file copy of the pure core; its Python must need nothing but lmms-eval
(and what lmms-eval itself installs), stay within its line budget, patch nothing of lmms-eval, write nothing
outside the run's folders, define every hook the YAMLs name, and score exactly
as the package does: checked hook by hook here against the hand-computed numbers of tests/test_harness_scores.py,
and end to end (slow) through the real CLI in a process where `import hvcu_tasks` fails and the home folder is
empty, against a run of the package's own tasks on the same replies. Prompts: every request of every family, base
and each context round (earlier replies shown), must be the package's, message by message (text and image pixels):
built through both hook sets here, and recorded by the replay model in both end-to-end runs and compared.
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
from conftest import REPO, one_line_error, run
from test_harness_scores import EXPECTED, MIX, OVERALL, OVERALL_OFFICIAL, write_mix_predictions

from hvcu_tasks.cli import main
from hvcu_tasks.dev.smoke import SMOKE_DIR
from hvcu_tasks.export import SHARED, ExportError, relative_core_imports

FAMILIES = ("implication", "aesthetic", "affective")
SHORT = {"implication": "impl", "aesthetic": "aesth", "affective": "affect"}
CHAINS = {"implication": 5, "aesthetic": 4, "affective": 6}
"""Chains of each family in the bundled smoke sample (3 levels each)."""
PLAIN = REPO / "tests" / "tools" / "plain_lmms_eval.py"
BUDGET = 2500  # the bar
"""Lines of Python in an export (issue 35: at most 2,500): the real number, so a change that adds lines says so."""


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


def python_files(folder: Path) -> dict[str, str]:
    """Return every exported Python file (relative path -> text), bytecode caches aside."""
    return {
        p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(folder.rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def test_the_code_imports_only_lmms_eval_its_own_dependencies_and_itself(exported: Path) -> None:
    imported = set()
    for rel, text in python_files(exported).items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level:
                assert rel.startswith("hvcu_lib/"), f"{rel}:{node.lineno}: relative import outside hvcu_lib/"
            elif isinstance(node, ast.ImportFrom):
                imported.add(node.module.split(".")[0])
    # lmms-eval 0.7.3 requires (its Requires-Dist) datasets (which requires pyarrow), pillow and huggingface-hub.
    assert imported - set(sys.stdlib_module_names) == {"PIL", "datasets", "pyarrow", "huggingface_hub", "lmms_eval"}


def test_the_exported_python_stays_within_its_line_budget(exported: Path) -> None:
    # The issue asks for at most 2,500 lines. What only the report reads has left the core (chance rates, metric
    # prefixes and directions, URL and credential rules, and the diagnostics' names and scores: results/scores.py)
    # and the export ships only the core modules its hooks import; what stays is the hooks' own need: both parsers,
    # the metrics a task reports and their aggregations. What the export alone brings (its documents.py and
    # utils.py) may not grow.
    files = python_files(exported)
    assert sum(text.count("\n") for text in files.values()) <= BUDGET
    assert files["hvcu_lib/documents.py"].count("\n") <= 216
    assert python_files(exported)["utils.py"].count("\n") <= 55  # the file lmms-eval loads only hands out the hooks


def test_a_yaml_naming_a_diagnostics_aggregation_gets_an_error_saying_what_a_task_reports(exported: Path) -> None:
    utils = load_utils(exported)  # lmms-eval resolves `!function utils.<name>` with getattr on this module
    with pytest.raises(AttributeError) as err:
        utils.agg_position_bias  # noqa: B018
    reported = "acc_l1_perc, acc_l2_bridge, acc_l3_conn, acc_full, "
    reported += "acc_l1_perc_official, acc_l2_bridge_official, acc_l3_conn_official"
    assert str(err.value).startswith(f"utils.agg_position_bias: an HVCU-Bench task reports only {reported}, ")
    assert str(err.value).endswith("`hvcu report` computes them from a --log_samples run")
    assert not hasattr(utils, "no_such_hook") and callable(utils.agg_acc_full)


def test_the_export_ships_only_the_core_modules_its_hooks_import(tmp_path: Path, monkeypatch) -> None:
    from hvcu_tasks import export

    core = tmp_path / "core"
    core.mkdir()
    (core / "__init__.py").write_text("", encoding="utf-8")
    (core / "used.py").write_text("def f():\n    from hvcu_tasks.core.lazy import g\n", encoding="utf-8")
    (core / "lazy.py").write_text("", encoding="utf-8")
    (core / "unused.py").write_text("", encoding="utf-8")
    hook = tmp_path / "hook.py"
    hook.write_text("from hvcu_tasks.core import used\n", encoding="utf-8")
    monkeypatch.setattr(export, "CORE_DIR", core)
    monkeypatch.setattr(export, "SHIPPED", {"hvcu_tasks.lmms.hook": ("hook", hook)})
    assert [path.name for path in export.used_core()] == ["__init__.py", "lazy.py", "used.py"]


def test_the_core_is_copied_file_for_file_with_only_its_imports_made_relative(exported: Path) -> None:
    core = REPO / "hvcu_tasks" / "core"
    copied = {rel: text for rel, text in python_files(exported).items() if rel.startswith("hvcu_lib/core/")}
    assert sorted(copied) == sorted(f"hvcu_lib/core/{p.name}" for p in core.glob("*.py"))  # the hooks use all today
    for rel, text in copied.items():
        back = re.sub(
            r"\bfrom \.(\w*) import", lambda m: f"from hvcu_tasks.core{'.' if m[1] else ''}{m[1]} import", text
        )
        assert back == (core / Path(rel).name).read_text(encoding="utf-8"), rel
    lmms = REPO / "hvcu_tasks" / "lmms"
    back = {  # the relative imports of hvcu_lib/ back to the package modules they stand for
        r"from \.core\b": "from hvcu_tasks.core",
        r"from \.settings import": "from hvcu_tasks.settings import",
        r"from \.(hooks|documents) import": r"from hvcu_tasks.lmms.\1 import",
        r"from \. import": "from hvcu_tasks.lmms import",
    }
    # the installed task folder's hook modules, file for file; documents.py is the export's own (export_documents.py)
    for name, source in [(n, lmms / f"{n}.py") for n in SHARED] + [("documents", lmms / "export_documents.py")]:
        text = python_files(exported)[f"hvcu_lib/{name}.py"]
        for pattern, package in back.items():
            text = re.sub(pattern, package, text)
        assert text == source.read_text(encoding="utf-8"), name
    # shipped as it is: the one place HVCU_* is read
    assert python_files(exported)["hvcu_lib/settings.py"] == (REPO / "hvcu_tasks" / "settings.py").read_text()
    assert python_files(exported)["utils.py"] == (REPO / "hvcu_tasks" / "lmms" / "export_utils.py").read_text()


def lmms_eval_names(tree: ast.Module) -> set[str]:
    """Return the names a module binds to lmms-eval objects (its imports of lmms_eval)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "lmms_eval":
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == "lmms_eval"}
    return names


def test_no_exported_code_assigns_an_attribute_of_an_lmms_eval_object(exported: Path) -> None:
    found = []
    for rel, text in python_files(exported).items():
        tree = ast.parse(text)
        theirs = lmms_eval_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.Delete, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for part in (p for t in targets for p in ast.walk(t) if isinstance(p, ast.Attribute)):
                    if {n.id for n in ast.walk(part.value) if isinstance(n, ast.Name)} & theirs:
                        found.append(f"{rel}:{node.lineno}: assigns {ast.unparse(part)}")
            if isinstance(node, ast.Call) and ast.unparse(node.func) in {"setattr", "delattr"}:
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")  # none at all: no target to judge
        assert not theirs - {"ModelRegistryV2"}, rel  # the one lmms-eval object read (the toolkit's route record)
    assert found == []


def lmms_eval_state() -> dict[str, dict[str, int]]:
    """Return the identity of every attribute of every loaded lmms_eval module and of the classes it defines."""
    state = {}
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] != "lmms_eval" or module is None:
            continue
        state[name] = {k: id(v) for k, v in vars(module).items()}
        for k, v in vars(module).items():
            if isinstance(v, type) and v.__module__ == name:
                state[f"{name}.{k}"] = {a: id(b) for a, b in vars(v).items()}
    return state


def test_loading_and_running_the_hooks_changes_nothing_of_lmms_eval(tmp_path: Path) -> None:
    from lmms_eval.api import task  # noqa: F401  (what lmms-eval has loaded when it reads task YAMLs)
    from lmms_eval.protocol import ChatMessages
    from lmms_eval.utils import load_yaml_config

    assert main(["export-task", str(tmp_path / "fresh")]) == 0
    before = lmms_eval_state()
    config = load_yaml_config(str(tmp_path / "fresh" / "hvcu_bench_context_sample_impl.yaml"))
    chain = config["process_docs"](stub("implication"))[0]
    ChatMessages(messages=config["doc_to_messages"](chain)).to_openai_messages()
    config["doc_to_text"](chain, {"multi_round": "native", "backend": "vllm"})
    assert lmms_eval_state() == before


def test_two_exports_and_the_installed_package_do_not_clash(exported: Path, tmp_path: Path) -> None:
    import hvcu_tasks.core.metrics

    assert main(["export-task", str(tmp_path / "other")]) == 0
    path_before, package_metrics = list(sys.path), hvcu_tasks.core.metrics
    one, two = load_utils(exported), load_utils(tmp_path / "other")
    assert sys.path == path_before  # nothing put on the import path
    mine = sys.modules[one.process_results.__module__]
    theirs = sys.modules[two.process_results.__module__]
    assert mine is not theirs and Path(mine.__file__) == exported / "hvcu_lib" / "hooks.py"
    assert Path(theirs.__file__) == tmp_path / "other" / "hvcu_lib" / "hooks.py"
    assert Path(sys.modules[mine.__package__ + ".core.metrics"].__file__).parent == exported / "hvcu_lib" / "core"
    assert sys.modules["hvcu_tasks.core.metrics"] is package_metrics  # the toolkit's own core stays its own
    assert Path(package_metrics.__file__) == REPO / "hvcu_tasks" / "core" / "metrics.py"
    assert not [name for name in sys.modules if name.split(".")[0] in {"hvcu_lib", "hooks", "core", "utils"}]
    doc = one.process_docs(stub("aesthetic"))[0]
    assert two.agg_acc_l1_perc([one.process_results(doc, [doc["answer"]])["acc_l1_perc"]]) == 100.0


def test_folder_holds_the_yamls_the_smoke_sample_and_the_code(exported: Path) -> None:
    files = {str(p.relative_to(exported)) for p in exported.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    core = {f"hvcu_lib/core/{p.name}" for p in (REPO / "hvcu_tasks" / "core").glob("*.py")}
    code = {"utils.py", "hvcu_lib/__init__.py", "hvcu_lib/settings.py", "hvcu_lib/documents.py"}
    code |= {f"hvcu_lib/{name}.py" for name in SHARED}
    assert {f for f in files if f.endswith(".py")} == code | core
    for name in (
        "hvcu_bench.yaml",
        "hvcu_bench_context.yaml",
        "hvcu_bench_sample.yaml",
        "hvcu_bench_context_sample.yaml",
    ):
        assert name in files, name
    tasks = REPO / "hvcu_tasks" / "lmms" / "tasks"
    yamls = sorted(p.name for p in tasks.iterdir() if "yaml" in p.name)
    assert yamls and all((exported / n).read_bytes() == (tasks / n).read_bytes() for n in yamls)  # copied as they are
    assert len([f for f in files if f.startswith("data/Image/") and f.endswith(".png")]) == 15
    assert {f for f in files if f.startswith("data/") and f.endswith(".json")} == {
        "data/Implication-Understanding.json",
        "data/Aesthetic-Appreciation.json",
        "data/Affective-Reasoning.json",
    }


def test_an_import_of_the_package_beyond_the_core_stops_the_export(tmp_path: Path) -> None:
    module = tmp_path / "hooks.py"
    module.write_text('"""Doc."""\n\nfrom hvcu_tasks.core.metrics import NA\nfrom hvcu_tasks.data import files\n')
    with pytest.raises(ExportError, match=r"hooks\.py:4: imports hvcu_tasks\.data; an exported module may import"):
        relative_core_imports(module, -1)
    module.write_text("from hvcu_tasks.core.metrics import NA  # the one rewrite\nimport json\n")
    assert relative_core_imports(module, -1) == b"from .core.metrics import NA  # the one rewrite\nimport json\n"
    assert relative_core_imports(module, 0) == b"from .metrics import NA  # the one rewrite\nimport json\n"


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


def load_plain_tool() -> ModuleType:
    """Import tests/tools/plain_lmms_eval.py (its request recorder) without running lmms-eval."""
    spec = importlib.util.spec_from_file_location("plain_lmms_eval", PLAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_recorder_keeps_text_and_digests_pixels() -> None:
    from PIL import Image

    plain = load_plain_tool().plain
    image = Image.new("RGB", (2, 1), (255, 0, 0))
    message = {"role": "user", "content": [{"type": "text", "text": "Q?"}, {"type": "image", "url": image}]}
    assert plain([message]) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Q?"},
                # two red pixels: bytes ff0000 ff0000
                {
                    "type": "image",
                    "url": {"image": "RGB 2x1 sha256:1cf3d97018bf4d851c423e02d2eb48ea3b1eab851bfa275c0a7a86f0cc110e31"},
                },
            ],
        }
    ]


@pytest.mark.parametrize("family", FAMILIES)
def test_base_prompts_are_the_packages(exported: Path, family: str) -> None:
    from hvcu_tasks.lmms import hooks

    plain = load_plain_tool().plain
    utils = load_utils(exported)
    ours = utils.process_docs(stub(family))
    theirs = hooks.process_docs(stub(family))
    assert [Path(r["image_path"]).relative_to(exported / "data") for r in ours] == [
        Path(r["image_path"]).relative_to(SMOKE_DIR) for r in theirs
    ]
    drop_path = lambda rs: [{k: v for k, v in r.items() if k != "image_path"} for r in rs]  # noqa: E731
    assert drop_path(ours.to_list()) == drop_path(theirs.to_list())  # same data identity (content fingerprint) too
    sent = [plain(utils.doc_to_messages(d)) for d in ours]
    assert len(sent) == 3 * CHAINS[family]
    assert sent == [plain(hooks.doc_to_messages(d)) for d in theirs]


def chain_requests(doc_to_messages, chain: dict, replies: tuple[str, ...]) -> list:
    """Return every round's messages of one chain, answered with `replies`, as the multi-round protocol asks them."""
    rounds = [doc_to_messages(chain, {"multi_round": "native"})]
    while True:
        step = doc_to_messages(chain, {"multi_round": "native"}, len(rounds), list(replies[: len(rounds)]), None)
        messages, done, _previous, _info = step
        if done:
            return rounds
        rounds.append(messages)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_context_round_is_the_packages(exported: Path, family: str) -> None:
    from hvcu_tasks.lmms import context

    plain = load_plain_tool().plain
    utils = load_utils(exported)
    ours = utils.context_process_docs(stub(family))
    theirs = context.process_docs(stub(family))
    assert [c["sample_id"] for c in ours] == [c["sample_id"] for c in theirs] and len(ours) == CHAINS[family]
    for mine, package in zip(ours, theirs, strict=True):
        replies = MIX[(family, mine["sample_id"])]  # right, wrong, empty and prose replies shown to later rounds
        sent = [plain(m) for m in chain_requests(utils.context_doc_to_messages, mine, replies)]
        assert len(sent) == 3 and [m["role"] for m in sent[2]] == [
            "system",
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
        ]
        assert sent == [plain(m) for m in chain_requests(context.doc_to_messages, package, replies)], mine["sample_id"]


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
    shared = payload["acc_l1_perc"]  # what lmms-eval gathers from every process in a data-parallel run
    back = pickle.loads(pickle.dumps(shared))
    assert type(back) is type(shared) and back["outcomes"] == payload["acc_full"]["outcomes"]


UNPICKLE = """
import importlib.util, pickle, sys
spec = importlib.util.spec_from_file_location("utils", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
value = pickle.loads(sys.stdin.buffer.read())
print(type(value).__module__.split(".")[-1], type(value).__name__, value["outcomes"][0]["pred"])
"""


def test_payloads_unpickle_in_another_process_that_loaded_the_same_folder(exported: Path) -> None:
    utils = load_utils(exported)
    doc = utils.process_docs(stub("aesthetic"))[0]
    blob = pickle.dumps(utils.process_results(doc, ["D"])["acc_l1_perc"])  # what another rank gets in a gather
    cmd = [sys.executable, "-c", UNPICKLE, str(exported / "utils.py")]
    done = subprocess.run(cmd, input=blob, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().split() == ["payloads", "SharedOutcomes", "D"]


def test_a_folder_that_is_not_empty_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    code, _out, err = run("export-task", str(tmp_path), capsys=capsys)
    assert code == 2
    assert "not empty" in one_line_error(err) and str(tmp_path) in err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_force_replaces_an_earlier_export(tmp_path: Path, capsys) -> None:
    assert main(["export-task", str(tmp_path / "out")]) == 0
    (tmp_path / "out" / "utils.py").write_text("# edited by hand\n")
    (tmp_path / "out" / "__pycache__").mkdir()
    (tmp_path / "out" / "__pycache__" / "utils.cpython-311.pyc").write_bytes(b"\0")  # left by lmms-eval's load
    code, out, _err = run("export-task", str(tmp_path / "out"), "--force", capsys=capsys)
    assert code == 0 and "utils.py" in out
    assert (tmp_path / "out" / "utils.py").read_text().startswith('"""HVCU-Bench task hooks for lmms-eval')
    assert not (tmp_path / "out" / "__pycache__").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging or old folder left behind


def test_an_export_is_marked_with_its_files(exported: Path) -> None:
    marker = (exported / ".hvcu-export").read_text(encoding="utf-8").splitlines()
    assert marker[0].startswith("hvcu export-task: written by hvcu-toolkit ")
    written = sorted(str(p.relative_to(exported)) for p in exported.rglob("*") if p.is_file())
    assert marker[1:] == [f for f in written if f != ".hvcu-export" and "__pycache__" not in f]


def test_force_replaces_an_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    assert main(["export-task", str(tmp_path / "out"), "--force"]) == 0
    assert (tmp_path / "out" / "utils.py").is_file()


def test_force_refuses_a_folder_that_is_not_an_export(tmp_path: Path, capsys) -> None:
    tasks = tmp_path / "lmms_eval" / "tasks"  # `hvcu export-task .../lmms_eval/tasks --force`: every task in it
    (tasks / "mmmu").mkdir(parents=True)
    (tasks / "mmmu" / "mmmu.yaml").write_text("task: mmmu\n")
    code, _out, err = run("export-task", str(tasks), "--force", capsys=capsys)
    assert code == 2
    assert one_line_error(err) == (
        f"error: {tasks}: --force replaces only an empty folder or an earlier export, and this folder holds "
        "files no export wrote (mmmu/mmmu.yaml); name a new folder, e.g. "
        f"{tasks / 'hvcu_bench'}"
    )
    assert (tasks / "mmmu" / "mmmu.yaml").read_text() == "task: mmmu\n"


def test_force_refuses_an_earlier_export_holding_files_of_the_user(tmp_path: Path, capsys) -> None:
    assert main(["export-task", str(tmp_path / "out")]) == 0
    (tmp_path / "out" / "my_notes.md").write_text("mine")
    code, _out, err = run("export-task", str(tmp_path / "out"), "--force", capsys=capsys)
    assert code == 2
    assert "holds files no export wrote (my_notes.md)" in one_line_error(err)
    assert (tmp_path / "out" / "my_notes.md").read_text() == "mine"


def test_force_refuses_bytecode_without_an_export_marker(tmp_path: Path, capsys) -> None:
    (tmp_path / "out" / "__pycache__").mkdir(parents=True)
    (tmp_path / "out" / "__pycache__" / "mine.cpython-311.pyc").write_bytes(b"\0")
    code, _out, err = run("export-task", str(tmp_path / "out"), "--force", capsys=capsys)
    assert code == 2 and "holds files no export wrote (__pycache__/mine.cpython-311.pyc)" in one_line_error(err)


@pytest.mark.parametrize("force", [(), ("--force",)])
def test_the_current_folder_is_refused(force: tuple, tmp_path: Path, capsys, monkeypatch) -> None:
    assert main(["export-task", str(tmp_path / "here")]) == 0  # even an earlier export: it is where we stand
    monkeypatch.chdir(tmp_path / "here")
    code, _out, err = run("export-task", ".", *force, capsys=capsys)
    assert code == 2
    assert one_line_error(err) == (
        f"error: DIR .: is the current folder (or holds it); name a folder beside it, e.g. {tmp_path / 'hvcu_bench'}"
    )
    assert (tmp_path / "here" / "utils.py").is_file()


def test_a_folder_holding_the_current_folder_is_refused(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a" / "b")
    code, _out, err = run("export-task", str(tmp_path / "a"), "--force", capsys=capsys)
    assert code == 2 and "is the current folder (or holds it)" in one_line_error(err)
    assert (tmp_path / "a" / "b").is_dir()


def listing(root: Path) -> list[Path]:
    """Return the files of an export (Python's bytecode caches of its loaded code are not part of it)."""
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_two_exports_are_byte_identical(exported: Path, tmp_path: Path) -> None:
    assert main(["export-task", str(tmp_path / "again")]) == 0
    files = listing(exported)
    assert files == listing(tmp_path / "again")
    assert all((exported / f).read_bytes() == (tmp_path / "again" / f).read_bytes() for f in files)


def recorded(path: Path) -> list[dict]:
    """Read a plain replay's request record, in a stable order (task, document, level)."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return sorted(lines, key=lambda r: (r["task"], r["doc_id"], r["level"]))


def run_plain(out: Path, *argv: str, env: dict[str, str] | None = None) -> tuple[dict, str]:
    """Run tests/tools/plain_lmms_eval.py with `argv`, writing to `out`; return the results and the output."""
    cmd = [sys.executable, str(PLAIN), *argv, "--output_path", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=out.parent, env=env or dict(os.environ))
    log = proc.stdout + proc.stderr
    found = sorted(glob.glob(str(out / "**" / "*_results.json"), recursive=True))
    assert found, f"no results under {out} (rc={proc.returncode}):\n{log[-4000:]}"
    return json.loads(Path(found[0]).read_text())["results"], log


@pytest.mark.slow
def test_plain_lmms_eval_runs_the_export_with_the_packages_requests_and_numbers(exported: Path, tmp_path: Path) -> None:
    predictions = write_mix_predictions(tmp_path / "mix.jsonl")
    tasks = ["--tasks", "hvcu_bench_sample,hvcu_bench_context_sample"]
    # The package's own tasks behind its hvcu_context wrapper, with the recording replay as the inner model.
    args = f"inner=plain_record,predictions={predictions},record={tmp_path / 'package.jsonl'}"
    package, log = run_plain(
        tmp_path / "package", "--with-toolkit", "--model", "hvcu_context", "--model_args", args, *tasks
    )
    assert "hvcu_tasks is not importable" not in log
    args = f"predictions={predictions},record={tmp_path / 'plain.jsonl'}"
    include = ["--include_path", str(exported)]
    # A home folder of its own, to see that nothing but lmms-eval writes outside the run's output: lmms-eval's and
    # Hugging Face's folders are named apart (HF_HOME), the toolkit's cache settings are not set.
    home, folders = tmp_path / "home", {"HF_HOME": str(tmp_path / "hf"), "HF_DATASETS_OFFLINE": "1"}
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"HVCU_CACHE_DIR", "XDG_CACHE_HOME", "HF_HOME"}}
    env |= {"HOME": str(home), **folders}
    shipped = listing(exported)
    plain, log = run_plain(
        tmp_path / "plain", "--model", "hvcu_context", "--model_args", args, *include, *tasks, env=env
    )
    assert "hvcu_tasks is not importable" in log and "Failed to load model entry-point manifests" in log, log[-3000:]
    assert list(home.rglob("*")) == []  # nothing under the home folder: no ~/.cache/hvcu, no marker anywhere
    assert listing(exported) == shipped  # nor in the export itself (Python's bytecode caches aside)
    assert plain == package
    for group in ("hvcu_bench_sample", "hvcu_bench_context_sample"):
        assert plain[group]["acc_full,none"] == OVERALL and plain[group]["acc_full_official,none"] == OVERALL_OFFICIAL
    sent, expected = recorded(tmp_path / "plain.jsonl"), recorded(tmp_path / "package.jsonl")
    # 15 chains: 45 base requests and 45 context rounds, each recorded once, every family and level asked.
    assert len(sent) == 90 and len({(r["task"], r["doc_id"], r["level"]) for r in sent}) == 90
    for setting in ("hvcu_bench_sample_", "hvcu_bench_context_sample_"):
        asked = {(r["family"], r["level"]) for r in sent if r["task"].startswith(setting)}
        assert asked == {(f, level) for f in FAMILIES for level in (1, 2, 3)}, setting
    assert sent == expected  # the same messages (text and image pixels) and generation settings, request by request


def test_the_exported_context_tasks_refuse_routed_backends_clearly_without_the_toolkits_hook(
    exported: Path, monkeypatch
) -> None:
    import yaml
    from lmms_eval.models import get_model
    from lmms_eval.models.registry_v2 import ModelRegistryV2

    utils = load_utils(exported)
    text = (exported / "_context_template_yaml").read_text().replace("!function", "")
    marks = yaml.safe_load(text)["lmms_eval_specific_kwargs"]
    assert marks["qwen2_5_vl"] == {"multi_round": "routed", "backend": "qwen2_5_vl"}
    chain = utils.context_process_docs(stub("aesthetic"))[0]
    get_model("qwen2_5_vl")  # the toolkit's hook (installed here) hands out the routed class
    assert utils.context_doc_to_text(chain, marks["qwen2_5_vl"])  # the bundled check reads the toolkit's record
    monkeypatch.setattr(ModelRegistryV2, "get_model_class", ModelRegistryV2.get_model_class.__wrapped__)
    with pytest.raises(SystemExit, match="hvcu-toolkit is not installed") as caught:  # lmms-eval alone: exit 1
        utils.context_doc_to_text(chain, marks["qwen2_5_vl"])
    assert type(caught.value).__name__ == "UnsupportedBackend"
    assert "pip install hvcu-toolkit" in str(caught.value)
    assert utils.context_doc_to_text(chain, marks["vllm"])  # vllm's own loop needs no toolkit


def hub_stub(family: str) -> datasets.Dataset:
    return datasets.Dataset.from_list([{"family": family, "source": "hub"}])


def test_a_local_copy_named_by_hvcu_bench_data_gives_the_packages_documents(
    exported: Path, write_dataset, monkeypatch
) -> None:
    from conftest import item

    from hvcu_tasks.lmms import context, hooks

    root = write_dataset({"affective": [item("joy_001", "ABC"), item("fear_002", "DCB", aspect="fear")]}, ext=".jpg")
    monkeypatch.setenv("HVCU_BENCH_DATA", str(root))
    utils = load_utils(exported)
    ours = utils.process_docs(hub_stub("affective")).to_list()
    assert [(d["sample_id"], d["level"], d["answer"]) for d in ours] == [
        ("joy_001", 1, "A"),
        ("joy_001", 2, "B"),
        ("joy_001", 3, "C"),
        ("fear_002", 1, "D"),
        ("fear_002", 2, "C"),
        ("fear_002", 3, "B"),
    ]
    assert ours == hooks.process_docs(hub_stub("affective")).to_list()  # identity: kind local, same fingerprint
    theirs = context.process_docs(hub_stub("affective")).to_list()
    assert utils.context_process_docs(hub_stub("affective")).to_list() == theirs


def test_a_bad_record_stops_the_load_with_one_line_naming_file_record_and_field(
    exported: Path, write_dataset, monkeypatch
) -> None:
    from conftest import item

    root = write_dataset({"implication": [item("metaphor_001", "ABC"), item("metaphor_002", "ABE")]})
    monkeypatch.setenv("HVCU_BENCH_DATA", str(root))
    with pytest.raises(SystemExit) as caught:  # a SystemExit: lmms-eval neither retries nor swallows it
        load_utils(exported).process_docs(hub_stub("implication"))
    assert str(caught.value) == (
        "HVCU-Bench implication: cannot load the data; no request was sent: "
        f"{root}/Implication-Understanding.json: id=metaphor_002: qa_levels[level=3].correct_answer_key: "
        "answer 'E' is not one of the options ['A', 'B', 'C', 'D']"
    )


def test_a_missing_image_and_a_duplicate_id_are_each_one_line(exported: Path, write_dataset, monkeypatch) -> None:
    from conftest import item

    root = write_dataset({"aesthetic": [item("color_001"), item("color_001"), item("font_001")]})
    (root / "Image" / "Aesthetic-Appreciation" / "font_001.png").unlink()
    monkeypatch.setenv("HVCU_BENCH_DATA", str(root))
    with pytest.raises(SystemExit) as caught:
        load_utils(exported).process_docs(hub_stub("aesthetic"))
    lines = str(caught.value).splitlines()
    file = root / "Aesthetic-Appreciation.json"
    assert lines == [
        f"{file}: id=font_001: image: no image found",
        f"{file}: id=color_001: id: duplicate id in family 'aesthetic' (also 'color_001')",
        f"HVCU-Bench aesthetic: 2 problem(s) in {str(root)!r} (listed above); no request was sent. Check the whole "
        f"dataset with `hvcu data validate {root}`",
    ]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_analysis_settings_are_the_packages(exported: Path, family: str) -> None:
    from hvcu_tasks.lmms import analysis_tasks as analysis
    from hvcu_tasks.lmms import hook_table, hooks

    plain = load_plain_tool().plain
    utils = load_utils(exported)
    relative = lambda rows, root: [{**r, "image_path": str(Path(r["image_path"]).relative_to(root))} for r in rows]  # noqa: E731
    for ours, theirs in (
        (utils.circular_process_docs, analysis.circular_process_docs),
        (utils.gold_process_docs, analysis.gold_process_docs),
    ):
        assert relative(ours(stub(family)).to_list(), exported / "data") == relative(
            theirs(stub(family)).to_list(), SMOKE_DIR
        )
    levels, package_levels = utils.process_docs(stub(family)), hooks.process_docs(stub(family))
    assert [plain(utils.blind_doc_to_messages(d)) for d in levels] == [
        plain(analysis.blind_doc_to_messages(d)) for d in package_levels
    ]
    gold, package_gold = utils.gold_process_docs(stub(family)), analysis.gold_process_docs(stub(family))
    assert [plain(utils.gold_doc_to_messages(d)) for d in gold] == [
        plain(analysis.gold_doc_to_messages(d)) for d in package_gold
    ]
    rotated, package_rotated = utils.circular_process_docs(stub(family)), analysis.circular_process_docs(stub(family))
    replies = ["A", "B", "the answer is C", "", "D"]  # right and wrong across rotations, an empty reply too
    ours = [utils.circular_process_results(d, [replies[i % 5]])["acc_full"] for i, d in enumerate(rotated)]
    theirs = [analysis.circular_process_results(d, [replies[i % 5]])["acc_full"] for i, d in enumerate(package_rotated)]
    names = [n.removeprefix("agg_circular_") for n in dir(utils) if n.startswith("agg_circular_")]
    assert sorted(names) == sorted(hook_table.CIRCULAR_AGGREGATIONS)
    for name in names:
        mine, package = getattr(utils, f"agg_circular_{name}")(ours), hook_table.CIRCULAR_AGGREGATIONS[name](theirs)
        assert mine == package or (mine != mine and package != package), name  # NaN (NA) equals NaN here
