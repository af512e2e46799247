"""Every interval method of the leaderboard against a textbook value or a simulation with a known answer.

The simulations draw chains from known accuracies with their own seeded generator (numpy's), so each test has a
fixed outcome; the bounds around 95% (or 80% power) allow for about 3.5 standard errors of the share.
"""

from __future__ import annotations

import numpy as np
import pytest

from hvcu_tasks.report import stats
from hvcu_tasks.report.uncertainty import BINOMIAL, BOOTSTRAP, Contender, Verdicts, assess

SIZES = {"implication": 400, "aesthetic": 350, "affective": 300}
"""The benchmark's family sizes (Table 5 of the paper)."""
SIMULATIONS = 300
RESAMPLES = 500


def _chains(rng: np.random.Generator, p: dict[str, float] | float, sizes=SIZES) -> dict[str, dict[str, bool]]:
    """Full-chain verdicts of one simulated model: each sample right with its family's probability."""
    probs = p if isinstance(p, dict) else dict.fromkeys(sizes, p)
    return {f: {f"{f}_{i:04d}": bool(rng.random() < probs[f]) for i in range(n)} for f, n in sizes.items()}


def _covers(interval: tuple[float, float], value: float) -> bool:
    return interval[0] <= value <= interval[1]


def _share(hits: list[bool]) -> float:
    return sum(hits) / len(hits)


# --- textbook values ------------------------------------------------------------------------------------------------


def test_the_wald_interval_of_one_family_is_the_textbook_one() -> None:
    # p = 0.5, n = 100: 50 ± 1.959964 * sqrt(0.25 / 100) * 100 = 50 ± 9.80
    low, high = stats.wald_score_interval({"x": 50.0}, {"x": 100})
    assert (low, high) == pytest.approx((40.20018, 59.79982), abs=1e-4)


def test_the_wald_interval_of_the_score_pools_the_three_families_variances() -> None:
    # Score = 40; Var = (0.4*0.6/400 + 0.3*0.7/350 + 0.5*0.5/300) / 9 = (0.0006 + 0.0006 + 0.000833) / 9
    low, high = stats.wald_score_interval({"implication": 40.0, "aesthetic": 30.0, "affective": 50.0}, SIZES)
    half = 1.959964 * ((0.0006 + 0.0006 + 0.25 / 300) / 9) ** 0.5 * 100
    assert (low, high) == pytest.approx((40 - half, 40 + half), abs=1e-4)
    assert half == pytest.approx(2.9463, abs=1e-3)


def test_the_wald_interval_stays_within_0_and_100() -> None:
    assert stats.wald_score_interval({"x": 99.0}, {"x": 10}) == pytest.approx((92.83, 100.0), abs=0.01)


def test_the_detectable_difference_of_two_independent_models_is_the_textbook_one() -> None:
    # (z_0.975 + z_0.80) * sqrt(2 * 0.25 / 100) * 100 = 2.801585 * 7.0711 = 19.81 points for one family of 100
    assert stats.detectable_difference({"x": 100}, {"x": 0.5}) == pytest.approx(19.81, abs=0.01)


def test_the_benchmark_cannot_tell_independent_models_apart_below_about_six_points() -> None:
    # three families of 400/350/300 at 50%: 2.801585 * sqrt(0.5 * (1/400 + 1/350 + 1/300)) / 3 * 100
    expected = 2.801585 * (0.5 * (1 / 400 + 1 / 350 + 1 / 300)) ** 0.5 / 3 * 100
    assert stats.detectable_difference(SIZES, dict.fromkeys(SIZES, 0.5)) == pytest.approx(expected, abs=1e-3)
    assert 6.1 < expected < 6.2


def test_a_bootstrap_of_a_constant_has_no_width() -> None:
    assert stats.bootstrap_ci({str(i): True for i in range(10)}) == (100.0, 100.0)


def test_the_bootstrap_interval_of_an_accuracy_is_close_to_the_wald_one_at_this_size() -> None:
    verdicts = {f"s{i:03d}": i < 120 for i in range(400)}  # 30% of 400
    low, high = stats.bootstrap_ci(verdicts)
    wald = stats.wald_score_interval({"x": 30.0}, {"x": 400})
    assert low == pytest.approx(wald[0], abs=0.6) and high == pytest.approx(wald[1], abs=0.6)


def test_rank_ranges_of_models_far_apart_are_their_ranks() -> None:
    draws = np.stack([np.full(100, 60.0), np.full(100, 40.0), np.full(100, 20.0)], axis=1)
    assert stats.rank_ranges(draws) == [(1, 1), (2, 2), (3, 3)]


def test_rank_ranges_of_two_models_that_swap_half_the_time_span_both_ranks() -> None:
    a = np.array([50.0, 40.0] * 50)
    b = np.array([40.0, 50.0] * 50)
    assert stats.rank_ranges(np.stack([a, b], axis=1)) == [(1, 2), (1, 2)]


def test_tied_models_share_the_better_rank() -> None:
    draws = np.stack([np.full(10, 50.0), np.full(10, 50.0), np.full(10, 10.0)], axis=1)
    assert stats.rank_ranges(draws) == [(1, 1), (1, 1), (3, 3)]


def test_rank_groups_start_when_a_model_is_worse_than_the_groups_leader() -> None:
    # a ~ b, b ~ c but a > c: c starts a new group (it is compared with the leader a); d ~ c joins c's group
    worse = {("a", "c"), ("a", "d"), ("b", "d")}
    assert stats.rank_groups(["a", "b", "c", "d"], lambda x, y: (x, y) in worse) == [1, 1, 2, 2]


# --- simulations with a known answer --------------------------------------------------------------------------------


def test_two_identical_models_give_a_paired_interval_covering_0_in_95_percent_of_simulations() -> None:
    rng = np.random.default_rng(2026)
    hits = []
    for run in range(SIMULATIONS):
        truth = {f: rng.uniform(0.2, 0.6, size=n) for f, n in SIZES.items()}  # per-sample difficulty
        a = {f: {f"{f}_{i}": bool(rng.random() < p) for i, p in enumerate(truth[f])} for f in SIZES}
        b = {f: {f"{f}_{i}": bool(rng.random() < p) for i, p in enumerate(truth[f])} for f in SIZES}
        low, high, _p = stats.paired_score_delta(a, b, iterations=RESAMPLES, seed=run)
        hits.append(low <= 0 <= high)
    assert 0.91 <= _share(hits) <= 0.985


def test_the_score_interval_covers_the_true_score_in_95_percent_of_simulations() -> None:
    rng = np.random.default_rng(7)
    truth = {"implication": 0.45, "aesthetic": 0.35, "affective": 0.40}
    true_score = 100 * sum(truth.values()) / 3
    hits = [_covers(stats.score_ci(_chains(rng, truth), RESAMPLES, seed), true_score) for seed in range(SIMULATIONS)]
    assert 0.91 <= _share(hits) <= 0.985


def test_the_binomial_interval_covers_the_true_score_in_95_percent_of_simulations() -> None:
    rng = np.random.default_rng(11)
    truth = {"implication": 0.45, "aesthetic": 0.35, "affective": 0.40}
    true_score = 100 * sum(truth.values()) / 3
    hits = []
    for _ in range(2000):
        acc = {f: 100 * rng.binomial(n, truth[f]) / n for f, n in SIZES.items()}
        hits.append(_covers(stats.wald_score_interval(acc, SIZES), true_score))
    assert 0.935 <= _share(hits) <= 0.965


def test_a_model_without_a_context_gain_gets_a_gain_interval_covering_0_in_95_percent_of_simulations() -> None:
    rng = np.random.default_rng(5)
    hits = []
    for run in range(SIMULATIONS):
        truth = {f: rng.uniform(0.2, 0.7, size=n) for f, n in SIZES.items()}
        base = {f: {f"{f}_{i}": bool(rng.random() < p) for i, p in enumerate(truth[f])} for f in SIZES}
        context = {f: {f"{f}_{i}": bool(rng.random() < p) for i, p in enumerate(truth[f])} for f in SIZES}
        model = Contender("m", True, Verdicts(base), Verdicts(context))
        gain = assess([model], list(SIZES), SIZES, resamples=RESAMPLES, seed=run).assessments["m"].gain
        assert gain is not None
        hits.append(_covers(gain, 0.0))
    assert 0.91 <= _share(hits) <= 0.985


def test_a_true_difference_of_the_detectable_size_is_found_in_80_percent_of_simulations() -> None:
    rng = np.random.default_rng(3)
    mdd = stats.detectable_difference(SIZES, dict.fromkeys(SIZES, 0.5))
    found = []
    for run in range(SIMULATIONS):
        a = _chains(rng, 0.5 + mdd / 200)
        b = _chains(rng, 0.5 - mdd / 200)
        low, high, _p = stats.paired_score_delta(b, a, iterations=RESAMPLES, seed=run)
        found.append(low > 0 or high < 0)
    assert 0.72 <= _share(found) <= 0.88


def test_the_rank_range_of_the_best_model_holds_its_true_rank() -> None:
    rng = np.random.default_rng(9)
    models = [Contender(f"m{k}", True, Verdicts(_chains(rng, p))) for k, p in enumerate((0.7, 0.45, 0.44, 0.2))]
    out = assess(models, list(SIZES), SIZES, resamples=RESAMPLES)
    ranges = [out.assessments[m.key].rank_range for m in models]
    assert ranges[0] == (1, 1) and ranges[3] == (4, 4)
    assert ranges[1] == ranges[2] == (2, 3)  # one point apart: either may be second
    assert [out.assessments[m.key].rank_group for m in models] == [1, 2, 2, 3]


# --- the board's mechanics ------------------------------------------------------------------------------------------


def test_runs_on_the_same_samples_are_paired_and_others_are_not() -> None:
    rng = np.random.default_rng(1)
    chains = _chains(rng, 0.4)
    flipped = {f: {s: (not v if i % 10 == 0 else v) for i, (s, v) in enumerate(c.items())} for f, c in chains.items()}
    other_data = Verdicts(flipped, fingerprint="sha256:another-copy")
    runs = [Contender("a", True, Verdicts(chains)), Contender("b", True, Verdicts(flipped))]
    runs.append(Contender("c", True, other_data))
    out = assess(runs, list(SIZES), SIZES, resamples=RESAMPLES)
    assert [(p.a, p.b) for p in out.pairs] == [("a", "b")]  # c read other data: no paired comparison with it
    pair = out.pairs[0]
    assert pair.delta == pytest.approx(
        100 * np.mean([np.mean(list(chains[f].values())) - np.mean(list(flipped[f].values())) for f in SIZES])
    )
    paired_width = pair.interval[1] - pair.interval[0]
    unpaired = (out.assessments["a"].score[1] - out.assessments["a"].score[0]) * 2**0.5  # type: ignore[index]
    assert paired_width < unpaired / 2  # they disagree on a tenth of the samples only


def test_a_row_without_logs_is_drawn_from_binomials_of_its_family_sizes() -> None:
    acc = {"implication": 41.75, "aesthetic": 36.29, "affective": 42.0}  # InternVL3.5 (8B), Table 2
    paper = Contender("paper", True, acc_full=acc, sizes=SIZES)
    out = assess([paper], list(SIZES), SIZES, resamples=RESAMPLES)
    a = out.assessments["paper"]
    assert a.method == BINOMIAL and a.rank_range == (1, 1) and a.gain is None
    assert a.score == pytest.approx(stats.wald_score_interval(paper.acc_full, SIZES))  # type: ignore[arg-type]


def test_the_draws_are_seeded_and_do_not_move_when_a_model_joins() -> None:
    rng = np.random.default_rng(4)
    a, b = Contender("a", True, Verdicts(_chains(rng, 0.4))), Contender("b", True, Verdicts(_chains(rng, 0.5)))
    alone = assess([a], list(SIZES), SIZES).assessments["a"]
    together = assess([b, a], list(SIZES), SIZES).assessments["a"]
    assert alone.score == together.score and alone.method == BOOTSTRAP
    assert assess([a], list(SIZES), SIZES, seed=1).assessments["a"].score != alone.score


def test_a_rankable_model_with_nothing_to_draw_is_named_not_ranked() -> None:
    out = assess([Contender("bare", True)], list(SIZES), SIZES)
    assert out.unranked == ["bare"] and out.assessments["bare"].rank_range is None


# --- the pieces each interval is made of ----------------------------------------------------------------------------


def test_the_percentile_interval_cuts_2_5_percent_off_each_tail() -> None:
    draws = np.arange(0, 1001) / 10  # 0.0, 0.1, ..., 100.0
    assert stats.percentile_interval(draws) == pytest.approx((2.5, 97.5))


def test_the_bootstrap_p_value_is_twice_the_smaller_tail_at_0() -> None:
    assert stats.two_sided_p(np.array([-1.0] * 10 + [1.0] * 90)) == pytest.approx(0.2)
    assert stats.two_sided_p(np.array([-1.0] * 90 + [0.0] * 10)) == pytest.approx(0.2)  # a tie counts on both sides
    assert stats.two_sided_p(np.zeros(50)) == 1.0  # never above 1


def test_the_wald_interval_stays_above_0() -> None:
    assert stats.wald_score_interval({"x": 1.0}, {"x": 10}) == pytest.approx((0.0, 7.17), abs=0.01)


def test_binomial_draws_center_on_the_score_with_the_binomial_spread() -> None:
    acc = {"implication": 41.75, "aesthetic": 36.29, "affective": 42.0}
    draws = stats.binomial_draws(acc, SIZES, "row", iterations=20000)
    se = (sum((p / 100) * (1 - p / 100) / SIZES[f] for f, p in acc.items()) / 9) ** 0.5 * 100
    assert draws.mean() == pytest.approx(sum(acc.values()) / 3, abs=0.05)
    assert draws.std() == pytest.approx(se, rel=0.03)
    assert stats.binomial_draws({"x": 100.0}, {"x": 7}, "row", 10).tolist() == [100.0] * 10


def test_the_rank_range_reaches_a_rank_held_in_more_than_2_5_percent_of_resamples() -> None:
    def two(b_wins: int) -> list[tuple[int, int]]:
        a = np.full(1000, 50.0)
        b = np.where(np.arange(1000) < b_wins, 60.0, 40.0)
        return stats.rank_ranges(np.stack([a, b], axis=1))

    assert two(30) == [(1, 2), (1, 2)]  # b first in 3% of resamples
    assert two(25) == [(1, 2), (1, 2)]  # in 2.5%: the quantile falls between ranks and is rounded outwards
    assert two(20) == [(1, 1), (2, 2)]  # in 2%: within the tails
    with pytest.raises(ValueError, match=r"^rank ranges need a resamples x models matrix with at least one model$"):
        stats.rank_ranges(np.zeros((10, 0)))
    with pytest.raises(ValueError, match="resamples x models matrix"):
        stats.rank_ranges(np.zeros(10))


def test_a_family_of_one_sample_resamples_to_its_verdict() -> None:
    assert stats.score_ci({"x": {"only": True}, "y": {"a": False, "b": False}}) == (50.0, 50.0)
    with pytest.raises(ValueError, match=r"^x: no verdict to resample$"):
        stats.score_draws({"x": []}, {"x": np.zeros((3, 0), dtype=int)})
    with pytest.raises(ValueError, match=r"^resampling a Score needs at least one family$"):
        stats.score_draws({}, {})


def test_the_data_fingerprint_and_the_seed_choose_the_resamples() -> None:
    verdicts = {f"s{i:04d}": i % 3 == 0 for i in range(997)}  # a fine grid: the percentiles land between draws
    first = stats.bootstrap_ci(verdicts, fingerprint="sha256:one")
    assert stats.bootstrap_ci(verdicts, fingerprint="sha256:one") == first
    assert stats.bootstrap_ci(verdicts, fingerprint="sha256:two") != first
    assert stats.bootstrap_ci(verdicts, seed=3, fingerprint="sha256:one") != first
    with pytest.raises(ValueError, match=r"^bootstrap of an empty sample$"):
        stats.bootstrap_ci({})


def test_the_paired_delta_uses_the_samples_both_models_answered() -> None:
    a = {f: {f"{f}_{i}": i < 10 for i in range(20)} for f in ("x", "y")}
    b = {f: {**{f"{f}_{i}": i < 10 for i in range(20)}, "extra": False} for f in ("x", "y")}  # one more sample
    assert stats.paired_score_delta(a, b)[:2] == (0.0, 0.0)  # identical on the 20 they share
    b["z"] = {"z_0": True}  # a family only b has is left out
    assert stats.paired_score_delta(a, b)[:2] == (0.0, 0.0)
    with pytest.raises(
        ValueError, match=r"^the two models share no sample of a family: a paired test needs the same samples$"
    ):
        stats.paired_score_delta(a, {"x": {"other": True}, "y": a["y"]})
    rng = np.random.default_rng(8)
    c, d = _chains(rng, 0.4), _chains(rng, 0.45)
    assert stats.paired_score_delta(c, d, seed=0) != stats.paired_score_delta(c, d, seed=1)


def test_runs_whose_sample_ids_differ_are_not_paired() -> None:
    rng = np.random.default_rng(12)
    chains = _chains(rng, 0.4)
    renamed = {f: {f"other-{s}": v for s, v in c.items()} for f, c in chains.items()}
    out = assess([Contender("a", True, Verdicts(chains)), Contender("b", True, Verdicts(renamed))], list(SIZES), SIZES)
    assert out.pairs == []


def test_a_pair_on_other_data_does_not_stop_the_pairs_after_it() -> None:
    rng = np.random.default_rng(13)
    chains = _chains(rng, 0.5)
    runs = [
        Contender("a", True, Verdicts(chains)),
        Contender("c", True, Verdicts(chains, fingerprint="sha256:other")),
        Contender("b", True, Verdicts(chains)),
    ]
    assert [(p.a, p.b) for p in assess(runs, list(SIZES), SIZES, resamples=RESAMPLES).pairs] == [("a", "b")]


def test_the_paired_detectable_difference_comes_from_the_share_of_disagreeing_chains() -> None:
    a = {f: {f"{f}_{i}": i < n // 2 for i in range(n)} for f, n in SIZES.items()}
    b = {f: {s: (not v if i < n // 10 else v) for i, (s, v) in enumerate(a[f].items())} for f, n in SIZES.items()}
    out = assess([Contender("a", True, Verdicts(a)), Contender("b", True, Verdicts(b))], list(SIZES), SIZES)
    # they disagree on 10% of each family: 2.801585 * sqrt(0.1 * (1/400 + 1/350 + 1/300) / 9) * 100
    expected = 2.801585 * (0.1 * (1 / 400 + 1 / 350 + 1 / 300) / 9) ** 0.5 * 100
    assert out.detectable_paired == pytest.approx(expected, abs=1e-3)
    assert out.detectable_independent == pytest.approx(6.1559, abs=1e-3)
    assert assess([Contender("a", True, Verdicts(a))], list(SIZES), SIZES).detectable_paired is None


def test_the_context_interval_and_gain_need_the_same_samples_in_both_settings() -> None:
    rng = np.random.default_rng(14)
    base, context = _chains(rng, 0.4), _chains(rng, 0.5)
    same = assess([Contender("m", True, Verdicts(base), Verdicts(context))], list(SIZES), SIZES).assessments["m"]
    assert same.context is not None and same.context[0] < 50 < same.context[1] and same.gain is not None
    other = Verdicts(context, fingerprint="sha256:another-copy")
    moved = assess([Contender("m", True, Verdicts(base), other)], list(SIZES), SIZES).assessments["m"]
    assert moved.context is None and moved.gain is None


def test_a_model_without_draws_that_does_not_rank_is_not_named_unranked() -> None:
    out = assess([Contender("human", False), Contender("bare", True)], list(SIZES), SIZES)
    assert out.unranked == ["bare"]


def test_two_runs_with_the_same_chains_share_a_group_and_a_rank() -> None:
    rng = np.random.default_rng(15)
    chains = _chains(rng, 0.4)
    out = assess([Contender("a", True, Verdicts(chains)), Contender("b", True, Verdicts(chains))], list(SIZES), SIZES)
    assert [out.assessments[k].rank_group for k in "ab"] == [1, 1]
    assert [out.assessments[k].rank_range for k in "ab"] == [(1, 1), (1, 1)]  # tied in every resample


def test_a_run_with_a_family_missing_from_its_logs_is_drawn_binomially_and_never_paired() -> None:
    rng = np.random.default_rng(16)
    full = _chains(rng, 0.4)
    partial = {f: v for f, v in full.items() if f != "affective"}
    acc = {f: 100 * sum(v.values()) / len(v) for f, v in full.items()}
    runs = [
        Contender("a", True, Verdicts(full)),
        Contender("b", True, Verdicts(partial), acc_full=acc, sizes=SIZES),
    ]
    runs.append(Contender("c", True, Verdicts(partial), acc_full=acc, sizes=SIZES))  # the same partial logs as b
    out = assess(runs, list(SIZES), SIZES, resamples=RESAMPLES)
    assert out.assessments["b"].method == BINOMIAL and out.pairs == []  # b and c: binomial, so not paired either


def test_the_seed_reaches_the_binomial_rows() -> None:
    from hvcu_tasks.report.leaderboard import board_entries, make_board

    def ranges(seed: int) -> list:
        return [e.rank_range for e in make_board(board_entries([]), seed=seed).entries]

    assert ranges(0) == ranges(0) and ranges(0) != ranges(1)  # the paper's rows only: all binomial
