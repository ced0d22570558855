"""Figures of the histogram study: attention maps of both mechanisms, learning curves, the data-size sweep.

Object-oriented matplotlib (Agg via attnphase.plots.save_figure), so the caller's backend is never changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from attnphase.experiments.histogram.data import count_labels
from attnphase.experiments.histogram.sweep import LABELS, SweepRow, sweep_table
from attnphase.experiments.histogram.train import HistogramRun

_STYLE = {"positional": {"color": "tab:blue", "marker": "o", "ls": "-"},
          "semantic": {"color": "tab:red", "marker": "s", "ls": "--"},
          "mixed": {"color": "tab:gray", "marker": "^", "ls": ":"},
          "both": {"color": "tab:green", "marker": "D", "ls": "-."}}


def attention_maps(run: HistogramRun, tokens: np.ndarray) -> np.ndarray:
    """(N, L, L) attention maps of a stored run on given sequences."""
    import torch

    from attnphase.experiments.histogram.model import forward, unflat_params, variant_masks

    p = {k: v[None] for k, v in unflat_params(run.params, **run.schedule.dims()).items()}
    masks = variant_masks([run.variant], run.schedule.width)
    with torch.no_grad():
        _, attn = forward(p, masks, torch.as_tensor(np.asarray(tokens))[None], return_attention=True)
    return attn[0].numpy()


def plot_attention(runs: Sequence[HistogramRun], tokens: np.ndarray, out: str | Path) -> list[Path]:
    """One row per run (e.g. a positional and a semantic model), one column per example sequence."""
    from attnphase.plots import style

    tokens = np.asarray(tokens)
    n = len(tokens)
    fig = Figure(figsize=(2.4 * n, 2.5 * len(runs)), layout="constrained")
    axes = fig.subplots(len(runs), n, squeeze=False)
    labels = count_labels(tokens)
    for r, run in enumerate(runs):
        maps = attention_maps(run, tokens)
        for c in range(n):
            ax = axes[r, c]
            ax.imshow(maps[c], vmin=0, vmax=1, cmap="viridis")
            ticks = [f"{t}" for t in tokens[c]]
            ax.set_xticks(range(len(ticks)), ticks, fontsize=6)
            ax.set_yticks(range(len(ticks)), [f"{t}:{k}" for t, k in zip(tokens[c], labels[c], strict=True)],
                          fontsize=6)
            if c == 0:
                ax.set_ylabel(f"{run.variant} (seed {run.seed})\nquery token:count", fontsize=8)
            if r == 0:
                ax.set_title(f"sequence {c + 1}", fontsize=8)
            if r == len(runs) - 1:
                ax.set_xlabel("key token", fontsize=7)
    return style.save_figure(fig, out)


def plot_curves(runs: Sequence[HistogramRun], out: str | Path) -> list[Path]:
    """Training loss (every epoch) and validation accuracy (at the recorded epochs) of each run."""
    from attnphase.plots import style

    fig = Figure(figsize=(9, 3.4), layout="constrained")
    ax_loss, ax_acc = fig.subplots(1, 2)
    seen: set[str] = set()
    for run in runs:
        st = _STYLE.get(run.variant, _STYLE["mixed"])
        lab = run.variant if run.variant not in seen else None
        seen.add(run.variant)
        ax_loss.plot(np.arange(1, len(run.curves.train_loss) + 1), run.curves.train_loss, color=st["color"],
                     ls=st["ls"], lw=1, label=lab)
        ax_acc.plot(run.curves.epochs, run.curves.val_accuracy, color=st["color"], ls=st["ls"], lw=1,
                    marker=st["marker"], ms=2, label=lab)
    ax_loss.set(xlabel="epoch", ylabel="training loss", yscale="log")
    ax_acc.set(xlabel="epoch", ylabel="validation accuracy")
    ax_acc.set_title("on the first 1000 validation sequences", fontsize=8)
    ax_acc.legend(frameon=False, fontsize=8)
    return style.save_figure(fig, out)


def plot_sweep(rows: Sequence[SweepRow], out: str | Path) -> list[Path]:
    """Fraction of runs per mechanism against n_train (Wilson 95 % intervals), and the mean accuracy."""
    from attnphase.plots import style

    fig = Figure(figsize=(9, 3.4), layout="constrained")
    ax_f, ax_a = fig.subplots(1, 2)
    n = np.array([r.n_train for r in rows], dtype=float)
    for k, lab in enumerate(LABELS):
        st = _STYLE[lab]
        f = np.array([r.fractions[lab] for r in rows])
        lo = np.array([r.intervals[lab][0] for r in rows])
        hi = np.array([r.intervals[lab][1] for r in rows])
        x = n * (1 + 0.04 * (k - 1))  # small offsets so that the error bars do not overlap
        ax_f.errorbar(x, f, yerr=[f - lo, hi - f], color=st["color"], marker=st["marker"], ls=st["ls"],
                      capsize=2, label=lab)
    ax_f.set(xscale="log", xlabel="training sequences n_train", ylabel="fraction of runs", ylim=(-0.03, 1.03))
    ax_f.legend(frameon=False, fontsize=8)
    acc = np.array([r.mean_accuracy for r in rows])
    sem = np.nan_to_num(np.array([r.sem_accuracy for r in rows]))
    ax_a.errorbar(n, acc, yerr=sem, color="k", marker="o", capsize=2, label="all runs")
    for lab in LABELS:
        a = np.array([r.mean_accuracy_by[lab] for r in rows])
        if np.isfinite(a).any():
            st = _STYLE[lab]
            ax_a.plot(n, a, color=st["color"], marker=st["marker"], ls="none", ms=4, label=lab)
    ax_a.set(xscale="log", xlabel="training sequences n_train", ylabel="validation accuracy")
    ax_a.legend(frameon=False, fontsize=8)
    for ax in (ax_f, ax_a):  # the sizes themselves as ticks: log-axis labels like 3x10^2 overlap
        ax.set_xticks(n, [f"{int(v)}" for v in n], fontsize=7)
        ax.minorticks_off()
    return style.save_figure(fig, out)


def plot_scores(runs: Sequence[HistogramRun], out: str | Path) -> list[Path]:
    """Every run's mechanism score against n_train (the unrestricted model), and each variant's accuracy.

    Left: one point per unrestricted run (spread sideways a little so that equal scores stay visible), the
    median per size as a line, and the +-0.5 lines that separate the labels.  Right: validation accuracy, mean
    +- standard error over seeds, per variant: how much data each mechanism needs on its own.
    """
    from attnphase.plots import style

    fig = Figure(figsize=(9, 3.4), layout="constrained")
    ax_s, ax_a = fig.subplots(1, 2)
    both = [r for r in runs if r.variant == "both"]
    sizes = sorted({r.n_train for r in both})
    rng = np.random.default_rng(0)  # the sideways spread only: fixed, so a figure redraws identically
    for n in sizes:
        sc = np.array([r.mechanism_score for r in both if r.n_train == n])
        ax_s.plot(n * np.exp(rng.uniform(-0.08, 0.08, len(sc))), sc, "o", color=_STYLE["both"]["color"], ms=3.5,
                  alpha=0.75)
    if sizes:
        med = [float(np.median([r.mechanism_score for r in both if r.n_train == n])) for n in sizes]
        ax_s.plot(sizes, med, color="k", lw=1, label="median")
        ax_s.legend(frameon=False, fontsize=8, loc="lower right")
    for y, txt in ((0.5, "semantic above"), (-0.5, "positional below")):
        ax_s.axhline(y, color="0.6", lw=0.8, ls=":")
        ax_s.annotate(txt, (0.01, y), xycoords=("axes fraction", "data"), va="bottom", fontsize=7, color="0.4")
    ax_s.set(xscale="log", xlabel="training sequences n_train", ylabel="mechanism score (unrestricted runs)",
             ylim=(-1.05, 1.05))
    for variant in ("both", "positional", "semantic"):
        sub = [r for r in runs if r.variant == variant]
        if not sub:
            continue
        rows = sweep_table(sub)  # mean and standard error per n_train, as the sweep's own table has them
        st = _STYLE[variant]
        ax_a.errorbar([r.n_train for r in rows], [r.mean_accuracy for r in rows],
                      yerr=np.nan_to_num([r.sem_accuracy for r in rows]), color=st["color"], marker=st["marker"],
                      ls=st["ls"], capsize=2, ms=4,
                      label=variant if variant != "both" else "unrestricted")
    ax_a.set(xscale="log", xlabel="training sequences n_train", ylabel="validation accuracy")
    ax_a.legend(frameon=False, fontsize=8)
    ticks = sorted({r.n_train for r in runs})
    for ax in (ax_s, ax_a):
        ax.set_xticks(ticks, [f"{int(v)}" for v in ticks], fontsize=7)
        ax.minorticks_off()
    return style.save_figure(fig, out)
