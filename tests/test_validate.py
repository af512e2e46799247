"""`hvcu data validate`: exit status, one line per problem naming file, id and field, and counts."""

from __future__ import annotations

from pathlib import Path

from conftest import item

from hvcu_tasks.cli import main


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["data", "validate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_smoke_sample_is_valid_and_counted(capsys) -> None:
    code, out, _ = _run(capsys, "smoke")
    assert code == 0
    assert "15 sample(s)" in out
    assert "implication: 5 (metaphor 1, symbolism 1, contrast 1, exaggeration 1, dislocation 1)" in out
    assert out.rstrip().endswith("OK")


def test_a_valid_local_copy_passes(write_dataset, capsys) -> None:
    root = write_dataset(
        {"implication": [item("metaphor_001")], "aesthetic": [item("font_001")], "affective": [item("joy_001")]}
    )
    code, out, _ = _run(capsys, str(root))
    assert code == 0
    assert "aesthetic: 1 (font 1)" in out


def test_every_problem_gets_its_own_line(write_dataset, capsys) -> None:
    dup = item("metaphor_001")
    bad = item("symbolism_002", "ABE")
    root = write_dataset(
        {
            "implication": [item("metaphor_001"), dup, bad],
            "aesthetic": [item("color_001")],
            "affective": [item("joy_001")],
        }
    )
    (root / "Image" / "Aesthetic-Appreciation" / "color_001.png").write_bytes(b"not an image")
    code, out, err = _run(capsys, str(root))
    lines = [line for line in out.splitlines() if ": id=" in line]
    assert code == 1
    assert "INVALID: 3 problem(s)" in err
    assert len(lines) == 3
    impl = str(Path(root) / "Implication-Understanding.json")
    assert f"{impl}: id=symbolism_002: qa_levels[level=3].correct_answer_key: answer 'E'" in out
    assert f"{impl}: id=metaphor_001: id: duplicate id (2 items)" in out
    assert any("id=color_001: image: cannot decode" in line for line in lines)


def test_missing_images_fail_validation(write_dataset, capsys) -> None:
    root = write_dataset({"implication": [item("metaphor_001")]}, images=False)
    code, out, _ = _run(capsys, str(root / "Implication-Understanding.json"))
    assert code == 1
    assert "id=metaphor_001: image: no file" in out
