"""The pure scores behind the analyses (issue 15): position bias, error propagation, circular evaluation, chance.

Every expected number is worked out by hand in the comments.
"""

from __future__ import annotations

import math

import pytest

from hvcu_tasks.core import metrics
from hvcu_tasks.core.documents import rotate_options, rotated_answer
from hvcu_tasks.core.metrics import Outcome
from hvcu_tasks.results import scores


def _o(sid: str, level: int, gold: str, pred: str | None, family: str = "aesthetic") -> Outcome:
    return Outcome(sid, family, "color", level, gold, pred, pred or "")


def _chain(sid: str, golds: str, preds: str) -> list[Outcome]:
    """One chain; '-' in `preds` is a reply with no letter."""
    return [_o(sid, lv, g, None if p == "-" else p) for lv, g, p in zip((1, 2, 3), golds, preds, strict=True)]


# --- answer-position bias ------------------------------------------------------------------------------------


def test_position_shares_count_the_replies_with_a_parsed_letter() -> None:
    # golds A A B C; letters A A A and one reply with none (gold C): 3 parsed replies, golds A A B among them
    outcomes = [_o("s1", 1, "A", "A"), _o("s2", 1, "A", "A"), _o("s3", 1, "B", "A"), _o("s4", 1, "C", None)]
    got = scores.score_positions(outcomes).as_metrics()
    assert got["pred_share_A"] == 100.0 and got["pred_share_B"] == 0.0 and got["pred_share_D"] == 0.0
    assert got["gold_share_A"] == pytest.approx(200 / 3) and got["gold_share_B"] == pytest.approx(100 / 3)
    assert got["gold_share_C"] == 0.0 and got["gold_share_D"] == 0.0


def test_position_bias_is_half_the_summed_share_differences() -> None:
    # preds A A A (A 100); golds of those replies A A B (A 66.7, B 33.3): (33.3 + 33.3) / 2 = 33.3
    outcomes = [_o("s1", 1, "A", "A"), _o("s2", 1, "A", "A"), _o("s3", 1, "B", "A"), _o("s4", 1, "C", None)]
    assert scores.score_positions(outcomes).bias == pytest.approx(100 / 3)


def test_replies_spread_like_the_golds_have_no_position_bias() -> None:
    outcomes = [_o("s1", 1, "A", "B"), _o("s2", 1, "B", "A"), _o("s3", 1, "C", "D"), _o("s4", 1, "D", "C")]
    assert scores.score_positions(outcomes).bias == 0.0


def test_unparsable_replies_do_not_make_a_model_without_a_letter_preference_look_biased() -> None:
    # golds A B C D C D; the replies to the last two (golds C, D) name no letter, the others are right:
    # parsed A B C D against golds A B C D -> no preference at all
    preds = ["A", "B", "C", "D", None, None]
    outcomes = [_o(f"s{i}", 1, g, p) for i, (g, p) in enumerate(zip("ABCDCD", preds, strict=True))]
    got = scores.score_positions(outcomes).as_metrics()
    assert got["position_bias"] == 0.0
    assert [got[f"gold_share_{k}"] for k in "ABCD"] == [25.0, 25.0, 25.0, 25.0]


def test_position_bias_of_a_fully_one_sided_run_is_exactly_100() -> None:
    # one chain, golds B C D, always answering A: pred A 100, golds B C D a third each -> (100 + 3 x 33.3) / 2 = 100
    got = scores.score_task(_chain("c1", "BCD", "AAA")).as_metrics(["color"])
    assert got["position_bias"] == 100.0


def test_position_metrics_with_no_parsed_reply_are_not_available() -> None:
    got = scores.score_positions([_o("s1", 1, "A", None)]).as_metrics()
    assert math.isnan(got["pred_share_A"]) and math.isnan(got["position_bias"])
    assert math.isnan(got["gold_share_A"])


# --- error propagation ---------------------------------------------------------------------------------------


def test_error_propagation_conditions_on_the_level_before() -> None:
    outcomes = [
        *_chain("c1", "AAA", "AAA"),  # right right right
        *_chain("c2", "AAA", "BBA"),  # wrong wrong right
        *_chain("c3", "AAA", "BAB"),  # wrong right wrong
        *_chain("c4", "AAA", "ABB"),  # right wrong wrong
        *_chain("c5", "AAA", "-AA"),  # no letter (wrong) right right
    ]
    got = scores.score_task(outcomes).as_metrics(["color"])
    # L1 wrong: c2 c3 c5, of which L2 wrong: c2 -> 1/3; L1 right: c1 c4, L2 wrong: c4 -> 1/2
    assert got["wrong_bridge_after_wrong"] == pytest.approx(100 / 3)
    assert got["wrong_bridge_after_right"] == 50.0
    # L2 wrong: c2 c4, L3 wrong: c4 -> 1/2; L2 right: c1 c3 c5, L3 wrong: c3 -> 1/3
    assert got["wrong_conn_after_wrong"] == 50.0
    assert got["wrong_conn_after_right"] == pytest.approx(100 / 3)


def test_error_propagation_with_no_chain_meeting_the_condition_is_nan_not_zero() -> None:
    got = scores.score_task(_chain("c1", "AAA", "AAA")).as_metrics(["color"])
    assert math.isnan(got["wrong_bridge_after_wrong"]) and math.isnan(got["wrong_conn_after_wrong"])
    assert got["wrong_bridge_after_right"] == 0.0 and got["wrong_conn_after_right"] == 0.0


def test_error_propagation_leaves_out_incomplete_chains() -> None:
    outcomes = [*_chain("c1", "AAA", "BBB"), *_chain("c2", "AAA", "BB-")[:2]]  # c2 lacks L3
    got = scores.score_task(outcomes).as_metrics(["color"])
    assert got["wrong_bridge_after_wrong"] == 100.0  # c1 only: 1/1
    assert math.isnan(got["wrong_bridge_after_right"])


def test_the_new_metrics_leave_the_existing_values_unchanged() -> None:
    outcomes = [*_chain("c1", "ABC", "ABC"), *_chain("c2", "ABC", "ABD")]
    got = scores.score_task(outcomes).as_metrics(["color"])
    assert got["acc_l1_perc"] == 100.0 and got["acc_l3_conn"] == 50.0 and got["acc_full"] == 50.0
    assert got["errors_at_conn"] == 1 and got["n_chains"] == 2 and got["full_color"] == 50.0


# --- circular evaluation -------------------------------------------------------------------------------------

KEYS = ("A", "B", "C", "D")
TEXTS = ("red", "green", "blue", "grey")


def _rotated_level(sid: str, level: int, gold_text: str, reply, family: str = "aesthetic") -> list[tuple[int, Outcome]]:
    """The four rotated outcomes of one level; `reply(options)` gives the letter answered for each rotation."""
    original = tuple(zip(KEYS, TEXTS, strict=True))
    gold = KEYS[TEXTS.index(gold_text)]
    out = []
    for r in range(4):
        options = rotate_options(original, r)
        out.append((r, _o(sid, level, rotated_answer(original, gold, r), reply(dict(options)), family)))
    return out


def _by_text(text: str):
    return lambda options: next(k for k, t in options.items() if t == text)


def test_rotations_keep_the_keys_and_move_every_text_through_every_key() -> None:
    original = tuple(zip(KEYS, TEXTS, strict=True))
    orders = [rotate_options(original, r) for r in range(4)]
    assert all([k for k, _ in o] == list(KEYS) for o in orders)
    assert all(sorted(t for _, t in o) == sorted(TEXTS) for o in orders)
    assert len({tuple(t for _, t in o) for o in orders}) == 4
    assert {dict(o)["A"] for o in orders} == set(TEXTS)  # each text sits at A exactly once


def test_the_gold_key_follows_its_text() -> None:
    original = tuple(zip(KEYS, TEXTS, strict=True))
    for r in range(4):
        assert dict(rotate_options(original, r))[rotated_answer(original, "C", r)] == "blue"
    assert [rotated_answer(original, "C", r) for r in range(4)] == ["C", "B", "A", "D"]


def test_a_model_that_always_answers_a_scores_zero_circular() -> None:
    rotated = [x for sid in ("s1", "s2") for lv in (1, 2, 3) for x in _rotated_level(sid, lv, "blue", lambda _o: "A")]
    got = scores.circular_metrics(rotated)
    assert got["acc_l1_perc"] == got["acc_l2_bridge"] == got["acc_l3_conn"] == got["acc_full"] == 0.0
    assert got["plain_acc_l1_perc"] == 25.0  # right in the one rotation that puts the gold at A
    assert got["pred_share_A"] == 100.0 and got["gold_share_A"] == 25.0 and got["position_bias"] == 75.0


def test_circular_levels_and_chains_on_a_hand_computed_mix() -> None:
    rotated = [
        # s1: every level answered by its gold text in every rotation -> all circular-right
        *_rotated_level("s1", 1, "red", _by_text("red")),
        *_rotated_level("s1", 2, "green", _by_text("green")),
        *_rotated_level("s1", 3, "blue", _by_text("blue")),
        # s2: L1 right, L2 always "B" (right once), L3 a wrong text (never right)
        *_rotated_level("s2", 1, "grey", _by_text("grey")),
        *_rotated_level("s2", 2, "red", lambda _o: "B"),
        *_rotated_level("s2", 3, "red", _by_text("blue")),
    ]
    got = scores.circular_metrics(rotated)
    assert got["acc_l1_perc"] == 100.0 and got["acc_l2_bridge"] == 50.0 and got["acc_l3_conn"] == 50.0
    assert got["acc_full"] == 50.0 and got["n_chains"] == 2 and got["n_incomplete"] == 0
    # every rotation on its own: L2 4 + 1 of 8, L3 4 + 0 of 8
    assert got["plain_acc_l2_bridge"] == 62.5 and got["plain_acc_l3_conn"] == 50.0


def test_a_level_missing_a_rotation_is_left_out_and_its_sample_counted_incomplete() -> None:
    rotated = [
        *_rotated_level("s1", 1, "red", _by_text("red")),
        *_rotated_level("s1", 2, "red", _by_text("red")),
        *_rotated_level("s1", 3, "red", _by_text("red"))[:3],
    ]
    got = metrics.score_circular(rotated)
    assert got["acc_l1_perc"] == 100.0 and math.isnan(got["acc_l3_conn"]) and math.isnan(got["acc_full"])
    assert got["n_chains"] == 0 and got["n_incomplete"] == 1


def test_a_rotation_given_twice_is_refused() -> None:
    rotated = _rotated_level("s1", 1, "red", _by_text("red"))
    with pytest.raises(ValueError, match="sample 's1' level 1 rotation 2"):
        metrics.score_circular([*rotated, rotated[2]])


def test_circular_official_rule_reads_the_reply_the_authors_way() -> None:
    # every rotation: our parser finds no letter, the authors' finds the gold -> circular-right only officially
    original = tuple(zip(KEYS, TEXTS, strict=True))
    rotated = [
        (r, Outcome("s1", "aesthetic", "color", 1, gold, None, "", pred_official=gold))
        for r in range(4)
        for gold in [rotated_answer(original, "A", r)]
    ]
    got = scores.circular_metrics(rotated)
    assert got["acc_l1_perc"] == 0.0 and got["acc_l1_perc_official"] == 100.0 and got["invalid_perc"] == 100.0


# --- chance --------------------------------------------------------------------------------------------------


def test_chance_values() -> None:
    from hvcu_tasks.report import tables

    assert tables.CHANCE_LEVEL == 25.0
    assert tables.CHANCE_FULL == 100 / 64  # 1.5625
    assert tables.CIRCULAR_CHANCE_LEVEL == 100 / 256  # (1/4)^4
    assert tables.CIRCULAR_CHANCE_FULL == 100 / 256**3  # (1/256)^3
    assert tables.CHANCE_WRONG == 75.0


def test_circular_full_chain_counts_each_rule_apart_and_failed_requests() -> None:
    # s1: every rotation of every level right under both rules. s2: right under ours everywhere, but its L2
    # rotation 3 reply "(B)" is unparsable under the authors' rule. s3: L1 rotation 2 got no reply at all (failed).
    def level(sid: str, lv: int, bad_official: int | None = None, failed: int | None = None) -> list:
        out = []
        for r in range(4):
            if r == failed:
                out.append((r, Outcome(sid, "aesthetic", "color", lv, "B", None, "", failed=True)))
            else:
                reply = "(B)" if r == bad_official else "B"
                out.append((r, Outcome(sid, "aesthetic", "color", lv, "B", "B", reply)))
        return out

    rotated = [*level("s1", 1), *level("s1", 2), *level("s1", 3)]
    rotated += [*level("s2", 1), *level("s2", 2, bad_official=3), *level("s2", 3)]
    rotated += [*level("s3", 1, failed=2), *level("s3", 2), *level("s3", 3)]
    got = metrics.score_circular(rotated)
    assert got["n_chains"] == 3 and got["n_incomplete"] == 0 and got["n_failed_requests"] == 1
    assert got["acc_full"] == pytest.approx(200 / 3)  # s1, s2 (ours); s3 lost a rotation of L1
    assert got["acc_full_official"] == pytest.approx(100 / 3)  # s1 only
    assert (
        got["acc_l1_perc"] == pytest.approx(200 / 3) and got["acc_l2_bridge"] == 100.0 and got["acc_l3_conn"] == 100.0
    )
    assert got["acc_l2_bridge_official"] == pytest.approx(200 / 3) and got["acc_l1_perc_official"] == pytest.approx(
        200 / 3
    )


def test_circular_rows_rotate_each_levels_texts_and_carry_the_identity() -> None:
    from hvcu_tasks.core.documents import circular_rows, level_rows
    from hvcu_tasks.core.schema import ImageRef, Level, Sample

    opts = (("A", "red"), ("B", "blue"), ("C", "green"), ("D", "gold"))
    sample = Sample("c1", "aesthetic", "color", ImageRef(data=b"png"), (Level(1, "Colour?", opts, "C"),), "src")
    (base,) = level_rows([sample], "ID")
    assert base == {
        "sample_id": "c1",
        "family": "aesthetic",
        "aspect": "color",
        "level": 1,
        "question": "Colour?",
        "option_keys": ["A", "B", "C", "D"],
        "option_texts": ["red", "blue", "green", "gold"],
        "answer": "C",
        "image_path": None,
        "image_bytes": b"png",
        "data_identity": "ID",
    }
    rows = list(circular_rows([sample], "ID"))
    assert [r["rotation"] for r in rows] == [0, 1, 2, 3]
    assert [r["option_texts"] for r in rows] == [
        ["red", "blue", "green", "gold"],
        ["blue", "green", "gold", "red"],
        ["green", "gold", "red", "blue"],
        ["gold", "red", "blue", "green"],
    ]
    assert [r["answer"] for r in rows] == ["C", "B", "A", "D"]  # where "green" stands
    assert all(r["option_keys"] == ["A", "B", "C", "D"] and r["data_identity"] == "ID" for r in rows)
    assert all(
        {k: r[k] for k in base if k not in ("option_texts", "answer")}
        == {k: base[k] for k in base if k not in ("option_texts", "answer")}
        for r in rows
    )


def test_rows_built_without_an_identity_carry_an_empty_one() -> None:
    from hvcu_tasks.core.documents import level_rows
    from hvcu_tasks.core.schema import Level, Sample

    sample = Sample("c1", "aesthetic", "color", None, (Level(1, "Q?", (("A", "x"), ("B", "y")), "A"),), "src")
    assert [r["data_identity"] for r in level_rows([sample])] == [""]


def test_a_context_chain_scores_name_the_data_they_came_from() -> None:
    import json

    from hvcu_tasks.core.documents import sample_rows
    from hvcu_tasks.core.schema import Level, Sample
    from hvcu_tasks.lmms import context

    levels = tuple(Level(n, f"Q{n}?", (("A", "x"), ("B", "y")), "A") for n in (1, 2, 3))
    (doc,) = sample_rows([Sample("c1", "aesthetic", "color", None, levels, "src")], json.dumps({"fingerprint": "fp"}))
    assert [o.data for o in context.outcomes_of(doc, ["A", "B", "A"])] == ["fp", "fp", "fp"]


def test_a_rotation_outside_0_to_3_is_refused_naming_the_sample_and_level() -> None:
    with pytest.raises(ValueError) as exc:
        metrics.score_circular([(4, _o("s9", 2, "A", "A"))])
    assert str(exc.value) == "rotation 4 of sample 's9' level 2: expected 0-3"
