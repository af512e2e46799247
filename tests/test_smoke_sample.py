"""The bundled smoke sample is exactly what its generator writes, and says it is not the benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tools import build_smoke as builder
from tools.build_smoke import build

from hvcu_tasks.dev.smoke import SMOKE_DIR


def test_committed_sample_equals_a_fresh_build(tmp_path: Path) -> None:
    build(tmp_path)
    committed = sorted(p.relative_to(SMOKE_DIR) for p in SMOKE_DIR.rglob("*") if p.is_file())
    assert committed == sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    for rel in committed:
        if rel.suffix == ".json":
            assert (SMOKE_DIR / rel).read_text() == (tmp_path / rel).read_text(), rel
        else:
            a = np.asarray(Image.open(SMOKE_DIR / rel).convert("RGB"))
            b = np.asarray(Image.open(tmp_path / rel).convert("RGB"))
            assert a.shape == b.shape == (96, 96, 3), rel
            assert (a != b).any(axis=2).mean() < 0.02, f"{rel}: rerun python tests/tools/build_smoke.py"


def test_every_record_is_labelled_as_a_smoke_sample() -> None:
    for path in SMOKE_DIR.glob("*.json"):
        for record in json.loads(path.read_text()):
            assert "SMOKE SAMPLE" in record["note"] and "not HVCU-Bench" in record["note"]


def test_a_chain_whose_aspect_has_no_drawing_is_refused_naming_file_chain_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chains = tmp_path / "chains.tsv"
    header = "id\tfamily\taspect\tlevel\tquestion\tA\tB\tC\tD\tanswer\n"
    chains.write_text(header + "odd_001\taffective\tboredom\t1\tWhy?\tw\tx\ty\tz\tA\n")
    monkeypatch.setattr(builder, "CHAINS", chains)
    with pytest.raises(ValueError, match=r"chains\.tsv:2: chain odd_001: field aspect: 'boredom' has no drawing"):
        build(tmp_path / "out")


def test_a_level_without_its_answer_is_refused_naming_the_line_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chains = tmp_path / "chains.tsv"
    header = "id\tfamily\taspect\tlevel\tquestion\tA\tB\tC\tD\tanswer\n"
    chains.write_text(header + "joy_001\taffective\tjoy\t1\tWhich?\tw\tx\ty\tz\t\n")
    monkeypatch.setattr(builder, "CHAINS", chains)
    with pytest.raises(ValueError, match=r"chains\.tsv:2: chain joy_001: field answer: empty or missing"):
        build(tmp_path / "out")
