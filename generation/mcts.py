"""The paper's MCTS over (question, answer) nodes: perception (L1) -> bridge (L2) -> connotation (L3).

Pure search logic over an async `Policy` (generator + judge); no I/O here. Selection walks down from the
root by UCB_j = X̄_j + c·sqrt(ln N / n_j) and may stop at any node that still has room for a child (a
"expand here" option scored like an unvisited-ish child), so the search returns to expanded nodes
instead of sweeping leaves. Backpropagation follows the paper: each ancestor n <- n+1,
X̄ <- ((n-1)·X̄ + r)/n, once per accepted child; the child itself starts at n=1, X̄=r.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class MCTSConfig:
    """Every knob of the search, with the paper's defaults (Appendix C)."""

    levels: int = 3
    exploration: float = 2.0
    candidates_per_expansion: int = 5
    quality_threshold: float = 0.65
    diversity_threshold: float = 0.75
    capacity: tuple[int, ...] = (8, 12, 15)
    top_k: int = 10
    max_iterations: int = 60
    max_calls: int = 400
    max_attempts_per_node: int = 3
    temperature: float = 0.8
    temperature_step: float = 0.1
    temperature_cap: float = 1.2

    def __post_init__(self) -> None:
        for name, low in (
            ("levels", 1),
            ("candidates_per_expansion", 1),
            ("top_k", 1),
            ("max_iterations", 1),
            ("max_calls", 2),
            ("max_attempts_per_node", 1),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer of at least {low}, got {value!r}")
        for name, low, high in (
            ("exploration", 0.0, math.inf),
            ("quality_threshold", 0.0, 1.0),
            ("diversity_threshold", 0.0, 1.0),
            ("temperature", 0.0, 2.0),
            ("temperature_step", 0.0, 2.0),
            ("temperature_cap", 0.0, 2.0),
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
                raise ValueError(f"{name} must be a number in [{low:g}, {high:g}], got {value!r}")
        if not isinstance(self.capacity, tuple) or len(self.capacity) != self.levels:
            raise ValueError(f"capacity needs one entry per level ({self.levels}), got {self.capacity!r}")
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in self.capacity):
            raise ValueError(f"capacity entries must be integers of at least 1, got {self.capacity!r}")
        if self.temperature > self.temperature_cap:
            raise ValueError(f"temperature {self.temperature} is above temperature_cap {self.temperature_cap}")

    def temperature_for(self, failed_attempts: int) -> float:
        """Return the generator temperature after that many failed attempts at a node."""
        return min(self.temperature_cap, self.temperature + self.temperature_step * failed_attempts)


@dataclass
class Node:
    """A (question, answer) node; level 0 is the virtual root."""

    id: int
    level: int
    question: str = ""
    answer: str = ""
    score: float = 0.0
    parent: int | None = None
    children: list[int] = field(default_factory=list)
    visits: int = 0
    value: float = 0.0
    failed_attempts: int = 0
    exhausted: bool = False
    feedback: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Candidate:
    """A generated (question, answer) for the next level, or the reason it could not be parsed."""

    question: str = ""
    answer: str = ""
    error: str = ""


@dataclass(frozen=True)
class Judgement:
    """The judge's score in [0, 1] and its reason."""

    score: float
    reason: str


class Policy(Protocol):
    """What the search needs from the models."""

    async def generate(
        self, path: Sequence[Node], level: int, n: int, temperature: float, feedback: Sequence[str]
    ) -> list[Candidate]:
        """Return up to n candidates for `level` below the last node of `path`."""

    async def judge(self, path: Sequence[Node], candidate: Candidate) -> Judgement:
        """Score a candidate as a child of the last node of `path`."""


async def gather_all(awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """Await every awaitable; when any raised, raise the first error only after all of them have finished."""
    results = await asyncio.gather(*awaitables, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return list(results)  # type: ignore[arg-type]


_WORD = re.compile(r"\w+")


def similarity(a: str, b: str) -> float:
    """Token-set Jaccard similarity of two texts (lower-cased words): the diversity measure."""
    x, y = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    return len(x & y) / len(x | y) if x | y else 1.0


@dataclass
class Tree:
    """The search tree with per-level counts."""

    config: MCTSConfig
    nodes: list[Node] = field(default_factory=lambda: [Node(id=0, level=0)])
    rejections: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    """Model calls this search asked for (generator + judge), checked against max_calls."""

    @property
    def root(self) -> Node:
        """The virtual root."""
        return self.nodes[0]

    def level_count(self, level: int) -> int:
        """Number of nodes at a level."""
        return sum(1 for n in self.nodes if n.level == level)

    def has_room(self, node: Node) -> bool:
        """Whether `node` may still get a child: not a leaf level, level below not full, not exhausted."""
        if node.level >= self.config.levels or node.exhausted:
            return False
        return self.level_count(node.level + 1) < self.config.capacity[node.level]

    def path(self, node: Node) -> list[Node]:
        """Return the nodes from the first level down to `node` (the root excluded)."""
        out = []
        while node.parent is not None:
            out.append(node)
            node = self.nodes[node.parent]
        return out[::-1]

    def ucb(self, child: Node, parent: Node) -> float:
        """UCB of a child: X̄ + c·sqrt(ln N / n), infinite while unvisited."""
        if child.visits == 0:
            return math.inf
        return child.value + self.config.exploration * math.sqrt(math.log(max(parent.visits, 1)) / child.visits)

    def expand_here_score(self, node: Node) -> float:
        """UCB-like score of adding one more child to `node` (as if it were a child visited once more)."""
        base = node.value if node.visits else 1.0
        return base + self.config.exploration * math.sqrt(math.log(node.visits + 2) / (len(node.children) + 1))

    def _subtree_open(self, node: Node) -> bool:
        """Whether any node in the subtree can still be expanded."""
        return self.has_room(node) or any(self._subtree_open(self.nodes[c]) for c in node.children)

    def select(self) -> Node | None:
        """Walk down by UCB; stop where 'expand here' wins or no child is worth entering."""
        node = self.root
        while True:
            options: list[tuple[float, Node | None]] = []
            if self.has_room(node):
                options.append((self.expand_here_score(node), None))
            for cid in node.children:
                child = self.nodes[cid]
                if self._subtree_open(child):
                    options.append((self.ucb(child, node), child))
            if not options:
                return None
            _score, chosen = max(options, key=lambda o: o[0])  # first max wins: ties keep creation order
            if chosen is None:
                return node
            node = chosen

    def add_child(self, parent: Node, candidate: Candidate, score: float) -> Node:
        """Admit a child with visits 1 and value = its score, then backpropagate that reward once."""
        child = Node(
            id=len(self.nodes),
            level=parent.level + 1,
            question=candidate.question,
            answer=candidate.answer,
            score=score,
            parent=parent.id,
            visits=1,
            value=score,
        )
        self.nodes.append(child)
        parent.children.append(child.id)
        self.backpropagate(parent, score)
        return child

    def backpropagate(self, node: Node | None, reward: float) -> None:
        """Update `node` and every ancestor: n <- n+1, X̄ <- ((n-1)·X̄ + r)/n."""
        while node is not None:
            node.visits += 1
            node.value = ((node.visits - 1) * node.value + reward) / node.visits
            node = None if node.parent is None else self.nodes[node.parent]

    def reject(self, reason: str) -> None:
        """Count a rejection by its kind (the text before the first colon)."""
        kind = reason.split(":", 1)[0]
        self.rejections[kind] = self.rejections.get(kind, 0) + 1

    def complete_paths(self) -> list[list[Node]]:
        """Return every root-to-last-level path."""
        return [self.path(n) for n in self.nodes if n.level == self.config.levels]

    def top_paths(self) -> list[tuple[float, list[Node]]]:
        """Return the top-K complete paths by mean node score (ties: earlier paths first)."""
        scored = [(sum(n.score for n in p) / len(p), p) for p in self.complete_paths()]
        scored.sort(key=lambda sp: (-sp[0], [n.id for n in sp[1]]))
        return scored[: self.config.top_k]


async def expand(tree: Tree, node: Node, policy: Policy) -> list[Node]:
    """Generate candidates below `node`, judge them, admit those that pass; feed reasons back on failure."""
    config = tree.config
    path = tree.path(node)
    level = node.level + 1
    room = config.capacity[node.level] - tree.level_count(level)
    n = max(0, min(config.candidates_per_expansion, room, (config.max_calls - tree.calls) // 2))
    if n == 0:
        return []
    temperature = config.temperature_for(node.failed_attempts)
    candidates = await policy.generate(path, level, n, temperature, list(node.feedback))
    usable = [c for c in candidates[:n] if not c.error]
    judgements = await gather_all(policy.judge(path, c) for c in usable)
    tree.calls += n + len(usable)
    verdicts = dict(zip([id(c) for c in usable], judgements, strict=True))
    admitted: list[Node] = []
    reasons: list[str] = []
    for candidate in candidates[:n]:
        if candidate.error:
            reasons.append(f"unparsable: {candidate.error}")
            continue
        judgement = verdicts[id(candidate)]
        siblings = [tree.nodes[c] for c in node.children]
        text = f"{candidate.question} {candidate.answer}"
        closest = max((similarity(text, f"{s.question} {s.answer}") for s in siblings), default=0.0)
        if tree.level_count(level) >= config.capacity[node.level]:
            reasons.append(f"level full: level {level} holds {config.capacity[node.level]} nodes")
        elif judgement.score < config.quality_threshold:
            reasons.append(f"low quality: {judgement.score:.2f} < {config.quality_threshold}: {judgement.reason}")
        elif closest >= config.diversity_threshold:
            reasons.append(f"too similar: {closest:.2f} >= {config.diversity_threshold} to a sibling")
        else:
            admitted.append(tree.add_child(node, candidate, judgement.score))
            continue
    for reason in reasons:
        tree.reject(reason)
    if admitted:
        node.failed_attempts, node.feedback = 0, []
    else:
        node.failed_attempts += 1
        node.feedback = reasons
        if node.failed_attempts >= config.max_attempts_per_node:
            node.exhausted = True
    return admitted


async def search(policy: Policy, config: MCTSConfig | None = None) -> Tree:
    """Run until the iteration or call budget is spent, every level is full, or nothing can be expanded."""
    tree = Tree(config or MCTSConfig())
    for _ in range(tree.config.max_iterations):
        if tree.calls + 2 > tree.config.max_calls:
            break
        node = tree.select()
        if node is None:
            break
        await expand(tree, node, policy)
    return tree
