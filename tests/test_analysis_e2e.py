"""The analyses (issue 15) through the real `lmms-eval` CLI: replay model, wrapper, OpenAI backend, data parallelism.

One replay mix (CIRC_MIX) answers every setting. Per level it replies with
  T: the gold option's text  -> right in every rotation (circular-right), right in the base order;
  W: the text of the option after the gold one (cyclically) -> never right;
  A: the letter "A"           -> right in exactly one rotation; in the base order right only when the gold is A;
  L: the gold letter of the base order -> right in rotation 0 only; right in the base order.
The replay model answers a (sample, level) the same whatever the chat, so base, context, blind and gold context
give the same outcomes (base order); circular evaluation rotates the options under the same replies.
Every expected number below is worked out by hand from the smoke sample's gold keys (in the comments).
"""

from __future__ import annotations

import glob
import json
import subprocess
from functools import cache
from pathlib import Path

import pytest
from conftest import ACCELERATE_TWO_CPU_RANKS, report_metrics, run_lmms_eval, two_rank_shares

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.data.loaders import load_source

pytestmark = pytest.mark.slow

# (family, sample id) -> strategy for L1, L2, L3. Gold keys of the smoke sample in the comments.
CIRC_MIX: dict[tuple[str, str], str] = {
    ("implication", "metaphor_001"): "TTT",  # gold B A C
    ("implication", "symbolism_001"): "TAT",  # gold A D B: L2 "A" wrong in base order
    ("implication", "contrast_001"): "LTT",  # gold C A B
    ("implication", "exaggeration_001"): "TTW",  # gold D B A: L3 wrong
    ("implication", "dislocation_001"): "WLT",  # gold C C B: L1 wrong
    ("aesthetic", "color_001"): "TTT",  # gold D B A
    ("aesthetic", "composition_001"): "ATT",  # gold C A D: L1 "A" wrong
    ("aesthetic", "font_001"): "TTL",  # gold C B A
    ("aesthetic", "graphics_001"): "WWW",  # gold B C D: all wrong
    ("affective", "joy_001"): "TTT",  # gold A B C
    ("affective", "affection_001"): "TTT",  # gold B D A
    ("affective", "wonder_001"): "TLT",  # gold C A B
    ("affective", "anger_001"): "ATT",  # gold D C B: L1 "A" wrong
    ("affective", "fear_001"): "TTT",  # gold A B C
    ("affective", "sadness_001"): "TWT",  # gold D B A: L2 wrong
}

# Circular, per level: only T levels are right in all 4 rotations.
#   Impl L1 T: metaphor, symbolism, exaggeration = 3/5; L2 T: metaphor, contrast, exaggeration = 3/5;
#   L3 T: all but exaggeration = 4/5; chains all T: metaphor = 1/5.
#   Aesth L1: color, font = 2/4; L2: color, composition, font = 3/4; L3: color, composition = 2/4; chains: color = 1/4.
#   Affect L1: all but anger = 5/6; L2: all but wonder, sadness = 4/6; L3: 6/6; chains: joy, affection, fear = 3/6.
# Every rotation on its own (T 4, A 1, L 1, W 0 of 4): Impl L1 4+4+1+4+0 = 13/20; L2 4+1+4+4+1 = 14/20; L3 16/20.
CIRCULAR = {
    "implication": {"acc_l1_perc": 60.0, "acc_l2_bridge": 60.0, "acc_l3_conn": 80.0, "acc_full": 20.0},
    "aesthetic": {"acc_l1_perc": 50.0, "acc_l2_bridge": 75.0, "acc_l3_conn": 50.0, "acc_full": 25.0},
    "affective": {"acc_l1_perc": 500 / 6, "acc_l2_bridge": 400 / 6, "acc_l3_conn": 100.0, "acc_full": 50.0},
}
CIRCULAR_PLAIN_IMPL = {"plain_acc_l1_perc": 65.0, "plain_acc_l2_bridge": 70.0, "plain_acc_l3_conn": 80.0}
CIRCULAR_SCORE = round((20 + 25 + 50) / 3, 2)  # 31.67
# Circular position, impl (60 requests): T and W levels (12) put one reply on each letter (A B C D +12 each);
#   symbolism L2 "A" +4 A; contrast L1 and dislocation L2 answer "C" +8 C -> A 16, B 12, C 20, D 12 of 60.
#   Golds: 25% each. Bias = (1.667 + 5 + 8.333 + 5) / 2 = 10.
CIRCULAR_POSITION_IMPL = {
    "pred_share_A": 100 * 16 / 60,
    "pred_share_B": 20.0,
    "pred_share_C": 100 * 20 / 60,
    "pred_share_D": 20.0,
    "gold_share_A": 25.0,
    "gold_share_D": 25.0,
    "position_bias": 10.0,
}

# Base order (base, context, blind and gold context alike). R right, W wrong:
#   Impl: metaphor RRR, symbolism RWR, contrast RRR, exaggeration RRW, dislocation WRR
#     -> L1 4/5, L2 4/5, L3 4/5, full (metaphor, contrast) 2/5.
#   Aesth: color RRR, composition WRR, font RRR, graphics WWW -> L1 2/4, L2 3/4, L3 3/4, full 2/4.
#   Affect: joy, affection, wonder, fear RRR; anger WRR; sadness RWR -> L1 5/6, L2 5/6, L3 6/6, full 4/6.
# Error propagation:
#   Impl: L1 wrong {dislocation}: L2 wrong 0/1; L1 right {metaphor, symbolism, contrast, exaggeration}: 1/4;
#         L2 wrong {symbolism}: L3 wrong 0/1; L2 right {metaphor, contrast, exaggeration, dislocation}: 1/4.
#   Aesth: L1 wrong {composition, graphics}: 1/2; L1 right {color, font}: 0/2;
#          L2 wrong {graphics}: 1/1; L2 right {color, composition, font}: 0/3.
#   Affect: L1 wrong {anger}: 0/1; L1 right (5): sadness 1/5; L2 wrong {sadness}: 0/1; L2 right (5): 0/5.
ORDINARY = {
    "implication": {
        "acc_l1_perc": 80.0,
        "acc_l2_bridge": 80.0,
        "acc_l3_conn": 80.0,
        "acc_full": 40.0,
        "wrong_bridge_after_wrong": 0.0,
        "wrong_bridge_after_right": 25.0,
        "wrong_conn_after_wrong": 0.0,
        "wrong_conn_after_right": 25.0,
    },
    "aesthetic": {
        "acc_l1_perc": 50.0,
        "acc_l2_bridge": 75.0,
        "acc_l3_conn": 75.0,
        "acc_full": 50.0,
        "wrong_bridge_after_wrong": 50.0,
        "wrong_bridge_after_right": 0.0,
        "wrong_conn_after_wrong": 100.0,
        "wrong_conn_after_right": 0.0,
    },
    "affective": {
        "acc_l1_perc": 500 / 6,
        "acc_l2_bridge": 500 / 6,
        "acc_l3_conn": 100.0,
        "acc_full": 400 / 6,
        "wrong_bridge_after_wrong": 0.0,
        "wrong_bridge_after_right": 20.0,
        "wrong_conn_after_wrong": 0.0,
        "wrong_conn_after_right": 0.0,
    },
}
ORDINARY_SCORE = round((40 + 50 + 400 / 6) / 3, 2)  # 52.22
# Position, impl, base order. Letters replied: metaphor B A C; symbolism A A B; contrast C A B; exaggeration D B B
#   (W at L3: the option after gold A); dislocation D C B (W at L1: after gold C) -> A 4, B 6, C 3, D 2 of 15.
#   Golds: B A C, A D B, C A B, D B A, C C B -> A 4, B 5, C 4, D 2. Bias = (0 + 6.667 + 6.667 + 0) / 2 = 6.667.
ORDINARY_POSITION_IMPL = {
    "pred_share_A": 100 * 4 / 15,
    "pred_share_B": 40.0,
    "pred_share_C": 20.0,
    "pred_share_D": 100 * 2 / 15,
    "gold_share_B": 100 * 5 / 15,
    "position_bias": 100 * 1 / 15,
}
SHORT = {family: short for family, (_split, _stem, short) in FAMILIES.items()}


@cache
def smoke_levels() -> dict[tuple[str, str], list]:
    return {(f, s.id): list(s.levels) for f in FAMILIES for s in load_source("smoke", f).raise_for_problems()}


def reply_for(strategy: str, lv) -> str:
    """The replay reply of one strategy letter to one level (see the module docstring)."""
    keys = [k for k, _ in lv.options]
    texts = dict(lv.options)
    return {
        "T": texts[lv.answer],
        "W": texts[keys[(keys.index(lv.answer) + 1) % len(keys)]],
        "A": "A",
        "L": lv.answer,
    }[strategy]


def write_predictions(path: Path, strategy_of=lambda family, sid: CIRC_MIX[(family, sid)]) -> Path:
    lines = []
    for (family, sid), levels in smoke_levels().items():
        for lv, strategy in zip(levels, strategy_of(family, sid), strict=True):
            lines.append(
                json.dumps({"family": family, "sample_id": sid, "level": lv.level, "response": reply_for(strategy, lv)})
            )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def mix_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """Every setting (base, context, blind, circular, gold context) of the smoke sample answered with CIRC_MIX."""
    root = tmp_path_factory.mktemp("analysis_mix")
    predictions = write_predictions(root / "mix.jsonl")
    args = [
        "--model",
        "hvcu_context",
        "--model_args",
        f"inner=hvcu_replay,predictions={predictions}",
        "--tasks",
        "hvcu_bench_sample,hvcu_bench_context_sample,hvcu_analysis_sample",
        "--log_samples",
    ]
    return run_lmms_eval(args, root / "out")["results"], root / "out"


@pytest.fixture(scope="module")
def mix_results(mix_run: tuple[dict, Path]) -> dict:
    """The results of the mix run: task -> lmms-eval's metrics, with the diagnostics `hvcu report` computes."""
    return report_metrics(mix_run[1])


@pytest.mark.parametrize("family", list(CIRCULAR))
def test_circular_levels_and_chains_are_the_hand_computed_numbers(mix_results: dict, family: str) -> None:
    got = mix_results[f"hvcu_bench_circular_sample_{SHORT[family]}"]
    for metric, value in CIRCULAR[family].items():
        assert got[f"{metric},none"] == pytest.approx(value), metric


def test_circular_score_is_the_mean_of_the_families(mix_results: dict) -> None:
    assert mix_results["hvcu_bench_circular_sample"]["acc_full,none"] == CIRCULAR_SCORE


def test_circular_counts_every_rotation_on_its_own_too(mix_results: dict) -> None:
    got = mix_results["hvcu_bench_circular_sample_impl"]
    for metric, value in CIRCULAR_PLAIN_IMPL.items():
        assert got[f"{metric},none"] == pytest.approx(value), metric
    assert got["n_chains,none"] == 5 and got["n_incomplete,none"] == 0


def test_circular_position_bias_is_the_hand_computed_distribution(mix_results: dict) -> None:
    got = mix_results["hvcu_bench_circular_sample_impl"]
    for metric, value in CIRCULAR_POSITION_IMPL.items():
        assert got[f"{metric},none"] == pytest.approx(value), metric


@pytest.mark.parametrize("setting", ["", "context_", "blind_", "context_gold_"])
@pytest.mark.parametrize("family", list(ORDINARY))
def test_levels_and_error_propagation_are_the_hand_computed_numbers(
    mix_results: dict, setting: str, family: str
) -> None:
    got = mix_results[f"hvcu_bench_{setting}sample_{SHORT[family]}"]
    for metric, value in ORDINARY[family].items():
        assert got[f"{metric},none"] == pytest.approx(value), metric


@pytest.mark.parametrize("group", ["hvcu_bench_sample", "hvcu_bench_blind_sample", "hvcu_bench_context_gold_sample"])
def test_the_groups_give_the_overall_score(mix_results: dict, group: str) -> None:
    assert mix_results[group]["acc_full,none"] == ORDINARY_SCORE


@pytest.mark.parametrize("setting", ["", "blind_"])
def test_ordinary_runs_log_the_position_bias(mix_results: dict, setting: str) -> None:
    got = mix_results[f"hvcu_bench_{setting}sample_impl"]
    for metric, value in ORDINARY_POSITION_IMPL.items():
        assert got[f"{metric},none"] == pytest.approx(value), metric


def test_the_report_tables_read_the_real_run(mix_run: tuple[dict, Path]) -> None:
    from hvcu_tasks.report.analysis import analysis_tables
    from hvcu_tasks.results.runs import read_folders

    tables = {t.name: t for t in analysis_tables(read_folders([mix_run[1]]).analysis)}
    assert sorted(tables) == [
        "analysis_blind", "analysis_circular", "analysis_circular_questions", "analysis_position",
        "analysis_propagation",
    ]  # fmt: skip
    plain = {r[1]: r[2:5] for r in tables["analysis_circular_questions"].rows[1:]}
    assert plain["Impl."] == pytest.approx(list(CIRCULAR_PLAIN_IMPL.values()))  # from the sample logs
    blind = tables["analysis_blind"].rows[-1]
    assert blind[-3:] == [ORDINARY_SCORE, ORDINARY_SCORE, 0.0]  # the replay ignores the image: no gain
    assert tables["analysis_circular"].rows[-1][-2] == CIRCULAR_SCORE
    settings = {(r[1], r[2]) for r in tables["analysis_propagation"].rows[1:]}
    assert settings == {(s, f) for s in ("base", "context", "gold context") for f in ("Impl.", "Aesth.", "Affect.")}


def test_a_model_that_always_answers_a_scores_zero_circular(tmp_path: Path) -> None:
    predictions = write_predictions(tmp_path / "a.jsonl", lambda _family, _sid: "AAA")
    results = run_lmms_eval(
        [
            "--model",
            "hvcu_replay",
            "--model_args",
            f"predictions={predictions}",
            "--tasks",
            "hvcu_bench_circular_sample",
            "--log_samples",
        ],
        tmp_path / "out",
    )
    results = report_metrics(tmp_path / "out")  # plain_acc_*, pred_share_*, position_bias: from the sample logs
    assert results["hvcu_bench_circular_sample"]["acc_full,none"] == 0.0
    for short in SHORT.values():
        got = results[f"hvcu_bench_circular_sample_{short}"]
        assert got["acc_l1_perc,none"] == got["acc_l2_bridge,none"] == got["acc_l3_conn,none"] == 0.0
        assert got["plain_acc_l1_perc,none"] == 25.0  # every gold text sits at A in exactly one rotation
        assert got["pred_share_A,none"] == 100.0 and got["position_bias,none"] == 75.0


@pytest.fixture(scope="module")
def parallel_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    """CIRC_MIX on the base and the circular tasks launched as two real ranks (data parallelism), and the same
    command in one process: the launch's output, its run folder and the one-process run's folder.

    One launch for both: each rank's start-up (lmms-eval's imports, its task folder) is most of a launch's cost.
    """
    root = tmp_path_factory.mktemp("parallel")
    predictions = write_predictions(root / "mix.jsonl")
    args = ["--model", "hvcu_replay", "--model_args", f"predictions={predictions}"]
    args += ["--tasks", "hvcu_bench_sample,hvcu_bench_circular_sample", "--log_samples"]
    out = root / "out"
    cmd = [*ACCELERATE_TWO_CPU_RANKS, *args, "--output_path", str(out), "--verbosity", "DEBUG"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=root)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_lmms_eval(args, root / "one")
    return proc.stdout + proc.stderr, out, root / "one"


def test_data_parallelism_deals_every_tasks_documents_out_to_both_ranks(parallel_run: tuple[str, Path, Path]) -> None:
    """lmms-eval deals the documents out in turn. Base, 3 levels per sample: Impl. 5 chains = 15 documents -> 8 + 7,
    Aesth. 12 -> 6 + 6, Affect. 18 -> 9 + 9; circular, 4 rotations x 3 levels: Impl. 60 -> 30 + 30, Aesth. 48 ->
    24 + 24, Affect. 72 -> 36 + 36."""
    assert two_rank_shares(parallel_run[0]) == {
        "hvcu_bench_sample_impl": [7, 8],
        "hvcu_bench_sample_aesth": [6, 6],
        "hvcu_bench_sample_affect": [9, 9],
        "hvcu_bench_circular_sample_impl": [30, 30],
        "hvcu_bench_circular_sample_aesth": [24, 24],
        "hvcu_bench_circular_sample_affect": [36, 36],
    }


def test_data_parallel_run_gathers_before_scoring(parallel_run: tuple[str, Path, Path]) -> None:
    """Each rank answers its share; the scores, diagnostics from the sample logs included, are the hand-computed ones
    and the one-process run's: the hooks score only after lmms-eval gathered every rank."""
    _output, out, one = parallel_run
    parallel = report_metrics(out)
    assert parallel["hvcu_bench_sample"]["acc_full,none"] == ORDINARY_SCORE
    for family, expected in ORDINARY.items():
        for metric, value in expected.items():
            assert parallel[f"hvcu_bench_sample_{SHORT[family]}"][f"{metric},none"] == pytest.approx(value), metric
    assert parallel == report_metrics(one)


def test_circular_under_data_parallelism_scores_after_gathering(parallel_run: tuple[str, Path, Path]) -> None:
    """Each rank has its share of the rotations; a chain's rotations meet only after lmms-eval gathered them, so the
    circular numbers are the hand-computed ones and the one-process run's."""
    _output, out, one = parallel_run
    (found,) = glob.glob(str(out / "**" / "*_results.json"), recursive=True)
    results = json.loads(Path(found).read_text())["results"]
    assert results["hvcu_bench_circular_sample"]["acc_full,none"] == CIRCULAR_SCORE
    for family, expected in CIRCULAR.items():
        for metric, value in expected.items():
            got = results[f"hvcu_bench_circular_sample_{SHORT[family]}"][f"{metric},none"]
            assert got == pytest.approx(value), (family, metric)
    (found_one,) = glob.glob(str(one / "**" / "*_results.json"), recursive=True)
    assert results == json.loads(Path(found_one).read_text())["results"]


def test_gold_context_without_a_multi_turn_backend_is_told_how_to_wrap_it(tmp_path: Path) -> None:
    predictions = write_predictions(tmp_path / "mix.jsonl")
    run = run_lmms_eval(
        [
            "--model",
            "hvcu_replay",
            "--model_args",
            f"predictions={predictions}",
            "--tasks",
            "hvcu_bench_context_gold_sample_impl",
        ],
        tmp_path / "out",
        expect_ok=False,
    )
    assert run["results"] == []
    assert "--model hvcu_context --model_args inner=" in run["output"]


# --- what reaches a real backend (lmms-eval's openai model against a local server) --------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """The requests the openai backend (through the wrapper) sends for the three analysis tasks of one family."""
    from fake_openai import FakeOpenAI

    root = tmp_path_factory.mktemp("analysis_openai")
    with FakeOpenAI(lambda request: "A") as server:
        run_lmms_eval(
            [
                "--model",
                "hvcu_context",
                "--model_args",
                f"inner=openai,model_version=fake-vlm,base_url={server.base_url},api_key=x",
                "--tasks",
                "hvcu_bench_blind_sample_impl,hvcu_bench_circular_sample_impl,hvcu_bench_context_gold_sample_impl",
            ],
            root / "out",
        )
        return list(server.requests)


def _parts(message: dict) -> list[dict]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _has_image(request: dict) -> bool:
    return any(p.get("type") == "image_url" for m in request["messages"] for p in _parts(m))


def _text(message: dict) -> str:
    return "".join(p["text"] for p in _parts(message) if p.get("type") == "text")


def test_every_request_of_the_three_analyses_reached_the_server(served: list[dict]) -> None:
    # impl: 5 samples x 3 levels: blind 15, circular 4 x 15 = 60, gold context 15
    assert len(served) == 15 + 60 + 15


def test_blind_requests_reach_the_model_without_any_image(served: list[dict]) -> None:
    blind = [r for r in served if not _has_image(r)]
    assert len(blind) == 15
    assert all([m["role"] for m in r["messages"]] == ["system", "user"] for r in blind)
    questions = {_text(r["messages"][1]) for r in blind}
    imaged = {_text(r["messages"][1]) for r in served if _has_image(r) and len(r["messages"]) == 2}
    assert len(questions) == 15 and questions <= imaged  # the very texts of the base order (rotation 0)


def test_circular_requests_show_four_orders_of_the_same_texts_under_keys_a_to_d(served: list[dict]) -> None:
    orders: dict[str, set[tuple[str, ...]]] = {}
    for r in served:
        if _has_image(r) and len(r["messages"]) == 2:
            question, _, options = _text(r["messages"][1]).partition("\nOptions:\n")
            lines = options.split("\n")
            assert [line[:3] for line in lines] == ["A. ", "B. ", "C. ", "D. "]
            orders.setdefault(question, set()).add(tuple(line[3:] for line in lines))
    assert len(orders) == 15
    for question, seen in orders.items():
        assert len(seen) == 4, question
        assert len({frozenset(o) for o in seen}) == 1, question  # the same four texts


def test_gold_context_requests_hold_the_gold_letters_as_assistant_turns(served: list[dict]) -> None:
    golds = {
        lv.question: [x.answer for x in levels]
        for (f, _s), levels in smoke_levels().items()
        if f == "implication"
        for lv in levels[:1]
    }
    later = [r for r in served if len(r["messages"]) > 2]
    assert sorted(len(r["messages"]) for r in later) == [4] * 5 + [6] * 5
    for r in later:
        roles = [m["role"] for m in r["messages"]]
        assert roles == ["system", *["user", "assistant"] * ((len(roles) - 2) // 2), "user"]
        first_question = _text(r["messages"][1]).partition("\nOptions:\n")[0]
        shown = [_text(m) for m in r["messages"] if m["role"] == "assistant"]
        assert shown == golds[first_question][: len(shown)]  # the server always answered "A": never shown
        assert _has_image(r) and not any(p.get("type") == "image_url" for m in r["messages"][:-1] for p in _parts(m))
