"""`hvcu report --summary`: one short table (the runs beside the best paper rows, human and chance), where the files
are, and the command that prints every table; what `make demo` ends on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_report import families, write_results

from hvcu_tasks.cli import main

# The paper's best three base Scores (Table 2) with their context Scores (Table 8), and the human baseline.
BEST_PAPER = [("1", "GPT-4o", "52.24", "68.18"), ("2", "Qwen3-VL-Instruct (8B)", "47.58", "62.28")]
THIRD_PAPER = ("4", "Gemma3 (12B)", "44.23", "55.56")


def table_rows(out: str) -> list[list[str]]:
    """Return the body rows of the first table in out, cells stripped (the header lines and the rule left out)."""
    lines = out.split("\n|-", 1)[1].splitlines()[1:]
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in lines[: next(i for i, x in enumerate(lines) if x[:1] != "|")]
    ]


def summary(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run `hvcu report --summary ARGS` and return what it printed; it must succeed."""
    assert main(["report", *args, "--summary"]) == 0
    return capsys.readouterr().out


@pytest.fixture
def x_runs(tmp_path: Path) -> list[str]:
    """Qwen/X on the benchmark: base 46 (official 45), context 50 (official 50.5)."""
    base = write_results(tmp_path / "b", families("hvcu_bench", acc_full=46.0, acc_full_official=45.0))
    ctx = write_results(tmp_path / "c", families("hvcu_bench_context", acc_full=50.0, acc_full_official=50.5))
    return [str(base), str(ctx)]


SIZES = (400, 350, 300)  # samples per family (Table 5): implication, aesthetic, affective


def wald(*acc: float) -> str:
    """The 95% interval of a mean of three family accuracies, as the board prints it: each family's
    Clopper–Pearson bounds (of its count, acc * n rounded), combined by MOVER."""
    from scipy.stats import beta

    right = [round(p * n / 100) for p, n in zip(acc, SIZES, strict=True)]
    share = [x / n for x, n in zip(right, SIZES, strict=True)]
    low = [beta.ppf(0.025, x, n - x + 1) for x, n in zip(right, SIZES, strict=True)]
    high = [beta.ppf(0.975, x + 1, n - x) for x, n in zip(right, SIZES, strict=True)]
    mean = sum(share) / 3
    below = sum((s - lo) ** 2 for s, lo in zip(share, low, strict=True)) ** 0.5 / 3
    above = sum((hi - s) ** 2 for s, hi in zip(share, high, strict=True)) ** 0.5 / 3
    return f"[{100 * (mean - below):.2f}, {100 * (mean + above):.2f}]"


def test_the_summary_is_one_table_of_the_run_then_the_best_paper_rows_human_and_chance(capsys, x_runs) -> None:
    out = summary(capsys, *x_runs)
    rows = table_rows(out)
    ranges = [r.pop(1) for r in rows]
    assert (
        rows
        == [  # your run first, with its rank among the paper's rows
            ["3", "Qwen/X", "45.00", wald(45.0, 45.0, 45.0), "–", "50.50", "46.00", "run"],
            ["–", "Human", "87.18", wald(86.0, 88.86, 86.67), "–", "–", "–", "human"],
            [BEST_PAPER[0][0], *BEST_PAPER[0][1:3], wald(53.25, 53.14, 50.33), "–", BEST_PAPER[0][3], "–", "[paper]"],
            [BEST_PAPER[1][0], *BEST_PAPER[1][1:3], wald(50.75, 44.0, 48.0), "–", BEST_PAPER[1][3], "–", "[paper]"],
            [*THIRD_PAPER[:3], wald(47.5, 38.86, 46.33), "–", THIRD_PAPER[3], "–", "[paper]"],
            ["–", "Random guess (chance)", "1.56", "–", "–", "1.56", "1.56", "chance"],
        ]
    )
    assert ranges[1] == ranges[-1] == "–"  # references have no rank
    for (rank, *_rest), shown in zip(rows[:1] + rows[2:5], ranges[:1] + ranges[2:5], strict=True):
        low, _, high = shown.partition("–")
        assert int(low) <= int(rank) <= int(high or low)  # each range holds the row's rank
    header = [line.strip("|").split("|") for line in out.split("\n|-")[0].splitlines() if line.startswith("|")]
    assert [" ".join(w.strip() for w in words if w.strip()) for words in zip(*header, strict=True)] == [
        "Rank",
        "Rank range",
        "Model",
        "Score (official)",
        "95% CI",
        "Failed",
        "Context (official)",
        "Score",
        "Source",
    ]  # headers wrapped at words
    assert "10 more [paper] rows" in out  # 13 paper rows in Table 2, 3 shown
    assert "truly differ by 6.16 points" in " ".join(out.split())  # the detectable difference at 400/350/300 samples


def test_the_summary_names_the_command_that_prints_every_table(capsys, x_runs) -> None:
    out = summary(capsys, *x_runs)
    assert f"the same runs: hvcu report {x_runs[0]} {x_runs[1]}\n" in out
    assert "  --format md                every table in full (or csv, latex, json)\n" in out
    assert len(out.splitlines()) < 30


def test_with_a_site_the_summary_says_where_the_page_is_and_writes_the_site_as_usual(
    capsys, x_runs, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    out = summary(capsys, *x_runs, "--format", "html", "--out", str(site))
    assert (site / "index.html").is_file() and (site / "leaderboard.json").is_file()
    assert f"the leaderboard page: {site / 'index.html'}\n" in out
    assert f"the same runs: hvcu report {x_runs[0]} {x_runs[1]}\n" in out
    assert re.search(rf"wrote \d+ file\(s\) and \d+ figure file\(s\) to {re.escape(str(site))}\n", out)
    assert "### " not in out.split("HVCU-Bench leaderboard", 1)[1].split("\n", 1)[1]  # only the one table


def test_a_smoke_sample_run_is_listed_unranked_and_said_to_be_no_score(capsys, tmp_path: Path) -> None:
    run = write_results(tmp_path / "s", families("hvcu_bench_sample", acc_full=0.0, acc_full_official=0.0))
    out = summary(capsys, str(run))
    (row,) = [r for r in table_rows(out) if r[2].startswith("Qwen/X")]
    assert row == ["–", "–", "Qwen/X†", "0.00", "–", "–", "–", "0.00", "run (smoke sample)"]
    assert "† smoke sample: not the benchmark" in out


def test_the_full_command_keeps_the_options_that_change_the_tables(capsys, x_runs) -> None:
    out = summary(capsys, *x_runs, "--no-reference")
    assert f"the same runs: hvcu report {x_runs[0]} {x_runs[1]} --no-reference\n" in out
    assert [r[2] for r in table_rows(out)] == ["Qwen/X"]


def test_a_path_with_a_space_is_quoted_in_the_printed_command(capsys, tmp_path: Path) -> None:
    run = write_results(tmp_path / "my runs", families("hvcu_bench", acc_full_official=45.0))
    out = summary(capsys, str(run))
    assert f"the same runs: hvcu report '{run}'\n" in out


def test_summary_without_out_prints_markdown_only(capsys, x_runs) -> None:
    assert main(["report", *x_runs, "--summary", "--format", "json"]) == 2
    assert "--summary prints a table; --format json needs --out DIR" in capsys.readouterr().err


@pytest.fixture
def two_runs(tmp_path: Path) -> list[str]:
    """org/strong (Score 60, official 58: the parsers disagree, ‡) and org/weak (30, official 29), both settings."""
    runs = []
    for name, acc, official in (("strong", 60.0, 58.0), ("weak", 30.0, 29.0)):
        for setting, prefix, gain in (("b", "hvcu_bench", 0), ("c", "hvcu_bench_context", 5)):
            tasks = families(prefix, acc_full=acc + gain, acc_full_official=official + gain)
            runs.append(str(write_results(tmp_path / f"{name}_{setting}", tasks, f"model=org/{name}")))
    return runs


def test_the_summary_explains_every_mark_and_says_which_runs_differ_significantly(capsys, two_runs) -> None:
    out = summary(capsys, *two_runs)
    text = " ".join(out.split())
    assert [r[2] for r in table_rows(out)[:2]] == ["org/strong‡", "org/weak"]  # the runs first
    assert "‡: the two parsers' base Scores (Score and Score (official)) differ by more than 1 point" in text
    # 58 vs 29 on 400/350/300 samples, unpaired (results files only): far beyond the 4.31 points needed alone
    assert "org/strong‡ − org/weak: Δ 28.95 [" in text and "p (Holm) < 0.0001: significant." in text


def test_runs_a_point_apart_are_said_not_to_differ(capsys, tmp_path: Path) -> None:
    a = write_results(tmp_path / "a", families("hvcu_bench", acc_full=45.0, acc_full_official=45.0), "model=org/a")
    b = write_results(tmp_path / "b", families("hvcu_bench", acc_full=44.0, acc_full_official=44.0), "model=org/b")
    text = " ".join(summary(capsys, str(a), str(b)).split())
    assert "org/a − org/b: Δ 1.05 [" in text and "p (Holm) 1: not significant." in text  # 1 point: noise here


def test_the_terminal_report_fits_120_columns_with_your_runs_first_in_every_table(capsys, two_runs) -> None:
    assert main(["report", *two_runs]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines() if not line.startswith("the same runs: ")) <= 120
    sections = out.split("\n\n")
    tables = [s for s in sections if "\n|-" in s]
    assert len(tables) >= 8  # leaderboard, pairs, versus, tables 2, 8, 3, aspects, errors
    for section in tables:  # each block of a wide table repeats the Model column, your rows first
        for block in section.split("\n|-")[1:]:
            first = block.splitlines()[1]
            assert "org/strong" in first or "org/weak" in first, section[:200]
    assert out.count("\n|Model ") > out.count("\nHVCU-Bench, ")  # Tables 2 and 8 split into blocks
    # notes wrapped at words: the leaderboard's first note reads whole once the lines are joined
    assert (
        "- Ranked by Score (official): the Overall Score of the base setting (mean of the three families' Acc_full) "
        "under the authors' answer parser, the number the paper reports, so [paper] rows and runs rank on one scale."
    ) in " ".join(out.split())
    assert "more rows: every table in full is named at the end" in out
    assert "  --format md                every table in full (or csv, latex, json)\n" in out


def test_format_md_still_prints_every_row_of_every_table(capsys, two_runs) -> None:
    assert main(["report", *two_runs, "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert "| LLaVA-1.6 (7B) [paper] |" in out and "### HVCU-Bench, base setting" in out
