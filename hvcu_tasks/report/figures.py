"""Report figures (PNG and SVG): per-level degradation and base vs context Scores beside the paper's models, and
the per-aspect heatmap of local runs.

Colours are the Okabe–Ito palette (distinguishable with the common colour-vision deficiencies); the paper's
models are drawn in grey behind the local runs, and a smoke-sample or partial run (--limit, a family missing) is
dashed or hatched and labelled so: neither is a benchmark result.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.core.metrics import ACCURACY_METRICS
from hvcu_tasks.data.files import atomic_path
from hvcu_tasks.report.board import Entry
from hvcu_tasks.report.crossbench import paired_rows
from hvcu_tasks.report.reference import rows_for
from hvcu_tasks.report.tables import CHANCE_FULL, CHANCE_LEVEL
from hvcu_tasks.results.general import HEADLINES
from hvcu_tasks.results.runs import SMOKE, ModelResult, aspect_names, is_nan
from hvcu_tasks.results.scores import aspect_metric

LEVEL_TICKS = ["perception", "bridge", "connotation", "full chain"]
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
"""Okabe & Ito's colour-blind-safe palette (blue, orange, green, purple, sky blue, vermillion, yellow, black)."""
PAPER_GREY = "#9a9a9a"
SMOKE_LABEL = "smoke sample"
PARTIAL_LABEL = "partial"
SETTING_COLOURS = {"base": OKABE_ITO[0], "context": OKABE_ITO[1]}


def _pyplot():  # -> matplotlib.pyplot
    """Return pyplot on the non-interactive backend with reproducible SVG output and every label literal text."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "hvcu"
    plt.rcParams["text.parse_math"] = False  # a label is the text it is: "$x$" in a model name is no formula
    plt.rcParams["text.usetex"] = False
    return plt


def _save(fig, out: Path, stem: str) -> list[Path]:
    """Write a figure as PNG and SVG (no timestamps, so reruns give the same SVG), each by rename, and close it."""
    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    try:
        with atomic_path(paths[0]) as tmp:
            fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight", metadata={"Software": None})
        with atomic_path(paths[1]) as tmp:
            fig.savefig(tmp, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    finally:
        _pyplot().close(fig)
    return paths


def is_smoke(model: ModelResult) -> bool:
    """Whether a model ran on the bundled smoke sample (a handful of items, not the benchmark)."""
    return model.dataset == {SMOKE}


def partial_settings(model: ModelResult) -> set[str]:
    """Return the settings of a model that are partial (run on a subset with --limit, or a family missing)."""
    return {s for s in model.settings if model.partial(s)}


def run_label(model: ModelResult, setting: str | None = None) -> str:
    """Return a local run's legend label: '(smoke sample)', '(partial)' (in `setting`, or in any) added as they hold."""
    partial = partial_settings(model) & ({setting} if setting else set(model.settings))
    marks = [SMOKE_LABEL] * is_smoke(model) + [PARTIAL_LABEL] * bool(partial)
    return f"{model.model} ({', '.join(marks)})" if marks else model.model


def run_style(model: ModelResult, setting: str) -> dict[str, str]:
    """Return a run's line style and legend label in one setting: dashed when not a benchmark result."""
    apart = is_smoke(model) or model.partial(setting)
    return {"linestyle": "--" if apart else "-", "label": run_label(model, setting)}


def _value(value: float | None) -> float:
    """Return a plottable number (missing or n/a as NaN, which matplotlib leaves out)."""
    return float("nan") if value is None or is_nan(value) else float(value)


def degradation_figure(models: list[ModelResult], setting: str, out: Path, reference: bool = True) -> list[Path]:
    """Accuracy from perception to the full chain per family: local runs in colour, the paper's models in grey."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(FAMILIES), figsize=(12, 4), sharey=True)
    chance = [CHANCE_LEVEL, CHANCE_LEVEL, CHANCE_LEVEL, CHANCE_FULL]
    paper = rows_for(setting) if reference else []
    for ax, family in zip(axes, FAMILIES, strict=True):
        for ref in paper:
            values = [ref.families[family][m] for m in ACCURACY_METRICS]
            if ref.model == "Human":
                ax.plot(LEVEL_TICKS, values, color="#000000", linestyle="-.", linewidth=1.2, label="Human [paper]")
            else:
                ax.plot(LEVEL_TICKS, values, color=PAPER_GREY, linewidth=0.9, alpha=0.7, label="models [paper]")
        ax.plot(LEVEL_TICKS, chance, color="#555555", linestyle=":", linewidth=1.2, label="chance")
        for i, model in enumerate(models):
            result = model.settings.get(setting, {}).get(family)
            if result is None:
                continue
            values = [_value(result.get(m)) for m in ACCURACY_METRICS]
            style = run_style(model, setting)
            colour, face = OKABE_ITO[i % len(OKABE_ITO)], "white" if style["linestyle"] == "--" else None
            ax.plot(LEVEL_TICKS, values, color=colour, linewidth=2.2, marker="o", markerfacecolor=face, **style)
        ax.set_title(FAMILIES[family][0].replace("_", " "))
        ax.set_xlabel("question level")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.tick_params(axis="x", labelsize=8)
    axes[0].set_ylabel("accuracy (%)")
    labelled = {label: handle for ax in axes for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)}
    fig.legend(
        labelled.values(), labelled.keys(), fontsize=8, loc="lower center", ncol=min(4, len(labelled)),
        bbox_to_anchor=(0.5, -0.16),
    )  # fmt: skip
    fig.suptitle(f"Accuracy by question level, {setting} setting: where the chain breaks", y=1.02)
    return _save(fig, out, f"degradation_{setting}")


BarRow = tuple[str, float, float, str, set[str]]
"""One model's Score bars: label, base, context, kind (paper, run, smoke, partial), the settings drawn hatched."""


def _bar_rows(models: list[ModelResult], reference: bool) -> list[BarRow]:
    """Return one BarRow per model for the Score bars, best base first."""
    rows: list[BarRow] = []
    if reference:
        context = {r.model: r.score for r in rows_for("context")}
        rows += [
            (f"{r.model} [paper]", r.score, context.get(r.model, float("nan")), "paper", set())
            for r in rows_for("base")
        ]
    for model in models:
        if model.settings:
            partial = partial_settings(model)
            kind = "smoke" if is_smoke(model) else "partial" if partial else "run"
            hatched = {"base", "context"} if kind == "smoke" else partial
            base, ctx = _value(model.official_score("base")), _value(model.official_score("context"))
            rows.append((run_label(model), base, ctx, kind, hatched))
    return sorted(rows, key=lambda r: (r[1] != r[1], -r[1] if r[1] == r[1] else 0.0, r[0]))


def settings_figure(models: list[ModelResult], out: Path, reference: bool = True) -> list[Path]:
    """Horizontal bars of the Score (official) in the base and context settings per model, the paper's included."""
    from matplotlib.patches import Patch

    plt = _pyplot()
    rows = _bar_rows(models, reference)
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(rows) + 1.6))
    height = 0.38
    for j, (_label, base, ctx, kind, hatched) in enumerate(rows):
        for k, (setting, value) in enumerate((("base", base), ("context", ctx))):
            y = j + (k - 0.5) * height
            ax.barh(
                y,
                0 if value != value else value,
                height,
                color=SETTING_COLOURS[setting],
                alpha=0.55 if kind == "paper" else 1.0,
                hatch="///" if setting in hatched else None,
                edgecolor="#000000" if kind != "paper" else "none",
                linewidth=0.6,
            )
            text = "–" if value != value else f"{value:.1f}"
            ax.annotate(text, (0 if value != value else value, y), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=7)  # fmt: skip
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    for tick, row in zip(ax.get_yticklabels(), rows, strict=True):
        if row[3] == "run":
            tick.set_fontweight("bold")
    ax.invert_yaxis()
    ax.axvline(CHANCE_FULL, color="#555555", linestyle=":", linewidth=1.2)
    ax.set_xlim(0, 100)
    ax.set_xlabel("Overall Score (official), %")
    handles = [Patch(color=SETTING_COLOURS[s], label=f"{s} setting") for s in ("base", "context")]
    handles.append(plt.Line2D([], [], color="#555555", linestyle=":", label=f"chance ({CHANCE_FULL:.2f})"))
    for kind, label in (
        ("smoke", f"{SMOKE_LABEL} (not the benchmark)"),
        ("partial", f"{PARTIAL_LABEL} (a subset; unranked)"),
    ):
        if any(r[3] == kind for r in rows):
            handles.append(Patch(facecolor="white", edgecolor="#000000", hatch="///", label=label))
    ax.legend(handles=handles, fontsize=8, loc="lower right")
    ax.set_title("Overall Score (official) per model, base vs context setting")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, out, "scores_base_vs_context")


def aspect_figure(models: list[ModelResult], setting: str, out: Path) -> list[Path]:
    """Heatmap of Acc_full per aspect (columns) and local run (rows); blank where not evaluated."""
    import numpy as np

    plt = _pyplot()
    pairs = aspect_names()
    rows = [m for m in models if m.settings.get(setting)]
    grid = np.full((len(rows), len(pairs)), np.nan)
    for i, model in enumerate(rows):
        fams = model.settings[setting]
        for j, (family, aspect) in enumerate(pairs):
            value = fams[family].get(aspect_metric(aspect)) if family in fams else None
            if value is not None:
                grid[i, j] = value
    fig, ax = plt.subplots(figsize=(12, 0.6 * len(rows) + 2))
    image = ax.imshow(grid, vmin=0, vmax=100, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(pairs)), [a for _f, a in pairs], rotation=45, ha="right")
    ax.set_yticks(range(len(rows)), [run_label(m, setting) for m in rows])
    ax.set_xlabel("aspect")
    for i in range(len(rows)):
        for j in range(len(pairs)):
            if not np.isnan(grid[i, j]):
                color = "black" if grid[i, j] > 60 else "white"
                ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", color=color, fontsize=8)
    fig.colorbar(image, ax=ax, label="Acc_full (%)")
    ax.set_title(f"Full-chain accuracy per aspect, {setting} setting")
    return _save(fig, out, f"aspects_{setting}")


def cross_figure(rows: Sequence[Entry], out: Path) -> list[Path]:
    """Scatter of the base Score (official) against each general benchmark's headline, every model named."""
    plt = _pyplot()
    shown = [(label, found) for label in HEADLINES if len(found := paired_rows(rows, label)) >= 2]
    fig, axes = plt.subplots(1, len(shown), figsize=(4.2 * len(shown), 4.2), squeeze=False)
    for ax, (label, found) in zip(axes[0], shown, strict=True):
        for i, (e, score, value) in enumerate(found):
            colour = PAPER_GREY if e.source == "paper" else OKABE_ITO[i % len(OKABE_ITO)]
            ax.scatter(value, score, color=colour, s=28, zorder=3)
            left = value > 55  # the name on the side with room, inside the panel
            ax.annotate(e.label, (value, score), xytext=(-4 if left else 4, 3), textcoords="offset points",
                        ha="right" if left else "left", fontsize=7)  # fmt: skip
        ax.set_xlabel(f"{label} (%)")
        ax.set_xlim(0, 100)
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("HVCU-Bench Score (official), base (%)")
    fig.suptitle("HVCU-Bench against the general benchmarks, one point per model", y=1.02)
    return _save(fig, out, "cross_benchmark")


def all_figures(models: list[ModelResult], out: Path, reference: bool = True, rows: Sequence[Entry] = ()) -> list[Path]:
    """Write every figure the runs (and the per-model view's `rows`) support into `out` and return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    settings = [s for s in ("base", "context") if any(s in m.settings for m in models)]
    paths: list[Path] = []
    for setting in settings:
        paths += degradation_figure(models, setting, out, reference)
        paths += aspect_figure(models, setting, out)
    if settings == ["base", "context"]:
        paths += settings_figure(models, out, reference)
    if any(e.general for e in rows if e.source == "run") and any(len(paired_rows(rows, k)) > 1 for k in HEADLINES):
        paths += cross_figure(rows, out)
    return paths


def caption(stem: str, models: list[ModelResult], reference: bool = True) -> str:
    """Return a figure's caption in words (what it shows, how to read it)."""
    kind, _, setting = stem.partition("_")
    smoke = [m.model for m in models if is_smoke(m) and m.settings]
    smoke_note = (
        f" Dashed or hatched: {', '.join(smoke)} ran on the bundled smoke sample (a handful of items), "
        "not the benchmark; its numbers show the pipeline works, not how good the model is."
        if smoke
        else ""
    )
    shown = {setting} if kind in {"degradation", "aspects"} else {"base", "context"}
    partial = [m.model for m in models if not is_smoke(m) and partial_settings(m) & shown]
    if partial:
        smoke_note += (
            f" Marked (partial), dashed or hatched where drawn: {', '.join(partial)} ran on a subset (--limit) or "
            f"{'lacks' if len(partial) == 1 else 'lack'} a family; such numbers are not benchmark results."
        )
    paper = " The paper's models are drawn in grey behind the local runs." if reference else ""
    if kind == "degradation":
        return (
            f"Accuracy at each question level (perception, bridge, connotation) and on the whole chain, {setting} "
            "setting, one panel per family: a steep drop to the full chain shows models that answer single "
            f"questions but break the chain. The dotted line is chance (25% per level, 1.56% per chain).{paper}"
            + smoke_note
        )
    if kind == "aspects":
        return (
            f"Full-chain accuracy (Acc_full) of each local run on each of the 15 aspects, {setting} setting "
            "(the paper does not publish per-aspect numbers); darker is lower, blank is not evaluated." + smoke_note
        )
    if stem == "cross_benchmark":
        return (
            "Each model's base Score (official) on HVCU-Bench (up) against each general benchmark's headline (across), "
            "one panel per benchmark; [paper] rows in grey. Points on a rising line rank alike on both; the "
            "cross-benchmark table gives Kendall's τ." + smoke_note
        )
    if stem == "scores_base_vs_context":
        return (
            "Overall Score (official, the authors' parser) per model in the base and context settings, best base "
            "Score first; local runs in bold, the paper's models paler. The gap between the two bars is what the "
            f"context adds; the dotted line is chance (1.56).{smoke_note}"
        )
    raise ValueError(f"no caption for figure {stem!r}")
