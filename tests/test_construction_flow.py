"""The construction tools chained as a team would: build-bench -> audit (5 annotators) -> final -> human sheets."""

from __future__ import annotations

import json
from pathlib import Path

from fake_openai import FakeOpenAI
from test_audit_rounds import write_verdicts
from test_build_bench import ROWS, build, fake_mllm, write_manifest

from hvcu_tasks.cli import main
from hvcu_tasks.data.loaders import load_path


def test_a_built_benchmark_is_audited_into_a_final_folder_and_gets_human_sheets(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, ROWS)
    with FakeOpenAI(fake_mllm) as server:
        assert build(server, manifest, tmp_path / "bench") == 0
    audit = tmp_path / "audit"
    assert main(["audit", "export", str(tmp_path / "bench"), "--out", str(audit), "--annotators", "5"]) == 0
    items = json.loads((audit / "round-1" / "candidates.json").read_text())["items"]
    keys = [(e["family"], e["id"]) for e in items]
    assert len(keys) == 11  # the rejected item never reaches the annotators
    # from a family that keeps other items (a family whose every item is discarded gets no file in final/)
    doubtful = next(sid for family, sid in keys if family == "affective")
    files = [
        write_verdicts(tmp_path / f"a{i}.csv", f"a{i}", 1, keys, {doubtful: "nnnn" if i < 4 else "yyyy"})
        for i in range(1, 6)
    ]
    assert main(["audit", "import", str(audit), *map(str, files)]) == 0
    assert main(["audit", "stats", str(audit)]) == 0
    stats = json.loads((audit / "round-1" / "stats.json").read_text())
    assert [f["id"] for f in stats["flagged"]] == [doubtful]
    decisions = audit / "round-1" / "decisions.csv"
    lines = decisions.read_text().splitlines()
    decisions.write_text("\n".join([lines[0], *(line.replace(",,", ",discard,", 1) for line in lines[1:])]) + "\n")
    assert main(["audit", "decide", str(audit), str(decisions)]) == 0
    final = load_path(audit / "final").raise_for_problems()
    assert sorted(s.id for s in final) == sorted(sid for _f, sid in keys if sid != doubtful)
    names = [f"s{i}" for i in range(1, 10)]
    assert main(["human", "sheets", str(audit / "final"), "--out", str(tmp_path / "sheets"), "--names", *names]) == 0
    assert len(list((tmp_path / "sheets" / "sheets").glob("*.html"))) == 9
