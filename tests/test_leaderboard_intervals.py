"""The leaderboard's intervals end to end: rank ranges and groups on the board, the paired comparisons, the context
gain, binomial [paper] rows, and leaderboard.json version 2 (verdicts kept, so `--base` pairs again; version 1
still read)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hvcu_tasks.report.leaderboard import (
    board_entries,
    leaderboard_json,
    leaderboard_table,
    make_board,
    pairs_table,
    read_leaderboard,
)
from hvcu_tasks.results.runs import FamilyResult, ModelResult, ReportError

SIZES = {"implication": 400, "aesthetic": 350, "affective": 300}
FP = {f: f"sha256:{f}-copy-1" for f in SIZES}


def _run(
    name: str, right: dict[str, int], context: dict[str, int] | None = None, fp: dict | None = None, shift: int = 0
) -> ModelResult:
    """A benchmark run logged with --log_samples: in each family the chains of `right[f]` samples hold, from the
    `shift`-th sample on (wrapping round)."""
    m = ModelResult(model=name, dataset={"HVCU-Bench"})
    for setting, counts in (("base", right), ("context", context)):
        if counts is None:
            continue
        chains = {f: {f"{f}_{i:03d}": (i - shift) % n < counts[f] for i in range(n)} for f, n in SIZES.items()}
        acc = {f: 100 * counts[f] / SIZES[f] for f in SIZES}
        metrics = {f: {"acc_full": acc[f], "acc_full_official": acc[f], "n_chains": SIZES[f]} for f in SIZES}
        m.settings[setting] = {f: FamilyResult(metrics[f], f"hvcu_bench_{f}") for f in SIZES}
        m.chains[setting] = chains
        m.chains_official[setting] = chains
        m.identities[setting] = {f: {"fingerprint": (fp or FP)[f]} for f in SIZES}
    return m


def _rows(table) -> dict[str, dict]:
    return {r[1]: dict(zip(table.columns, r, strict=True)) for r in table.rows}


A = {"implication": 240, "aesthetic": 210, "affective": 180}  # 60% in every family
B = {"implication": 236, "aesthetic": 206, "affective": 177}  # a point lower, the same chains otherwise
C = {"implication": 120, "aesthetic": 105, "affective": 90}  # 30%


def test_a_point_apart_is_significant_when_every_disagreement_goes_one_way() -> None:
    # b's chains are a's with 11 more broken: b never beats a on a sample, so the paired test separates them
    board = make_board(board_entries([_run("a", A), _run("b", B), _run("c", C)], reference=False))
    rows = _rows(leaderboard_table(board))
    assert (rows["a"]["Rank"], rows["b"]["Rank"], rows["c"]["Rank"]) == (1, 2, 3)
    assert (rows["a"]["Group"], rows["b"]["Group"], rows["c"]["Group"]) == (1, 2, 3)
    assert rows["c"]["Rank range"] == "3"


def test_a_point_apart_shares_a_group_when_the_runs_disagree_both_ways() -> None:
    # b holds a quarter of its chains on samples where a breaks (shifted by 100): 1 point is noise here
    board = make_board(board_entries([_run("a", A), _run("b", B, shift=100), _run("c", C)], reference=False))
    rows = _rows(leaderboard_table(board))
    assert (rows["a"]["Group"], rows["b"]["Group"], rows["c"]["Group"]) == (1, 1, 2)
    assert rows["a"]["Rank range"] == rows["b"]["Rank range"] == "1–2" and rows["c"]["Rank range"] == "3"


def test_the_pairs_table_has_every_two_runs_with_the_difference_of_their_chains() -> None:
    board = make_board(board_entries([_run("a", A), _run("b", B), _run("c", C)], reference=False))
    table = pairs_table(board)
    assert [(r[0], r[1]) for r in table.rows] == [("a", "b"), ("a", "c"), ("b", "c")]
    ab = dict(zip(table.columns, table.rows[0], strict=True))
    # Δ = mean over families of (A - B) / n = (4/400 + 4/350 + 3/300) / 3 = 1.0476 points
    assert ab["Δ (A − B)"] == pytest.approx(round((4 / 400 + 4 / 350 + 3 / 300) / 3 * 100, 2))
    low, high = json.loads(ab["95% CI"].replace(" ", ""))
    assert 0 < low < 1.05 < high  # b never beats a on a discordant sample: significant though small
    assert ab["Significant"] == "yes" and ab["p"] == "< 0.001"  # no resampled difference crossed 0 (2000 resamples)
    assert board.uncertainty.pairs[0].p_value == 0.0


def test_runs_on_different_data_are_not_paired() -> None:
    other = {f: f"sha256:{f}-copy-2" for f in SIZES}
    board = make_board(board_entries([_run("a", A), _run("b", B, fp=other)], reference=False))
    assert board.uncertainty.pairs == []


def test_the_context_gain_has_a_paired_interval() -> None:
    board = make_board(board_entries([_run("a", B, context=A)], reference=False))
    (entry,) = board.entries
    low, high = entry.interval_gain  # type: ignore[misc]
    assert 0 < low < (4 / 400 + 4 / 350 + 3 / 300) / 3 * 100 < high
    row = _rows(leaderboard_table(board))["a"]
    assert row["Δ 95% CI"] == f"[{low:.2f}, {high:.2f}]"


def test_paper_rows_get_binomial_intervals_marked_as_such() -> None:
    board = make_board(board_entries([_run("a", A)]))
    rows = _rows(leaderboard_table(board))
    # GPT-4o, Table 2: 53.25 / 53.14 / 50.33 of 400 / 350 / 300 samples
    var = (0.5325 * 0.4675 / 400 + 0.5314 * 0.4686 / 350 + 0.5033 * 0.4967 / 300) / 9
    half = 1.959964 * var**0.5 * 100
    mean = (53.25 + 53.14 + 50.33) / 3
    assert rows["GPT-4o"]["95% CI"] == f"[{mean - half:.2f}, {mean + half:.2f}]ᵇ"
    assert rows["a"]["95% CI"].endswith("]")  # logged: bootstrap, no mark
    assert rows["Random guess (chance)"]["95% CI"] is None  # exact
    notes = " ".join(leaderboard_table(board).notes)
    assert "must differ by 6.16 points" in notes and "ᵇ (binomial) marks a row without sample logs" in notes


def test_leaderboard_json_keeps_the_verdicts_and_reads_back_the_same_board(tmp_path: Path) -> None:
    board = make_board(board_entries([_run("a", A, context=B), _run("b", B)]))
    path = tmp_path / "leaderboard.json"
    path.write_text(leaderboard_json(board))
    data = json.loads(path.read_text())
    a = next(e for e in data["entries"] if e["model"] == "a")
    assert a["verdicts"]["base"]["implication"]["chains"] == "1" * 240 + "0" * 160
    assert a["verdicts"]["base"]["implication"]["ids"][:2] == ["implication_000", "implication_001"]
    assert a["interval_method"] == "paired bootstrap" and a["interval_gain"] is not None
    assert data["pairs"][0]["a"] == {"model": "a", "source": "run"} and data["pairs"][0]["significant"] is True
    again = make_board(read_leaderboard(path))
    assert leaderboard_json(again) == path.read_text()  # `--base` pairs the published runs again


def test_the_json_file_stays_small() -> None:
    text = leaderboard_json(make_board(board_entries([_run("a", A, context=B)])))
    assert len(text.splitlines()) < 1000  # verdicts on one line per entry, not one per sample


def _v1_entry(**changes) -> dict:
    entry = {
        "rank": 1,
        "model": "Old/M",
        "label": "Old/M",
        "source": "run",
        "data": "HVCU-Bench",
        "rankable": True,
        "score_base": 40.0,
        "score_context": None,
        "score_base_hvcu": 41.0,
        "score_context_hvcu": None,
        "acc_full": {"implication": 40.0, "aesthetic": 40.0, "affective": 40.0},
        "interval_base": [37.0, 43.0],
        "notes": [],
    }
    return {**entry, **changes}


def test_a_version_1_board_is_read_and_its_runs_get_binomial_intervals(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema": "hvcu-leaderboard", "version": 1, "entries": [_v1_entry()]}))
    (entry,) = read_leaderboard(path)
    assert entry.verdicts == {} and entry.family_sizes is None
    (old,) = make_board([entry]).entries
    assert old.interval_method == "binomial" and old.rank_range == [1, 1]
    half = 1.959964 * (0.4 * 0.6 * (1 / 400 + 1 / 350 + 1 / 300) / 9) ** 0.5 * 100
    assert old.interval_base == pytest.approx([40 - half, 40 + half])


def _v2(tmp_path: Path, **changes) -> Path:
    board = make_board(board_entries([_run("a", A)], reference=False))
    data = json.loads(leaderboard_json(board))
    data["entries"][0].update(changes)
    path = tmp_path / "board.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"verdicts": {"base": {"implication": {"ids": ["x"], "chains": "10"}}}}, "verdicts.base: expected an object"),
        (
            {"verdicts": {"base": {f: {"ids": ["x", "y"], "chains": "1"} for f in SIZES}}},
            "verdicts.base.implication.chains: expected a string of 0 and 1, one per id (2)",
        ),
        (
            {"verdicts": {"base": {f: {"ids": ["x", "x"], "chains": "10"} for f in SIZES}}},
            "verdicts.base.implication.ids: a sample id appears twice",
        ),
        ({"verdicts": {"later": {}}}, "verdicts: expected an object with keys among base, context"),
        ({"rank_range": [3, 1]}, "rank_range: low 3 is above high 1"),
        ({"rank_range": [0, 1]}, "rank_range: expected two ranks"),
        ({"rank_group": "1"}, "rank_group: '1' is not a group number"),
        ({"interval_method": "guess"}, "interval_method: 'guess' is not"),
        ({"family_sizes": {"implication": 0}}, "family_sizes: expected null or an object"),
        ({"interval_gain": [5, -5]}, "interval_gain: [5, -5] is not an interval"),
        ({"source": "paper", "rankable": True}, "verdicts: only a run has chain verdicts"),
        (
            {"score_base": 10.0},
            "verdicts.base: the chains give a Score (official) of 60.00, the Score recorded is 10.00 (score_base)",
        ),
    ],
)
def test_a_damaged_version_2_board_is_refused_naming_the_field(tmp_path: Path, changes: dict, message: str) -> None:
    path = _v2(tmp_path, **changes)
    with pytest.raises(ReportError, match=r"board\.json: entries\[0\]\.") as caught:
        read_leaderboard(path)
    assert message in str(caught.value)


def test_a_version_2_entry_without_its_new_fields_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "board.json"
    path.write_text(json.dumps({"schema": "hvcu-leaderboard", "version": 2, "entries": [_v1_entry()]}))
    with pytest.raises(ReportError, match=r"entries\[0\]\.family_sizes: missing"):
        read_leaderboard(path)


def test_the_seed_and_resamples_are_recorded_and_change_the_draws() -> None:
    entries = board_entries([_run("a", B, context=A)], reference=False)
    first, other = make_board(entries), make_board(entries, resamples=500, seed=3)
    assert first.entries[0].interval_gain != other.entries[0].interval_gain
    assert json.loads(leaderboard_json(other))["uncertainty"] | {} == {
        **json.loads(leaderboard_json(other))["uncertainty"],
        "resamples": 500,
        "seed": 3,
    }


def test_sample_logs_that_disagree_with_their_results_file_are_refused() -> None:
    run = _run("a", A)
    run.settings["base"]["implication"].metrics["acc_full_official"] = 10.0  # the file says 10%, the logs 60%
    with pytest.raises(
        ReportError,
        match=r"^a \(base\): the sample logs and the results file disagree: the implication chains give an "
        r"Acc_full \(official\) of 60\.00, the file records 10\.00 \(its results files\); keep each samples",
    ):
        board_entries([run])


def test_the_intervals_table_draws_the_resamples_the_board_draws() -> None:
    from hvcu_tasks.report.tables import interval_table

    run = _run("a", A)  # both parsers read the same chains here, so both Scores have one interval
    board = make_board(board_entries([run], reference=False))
    (row,) = interval_table([run], "base").rows
    low, high = board.entries[0].interval_base  # type: ignore[misc]
    assert row[-1] == f"[{low:.2f}, {high:.2f}]"


def test_a_ranked_run_is_compared_with_each_paper_row_unpaired() -> None:
    from hvcu_tasks.report.leaderboard import versus_table

    board = make_board(board_entries([_run("a", A)]))
    rows = {r[1]: dict(zip(versus_table(board).columns, r, strict=True)) for r in versus_table(board).rows}
    assert len(rows) == 13 and "Human" not in rows  # the 13 models of Table 2, not the human baseline
    gpt = rows["GPT-4o"]
    assert gpt["Δ (run − paper)"] == round(60.0 - (53.25 + 53.14 + 50.33) / 3, 2)
    low, high = json.loads(gpt["95% CI"].replace(" ", ""))
    # two independent draws: Var = Var(run, 60% of 400/350/300) + Var(GPT-4o, binomial)
    run_var = 0.6 * 0.4 * (1 / 400 + 1 / 350 + 1 / 300) / 9
    gpt_var = (0.5325 * 0.4675 / 400 + 0.5314 * 0.4686 / 350 + 0.5033 * 0.4967 / 300) / 9
    width = 2 * 1.959964 * (run_var + gpt_var) ** 0.5 * 100
    assert high - low == pytest.approx(width, rel=0.08)
    assert gpt["Significant"] == "yes" and rows["LLaVA-1.6 (7B)"]["Significant"] == "yes"
    data = json.loads(leaderboard_json(board))
    assert len(data["versus_paper"]) == 13 and {v["paired"] for v in data["versus_paper"]} == {False}
    assert {p["paired"] for p in data["pairs"]} <= {True}


def test_a_run_that_does_not_rank_is_not_compared_with_the_paper() -> None:
    smoke = _run("s", A)
    smoke.dataset = {"smoke sample"}
    assert make_board(board_entries([smoke])).uncertainty.against_published == []
