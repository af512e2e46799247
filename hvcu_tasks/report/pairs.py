"""The chain browser's two-model view: the samples whose chain one model holds and the other breaks, and where.

For two models A and B, one setting and one parsing rule, every sample either model answered in that setting
(same family and sample id) falls in one group: both chains hold (all three levels right), A holds and B breaks
(split by B's first wrong level), the reverse, both break, only A or only B has the sample, or either chain is
incomplete (fewer than three levels: neither holds nor breaks). The page's script groups the embedded cards by the
same rule (browser.js `pairKey`), with the first wrong levels `first_wrong_level` gave each chain.
"""

from __future__ import annotations

from collections.abc import Sequence

from hvcu_tasks.report.browser import SETTINGS, Card, first_wrong_level

LEVELS = ("L1", "L2", "L3")
GROUPS = (
    "both-hold",
    *(f"a-holds-{level}" for level in LEVELS),
    *(f"b-holds-{level}" for level in LEVELS),
    "both-break",
    "only-a",
    "only-b",
    "incomplete",
)
"""Every group of the view, in the order the page lists them; `a-holds-L2`: A holds, B first breaks at L2."""

Sample = tuple[str | None, str]
"""A sample as the view names it: (family, sample id)."""


def pair_group(first_a: str, first_b: str) -> str:
    """Return the group of a sample both models answered, from each chain's first wrong level ('none' if it holds)."""
    if "incomplete" in (first_a, first_b):
        return "incomplete"
    if first_a == first_b == "none":
        return "both-hold"
    if first_a == "none":
        return f"a-holds-{first_b}"
    if first_b == "none":
        return f"b-holds-{first_a}"
    return "both-break"


def check_pair(models: Sequence[str], a: str, b: str, setting: str) -> None:
    """Refuse a pairing of one model with itself, a model not among `models`, or a setting the page has not."""
    if a == b:
        raise ValueError(f"model A and model B are both {a!r}: pick two different models")
    for model in (a, b):
        if model not in models:
            raise ValueError(f"no model {model!r} among the cards (models: {', '.join(map(repr, models))})")
    if setting not in SETTINGS:
        raise ValueError(f"no setting {setting!r} (settings: {', '.join(map(repr, SETTINGS))})")


def chain_pairs(cards: Sequence[Card], a: str, b: str, setting: str, official: bool = True) -> dict[str, list[Sample]]:
    """Return every group of GROUPS with its samples (in card order) for models `a` and `b` in one setting.

    `official`: judge each level by the authors' parsing rule (the one the leaderboard ranks by), else by ours.
    """
    check_pair(sorted({c.model for c in cards}), a, b, setting)
    verdicts = "correct_official" if official else "correct"
    first: dict[str, dict[Sample, str]] = {a: {}, b: {}}
    order: dict[Sample, None] = {}
    for card in cards:
        record = card.records.get(setting)
        if card.model in first and record is not None:
            key = (card.family, card.sample_id)
            first[card.model][key] = first_wrong_level(record[verdicts])
            order[key] = None
    found: dict[str, list[Sample]] = {group: [] for group in GROUPS}
    for key in order:
        if key not in first[b]:
            found["only-a"].append(key)
        elif key not in first[a]:
            found["only-b"].append(key)
        else:
            found[pair_group(first[a][key], first[b][key])].append(key)
    return found
