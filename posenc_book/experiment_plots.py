"""Tables and figures of chapter 11's recorded experiments: accuracy against budget, bits per character against length.

The chapter shows what these draw and asserts on the same numbers; the code
that lays out axes lives here so that the page shows the results, not the
plotting.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch

__all__ = [
    "by_budget",
    "plot_budget_curves",
    "plot_text_lengths",
    "plot_text_positions",
    "scheme_colors",
    "scheme_styles",
]


def scheme_colors(schemes) -> dict[str, tuple]:
    """One colour of matplotlib's tab10 per scheme, in order."""
    return dict(zip(schemes, plt.get_cmap("tab10").colors, strict=False))


#: Line styles and markers in scheme order: curves that coincide (several schemes at 1.0,
#: rope and rope_pi before any extrapolation) stay distinguishable, and not by colour alone.
_STYLES = [("-", "o"), ("--", "s"), ("-.", "^"), (":", "D"), ("-", "v"), ("--", "P"), ("-.", "X"), (":", "*")]


def scheme_styles(schemes) -> dict[str, dict]:
    """Keyword arguments for ``plot`` per scheme: colour, line style and marker."""
    colors = scheme_colors(schemes)
    return {
        name: {"color": colors[name], "ls": _STYLES[i % 8][0], "marker": _STYLES[i % 8][1]}
        for i, name in enumerate(schemes)
    }


def by_budget(saved: dict) -> dict[tuple, list[float | None]]:
    """Accuracy per seed at every checkpoint a run reached: ``{(task, scheme, step, multiplier): [acc, ...]}``.

    A run that stopped early (one checkpoint after converging) has no entry
    for later steps; ``None`` marks an evaluation that could not run.
    """
    table: dict[tuple, list] = {}
    for run in saved["runs"]:
        for checkpoint in run["checkpoints"]:
            for e in checkpoint["evaluations"]:
                key = (run["task"], run["scheme"], checkpoint["step"], e["multiplier"])
                table.setdefault(key, []).append(e["accuracy"])
    return table


def plot_budget_curves(saved: dict, task: str, multipliers=(1, 4), schemes=None, chance: float | None = None):
    """Accuracy against training steps, one panel per multiplier: mean over seeds, band from worst to best.

    Each curve ends where its runs stopped; a marker shows the last step.
    """
    config = saved["config"]
    schemes = schemes or config["schemes"]
    steps = sorted({c["step"] for r in saved["runs"] for c in r["checkpoints"]})
    table, colors, styles = by_budget(saved), scheme_colors(config["schemes"]), scheme_styles(config["schemes"])
    fig, axes = plt.subplots(1, len(multipliers), figsize=(4.4 * len(multipliers), 3.4), sharey=True, squeeze=False)
    for ax, m in zip(axes[0], multipliers, strict=True):
        for name in schemes:
            points = [(s, table[task, name, s, m]) for s in steps if (task, name, s, m) in table]
            points = [(s, acc) for s, acc in points if None not in acc and len(acc) == len(config["seeds"])]
            if not points:
                continue
            x = [s for s, _ in points]
            values = torch.tensor([acc for _, acc in points], dtype=torch.float64)  # [steps, seeds]
            ax.plot(x, values.mean(1), ms=3.5, lw=1.2, label=name, **styles[name])
            ax.fill_between(x, values.min(1).values, values.max(1).values, color=colors[name], alpha=0.15, lw=0)
        if chance is not None:
            ax.axhline(chance, color="gray", ls=":", lw=0.8, label="chance")
        ax.set_xscale("log", base=2)
        ax.set(
            xlabel="training steps (budget)",
            title=f"{task}, {m}x the training length",
            xticks=steps,
            xticklabels=[f"{s:,}" for s in steps],
        )
        ax.tick_params(axis="x", labelrotation=45)
        ax.minorticks_off()
    axes[0][0].set_ylabel("accuracy")
    handles = {label: h for ax in axes[0] for h, label in zip(*ax.get_legend_handles_labels(), strict=True)}
    fig.legend(handles.values(), handles.keys(), loc="outside right upper", fontsize=8)
    return fig


def plot_text_lengths(document: dict, summary: dict, schemes=None):
    """Bits per character against evaluation length: mean over seeds, bars from the worst seed to the best."""
    config = document["config"]
    schemes = schemes or config["schemes"]
    lengths = [config["train_length"] * m for m in config["multipliers"]]
    colors = scheme_colors(config["schemes"])
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for k, name in enumerate(schemes):
        rows = [(n, summary[name, n]) for n in lengths if summary[name, n]["status"] == "ok"]
        x = [n * 2 ** ((k - len(schemes) / 2) * 0.015) for n, _ in rows]
        mean = [r["mean"] for _, r in rows]
        spread = [[r["mean"] - r["min"] for _, r in rows], [r["max"] - r["mean"] for _, r in rows]]
        ax.errorbar(x, mean, yerr=spread, marker="o", ms=4, capsize=2, color=colors[name], label=name)
    ax.set_xscale("log", base=2)
    ax.minorticks_off()
    ax.set(
        xticks=lengths,
        xticklabels=lengths,
        xlabel=f"characters per evaluation window (trained on {config['train_length']})",
        ylabel="bits per character",
    )
    ax.legend(fontsize=8, ncols=2)
    return fig


def plot_text_positions(document: dict, multiplier: int, schemes) -> plt.Figure:
    """Bits per character by position in windows of ``multiplier`` times the training length (mean over seeds)."""
    config = document["config"]
    length = config["train_length"] * multiplier
    index = config["multipliers"].index(multiplier)
    styles = scheme_styles(config["schemes"])
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for name in schemes:
        curves = [r["evaluations"][index]["by_position"] for r in document["runs"] if r["scheme"] == name]
        mean = torch.tensor(curves, dtype=torch.float64).mean(0)
        width = length / len(mean)
        centres = (torch.arange(len(mean)) + 0.5) * width
        ax.plot(centres, mean, ms=3.5, label=name, **styles[name])
    ax.axvline(config["train_length"], color="gray", ls="--", lw=0.8)
    ax.set(xlabel="position in the window", ylabel="bits per character", title=f"windows of {length} characters")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return fig
