"""`hvcu report` on real lmms-eval output (replay model, both settings), checked against golden files.

Regenerate the golden files after an intended change with HVCU_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import SMOKE_REPLIES, run_lmms_eval

from hvcu_tasks.cli import main
from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.data.loaders import load_source

pytestmark = pytest.mark.slow
GOLDEN = Path(__file__).resolve().parent / "golden" / "report"


def _write_predictions(path: Path, wrong: set[tuple[str, int]] | None) -> None:
    """Write replay predictions: SMOKE_REPLIES when `wrong` is None, else gold except the (id, level) listed."""
    with path.open("w") as out:
        for family in FAMILIES:
            for s in load_source("smoke", family).raise_for_problems():
                for i, lv in enumerate(s.levels):
                    if wrong is None:
                        reply = SMOKE_REPLIES[(family, s.id)][i] or ""
                    else:
                        reply = ("A" if lv.answer != "A" else "B") if (s.id, lv.level) in wrong else lv.answer
                    record = {"family": family, "sample_id": s.id, "level": lv.level, "response": reply}
                    out.write(json.dumps(record) + "\n")


@pytest.fixture(scope="module")
def all_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Model A in both settings and model B in base, all with --log_samples (B answers like A's context)."""
    root = tmp_path_factory.mktemp("report_runs")
    _write_predictions(root / "a.jsonl", None)
    _write_predictions(root / "b.jsonl", {("font_001", 1)})
    plans = {
        "a_base": ("hvcu_replay", f"model=model-a,predictions={root / 'a.jsonl'}", "hvcu_bench_sample"),
        "a_context": (
            "hvcu_context",
            f"inner=hvcu_replay,model=model-a,predictions={root / 'b.jsonl'}",
            "hvcu_bench_context_sample",
        ),
        "b_base": ("hvcu_replay", f"model=model-b,predictions={root / 'b.jsonl'}", "hvcu_bench_sample"),
    }
    for name, (model, model_args, tasks) in plans.items():
        run_lmms_eval(["--model", model, "--model_args", model_args, "--tasks", tasks, "--log_samples"], root / name)
    return {name: root / name for name in plans}


@pytest.fixture(scope="module")
def runs(all_runs: dict[str, Path]) -> tuple[Path, Path]:
    return all_runs["a_base"], all_runs["a_context"]


@pytest.mark.parametrize("fmt", ["md", "csv", "latex"])
def test_report_matches_the_golden_files(runs: tuple[Path, Path], tmp_path: Path, fmt: str) -> None:
    out = tmp_path / fmt
    assert main(["report", *map(str, runs), "--format", fmt, "--out", str(out)]) == 0
    produced = {p.name: p.read_text() for p in sorted(out.iterdir()) if p.is_file()}
    if os.environ.get("HVCU_UPDATE_GOLDEN"):
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for name, text in produced.items():
            (GOLDEN / name).write_text(text)
    ext = {"md": ".md", "csv": ".csv", "latex": ".tex"}[fmt]
    expected = {p.name: p.read_text() for p in sorted(GOLDEN.glob(f"*{ext}"))}
    expected["leaderboard.json"] = (GOLDEN / "leaderboard.json").read_text()  # written with every --out
    assert produced == expected


def test_the_context_gain_is_computed_from_the_runs(runs: tuple[Path, Path], tmp_path: Path) -> None:
    assert main(["report", *map(str, runs), "--format", "json", "--out", str(tmp_path)]) == 0
    tables = {t["name"]: t for t in json.loads((tmp_path / "report.json").read_text())}
    ours = [r for r in tables["table3_base_vs_context"]["rows"] if r[0] and r[0].startswith("model-a")]
    base, context = ours
    assert (base[1], base[7]) == ("base", 51.11)
    assert (context[1], context[7], context[8]) == ("context", 91.67, 40.56)  # (100 + 75 + 100) / 3 - 51.11


def test_compare_mode_shows_gains_and_paired_tests(all_runs: dict[str, Path], tmp_path: Path) -> None:
    runs = [str(all_runs["a_base"]), str(all_runs["b_base"])]
    assert main(["report", *runs, "--compare", "--format", "json", "--out", str(tmp_path)]) == 0
    tables = {t["name"]: t for t in json.loads((tmp_path / "report.json").read_text())}
    compare = tables["compare_base"]
    assert compare["title"] == "model-b (B) vs model-a (A), base setting, authors' parser (official)"
    impl = compare["rows"][0]
    assert impl[0] == "Impl." and impl[10:13] == [20.0, 100.0, 80.0]
    assert impl[-1] == pytest.approx(2 * 0.5**4)  # B alone right on 4 chains, A alone on none
    assert compare["notes"][0].startswith("Score (official): A 51.11, B 91.67, Δ = B − A 40.56 (")
    # the same two runs in the pairs table: the same parser, the same sign (B − A), the same interval
    pair = tables["pairs"]["rows"][0]
    assert pair[:5] == ["model-a†", "model-b†", 51.11, 91.67, 40.56]
    assert f"Δ = B − A 40.56, 95% interval {pair[5]}" in compare["notes"][1]
    assert "intervals_base" in tables


def test_compare_needs_exactly_two_models(all_runs: dict[str, Path], capsys) -> None:
    assert main(["report", str(all_runs["a_base"]), "--compare"]) == 2
    assert "--compare needs runs of exactly two models" in capsys.readouterr().err


def test_the_site_links_the_chain_browser_and_a_page_per_model(all_runs: dict[str, Path], tmp_path: Path) -> None:
    runs = [str(all_runs["a_base"]), str(all_runs["a_context"]), str(all_runs["b_base"])]
    assert main(["report", *runs, "--format", "html", "--out", str(tmp_path / "site")]) == 0
    index = (tmp_path / "site" / "index.html").read_text()
    assert "href='chains.html'" in index and (tmp_path / "site" / "chains.html").is_file()
    assert sorted(p.name for p in (tmp_path / "site" / "models").iterdir()) == ["model-a.html", "model-b.html"]
    page = (tmp_path / "site" / "models" / "model-a.html").read_text()
    assert "95% intervals, base setting" in page and "href='../chains.html'" in page
    board = json.loads((tmp_path / "site" / "leaderboard.json").read_text())
    (a,) = [e for e in board["entries"] if e["model"] == "model-a"]
    low, high = a["interval_base"]
    assert low < a["score_base"] == 51.11 < high  # sample logs give the interval of the official Score


def test_every_two_logged_runs_on_the_same_samples_are_compared_paired(all_runs: dict[str, Path], tmp_path) -> None:
    runs = [str(all_runs["a_base"]), str(all_runs["b_base"])]
    assert main(["report", *runs, "--no-reference", "--format", "json", "--out", str(tmp_path)]) == 0
    pairs = {t["name"]: t for t in json.loads((tmp_path / "report.json").read_text())}["pairs"]
    (row,) = pairs["rows"]
    # model-b's chains hold wherever model-a's do, and on 6 more of the 15 smoke samples (4 of 5 implication, 1
    # of 4 aesthetic, 1 of 6 affective): Δ = B − A = (4/5 + 1/4 + 1/6) / 3 = 40.56 points. Bonett–Price per family
    # (n, B alone, A alone), variances summed over 9:
    cells = [(5, 4, 0), (4, 1, 0), (6, 1, 0)]
    centre = sum((b - a) / (n + 2) for n, b, a in cells) / 3
    var = sum(((b + 1 + a + 1) / (n + 2) - ((b - a) / (n + 2)) ** 2) / (n + 2) for n, b, a in cells) / 9
    low, high = 100 * (centre - 1.959964 * var**0.5), 100 * (centre + 1.959964 * var**0.5)
    assert row[:6] == ["model-a†", "model-b†", 51.11, 91.67, 40.56, f"[{low:.2f}, {high:.2f}]"]
    assert row[8] == ("yes" if low > 0 else "no")  # one comparison: Holm changes nothing
    stored = json.loads((tmp_path / "leaderboard.json").read_text())["pairs"]
    assert stored[0]["b"]["model"] == "model-b" and stored[0]["interval"] == pytest.approx([low, high], abs=1e-6)
    assert stored[0]["family"] == "unranked runs on sample set 1"  # smoke-sample runs: compared among themselves


def test_a_published_board_of_logged_runs_pairs_them_with_new_runs(all_runs: dict[str, Path], tmp_path) -> None:
    first = tmp_path / "first"
    assert (
        main(["report", str(all_runs["a_base"]), str(all_runs["a_context"]), "--format", "json", "--out", str(first)])
        == 0
    )
    added, everything = tmp_path / "added", tmp_path / "all"
    base = ["--base", str(first / "leaderboard.json")]
    assert main(["report", *base, str(all_runs["b_base"]), "--format", "json", "--out", str(added)]) == 0
    runs = [str(all_runs[k]) for k in ("a_base", "a_context", "b_base")]
    assert main(["report", *runs, "--format", "json", "--out", str(everything)]) == 0
    assert (added / "leaderboard.json").read_text() == (everything / "leaderboard.json").read_text()


def test_the_statistics_need_no_seed_and_the_same_runs_give_the_same_file(all_runs, tmp_path, capsys) -> None:
    runs = [str(all_runs["a_base"]), str(all_runs["a_context"])]
    for out in ("one", "two"):
        assert main(["report", *runs, "--format", "json", "--out", str(tmp_path / out)]) == 0
    assert (tmp_path / "one" / "leaderboard.json").read_text() == (tmp_path / "two" / "leaderboard.json").read_text()
    with pytest.raises(SystemExit) as refused:
        main(["report", *runs, "--seed", "7"])
    assert refused.value.code == 2 and "unrecognized arguments: --seed 7" in capsys.readouterr().err
