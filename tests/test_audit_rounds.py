"""Audit rounds end to end: export, five annotators' verdicts, stats, decisions, three rounds, final benchmark."""

from __future__ import annotations

import argparse
import csv
import json
import re
from pathlib import Path

import pytest

from generation.audit.cli import add_parser
from generation.audit.config import parse_annotators
from generation.audit.rounds import audit_status, compute_stats, decide, import_verdicts, start_audit
from generation.audit.verdicts import VERDICT_COLUMNS, VerdictError
from hvcu_tasks.data.loaders import load_source
from hvcu_tasks.data.validate import validate
from hvcu_tasks.dev.smoke import SMOKE_DIR

ANNOTATORS = ["a1", "a2", "a3", "a4", "a5"]


def hvcu(*argv: str) -> int:
    """Run `hvcu audit ...` through a parser that registers only this package's subcommand."""
    parser = argparse.ArgumentParser(prog="hvcu")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["audit", *argv])
    return args.func(args)


def candidates(audit: Path, n: int) -> list[tuple[str, str]]:
    data = json.loads((audit / f"round-{n}" / "candidates.json").read_text())
    return [(e["family"], e["id"]) for e in data["items"]]


def write_verdicts(
    path: Path,
    annotator: str,
    round_no: int,
    keys: list[tuple[str, str]],
    answers: dict[str, str] | None = None,
    comments: dict[str, str] | None = None,
) -> Path:
    """Write one annotator's verdict CSV: every item 'yyyy' (L1, L2, L3, chain) unless `answers[id]` says otherwise."""
    answers, comments = answers or {}, comments or {}
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(VERDICT_COLUMNS))
        writer.writeheader()
        for family, sid in keys:
            yn = answers.get(sid, "yyyy")
            votes = {q: "yes" if c == "y" else "no" for q, c in zip(VERDICT_COLUMNS[4:8], yn, strict=True)}
            writer.writerow(
                {"annotator": annotator, "round": round_no, "family": family, "id": sid, **votes}
                | {"comment": comments.get(sid, "")}
            )
    return path


def round_of_verdicts(audit: Path, tmp: Path, n: int, per_item: dict[str, str], comments=None) -> list[Path]:
    """Write the five annotators' files for round n; per_item maps an id to 5 patterns joined by spaces."""
    keys = candidates(audit, n)
    files = []
    for i, name in enumerate(ANNOTATORS):
        answers = {sid: patterns.split()[i] for sid, patterns in per_item.items()}
        files.append(write_verdicts(tmp / f"{name}-r{n}.csv", name, n, keys, answers, (comments or {}).get(name)))
    return files


def write_decisions(path: Path, rows: list[tuple[str, str, str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["family", "id", "decision", "note"])
        writer.writerows(rows)
    return path


def test_three_rounds_end_in_a_final_benchmark_that_validates(tmp_path: Path, capsys) -> None:
    audit = tmp_path / "audit"
    assert hvcu("export", str(SMOKE_DIR), "--out", str(audit), "--annotators", "5", "--seed", "3") == 0
    assert len(candidates(audit, 1)) == 15

    # Round 1. Patterns are L1 L2 L3 chain per annotator a1..a5.
    r1 = {
        "symbolism_001": "yyyy yyyy yyyy ynyy ynyy",  # L2 split 3/2: no clear majority -> revisit after a fix
        "font_001": "yyny yyny yyny yyny yyny",  # L3 unanimously not supported -> discard
        "joy_001": "yyyy yyyy yyyn yyyy yyyn",  # chain 3/5: flagged -> kept after discussion
        "contrast_001": "yyyy nyyy yyyy yyyy yyyy",  # L1 4/5: clear majority, accepted without discussion
        "fear_001": "yyyy nyyy nyyy yyyy yyyy",  # L1 3/5 -> revisit
    }
    comments = {"a4": {"symbolism_001": "B and C both fit"}}
    assert hvcu("import", str(audit), *map(str, round_of_verdicts(audit, tmp_path, 1, r1, comments))) == 0
    assert hvcu("stats", str(audit)) == 0
    stats = json.loads((audit / "round-1" / "stats.json").read_text())
    assert stats["n_annotators"] == 5 and stats["n_items"] == 15
    assert [(f["id"], f["reasons"]) for f in stats["flagged"]] == [
        ("symbolism_001", ["l2_supported: no clear majority (3/5 yes, below 80%)"]),
        ("font_001", ["l3_supported: majority says no (5/5 no)"]),
        ("joy_001", ["coherent: no clear majority (3/5 yes, below 80%)"]),
        ("fear_001", ["l1_supported: no clear majority (3/5 yes, below 80%)"]),
    ]
    # L3: 14 items 5/5 yes, one 0/5: every item unanimous, both categories used -> kappa = alpha = 1.
    assert stats["agreement"]["l3_supported"]["fleiss_kappa"] == 1.0
    assert stats["agreement"]["l3_supported"]["krippendorff_alpha"] == 1.0
    # L2: 14 items 5/5 yes, symbolism 3/2. Shares 73/75, 2/75 -> P-bar-e = (73^2 + 2^2)/75^2 = 5333/5625;
    # P-bar = (14 + 8/20)/15 = 0.96 = 5400/5625 -> kappa = 67/292.
    # alpha: n = 75, o_cc = 14 * 5 + (6 + 2)/4 = 72 -> 1 - 74 * 3 / (75^2 - 73^2 - 2^2) = 1 - 222/292 = 70/292.
    assert stats["agreement"]["l2_supported"]["fleiss_kappa"] == pytest.approx(67 / 292, abs=1e-6)
    assert stats["agreement"]["l2_supported"]["krippendorff_alpha"] == pytest.approx(70 / 292, abs=1e-6)
    with (audit / "round-1" / "flags.csv").open() as f:
        flags = {r["id"]: r for r in csv.DictReader(f)}
    assert flags["symbolism_001"]["comments"] == "a4: B and C both fit"
    assert flags["symbolism_001"]["l2_supported"] == "3/5 yes"
    with (audit / "round-1" / "decisions.csv").open() as f:  # the template the team fills in
        assert [r["id"] for r in csv.DictReader(f)] == ["symbolism_001", "font_001", "joy_001", "fear_001"]

    # The team fixes symbolism_001 in the audit's source copy and sends it, with fear_001, to round 2.
    source = audit / "source" / "Implication-Understanding.json"
    records = json.loads(source.read_text())
    fixed = next(r for r in records if r["id"] == "symbolism_001")
    fixed["qa_levels"][1]["question"] = "What does the dove most plausibly stand for here?"
    source.write_text(json.dumps(records, indent=2))
    decisions = [
        ("implication", "symbolism_001", "revisit", "L2 reworded"),
        ("aesthetic", "font_001", "discard", "L3 answer not supported"),
        ("affective", "joy_001", "keep", "chain fine after discussion"),
        ("affective", "fear_001", "revisit", ""),
    ]
    assert hvcu("decide", str(audit), str(write_decisions(tmp_path / "d1.csv", decisions))) == 0
    assert candidates(audit, 2) == [("implication", "symbolism_001"), ("affective", "fear_001")]
    assert "What does the dove most plausibly stand for here?" in (audit / "round-2/forms/a1.html").read_text()
    outcome1 = json.loads((audit / "round-1" / "outcome.json").read_text())
    assert len(outcome1["accepted"]) == 12 and outcome1["discarded"][0]["reason"] == "L3 answer not supported"

    # Round 2: the fix convinces everyone; fear_001 stays split.
    r2 = {"fear_001": "yyyy nyyy nyyy yyyy yyyy"}
    assert hvcu("import", str(audit), *map(str, round_of_verdicts(audit, tmp_path, 2, r2))) == 0
    compute_stats(audit)
    write_decisions(audit / "round-2" / "decisions.csv", [("affective", "fear_001", "revisit", "ask again")])
    assert hvcu("decide", str(audit)) == 0
    assert candidates(audit, 3) == [("affective", "fear_001")]

    # Round 3, the last: still split; a last revisit means it stays ambiguous and is discarded.
    assert hvcu("import", str(audit), *map(str, round_of_verdicts(audit, tmp_path, 3, r2))) == 0
    compute_stats(audit)
    write_decisions(audit / "round-3" / "decisions.csv", [("affective", "fear_001", "revisit", "")])
    assert hvcu("decide", str(audit)) == 0
    assert not (audit / "round-4").exists()

    final = audit / "final"
    report = validate(str(final))
    assert report.ok, report.problems
    assert report.counts == {
        "implication": {"metaphor": 1, "symbolism": 1, "contrast": 1, "exaggeration": 1, "dislocation": 1},
        "aesthetic": {"color": 1, "composition": 1, "graphics": 1},
        "affective": {"joy": 1, "affection": 1, "wonder": 1, "anger": 1, "sadness": 1},
    }
    symbolism = next(s for s in load_source(str(final), "implication").raise_for_problems() if s.id == "symbolism_001")
    assert symbolism.levels[1].question == "What does the dove most plausibly stand for here?"
    summary = json.loads((audit / "summary.json").read_text())
    assert summary["accepted"] == 13
    assert [(d["id"], d["round"]) for d in summary["discarded"]] == [("font_001", 1), ("fear_001", 3)]
    assert summary["discarded"][1]["reason"] == "still unresolved after the last round (3 of 3)"
    assert [r["flagged"] for r in summary["rounds"]] == [4, 1, 1]
    for n in (1, 2, 3):  # every round keeps its files
        for name in ("round.json", "candidates.json", "stats.json", "flags.csv", "decisions.csv", "outcome.json"):
            assert (audit / f"round-{n}" / name).is_file(), (n, name)
        assert sorted(p.name for p in (audit / f"round-{n}" / "verdicts").iterdir()) == [f"{a}.csv" for a in ANNOTATORS]
    assert audit_status(audit)["next"].startswith("finished")
    capsys.readouterr()
    assert hvcu("status", str(audit)) == 0
    assert "round 3 (closed): 1 item(s)" in capsys.readouterr().out


def test_unanimous_round_finishes_at_once(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ANNOTATORS)
    import_verdicts(audit, round_of_verdicts(audit, tmp_path, 1, {}))
    outcome = decide(audit)  # nothing flagged: no decisions needed
    assert len(outcome["accepted"]) == 15 and outcome["next"] == str(audit / "final")
    assert validate(str(audit / "final")).ok
    for family in ("Implication-Understanding", "Aesthetic-Appreciation", "Affective-Reasoning"):
        assert (audit / "final" / f"{family}.json").read_bytes() != b""
        assert json.loads((audit / "final" / f"{family}.json").read_text()) == json.loads(
            (SMOKE_DIR / f"{family}.json").read_text()
        )


def test_export_is_byte_stable(tmp_path: Path) -> None:
    first, second = tmp_path / "one" / "audit", tmp_path / "two" / "audit"
    start_audit(SMOKE_DIR, first, ANNOTATORS, seed=11)
    start_audit(SMOKE_DIR, second, ANNOTATORS, seed=11)
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)


def test_stats_refuse_fewer_than_five_annotators(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ANNOTATORS)
    import_verdicts(audit, round_of_verdicts(audit, tmp_path, 1, {})[:4])
    with pytest.raises(ValueError, match=r"4 annotator\(s\).*need at least 5"):
        compute_stats(audit)
    assert "missing: a5" in audit_status(audit)["next"]


def test_minimum_annotators_is_configurable(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ["a1", "a2", "a3"], min_annotators=3)
    import_verdicts(audit, round_of_verdicts(audit, tmp_path, 1, {})[:3])
    stats, _ = compute_stats(audit)
    assert stats["n_annotators"] == 3


def test_export_refuses_fewer_annotators_than_the_minimum(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 5"):
        start_audit(SMOKE_DIR, tmp_path / "audit", ["a1", "a2", "a3"])


def test_export_refuses_a_used_folder_and_a_broken_benchmark(tmp_path: Path, write_dataset) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="not empty"):
        start_audit(SMOKE_DIR, used, ANNOTATORS)
    broken = write_dataset({"implication": [{"id": "metaphor_001", "qa_levels": []}]})
    with pytest.raises(ValueError, match=r"id=metaphor_001: qa_levels"):
        start_audit(broken, tmp_path / "audit", ANNOTATORS)
    with pytest.raises(FileNotFoundError, match="no benchmark file"):
        start_audit(tmp_path / "used", tmp_path / "audit2", ANNOTATORS)


def test_import_into_a_closed_round_is_refused(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ANNOTATORS)
    files = round_of_verdicts(audit, tmp_path, 1, {"joy_001": "yyyy yyyy nyyy nyyy yyyy"})
    import_verdicts(audit, files)
    decide(audit, write_decisions(tmp_path / "d.csv", [("affective", "joy_001", "revisit", "")]))
    with pytest.raises(ValueError, match="round 1 is closed.*round 2 is open"):
        import_verdicts(audit, files[:1], round_no=1, replace=True)


def test_importing_an_annotator_twice_needs_replace(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ANNOTATORS)
    files = round_of_verdicts(audit, tmp_path, 1, {})
    import_verdicts(audit, files[:1])
    with pytest.raises(VerdictError, match="already imported"):
        import_verdicts(audit, files[:1])
    changed = round_of_verdicts(audit, tmp_path, 1, {"joy_001": "nnnn nnnn nnnn nnnn nnnn"})[:1]
    assert import_verdicts(audit, changed, replace=True) == ["a1"]
    assert "joy_001,no,no,no,no" in (audit / "round-1" / "verdicts" / "a1.csv").read_text()


def test_decide_needs_a_decision_for_every_flagged_item(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ANNOTATORS)
    r1 = {"joy_001": "yyyy yyyy nyyy nyyy yyyy", "wonder_001": "nnnn nnnn nnnn yyyy yyyy"}
    import_verdicts(audit, round_of_verdicts(audit, tmp_path, 1, r1))
    partial = write_decisions(tmp_path / "d.csv", [("affective", "joy_001", "keep", "")])
    with pytest.raises(VerdictError, match=r"d\.csv: id=affective/wonder_001: decision: flagged .* but not decided"):
        decide(audit, partial)
    assert json.loads((audit / "round-1" / "round.json").read_text())["status"] == "open"


def test_a_broken_fix_keeps_the_round_open(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ANNOTATORS)
    import_verdicts(audit, round_of_verdicts(audit, tmp_path, 1, {"joy_001": "yyyy yyyy nyyy nyyy yyyy"}))
    source = audit / "source" / "Affective-Reasoning.json"
    records = json.loads(source.read_text())
    records[0]["qa_levels"][0]["correct_answer_key"] = "E"  # a bad edit while fixing
    source.write_text(json.dumps(records))
    decisions = write_decisions(tmp_path / "d.csv", [("affective", "joy_001", "revisit", "")])
    with pytest.raises(ValueError, match="answer 'E' is not one of the options"):
        decide(audit, decisions)
    assert json.loads((audit / "round-1" / "round.json").read_text())["status"] == "open"
    assert not (audit / "round-1" / "outcome.json").exists() and not (audit / "round-2").exists()


def test_editing_an_accepted_item_blocks_the_final_benchmark(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ANNOTATORS)
    import_verdicts(audit, round_of_verdicts(audit, tmp_path, 1, {"joy_001": "yyyy yyyy nyyy nyyy yyyy"}))
    decide(audit, write_decisions(tmp_path / "d.csv", [("affective", "joy_001", "revisit", "")]))
    source = audit / "source" / "Implication-Understanding.json"
    records = json.loads(source.read_text())
    records[0]["qa_levels"][2]["question"] = "Changed after it was accepted?"
    source.write_text(json.dumps(records))
    import_verdicts(audit, round_of_verdicts(audit, tmp_path, 2, {}))
    with pytest.raises(
        ValueError, match="id=implication/metaphor_001: changed or removed after it was accepted in round 1"
    ):
        decide(audit)
    assert not (audit / "final").exists()


def test_annotators_are_a_count_or_names() -> None:
    assert parse_annotators(["5"]) == ("a1", "a2", "a3", "a4", "a5")
    assert parse_annotators(["ann,bo", "cy"]) == ("ann", "bo", "cy")


def test_annotator_names_must_be_usable_as_file_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'a b'"):
        start_audit(SMOKE_DIR, tmp_path / "audit", ["a1", "a2", "a3", "a4", "a b"])
    with pytest.raises(ValueError, match="repeat"):
        start_audit(SMOKE_DIR, tmp_path / "audit", ["a1", "a2", "a3", "a4", "a1"])


def test_unknown_keys_in_audit_json_are_errors(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ANNOTATORS)
    settings = json.loads((audit / "audit.json").read_text())
    (audit / "audit.json").write_text(json.dumps({**settings, "treshold": 0.9}))
    with pytest.raises(ValueError, match=r"audit\.json: unknown key\(s\) \['treshold'\]"):
        audit_status(audit)


def test_cli_errors_are_value_errors_naming_the_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not an audit folder"):
        hvcu("status", str(tmp_path))
    audit = tmp_path / "audit"
    hvcu("export", str(SMOKE_DIR), "--out", str(audit), "--annotators", "5")
    with pytest.raises(ValueError, match="there is no round 4"):
        hvcu("stats", str(audit), "--round", "4")


def edit_question(audit: Path, family_file: str, sid: str, level: int, question: str) -> None:
    """Change one level's question of an item in the audit's source/ copy, as a fixing team member would."""
    source = audit / "source" / f"{family_file}.json"
    records = json.loads(source.read_text())
    next(r for r in records if r["id"] == sid)["qa_levels"][level]["question"] = question
    source.write_text(json.dumps(records, indent=2))


def round_two_with_joy(audit: Path, tmp: Path) -> None:
    """Run round 1 so that only affective/joy_001 goes on to round 2."""
    start_audit(SMOKE_DIR, audit, ANNOTATORS)
    import_verdicts(audit, round_of_verdicts(audit, tmp, 1, {"joy_001": "yyyy yyyy nyyy nyyy yyyy"}))
    decide(audit, write_decisions(tmp / "d.csv", [("affective", "joy_001", "revisit", "")]))


def test_stats_print_the_na_note_only_when_a_statistic_is_undefined(tmp_path: Path, capsys) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ANNOTATORS)
    split = {  # every question has a 'no' somewhere, so every statistic is defined
        "joy_001": "nyyy yyyy yyyy yyyy yyyy",
        "fear_001": "ynyy yyyy yyyy yyyy yyyy",
        "wonder_001": "yyny yyyy yyyy yyyy yyyy",
        "anger_001": "yyyn yyyy yyyy yyyy yyyy",
    }
    import_verdicts(audit, round_of_verdicts(audit, tmp_path, 1, split))
    capsys.readouterr()
    assert hvcu("stats", str(audit)) == 0
    out = capsys.readouterr().out
    assert "n/a" not in out and "undefined" not in out


def test_stats_name_the_questions_whose_statistics_are_undefined(tmp_path: Path, capsys) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ANNOTATORS)
    import_verdicts(audit, round_of_verdicts(audit, tmp_path, 1, {"joy_001": "nyyy yyyy yyyy yyyy yyyy"}))
    capsys.readouterr()
    assert hvcu("stats", str(audit)) == 0
    out = capsys.readouterr().out
    assert "n/a (l2_supported, l3_supported, coherent): everyone gave the same answer" in out
    assert out.count("n/a") == 1 + 3 * 2  # the note, and kappa and alpha of the three unanimous questions


def test_import_refuses_verdicts_on_forms_made_before_an_edit(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    round_two_with_joy(audit, tmp_path)
    edit_question(audit, "Affective-Reasoning", "joy_001", 0, "Edited after round 2 opened?")
    with pytest.raises(ValueError, match="affective/joy_001 changed or removed since round 2's forms") as info:
        import_verdicts(audit, round_of_verdicts(audit, tmp_path, 2, {}))
    assert f"hvcu audit forms {audit} --round 2" in str(info.value)
    assert not list((audit / "round-2" / "verdicts").iterdir())


def test_forms_rewrites_the_open_rounds_forms_after_an_edit(tmp_path: Path, capsys) -> None:
    audit = tmp_path / "audit"
    round_two_with_joy(audit, tmp_path)
    old_key = re.search(r'data-form-key="([^"]+)"', (audit / "round-2" / "forms" / "a1.html").read_text())[1]
    edit_question(audit, "Affective-Reasoning", "joy_001", 0, "Edited after round 2 opened?")
    assert hvcu("forms", str(audit)) == 0
    assert "5 form(s) rewritten" in capsys.readouterr().out
    page = (audit / "round-2" / "forms" / "a1.html").read_text()
    assert "Edited after round 2 opened?" in page
    assert re.search(r'data-form-key="([^"]+)"', page)[1] != old_key  # the browser does not restore old answers
    assert import_verdicts(audit, round_of_verdicts(audit, tmp_path, 2, {})) == ANNOTATORS
    decide(audit)
    assert (audit / "final").is_dir()


def test_forms_are_not_rewritten_once_verdicts_are_in(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    round_two_with_joy(audit, tmp_path)
    import_verdicts(audit, round_of_verdicts(audit, tmp_path, 2, {})[:2])
    edit_question(audit, "Affective-Reasoning", "joy_001", 0, "Edited mid-round?")
    with pytest.raises(ValueError, match=r"round 2 already holds verdicts from a1, a2"):
        hvcu("forms", str(audit))
    with pytest.raises(ValueError, match=r"delete the verdicts already imported \(a1, a2"):
        import_verdicts(audit, round_of_verdicts(audit, tmp_path, 2, {})[2:])


def test_stats_refuse_to_accept_an_item_edited_after_its_review(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ANNOTATORS)
    import_verdicts(audit, round_of_verdicts(audit, tmp_path, 1, {"joy_001": "yyyy yyyy nyyy nyyy yyyy"}))
    edit_question(audit, "Affective-Reasoning", "fear_001", 2, "Quietly changed after everyone said yes?")
    with pytest.raises(ValueError, match="affective/fear_001 changed .* accepted the old version"):
        compute_stats(audit)
    assert not (audit / "round-1" / "stats.json").exists()


def test_a_flagged_item_may_be_fixed_for_its_revisit_but_not_kept(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    start_audit(SMOKE_DIR, audit, ANNOTATORS)
    import_verdicts(audit, round_of_verdicts(audit, tmp_path, 1, {"joy_001": "yyyy yyyy nyyy nyyy yyyy"}))
    edit_question(audit, "Affective-Reasoning", "joy_001", 1, "Reworded for round 2?")
    assert compute_stats(audit)[0]["n_flagged"] == 1  # a fix of a flagged item is the intended edit
    keep = write_decisions(tmp_path / "keep.csv", [("affective", "joy_001", "keep", "")])
    with pytest.raises(VerdictError, match="id=affective/joy_001: decision: keep, but the item changed"):
        decide(audit, keep)
    decide(audit, write_decisions(tmp_path / "revisit.csv", [("affective", "joy_001", "revisit", "reworded")]))
    assert "Reworded for round 2?" in (audit / "round-2" / "forms" / "a1.html").read_text()
