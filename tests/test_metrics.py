"""Metrics: per-level and full-chain accuracy, error attribution, incomplete chains, Overall Score."""

from __future__ import annotations

import math

import pytest

from hvcu_tasks.core.metrics import Outcome, first_error_level, is_na, overall_score, score_family


def chain(sid: str, marks: str, aspect: str = "metaphor") -> list[Outcome]:
    """Outcomes for one sample; marks per level: 'y' right, 'n' wrong, '?' unparsable, '-' not asked."""
    out = []
    for level, m in enumerate(marks, start=1):
        if m == "-":
            continue
        pred = {"y": "A", "n": "B", "?": None}[m]
        out.append(Outcome(sid, "implication", aspect, level, "A", pred))
    return out


def test_per_level_full_chain_and_attribution_by_hand() -> None:
    outcomes = chain("1", "yyy") + chain("2", "nyy") + chain("3", "yny") + chain("4", "yyn") + chain("5", "yn?")
    s = score_family(outcomes)
    assert s.acc == {"perc": 80.0, "bridge": 60.0, "conn": 60.0}
    assert s.acc_full == 20.0
    assert s.invalid == {"perc": 0.0, "bridge": 0.0, "conn": 20.0}
    assert s.error_counts == {"perc": 1, "bridge": 2, "conn": 1}
    assert s.error_share == {"perc": 25.0, "bridge": 50.0, "conn": 25.0}
    assert s.n_samples == 5 and s.n_incomplete == 0


def test_attribution_takes_the_first_wrong_level() -> None:
    by_level = {o.level: o for o in chain("1", "ynn")}
    assert first_error_level(by_level) == 2
    assert first_error_level({o.level: o for o in chain("1", "yyy")}) is None


def test_unparsable_counts_as_wrong_and_as_invalid() -> None:
    s = score_family(chain("1", "?yy"))
    assert s.acc["perc"] == 0.0 and s.invalid["perc"] == 100.0 and s.acc_full == 0.0


def test_incomplete_chains_are_left_out_of_full_chain_but_not_level_accuracy() -> None:
    s = score_family(chain("1", "yyy") + chain("2", "yy-") + chain("3", "n--"))
    assert s.n_samples == 1 and s.n_incomplete == 2
    assert s.acc_full == 100.0
    assert s.acc["perc"] == pytest.approx(200 / 3)
    assert s.asked == {"perc": 3, "bridge": 2, "conn": 1}


def test_per_aspect_full_chain_accuracy() -> None:
    s = score_family(chain("1", "yyy", "metaphor") + chain("2", "yyn", "metaphor") + chain("3", "yyy", "contrast"))
    assert s.aspect_acc_full == {"contrast": 100.0, "metaphor": 50.0}
    assert s.aspect_n == {"contrast": 1, "metaphor": 2}


def test_duplicate_outcomes_are_an_error() -> None:
    with pytest.raises(ValueError, match="duplicate outcome for sample '1' level 1"):
        score_family(chain("1", "yyy") + chain("1", "y--"))


def test_nothing_failed_gives_not_available_shares() -> None:
    assert all(math.isnan(v) for v in score_family(chain("1", "yyy")).error_share.values())


# Paper Table 2 (base) and Table 8 (context): family Acc_full values and the printed Score.
PAPER_ROWS = [
    ("Human", (86.00, 88.86, 86.67), 87.18),
    ("GPT-4o", (53.25, 53.14, 50.33), 52.24),
    ("Qwen3-VL-4B", (43.25, 41.14, 39.33), 41.24),
    ("Qwen3-VL-8B", (50.75, 44.00, 48.00), 47.58),
    ("LLaVA-1.6-7B", (18.75, 9.43, 12.00), 13.39),
    ("LLaVA-1.6-13B", (39.50, 26.29, 21.33), 29.04),
    ("Deepseek-VL2-tiny", (29.25, 19.71, 19.00), 22.65),
    ("Deepseek-VL2", (49.50, 23.71, 36.67), 36.63),
    ("Gemma3-4B", (30.75, 29.14, 36.00), 31.96),
    ("Gemma3-12B", (47.50, 38.86, 46.33), 44.23),
    ("InternVL3.5-4B", (42.00, 23.43, 47.67), 37.70),
    ("InternVL3.5-8B", (41.75, 36.29, 42.00), 40.01),
    ("Phi-4-Multimodal", (32.25, 15.14, 33.67), 27.02),
    ("Phi-3.5-Vision", (44.75, 33.14, 41.33), 39.74),
    ("GPT-4o context", (65.00, 72.86, 66.67), 68.18),
    ("Qwen3-VL-8B context", (62.75, 59.43, 64.67), 62.28),
]


@pytest.mark.parametrize(("model", "families", "score"), PAPER_ROWS, ids=[r[0] for r in PAPER_ROWS])
def test_overall_score_reproduces_the_paper(model: str, families: tuple[float, ...], score: float) -> None:
    assert overall_score(list(families)) == score


def test_overall_score_needs_a_family() -> None:
    with pytest.raises(ValueError):
        overall_score([])


def test_outcome_round_trips_every_field_through_its_dict() -> None:
    outcome = Outcome(
        sample_id="font_001",
        family="aesthetic",
        aspect="font",
        level=2,
        gold="B",
        pred="C",
        response="I would say (C), the serif one.",
        pred_official=None,
        failed=True,
        data="hvcu-data/1:abc123",
    )
    record = outcome.to_dict()  # what a samples log holds (the harness drops only `response` from it)
    assert record == {
        "sample_id": "font_001",
        "family": "aesthetic",
        "aspect": "font",
        "level": 2,
        "gold": "B",
        "pred": "C",
        "response": "I would say (C), the serif one.",
        "pred_official": None,
        "correct": False,
        "correct_official": False,
        "failed": True,
        "data": "hvcu-data/1:abc123",
    }
    assert Outcome.from_dict(record) == outcome


def test_per_aspect_accuracy_counts_every_right_chain_of_the_aspect() -> None:
    chains = chain("1", "yyy") + chain("2", "yyy") + chain("3", "yny") + chain("4", "yyy", "contrast")
    assert score_family(chains).aspect_acc_full == {"contrast": 100.0, "metaphor": pytest.approx(200 / 3)}


def test_nan_is_not_available() -> None:
    assert is_na(float("nan")) is True


def test_none_is_not_available() -> None:
    assert is_na(None) is True


def test_a_measured_zero_is_available() -> None:
    assert is_na(0.0) is False


def test_overall_score_without_families_says_what_it_needs() -> None:
    with pytest.raises(ValueError, match=r"^the Overall Score needs at least one family's full-chain accuracy$"):
        overall_score([])


def test_family_scores_flatten_to_a_json_ready_dict() -> None:
    scores = score_family(chain("1", "yyy") + chain("2", "yny") + chain("3", "y--"))
    assert scores.to_dict() == {
        "acc": {"perc": 100.0, "bridge": 50.0, "conn": 100.0},
        "invalid": {"perc": 0.0, "bridge": 0.0, "conn": 0.0},
        "asked": {"perc": 3, "bridge": 2, "conn": 2},
        "acc_full": 50.0,
        "n_samples": 2,
        "n_incomplete": 1,
        "error_counts": {"perc": 0, "bridge": 1, "conn": 0},
        "error_share": {"perc": 0.0, "bridge": 100.0, "conn": 0.0},
        "aspect_acc_full": {"metaphor": 50.0},
        "aspect_n": {"metaphor": 2},
    }


# A samples-log record as the harness writes it: `response` is dropped (lmms-eval keeps the raw reply).
LOGGED = {"sample_id": "color_001", "family": "aesthetic", "aspect": "color", "level": 1, "gold": "D", "pred": "D"}


def test_a_logged_record_without_the_reply_rebuilds_with_an_empty_reply() -> None:
    assert Outcome.from_dict({**LOGGED, "pred_official": "D"}).response == ""


def test_a_record_logged_before_the_authors_parse_gets_it_from_the_reply() -> None:
    assert Outcome.from_dict({**LOGGED, "response": "D."}).pred_official == "D"  # "C." is C under their rule
