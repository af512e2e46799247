"""What the leaderboard's intervals cost: the board of N logged runs on the 1,050 samples beside the paper's rows.

Builds N seeded synthetic runs (both settings logged, accuracies spread between 20% and 60%), then times
`make_board` (every row's interval, every two ranked rows compared and Holm-adjusted, rank ranges and letters),
the leaderboard and pairs tables, and `leaderboard.json` (its size, and reading it back as `--base` does). Prints
one line per N.

    python benchmarks/report_intervals.py [--runs 2,10,30]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from hvcu_tasks.core.families import ASPECTS, FAMILIES
from hvcu_tasks.report.board import board_entries, make_board
from hvcu_tasks.report.board_file import leaderboard_json, read_leaderboard
from hvcu_tasks.report.board_tables import leaderboard_table, pairs_table
from hvcu_tasks.results.runs import FamilyResult, ModelResult

SIZES = {family: sum(aspects.values()) for family, aspects in ASPECTS.items()}


def synthetic_run(name: str, accuracy: float, rng: np.random.Generator) -> ModelResult:
    """Return a logged run of the benchmark whose chains hold with `accuracy` (context: 10 points more)."""
    model = ModelResult(model=name, dataset={"HVCU-Bench"})
    for setting, p in (("base", accuracy), ("context", min(accuracy + 0.1, 1.0))):
        chains = {f: {f"{f}_{i:04d}": bool(rng.random() < p) for i in range(n)} for f, n in SIZES.items()}
        results = {}
        for family, verdicts in chains.items():
            acc = 100 * sum(verdicts.values()) / len(verdicts)
            metrics = {"acc_full": acc, "acc_full_official": acc, "n_chains": len(verdicts)}
            results[family] = FamilyResult(metrics, f"hvcu_bench_{family}")
        model.settings[setting] = results
        model.chains[setting] = chains
        model.chains_official[setting] = chains
        model.identities[setting] = {f: {"fingerprint": f"sha256:{f}"} for f in FAMILIES}
    return model


def measure(runs: int) -> str:
    """Return one line of timings for a board of `runs` logged runs and the paper's rows."""
    rng = np.random.default_rng(runs)
    models = [synthetic_run(f"model-{k:02d}", float(rng.uniform(0.2, 0.6)), rng) for k in range(runs)]
    entries = board_entries(models)
    start = time.perf_counter()
    board = make_board(entries)
    built = time.perf_counter() - start
    start = time.perf_counter()
    leaderboard_table(board), pairs_table(board)
    text = leaderboard_json(board)
    written = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "leaderboard.json"
        path.write_text(text, encoding="utf-8")
        start = time.perf_counter()
        make_board(read_leaderboard(path))
        again = time.perf_counter() - start
    return (
        f"runs {runs:3d}: make_board {built:6.2f} s, tables + json {written:5.2f} s, leaderboard.json "
        f"{len(text.encode()) / 1e6:5.2f} MB ({len(board.uncertainty.pairs)} pairs), --base read + board {again:6.2f} s"
    )


def main() -> None:
    """Print the timings for each board size asked for."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default="2,10,30", help="board sizes (logged runs), comma-separated")
    args = parser.parse_args()
    for n in (int(x) for x in args.runs.split(",")):
        print(measure(n), flush=True)


if __name__ == "__main__":
    main()
