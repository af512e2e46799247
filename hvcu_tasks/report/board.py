"""The leaderboard's model: one entry per model (runs, the paper's rows, human, chance), ranked, with its intervals."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from hvcu_tasks.core.families import ASPECTS, FAMILIES
from hvcu_tasks.core.metrics import OFFICIAL_FULL_METRIC
from hvcu_tasks.report.reference import general_reference, reference_rows, rows_for
from hvcu_tasks.report.stats import score_interval
from hvcu_tasks.report.tables import CHANCE_FULL, CHANCE_NAME, DISAGREE_MARK, PARTIAL_MARK, SMOKE_MARK, disagreement
from hvcu_tasks.report.uncertainty import Contender, Uncertainty, Verdicts, assess
from hvcu_tasks.results.general import general_values
from hvcu_tasks.results.runs import BENCHMARK, SMOKE, ModelResult, ReportError, is_nan

FAILED_LIMIT = 0.01
"""The largest share of a run's base-setting requests that may have failed for it to be ranked."""
REQUESTS_PER_CHAIN = 3
BENCHMARK_SIZES = {family: sum(aspects.values()) for family, aspects in ASPECTS.items()}
"""Samples per family of the published benchmark (the paper's Table 5): the sizes of its binomial intervals."""
SOURCES = ("paper", "human", "chance", "run")
"""Where an entry comes from: a row of the paper's tables, the paper's human baseline, random guessing, a local run."""
RANKED_SOURCES = ("paper", "run")
"""The sources whose entries can be ranked (human and chance are references, not models)."""
REFERENCE_SOURCES = ("paper", "human", "chance")


@dataclass
class Entry:
    """One leaderboard row before ranking: what `leaderboard.json` stores per model."""

    model: str
    label: str
    source: str
    data: str
    rankable: bool
    score_base: float | None
    score_context: float | None
    score_base_hvcu: float | None
    score_context_hvcu: float | None
    acc_full: dict[str, float | None] = field(default_factory=dict)
    interval_base: list[float] | None = None
    notes: list[str] = field(default_factory=list)
    family_sizes: dict[str, int] | None = None
    """Samples per family of the base setting: the sizes of a binomial interval (None: the benchmark's)."""
    fingerprint: str = ""
    """The data fingerprint of the verdicts (its families' fingerprints), '' when the run did not record it."""
    verdicts: dict[str, dict[str, dict[str, bool]]] = field(default_factory=dict)
    """Per setting and family: sample id -> full chain right under the authors' parser (runs with sample logs)."""
    interval_context: list[float] | None = None
    interval_gain: list[float] | None = None
    interval_method: str | None = None
    rank_range: list[int] | None = None
    letters: str | None = None
    """The board's letter groups: two rows share a letter exactly when their difference is not significant."""
    failed_requests: dict[str, list[int]] = field(default_factory=dict)
    """Per setting of a run: [failed requests, requests] (requests: 3 per chain)."""
    unranked_because: str | None = None
    """Why a run that would rank has no rank (too many failed requests), in one line."""
    general: dict[str, float | None] = field(default_factory=dict)
    """The general benchmarks in percent, per column of the paper's Table 7 (results.general.TABLE_ORDER)."""
    general_ci: dict[str, list[float]] = field(default_factory=dict)
    """Per general benchmark's headline (results.general.HEADLINES): its 95% interval, from the run's counts."""
    general_partial: bool = False
    """Whether a general benchmark ran on a subset (--limit): its row is marked * in the per-model view."""

    def delta(self) -> float | None:
        """Return context minus base Score (official), None unless both are known."""
        if self.score_base is None or self.score_context is None:
            return None
        return self.score_context - self.score_base

    def marks(self) -> str:
        """Return the marks after the model name in the label (†, *, ‡), '' when the label is not model + marks."""
        return self.label.removeprefix(self.model) if self.label.startswith(self.model) else ""

    def partial(self) -> bool:
        """Whether the label marks the entry partial (*: a setting ran on a subset or lacks a family)."""
        return PARTIAL_MARK in self.marks()


def _known(value: float | None) -> float | None:
    """Return a number, None when missing or not available (n/a is null in the leaderboard)."""
    return None if value is None or is_nan(value) else float(value)


def run_entry(model: ModelResult) -> Entry:
    """Return the leaderboard entry of a local run (base-setting columns, authors' parser unless said)."""
    smoke = model.dataset == {SMOKE}
    partial = {s: s in model.settings and model.partial(s) for s in ("base", "context")}
    disagree = DISAGREE_MARK if disagreement(model, "base") else ""
    label = model.model + (SMOKE_MARK if smoke else "") + (PARTIAL_MARK if any(partial.values()) else "") + disagree
    base = model.settings.get("base", {})
    verdicts = {s: dict(fams) for s, fams in model.chains_official.items() if set(fams) == set(FAMILIES)}
    score_base = _known(model.official_score("base"))
    for setting, chains in verdicts.items():
        fams = model.settings.get(setting, {})
        recorded = {f: _known(fams[f].get(OFFICIAL_FULL_METRIC)) if f in fams else None for f in FAMILIES}
        problem = verdicts_problem(chains, per_family=recorded)
        if problem:
            files = ", ".join(sorted({str(r.file) for r in model.records})) or "its results files"
            raise ReportError(
                f"{model.model} ({setting}): the sample logs and the results file disagree: {problem} ({files}); "
                "keep each samples file beside the results file of its run"
            )
    notes = [f"{s}: {'; '.join(n)}" for s, n in model.notes.items() if n]
    failed = failed_requests(model)
    because = None
    base_failed = failed.get("base")
    if base_failed and base_failed[1] and base_failed[0] / base_failed[1] > FAILED_LIMIT:
        because = (
            f"{base_failed[0]:,} of {base_failed[1]:,} base requests failed ({base_failed[0] / base_failed[1]:.1%}, "
            f"above the {FAILED_LIMIT:.0%} limit): not ranked, its Score counts each failure as a wrong answer"
        )
    return Entry(
        model=model.model,
        label=label,
        source="run",
        data=model.data_label(),
        rankable=not smoke and not partial["base"] and score_base is not None and because is None,
        score_base=score_base,
        score_context=None if partial["context"] else _known(model.official_score("context")),
        score_base_hvcu=_known(model.score("base")),
        score_context_hvcu=None if partial["context"] else _known(model.score("context")),
        acc_full={f: _known(base[f].get(OFFICIAL_FULL_METRIC)) if f in base else None for f in FAMILIES},
        notes=notes,
        family_sizes=_run_sizes(model),
        fingerprint=model.data_fingerprint(),
        verdicts=verdicts,
        failed_requests=failed,
        unranked_because=because,
        general={k: _known(v) for k, v in general_values(model.general).items()} if model.general else {},
        general_ci={k: list(score_interval(c.right, c.sizes)) for k, c in model.general_counts.items()},
        general_partial=bool(model.notes.get("general")),
    )


def failed_requests(model: ModelResult) -> dict[str, list[int]]:
    """Return per setting [failed requests, requests] summed over the families that recorded both counts."""
    out = {}
    for setting, fams in model.settings.items():
        counted = [
            (f.get("n_failed_requests"), f.get("n_chains"))
            for f in fams.values()
            if isinstance(f.get("n_failed_requests"), (int, float)) and isinstance(f.get("n_chains"), (int, float))
        ]
        if counted:
            out[setting] = [int(sum(n for n, _ in counted)), REQUESTS_PER_CHAIN * int(sum(c for _, c in counted))]
    return out


def verdicts_problem(
    chains: dict[str, dict[str, bool]],
    score: float | None = None,
    per_family: dict[str, float | None] | None = None,
) -> str | None:
    """Return why chain verdicts cannot be the ones behind a Score (official) or the families' Acc_full (official)
    recorded beside them, None when they can (a value recorded as None is not checked)."""
    if not all(chains.values()):
        return None
    acc = {f: 100 * sum(v.values()) / len(v) for f, v in chains.items()}
    for family, value in (per_family or {}).items():
        if value is not None and family in acc and abs(acc[family] - value) > 0.01:
            return f"the {family} chains give an Acc_full (official) of {acc[family]:.2f}, the file records {value:.2f}"
    from_chains = sum(acc.values()) / len(acc)
    if score is not None and abs(from_chains - score) > 0.01:
        return f"the chains give a Score (official) of {from_chains:.2f}, the Score recorded is {score:.2f}"
    return None


def _run_sizes(model: ModelResult) -> dict[str, int] | None:
    """Return a run's chains per family in the base setting (its n_chains), None unless every family has one."""
    base = model.settings.get("base", {})
    sizes = {f: base[f].get("n_chains") for f in FAMILIES if f in base}
    if set(sizes) != set(FAMILIES) or not all(isinstance(n, (int, float)) and n > 0 for n in sizes.values()):
        return None
    return {f: int(n) for f, n in sizes.items()}  # type: ignore[arg-type]


def reference_entries() -> list[Entry]:
    """Return the paper's rows (base and context paired by model), the human baseline, and chance."""
    context = {r.model: r for r in rows_for("context")}
    human = {r.model for r in reference_rows() if r.human}
    entries = []
    for row in rows_for("base"):
        ctx = context.get(row.model)
        entries.append(
            Entry(
                model=row.model,
                label=row.model,
                source="human" if row.model in human else "paper",
                data="HVCU-Bench",
                rankable=row.model not in human,
                score_base=row.score,
                score_context=ctx.score if ctx else None,
                score_base_hvcu=None,
                score_context_hvcu=None,
                acc_full={f: row.families[f]["acc_full"] for f in FAMILIES},
                notes=[row.source] + ([ctx.source] if ctx else []),
                family_sizes=dict(BENCHMARK_SIZES),
            )
        )
    entries.append(chance_entry())
    return entries


def with_reference(published: list[Entry], reference: bool = True) -> list[Entry]:
    """Return a published board's entries for `--base`: without reference rows when `reference` is off; with the
    current paper, human and chance rows added when it has none (a board written with --no-reference)."""
    if not reference:
        return [e for e in published if e.source not in REFERENCE_SOURCES]
    if any(e.source in REFERENCE_SOURCES for e in published):
        return list(published)
    return reference_entries() + list(published)


def board_entries(models: list[ModelResult], reference: bool = True) -> list[Entry]:
    """Return the entries of a board: the paper's rows, human and chance (unless `reference` is off), then the runs."""
    runs = [run_entry(m) for m in models if m.settings or m.general]
    return (reference_entries() if reference else []) + runs


def per_model(entries: list[Entry], reference: bool = True) -> list[Entry]:
    """Return the per-model view's rows, best base Score (official) first: every run, and each of the paper's models
    with general benchmarks (Table 7), its HVCU Scores from the board or, for one not on it, the paper's."""
    paper = {r.model: r for r in general_reference()[1]} if reference else {}
    rows = [replace(e, general=paper.pop(e.model).values) if e.source == "paper" else e for e in entries if
            e.source == "run" or (e.source == "paper" and e.model in paper)]  # fmt: skip
    for r in paper.values():
        base, context = (r.hvcu or {}).get("base"), (r.hvcu or {}).get("context")
        rows.append(Entry(r.model, r.model, "paper", BENCHMARK, False, base, context, None, None, general=r.values))
    return [e for _rank, e in ranked(rows)]


def chance_entry() -> Entry:
    """Return the chance row: a uniform random guess among four options at every level."""
    return Entry(
        model=CHANCE_NAME,
        label=CHANCE_NAME,
        source="chance",
        data="HVCU-Bench",
        rankable=False,
        score_base=CHANCE_FULL,
        score_context=CHANCE_FULL,
        score_base_hvcu=CHANCE_FULL,
        score_context_hvcu=CHANCE_FULL,
        acc_full=dict.fromkeys(FAMILIES, CHANCE_FULL),
        notes=["25% per question (four options), 1/64 for a whole chain of three"],
    )


def ranked(entries: list[Entry]) -> list[tuple[int | None, Entry]]:
    """Return entries best first by base Score (official) with their rank (ties share one; unranked get None)."""
    source_order = {s: i for i, s in enumerate(SOURCES)}
    order = sorted(
        entries,
        key=lambda e: (
            e.score_base is None,
            -(e.score_base or 0.0),
            source_order.get(e.source, len(SOURCES)),
            e.label,
        ),
    )
    out: list[tuple[int | None, Entry]] = []
    count, last, last_rank = 0, None, 0
    for e in order:
        if not e.rankable or e.score_base is None:
            out.append((None, e))
            continue
        count += 1
        if e.score_base != last:
            last, last_rank = e.score_base, count
        out.append((last_rank, e))
    return out


@dataclass
class Board:
    """A leaderboard's entries with their intervals filled in, and the board's pairs and detectable differences."""

    entries: list[Entry]
    uncertainty: Uncertainty


def entry_key(entry: Entry) -> str:
    """Return an entry's key on the board: its source and model (unique on a board)."""
    return f"{entry.source}:{entry.model}"


def _contender(entry: Entry) -> Contender:
    """Return what the uncertainty can draw from for an entry (chance is exact: nothing)."""
    acc = {f: v for f, v in entry.acc_full.items() if v is not None}
    sizes = entry.family_sizes  # a binomial interval's sizes: the entry's own, else the benchmark's for its rows
    if sizes is None and entry.data == BENCHMARK and entry.source in ("paper", "human", "run"):
        sizes = dict(BENCHMARK_SIZES)
    sizes = sizes if entry.source != "chance" and set(acc) == set(FAMILIES) else None
    verdicts = {s: Verdicts(v, entry.fingerprint) for s, v in entry.verdicts.items()}
    return Contender(
        entry_key(entry),
        entry.rankable,
        verdicts.get("base"),
        verdicts.get("context"),
        acc or None,
        sizes,
    )


def make_board(entries: list[Entry]) -> Board:
    """Return the board of `entries` with every interval, comparison, rank range and letter computed from them."""
    order = [e for _rank, e in ranked(entries)]
    found = assess([_contender(e) for e in order], list(FAMILIES), BENCHMARK_SIZES)
    filled = []
    for e in entries:
        a = found.assessments[entry_key(e)]
        filled.append(
            replace(
                e,
                interval_base=None if a.score is None else list(a.score),
                interval_context=None if a.context is None else list(a.context),
                interval_gain=None if a.gain is None else list(a.gain),
                interval_method=a.method,
                rank_range=None if a.rank_range is None else list(a.rank_range),
                letters=a.letters,
            )
        )
    return Board(filled, found)


def merge(published: list[Entry], runs: list[Entry], where: Path) -> list[Entry]:
    """Add new runs to a published board; a model already on it as a run is refused (never overwritten silently)."""
    on_board = {e.model: i for i, e in enumerate(published) if e.source == "run"}
    for e in runs:
        if e.model in on_board:
            raise ReportError(
                f"{where}: entries[{on_board[e.model]}].model: {e.model!r} is on the published board and in the "
                "new runs; remove it from one (a published row is never replaced silently)"
            )
    return published + runs
