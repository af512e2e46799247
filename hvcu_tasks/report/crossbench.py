"""HVCU-Bench against the general benchmarks: does it rank the models as they do (Kendall's τ over the per-model
view), and for a tuned model against its base (`--compare`), the change on each benchmark with its interval."""

from __future__ import annotations

from collections.abc import Sequence

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.core.metrics import OFFICIAL_FULL_METRIC
from hvcu_tasks.report import stats
from hvcu_tasks.report.board import Entry
from hvcu_tasks.report.tables import Cell, Table, interval_text
from hvcu_tasks.results.general import HEADLINES, Counts, general_values
from hvcu_tasks.results.runs import ModelResult, is_nan

SCORE = "Score (official)"


def paired_rows(rows: Sequence[Entry], label: str) -> list[tuple[Entry, float, float]]:
    """Return the models with both a base Score (official) and the benchmark's headline: (row, Score, benchmark)."""
    return [(e, e.score_base, v) for e in rows if e.score_base is not None and (v := e.general.get(label)) is not None]


def cross_table(rows: list[Entry]) -> Table:
    """Return Kendall's τ between the base Score (official) and each general benchmark's headline, over the models
    with both (three at least), with its interval, p-value and the models whose rank moves most."""
    from scipy.stats import rankdata

    columns = ["Benchmark", "Models", "Kendall's τ", "95% CI", "p", "Rank moves most (HVCU-Bench → benchmark)"]
    table = Table("cross_benchmark", "Does HVCU-Bench rank the models as the general benchmarks do?", columns)
    for label in HEADLINES:
        both = paired_rows(rows, label)
        if len(both) < 3:
            continue
        hvcu, other = [s for _e, s, _v in both], [v for _e, _s, v in both]
        tau, p, interval = stats.kendall_tau(hvcu, other)
        ranks = list(zip(rankdata([-s for s in hvcu], "min"), rankdata([-v for v in other], "min"), strict=True))
        most = max(abs(a - b) for a, b in ranks)
        moves = [f"{e.label} ({int(a)} → {int(b)})" for (e, _s, _v), (a, b) in zip(both, ranks, strict=True)]
        moved = "; ".join(m for m, (a, b) in zip(moves, ranks, strict=True) if abs(a - b) == most) if most else "none"
        shown_p = None if is_nan(p) else stats.p_text(p)
        table.rows.append([label, len(both), tau, interval_text(interval), shown_p, moved])
    table.notes += [
        f"Kendall's τ-b between the base {SCORE} and each benchmark's headline over the models of the per-model view "
        "with both ([paper] rows included where the paper gives both); p: its two-sided test (scipy). 95% CI: "
        "atanh(τ) ± 1.96 · sqrt(0.437 / (n − 4)) turned back (Fieller, Hartley and Pearson), for five models or more.",
        "Rank moves most: the models whose rank (1 = best, ties share the best) differs most between HVCU-Bench and "
        "the benchmark. Rows marked † (smoke sample) or * (a subset) take part as they are: their numbers are not the "
        "benchmarks' own.",
    ]
    return table


def hvcu_counts(model: ModelResult, setting: str) -> Counts | None:
    """Return a setting's full chains right per family under the authors' parser (verdicts when logged), None if
    unknown."""
    chains = model.chains_official.get(setting, {})
    if set(chains) == set(FAMILIES):
        return Counts({f: sum(c.values()) for f, c in chains.items()}, {f: len(c) for f, c in chains.items()}, chains)
    fams = model.settings.get(setting, {})
    found = {f: (fams[f].get(OFFICIAL_FULL_METRIC), fams[f].get("n_chains")) for f in FAMILIES if f in fams}
    if len(found) < len(FAMILIES) or any(a is None or is_nan(a) or not n for a, n in found.values()):
        return None
    return Counts({f: round(a * n / 100) for f, (a, n) in found.items()}, {f: int(n) for f, (a, n) in found.items()})


def _change(a: Counts | None, b: Counts | None) -> tuple[stats.Difference, str] | None:
    """Return B − A with its interval: paired (Bonett–Price) on the units both logged, else unpaired (Agresti–Caffo)."""
    if a is None or b is None or set(a.sizes) != set(b.sizes):
        return None
    if a.verdicts and b.verdicts and all(set(a.verdicts[s]) & set(b.verdicts[s]) for s in a.sizes):
        common = sum(len(set(a.verdicts[s]) & set(b.verdicts[s])) for s in a.sizes)
        return stats.paired_difference(a.verdicts, b.verdicts), f"paired, {common} units both answered"
    return stats.unpaired_difference(a.right, a.sizes, b.right, b.sizes), "unpaired, from the counts"


def compare_general_table(a: ModelResult, b: ModelResult) -> Table:
    """Return model B against model A (a tuned model against its base) on HVCU-Bench and each general benchmark."""
    columns = ["Benchmark", "A", "B", "Δ (B − A)", "95% CI", "p", "Method"]
    title = f"{b.model} (B) vs {a.model} (A): HVCU-Bench beside the general benchmarks"
    table = Table("compare_general", title, columns)
    measures: list[tuple[str, Cell, Cell, Counts | None, Counts | None]] = [
        (f"HVCU-Bench {SCORE}, {s}", a.official_score(s), b.official_score(s), hvcu_counts(a, s), hvcu_counts(b, s))
        for s in ("base", "context")
    ]
    va, vb = general_values(a.general), general_values(b.general)
    measures += [(k, va[k], vb[k], a.general_counts.get(k), b.general_counts.get(k)) for k in HEADLINES]
    for name, x, y, ca, cb in measures:
        if x is None and y is None:
            continue
        found = _change(ca, cb)
        delta = None if x is None or y is None else round(float(y) - float(x), 2)  # type: ignore[arg-type]
        if found is None:
            table.rows.append([name, x, y, delta, None, None, "no counts for an interval"])
            continue
        d, method = found
        table.rows.append([name, x, y, delta, interval_text(d.interval), stats.p_text(d.p_value), method])
    table.notes.append(
        "Δ = B − A in points. Paired where both runs logged the same units (HVCU-Bench chains, MMStar and MMMU "
        "questions, HallusionBench questions when lmms-eval kept the judge's verdicts): Bonett–Price per stratum "
        "(families, l2 categories); otherwise unpaired from the counts (Agresti–Caffo per stratum: MMBench's splits, "
        "whose per-question verdicts only lmms-eval's judge knows). Strata are averaged as each score averages them."
    )
    return table
