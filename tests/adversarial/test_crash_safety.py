"""Crash safety of the benchmark writers: `audit export/decide` and `build-bench` (issue 11).

An image that does not decode is refused by the audit and by `build-bench --base` exactly as `hvcu data validate`
refuses it. A failure (a full disk, an exception, a kill) while `audit decide` writes final/ or while
`build-bench` writes the benchmark leaves the previous output whole and the round open; a rerun completes the job.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from PIL import Image

from hvcu_tasks.cli import main
from hvcu_tasks.dev.smoke import SMOKE_DIR

AFFECTIVE = "Affective-Reasoning"
STEMS = {AFFECTIVE, "Implication-Understanding", "Aesthetic-Appreciation"}
VERDICT_HEADER = ["annotator", "round", "family", "id", "l1_supported", "l2_supported", "l3_supported", "coherent"]
VERDICT_HEADER += ["comment"]
THREE = ["--annotators", "3", "--min-annotators", "3"]  # three annotators, each item judged by all three


def run(*argv: str | Path, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


def truncate_png(path: Path) -> None:
    """Replace an image by a real noisy PNG cut in half: its header opens, its pixels do not decode."""
    Image.frombytes("RGB", (64, 64), os.urandom(64 * 64 * 3)).save(path, format="PNG")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def fail_copy_at(monkeypatch, at_call: int, at_crash=None) -> dict[str, int]:
    """Make the `at_call`-th shutil.copyfile write half the file and fail with a full disk (a crash mid-copy).

    `at_crash()`, if given, runs at that moment: what it sees on disk is what a kill -9 there would leave.
    """
    calls = {"n": 0}
    real = shutil.copyfile

    def copyfile(src, dst, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == at_call:
            Path(dst).write_bytes(Path(src).read_bytes()[:10])
            if at_crash is not None:
                at_crash()
            raise OSError(28, "No space left on device", str(dst))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", copyfile)
    return calls


def validates(folder: Path, capsys) -> bool:
    code, _out, _err = run("data", "validate", folder, capsys=capsys)
    return code == 0


# ---------------------------------------------------------------- images that do not decode (item 6)


@pytest.fixture
def broken_bench(tmp_path: Path) -> Path:
    bench = tmp_path / "bench"
    shutil.copytree(SMOKE_DIR, bench)
    truncate_png(bench / "Image" / AFFECTIVE / "joy_001.png")
    return bench


def test_data_validate_refuses_the_truncated_base_image(broken_bench: Path, capsys) -> None:
    code, out, err = run("data", "validate", broken_bench, capsys=capsys)
    assert code != 0 and "id=joy_001" in out + err


def test_audit_export_refuses_a_benchmark_image_that_does_not_decode(broken_bench: Path, tmp_path: Path, capsys):
    out = tmp_path / "audit"
    code, _out, err = run("audit", "export", broken_bench, "--out", out, *THREE, capsys=capsys)
    (line,) = error_lines(err)
    assert code != 0
    assert "id=joy_001" in line and "image" in line and "joy_001.png" in line
    assert not out.exists()


def test_build_bench_base_with_an_image_that_does_not_decode_is_refused(broken_bench: Path, tmp_path: Path, capsys):
    manifest = write_manifest(tmp_path, ["fear"])
    out = tmp_path / "out"
    with FakeOpenAI(fake_mllm) as server:
        code, _out, err = run(*build_args(server, manifest, out), "--base", broken_bench, capsys=capsys)
    (line,) = error_lines(err)
    assert code != 0 and server.requests == []
    assert "id=joy_001" in line and "image" in line and "joy_001.png" in line
    assert not out.exists()


# ---------------------------------------------------------------- audit decide / finalize (item 8)


def write_all_yes(path: Path, annotator: str, audit: Path, n: int) -> Path:
    items = json.loads((audit / f"round-{n}" / "candidates.json").read_text())["items"]
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(VERDICT_HEADER)
        for e in items:
            writer.writerow([annotator, n, e["family"], e["id"], "yes", "yes", "yes", "yes", ""])
    return path


@pytest.fixture
def audit_ready(tmp_path: Path, capsys) -> Path:
    """An audit of the smoke benchmark whose one round holds three annotators' verdicts: decide writes final/."""
    audit = tmp_path / "audit"
    code, _out, err = run("audit", "export", SMOKE_DIR, "--out", audit, *THREE, capsys=capsys)
    assert code == 0, err
    files = [write_all_yes(tmp_path / f"a{i}.csv", f"a{i}", audit, 1) for i in (1, 2, 3)]
    code, _out, err = run("audit", "import", audit, *files, capsys=capsys)
    assert code == 0, err
    return audit


def round_status(audit: Path, n: int = 1) -> str:
    return json.loads((audit / f"round-{n}" / "round.json").read_text())["status"]


def leftovers(audit: Path) -> list[str]:
    return sorted(p.name for p in audit.iterdir() if p.name.startswith("final") and p.name != "final")


def test_a_crash_while_writing_final_keeps_the_round_open_and_decide_reruns(audit_ready: Path, monkeypatch, capsys):
    seen = []
    fail_copy_at(monkeypatch, 5, lambda: seen.append(round_status(audit_ready)))
    code, _out, err = run("audit", "decide", audit_ready, capsys=capsys)
    assert seen == ["open"]  # a kill -9 mid-copy leaves the round open, so that decide can be rerun
    assert code != 0 and len(error_lines(err)) == 1
    assert round_status(audit_ready) == "open"
    assert not (audit_ready / "final").exists() and leftovers(audit_ready) == []
    monkeypatch.undo()
    code, out, err = run("audit", "decide", audit_ready, capsys=capsys)
    assert code == 0, err
    assert round_status(audit_ready) == "closed"
    assert validates(audit_ready / "final", capsys) and leftovers(audit_ready) == []
    assert len(list((audit_ready / "final").rglob("*.png"))) == 15


def test_a_crash_while_rebuilding_final_leaves_the_previous_final_whole(audit_ready: Path, monkeypatch, capsys):
    assert run("audit", "decide", audit_ready, capsys=capsys)[0] == 0
    before = files_under(audit_ready / "final")
    # A kill after final/ was written but before the round was marked closed: the round is still open.
    (audit_ready / "round-1" / "round.json").write_text(json.dumps({"round": 1, "status": "open"}))
    fail_copy_at(monkeypatch, 7)
    code, _out, _err = run("audit", "decide", audit_ready, capsys=capsys)
    assert code != 0
    assert files_under(audit_ready / "final") == before and leftovers(audit_ready) == []
    assert round_status(audit_ready) == "open"
    monkeypatch.undo()
    assert run("audit", "decide", audit_ready, capsys=capsys)[0] == 0
    assert files_under(audit_ready / "final") == before and round_status(audit_ready) == "closed"


def test_leftovers_of_a_killed_decide_are_cleared_by_the_rerun(audit_ready: Path, capsys) -> None:
    # A kill -9 between the two renames of the swap: the new final/ half-built, the old one moved aside.
    (audit_ready / "final.tmp-99999" / "Image").mkdir(parents=True)
    (audit_ready / "final.tmp-99999" / f"{AFFECTIVE}.json").write_text("[")
    (audit_ready / "final.old-99999").mkdir()
    assert run("audit", "decide", audit_ready, capsys=capsys)[0] == 0
    assert leftovers(audit_ready) == [] and validates(audit_ready / "final", capsys)


def test_decide_rebuilds_a_missing_final_when_every_round_is_closed(audit_ready: Path, capsys) -> None:
    # The state an older version left after a kill: the round marked closed, final/ gone.
    assert run("audit", "decide", audit_ready, capsys=capsys)[0] == 0
    before = files_under(audit_ready / "final")
    shutil.rmtree(audit_ready / "final")
    code, out, _err = run("audit", "status", audit_ready, capsys=capsys)
    assert code == 0 and "decide" in out.splitlines()[-1] and "finished" not in out
    code, out, err = run("audit", "decide", audit_ready, capsys=capsys)
    assert code == 0, err
    assert files_under(audit_ready / "final") == before


@pytest.fixture
def audit_revisit(tmp_path: Path, capsys) -> Path:
    """An audit (two rounds at most) whose round 1 is ready to decide, with joy_001 flagged and sent to a revisit."""
    audit = tmp_path / "audit"
    assert run("audit", "export", SMOKE_DIR, "--out", audit, *THREE, "--rounds", "2", capsys=capsys)[0] == 0
    files = [write_all_yes(tmp_path / f"a{i}.csv", f"a{i}", audit, 1) for i in (1, 2, 3)]
    rows = files[0].read_text().splitlines()
    files[0].write_text(
        "\n".join(r.replace("yes,yes,yes,yes", "no,yes,yes,yes") if ",joy_001," in r else r for r in rows)
    )
    assert run("audit", "import", audit, *files, capsys=capsys)[0] == 0
    assert run("audit", "stats", audit, capsys=capsys)[0] == 0
    (audit / "round-1" / "decisions.csv").write_text("family,id,decision,note\naffective,joy_001,revisit,\n")
    return audit


def test_a_crash_while_opening_the_next_round_keeps_the_round_open(audit_revisit: Path, monkeypatch, capsys) -> None:
    seen = []
    real = Path.write_bytes

    def write_bytes(self: Path, data, *args, **kwargs):
        if self.name.startswith(".a2.html"):  # the second form of round 2
            seen.append((round_status(audit_revisit), (audit_revisit / "round-2").exists()))
            raise OSError(28, "No space left on device", str(self))
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    code, _out, err = run("audit", "decide", audit_revisit, capsys=capsys)
    assert code != 0 and len(error_lines(err)) == 1
    assert seen == [("open", False)]  # a kill -9 there leaves round 1 open and no half round 2
    assert round_status(audit_revisit) == "open" and sorted(p.name for p in audit_revisit.glob("round-*")) == [
        "round-1"
    ]
    monkeypatch.undo()
    assert run("audit", "decide", audit_revisit, capsys=capsys)[0] == 0
    assert round_status(audit_revisit, 1) == "closed" and round_status(audit_revisit, 2) == "open"


def test_decide_opens_a_missing_next_round_when_every_round_is_closed(audit_revisit: Path, capsys) -> None:
    assert run("audit", "decide", audit_revisit, capsys=capsys)[0] == 0
    forms = files_under(audit_revisit / "round-2")
    # The state an older version left after a kill: round 1 marked closed, round 2 never written.
    shutil.rmtree(audit_revisit / "round-2")
    code, _out, err = run("audit", "decide", audit_revisit, capsys=capsys)
    assert code == 0, err
    assert files_under(audit_revisit / "round-2") == forms and round_status(audit_revisit, 2) == "open"


def test_a_next_round_left_by_a_killed_decide_is_written_again(audit_revisit: Path, capsys) -> None:
    assert run("audit", "decide", audit_revisit, capsys=capsys)[0] == 0
    forms = files_under(audit_revisit / "round-2")
    # A kill after round 2 was opened but before round 1 was marked closed, plus a half-built round 2.
    (audit_revisit / "round-1" / "round.json").write_text(json.dumps({"round": 1, "status": "open"}))
    (audit_revisit / "round-2" / "forms" / "a1.html").write_text("stale")
    (audit_revisit / "round-2.tmp-99999").mkdir()
    assert run("audit", "decide", audit_revisit, capsys=capsys)[0] == 0
    assert files_under(audit_revisit / "round-2") == forms and round_status(audit_revisit, 1) == "closed"
    assert sorted(p.name for p in audit_revisit.glob("round-*")) == ["round-1", "round-2"]


def test_decide_on_a_finished_audit_with_its_final_still_refuses(audit_ready: Path, capsys) -> None:
    assert run("audit", "decide", audit_ready, capsys=capsys)[0] == 0
    code, _out, err = run("audit", "decide", audit_ready, capsys=capsys)
    assert code != 0 and "every round is closed" in err


# ---------------------------------------------------------------- build-bench output (item 9)


def fake_mllm(request: dict) -> str:
    """A generator that always writes a distinct, well-formed level, and a checker that passes it."""
    text = request["messages"][-1]["content"][0]["text"]
    if text.startswith("You check the top level"):
        return '{"single_answer": true, "reason": "one clear answer"}'
    if text.startswith("You check one step"):
        return '{"dependency": true, "progression": true, "single_answer": true, "reason": "fine"}'
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    level = int(re.search(r"Write the LEVEL (\d)", text).group(1))
    reply = {"question": f"Level {level} question {digest}?", "answer": f"right {digest}"}
    return json.dumps(reply | {"distractors": [f"wrong {i} {digest}" for i in "xyz"]})


def write_manifest(folder: Path, aspects: list[str], name: str = "manifest.csv") -> Path:
    """Write one affective row per aspect, plus one row of each other family (`hvcu data validate` wants all
    three), each with its own image; return the manifest path."""
    (folder / "imgs").mkdir(parents=True, exist_ok=True)
    lines = ["image,family,aspect,id"]
    rows = [("affective", a) for a in aspects] + [("implication", "metaphor"), ("aesthetic", "color")]
    for family, aspect in rows:
        Image.new("RGB", (16, 16), (len(aspect) * 20, ord(aspect[0]), 150)).save(folder / "imgs" / f"{aspect}.png")
        lines.append(f"imgs/{aspect}.png,{family},{aspect},{aspect}_new")
    (folder / name).write_text("\n".join(lines) + "\n")
    return folder / name


def build_args(server: FakeOpenAI, manifest: Path, out: Path) -> list[str]:
    args = ["build-bench", "--manifest", str(manifest), "--out", str(out), "--model", "fake"]
    return [*args, "--base-url", server.base_url, "--api-key", "x", "--quiet"]


def hidden(out: Path) -> list[str]:
    """Temporary files and folders in OUT: hidden names, and image folders other than the families'."""
    temporary = [p for p in out.rglob(".*")] + [p for p in (out / "Image").iterdir() if p.name not in STEMS]
    return sorted(str(p.relative_to(out)) for p in temporary)


def test_a_crash_mid_copy_leaves_the_previous_benchmark_valid_and_a_rerun_completes(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    with FakeOpenAI(fake_mllm) as server:
        assert run(*build_args(server, write_manifest(tmp_path, ["joy", "fear"]), out), capsys=capsys)[0] == 0
    before = files_under(out / "Image") | {AFFECTIVE: (out / f"{AFFECTIVE}.json").read_bytes()}
    more = write_manifest(tmp_path, ["joy", "fear", "anger"], "more.csv")
    seen = []
    fail_copy_at(monkeypatch, 2, lambda: seen.append(validates(out, capsys)))
    with FakeOpenAI(fake_mllm) as server:
        code, _out, err = run(*build_args(server, more, out), capsys=capsys)
    assert code != 0 and "Traceback" not in err
    assert seen == [True]  # what a kill -9 mid-copy would leave still validates
    assert files_under(out / "Image") | {AFFECTIVE: (out / f"{AFFECTIVE}.json").read_bytes()} == before
    assert validates(out, capsys) and hidden(out) == []
    monkeypatch.undo()
    with FakeOpenAI(fake_mllm) as server:
        code, _out, err = run(*build_args(server, more, out), capsys=capsys)
    assert code == 0, err
    assert server.requests == []  # every item was built (and kept) by the run that crashed
    assert validates(out, capsys) and hidden(out) == []
    images = sorted(p.name for p in (out / "Image" / AFFECTIVE).iterdir())
    assert images == ["anger_new.png", "fear_new.png", "joy_new.png"]


def test_leftovers_of_a_killed_build_are_removed_by_the_next_run(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path, ["joy"])
    with FakeOpenAI(fake_mllm) as server:
        assert run(*build_args(server, manifest, out), capsys=capsys)[0] == 0
    (out / "Image" / f"{AFFECTIVE}.tmp-99999").mkdir()
    (out / "Image" / f"{AFFECTIVE}.tmp-99999" / "joy_new.png").write_bytes(b"\x89PNG half")
    (out / "Image" / f"{AFFECTIVE}.old-99999").mkdir()
    (out / f".{AFFECTIVE}.json.99999.tmp").write_text("[")
    with FakeOpenAI(fake_mllm) as server:
        assert run(*build_args(server, manifest, out), capsys=capsys)[0] == 0
    assert hidden(out) == [] and validates(out, capsys)
