"""The ranked leaderboard: order and ranks, the chance row, CSV rounding, leaderboard.json and `--base`."""

from __future__ import annotations

import csv
import html
import io
import json
import math
import re
from pathlib import Path

import pytest
from test_report import families, write_results

from hvcu_tasks.cli import main
from hvcu_tasks.report.board import Entry, ranked
from hvcu_tasks.report.html import page_names
from hvcu_tasks.report.tables import base_vs_context_table, setting_table
from hvcu_tasks.results.runs import read_runs


def board(out: Path) -> dict:
    """The leaderboard table of a `--format json --out` report."""
    tables = json.loads((out / "report.json").read_text())
    assert tables[0]["name"] == "leaderboard"  # the ranked table comes first
    return tables[0]


def rows_by_model(table: dict) -> dict[str, dict]:
    return {r[1]: dict(zip(table["columns"], r, strict=True)) for r in table["rows"]}


def report_json(out: Path, *args: str) -> dict:
    assert main(["report", *args, "--format", "json", "--out", str(out)]) == 0
    return board(out)


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, Path]:
    """Qwen/X in both settings (45 base, 50 context, official), Strong/Y in base (41.24: ties a [paper] row)."""
    return {
        "x_base": write_results(
            tmp_path / "x_base", families("hvcu_bench", acc_full=46.0, acc_full_official=45.0), "model=Qwen/X"
        ),
        "x_ctx": write_results(
            tmp_path / "x_ctx", families("hvcu_bench_context", acc_full=50.0, acc_full_official=50.0), "model=Qwen/X"
        ),
        "y_base": write_results(
            tmp_path / "y_base", families("hvcu_bench", acc_full=42.0, acc_full_official=41.24), "model=Strong/Y"
        ),
    }


def test_the_first_row_is_the_highest_score_and_runs_rank_among_the_paper_rows(runs, tmp_path: Path) -> None:
    table = report_json(tmp_path / "o", str(runs["x_base"]), str(runs["x_ctx"]))
    assert table["columns"][:3] == ["Rank", "Model", "Score (official)"]
    names = [r[1] for r in table["rows"]]
    assert names[:5] == ["Human", "GPT-4o", "Qwen3-VL-Instruct (8B)", "Qwen/X", "Gemma3 (12B)"]
    human, gpt, qwen8, ours, gemma = (rows_by_model(table)[n] for n in names[:5])
    assert (human["Rank"], human["Score (official)"], human["Source"]) == ("–", 87.18, "human")
    assert (gpt["Rank"], gpt["Score (official)"], gpt["Context (official)"], gpt["Source"]) == (
        1,
        52.24,
        68.18,
        "[paper]",
    )
    assert gpt["Δ"] == pytest.approx(15.94) and gpt["Score"] is None  # never measured with this toolkit's parser
    assert (qwen8["Rank"], ours["Rank"], gemma["Rank"]) == (2, 3, 4)
    assert ours["Score (official)"] == 45.0 and ours["Context (official)"] == 50.0 and ours["Δ"] == 5.0
    assert ours["Score"] == 46.0 and ours["Impl. full"] == 45.0 and ours["Source"] == "run"


def test_the_chance_row_is_in_the_board_and_tables_2_and_3(runs, tmp_path: Path) -> None:
    table = report_json(tmp_path / "o", str(runs["x_base"]), str(runs["x_ctx"]))
    chance = rows_by_model(table)["Random guess (chance)"]
    assert chance["Rank"] == "–" and chance["Source"] == "chance"
    assert [chance[c] for c in ("Score (official)", "Context (official)", "Δ", "Score")] == [1.5625, 1.5625, 0, 1.5625]
    assert [chance[c] for c in ("Impl. full", "Aesth. full", "Affect. full")] == [1.5625] * 3
    assert table["rows"][-1][1] == "Random guess (chance)"  # every [paper] model is above chance
    table2 = setting_table(read_runs([runs["x_base"]]), "base")
    (row,) = [r for r in table2.rows if r[0] == "Random guess (chance)"]
    assert row[1:5] == [25.0, 25.0, 25.0, 1.5625] and row[-2:] == [1.5625, 1.5625]
    table3 = base_vs_context_table(read_runs([runs["x_base"], runs["x_ctx"]]))
    chance3 = [r for r in table3.rows if r[0] == "Random guess (chance)"]
    assert [r[1] for r in chance3] == ["base", "context"] and chance3[1][-1] == 0.0  # Δ Score (official)


def test_no_reference_leaves_out_the_paper_rows_and_chance(runs, tmp_path: Path) -> None:
    table = report_json(tmp_path / "o", str(runs["x_base"]), "--no-reference")
    assert [r[:2] for r in table["rows"]] == [[1, "Qwen/X"]]


def test_a_tie_shares_the_rank_and_the_next_rank_is_skipped(runs, tmp_path: Path) -> None:
    table = report_json(tmp_path / "o", str(runs["x_base"]), str(runs["y_base"]))
    ranks = {r[1]: r[0] for r in table["rows"]}
    assert ranks["Qwen3-VL-Instruct (4B)"] == ranks["Strong/Y"] == 5  # both 41.24
    assert ranks["InternVL3.5 (8B)"] == 7  # 40.01


def test_a_smoke_sample_run_is_listed_without_a_rank(tmp_path: Path) -> None:
    write_results(tmp_path / "s", families("hvcu_bench_sample", acc_full=99.0, acc_full_official=99.0))
    table = report_json(tmp_path / "o", str(tmp_path / "s"))
    first = dict(zip(table["columns"], table["rows"][0], strict=True))
    assert (first["Rank"], first["Model"], first["Source"]) == ("–", "Qwen/X†", "run (smoke sample)")
    assert rows_by_model(table)["GPT-4o"]["Rank"] == 1  # the paper's ranks do not move


def test_a_limited_run_is_listed_without_a_rank(tmp_path: Path) -> None:
    write_results(tmp_path / "l", families("hvcu_bench", acc_full=99.0, acc_full_official=99.0), limit=5)
    table = report_json(tmp_path / "o", str(tmp_path / "l"))
    assert table["rows"][0][:2] == ["–", "Qwen/X*"]


def test_a_limited_run_says_partial_in_its_source(tmp_path: Path) -> None:
    write_results(tmp_path / "l", families("hvcu_bench", acc_full=99.0, acc_full_official=99.0), limit=5)
    table = report_json(tmp_path / "o", str(tmp_path / "l"))
    assert rows_by_model(table)["Qwen/X*"]["Source"] == "run (partial)"


def test_a_limited_context_run_is_marked_and_shows_no_context_score(runs, tmp_path: Path) -> None:
    write_results(
        tmp_path / "c", families("hvcu_bench_context", acc_full=70.0, acc_full_official=70.0), "model=Qwen/X", limit=5
    )
    table = report_json(tmp_path / "o", str(runs["x_base"]), str(tmp_path / "c"))
    ours = rows_by_model(table)["Qwen/X*"]
    assert (ours["Rank"], ours["Score (official)"]) == (3, 45.0)  # the base setting is whole: ranked by it
    assert (ours["Context (official)"], ours["Δ"], ours["Source"]) == (None, None, "run (partial)")
    assert any(n.startswith("Qwen/X*: context: implication ran on a subset (--limit 5)") for n in table["notes"])


def test_a_model_whose_two_parsers_disagree_carries_the_mark(tmp_path: Path) -> None:
    write_results(tmp_path / "r", families("hvcu_bench", acc_full=50.0, acc_full_official=45.0))
    table = report_json(tmp_path / "o", str(tmp_path / "r"))
    ours = rows_by_model(table)["Qwen/X‡"]  # 50 with this toolkit's parser, 45 with the authors': 5 points apart
    assert (ours["Rank"], ours["Score (official)"], ours["Score"]) == (3, 45.0, 50.0)


def test_a_model_within_one_point_under_both_parsers_has_no_mark(runs, tmp_path: Path) -> None:
    table = report_json(tmp_path / "o", str(runs["x_base"]))  # 46 and 45: exactly 1 point apart
    assert "Qwen/X" in rows_by_model(table)


def test_an_unrankable_entry_gets_no_rank_even_when_marked_rankable() -> None:
    entry = Entry("M", "M", "run", "HVCU-Bench", True, None, None, None, None)
    assert ranked([entry]) == [(None, entry)]


def test_csv_rounds_to_two_decimals_and_json_keeps_full_precision(tmp_path: Path) -> None:
    write_results(tmp_path / "r", families("hvcu_bench", acc_full=100 / 3, acc_full_official=100 / 3))
    assert main(["report", str(tmp_path / "r"), "--format", "csv", "--out", str(tmp_path / "csv")]) == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "csv" / "leaderboard.csv").read_text())))
    ours = next(r for r in rows if r["Model"] == "Qwen/X")
    chance = next(r for r in rows if r["Model"] == "Random guess (chance)")
    assert (ours["Score (official)"], ours["Impl. full"], chance["Score (official)"]) == ("33.33", "33.33", "1.56")
    table2 = list(csv.DictReader(io.StringIO((tmp_path / "csv" / "table2_base.csv").read_text())))
    assert table2[-1]["Impl. Acc_full"] == "33.33" and table2[-1]["Impl. Acc_perc"] == "90.0"
    entries = json.loads((tmp_path / "csv" / "leaderboard.json").read_text())["entries"]
    assert next(e for e in entries if e["model"] == "Qwen/X")["acc_full"]["implication"] == 100 / 3


def test_leaderboard_json_has_the_documented_shape(runs, tmp_path: Path) -> None:
    report_json(tmp_path / "o", str(runs["x_base"]), str(runs["x_ctx"]))
    data = json.loads((tmp_path / "o" / "leaderboard.json").read_text())
    assert (data["schema"], data["version"]) == ("hvcu-leaderboard", 4)
    ours = next(e for e in data["entries"] if e["model"] == "Qwen/X")
    best, worst = ours.pop("rank_range")
    assert best <= 3 <= worst and set(ours.pop("letters")) <= set("abcdefghijklmnopqrstuvwxyz")
    low, high = ours.pop("interval_base")  # no sample logs: from counts, 45% of 400/350/300 samples
    assert low < 45 < high and 5 < high - low < 7
    assert ours == {
        "rank": 3,
        "model": "Qwen/X",
        "label": "Qwen/X",
        "source": "run",
        "data": "HVCU-Bench",
        "rankable": True,
        "score_base": 45.0,
        "score_context": 50.0,
        "score_base_hvcu": 46.0,
        "score_context_hvcu": 50.0,
        "acc_full": {"implication": 45.0, "aesthetic": 45.0, "affective": 45.0},
        "notes": [],
        "family_sizes": None,
        "fingerprint": "",
        "verdicts": {},
        "interval_context": None,
        "interval_gain": None,
        "interval_method": "counts",
        "failed_requests": {},
        "unranked_because": None,
        "general": {},
        "general_ci": {},
        "general_partial": False,
    }
    assert data["uncertainty"]["methods"]["adjustment"].startswith("Holm")
    ranked = [e for e in data["entries"] if e["rank"] is not None]
    assert len(data["pairs"]) == len(ranked) * (len(ranked) - 1) // 2  # every two ranked rows, unpaired
    assert {p["paired"] for p in data["pairs"]} == {False}
    gpt = next(e for e in data["entries"] if e["model"] == "GPT-4o")
    assert gpt["source"] == "paper" and gpt["score_base_hvcu"] is None  # null: not measured / not available


def test_adding_runs_to_a_published_board_gives_the_board_of_all_runs(runs, tmp_path: Path) -> None:
    report_json(tmp_path / "first", str(runs["x_base"]), str(runs["x_ctx"]))
    published = tmp_path / "first" / "leaderboard.json"
    added = report_json(tmp_path / "added", "--base", str(published), str(runs["y_base"]))
    everything = report_json(tmp_path / "all", str(runs["x_base"]), str(runs["x_ctx"]), str(runs["y_base"]))
    assert added["columns"] == everything["columns"] and added["rows"] == everything["rows"]
    assert (tmp_path / "added" / "leaderboard.json").read_text() == (tmp_path / "all" / "leaderboard.json").read_text()


def test_a_model_already_on_the_published_board_is_refused(runs, tmp_path: Path, capsys) -> None:
    report_json(tmp_path / "first", str(runs["x_base"]))
    published = tmp_path / "first" / "leaderboard.json"
    assert main(["report", "--base", str(published), str(runs["x_ctx"])]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {published}: entries[") and "'Qwen/X' is on the published board" in line


def _entry() -> dict:
    return {
        "model": "M",
        "label": "M",
        "source": "run",
        "data": "HVCU-Bench",
        "rankable": True,
        "score_base": 40.0,
        "score_context": None,
        "score_base_hvcu": None,
        "score_context_hvcu": None,
        "acc_full": {"implication": 40.0, "aesthetic": 40.0, "affective": 40.0},
        "interval_base": None,
        "notes": [],
    }


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not JSON"),
        (json.dumps([1]), "expected a leaderboard object"),
        (json.dumps({"schema": "other", "version": 1, "entries": []}), "schema: expected 'hvcu-leaderboard'"),
        (
            json.dumps({"schema": "hvcu-leaderboard", "version": 5, "entries": []}),
            "version: expected one of 1, 2, 3, 4, got 5",
        ),
        (json.dumps({"schema": "hvcu-leaderboard", "version": 1, "entries": {}}), "entries: expected a list"),
        (
            json.dumps({"schema": "hvcu-leaderboard", "version": 1, "entries": [{**_entry(), "score_base": 140}]}),
            "entries[0].score_base: 140 is outside 0-100",
        ),
        (
            json.dumps({"schema": "hvcu-leaderboard", "version": 1, "entries": [{**_entry(), "source": "blog"}]}),
            "entries[0].source: Input should be 'paper', 'human', 'chance' or 'run' (got 'blog')",
        ),
        (
            json.dumps({"schema": "hvcu-leaderboard", "version": 1, "entries": [_entry(), {"model": "N"}]}),
            "entries[1].label: missing",
        ),
        (
            json.dumps({"schema": "hvcu-leaderboard", "version": 1, "entries": [{**_entry(), "score_base": None}]}),
            "entries[0].rankable: true, but score_base is null",
        ),
        (
            json.dumps({"schema": "hvcu-leaderboard", "version": 1, "entries": [{**_entry(), "source": "human"}]}),
            "entries[0].rankable: true, but source is 'human'",
        ),
        (
            json.dumps(
                {"schema": "hvcu-leaderboard", "version": 1, "entries": [{**_entry(), "interval_base": [50, 40]}]}
            ),
            "entries[0].interval_base: low 50.0 is above high 40.0",
        ),
        (  # 401 digits: an integer Python reads, too large for a float
            json.dumps({"schema": "hvcu-leaderboard", "version": 1, "entries": [{**_entry(), "score_base": 10**400}]}),
            "entries[0].score_base: an integer of 401 digits is outside 0-100",
        ),
        (
            json.dumps(
                {"schema": "hvcu-leaderboard", "version": 1, "entries": [{**_entry(), "interval_base": [0, 10**400]}]}
            ),
            "entries[0].interval_base[1]: an integer of 401 digits is outside 0-100",
        ),
        (  # NaN and Infinity: JSON literals Python reads as floats, never a percentage
            json.dumps({"schema": "hvcu-leaderboard", "version": 1, "entries": [{**_entry(), "score_base": math.nan}]}),
            "entries[0].score_base: nan is not a number or null",
        ),
        (
            json.dumps(
                {"schema": "hvcu-leaderboard", "version": 1, "entries": [{**_entry(), "interval_base": [0, math.inf]}]}
            ),
            "entries[0].interval_base[1]: inf is not a number or null",
        ),
    ],
)
def test_a_bad_published_board_stops_naming_file_and_field(
    runs, tmp_path: Path, capsys, content: str, message: str
) -> None:
    published = tmp_path / "leaderboard.json"
    published.write_text(content)
    assert main(["report", "--base", str(published), str(runs["y_base"])]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {published}: ") and message in line


def test_the_html_format_says_it_needs_out(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "html needs --out DIR" in help_text and "--base LEADERBOARD_JSON" in help_text


def test_table3_rows_of_one_model_form_one_group(runs) -> None:
    table = base_vs_context_table(read_runs([runs["x_base"], runs["x_ctx"]]), reference=False)
    assert table.groups == [0] * 6  # base and context, three families each
    with_paper = base_vs_context_table(read_runs([runs["x_base"], runs["x_ctx"]]))
    assert with_paper.groups == [g for g in range(len(with_paper.rows) // 6) for _ in range(6)]


def test_model_page_names_are_safe_and_unique() -> None:
    names = page_names(["Qwen/Qwen2.5-VL-7B", "qwen-qwen2.5-vl-7b", "../../etc/passwd", "///"])
    assert list(names.values()) == [
        "Qwen-Qwen2.5-VL-7B.html",
        "qwen-qwen2.5-vl-7b-2.html",
        "etc-passwd.html",
        "model.html",
    ]


def test_a_site_grown_with_base_keeps_the_pages_of_the_published_runs(runs, tmp_path: Path) -> None:
    site = tmp_path / "site"
    assert main(["report", str(runs["x_base"]), "--format", "html", "--out", str(site)]) == 0
    published = tmp_path / "published.json"
    published.write_bytes((site / "leaderboard.json").read_bytes())
    assert main(["report", "--base", str(published), str(runs["y_base"]), "--format", "html", "--out", str(site)]) == 0
    index = (site / "index.html").read_text()
    assert "href='models/Qwen-X.html'" in index and "href='models/Strong-Y.html'" in index
    assert sorted(p.name for p in (site / "models").iterdir()) == ["Qwen-X.html", "Strong-Y.html"]
    models = [
        e["model"] for e in json.loads((site / "leaderboard.json").read_text())["entries"] if e["source"] == "run"
    ]
    assert models == ["Qwen/X", "Strong/Y"]  # 45.0, then 41.24


def test_a_run_named_like_a_paper_model_links_only_its_own_row(tmp_path: Path) -> None:
    write_results(tmp_path / "r", families("hvcu_bench", acc_full=30.0, acc_full_official=30.0), "model=GPT-4o")
    assert main(["report", str(tmp_path / "r"), "--format", "html", "--out", str(tmp_path / "site")]) == 0
    index = (tmp_path / "site" / "index.html").read_text()
    board = index[index.index("id='leaderboard'") : index.index("</table>")]
    rows = [r for r in board.split("<tr") if "GPT-4o" in r]
    assert len(rows) == 2
    paper, run = sorted(rows, key=lambda r: "[paper]" not in r)
    assert "<a " not in paper and "<a href='models/GPT-4o.html'>GPT-4o</a>" in run


def test_a_board_written_without_the_paper_rows_gains_them_when_grown_with_them(runs, tmp_path: Path) -> None:
    report_json(tmp_path / "first", str(runs["x_base"]), str(runs["x_ctx"]), "--no-reference")
    published = tmp_path / "first" / "leaderboard.json"
    added = report_json(tmp_path / "added", "--base", str(published), str(runs["y_base"]))
    everything = report_json(tmp_path / "all", str(runs["x_base"]), str(runs["x_ctx"]), str(runs["y_base"]))
    assert added["rows"] == everything["rows"]  # GPT-4o [paper], human and chance included


def html_report(site: Path, *args: str) -> None:
    assert main(["report", *args, "--format", "html", "--out", str(site)]) == 0


def page_title(page: Path) -> str:
    found = re.search(r"<title>(.*?)</title>", page.read_text())
    assert found
    return html.unescape(found.group(1))


def test_a_new_model_whose_page_name_is_taken_by_a_published_model_gets_another(runs, tmp_path: Path) -> None:
    site = tmp_path / "site"
    html_report(site, str(runs["x_base"]))
    published = tmp_path / "published.json"
    published.write_bytes((site / "leaderboard.json").read_bytes())
    clash = write_results(tmp_path / "clash", families("hvcu_bench", acc_full_official=30.0), "model=Qwen X")
    html_report(site, "--base", str(published), str(clash))
    assert page_title(site / "models" / "Qwen-X.html") == "Qwen/X"  # the published model keeps its page
    assert page_title(site / "models" / "Qwen-X-2.html") == "Qwen X"
    index = (site / "index.html").read_text()
    assert "<a href='models/Qwen-X-2.html'>Qwen X</a>" in index and "<a href='models/Qwen-X.html'>Qwen/X</a>" in index


def board_ranks(page: Path) -> list[str]:
    text = page.read_text()
    board = text[text.index("id='leaderboard'") : text.index("</table>")]
    return re.findall(r"<td class='rank'>(.*?)</td>", board)


def test_a_kept_model_page_shows_its_row_on_the_grown_board(runs, tmp_path: Path) -> None:
    site = tmp_path / "site"
    html_report(site, str(runs["x_base"]))
    assert board_ranks(site / "models" / "Qwen-X.html") == ["3"]
    published = tmp_path / "published.json"
    published.write_bytes((site / "leaderboard.json").read_bytes())
    better = write_results(tmp_path / "z", families("hvcu_bench", acc_full_official=50.0), "model=Better/Z")
    html_report(site, "--base", str(published), str(better))
    assert board_ranks(site / "models" / "Qwen-X.html") == ["4"]  # 52.24, 50 (Better/Z), 47.58, then 45
    assert "Acc_full per aspect, base setting" in (site / "models" / "Qwen-X.html").read_text()  # the rest kept


def test_a_run_named_like_a_paper_model_shows_only_its_own_row_on_its_page(tmp_path: Path) -> None:
    write_results(tmp_path / "r", families("hvcu_bench", acc_full=30.0, acc_full_official=30.0), "model=GPT-4o")
    html_report(tmp_path / "site", str(tmp_path / "r"))
    page = (tmp_path / "site" / "models" / "GPT-4o.html").read_text()
    board = page[page.index("id='leaderboard'") : page.index("</table>")]
    (row,) = re.findall(r"<tr class='[^']*'>.*?</tr>", board)
    assert "<td class='text'>run</td>" in row and "30.00" in row


def test_a_kept_page_without_a_board_row_is_left_as_it_is_with_a_warning(runs, tmp_path: Path, capsys) -> None:
    site = tmp_path / "site"
    html_report(site, str(runs["x_base"]))
    page = site / "models" / "Qwen-X.html"
    page.write_text("<html><head><title>Qwen/X</title></head><body>older page</body></html>")
    published = tmp_path / "published.json"
    published.write_bytes((site / "leaderboard.json").read_bytes())
    html_report(site, "--base", str(published), str(runs["y_base"]))
    assert page.read_text() == "<html><head><title>Qwen/X</title></head><body>older page</body></html>"
    assert f"warning: {page}: no leaderboard row on it to update" in capsys.readouterr().err
