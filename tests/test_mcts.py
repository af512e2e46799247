"""The MCTS search on a deterministic in-process policy: UCB, capacities, thresholds, diversity, backprop."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import pytest

from generation.mcts import Candidate, Judgement, MCTSConfig, Node, Tree, expand, gather_all, search, similarity


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


# --- details of the tree and of one expansion ------------------------------------------------------------------
class FixedPolicy:
    """Returns the given candidates (at most n) and judges every one with `score`."""

    def __init__(self, candidates: list[Candidate], score: float = 0.9):
        self.candidates = candidates
        self.score = score
        self.asked: list[int] = []

    async def generate(self, path, level, n, temperature, feedback):
        self.asked.append(n)
        return list(self.candidates)

    async def judge(self, path, candidate):
        return Judgement(self.score, "ok")


def test_similarity_of_two_texts_without_words_is_one() -> None:
    assert similarity("", "?!") == 1.0
    assert similarity("", "red") == 0.0


def test_a_candidate_exactly_at_the_diversity_threshold_is_too_similar() -> None:
    tree = Tree(MCTSConfig())
    tree.add_child(tree.root, Candidate("red heart cage", "bars"), 0.9)
    run(expand(tree, tree.root, FixedPolicy([Candidate("red heart cage", "")])))  # 3 of 4 words: 0.75
    assert tree.root.feedback == ["too similar: 0.75 >= 0.75 to a sibling"]


def test_a_candidate_just_below_the_diversity_threshold_is_admitted() -> None:
    tree = Tree(MCTSConfig(diversity_threshold=0.76))
    tree.add_child(tree.root, Candidate("red heart cage", "bars"), 0.9)
    assert len(run(expand(tree, tree.root, FixedPolicy([Candidate("red heart cage", "")])))) == 1


def test_diversity_is_measured_against_siblings_only() -> None:
    tree = Tree(MCTSConfig())
    a = tree.add_child(tree.root, Candidate("red heart cage", "bars"), 0.9)
    admitted = run(expand(tree, a, FixedPolicy([Candidate("red heart cage", "bars")])))  # same text, one level down
    assert len(admitted) == 1


def test_an_expansion_asks_for_no_more_than_the_room_left_and_reads_no_more() -> None:
    tree = Tree(MCTSConfig(capacity=(2, 12, 15)))
    policy = FixedPolicy([Candidate(f"q{i} w{i}", f"a{i}") for i in range(5)])
    admitted = run(expand(tree, tree.root, policy))
    assert policy.asked == [2]
    assert [n.question for n in admitted] == ["q0 w0", "q1 w1"]
    assert tree.calls == 4


def test_the_room_left_counts_the_nodes_already_on_the_level() -> None:
    tree = Tree(MCTSConfig(capacity=(3, 12, 15)))
    tree.add_child(tree.root, Candidate("first one", "x"), 0.9)
    policy = FixedPolicy([Candidate(f"q{i} w{i}", f"a{i}") for i in range(5)])
    run(expand(tree, tree.root, policy))
    assert policy.asked == [2]
    assert tree.level_count(1) == 3 and tree.rejections == {}


def test_an_expansion_asks_for_no_more_than_the_call_budget_allows() -> None:
    tree = Tree(MCTSConfig(max_calls=7))
    tree.calls = 2
    policy = FixedPolicy([Candidate(f"q{i} w{i}", f"a{i}") for i in range(5)])
    run(expand(tree, tree.root, policy))
    assert policy.asked == [2]  # (7 - 2) // 2


def test_an_expansion_without_room_asks_nothing() -> None:
    tree = Tree(MCTSConfig(max_calls=3))
    tree.calls = 2
    policy = FixedPolicy([Candidate("q", "a")])
    assert run(expand(tree, tree.root, policy)) == []
    assert policy.asked == [] and tree.calls == 2


def test_unparsable_candidates_cost_one_call_and_are_not_judged() -> None:
    tree = Tree(MCTSConfig(candidates_per_expansion=3))
    candidates = [Candidate("q1 w1", "a1"), Candidate(error="empty reply"), Candidate("q2 w2", "a2")]
    run(expand(tree, tree.root, FixedPolicy(candidates)))
    assert tree.calls == 3 + 2
    assert tree.rejections == {"unparsable": 1}


def test_the_smallest_budget_runs_one_expansion_of_one_candidate() -> None:
    policy = FixedPolicy([Candidate(f"q{i} w{i}", f"a{i}") for i in range(5)])
    tree = run(search(policy, MCTSConfig(max_calls=2)))
    assert policy.asked == [1] and tree.calls == 2


def test_the_search_stops_before_a_call_pair_would_exceed_the_budget() -> None:
    policy = FixedPolicy([Candidate(f"q{i} w{i}", f"a{i}") for i in range(5)])
    tree = run(search(policy, MCTSConfig(max_calls=3)))
    assert policy.asked == [1] and tree.calls == 2


def test_the_iteration_budget_counts_expansions() -> None:
    policy = ScriptedPolicy()
    run(search(policy, MCTSConfig(max_iterations=3)))
    assert len(policy.calls) == 3


def test_rejections_are_counted_by_kind() -> None:
    tree = Tree(MCTSConfig())
    tree.reject("low quality: 0.20 < 0.65: vague")
    tree.reject("low quality: 0.10 < 0.65: off: topic")
    tree.reject("unparsable")
    assert tree.rejections == {"low quality": 2, "unparsable": 1}


def test_room_for_children() -> None:
    tree = Tree(MCTSConfig(capacity=(1, 1, 1)))
    assert tree.has_room(tree.root)
    a = tree.add_child(tree.root, Candidate("q", "a"), 0.9)
    assert not tree.has_room(tree.root)  # level 1 full
    b = tree.add_child(a, Candidate("q", "a"), 0.9)
    c = tree.add_child(b, Candidate("q", "a"), 0.9)
    assert tree.has_room(a) is False and tree.has_room(c) is False  # level 2 full; level 3 is the last
    fresh = Tree(MCTSConfig())
    fresh.root.exhausted = True
    assert not fresh.has_room(fresh.root)


def test_path_runs_from_level_one_down() -> None:
    tree = Tree(MCTSConfig())
    a = tree.add_child(tree.root, Candidate("q1", "a1"), 0.9)
    b = tree.add_child(a, Candidate("q2", "a2"), 0.8)
    assert [n.id for n in tree.path(b)] == [a.id, b.id]
    assert tree.path(tree.root) == []


def test_ucb_under_an_unvisited_parent_is_the_value() -> None:
    tree = Tree(MCTSConfig())
    child = Node(id=1, level=1, visits=2, value=0.7)
    assert tree.ucb(child, Node(id=0, level=0, visits=0)) == pytest.approx(0.7)


def test_expand_here_score() -> None:
    tree = Tree(MCTSConfig(exploration=2.0))
    assert tree.expand_here_score(tree.root) == pytest.approx(1.0 + 2.0 * math.sqrt(math.log(2) / 1))
    node = Node(id=1, level=1, visits=3, value=0.6, children=[4, 5])
    assert tree.expand_here_score(node) == pytest.approx(0.6 + 2.0 * math.sqrt(math.log(5) / 3))


def test_selection_descends_into_the_child_with_the_higher_ucb() -> None:
    tree = Tree(MCTSConfig(capacity=(2, 12, 15), exploration=0.0))
    low = tree.add_child(tree.root, Candidate("q1", "a1"), 0.7)
    high = tree.add_child(tree.root, Candidate("q2", "a2"), 0.9)
    assert tree.select() is high  # the root is full; with c = 0, the better child
    high.exhausted = True
    assert tree.select() is low  # an exhausted leaf's subtree has nothing to expand


def test_only_complete_paths_are_selected_and_top_k_cuts_them() -> None:
    tree = Tree(MCTSConfig(top_k=2))
    for score in (0.7, 0.9, 0.8):
        a = tree.add_child(tree.root, Candidate("q", "a"), score)
        b = tree.add_child(a, Candidate("q", "a"), score)
        tree.add_child(b, Candidate("q", "a"), score)
    tree.add_child(tree.root, Candidate("q", "a"), 1.0)  # incomplete: never a path
    assert len(tree.complete_paths()) == 3
    assert [round(m, 2) for m, _ in tree.top_paths()] == [0.9, 0.8]


def test_top_paths_with_equal_means_keep_creation_order() -> None:
    tree = Tree(MCTSConfig())
    ends = []
    for _ in range(3):
        a = tree.add_child(tree.root, Candidate("q", "a"), 0.8)
        b = tree.add_child(a, Candidate("q", "a"), 0.8)
        ends.append(tree.add_child(b, Candidate("q", "a"), 0.8).id)
    assert [p[-1].id for _, p in tree.top_paths()] == ends


def test_gather_all_lets_every_call_finish_before_raising_the_first_error() -> None:
    finished: list[str] = []

    async def fail() -> None:
        raise RuntimeError("boom")

    async def slow() -> str:
        await asyncio.sleep(0.05)
        finished.append("slow")
        return "slow"

    async def main() -> None:
        with pytest.raises(RuntimeError, match="boom"):
            await gather_all([fail(), slow()])
        assert finished == ["slow"]

    run(main())


def test_gather_all_returns_results_in_order() -> None:
    async def value(v: int, delay: float) -> int:
        await asyncio.sleep(delay)
        return v

    assert run(gather_all([value(1, 0.02), value(2, 0.0)])) == [1, 2]
