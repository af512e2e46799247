"""The paper's search and construction defaults, pinned; the settings' range checks; rejection reasons as guidance.

The expected values are typed from the sources, not imported: the paper's Appendix C and the protocol note
(../shared/reference/official-protocol.md, "Instruction-data pipeline"): c = 2.0, up to 5 candidates per
expansion, quality threshold 0.65, diversity threshold 0.75, capacity 8/12/15, top-10 paths, generator
temperature 0.8 + 0.1 per retry capped at 1.2, judge temperature 0.2; and the README for the budgets this project
adds (60 iterations and 400 model calls per image, 3 attempts per node) and for `hvcu build-bench`.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI

from generation import policy as policy_module
from generation.bench.build import BuildConfig
from generation.client import ChatClient, ClientConfig
from generation.mcts import Candidate, Judgement, MCTSConfig, Node, Tree, expand, search
from generation.policy import ModelPolicy
from generation.runner import load_config

PAPER_MCTS = {
    "levels": 3,
    "exploration": 2.0,
    "candidates_per_expansion": 5,
    "quality_threshold": 0.65,
    "diversity_threshold": 0.75,
    "capacity": (8, 12, 15),
    "top_k": 10,
    "temperature": 0.8,
    "temperature_step": 0.1,
    "temperature_cap": 1.2,
}
PROJECT_BUDGETS = {"max_iterations": 60, "max_calls": 400, "max_attempts_per_node": 3}
JUDGE_TEMPERATURE = 0.2
BUILD_DEFAULTS = {
    "max_attempts": 3,
    "temperature": 0.7,
    "temperature_step": 0.1,
    "temperature_cap": 1.2,
    "validator_temperature": 0.0,
    "max_tokens": 1024,
    "validate_levels": (3, 2, 1),
}


def test_mcts_defaults_are_the_papers() -> None:
    config = MCTSConfig()
    assert {name: getattr(config, name) for name in PAPER_MCTS} == PAPER_MCTS


def test_mcts_budgets_are_the_documented_ones() -> None:
    config = MCTSConfig()
    assert {name: getattr(config, name) for name in PROJECT_BUDGETS} == PROJECT_BUDGETS


def test_a_run_without_a_config_file_uses_the_paper_defaults() -> None:
    config = load_config(None)
    assert {name: getattr(config, name) for name in PAPER_MCTS | PROJECT_BUDGETS} == PAPER_MCTS | PROJECT_BUDGETS


def test_judge_runs_at_the_papers_temperature() -> None:
    assert policy_module.JUDGE_TEMPERATURE == JUDGE_TEMPERATURE


def test_build_bench_defaults_are_the_documented_ones() -> None:
    config = BuildConfig()
    assert {name: getattr(config, name) for name in BUILD_DEFAULTS} == BUILD_DEFAULTS


@pytest.mark.parametrize(
    ("failed", "temperature"), [(0, 0.8), (1, 0.9), (2, 1.0), (3, 1.1), (4, 1.2), (5, 1.2), (50, 1.2)]
)
def test_generator_temperature_rises_per_failed_attempt_up_to_the_cap(failed: int, temperature: float) -> None:
    assert MCTSConfig().temperature_for(failed) == pytest.approx(temperature)


# --- range checks: each bound accepted, one step beyond it refused, naming the setting -------------------------
INTEGER_LOWS = [
    ("candidates_per_expansion", 1),
    ("top_k", 1),
    ("max_iterations", 1),
    ("max_calls", 2),  # one generator call plus one judge call
    ("max_attempts_per_node", 1),
]


@pytest.mark.parametrize(("name", "low"), INTEGER_LOWS)
def test_integer_settings_accept_their_lowest_value(name: str, low: int) -> None:
    assert getattr(MCTSConfig(**{name: low}), name) == low


@pytest.mark.parametrize(("name", "low"), INTEGER_LOWS)
def test_integer_settings_refuse_one_below_their_lowest_value(name: str, low: int) -> None:
    with pytest.raises(ValueError, match=rf"^{name} must be an integer of at least {low}, got {low - 1}$"):
        MCTSConfig(**{name: low - 1})


@pytest.mark.parametrize("name", [name for name, _ in INTEGER_LOWS])
@pytest.mark.parametrize("value", [True, 2.0, "3"])
def test_integer_settings_refuse_other_types(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"^{name} must be an integer"):
        MCTSConfig(**{name: value})


def test_one_level_with_one_capacity_is_a_valid_search() -> None:
    assert MCTSConfig(levels=1, capacity=(4,)).levels == 1


def test_zero_levels_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^levels must be an integer of at least 1, got 0$"):
        MCTSConfig(levels=0, capacity=())


NUMBER_RANGES = [
    ("quality_threshold", 0.0, 1.0),
    ("diversity_threshold", 0.0, 1.0),
    ("temperature", 0.0, 1.2),  # the default cap bounds it from above
    ("temperature_step", 0.0, 2.0),
    ("temperature_cap", 0.8, 2.0),  # the default temperature bounds it from below
]


@pytest.mark.parametrize(("name", "low", "high"), NUMBER_RANGES)
def test_number_settings_accept_both_bounds(name: str, low: float, high: float) -> None:
    assert getattr(MCTSConfig(**{name: low}), name) == low
    assert getattr(MCTSConfig(**{name: high}), name) == high


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("quality_threshold", -0.01, "[0, 1]"),
        ("quality_threshold", 1.01, "[0, 1]"),
        ("diversity_threshold", -0.01, "[0, 1]"),
        ("diversity_threshold", 1.01, "[0, 1]"),
        ("temperature", -0.01, "[0, 2]"),
        ("temperature_step", -0.01, "[0, 2]"),
        ("temperature_step", 2.01, "[0, 2]"),
        ("temperature_cap", 2.01, "[0, 2]"),
        ("exploration", -0.01, "[0, inf]"),
    ],
)
def test_number_settings_refuse_values_beyond_a_bound(name: str, value: float, shown: str) -> None:
    message = f"{name} must be a number in {shown}, got {value}"
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        MCTSConfig(**{name: value})


def test_temperature_above_two_is_refused_even_under_a_higher_cap() -> None:
    with pytest.raises(ValueError, match=r"^temperature must be a number in \[0, 2\], got 2.01$"):
        MCTSConfig(temperature=2.01, temperature_cap=2.0)


def test_exploration_may_be_zero_or_large() -> None:
    assert MCTSConfig(exploration=0.0).exploration == 0.0
    assert MCTSConfig(exploration=100.0).exploration == 100.0


@pytest.mark.parametrize("value", [True, "0.5", None])
def test_number_settings_refuse_other_types(value: object) -> None:
    with pytest.raises(ValueError, match=r"^quality_threshold must be a number"):
        MCTSConfig(quality_threshold=value)


def test_temperature_may_equal_its_cap_but_not_exceed_it() -> None:
    assert MCTSConfig(temperature=1.2, temperature_cap=1.2).temperature == 1.2
    with pytest.raises(ValueError, match=r"^temperature 1.2 is above temperature_cap 1.1$"):
        MCTSConfig(temperature=1.2, temperature_cap=1.1)


@pytest.mark.parametrize("capacity", [(8, 12), (8, 12, 15, 20), [8, 12, 15]])
def test_capacity_needs_a_tuple_with_one_entry_per_level(capacity: object) -> None:
    with pytest.raises(ValueError, match=r"^capacity needs one entry per level \(3\)"):
        MCTSConfig(capacity=capacity)


@pytest.mark.parametrize("capacity", [(8, 0, 15), (8, True, 15), (8, 1.5, 15)])
def test_capacity_entries_are_positive_integers(capacity: tuple) -> None:
    with pytest.raises(ValueError, match=r"^capacity entries must be integers of at least 1"):
        MCTSConfig(capacity=capacity)


def test_a_capacity_of_one_per_level_is_valid() -> None:
    assert MCTSConfig(capacity=(1, 1, 1)).capacity == (1, 1, 1)


# --- failed attempts: hotter retries, reset on success, exhaustion ---------------------------------------------
class JudgeByRound:
    """Generates one distinct candidate per call; the judge's score for round i is scores[i]."""

    def __init__(self, scores: list[float]) -> None:
        self.scores = scores
        self.round = 0
        self.temperatures: list[float] = []
        self.feedback: list[tuple[str, ...]] = []

    async def generate(self, path, level, n, temperature, feedback):
        self.temperatures.append(temperature)
        self.feedback.append(tuple(feedback))
        self.round += 1
        return [Candidate(f"question {self.round} {i} word{self.round}x{i}", f"answer {i}") for i in range(n)]

    async def judge(self, path, candidate):
        return Judgement(self.scores[self.round - 1], f"judged in round {self.round}")


def expand_root(tree: Tree, policy: JudgeByRound) -> list[Node]:
    return asyncio.run(expand(tree, tree.root, policy))


def test_a_success_resets_the_failed_attempts_and_the_temperature() -> None:
    tree = Tree(MCTSConfig(candidates_per_expansion=1))
    policy = JudgeByRound([0.1, 0.9, 0.1])
    expand_root(tree, policy)  # rejected
    assert tree.root.failed_attempts == 1
    expand_root(tree, policy)  # admitted at the hotter temperature
    assert (tree.root.failed_attempts, tree.root.feedback) == (0, [])
    expand_root(tree, policy)  # back at the base temperature, no guidance
    assert policy.temperatures == pytest.approx([0.8, 0.9, 0.8])
    assert policy.feedback[2] == ()


def test_a_node_is_exhausted_after_max_attempts_failures() -> None:
    tree = Tree(MCTSConfig(candidates_per_expansion=1, max_attempts_per_node=2))
    policy = JudgeByRound([0.1, 0.1])
    expand_root(tree, policy)
    assert not tree.root.exhausted
    expand_root(tree, policy)
    assert tree.root.exhausted
    assert not tree.has_room(tree.root)


def test_a_score_at_the_quality_threshold_is_admitted() -> None:
    tree = Tree(MCTSConfig(candidates_per_expansion=1))
    assert len(expand_root(tree, JudgeByRound([0.65]))) == 1


def test_a_score_just_below_the_quality_threshold_is_rejected_with_its_reason() -> None:
    tree = Tree(MCTSConfig(candidates_per_expansion=1))
    policy = JudgeByRound([0.64])
    assert expand_root(tree, policy) == []
    assert tree.root.feedback == ["low quality: 0.64 < 0.65: judged in round 1"]
    assert tree.rejections == {"low quality": 1}


def test_rejection_reasons_reach_the_next_generation_call() -> None:
    tree = Tree(MCTSConfig(candidates_per_expansion=2))
    policy = JudgeByRound([0.2, 0.9])
    expand_root(tree, policy)
    expand_root(tree, policy)
    assert policy.feedback == [(), ("low quality: 0.20 < 0.65: judged in round 1",) * 2]


# --- rejection feedback in the generator's prompt (ModelPolicy over the real client) ---------------------------
def prompt_texts(server: FakeOpenAI) -> list[str]:
    """The instruction text of every request the server saw."""
    return [r["messages"][-1]["content"][0]["text"] for r in server.requests]


def fake_model(request: dict) -> str:
    """Generator: a new question per request; judge: 0.3 with a recognisable reason for the first one, then 0.9."""
    text = request["messages"][-1]["content"][0]["text"]
    if text.startswith("You judge"):
        first = "question 1?" in text
        return json.dumps({"score": 0.3 if first else 0.9, "reason": "the bars hide nothing" if first else "fine"})
    n = sum(1 for _ in fake_model.counter)
    fake_model.counter.append(n)
    return json.dumps({"question": f"question {n + 1}?", "answer": f"answer {n + 1}"})


def run_search(server: FakeOpenAI, config: MCTSConfig) -> Tree:
    async def go() -> Tree:
        client = ChatClient(ClientConfig(model="fake", base_url=server.base_url, api_key="x"))
        try:
            return await search(ModelPolicy(client, "data:image/png;base64,AAAA", "img"), config)
        finally:
            await client.close()

    fake_model.counter = []
    return asyncio.run(go())


def test_a_rejection_reason_appears_in_the_next_generator_prompt(tmp_path: Path) -> None:
    config = replace(MCTSConfig(), candidates_per_expansion=1, capacity=(1, 1, 1), max_iterations=2)
    with FakeOpenAI(fake_model) as server:
        run_search(server, config)
    generator = [t for t in prompt_texts(server) if not t.startswith("You judge")]
    assert len(generator) == 2
    assert "the bars hide nothing" not in generator[0]
    assert "Earlier candidates were rejected; avoid these problems:" in generator[1]
    assert "- low quality: 0.30 < 0.65: the bars hide nothing" in generator[1]


def test_the_retry_after_a_rejection_is_sent_hotter() -> None:
    config = replace(MCTSConfig(), candidates_per_expansion=1, capacity=(1, 1, 1), max_iterations=2)
    with FakeOpenAI(fake_model) as server:
        run_search(server, config)
    temperatures = [r["temperature"] for r in server.requests]
    assert temperatures == pytest.approx([0.8, 0.2, 0.9, 0.2])  # generator, judge, hotter generator, judge
