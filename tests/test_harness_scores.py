"""The task's aggregations on the smoke sample for a hand-chosen mix of replies; every expected number by hand.

The mix (MIX) has right and wrong letters, an empty reply, and prose that our parser reads but the authors'
rule (as the protocol note describes it) rejects: "The answer is (B)." and "Option D". Both settings must
give the same numbers for the same replies. tests/test_e2e.py runs the same mix through the real CLI.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import datasets
import pytest

from hvcu_tasks.core import aggregate
from hvcu_tasks.core.families import ASPECTS
from hvcu_tasks.core.metrics import Outcome
from hvcu_tasks.core.payloads import flatten
from hvcu_tasks.lmms import context, hook_table, hooks
from hvcu_tasks.results.scores import family_metrics

# (family, sample id) -> replies to L1, L2, L3. Gold keys of the smoke sample in the comments.
MIX: dict[tuple[str, str], tuple[str, str, str]] = {
    ("implication", "metaphor_001"): ("B", "A", "C"),  # gold B A C: all right
    ("implication", "symbolism_001"): ("A", "D", "The answer is (B)."),  # gold A D B: L3 right for us only
    ("implication", "contrast_001"): ("C", "B", "B"),  # gold C A B: L2 wrong
    ("implication", "exaggeration_001"): ("Option D", "B", "A"),  # gold D B A: L1 right for us only
    ("implication", "dislocation_001"): ("", "C", "B"),  # gold C C B: L1 empty (no reply, unparsable)
    ("aesthetic", "color_001"): ("D", "B", "A"),  # gold D B A: all right
    ("aesthetic", "composition_001"): ("C", "A", "A"),  # gold C A D: L3 wrong
    ("aesthetic", "font_001"): ("A", "B", "A"),  # gold C B A: L1 wrong
    ("aesthetic", "graphics_001"): ("B", "C", "D."),  # gold B C D: all right
    ("affective", "joy_001"): ("A", "B", "C"),  # gold A B C: all right
    ("affective", "affection_001"): ("B", "D", "A"),  # gold B D A: all right
    ("affective", "wonder_001"): ("C", "A", "B"),  # gold C A B: all right
    ("affective", "anger_001"): ("D", "C", "B"),  # gold D C B: all right
    ("affective", "fear_001"): ("B", "B", "C"),  # gold A B C: L1 wrong
    ("affective", "sadness_001"): ("D", "A", "C"),  # gold D B A: L2 and L3 wrong
}

# Implication, our rule: L1 4/5 (dislocation empty) = 80; L2 4/5 (contrast) = 80; L3 5/5 = 100;
#   full: metaphor, symbolism, exaggeration = 3/5 = 60; first errors: dislocation at L1, contrast at L2.
# Implication, authors' rule: L1 3/5 ("Option D" and "" rejected) = 60; L2 4/5 = 80; L3 4/5 ("(B)") = 80;
#   full: metaphor only = 1/5 = 20.
# Aesthetic (both rules agree; "D." is D under both): L1 3/4 = 75; L2 4/4 = 100; L3 3/4 = 75;
#   full: color, graphics = 2/4 = 50; first errors: font at L1, composition at L3.
# Affective (both rules agree): L1 5/6; L2 5/6; L3 5/6 (= 83.33); full 4/6 (= 66.67);
#   first errors: fear at L1, sadness at L2.
# What each family task reports to lmms-eval (its aggregations).
EXPECTED: dict[str, dict[str, float]] = {
    "implication": {
        "acc_l1_perc": 80.0,
        "acc_l2_bridge": 80.0,
        "acc_l3_conn": 100.0,
        "acc_full": 60.0,
        "acc_l1_perc_official": 60.0,
        "acc_l2_bridge_official": 80.0,
        "acc_l3_conn_official": 80.0,
        "acc_full_official": 20.0,
        "n_chains": 5,
        "n_failed_requests": 1,
    },
    "aesthetic": {
        "acc_l1_perc": 75.0,
        "acc_l2_bridge": 100.0,
        "acc_l3_conn": 75.0,
        "acc_full": 50.0,
        "acc_full_official": 50.0,
        "n_chains": 4,
        "n_failed_requests": 0,
    },
    "affective": {
        "acc_l1_perc": 500 / 6,
        "acc_l2_bridge": 500 / 6,
        "acc_l3_conn": 500 / 6,
        "acc_full": 400 / 6,
        "acc_full_official": 400 / 6,
        "n_chains": 6,
    },
}
# What `hvcu report` computes from the same outcomes as logged (hvcu_tasks.results.scores).
EXPECTED_DIAGNOSTICS: dict[str, dict[str, float]] = {
    "implication": {
        "invalid_perc": 20.0,
        "invalid_bridge": 0.0,
        "errors_at_perc": 1,
        "errors_at_bridge": 1,
        "errors_at_conn": 0,
        "error_share_perc": 50.0,
        "full_metaphor": 100.0,
        "full_symbolism": 100.0,
        "full_contrast": 0.0,
        "full_dislocation": 0.0,
    },
    "aesthetic": {
        "errors_at_perc": 1,
        "errors_at_bridge": 0,
        "errors_at_conn": 1,
        "error_share_conn": 50.0,
        "full_font": 0.0,
        "full_graphics": 100.0,
    },
    "affective": {
        "errors_at_perc": 1,
        "errors_at_bridge": 1,
        "errors_at_conn": 0,
        "full_sadness": 0.0,
        "full_joy": 100.0,
    },
}
# Overall Score = unweighted mean of the three acc_full, 2 decimals:
#   ours (60 + 50 + 66.667) / 3 = 176.667 / 3 = 58.89; authors' rule (20 + 50 + 66.667) / 3 = 136.667 / 3 = 45.56.
OVERALL = 58.89
OVERALL_OFFICIAL = 45.56
FAMILIES = ("implication", "aesthetic", "affective")


def write_mix_predictions(path: Path) -> Path:
    """Write MIX as hvcu_replay predictions (one JSONL line per sample and level)."""
    lines = [
        json.dumps({"family": family, "sample_id": sid, "level": level, "response": reply})
        for (family, sid), replies in MIX.items()
        for level, reply in enumerate(replies, start=1)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def stub(family: str) -> datasets.Dataset:
    return datasets.Dataset.from_list([{"family": family, "source": "smoke"}])


@cache
def base_items(family: str) -> list[dict]:
    """The acc_full payloads of every base-setting document answered with MIX."""
    docs = hooks.process_docs(stub(family))
    return [hooks.process_results(d, [MIX[(family, d["sample_id"])][d["level"] - 1]])["acc_full"] for d in docs]


@cache
def context_items(family: str) -> list[dict]:
    """The acc_full payloads of every context-setting chain answered with MIX."""
    docs = context.process_docs(stub(family))
    return [context.process_results(d, [list(MIX[(family, d["sample_id"])])])["acc_full"] for d in docs]


ITEMS = {"base": base_items, "context": context_items}
CASES = [(s, f, m, v) for s in ITEMS for f in FAMILIES for m, v in EXPECTED[f].items()]
DIAGNOSTIC_CASES = [(s, f, m, v) for s in ITEMS for f in FAMILIES for m, v in EXPECTED_DIAGNOSTICS[f].items()]


@pytest.mark.parametrize(("setting", "family", "metric", "value"), CASES)
def test_every_metric_is_the_hand_computed_number(setting: str, family: str, metric: str, value: float) -> None:
    assert hook_table.AGGREGATIONS[metric](ITEMS[setting](family)) == pytest.approx(value)


@pytest.mark.parametrize(("setting", "family", "metric", "value"), DIAGNOSTIC_CASES)
def test_every_diagnostic_of_the_logged_outcomes_is_the_hand_computed_number(
    setting: str, family: str, metric: str, value: float
) -> None:
    outcomes = [Outcome.from_dict(r) for r in flatten(ITEMS[setting](family))]
    assert family_metrics(outcomes, ASPECTS[family])[metric] == pytest.approx(value)


@pytest.mark.parametrize("setting", list(ITEMS))
def test_overall_score_is_the_hand_computed_mean(setting: str) -> None:
    fulls = [hook_table.AGGREGATIONS["acc_full"](ITEMS[setting](f)) for f in FAMILIES]
    assert aggregate.overall_score_group(fulls, [15, 12, 18]) == OVERALL


@pytest.mark.parametrize("setting", list(ITEMS))
def test_overall_score_under_the_authors_rule_is_the_hand_computed_mean(setting: str) -> None:
    fulls = [hook_table.AGGREGATIONS["acc_full_official"](ITEMS[setting](f)) for f in FAMILIES]
    assert aggregate.overall_score_group(fulls, [15, 12, 18]) == OVERALL_OFFICIAL
