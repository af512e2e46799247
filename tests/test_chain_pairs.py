"""The chain browser's two-model view, computed without a browser (report/pairs.py) on hand-written cards.

A chain holds when all three levels are right; it breaks at its first wrong level; a chain of fewer than three
levels is incomplete (neither holds nor breaks). Every expected group below is written by hand from the cards.
"""

from __future__ import annotations

import re

import pytest

from hvcu_tasks.report.browser import Card, render_page
from hvcu_tasks.report.pairs import chain_pairs

T, F = True, False
EMPTY = {
    "both-hold": [],
    "a-holds-L1": [],
    "a-holds-L2": [],
    "a-holds-L3": [],
    "b-holds-L1": [],
    "b-holds-L2": [],
    "b-holds-L3": [],
    "both-break": [],
    "only-a": [],
    "only-b": [],
    "incomplete": [],
}


def card(model: str, sid: str, ours: list[bool], official: list[bool] | None = None, setting: str = "base") -> Card:
    """A card of one model and sample with one setting's per-level verdicts (ours; the authors' default to ours)."""
    record = {"correct": ours, "correct_official": ours if official is None else official}
    return Card(model, "aesthetic", sid, "color", records={setting: record})


def groups(**found: list[str]) -> dict[str, list[tuple[str, str]]]:
    """The full result with the given groups holding these aesthetic samples (the others empty)."""
    named = {key.replace("_", "-"): [("aesthetic", sid) for sid in sids] for key, sids in found.items()}
    return EMPTY | named


def test_both_chains_hold() -> None:
    cards = [card("a", "s1", [T, T, T]), card("b", "s1", [T, T, T])]
    assert chain_pairs(cards, "a", "b", "base") == groups(both_hold=["s1"])


@pytest.mark.parametrize(
    ("b_verdicts", "key"),
    [([F, T, T], "a-holds-L1"), ([T, F, T], "a-holds-L2"), ([T, T, F], "a-holds-L3"), ([T, F, F], "a-holds-L2")],
)
def test_a_holds_and_b_breaks_at_its_first_wrong_level(b_verdicts: list[bool], key: str) -> None:
    cards = [card("a", "s1", [T, T, T]), card("b", "s1", b_verdicts)]
    assert chain_pairs(cards, "a", "b", "base") == EMPTY | {key: [("aesthetic", "s1")]}


@pytest.mark.parametrize(
    ("a_verdicts", "key"),
    [([F, F, F], "b-holds-L1"), ([T, F, T], "b-holds-L2"), ([T, T, F], "b-holds-L3")],
)
def test_b_holds_and_a_breaks_at_its_first_wrong_level(a_verdicts: list[bool], key: str) -> None:
    cards = [card("a", "s1", a_verdicts), card("b", "s1", [T, T, T])]
    assert chain_pairs(cards, "a", "b", "base") == EMPTY | {key: [("aesthetic", "s1")]}


def test_swapping_the_models_swaps_the_groups() -> None:
    cards = [card("a", "s1", [T, T, T]), card("b", "s1", [T, T, F])]
    assert chain_pairs(cards, "b", "a", "base") == groups(b_holds_L3=["s1"])


def test_both_chains_break() -> None:
    cards = [card("a", "s1", [F, T, T]), card("b", "s1", [T, T, F])]
    assert chain_pairs(cards, "a", "b", "base") == groups(both_break=["s1"])


def test_samples_only_one_model_has_are_counted() -> None:
    cards = [card("a", "s1", [T, T, T]), card("a", "s2", [F, T, T]), card("b", "s3", [T, T, T])]
    assert chain_pairs(cards, "a", "b", "base") == groups(only_a=["s1", "s2"], only_b=["s3"])


def test_a_sample_one_model_ran_only_in_the_other_setting_is_only_the_other_models() -> None:
    cards = [card("a", "s1", [T, T, T], setting="context"), card("b", "s1", [T, T, T])]
    assert chain_pairs(cards, "a", "b", "base") == groups(only_b=["s1"])


@pytest.mark.parametrize(("a_verdicts", "b_verdicts"), [([T, T], [T, T, T]), ([T, T, T], [F]), ([F, T], [F, T, T])])
def test_an_incomplete_chain_is_counted_as_incomplete_not_broken(a_verdicts: list, b_verdicts: list) -> None:
    cards = [card("a", "s1", a_verdicts), card("b", "s1", b_verdicts)]
    assert chain_pairs(cards, "a", "b", "base") == groups(incomplete=["s1"])


def test_a_failed_request_is_wrong_at_its_level() -> None:
    failed = card("b", "s1", [T, F, T])
    failed.records["base"]["failed"] = [False, True, False]  # the harness scored the failed level wrong
    assert chain_pairs([card("a", "s1", [T, T, T]), failed], "a", "b", "base") == groups(a_holds_L2=["s1"])


def test_the_authors_rule_is_the_default() -> None:
    cards = [card("a", "s1", [T, T, T], official=[T, T, F]), card("b", "s1", [T, T, T])]
    assert chain_pairs(cards, "a", "b", "base") == groups(b_holds_L3=["s1"])


def test_our_rule_on_request() -> None:
    cards = [card("a", "s1", [T, T, T], official=[T, T, F]), card("b", "s1", [T, T, T])]
    assert chain_pairs(cards, "a", "b", "base", official=False) == groups(both_hold=["s1"])


def test_the_other_setting_is_its_own_pairing() -> None:
    cards = [card("a", "s1", [F, T, T], setting="context"), card("b", "s1", [T, T, T], setting="context")]
    assert chain_pairs(cards, "a", "b", "context") == groups(b_holds_L1=["s1"])


def test_other_models_are_left_out() -> None:
    cards = [card("a", "s1", [T, T, T]), card("b", "s1", [T, T, T]), card("c", "s2", [F, F, F])]
    assert chain_pairs(cards, "a", "b", "base") == groups(both_hold=["s1"])


def test_samples_keep_the_card_order() -> None:
    cards = [card(m, sid, [T, T, T]) for sid in ("s1", "s2", "s3") for m in ("a", "b")]
    assert chain_pairs(cards, "a", "b", "base")["both-hold"] == [("aesthetic", s) for s in ("s1", "s2", "s3")]


def test_the_same_model_twice_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^model A and model B are both 'a': pick two different models$"):
        chain_pairs([card("a", "s1", [T, T, T]), card("b", "s1", [T, T, T])], "a", "a", "base")


def test_a_model_not_on_the_page_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^no model 'c' among the cards \(models: 'a', 'b'\)$"):
        chain_pairs([card("a", "s1", [T, T, T]), card("b", "s1", [T, T, T])], "a", "c", "base")


def test_an_unknown_setting_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^no setting 'blind' \(settings: 'base', 'context'\)$"):
        chain_pairs([card("a", "s1", [T, T, T]), card("b", "s1", [T, T, T])], "a", "b", "blind")


# ---- the page's two-model section ---------------------------------------------------------------------------


def page(models: list[str]) -> str:
    """A chain browser page with no cards for the given models."""
    return render_page({"models": models, "families": [], "aspects": [], "questions": [], "cards": []}, [])


def test_a_page_of_two_models_has_the_view() -> None:
    text = page(["m1", "m2"])
    assert "id='pairs'" in text and "id='pairs-none'" not in text


def test_a_page_of_one_model_has_no_view_and_says_why() -> None:
    text = page(["only-model"])
    assert "id='pairs'" not in text
    found = re.search(r"<p id='pairs-none'>(.*?)</p>", text)
    assert found and found.group(1) == (
        "No two-model view: it compares two models&#x27; chains, and this page has one model (only-model)."
    )


def test_the_one_model_note_escapes_the_model_name() -> None:
    text = page(["<b>x</b>\"'&"])
    assert "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;&quot;&#x27;&amp;" in text
