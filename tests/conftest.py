"""Shared fixtures: datasets in the authors' layout, result files, the tiny model and the lmms-eval CLI."""

from __future__ import annotations

import errno
import glob
import inspect
import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import lmms_worker
import pytest
from hypothesis import settings as hypothesis_settings
from PIL import Image

from hvcu_tasks import settings
from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.data.loaders import load_source

# torch on one thread in the tests and every process they start (unless the caller set OMP_NUM_THREADS): the tiny
# models gain nothing from threads, which only spin (a tiny-model lmms-eval run took 47 s of CPU on 2 threads and
# 22 s on one); set before anything imports torch.
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ACCELERATE_TWO_CPU_RANKS = [
    *(str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"),
    *("--main_process_port", "0", "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "lmms_eval"),
]
"""`accelerate launch` of lmms-eval as two processes on the CPU (data parallelism), before lmms-eval's arguments.

`--cpu` would start ONE process (accelerate's simple launcher); `--multi_gpu` starts two through
torch.distributed.run, and without a GPU accelerate joins them over gloo (MULTI_CPU). Port 0: a free one per launch.
"""


def two_rank_shares(output: str) -> dict[str, list[int]]:
    """Each task's requests per rank of a two-rank launch (smaller share first), read from lmms-eval's DEBUG log.

    Fails unless ranks 0 and 1 of world size 2 both built every task's requests.
    """
    built = re.findall(r"requests-(\S+?)-\d+shot-rank(\d+)-world_size(\d+)", output)
    shares: dict[str, list[int]] = {}
    for task, count in re.findall(r"Task: (\S+); number of requests on this rank: (\d+)", output):
        shares.setdefault(task, []).append(int(count))
    assert shares and {(task, rank, size) for task, rank, size in built} == {
        (task, rank, "2") for task in shares for rank in "01"
    }, output[-3000:]
    return {task: sorted(counts) for task, counts in shares.items()}


# Property tests: the same examples on every run (derandomize), no per-example time limit (a loaded 2-core machine
# made one example exceed hypothesis' 200 ms default once); the failing example is printed to reproduce it.
hypothesis_settings.register_profile("hvcu", deadline=None, derandomize=True, print_blob=True)
hypothesis_settings.load_profile("hvcu")


def pyproject() -> dict:
    """This checkout's pyproject.toml as a table."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pytest's own dependency
        import tomli as tomllib
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


@pytest.fixture(scope="session", autouse=True)
def _session_hvcu_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point the toolkit's cache ($HVCU_CACHE_DIR) at a session folder, for module and session fixtures too."""
    folder = tmp_path_factory.mktemp("hvcu-cache-session")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HVCU_CACHE_DIR", str(folder))
        yield folder


@pytest.fixture(autouse=True)
def hvcu_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the toolkit's cache ($HVCU_CACHE_DIR) at a fresh folder per test, never the user's own cache."""
    folder = tmp_path_factory.mktemp("hvcu-cache")
    monkeypatch.setenv("HVCU_CACHE_DIR", str(folder))
    return folder


def level(n: int, answer: str = "A", question: str | None = None) -> dict:
    """Return one authors'-format level with four options."""
    return {
        "level": n,
        "question": question or f"Question at level {n}?",
        "options": [{"option_key": k, "option_text": f"option {k} of level {n}"} for k in "ABCD"],
        "correct_answer_key": answer,
    }


def item(sid, answers: str = "ABC", **extra) -> dict:
    """Return one authors'-format item whose three levels have the given answers."""
    return {"id": sid, "qa_levels": [level(i + 1, a) for i, a in enumerate(answers)], **extra}


@pytest.fixture
def write_dataset(tmp_path: Path) -> Callable[..., Path]:
    """Write an authors'-layout dataset (JSON + Image/<stem>/<id>.<ext>) and return its folder."""

    def write(items_by_family: dict[str, list[dict]], ext: str = ".png", images: bool = True) -> Path:
        root = tmp_path / "data"
        for family, items in items_by_family.items():
            stem = FAMILIES[family][1]
            root.mkdir(parents=True, exist_ok=True)
            (root / f"{stem}.json").write_text(json.dumps(items), encoding="utf-8")
            if images:
                (root / "Image" / stem).mkdir(parents=True, exist_ok=True)
                for it in items:
                    Image.new("RGB", (8, 8), "red").save(root / "Image" / stem / f"{it['id']}{ext}")
        return root

    return write


# Deterministic replies for the smoke sample: (family, id) -> replies for levels 1, 2, 3 (None = no parsable key).
SMOKE_REPLIES: dict[tuple[str, str], tuple[str | None, str | None, str | None]] = {
    ("implication", "metaphor_001"): ("B", "A", "C"),  # all right
    ("implication", "symbolism_001"): ("B", "D", "B"),  # L1 wrong
    ("implication", "contrast_001"): ("C", "B", "B"),  # L2 wrong
    ("implication", "exaggeration_001"): ("D", "B", "C"),  # L3 wrong
    ("implication", "dislocation_001"): ("C", "C", None),  # L3 unparsable
    ("aesthetic", "color_001"): ("D", "B", "A"),  # all right
    ("aesthetic", "composition_001"): ("C", "A", "D"),  # all right
    ("aesthetic", "font_001"): ("A", "B", "A"),  # L1 wrong
    ("aesthetic", "graphics_001"): ("B", "A", "A"),  # L2 and L3 wrong
    ("affective", "joy_001"): ("A", "B", "C"),
    ("affective", "affection_001"): ("B", "D", "A"),
    ("affective", "wonder_001"): ("C", "A", "B"),
    ("affective", "anger_001"): ("D", "C", "B"),
    ("affective", "fear_001"): ("A", "B", "C"),
    ("affective", "sadness_001"): (None, "B", "A"),  # L1 unparsable
}

# The metrics those replies must give, computed by hand.
SMOKE_EXPECTED = {
    "implication": {
        "acc_l1_perc": 80.0,
        "acc_l2_bridge": 80.0,
        "acc_l3_conn": 60.0,
        "acc_full": 20.0,
        "invalid_conn": 20.0,
        "errors_at_perc": 1,
        "errors_at_bridge": 1,
        "errors_at_conn": 2,
        "error_share_conn": 50.0,
        "full_metaphor": 100.0,
        "full_symbolism": 0.0,
    },
    "aesthetic": {
        "acc_l1_perc": 75.0,
        "acc_l2_bridge": 75.0,
        "acc_l3_conn": 75.0,
        "acc_full": 50.0,
        "errors_at_perc": 1,
        "errors_at_bridge": 1,
        "errors_at_conn": 0,
        "full_color": 100.0,
    },
    "affective": {
        "acc_l1_perc": 500 / 6,
        "acc_l2_bridge": 100.0,
        "acc_l3_conn": 100.0,
        "acc_full": 500 / 6,
        "invalid_perc": 100 / 6,
        "errors_at_perc": 1,
        "error_share_perc": 100.0,
        "full_sadness": 0.0,
    },
}
SMOKE_SCORE = round((20.0 + 50.0 + 500 / 6) / 3, 2)  # 51.11


@pytest.fixture
def authors_results(tmp_path: Path) -> Path:
    """Write authors'-format result files (one per family) holding SMOKE_REPLIES; return their folder."""
    out = tmp_path / "authors_results"
    out.mkdir()
    for family in FAMILIES:
        preds = []
        for s in load_source("smoke", family).raise_for_problems():
            replies = SMOKE_REPLIES[(family, s.id)]
            turns = [
                {"level": lv.level, "correct_answer_key": lv.answer, "model_response_key": r}
                for lv, r in zip(s.levels, replies, strict=True)
            ]
            preds.append({"id": s.id, "conversation_turns": turns})
        (out / f"results_{FAMILIES[family][1]}.json").write_text(json.dumps({"predictions": preds}), encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the tiny random Qwen2.5-VL once per session."""
    from hvcu_tasks.dev.tiny_model import build_qwen2_5_vl

    return build_qwen2_5_vl(tmp_path_factory.mktemp("tiny") / "qwen2_5_vl")


FRESH_CLI_ENV = "HVCU_TEST_FRESH_CLI"
"""Set to 1 to run every lmms-eval of run_lmms_eval as a fresh `lmms-eval` process (to compare with the worker)."""


def run_lmms_eval(
    args: list[str], out: Path, env: dict | None = None, expect_ok: bool = True, fresh: bool = False
) -> dict:
    """Run lmms-eval and return the parsed results JSON (lmms-eval exits 0 on crashes).

    The run happens in a forked child of a long-lived worker that imported lmms-eval once (tests/lmms_worker.py),
    as a fresh `lmms-eval` process would run it; `fresh=True` starts the real CLI instead (where the process itself
    is under test).
    """
    argv = [*args, "--output_path", str(out), "--verbosity", "DEBUG"]
    call_env = {**os.environ, **(env or {})}
    if fresh or os.environ.get(FRESH_CLI_ENV):
        proc = subprocess.run(
            [str(BIN / "lmms-eval"), *argv], capture_output=True, text=True, env=call_env, timeout=900, cwd=out.parent
        )
        returncode, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    else:
        ran = lmms_worker.POOL.run(argv, call_env, out.parent, timeout=900)
        returncode, stdout, stderr = ran.returncode, ran.stdout, ran.stderr
    found = sorted(glob.glob(str(out / "**" / "*_results.json"), recursive=True))
    if not expect_ok:
        return {"returncode": returncode, "output": stdout + stderr, "results": found}
    assert found, f"lmms-eval wrote no results file (rc={returncode}):\n{stdout[-4000:]}\n{stderr[-4000:]}"
    return json.loads(Path(found[0]).read_text())


@pytest.fixture(scope="session")
def lmms_eval_tasks_indexed_once() -> Iterator[None]:
    """lmms-eval's own task folder indexed once in this process, for tests that build TaskManagers themselves.

    Each `TaskManager()` indexes lmms-eval's ~2,000 task files again (3-7 s); with this fixture it gets a copy of
    the first index, as every run of tests/lmms_worker.py does. This package's folder is still indexed each time.
    """
    undo = lmms_worker.index_lmms_eval_tasks_once()
    yield
    undo()


@pytest.fixture(scope="session", autouse=True)
def _lmms_workers() -> Iterator[None]:
    """Stop this pytest process's lmms-eval workers (tests/lmms_worker.py) at the end of the session."""
    yield
    lmms_worker.POOL.close()


ADVERSARIAL_DIR = Path(__file__).resolve().parent / "adversarial"


BROWSER_HELPERS = ("chromium(", "chromium_dom(", "dump_dom(", "probed(")
"""Calls that load a page in headless Chromium: a test calling one is marked `browser`."""
SLOW_TIMEOUT_S = 1200
"""The time limit of a `slow` test (pyproject's `timeout` is the default for the others)."""


def _calls_chromium(function: object) -> bool:
    """Whether a test function's own source calls one of BROWSER_HELPERS."""
    try:
        source = inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        return False
    return any(helper in source for helper in BROWSER_HELPERS)


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark the fault suite `adversarial` and Chromium tests `browser`; give slow tests their time limit."""
    if ADVERSARIAL_DIR in Path(str(item.fspath)).resolve().parents:
        item.add_marker(pytest.mark.adversarial)
    if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
        item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
    if _calls_chromium(getattr(item, "function", None)):
        item.add_marker(pytest.mark.browser)


BROWSER_SCOPE = "browser"


def browser_files(root: Path = REPO / "tests") -> frozenset[str]:
    """The test files (relative to the repository, as in node ids) whose tests load pages in Chromium."""
    found = set()
    for path in sorted(root.rglob("test_*.py")):
        if any(helper in path.read_text(encoding="utf-8") for helper in BROWSER_HELPERS):
            found.add(path.relative_to(REPO).as_posix())
    return frozenset(found)


def work_scope(nodeid: str, together: frozenset[str]) -> str:
    """The unit of work a test is scheduled in under xdist: its file, or the one scope of all Chromium test files."""
    path = nodeid.split("::", 1)[0]
    return BROWSER_SCOPE if path in together else path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the work scopes heaviest first (most `slow` tests, then most tests); a file keeps its own test order.

    With `--no-loadscope-reorder` (the Makefile) the xdist workers take the scopes in this order, so the long
    end-to-end files start first and the many short files fill the end evenly. xdist's own order (most tests first)
    left the files of two long tests each (the training loop, the killed paid run: 100 s apiece) for the very end.
    """
    together = browser_files()
    scopes = [work_scope(item.nodeid, together) for item in items]
    slow, count = Counter(), Counter(scopes)
    for scope, item in zip(scopes, items, strict=True):
        slow[scope] += item.get_closest_marker("slow") is not None
    first = {scope: index for index, scope in reversed(list(enumerate(scopes)))}
    order = {id(item): (-slow[scope], -count[scope], first[scope]) for scope, item in zip(scopes, items, strict=True)}
    items.sort(key=lambda item: order[id(item)])


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: without xdist, never called
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadfile` with every Chromium test file in one scope (one Chromium at a time, module fixtures once).

    A file's tests stay on one worker, so its module fixtures are built once and a port it holds is its own.
    pytest-xdist's `loadgroup` cannot do this here: it groups by suffixing node ids, which pytest 9 no longer lets a
    plugin change (its `xdist_group` marker is silently ignored).
    """
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    together = browser_files()

    class LoadFileBrowsersTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_scope(super()._split_scope(nodeid), together)

    return LoadFileBrowsersTogether(config, log)


def full_disk(monkeypatch, at_call: int) -> None:
    """Make the `at_call`-th file write put half its data on disk and fail with ENOSPC (a disk filling up).

    The image-check cache is off meanwhile, so only the command's own writes are counted (the cache's own
    full-disk behaviour is tested in test_image_check_cache.py).
    """
    monkeypatch.setenv("HVCU_CACHE_DIR", "off")
    calls = {"n": 0}
    for method in ("write_text", "write_bytes"):
        real = getattr(Path, method)

        def write(self: Path, data, *args, _real=real, **kwargs):
            calls["n"] += 1
            if calls["n"] == at_call:
                _real(self, data[: len(data) // 2], *args, **kwargs)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
            return _real(self, data, *args, **kwargs)

        monkeypatch.setattr(Path, method, write)


def run(*argv: str, capsys) -> tuple[int, str, str]:
    """Run `hvcu ARGV` in-process; return its exit status, stdout and stderr."""
    from hvcu_tasks.cli import main

    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(err: str) -> str:
    """Assert stderr is exactly one `error: ...` line and no traceback; return that line."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def smoke_predictions(path: Path, reply: Callable[[str, object], str] = lambda _family, lv: lv.answer) -> Path:
    """Write hvcu_replay predictions for every level of the smoke sample (`reply(family, level)`; default gold)."""
    with path.open("w", encoding="utf-8") as out:
        for family in FAMILIES:
            for s in load_source("smoke", family).raise_for_problems():
                for lv in s.levels:
                    record = {"family": family, "sample_id": s.id, "level": lv.level, "response": reply(family, lv)}
                    out.write(json.dumps(record) + "\n")
    return path


@pytest.fixture
def fresh_image_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Start and end a test with an empty image cache, the default cache budget and the API image hook installed."""
    from hvcu_tasks.data import images
    from hvcu_tasks.lmms import plugin

    monkeypatch.delenv(settings.IMAGE_CACHE_ENV, raising=False)
    plugin.install_image_hook()
    images.reset()
    yield
    images.reset()


@pytest.fixture
def image_decodes(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count the decodes `images.document_image` makes, by the name its errors give the image (path and sample)."""
    from hvcu_tasks.data import images

    counts: Counter[str] = Counter()
    real = images.open_image

    def counting(source, label=None):
        counts[label] += 1
        return real(source, label)

    monkeypatch.setattr(images, "open_image", counting)
    return counts


@pytest.fixture
def stand_in_hub(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """A stand-in Hugging Face Hub on 127.0.0.1 (tests/standins/hub.py) that this process's clients talk to.

    `huggingface_hub` and `datasets` (their import-time settings too) point at it, with fresh caches; it is also
    their proxy, so a request meant for any other host is recorded (`hub.foreign()`) instead of leaving.
    `hub.home` is the Hugging Face cache folder; `hub.go_offline()` turns on offline mode (the warm cache stays).
    What `hvcu_tasks.data.hub` remembers per process (revisions resolved, layouts decided, loads, lines said)
    starts empty.
    """
    from huggingface_hub.utils import _http
    from standins.hub import StandInHub, point_clients

    from hvcu_tasks.data import hub as hub_loads

    hub_loads.reset()  # a fresh process for each test
    hub = StandInHub().start()
    hub.home = tmp_path_factory.mktemp("hf-home")
    point_clients(monkeypatch, hub, hub.home)
    hub.go_offline = lambda: point_clients(monkeypatch, hub, hub.home, offline=True)
    try:
        yield hub
    finally:
        hub.stop()
        hub_loads.reset()
        _http.close_session()


def report_metrics(out: Path) -> dict[str, dict]:
    """The run's lmms-eval results, each family task completed with the diagnostics `hvcu report` computes.

    The diagnostics (per aspect, error attribution, invalid, position, propagation, plain circular accuracy) are
    not reported to lmms-eval; `hvcu report` computes them from the --log_samples file (results/diagnostics.py).
    Keys as lmms-eval writes them: 'name,none'.
    """
    from hvcu_tasks.results.diagnostics import family_of, with_diagnostics

    found = sorted(glob.glob(str(out / "**" / "*_results.json"), recursive=True))
    assert found, f"no results file under {out}"
    results = json.loads(Path(found[0]).read_text())["results"]
    for task, values in results.items():
        if family_of(task) is not None and isinstance(values, dict):
            reported = {k.split(",")[0]: v for k, v in values.items() if k.endswith(",none") and "_stderr" not in k}
            metrics = with_diagnostics(task, reported, Path(found[0]))[0]
            results[task] = {**values, **{f"{k},none": v for k, v in metrics.items()}}
    return results
