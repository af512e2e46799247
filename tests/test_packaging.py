"""The wheel carries every data file the tasks need (an editable install would hide a missing one)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA_DIRS = [
    "hvcu_tasks/lmms/tasks",
    "hvcu_tasks/dev",
    "hvcu_tasks/report",
    "hvcu_tasks/examples",
    "generation/prompts",
    "generation/perturb/examples",
    "training/configs",
]


def test_wheel_contains_task_yamls_smoke_sample_and_reference_rows(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {
        str(p.relative_to(REPO))
        for d in DATA_DIRS
        for p in (REPO / d).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert wanted - names == set()
    assert "hvcu_tasks/lmms/plugin.py" in names
    assert "hvcu_tasks/lmms/export_README.md" in names  # the template `hvcu export-task` writes as README.md
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[lmms_eval.models]" in text and "hvcu_tasks.lmms.plugin:manifests" in text
