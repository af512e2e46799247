"""The MCTS search on a deterministic in-process policy: UCB, capacities, thresholds, diversity, backprop."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import pytest

from generation.mcts import Candidate, Judgement, MCTSConfig, Node, Tree, expand, search, similarity


class ScriptedPolicy:
    """Generates distinct questions per call; the judge scores by a rule on the text."""

    def __init__(self, score=lambda level, k: 0.9, duplicate: bool = False, unparsable: bool = False):
        self.score = score
        self.duplicate = duplicate
        self.unparsable = unparsable
        self.calls: list[tuple[int, int, float, tuple[str, ...]]] = []
        self.counter = 0

    async def generate(self, path: Sequence[Node], level: int, n: int, temperature: float, feedback: Sequence[str]):
        self.calls.append((level, n, temperature, tuple(feedback)))
        out = []
        for _ in range(n):
            self.counter += 1
            k = 0 if self.duplicate else self.counter
            if self.unparsable:
                out.append(Candidate(error="no JSON object"))
            else:
                out.append(
                    Candidate(question=f"level {level} question number {k} zeta{k}", answer=f"answer {k} omega{k}")
                )
        return out

    async def judge(self, path: Sequence[Node], candidate: Candidate) -> Judgement:
        level = len(path) + 1
        k = int(candidate.question.split("number ")[1].split()[0])
        return Judgement(self.score(level, k), f"rule for {k}")


def run(coro):
    return asyncio.run(coro)


def test_backpropagation_follows_the_paper() -> None:
    tree = Tree(MCTSConfig())
    a = tree.add_child(tree.root, Candidate("q1", "a1"), 0.8)
    assert (tree.root.visits, tree.root.value) == (1, 0.8)
    assert (a.visits, a.value) == (1, 0.8)  # the child counts its own reward once, not twice
    b = tree.add_child(a, Candidate("q2", "a2"), 0.6)
    assert (a.visits, a.value) == (2, pytest.approx(0.7))
    assert (tree.root.visits, tree.root.value) == (2, pytest.approx(0.7))
    tree.add_child(tree.root, Candidate("q3", "a3"), 1.0)
    assert (tree.root.visits, tree.root.value) == (3, pytest.approx((0.8 + 0.6 + 1.0) / 3))
    assert b.visits == 1


def test_ucb_prefers_unvisited_then_balances_value_and_visits() -> None:
    tree = Tree(MCTSConfig(exploration=2.0))
    parent = tree.root
    parent.visits = 10
    fresh = Node(id=99, level=1, visits=0)
    assert tree.ucb(fresh, parent) == math.inf
    strong = Node(id=1, level=1, visits=5, value=0.9)
    rare = Node(id=2, level=1, visits=1, value=0.5)
    assert tree.ucb(strong, parent) == pytest.approx(0.9 + 2 * math.sqrt(math.log(10) / 5))
    assert tree.ucb(rare, parent) > tree.ucb(strong, parent)  # exploration wins with c = 2


def test_selection_returns_to_an_expanded_node_with_room() -> None:
    policy = ScriptedPolicy()
    tree = run(search(policy, MCTSConfig(max_iterations=30)))
    # one expansion adds at most 5 children: 8 children at the root means it was selected again later,
    # after the search had already gone deeper (not a leaves-only sweep)
    assert len(tree.root.children) == 8
    levels_asked = [level for level, *_ in policy.calls]
    assert levels_asked[0] == 1 and 2 in levels_asked[: levels_asked.index(1, 1)]


def test_capacities_are_never_exceeded_and_the_search_stops_when_full() -> None:
    config = MCTSConfig(capacity=(2, 3, 4), max_iterations=200)
    tree = run(search(ScriptedPolicy(), config))
    assert [tree.level_count(level) for level in (1, 2, 3)] == [2, 3, 4]
    assert tree.select() is None


def test_low_scores_are_rejected_with_the_reason_fed_back_and_hotter_retries() -> None:
    policy = ScriptedPolicy(score=lambda level, k: 0.3)
    config = MCTSConfig(max_iterations=5, max_attempts_per_node=3)
    tree = run(search(policy, config))
    assert len(tree.nodes) == 1 and tree.root.exhausted
    temperatures = [t for _level, _n, t, _fb in policy.calls]
    assert temperatures == pytest.approx([0.8, 0.9, 1.0])
    assert policy.calls[0][3] == () and "low quality: 0.30 < 0.65" in policy.calls[1][3][0]
    assert tree.rejections["low quality"] == 15


def test_temperature_is_capped() -> None:
    assert MCTSConfig().temperature_for(10) == 1.2


def test_near_duplicates_of_a_sibling_are_rejected() -> None:
    tree = Tree(MCTSConfig())
    admitted = run(expand(tree, tree.root, ScriptedPolicy(duplicate=True)))
    assert len(admitted) == 1
    assert tree.rejections["too similar"] == 4


def test_unparsable_candidates_are_rejections_not_crashes() -> None:
    tree = Tree(MCTSConfig())
    assert run(expand(tree, tree.root, ScriptedPolicy(unparsable=True))) == []
    assert tree.rejections["unparsable"] == 5 and tree.root.feedback[0].startswith("unparsable: no JSON")


def test_top_k_paths_are_ranked_by_mean_node_score() -> None:
    score = lambda level, k: 0.65 + (k % 7) / 20  # noqa: E731 - varied but passing scores
    tree = run(search(ScriptedPolicy(score=score), MCTSConfig(max_iterations=40)))
    top = tree.top_paths()
    assert 0 < len(top) <= 10
    means = [m for m, _p in top]
    assert means == sorted(means, reverse=True)
    for mean, path in top:
        assert [n.level for n in path] == [1, 2, 3]
        assert mean == pytest.approx(sum(n.score for n in path) / 3)


def test_search_is_deterministic() -> None:
    def shape(tree: Tree) -> list[tuple[int, int | None, str]]:
        return [(n.level, n.parent, n.question) for n in tree.nodes]

    config = MCTSConfig(max_iterations=25)
    assert shape(run(search(ScriptedPolicy(), config))) == shape(run(search(ScriptedPolicy(), config)))


def test_similarity_is_token_jaccard() -> None:
    assert similarity("A red heart", "a RED heart") == 1.0
    assert similarity("red heart", "blue sky") == 0.0
    assert similarity("red heart cage", "red heart") == pytest.approx(2 / 3)


def test_config_rejects_inconsistent_values() -> None:
    with pytest.raises(ValueError, match="one entry per level"):
        MCTSConfig(capacity=(8, 12))


def test_the_call_budget_stops_the_search() -> None:
    policy = ScriptedPolicy()
    tree = run(search(policy, MCTSConfig(max_calls=23, max_iterations=100)))
    assert tree.calls <= 23
    made = sum(n for _level, n, _t, _fb in policy.calls) * 2  # every candidate parsed, so judged too
    assert made == tree.calls and tree.calls >= 20
