"""The leaderboard's intervals end to end: rank ranges and groups on the board, the paired comparisons, the context
gain, binomial [paper] rows, and leaderboard.json version 2 (verdicts kept, so `--base` pairs again; version 1
still read)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hvcu_tasks.report.board import board_entries, make_board
from hvcu_tasks.report.board_file import leaderboard_json, read_leaderboard
from hvcu_tasks.report.board_tables import leaderboard_table, pairs_table
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


def _bonett_price(cells: list[tuple[int, int, int]]) -> tuple[float, float, float]:
    """The spec's paired interval and p of Score(B) - Score(A): per family (n, B alone right, A alone right),
    p~ = (count + 1) / (n + 2), Var = (p~b + p~a - (p~b - p~a)^2) / (n + 2), families averaged."""
    k = len(cells)
    centre = sum(((b + 1) - (a + 1)) / (n + 2) for n, b, a in cells) / k
    var = sum(((b + 1) / (n + 2) + (a + 1) / (n + 2) - ((b - a) / (n + 2)) ** 2) / (n + 2) for n, b, a in cells)
    se = math.sqrt(var) / k
    p = math.erfc(abs(centre) / se / math.sqrt(2))
    return 100 * (centre - 1.959964 * se), 100 * (centre + 1.959964 * se), p


def test_a_point_apart_is_significant_when_every_disagreement_goes_one_way() -> None:
    # close's chains are strong's with 11 more broken: close never beats strong on a sample, so the paired test
    # separates them
    board = make_board(board_entries([_run("strong", A), _run("close", B), _run("weak", C)], reference=False))
    rows = _rows(leaderboard_table(board))
    assert (rows["strong"]["Rank"], rows["close"]["Rank"], rows["weak"]["Rank"]) == (1, 2, 3)
    assert (rows["strong"]["Group"], rows["close"]["Group"], rows["weak"]["Group"]) == ("a", "b", "c")
    assert [rows[m]["Rank range"] for m in ("strong", "close", "weak")] == ["1", "2", "3"]


def test_a_point_apart_shares_a_letter_when_the_runs_disagree_both_ways() -> None:
    # close holds a quarter of its chains on samples where strong breaks (shifted by 100): 1 point is noise here
    runs = [_run("strong", A), _run("close", B, shift=100), _run("weak", C)]
    rows = _rows(leaderboard_table(make_board(board_entries(runs, reference=False))))
    assert (rows["strong"]["Group"], rows["close"]["Group"], rows["weak"]["Group"]) == ("a", "a", "b")
    assert rows["strong"]["Rank range"] == rows["close"]["Rank range"] == "1–2" and rows["weak"]["Rank range"] == "3"


def test_the_pairs_table_has_every_two_runs_with_the_difference_of_their_chains() -> None:
    board = make_board(board_entries([_run("strong", A), _run("close", B), _run("weak", C)], reference=False))
    table = pairs_table(board)
    assert [(r[0], r[1]) for r in table.rows] == [("close", "strong"), ("weak", "strong"), ("weak", "close")]
    pair = dict(zip(table.columns, table.rows[0], strict=True))
    # Δ = B - A = strong - close = mean over families of (4/400 + 4/350 + 3/300) = 1.0476 points
    assert pair["Δ (B − A)"] == round((4 / 400 + 4 / 350 + 3 / 300) / 3 * 100, 2)
    low, high, p = _bonett_price([(400, 4, 0), (350, 4, 0), (300, 3, 0)])
    assert pair["95% CI"] == f"[{low:.2f}, {high:.2f}]" and 0 < low
    # Holm over 3: this is the largest raw p, multiplied by 1; the other two are far below it
    assert pair["p"] == f"{p:.3g}" and pair["p (Holm)"] == f"{p:.3g}" and pair["Significant"] == "yes"
    assert "Holm over each family of comparisons (ranked rows: 3 comparisons)" in " ".join(table.notes)


def test_a_significant_pair_under_holm_names_both_p_values_in_the_json() -> None:
    board = make_board(board_entries([_run("strong", A), _run("close", B), _run("weak", C)], reference=False))
    data = json.loads(leaderboard_json(board))
    raw = sorted(p["p_value"] for p in data["pairs"])
    adjusted = sorted(p["p_adjusted"] for p in data["pairs"])
    assert adjusted == pytest.approx([min(1, 3 * raw[0]), max(min(1, 3 * raw[0]), 2 * raw[1]), raw[2]], rel=1e-9)
    assert {p["family"] for p in data["pairs"]} == {"ranked rows"} and all(p["p_value"] > 0 for p in data["pairs"])


def test_runs_on_different_data_are_compared_unpaired() -> None:
    other = {f: f"sha256:{f}-copy-2" for f in SIZES}
    board = make_board(board_entries([_run("strong", A), _run("close", B, fp=other)], reference=False))
    (pair,) = board.uncertainty.pairs
    assert pair.paired is False and not pair.significant  # unpaired, one point is within the noise


def test_the_context_gain_has_a_paired_interval() -> None:
    board = make_board(board_entries([_run("a", B, context=A)], reference=False))
    (entry,) = board.entries
    low, high, _p = _bonett_price([(400, 4, 0), (350, 4, 0), (300, 3, 0)])  # context (B) holds 11 more chains
    assert entry.interval_gain == pytest.approx([low, high])
    row = _rows(leaderboard_table(board))["a"]
    assert row["Δ 95% CI"] == f"[{low:.2f}, {high:.2f}]"


def _mover_cp(right: dict[str, int], sizes: dict[str, int]) -> tuple[float, float]:
    """The spec's Score interval: each family's Clopper–Pearson bounds, combined by MOVER."""
    from scipy.stats import beta

    shares = {f: right[f] / sizes[f] for f in sizes}
    low = {f: beta.ppf(0.025, right[f], sizes[f] - right[f] + 1) if right[f] else 0.0 for f in sizes}
    high = {f: beta.ppf(0.975, right[f] + 1, sizes[f] - right[f]) if right[f] < sizes[f] else 1.0 for f in sizes}
    score = sum(shares.values()) / 3
    below = math.sqrt(sum((shares[f] - low[f]) ** 2 for f in sizes)) / 3
    above = math.sqrt(sum((high[f] - shares[f]) ** 2 for f in sizes)) / 3
    return 100 * (score - below), 100 * (score + above)


def test_paper_rows_get_the_interval_of_their_counts() -> None:
    board = make_board(board_entries([_run("a", A)]))
    rows = _rows(leaderboard_table(board))
    # GPT-4o, Table 2: 53.25 / 53.14 / 50.33 of 400 / 350 / 300 samples = 213 / 186 / 151 chains
    low, high = _mover_cp({"implication": 213, "aesthetic": 186, "affective": 151}, SIZES)
    assert rows["GPT-4o"]["95% CI"] == f"[{low:.2f}, {high:.2f}]"
    low, high = _mover_cp(A, SIZES)
    assert rows["a"]["95% CI"] == f"[{low:.2f}, {high:.2f}]"
    assert rows["Random guess (chance)"]["95% CI"] is None  # exact
    notes = " ".join(leaderboard_table(board).notes)
    assert "truly differ by 6.16 points" in notes and "above 4.31 points is significant on its own" in notes


def test_every_two_ranked_rows_are_compared_paper_rows_included() -> None:
    board = make_board(board_entries([_run("a", A), _run("b", C)]))
    ranked = [e for e in board.entries if e.rankable]
    assert len(ranked) == 15  # 13 [paper] rows and two runs
    pairs = {frozenset((p.a, p.b)) for p in board.uncertainty.pairs}
    assert len(board.uncertainty.pairs) == len(pairs) == 15 * 14 // 2
    assert {p.family_size for p in board.uncertainty.pairs} == {105}


def test_the_letters_agree_with_every_adjusted_comparison_on_the_paper_board() -> None:
    board = make_board(board_entries([], reference=True))
    by_key = {f"{e.source}:{e.model}": e for e in board.entries}
    for pair in board.uncertainty.pairs:
        a, b = by_key[pair.a], by_key[pair.b]
        assert bool(set(a.letters or "") & set(b.letters or "")) == (not pair.significant), (a.model, b.model)


def test_the_rank_ranges_agree_with_the_adjusted_comparisons_on_the_paper_board() -> None:
    board = make_board(board_entries([], reference=True))
    by_key = {f"{e.source}:{e.model}": e for e in board.entries}
    for e in (e for e in board.entries if e.rankable):
        key = f"{e.source}:{e.model}"
        above = sum(p.significant and p.b != key for p in board.uncertainty.pairs if key == p.a)
        below = sum(p.significant and p.a != key for p in board.uncertainty.pairs if key == p.b)
        assert e.rank_range == [1 + above, 13 - below], e.model
    assert by_key["paper:GPT-4o"].rank_range[0] == 1  # type: ignore[index]


def test_leaderboard_json_keeps_the_verdicts_and_reads_back_the_same_board(tmp_path: Path) -> None:
    board = make_board(board_entries([_run("a", A, context=B), _run("b", B)]))
    path = tmp_path / "leaderboard.json"
    path.write_text(leaderboard_json(board))
    data = json.loads(path.read_text())
    a = next(e for e in data["entries"] if e["model"] == "a")
    assert a["verdicts"]["base"]["implication"]["chains"] == "1" * 240 + "0" * 160
    assert a["verdicts"]["base"]["implication"]["ids"][:2] == ["implication_000", "implication_001"]
    assert a["interval_method"] == "chains" and a["interval_gain"] is not None
    runs = [p for p in data["pairs"] if p["a"]["source"] == p["b"]["source"] == "run"]
    assert runs[0]["a"] == {"model": "b", "source": "run"} and runs[0]["paired"] is True
    again = make_board(read_leaderboard(path))
    assert leaderboard_json(again) == path.read_text()  # `--base` pairs the published runs again


def test_the_json_file_stays_small() -> None:
    text = leaderboard_json(make_board(board_entries([_run("a", A, context=B)])))
    assert len(text.splitlines()) < 2000  # verdicts on one line per entry, not one per sample


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


def test_a_version_1_board_is_read_and_its_runs_are_known_by_their_counts(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema": "hvcu-leaderboard", "version": 1, "entries": [_v1_entry()]}))
    (entry,) = read_leaderboard(path)
    assert entry.verdicts == {} and entry.family_sizes is None
    (old,) = make_board([entry]).entries
    assert old.interval_method == "counts" and old.rank_range == [1, 1] and old.letters == "a"
    assert old.interval_base == pytest.approx(
        _mover_cp({"implication": 160, "aesthetic": 140, "affective": 120}, SIZES)
    )


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
        ({"rank_range": [0, 1]}, "rank_range[0]: Input should be greater than or equal to 1 (got 0)"),
        ({"letters": "1"}, "letters: String should match pattern '^[A-Za-z ]{1,200}$' (got '1')"),
        ({"interval_method": "guess"}, "interval_method: Input should be 'chains' or 'counts' (got 'guess')"),
        ({"failed_requests": {"base": [5, 3]}}, "failed_requests.base: expected [failed, requests]"),
        ({"unranked_because": "too many failed"}, "unranked_because: set, but rankable is true"),
        ({"family_sizes": {"implication": 0}}, "family_sizes: expected null or an object"),
        ({"interval_gain": [5, -5]}, "interval_gain: low 5.0 is above high -5.0"),
        ({"source": "paper", "rankable": True}, "verdicts: only a run has chain verdicts"),
        (
            {"score_base": 10.0},
            "verdicts.base: the chains give a Score (official) of 60.00, the Score recorded is 10.00 (score_base)",
        ),
    ],
)
def test_a_damaged_version_3_board_is_refused_naming_the_field(tmp_path: Path, changes: dict, message: str) -> None:
    path = _v2(tmp_path, **changes)
    with pytest.raises(ReportError, match=r"board\.json: entries\[0\]\.") as caught:
        read_leaderboard(path)
    assert message in str(caught.value)


def test_a_version_2_entry_without_its_new_fields_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "board.json"
    path.write_text(json.dumps({"schema": "hvcu-leaderboard", "version": 2, "entries": [_v1_entry()]}))
    with pytest.raises(ReportError, match=r"entries\[0\]\.family_sizes: missing"):
        read_leaderboard(path)


def test_a_version_2_board_is_read_and_its_groups_recomputed(tmp_path: Path) -> None:
    data = json.loads(_v2(tmp_path).read_text())
    data["version"] = 2
    entry = data["entries"][0]
    for key in ("letters", "failed_requests", "unranked_because"):
        del entry[key]
    entry |= {"rank_group": 1, "interval_method": "paired bootstrap"}
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(data))
    (read,) = read_leaderboard(path)
    assert make_board([read]).entries[0].letters == "a"


def test_sample_logs_that_disagree_with_their_results_file_are_refused() -> None:
    run = _run("a", A)
    run.settings["base"]["implication"].metrics["acc_full_official"] = 10.0  # the file says 10%, the logs 60%
    with pytest.raises(
        ReportError,
        match=r"^a \(base\): the sample logs and the results file disagree: the implication chains give an "
        r"Acc_full \(official\) of 60\.00, the file records 10\.00 \(its results files\); keep each samples",
    ):
        board_entries([run])


def test_the_intervals_table_uses_the_boards_method() -> None:
    from hvcu_tasks.report.tables import interval_table

    run = _run("a", A)  # both parsers read the same chains here, so both Scores have one interval
    board = make_board(board_entries([run], reference=False))
    (row,) = interval_table([run], "base").rows
    low, high = board.entries[0].interval_base  # type: ignore[misc]
    assert row[-1] == f"[{low:.2f}, {high:.2f}]"


def test_a_ranked_run_is_compared_with_each_paper_row_unpaired() -> None:
    from hvcu_tasks.report.board_tables import versus_table

    board = make_board(board_entries([_run("a", A)]))
    rows = {r[0]: dict(zip(versus_table(board).columns, r, strict=True)) for r in versus_table(board).rows}
    assert set(rows) == {"a"} and len(versus_table(board).rows) == 13  # the 13 models of Table 2, not the human
    gpt = next(dict(zip(versus_table(board).columns, r, strict=True)) for r in versus_table(board).rows
               if r[1] == "GPT-4o")  # fmt: skip
    assert gpt["Δ (run − paper)"] == round(60.0 - (53.25 + 53.14 + 50.33) / 3, 2)
    # Agresti–Caffo: p~ = (x + 1) / (n + 2) per family for each row, variances summed over families / 9
    run = {f: (A[f] + 1) / (n + 2) for f, n in SIZES.items()}
    gpt_p = {f: (x + 1) / (SIZES[f] + 2) for f, x in {"implication": 213, "aesthetic": 186, "affective": 151}.items()}
    centre = sum(run[f] - gpt_p[f] for f in SIZES) / 3
    se = math.sqrt(sum(q * (1 - q) / (SIZES[f] + 2) for d in (run, gpt_p) for f, q in d.items())) / 3
    assert gpt["95% CI"] == f"[{100 * (centre - 1.959964 * se):.2f}, {100 * (centre + 1.959964 * se):.2f}]"
    data = json.loads(leaderboard_json(board))
    assert {p["paired"] for p in data["pairs"]} == {False}


def test_a_run_that_does_not_rank_is_not_compared_with_the_paper() -> None:
    from hvcu_tasks.report.board_tables import versus_pairs

    smoke = _run("s", A)
    smoke.dataset = {"smoke sample"}
    assert versus_pairs(make_board(board_entries([smoke]))) == []
