"""Figures of the basins study: which minimum training finds from random starts, and how it gets there.

The functions draw data they are given -- class fractions from
:func:`attnphase.experiments.simulation.basins.basin_fractions`, trajectories recorded by `simulate(record_every=k)`,
transition lines and fixed-point values computed elsewhere by the theory -- and compute no physics.  Each
writes a PNG and a PDF with the same stem and returns both paths.  Figures use matplotlib's object API (Agg),
so importing this module never changes the caller's backend.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attnphase.errors import InputError
from attnphase.plots import style
from attnphase.plots.style import ALPHA_LABEL

__all__ = ["plot_basin_heatmap", "plot_fraction_vs_alpha", "plot_trajectories"]

# The branches' colours, line styles and markers of every attnphase figure (plots.style.BRANCH_STYLE); "other"
# end points take the agnostic branch's grey.
CLASS_STYLE: dict[str, dict[str, Any]] = {
    c: {k: v for k, v in style.BRANCH_STYLE[b].items() if k in ("color", "linestyle", "marker")}
    for c, b in (("positional", "positional"), ("semantic", "semantic"), ("other", "agnostic"))
}
LINE_STYLE: dict[str, dict[str, Any]] = {
    "alpha_c": {**style.ALPHA_C_STYLE, "linewidth": 1.6},
    "semantic spinodal": {"color": style.BRANCH_STYLE["semantic"]["color"], "linestyle": "--", "linewidth": 1.2},
    "positional spinodal": {"color": style.BRANCH_STYLE["positional"]["color"], "linestyle": ":", "linewidth": 1.4},
}
LINE_LABEL = {"alpha_c": r"$\alpha_c$"}
Lines = Mapping[str, tuple[Sequence[float], Sequence[float]]]


def _smooth(omegas: np.ndarray, alphas: np.ndarray, per_gap: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """alpha(omega) through the theory's points by monotone cubic (PCHIP) interpolation: no overshoot between
    points, no kinks at them.  Fewer than three points, or repeated omegas: the points as given."""
    if len(omegas) < 3 or np.any(np.diff(omegas) <= 0):
        return omegas, alphas
    from scipy.interpolate import PchipInterpolator

    fine = np.concatenate([np.linspace(o0, o1, per_gap, endpoint=False) for o0, o1 in zip(omegas, omegas[1:],
                                                                                           strict=False)]
                          + [omegas[-1:]])
    return fine, PchipInterpolator(omegas, alphas)(fine)



def _select(fr: pd.DataFrame, **eq: Any) -> pd.DataFrame:
    for k, v in eq.items():
        if v is not None and k in fr.columns:
            fr = fr[np.isclose(fr[k].astype(float), float(v))] if not isinstance(v, str) else fr[fr[k] == v]
    return fr


@style.with_style
def plot_basin_heatmap(fractions: pd.DataFrame, out: str | Path, d: int | None = None, student: str = "tied",
                       init_scale: float | None = None, lines: Lines | None = None,
                       title: str | None = None) -> list[Path]:
    """Fraction of starts ending semantic over (alpha, omega), one cell per grid point (counts written in),
    with alpha_c(omega) and the spinodals drawn from `lines` = {name: (omegas, alphas)}."""
    fr = _select(fractions, student=student, init_scale=init_scale)
    if d is None and len(fr):
        d = int(fr["d"].max())
    fr = _select(fr, d=d)
    if fr.empty:
        raise InputError("no basins results for this selection")
    alphas = np.sort(fr["alpha"].unique())
    omegas = np.sort(fr["omega"].unique())
    grid = np.full((len(omegas), len(alphas)), np.nan)
    for _, row in fr.iterrows():
        grid[np.searchsorted(omegas, row["omega"]), np.searchsorted(alphas, row["alpha"])] = row["semantic_fraction"]

    def edges(v: np.ndarray) -> np.ndarray:
        if len(v) == 1:
            return np.array([v[0] - 0.05, v[0] + 0.05])
        mid = (v[1:] + v[:-1]) / 2
        return np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])

    fig = Figure(figsize=(5.4, 3.8), layout="constrained")
    ax = fig.add_subplot()
    mesh = ax.pcolormesh(edges(alphas), edges(omegas), grid, vmin=0, vmax=1, cmap="RdBu_r", shading="flat")
    fig.colorbar(mesh, ax=ax, label="fraction of starts ending semantic")
    for _, row in fr.iterrows():
        f = row["semantic_fraction"]
        ax.text(row["alpha"], row["omega"], f"{int(row['n_semantic'])}/{int(row['n'])}", ha="center", va="center",
                fontsize=7, color="white" if abs(f - 0.5) > 0.3 else "black")
    smoothed = False
    for name, (oms, als) in (lines or {}).items():
        pts = sorted((o, a) for o, a in zip(oms, als, strict=True) if a is not None and math.isfinite(a))
        if not pts:
            continue
        o, a = (np.array(v, dtype=float) for v in zip(*pts, strict=True))
        st = LINE_STYLE.get(name, {"color": "0.2"})
        oo, aa = _smooth(o, a)
        smoothed |= len(oo) > len(o)
        ax.plot(aa, oo, label=LINE_LABEL.get(name, name), **st)
        ax.plot(a, o, linestyle="none", marker="o", markersize=2.5, color=st.get("color", "0.2"))
    if smoothed:  # say that the curves between the theory's points are an interpolation, not more theory
        ax.plot([], [], linestyle="none", marker="o", markersize=2.5, color="0.2",
                label="theory points; lines: monotone cubic through them")
    ax.set_xlim(edges(alphas)[0], edges(alphas)[-1])
    ax.set_ylim(edges(omegas)[0], edges(omegas)[-1])
    ax.set_xlabel(ALPHA_LABEL)
    ax.set_ylabel(r"positional weight $\omega$")
    scale = "" if init_scale is None else f", init scale {init_scale:g}"
    ax.set_title(title or f"basins from random starts: d = {d}, {student} student{scale}", fontsize=10)
    if lines:
        style.legend_below(fig, ax, ncols=2)  # under the axes: inside, it covered the cells' counts
    return style.save_figure(fig, out)


@style.with_style
def plot_fraction_vs_alpha(fractions: pd.DataFrame, out: str | Path, omega: float, student: str = "tied",
                           init_scale: float | None = None, alpha_c: float | None = None,
                           spinodals: Mapping[str, float | None] | None = None) -> list[Path]:
    """Fraction of semantic end points against alpha at fixed omega, one curve per d, binomial error bars;
    vertical lines at alpha_c and the spinodals (numbers from the theory's transition code)."""
    fr = _select(fractions, omega=omega, student=student, init_scale=init_scale)
    if fr.empty:
        raise InputError(f"no basins results at omega = {omega:g}")
    fig = Figure(figsize=(5.0, 3.6), layout="constrained")
    ax = fig.add_subplot()
    markers = "osD^v<>"
    for i, (d, sub) in enumerate(sorted(fr.groupby("d"), key=lambda t: t[0])):
        sub = sub.sort_values("alpha")
        ax.errorbar(sub["alpha"], sub["semantic_fraction"], yerr=sub["semantic_se"], marker=markers[i % 7],
                    capsize=2.5, label=f"d = {int(d)} ({int(sub['n'].min())}+ starts)")
    if alpha_c is not None and math.isfinite(alpha_c):
        ax.axvline(alpha_c, **LINE_STYLE["alpha_c"], label=rf"$\alpha_c$ = {alpha_c:.3g}")
    for name, a in (spinodals or {}).items():
        if a is not None and math.isfinite(a):
            ax.axvline(a, **LINE_STYLE.get(name, {"color": "0.4"}), label=f"{name} = {a:.3g}")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel(ALPHA_LABEL)
    ax.set_ylabel("fraction ending semantic")
    scale = "" if init_scale is None else f", init scale {init_scale:g}"
    ax.set_title(rf"$\omega$ = {omega:g}, {student} student{scale}", fontsize=10)
    style.legend_below(fig, ax, ncols=2)
    return style.save_figure(fig, out)


class _PhaseScale:
    """The x axis of a trajectory: log(step + 1) over the warm-up's GD steps, then linear in L-BFGS evaluations over
    a fixed share of the axis (on one log axis the L-BFGS phase, ~100 evaluations after 1000 GD steps, was a
    vertical spike)."""

    SHARE = 0.6  # the L-BFGS phase's width, as a fraction of the GD phase's

    def __init__(self, warmup: int, last: float) -> None:
        self.w = float(warmup)  # GD steps 0 .. warmup - 1 are drawn at step + 1 = 1 .. warmup
        self.gd = math.log10(self.w)
        self.span = max(last - self.w, 1.0)

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            gd = np.log10(np.maximum(x, 1e-300))
        lb = self.gd + self.SHARE * self.gd * (x - self.w) / self.span
        return np.where(x <= self.w, gd, lb)

    def inverse(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        lb = self.w + (y - self.gd) * self.span / (self.SHARE * self.gd)
        return np.where(y <= self.gd, 10.0 ** y, lb)

    def ticks(self) -> tuple[list[float], list[str]]:
        decades = [10.0 ** k for k in range(int(math.floor(self.gd)) + 1) if 10.0 ** k < self.w * 0.7]
        step = 10 ** max(0, int(math.floor(math.log10(self.span / 2))))
        n = int(self.span // step)
        k = max(1, math.ceil(n / 2))
        extra = [self.w + j * step * k for j in range(1, n // k + 1)]
        labels = [f"{int(v):d}" for v in decades] + [f"{int(self.w):d}"] + [f"+{int(v - self.w):d}" for v in extra]
        return decades + [self.w] + extra, labels


@style.with_style
def plot_trajectories(trajectories: Sequence[Mapping[str, Any]], out: str | Path,
                      fixed_points: Mapping[str, Mapping[str, float]] | None = None,
                      title: str | None = None, sigma: float | None = None,
                      warmup: int | None = None) -> list[Path]:
    """|m|(t), |theta|(t) and train loss(t) for a few starts, coloured by the minimum each ends in, with the
    theory's fixed-point values as horizontal lines.

    trajectories: [{"basin": class, "rows": [{"step", "m", "theta", "train_loss"}, ...]}, ...];
    fixed_points: {branch: {"m": .., "theta": .., "train_loss": ..}}.  With ``sigma`` the overlaps are drawn over
    sigma^2, as in figure (c) and the study's figures.  ``warmup``: the number of plain GD steps before L-BFGS
    (rows with step < warmup are GD steps, later ones L-BFGS evaluations); the x axis is then logarithmic over
    the GD steps and linear over the L-BFGS phase, which is shaded.
    """
    if warmup is not None and (isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1):
        raise InputError(f"warmup must be a positive integer or None, got {warmup!r}")
    scale = 1.0 / sigma**2 if sigma else 1.0
    keys = ("m", "theta", "train_loss")
    factor = {"m": scale, "theta": scale, "train_loss": 1.0}
    fig = Figure(figsize=(11.0, 3.6), layout="constrained")
    axes = fig.subplots(1, 3)
    seen: set[str] = set()
    last = 1.0
    for tr in trajectories:
        rows = tr["rows"]
        if not rows:
            continue
        c = tr.get("basin", "other")
        cls_style = CLASS_STYLE.get(c, CLASS_STYLE["other"])
        steps = np.array([r["step"] for r in rows], dtype=float) + 1
        last = max(last, float(steps.max()))
        label = f"ends {c}" if c not in seen else None
        seen.add(c)
        for ax, key in zip(axes, keys, strict=True):
            ax.plot(steps, [abs(r[key]) * factor[key] for r in rows], color=cls_style["color"], linewidth=1.0,
                    alpha=0.85, label=label)
    for branch, fp in (fixed_points or {}).items():
        cls_style = CLASS_STYLE.get(branch, CLASS_STYLE["other"])
        for ax, key in zip(axes, keys, strict=True):
            v = fp.get(key)
            if v is not None and math.isfinite(v):
                ax.axhline(abs(v) * factor[key], color=cls_style["color"], linestyle=cls_style["linestyle"],
                           linewidth=1.3, label=f"theory {branch}" if key == "m" else None)
    suffix = r" / $\sigma^2$" if sigma else ""
    phased = warmup is not None and last > warmup + 1
    for ax, name in zip(axes, ("$|m|$" + suffix, r"$|\theta|$" + suffix, "train loss / $d$"), strict=True):
        if phased:
            ps = _PhaseScale(warmup, last)  # type: ignore[arg-type]
            ax.set_xscale("function", functions=(ps.forward, ps.inverse))
            ax.set_xlim(1.0, last)
            ticks, labels = ps.ticks()
            ax.set_xticks(ticks, labels)
            ax.minorticks_off()
            ax.axvspan(ps.w, last, color="0.93", linewidth=0, zorder=0,
                       label=f"L-BFGS after {warmup} GD steps (linear axis)" if ax is axes[0] else None)
            ax.set_xlabel("GD step + 1 (log)  |  L-BFGS evaluations")
        else:
            ax.set_xscale("log")
            ax.set_xlabel("gradient evaluations + 1")
        ax.set_ylabel(name)
    axes[2].set_yscale("log")
    style.legend_below(fig, axes[0], ncols=5)
    if title:
        fig.suptitle(title, fontsize=10)
    return style.save_figure(fig, out)
