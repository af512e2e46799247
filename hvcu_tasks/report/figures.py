"""Report figures (PNG and SVG): per-level degradation, base vs context Scores, per-aspect heatmap."""

from __future__ import annotations

from pathlib import Path

from hvcu_tasks.families import FAMILIES
from hvcu_tasks.files import atomic_path
from hvcu_tasks.metrics import ACCURACY_METRICS, aspect_metric
from hvcu_tasks.report.runs import ModelResult, aspect_names, is_na

LEVEL_TICKS = ["perc", "bridge", "conn", "full"]


def _pyplot():  # -> matplotlib.pyplot
    """Return pyplot on the non-interactive backend with reproducible SVG output."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "hvcu"
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


def degradation_figure(models: list[ModelResult], setting: str, out: Path) -> list[Path]:
    """Lines from Acc_perc to Acc_full per family, one line per model: where the chain breaks."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(FAMILIES), figsize=(12, 3.6), sharey=True)
    for ax, family in zip(axes, FAMILIES, strict=True):
        for model in models:
            result = model.settings.get(setting, {}).get(family)
            if result is None:
                continue
            values = [float("nan") if v is None else float(v) for v in (result.get(m) for m in ACCURACY_METRICS)]
            ax.plot(LEVEL_TICKS, values, marker="o", label=model.model)
        ax.set_title(FAMILIES[family][0].replace("_", " "))
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy (%)")
    labelled = {label: handle for ax in axes for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)}
    if labelled:
        fig.legend(
            labelled.values(),
            labelled.keys(),
            fontsize=8,
            loc="lower center",
            ncol=min(4, len(labelled)),
            bbox_to_anchor=(0.5, -0.12),
        )
    fig.suptitle(f"Accuracy by level, {setting} setting", y=1.04)
    return _save(fig, out, f"degradation_{setting}")


def settings_figure(models: list[ModelResult], out: Path) -> list[Path]:
    """Grouped bars of the Overall Score in the base and context settings, per model."""
    plt = _pyplot()
    names = [m.model for m in models]
    fig, ax = plt.subplots(figsize=(max(4, 1.4 * len(names) + 2), 3.6))
    width = 0.38
    for i, setting in enumerate(("base", "context")):
        scores = [m.score(setting) for m in models]
        scores = [None if s is None or is_na(s) else s for s in scores]
        xs = [j + (i - 0.5) * width for j in range(len(names))]
        bars = ax.bar(xs, [0 if s is None else s for s in scores], width, label=setting)
        for bar, score in zip(bars, scores, strict=True):
            label = "n/a" if score is None else f"{score:.2f}"
            ax.annotate(
                label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=8
            )
    ax.set_xticks(range(len(names)), names, rotation=15)
    ax.set_ylabel("Overall Score (%)")
    ax.set_ylim(0, 100)
    ax.legend()
    ax.set_title("Base vs context setting")
    return _save(fig, out, "scores_base_vs_context")


def aspect_figure(models: list[ModelResult], setting: str, out: Path) -> list[Path]:
    """Heatmap of Acc_full per aspect (columns) and model (rows); blank where not evaluated."""
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
    ax.set_yticks(range(len(rows)), [m.model for m in rows])
    for i in range(len(rows)):
        for j in range(len(pairs)):
            if not np.isnan(grid[i, j]):
                color = "black" if grid[i, j] > 60 else "white"
                ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", color=color, fontsize=8)
    fig.colorbar(image, ax=ax, label="Acc_full (%)")
    ax.set_title(f"Full-chain accuracy per aspect, {setting} setting")
    return _save(fig, out, f"aspects_{setting}")


def all_figures(models: list[ModelResult], out: Path) -> list[Path]:
    """Write every figure the runs support into `out` and return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    settings = [s for s in ("base", "context") if any(s in m.settings for m in models)]
    paths: list[Path] = []
    for setting in settings:
        paths += degradation_figure(models, setting, out)
        paths += aspect_figure(models, setting, out)
    if settings == ["base", "context"]:
        paths += settings_figure(models, out)
    return paths
