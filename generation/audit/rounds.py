"""The audit folder: a snapshot of the candidate benchmark, one folder per review round, and the final benchmark.

Layout of AUDIT (every round is kept):
  audit.json                  settings: annotators, seed, rounds, min_annotators, threshold, max_side, families
  source/                     copy of the candidate benchmark (authors' layout); fix an item here, then revisit it
  round-N/round.json          {"round": N, "status": "open" | "closed"}
  round-N/candidates.json     the items under review, each with the hash of the version reviewed
  round-N/forms/<a>.html|csv  annotator a's self-contained form and spreadsheet (items in a seeded order);
                              `forms` rewrites them (and the digests) after an edit, while no verdict is in
  round-N/verdicts/<a>.csv    annotator a's verdicts, checked and normalised on import
  round-N/stats.json          agreement per question (Fleiss' kappa, Krippendorff's alpha), majorities, flags
  round-N/flags.csv           the flagged items with reasons, vote counts and comments, for discussion
  round-N/decisions.csv       the team's decisions on flagged items: keep | discard | revisit, with a note
  round-N/outcome.json        accepted, discarded (with reason) and revisited items once the round is decided
  final/                      accepted items in the authors' layout (images copied), written after the last round
  summary.json                per-round counts and every discarded item with its round and reason

Edits to source/ and the open round: the forms show each item as it was when the round opened (its digest
is in candidates.json). `import` refuses verdicts while any of the round's items differs from that version
(the forms are stale); `stats` and `decide` refuse when an item that would be accepted differs (the
annotators accepted another version). Fixing a flagged item for its revisit, after the verdicts are in, is
the intended edit and is allowed.

Interruptions: `decide` writes the next round (or final/) in a temporary sibling folder, renames it into
place, and marks the round closed last; a failure or a kill leaves the round open (final/ as it was), so
rerunning `decide` finishes the step, clearing any `round-N.tmp-*` / `final.tmp-*` / `final.old-*` leftovers.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from generation.audit.bench import (
    bench_families,
    building_folder,
    clear_leftovers,
    image_path,
    read_bench,
    replace_bench,
    snapshot_bench,
    stem,
)
from generation.audit.config import AUDIT_FILE, AuditConfig
from generation.audit.forms import SHEET_COLUMNS, FormItem, embed_image, render_form, sheet_rows, shuffled
from generation.audit.review import DEFAULT_MIN_ANNOTATORS, DEFAULT_THRESHOLD, ItemReview, round_statistics
from generation.audit.verdicts import (
    DECISION_COLUMNS,
    DECISION_CONTEXT_COLUMNS,
    QUESTIONS,
    VERDICT_COLUMNS,
    ItemKey,
    Verdict,
    VerdictError,
    read_decisions,
    read_verdicts,
    verdict_row,
    write_csv,
    write_text,
)
from hvcu_tasks.data import jsonio
from hvcu_tasks.data.files import inside

SOURCE_DIR = "source"
FINAL_DIR = "final"
SUMMARY_FILE = "summary.json"


def _write_json(path: Path, data: Any) -> None:
    """Write JSON with stable formatting."""
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _read_json(path: Path) -> Any:
    """Read a JSON file the audit wrote, with a clear error when it is missing or broken."""
    try:
        return jsonio.read_json(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: missing from the audit folder") from None
    except jsonio.JsonReadError as exc:
        raise ValueError(f"{path}: {exc.reason}") from exc


def _round_dir(root: Path, n: int) -> Path:
    """The folder of round n."""
    return root / f"round-{n}"


def _rounds(root: Path) -> list[int]:
    """The round numbers present, ascending."""
    found = [p.name.removeprefix("round-") for p in root.glob("round-*") if p.is_dir()]
    return sorted(int(n) for n in found if n.isdigit())


def _status(root: Path, n: int) -> str:
    """Return 'open' or 'closed' for round n."""
    return _read_json(_round_dir(root, n) / "round.json")["status"]


def _candidates(root: Path, n: int) -> list[dict[str, str]]:
    """The candidate entries (family, id, digest) of round n, in review order."""
    return _read_json(_round_dir(root, n) / "candidates.json")["items"]


def _keys(entries: Sequence[Mapping[str, str]]) -> list[ItemKey]:
    """Item keys of candidate entries."""
    return [(e["family"], e["id"]) for e in entries]


def start_audit(
    bench: Path,
    out: Path,
    annotators: Sequence[str],
    seed: int = 0,
    rounds: int = 3,
    min_annotators: int = DEFAULT_MIN_ANNOTATORS,
    threshold: float = DEFAULT_THRESHOLD,
    max_side: int = 0,
) -> Path:
    """Snapshot a candidate benchmark into a new audit folder and open round 1 with every item; return its folder."""
    bench, out = Path(bench), Path(out)
    families = bench_families(bench)
    config = AuditConfig(tuple(annotators), families, seed, rounds, min_annotators, threshold, max_side)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: is a file; choose a new audit folder")
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out}: already exists and is not empty; choose a new audit folder")
    items = read_bench(bench, families)
    if not items:
        raise ValueError(f"{bench}: the benchmark holds no items")
    created = not out.exists()
    try:
        snapshot_bench(bench, out / SOURCE_DIR, families, list(items.values()))
        write_text(out / AUDIT_FILE, config.to_json() + "\n")
        return open_round(out, 1, list(items))
    except BaseException:  # a full disk, Ctrl-C: leave no half audit behind, so that export can simply be rerun
        if created:
            shutil.rmtree(out, ignore_errors=True)
        else:
            for child in out.iterdir():
                if child.is_dir():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        raise


def open_round(root: Path, n: int, keys: Sequence[ItemKey], folder: Path | None = None) -> Path:
    """Write round n: its candidates (as they are now in source/) and every annotator's form and sheet.

    Into `folder` when given (a temporary folder that becomes round n by rename), else round n's own folder.
    """
    config = AuditConfig.from_file(root / AUDIT_FILE)
    source = read_bench(root / SOURCE_DIR, config.families)
    gone = [f"{f}/{i}" for f, i in keys if (f, i) not in source]
    if gone:
        raise ValueError(f"{root / SOURCE_DIR}: item(s) {gone} to review in round {n} are no longer in the source")
    folder = _round_dir(root, n) if folder is None else folder
    items = []
    for key in keys:
        it = source[key]
        path = image_path(it.sample)
        image = f"{SOURCE_DIR}/Image/{stem(key[0])}/{path.name}"
        items.append(FormItem(it.sample, embed_image(path, config.max_side), image))
    entries = [{"family": f, "id": i, "digest": source[(f, i)].digest} for f, i in keys]
    version = hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()[:12]
    for name in config.annotators:
        order = shuffled(items, config.seed, n, name)
        page = render_form(order, name, n, root.resolve().name, version)
        write_text(inside(folder / "forms", f"{name}.html"), page)
        write_csv(inside(folder / "forms", f"{name}.csv"), SHEET_COLUMNS, sheet_rows(order, name, n))
    # After every form: if writing one fails, candidates.json still names the old versions, so import keeps
    # refusing verdicts until `forms` is rerun to the end.
    _write_json(folder / "candidates.json", {"round": n, "items": entries})
    (folder / "verdicts").mkdir(parents=True, exist_ok=True)
    _write_json(folder / "round.json", {"round": n, "status": "open"})
    return folder


def _pick_round(root: Path, n: int | None, want_open: bool) -> int:
    """Return the round to act on: n, or the open one; refuse a closed round when an open one is needed."""
    rounds = _rounds(root)
    if not rounds:
        raise FileNotFoundError(f"{root}: no round folders; start the audit with export")
    open_rounds = [r for r in rounds if _status(root, r) == "open"]
    if n is None:
        if open_rounds:
            return open_rounds[0]
        if want_open:
            raise ValueError(f"{root}: every round is closed (the audit is finished); nothing to change")
        return rounds[-1]
    if n not in rounds:
        raise ValueError(f"{root}: there is no round {n}; rounds so far: {rounds}")
    if want_open and n not in open_rounds:
        now = f"round {open_rounds[0]} is open" if open_rounds else "the audit is finished"
        raise ValueError(f"{_round_dir(root, n)}: round {n} is closed (decided); {now}")
    return n


def changed_items(root: Path, n: int) -> list[ItemKey]:
    """Return round n's items whose content in source/ differs from the version its forms show (or that are gone)."""
    config = AuditConfig.from_file(root / AUDIT_FILE)
    source = read_bench(root / SOURCE_DIR, config.families)
    return [
        (e["family"], e["id"])
        for e in _candidates(root, n)
        if (e["family"], e["id"]) not in source or source[(e["family"], e["id"])].digest != e["digest"]
    ]


def _imported(root: Path, n: int) -> list[str]:
    """The annotators whose verdicts round n holds."""
    return sorted(p.stem for p in (_round_dir(root, n) / "verdicts").glob("*.csv"))


def _stale_error(root: Path, n: int, changed: Sequence[ItemKey], what: str) -> ValueError:
    """Explain that round n's forms show another version of `changed` than source/ now holds, and the way out."""
    names = ", ".join(f"{f}/{i}" for f, i in changed)
    forms = f"hvcu audit forms {root} --round {n}"
    head = (
        f"{root / SOURCE_DIR}: item(s) {names} changed or removed since round {n}'s forms were written "
        f"({_round_dir(root, n) / 'candidates.json'}); {what}. "
    )
    done = _imported(root, n)
    if not done:
        return ValueError(head + f"Re-export the round's forms with `{forms}` and send them out again.")
    return ValueError(
        head + f"Restore the item(s) in source/ to the reviewed version, or, to review the new version, delete the "
        f"verdicts already imported ({', '.join(done)} in {_round_dir(root, n) / 'verdicts'}), re-export the forms "
        f"with `{forms}` and collect every verdict again. (To fix a flagged item for its revisit, edit it after "
        "every verdict is imported.)"
    )


def refresh_forms(root: Path, round_no: int | None = None) -> Path:
    """Rewrite an open round's candidates and forms from source/ as it is now; refused once verdicts are in."""
    root = Path(root)
    n = _pick_round(root, round_no, want_open=True)
    folder = _round_dir(root, n)
    done = _imported(root, n)
    if done:
        raise ValueError(
            f"{folder / 'verdicts'}: round {n} already holds verdicts from {', '.join(done)} on the forms as they "
            "are; restore the edited item(s) in source/, or delete those verdict files to have everyone review "
            "the new version, then run forms again"
        )
    for name in ("stats.json", "flags.csv", "decisions.csv"):  # left from verdicts deleted by hand
        (folder / name).unlink(missing_ok=True)
    return open_round(root, n, _keys(_candidates(root, n)))


def import_verdicts(root: Path, files: Sequence[Path], round_no: int | None = None, replace: bool = False) -> list[str]:
    """Check verdict files against an open round and store them as verdicts/<annotator>.csv; return the names."""
    root = Path(root)
    config = AuditConfig.from_file(root / AUDIT_FILE)
    n = _pick_round(root, round_no, want_open=True)
    changed = changed_items(root, n)
    if changed:
        raise _stale_error(root, n, changed, "the forms show the old version, so verdicts on them judge it")
    keys = _keys(_candidates(root, n))
    parsed: dict[str, list[Verdict]] = {}
    problems: list[str] = []
    for path in files:
        try:
            verdicts = read_verdicts(Path(path), n, keys, config.annotators)
        except VerdictError as exc:
            problems.extend(exc.problems)
            continue
        name = verdicts[0].annotator
        if name in parsed:
            problems.append(f"{path}: annotator: {name} appears in two of the files given")
        elif inside(_round_dir(root, n) / "verdicts", f"{name}.csv").exists() and not replace:
            problems.append(f"{path}: annotator: {name}'s verdicts for round {n} are already imported (use --replace)")
        parsed[name] = verdicts
    if problems:
        raise VerdictError(problems)
    for name, verdicts in parsed.items():
        target = inside(_round_dir(root, n) / "verdicts", f"{name}.csv")
        write_csv(target, VERDICT_COLUMNS, (verdict_row(v, n) for v in verdicts))
    return list(parsed)


def round_verdicts(root: Path, n: int) -> dict[str, list[Verdict]]:
    """Read every imported verdict file of round n, keyed by annotator."""
    config = AuditConfig.from_file(root / AUDIT_FILE)
    keys = _keys(_candidates(root, n))
    found = {}
    for path in sorted((_round_dir(root, n) / "verdicts").glob("*.csv")):
        verdicts = read_verdicts(path, n, keys, config.annotators)
        found[verdicts[0].annotator] = verdicts
    return found


def _flag_rows(reviews: Sequence[ItemReview]) -> list[dict[str, str]]:
    """Rows of flags.csv: each flagged item with its reasons, yes counts and comments."""
    return [
        {
            "family": r.family,
            "id": r.id,
            "reasons": "; ".join(r.reasons),
            **{q: f"{r.yes[q]}/{r.raters} yes" for q in QUESTIONS},
            "comments": " | ".join(f"{a}: {c}" for a, c in r.comments),
        }
        for r in reviews
        if r.flagged
    ]


def compute_stats(root: Path, round_no: int | None = None) -> tuple[dict, list[ItemReview]]:
    """Compute round statistics and write stats.json, flags.csv and (if absent) a decisions.csv to fill in."""
    root = Path(root)
    config = AuditConfig.from_file(root / AUDIT_FILE)
    n = _pick_round(root, round_no, want_open=False)
    folder = _round_dir(root, n)
    keys = _keys(_candidates(root, n))
    stats, reviews = round_statistics(n, keys, round_verdicts(root, n), config.threshold, config.min_annotators)
    if _status(root, n) == "open":
        changed = set(changed_items(root, n))
        accepted = [r.key for r in reviews if not r.flagged and r.key in changed]
        if accepted:
            raise _stale_error(root, n, accepted, "the annotators accepted the old version, not this one")
    _write_json(folder / "stats.json", stats)
    write_csv(folder / "flags.csv", ("family", "id", "reasons", *QUESTIONS, "comments"), _flag_rows(reviews))
    if _status(root, n) == "open" and not (folder / "decisions.csv").exists():
        template = [
            {"family": r.family, "id": r.id, "decision": "", "note": "", "reasons": "; ".join(r.reasons)}
            for r in reviews
            if r.flagged
        ]
        write_csv(folder / "decisions.csv", (*DECISION_COLUMNS, *DECISION_CONTEXT_COLUMNS), template)
    return stats, reviews


def decide(root: Path, decisions_file: Path | None = None, round_no: int | None = None) -> dict:
    """Apply the team's decisions to an open round, close it, then open the next round or write the final benchmark."""
    root = Path(root)
    config = AuditConfig.from_file(root / AUDIT_FILE)
    if round_no is None and (resumed := _resume(root)) is not None:
        return resumed
    n = _pick_round(root, round_no, want_open=True)
    folder = _round_dir(root, n)
    entries = _candidates(root, n)
    keys = _keys(entries)
    _stats, reviews = compute_stats(root, n)
    path = Path(decisions_file) if decisions_file is not None else folder / "decisions.csv"
    decisions = {d.key: d for d in read_decisions(path, keys)}
    undecided = [r for r in reviews if r.flagged and r.key not in decisions]
    if undecided:
        raise VerdictError(
            [
                f"{path}: id={r.family}/{r.id}: decision: flagged ({'; '.join(r.reasons)}) but not decided "
                "(write keep, discard or revisit)"
                for r in undecided
            ]
        )
    changed = set(changed_items(root, n))
    kept_changed = [key for key, d in decisions.items() if d.decision == "keep" and key in changed]
    if kept_changed:
        raise VerdictError(
            [
                f"{path}: id={f}/{i}: decision: keep, but the item changed in {root / SOURCE_DIR} since round {n} "
                "reviewed it; restore it, or revisit it so the new version is reviewed"
                for f, i in kept_changed
            ]
        )
    digests = {(e["family"], e["id"]): e["digest"] for e in entries}
    last = n >= config.rounds
    outcome: dict[str, Any] = {"round": n, "accepted": [], "discarded": [], "revisit": []}
    for r in reviews:
        d = decisions.get(r.key)
        entry = {"family": r.family, "id": r.id}
        if d is None or d.decision == "keep":
            how = "agreement" if d is None else "team decision"
            outcome["accepted"].append({**entry, "how": how, "digest": digests[r.key], "note": d.note if d else ""})
        elif d.decision == "discard":
            outcome["discarded"].append({**entry, "reason": d.note or "discarded by the team"})
        elif last:
            reason = f"still unresolved after the last round ({n} of {config.rounds})"
            outcome["discarded"].append({**entry, "reason": reason + (f": {d.note}" if d.note else "")})
        else:
            outcome["revisit"].append({**entry, "note": d.note})
    rows = [
        {"family": d.family, "id": d.id, "decision": d.decision, "note": d.note}
        for k in keys
        if (d := decisions.get(k)) is not None
    ]
    write_csv(folder / "decisions.csv", DECISION_COLUMNS, rows)
    _write_json(folder / "outcome.json", outcome)
    # The next round or final/ first, 'closed' last: a failure or a kill in between leaves this round open,
    # so rerunning decide does the whole step again.
    try:
        _follow_up(root, n, outcome)
    except BaseException:  # e.g. a broken edit in source/ or a full disk: the user fixes it and decides again
        if outcome["revisit"]:
            shutil.rmtree(_round_dir(root, n + 1), ignore_errors=True)
        (folder / "outcome.json").unlink(missing_ok=True)
        raise
    _write_json(folder / "round.json", {"round": n, "status": "closed"})
    return outcome


def _follow_up(root: Path, n: int, outcome: dict[str, Any]) -> None:
    """Open round n+1 for the revisited items of round n, or write final/; add 'next' (and warnings) to outcome."""
    if outcome["revisit"]:
        _open_next_round(root, n + 1, _keys(outcome["revisit"]))
        outcome["next"] = str(_round_dir(root, n + 1))
        return
    final = finalize(root, closing=n)
    outcome["next"] = str(final)
    empty = _read_json(root / SUMMARY_FILE)["families_without_items"]
    outcome["warnings"] = [
        f"{final}: no item of {family} was accepted, so the final benchmark has no {stem(family)}.json"
        for family in empty
    ]


def _open_next_round(root: Path, n: int, keys: Sequence[ItemKey]) -> None:
    """Open round n in a temporary folder, then rename it into place: round n is complete or absent."""
    target = _round_dir(root, n)
    clear_leftovers(target)
    new = building_folder(target)
    try:
        open_round(root, n, keys, new)
        if target.exists():  # written by a decide that was interrupted before it closed round n-1
            shutil.rmtree(target)
        os.rename(new, target)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise


def _unfinished(root: Path) -> tuple[int, dict[str, Any]] | None:
    """The last round and its outcome when every round is closed yet its follow-up is missing, else None.

    Only a decide killed by an older version leaves this (now a round is marked closed last): the next round,
    or final/ and summary.json, were never written.
    """
    rounds = _rounds(root)
    if not rounds or any(_status(root, r) == "open" for r in rounds):
        return None
    n = rounds[-1]
    outcome = _read_json(_round_dir(root, n) / "outcome.json")
    if outcome["revisit"] and _round_dir(root, n + 1).exists():
        return None
    if not outcome["revisit"] and (root / FINAL_DIR).is_dir() and (root / SUMMARY_FILE).is_file():
        return None
    return n, outcome


def _resume(root: Path) -> dict[str, Any] | None:
    """Write the follow-up an interrupted decide left missing and return that round's outcome; None if none is."""
    found = _unfinished(root)
    if found is None:
        return None
    n, outcome = found
    _follow_up(root, n, outcome)
    return outcome


def finalize(root: Path, closing: int | None = None) -> Path:
    """Write final/ (accepted items in the authors' layout, images copied) and summary.json; return final/.

    final/ is built beside the old one and swapped in by rename, so it is never half-written. `closing` is the
    round that decide closes once this succeeds (counted as closed here).
    """
    root = Path(root)
    config = AuditConfig.from_file(root / AUDIT_FILE)
    rounds = _rounds(root)
    still_open = [r for r in rounds if r != closing and _status(root, r) == "open"]
    if still_open:
        raise ValueError(f"{root}: round {still_open[0]} is still open; decide it first")
    source = read_bench(root / SOURCE_DIR, config.families)
    accepted: dict[ItemKey, tuple[int, str]] = {}
    discarded: list[dict] = []
    per_round = []
    for n in rounds:
        outcome = _read_json(_round_dir(root, n) / "outcome.json")
        stats = _read_json(_round_dir(root, n) / "stats.json")
        for a in outcome["accepted"]:
            accepted[(a["family"], a["id"])] = (n, a["digest"])
        discarded += [{**d, "round": n} for d in outcome["discarded"]]
        per_round.append(
            {
                "round": n,
                "candidates": stats["n_items"],
                "annotators": stats["n_annotators"],
                "flagged": stats["n_flagged"],
                **{k: len(outcome[k]) for k in ("accepted", "discarded", "revisit")},
            }
        )
    edited = [
        f"{root / SOURCE_DIR}: id={f}/{i}: changed or removed after it was accepted in round {n}; restore it"
        for (f, i), (n, digest) in accepted.items()
        if (f, i) not in source or source[(f, i)].digest != digest
    ]
    if edited:
        raise ValueError("\n".join(edited))
    final = root / FINAL_DIR
    # A family that lost every item gets no file: an empty one would not load (a dataset file must hold items).
    kept = tuple(f for f in config.families if any(family == f for family, _id in accepted))
    replace_bench(final, kept, [it for key, it in source.items() if key in accepted])
    summary = {"rounds": per_round, "accepted": len(accepted), "discarded": discarded, "final": FINAL_DIR}
    summary["families_without_items"] = [f for f in config.families if f not in kept]
    _write_json(root / SUMMARY_FILE, summary)
    return final


def audit_status(root: Path) -> dict:
    """Describe where an audit stands: each round's status and counts, and the next step."""
    root = Path(root)
    config = AuditConfig.from_file(root / AUDIT_FILE)
    rows = []
    for n in _rounds(root):
        folder = _round_dir(root, n)
        imported = _imported(root, n)
        row: dict[str, Any] = {
            "round": n,
            "status": _status(root, n),
            "candidates": len(_candidates(root, n)),
            "verdicts_from": imported,
        }
        if (folder / "stats.json").exists():
            row["flagged"] = _read_json(folder / "stats.json")["n_flagged"]
        if (folder / "outcome.json").exists():
            outcome = _read_json(folder / "outcome.json")
            row.update({k: len(outcome[k]) for k in ("accepted", "discarded", "revisit")})
        rows.append(row)
    open_rows = [r for r in rows if r["status"] == "open"]
    if not open_rows and _unfinished(root) is not None:
        step = f"the last decide was interrupted: run `hvcu audit decide {root}` again to finish it"
    elif not open_rows:
        step = f"finished: the benchmark is in {root / FINAL_DIR}"
    else:
        r = open_rows[0]
        missing = [a for a in config.annotators if a not in r["verdicts_from"]]
        if len(r["verdicts_from"]) < config.min_annotators:
            step = f"round {r['round']}: import verdicts (missing: {', '.join(missing)})"
        else:
            step = f"round {r['round']}: run stats, fill decisions.csv for the flagged items, then decide"
    return {"rounds": rows, "max_rounds": config.rounds, "annotators": list(config.annotators), "next": step}
