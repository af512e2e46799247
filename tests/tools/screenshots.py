"""Regenerate the docs' screenshots of the report site (1,280 × 800 PNG) in headless Chromium.

    .venv/bin/python tests/tools/screenshots.py [RUNS ...] [--out docs/img]

RUNS default to `hvcu-demo/runs` (what `make demo` writes: a random tiny model on the smoke sample, both
settings, with --log_samples); the paper's rows are on the page as always. Writes leaderboard.png (index.html)
and model-page.png (the first model's page).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def screenshot(page: Path, png: Path, profile: Path) -> None:
    """Write a 1,280 × 800 screenshot of a page."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        sys.exit("error: headless Chromium is required (make browser installs Debian's chromium)")
    png.parent.mkdir(parents=True, exist_ok=True)
    command = [binary, *FLAGS, f"--user-data-dir={profile}", "--window-size=1280,800", f"--screenshot={png}"]
    subprocess.run([*command, page.as_uri()], check=True, capture_output=True, timeout=120)


def main() -> int:
    """Build the site from the runs and screenshot its index and first model page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, default=[ROOT / "hvcu-demo" / "runs"])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    missing = [str(p) for p in args.runs if not p.exists()]
    if missing:
        sys.exit(f"error: {', '.join(missing)}: no such folder (run `make demo` first, or pass RUNS)")
    sys.path.insert(0, str(ROOT))
    from hvcu_tasks.cli import main as hvcu

    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        if hvcu(["report", *map(str, args.runs), "--format", "html", "--out", str(site)]) != 0:
            return 1
        screenshot(site / "index.html", args.out / "leaderboard.png", Path(tmp) / "profile")
        first = sorted((site / "models").glob("*.html"))[0]
        screenshot(first, args.out / "model-page.png", Path(tmp) / "profile")
    print(f"wrote {args.out / 'leaderboard.png'} and {args.out / 'model-page.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
