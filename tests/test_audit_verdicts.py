"""Verdict and decision files are checked on import; every refusal names the file, the row and the field."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from test_audit_rounds import ANNOTATORS, candidates, round_of_verdicts, write_decisions

from generation.audit.forms import SHEET_COLUMNS
from generation.audit.rounds import import_verdicts, start_audit
from generation.audit.verdicts import VerdictError, read_decisions, read_verdicts
from hvcu_tasks.dev.smoke import SMOKE_DIR


@pytest.fixture
def audit(tmp_path: Path) -> Path:
    start_audit(SMOKE_DIR, tmp_path / "audit", ANNOTATORS)
    return tmp_path / "audit"


def edit(path: Path, row: int, **changes: str) -> Path:
    """Change cells of one spreadsheet row (the header is row 1) and rewrite the file."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    rows[row - 2].update(changes)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def refusal(audit: Path, path: Path) -> str:
    with pytest.raises(VerdictError) as err:
        import_verdicts(audit, [path])
    assert not (audit / "round-1" / "verdicts" / "a1.csv").exists()  # nothing imported
    return str(err.value)


def a1_file(audit: Path, tmp_path: Path) -> Path:
    return round_of_verdicts(audit, tmp_path, 1, {})[0]


def test_a_complete_file_imports(audit: Path, tmp_path: Path) -> None:
    assert import_verdicts(audit, [a1_file(audit, tmp_path)]) == ["a1"]


def test_bad_value_names_file_row_and_field(audit: Path, tmp_path: Path) -> None:
    path = edit(a1_file(audit, tmp_path), 3, l2_supported="maybe")
    sid = candidates(audit, 1)[1][1]
    assert refusal(audit, path) == f"{path}: row 3 (id=implication/{sid}): l2_supported: 'maybe' is not yes or no"


def test_missing_level_answer_is_refused(audit: Path, tmp_path: Path) -> None:
    path = edit(a1_file(audit, tmp_path), 5, l3_supported="")
    assert f"{path}: row 5 (id=" in refusal(audit, path)
    assert "l3_supported: missing yes or no" in refusal(audit, path)


def test_missing_level_column_is_refused(audit: Path, tmp_path: Path) -> None:
    path = a1_file(audit, tmp_path)
    text = path.read_text().replace("l2_supported,", "")
    path.write_text(text)
    assert f"{path}: row 1: header: missing column(s) ['l2_supported']" in refusal(audit, path)


def test_unknown_id_is_refused(audit: Path, tmp_path: Path) -> None:
    path = edit(a1_file(audit, tmp_path), 2, id="metaphor_999")
    message = refusal(audit, path)
    assert f"{path}: row 2 (id=implication/metaphor_999): id: not a candidate of round 1" in message
    assert "no verdict for 1 candidate(s) of round 1: implication/metaphor_001" in message


def test_missing_item_is_refused(audit: Path, tmp_path: Path) -> None:
    path = a1_file(audit, tmp_path)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))
    last = "/".join(candidates(audit, 1)[-1])
    assert refusal(audit, path) == f"{path}: id: no verdict for 1 candidate(s) of round 1: {last}"


def test_repeated_item_is_refused(audit: Path, tmp_path: Path) -> None:
    path = a1_file(audit, tmp_path)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines, lines[1]]))
    assert f"{path}: row 17 (id=implication/metaphor_001): id: repeats row 2" in refusal(audit, path)


def test_verdicts_for_another_round_are_refused(audit: Path, tmp_path: Path) -> None:
    path = edit(a1_file(audit, tmp_path), 4, round="2")
    assert ": row 4 (id=" in refusal(audit, path) and "round: '2', but this is round 1" in refusal(audit, path)


def test_unknown_annotator_and_mixed_annotators_are_refused(audit: Path, tmp_path: Path) -> None:
    path = edit(a1_file(audit, tmp_path), 2, annotator="zed")
    message = refusal(audit, path)
    assert "row 2 (id=implication/metaphor_001): annotator: 'zed' is not one of this audit's" in message
    assert "one file per annotator, found ['a1', 'zed']" in message


def test_unknown_column_is_refused(audit: Path, tmp_path: Path) -> None:
    path = a1_file(audit, tmp_path)
    path.write_text(path.read_text().replace("comment", "remarks", 1))
    assert "header: unknown column(s) ['remarks']" in refusal(audit, path)


def test_every_problem_is_listed_at_once(audit: Path, tmp_path: Path) -> None:
    path = edit(edit(a1_file(audit, tmp_path), 2, coherent="perhaps"), 9, l1_supported="")
    message = refusal(audit, path)
    assert "row 2 (" in message and "row 9 (" in message


def test_filled_spreadsheet_sheet_imports_with_its_context_columns(audit: Path) -> None:
    sheet = audit / "round-1" / "forms" / "a2.csv"
    with sheet.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row.update(l1_supported="Yes", l2_supported="y", l3_supported="YES", coherent="No", comment="")
    filled = audit.parent / "a2-filled.csv"
    with filled.open("w", newline="", encoding="utf-8-sig") as f:  # as some spreadsheets save it: BOM, ';'
        writer = csv.DictWriter(f, fieldnames=list(SHEET_COLUMNS), delimiter=";")
        writer.writeheader()
        writer.writerows(rows)
    assert import_verdicts(audit, [filled]) == ["a2"]
    verdicts = read_verdicts(audit / "round-1" / "verdicts" / "a2.csv", 1, candidates(audit, 1), ANNOTATORS)
    assert all(v.l1_supported and not v.coherent for v in verdicts)


def test_decisions_are_checked(tmp_path: Path) -> None:
    keys = [("implication", "metaphor_001"), ("aesthetic", "font_001")]
    path = write_decisions(
        tmp_path / "d.csv",
        [("implication", "metaphor_001", "drop", ""), ("aesthetic", "nope_001", "keep", "")],
    )
    with pytest.raises(VerdictError) as err:
        read_decisions(path, keys)
    assert str(err.value).splitlines() == [
        f"{path}: row 2 (id=implication/metaphor_001): decision: 'drop' is not one of ['keep', 'discard', 'revisit']",
        f"{path}: row 3 (id=aesthetic/nope_001): id: not a candidate of this round",
    ]
    ok = write_decisions(
        tmp_path / "ok.csv",
        [("aesthetic", "font_001", "Discard", "typo in C"), ("implication", "metaphor_001", "", "")],
    )
    assert [(d.id, d.decision, d.note) for d in read_decisions(ok, keys)] == [("font_001", "discard", "typo in C")]


def test_missing_file_is_a_file_not_found_error(audit: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere.csv: no such file"):
        import_verdicts(audit, [tmp_path / "nowhere.csv"])
