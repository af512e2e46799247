"""HVCU-Bench beside every general benchmark `hvcu_suite` names, in one lmms-eval run per model, offline.

The real `lmms-eval` CLI runs `hvcu_bench_sample`, `hvcu_bench_context_sample` and the seven general tasks (MMBench
CN(CC), CN(Dev), EN(Dev), RU(Dev), HallusionBench, MMStar, MMMU) through `hvcu_context` around `openai`, against a
scripted OpenAI-compatible model (tests/fake_openai.py), with lmms-eval's GPT judge pointed at a scripted judge
(OPENAI_API_URL, as docs/evaluation.md tells users) and the general datasets served in their real schemas by the
stand-in hub (tests/standins/general.py) to the real `datasets`/`huggingface_hub` clients. Every expected number below
is worked out by hand from the scripts in tests/standins/general.py and SMOKE_WRONG here.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from itertools import permutations
from pathlib import Path

import pytest
from conftest import run_lmms_eval
from fake_openai import FakeOpenAI
from scipy.stats import binomtest
from standins.general import MODELS, _text, general_reply, judge, publish_general
from standins.hub import StandInHub, client_environment

from hvcu_tasks.cli import main
from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.core.prompts import CONTEXT_PREFIX, level_text
from hvcu_tasks.data.loaders import load_source

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
GENERAL = "mmbench_cn_cc,mmbench_cn_dev,mmbench_en_dev,mmbench_ru_dev,hallusion_bench_image,mmstar,mmmu_val"
TASKS = f"hvcu_bench_sample,hvcu_bench_context_sample,{GENERAL}"

# HVCU-Bench (the smoke sample: implication 5 chains, aesthetic 4, affective 6): where each model answers wrong.
# (model, sample, level) -> in which setting; a level-1 request reads the same in both settings.
SMOKE_WRONG = {
    ("model-b", "metaphor_001", 2): {"base", "context"},
    ("model-b", "symbolism_001", 3): {"base"},
    ("model-b", "color_001", 1): {"base", "context"},
    ("model-b", "anger_001", 3): {"base"},
    **{("model-c", f"{s}_001", 3): {"base", "context"} for s in ("metaphor", "symbolism", "contrast")},
    **{("model-c", f"{s}_001", 3): {"base", "context"} for s in ("exaggeration", "dislocation")},
}
# Score (official) = mean of the families' Acc_full:
#   model-a: every chain right: 100 in both settings.
#   model-b base: implication 3/5 = 60, aesthetic 3/4 = 75, affective 5/6 = 83.333 -> 72.78; context: 4/5, 3/4, 6/6
#     -> (80 + 75 + 100) / 3 = 85.00.
#   model-c: implication 0/5 in both settings -> (0 + 100 + 100) / 3 = 66.67.
HVCU = {"model-a": (100.0, 100.0), "model-b": (72.78, 85.0), "model-c": (66.67, 66.67)}
# The general benchmarks, from the scripts of tests/standins/general.py:
#   MMBench: model-a cn_cc 2/2, cn_dev 2/2 (the judge reads its prose as C, right), en_dev 1/2 (question 0's circular
#     copy wrong), ru_dev 1/2 -> Avg. (100 + 100 + 50 + 50) / 4 = 75; model-b 1/2, 1/2, 1/2 (both rows of question 0
#     right, question 1 wrong), 0/2 (its prose judged A, wrong) -> 37.5; model-c 2/2, 1/2, 2/2, 2/2 -> 87.5.
#   HallusionBench (4 questions; two question pairs; three figures, the VS figure-0 question left out of fAcc):
#     model-a: right, wrong, "I cannot tell" (unclear: right for a VS question without a figure), right -> aAcc 75,
#     qAcc 1/2 = 50, fAcc 2/3; model-b: wrong, right, wrong, right -> 50, 0, 2/3; model-c: all right -> 100.
#   MMStar (7 questions, one per l2 category): model-a wrong on image emotion and diagram reasoning -> Avg. 5/7 =
#     71.43, categories CP 50 (mean of its two l2), FP 100, IR 100, LR 0, ST 100, MA 100 (six-column mean 75.00);
#     model-b right on the first three only -> 3/7 = 42.86; model-c all right -> 100.
#   MMMU (4 questions): model-a 3/4, model-b 1/4, model-c 2/4.
GENERAL_EXPECTED = {
    "model-a": {"MMBench Avg.": 75.0, "HallusionBench aAcc": 75.0, "MMStar Avg.": 500 / 7, "MMMU Acc": 75.0},
    "model-b": {"MMBench Avg.": 37.5, "HallusionBench aAcc": 50.0, "MMStar Avg.": 300 / 7, "MMMU Acc": 25.0},
    "model-c": {"MMBench Avg.": 87.5, "HallusionBench aAcc": 100.0, "MMStar Avg.": 100.0, "MMMU Acc": 50.0},
}
PAPER = {  # the paper's two models with both numbers: Tables 2/6 (Score) and 7
    "Qwen3-VL-Instruct (4B)": {"Score": 41.24, "MMBench Avg.": 77.88, "HallusionBench aAcc": 60.25,
                               "MMStar Avg.": 57.45, "MMMU Acc": 48.56},
    "Qwen3-VL-4B-Bridge": {"Score": 47.41, "MMBench Avg.": 78.18, "HallusionBench aAcc": 59.62,
                           "MMStar Avg.": 64.71, "MMMU Acc": 51.78},
}  # fmt: skip


def _levels() -> dict[str, tuple[str, int, str]]:
    """The smoke sample's level texts -> (sample id, level, gold letter)."""
    return {
        level_text(lv.question, lv.options): (s.id, lv.level, lv.answer)
        for family in FAMILIES
        for s in load_source("smoke", family).samples
        for lv in s.levels
    }


def scripted_model() -> FakeOpenAI:
    """The three models: HVCU-Bench replies from SMOKE_WRONG, general replies from tests/standins/general.py."""
    levels = _levels()

    def answer(request: dict) -> str:
        model, text = request["model"], _text(request)
        found = general_reply(model, text)
        if found is not None:
            return found
        (sample, level, gold), *_ = [v for k, v in levels.items() if k in text]
        setting = "context" if text.startswith(CONTEXT_PREFIX) else "base"  # level 1 reads the same in both
        if setting in SMOKE_WRONG.get((model, sample, level), set()):
            return f"Answer: {'B' if gold == 'A' else 'A'}"
        return f"Answer: {gold}"

    return FakeOpenAI(answer)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Each model's run of every task (its own --output_path, as lmms-eval's HallusionBench judge needs)."""
    root = tmp_path_factory.mktemp("suite")
    (root / "runs").mkdir()
    hub = StandInHub().start()
    publish_general(hub)
    with scripted_model() as model, FakeOpenAI(judge) as judge_server:
        env = client_environment(hub, root / "hf") | {
            "NO_PROXY": "127.0.0.1",  # the model and the judge; the hub stays the proxy of every other host
            "no_proxy": "127.0.0.1",
            "HF_TOKEN": "hf_stand_in",
            "OPENAI_API_URL": f"{judge_server.base_url}/chat/completions",
            "OPENAI_API_KEY": "sk-stand-in",
            "API_TYPE": "openai",
        }
        for name in MODELS:
            args = f"inner=openai,model_version={name},base_url={model.base_url},api_key=x"
            run = run_lmms_eval(
                ["--model", "hvcu_context", "--model_args", args, "--tasks", TASKS, "--log_samples"],
                root / "runs" / name,
                env=env,
                expect_ok=False,
            )
            assert run["returncode"] == 0, run["output"][-4000:]
        yield {"root": root, "runs": root / "runs", "hub": hub, "judged": list(judge_server.requests), "env": env}
    hub.stop()


def report_json(out: Path, *args: str) -> dict[str, dict]:
    """Run `hvcu report ... --format json --out OUT`; return its tables by name."""
    assert main(["report", *args, "--format", "json", "--out", str(out)]) == 0
    return {t["name"]: t for t in json.loads((out / "report.json").read_text())}


def rows_of(table: dict) -> dict[str, dict]:
    """Return a table's rows by their first cell, each as {column: cell}."""
    return {r[0]: dict(zip(table["columns"], r, strict=True)) for r in table["rows"]}


def exact(k: int, n: int) -> tuple[float, float]:
    """Clopper–Pearson 95% interval in percent (scipy's binomtest, an implementation independent of the report)."""
    ci = binomtest(k, n).proportion_ci(0.95, "exact")
    return 100 * ci.low, 100 * ci.high


def mover(counts: list[tuple[int, int]]) -> list[float]:
    """The mean of shares with each share's exact interval combined by MOVER, rounded as the report shows it."""
    shares = [100 * k / n for k, n in counts]
    mean = sum(shares) / len(shares)
    below = math.sqrt(sum((p - exact(k, n)[0]) ** 2 for p, (k, n) in zip(shares, counts, strict=True)))
    above = math.sqrt(sum((exact(k, n)[1] - p) ** 2 for p, (k, n) in zip(shares, counts, strict=True)))
    return [mean - below / len(shares), mean + above / len(shares)]


def interval(cell: str) -> list[float]:
    """Parse an interval cell '[a, b]'."""
    return [float(x) for x in cell.strip("[]").split(",")]


def test_lmms_eval_scores_each_general_task_as_worked_out_by_hand(suite: dict) -> None:
    for name, (base, context) in HVCU.items():
        (found,) = (suite["runs"] / name / name).glob("*_results.json")  # submissions/: MMBench's own *_results.json
        results = json.loads(found.read_text())["results"]
        assert results["hvcu_bench_sample"]["acc_full_official,none"] == pytest.approx(base, abs=0.005)
        assert results["hvcu_bench_context_sample"]["acc_full_official,none"] == pytest.approx(context, abs=0.005)
        split = [results[f"mmbench_{s}"]["gpt_eval_score,none"] for s in ("cn_cc", "cn_dev", "en_dev", "ru_dev")]
        assert sum(split) / 4 == GENERAL_EXPECTED[name]["MMBench Avg."]
        assert results["hallusion_bench_image"]["aAcc,none"] == GENERAL_EXPECTED[name]["HallusionBench aAcc"]
        assert 100 * results["mmstar"]["average,none"] == pytest.approx(GENERAL_EXPECTED[name]["MMStar Avg."])
        assert 100 * results["mmmu_val"]["mmmu_acc,none"] == GENERAL_EXPECTED[name]["MMMU Acc"]
    first = json.loads(next((suite["runs"] / "model-a" / "model-a").glob("*_results.json")).read_text())["results"]
    assert (
        first["hallusion_bench_image"]["qAcc,none"] == 50.0 and first["hallusion_bench_image"]["fAcc,none"] == 66.6667
    )
    assert [first["mmbench_cn_dev"]["gpt_eval_score,none"], first["mmbench_en_dev"]["gpt_eval_score,none"]] == [100, 50]
    # the judge: one MMBench prose reply of model-a and of model-b, and each model's four HallusionBench replies
    mmbench = [r for r in suite["judged"] if not _text(r).startswith("Imagine you are an intelligent teacher")]
    assert len(mmbench) == 2 and len(suite["judged"]) == 2 + 3 * 4
    # nothing left the machine: the only other host asked is the hub's datasets-server (dataset sizes), refused
    assert {r.path.split("?")[0] for r in suite["hub"].foreign()} <= {"/info"}


def test_the_per_model_view_holds_both_settings_and_every_general_benchmark_in_every_format(
    suite: dict, tmp_path: Path, capsys
) -> None:
    runs = [str(suite["runs"] / m) for m in ("model-a", "model-b")]
    tables = report_json(tmp_path / "json", *runs)
    view = rows_of(tables["per_model"])
    assert list(view) == ["model-a†", "model-b†", "Qwen3-VL-4B-Bridge", "Qwen3-VL-Instruct (4B)"]  # best Score first
    a, b = view["model-a†"], view["model-b†"]
    assert (a["Score (official)"], a["Context (official)"]) == (100.0, 100.0)
    assert b["Score (official)"] == pytest.approx(72.78, abs=0.005) and b["Context (official)"] == pytest.approx(85.0)
    assert interval(a["95% CI"]) == pytest.approx(mover([(5, 5), (4, 4), (6, 6)]), abs=0.005)
    assert interval(b["Context 95% CI"]) == pytest.approx(mover([(4, 5), (3, 4), (6, 6)]), abs=0.005)
    assert (a["MMBench CN(CC)"], a["MMBench CN(Dev)"], a["MMBench EN(Dev)"], a["MMBench RU(Dev)"]) == (100, 100, 50, 50)
    assert a["MMBench Avg."] == 75.0 and b["MMBench Avg."] == 37.5
    assert (a["HallusionBench qAcc"], a["HallusionBench aAcc"]) == (50.0, 75.0)
    assert a["HallusionBench fAcc"] == 66.6667
    assert [a[f"MMStar {c}"] for c in ("CP", "FP", "IR", "LR", "ST", "MA")] == [50.0, 100.0, 100.0, 0.0, 100.0, 100.0]
    assert a["MMStar Avg."] == pytest.approx(500 / 7) and a["MMMU Acc"] == 75.0
    # intervals: exact per stratum, combined by MOVER, from the counts in the sample logs
    assert interval(a["MMBench Avg. 95% CI"]) == pytest.approx(mover([(2, 2), (2, 2), (1, 2), (1, 2)]), abs=0.005)
    assert interval(a["HallusionBench aAcc 95% CI"]) == pytest.approx(exact(3, 4), abs=0.005)
    assert interval(a["MMStar Avg. 95% CI"]) == pytest.approx(mover([(1, 1), (0, 1), (1, 1), (1, 1), (0, 1),
                                                                      (1, 1), (1, 1)]), abs=0.005)  # fmt: skip
    assert interval(b["MMMU Acc 95% CI"]) == pytest.approx(exact(1, 4), abs=0.005)
    paper = view["Qwen3-VL-Instruct (4B)"]  # one name for the paper's model, as on the leaderboard
    assert paper["Source"] == "[paper]" and paper["MMStar Avg."] == 57.45 and paper["Score (official)"] == 41.24
    assert view["Qwen3-VL-4B-Bridge"]["Context (official)"] == 58.83  # the paper's Table 6
    notes = tables["per_model"]["notes"]
    mmstar = "model-a†: MMStar Avg. 71.43 (lmms-eval's mean over its l2 categories); the mean of its six category"
    assert any(n.startswith(f"{mmstar} columns, as the paper computes Table 7's, is 75.00") for n in notes)
    assert "general_benchmarks" not in tables  # the per-model view replaces the separate Table 7 layout
    # Markdown: the same row; HTML: the index and the model's own page
    assert main(["report", *runs, "--format", "md"]) == 0
    markdown = capsys.readouterr().out
    low, high = mover([(2, 2), (2, 2), (1, 2), (1, 2)])
    assert "| model-a† | 100.00 | [" in markdown and f"| 75.00 | [{low:.2f}, {high:.2f}] |" in markdown
    assert main(["report", *runs, "--format", "html", "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "models" / "model-a.html").read_text()
    index = (tmp_path / "site" / "index.html").read_text()
    for html in (index, page):
        assert "Per model: HVCU-Bench beside the general benchmarks" in html and "<td>71.43</td>" in html
    assert "Qwen3-VL-Instruct (4B)" not in page  # the model page holds the model's own row
    assert (tmp_path / "site" / "figures" / "cross_benchmark.svg").is_file()


def kendall_by_hand(x: list[float], y: list[float]) -> tuple[float, float]:
    """Kendall's τ (no ties) from the concordant and discordant pairs, and its exact two-sided p-value from all
    orderings of y."""

    def tau(ys: tuple[float, ...]) -> float:
        pairs = [(i, j) for i in range(len(x)) for j in range(i + 1, len(x))]
        return sum(1 if (x[i] - x[j]) * (ys[i] - ys[j]) > 0 else -1 for i, j in pairs) / len(pairs)

    observed = tau(tuple(y))
    every = [tau(p) for p in permutations(y)]
    return observed, sum(abs(t) >= abs(observed) - 1e-12 for t in every) / len(every)


def test_a_published_board_keeps_the_general_numbers_and_the_cross_benchmark_table_ranks_five_models(
    suite: dict, tmp_path: Path
) -> None:
    first = report_json(tmp_path / "first", str(suite["runs"] / "model-a"), str(suite["runs"] / "model-b"))
    # four models (a > b > Bridge > Instruct on HVCU-Bench); by hand, concordant - discordant of 6 pairs: MMBench 2 - 4,
    # HallusionBench 3 - 3 (Bridge 59.62 below Instruct 60.25), MMStar 4 - 2, MMMU 4 - 2; too few models for an interval
    taus = {r[0]: (r[2], r[3]) for r in first["cross_benchmark"]["rows"]}
    assert taus == {
        "MMBench Avg.": (pytest.approx(-1 / 3), None),
        "HallusionBench aAcc": (0.0, None),
        "MMStar Avg.": (pytest.approx(1 / 3), None),
        "MMMU Acc": (pytest.approx(1 / 3), None),
    }
    published = json.loads((tmp_path / "first" / "leaderboard.json").read_text())
    a = next(e for e in published["entries"] if e["model"] == "model-a")
    assert a["general"]["MMMU Acc"] == 75.0 and a["general_ci"]["MMMU Acc"] == pytest.approx(list(exact(3, 4)))
    tables = report_json(tmp_path / "second", "--base", str(tmp_path / "first" / "leaderboard.json"),
                         str(suite["runs"] / "model-c"))  # fmt: skip
    view = rows_of(tables["per_model"])
    assert view["model-a†"]["MMStar Avg."] == pytest.approx(500 / 7) and view["model-b†"]["MMBench Avg."] == 37.5
    assert view["model-c†"]["HallusionBench aAcc"] == 100.0
    # Kendall's τ over the five models with both numbers: HVCU-Bench orders a > b > c > Bridge > Instruct
    order = ["model-a", "model-b", "model-c", "Qwen3-VL-4B-Bridge", "Qwen3-VL-Instruct (4B)"]
    hvcu = [HVCU[m][0] if m in HVCU else PAPER[m]["Score"] for m in order]
    cross = rows_of(tables["cross_benchmark"])
    # by hand: MMStar 6 concordant, 4 discordant pairs -> 0.2; MMMU 6/4 -> 0.2; MMBench 4/6 -> -0.2; HallusionBench 5/5
    for label, by_hand in (("MMStar Avg.", 0.2), ("MMMU Acc", 0.2), ("MMBench Avg.", -0.2), ("HallusionBench aAcc", 0)):
        other = [GENERAL_EXPECTED[m][label] if m in GENERAL_EXPECTED else PAPER[m][label] for m in order]
        tau, p = kendall_by_hand(hvcu, other)
        assert tau == pytest.approx(by_hand) and cross[label]["Kendall's τ"] == pytest.approx(tau)
        assert cross[label]["Models"] == 5 and float(cross[label]["p"]) == pytest.approx(p, abs=0.0005)
        z, half = math.atanh(tau), 1.959964 * math.sqrt(0.437 / (5 - 4))  # Fieller, Hartley and Pearson
        assert interval(cross[label]["95% CI"]) == pytest.approx([math.tanh(z - half), math.tanh(z + half)], abs=0.005)
    # MMStar ranks: c 1, a 2, Bridge 3, Instruct 4, b 5: model-b moves most (HVCU-Bench 2 -> MMStar 5)
    assert cross["MMStar Avg."]["Rank moves most (HVCU-Bench → benchmark)"] == "model-b† (2 → 5)"


def bonett_price(a_only: int, b_only: int, n: int) -> list[float]:
    """The paired interval (percent) of B − A on one stratum of n units: one unit added to each discordant cell."""
    pa, pb = (a_only + 1) / (n + 2), (b_only + 1) / (n + 2)
    se = math.sqrt((pa + pb - (pb - pa) ** 2) / (n + 2))
    return [100 * (pb - pa - 1.959964 * se), 100 * (pb - pa + 1.959964 * se)]


def test_compare_sets_the_change_on_hvcu_bench_beside_the_change_on_each_general_benchmark(
    suite: dict, tmp_path: Path
) -> None:
    a, b = str(suite["runs"] / "model-a"), str(suite["runs"] / "model-b")
    tables = report_json(tmp_path / "cmp", a, b, "--compare")
    rows = rows_of(tables["compare_general"])
    base = rows["HVCU-Bench Score (official), base"]
    assert (base["A"], base["Δ (B − A)"]) == (100.0, -27.22) and base["Method"] == "paired, 15 units both answered"
    assert rows["HVCU-Bench Score (official), context"]["Δ (B − A)"] == -15.0
    mmmu = rows["MMMU Acc"]  # model-a alone right on Art_2 and Math_1, model-b alone on none
    assert (mmmu["A"], mmmu["B"], mmmu["Δ (B − A)"]) == (75.0, 25.0, -50.0)
    assert interval(mmmu["95% CI"]) == pytest.approx(bonett_price(2, 0, 4), abs=0.005)
    assert mmmu["Method"] == "paired, 4 units both answered"
    assert rows["MMStar Avg."]["Method"] == "paired, 7 units both answered"
    assert rows["HallusionBench aAcc"]["Method"] == "paired, 4 units both answered"  # lmms-eval kept the verdicts
    assert rows["MMBench Avg."]["Method"] == "unpaired, from the counts"  # only the judge knows MMBench's verdicts
    assert rows["MMBench Avg."]["Δ (B − A)"] == -37.5


def run_without_token(suite: dict, tmp_path: Path, tasks: str, cold: bool) -> tuple[subprocess.CompletedProcess, list]:
    """Run lmms-eval as a user does (no --verbosity DEBUG, where lmms-eval re-raises), no Hugging Face token
    configured, against the stand-in hub with a cold cache (`cold`) or the one the suite's runs filled."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("HF_", "HTTP", "ALL_PROXY", "NO_PROXY"))}
    env |= {k: v for k, v in suite["env"].items() if k != "HF_TOKEN"}
    env |= client_environment(suite["hub"], tmp_path / "hf") if cold else {"HF_HOME": str(tmp_path / "hf")}
    env |= {"NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    with FakeOpenAI(lambda request: "Answer: A") as model:
        args = f"inner=openai,model_version=model-a,base_url={model.base_url},api_key=x"
        done = subprocess.run(
            [str(BIN / "lmms-eval"), "--model", "hvcu_context", "--model_args", args, "--tasks", tasks,
             "--output_path", str(tmp_path / "out")],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        return done, list(model.requests)


def test_a_task_that_needs_a_hub_token_without_one_is_refused_in_one_line_before_any_request(
    suite: dict, tmp_path: Path
) -> None:
    suite["hub"].clear()
    done, asked = run_without_token(suite, tmp_path, TASKS, cold=True)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]  # lmms-eval alone: "Error during evaluation", exit 0, no results
    assert output.rstrip("\n").splitlines()[-1] == (
        "hvcu: error: lmms-eval task hallusion_bench_image reads the hub dataset lmms-lab-encoder/HallusionBench with "
        "a Hugging Face token (its YAML sets dataset_kwargs: token: True) and none is configured: run `hf auth login` "
        "or set HF_TOKEN, then rerun (nothing was asked of the model)"
    )
    assert asked == [] and not list((tmp_path / "out").rglob("*_results.json"))
    assert suite["hub"].requests == []  # the client refuses before asking the hub anything


def test_a_dataset_already_in_the_cache_still_loads_without_a_token(suite: dict, tmp_path: Path) -> None:
    done, asked = run_without_token(suite, tmp_path, "mmstar", cold=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert len(asked) == 7 and list((tmp_path / "out").rglob("*_results.json"))
