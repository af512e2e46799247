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
