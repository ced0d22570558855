"""Paper-style figures: theory curves, simulation points and the phase diagram (docs/model.md).

Every function takes plain data objects -- lists of :class:`~attnphase.theory.state_evolution.results.FixedPoint`,
transition results (anything with the attributes of ``attnphase.theory.TransitionResult``), DataFrames from
:mod:`attnphase.experiments.store` -- and an output path, writes a PNG and a PDF with the same stem and returns both
paths.

The figures must survive black-and-white printing, so the branches differ by line style and marker as well
as colour.  Figures are built with the object-oriented API (``matplotlib.figure.Figure``, rendered by Agg)
rather than pyplot so that importing this module never changes the caller's matplotlib backend and no
global figure state leaks between calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colors as mcolors
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from attnphase.errors import InputError
from attnphase.plots import style
from attnphase.plots.global_line import INTERPOLATED_NOTE, densified, global_path
from attnphase.plots.smooth import NOTE as SMOOTH_NOTE
from attnphase.plots.smooth import monotone_cubic, monotone_cubic_at
from attnphase.plots.style import (
    ALPHA_C_STYLE,
    ALPHA_L_STYLE,
    ALPHA_LABEL,
    BRANCH_STYLE,
    GLOBAL_STYLE,
    LINEAR_STYLE,
    branch_style,
    finite,
    legend,
    legend_below,
    new_figure,
    with_style,
)

__all__ = [
    "BRANCH_STYLE",
    "plot_test_error",
    "plot_loss_difference",
    "plot_overlaps",
    "plot_phase_diagram",
    "plot_finite_size",
]

# --------------------------------------------------------------------------------------------- theory helpers


def _valid(points: Iterable[Any]) -> list[Any]:
    """Valid fixed points sorted by alpha (invalid ones -- collapsed, not converged -- are never drawn)."""
    pts = [p for p in points
           if getattr(p, "valid", True) and finite(getattr(p, "test_error", float("nan")))]
    return sorted(pts, key=lambda p: p.alpha)




def _err(p: Any, name: str) -> float:
    errors = getattr(p, "errors", None) or {}
    e = errors.get(name)
    return float(e) if finite(e) else 0.0


def _scalar(p: Any, name: str) -> float:
    """A quantity as a number: the theory's own scalar summary for matrix-valued overlaps (m, theta)."""
    summary = getattr(p, "summary", None)
    if callable(summary):
        return float(summary()[name]) if name in ("q", "m", "V", "theta") else float(getattr(p, name))
    return float(getattr(p, name))


def _series(points: Sequence[Any], name: str,
            absolute: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.array([p.alpha for p in points], dtype=float)
    y = np.array([_scalar(p, name) for p in points], dtype=float)
    if absolute:  # Q -> -Q is a symmetry of the model: only |m|, |theta| are meaningful (docs/model.md)
        y = np.abs(y)
    e = np.array([_err(p, name) for p in points], dtype=float)
    return x, y, e


def _match(a: Sequence[Any], b: Sequence[Any], rtol: float = 1e-9) -> list[tuple[Any, Any]]:
    """Pairs of points of two branches at the same alpha (continuation may give each its own grid)."""
    pairs = []
    for p in a:
        for s in b:
            if math.isclose(p.alpha, s.alpha, rel_tol=rtol, abs_tol=1e-12):
                pairs.append((p, s))
                break
    return pairs


def _global(curves: Mapping[str, Sequence[Any]], given: Sequence[Any] | None) -> list[tuple[str, Any]]:
    """(branch, point) along the global minimum: the theory's own curve (given, or from the theory package's
    one function for it), never decided here."""
    if given is None:
        from attnphase.theory.state_evolution.results import global_minimum_curve

        given = global_minimum_curve(curves)
    return [(p.branch, p) for p in given]


# ----------------------------------------------------------------------------------------- simulation helpers


def _aggregated(df: pd.DataFrame | None) -> pd.DataFrame | None:
    """Accept either raw store rows or ``aggregate()`` output; return the aggregated form."""
    if df is None or len(df) == 0:
        return None
    if any(c.endswith("_mean") for c in df.columns):
        return df
    from attnphase.experiments.store import aggregate

    return aggregate(df)


def _select(df: pd.DataFrame | None, omega: float | None = None, d: int | None = None,
            alpha: float | None = None) -> tuple[pd.DataFrame | None, int | None]:
    """Rows of an aggregated table at this omega (and alpha), at size d (default: the largest d present)."""
    df = _aggregated(df)
    if df is None:
        return None, None
    if omega is not None and "omega" in df.columns:
        df = df[np.isclose(df["omega"].astype(float), float(omega), rtol=0, atol=1e-9)]
    if alpha is not None and "alpha" in df.columns:
        df = df[np.isclose(df["alpha"].astype(float), float(alpha), rtol=0, atol=1e-9)]
    if len(df) == 0:
        return None, None
    if "d" in df.columns:
        if d is None:
            d = int(df["d"].max())
        df = df[df["d"] == d]
        if len(df) == 0:
            return None, None
    return df.sort_values("alpha"), d


def _col(df: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    mean = df[f"{name}_mean"].to_numpy(dtype=float)
    sem_col = f"{name}_sem"
    sem = df[sem_col].to_numpy(dtype=float) if sem_col in df.columns else np.zeros_like(mean)
    # a single seed has no standard error; draw the point without a bar rather than dropping it
    return mean, np.nan_to_num(sem, nan=0.0)


def _sem_or_zero(df: pd.DataFrame, col: str) -> np.ndarray:
    if col not in df.columns:
        return np.zeros(len(df))
    return np.nan_to_num(df[col].to_numpy(float), nan=0.0)


def _groups(df: pd.DataFrame) -> list[tuple[str, str | None, pd.DataFrame]]:
    out = []
    opt_col = "optimizer" if "optimizer" in df.columns else None
    keys = ["init"] + ([opt_col] if opt_col else [])
    for key, g in df.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        out.append((str(key[0]), str(key[1]) if opt_col else None, g.sort_values("alpha")))
    return out


def _sim_label(init: str, optimizer: str | None, d: int | None, many_opts: bool) -> str:
    parts = [f"sim., {init} init"]
    if d is not None:
        parts.append(f"d={d}")
    if optimizer and many_opts:
        parts.append(optimizer)
    return ", ".join(parts)


def _sim_errorbar(ax: Axes, x: np.ndarray, y: np.ndarray, e: np.ndarray, init: str, label: str,
                  open_marker: bool = False) -> None:
    st = branch_style(init)
    ax.errorbar(x, y, yerr=e, fmt=st["marker"], color=st["color"], markersize=4.5, capsize=2.5,
                elinewidth=0.9, markeredgewidth=0.9, mfc="white" if open_marker else st["color"],
                linestyle="none", label=label, zorder=4)


# -------------------------------------------------------------------------------------------- annotations


def _vline(ax: Axes, x: float | None, style: Mapping[str, Any], text: str,
           bracket: tuple[float, float] | None = None) -> None:
    if x is None or not finite(x):
        return
    ax.axvline(x, **style, zorder=1, label=text)
    if bracket is not None and all(finite(b) for b in bracket) and bracket[1] > bracket[0]:
        ax.axvspan(bracket[0], bracket[1], color=style["color"], alpha=0.08, linewidth=0, zorder=0)
    ax.annotate(text, xy=(x, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -2),
                textcoords="offset points", ha="left", va="top", fontsize=8.5, color=style["color"])


def _theory_line(ax: Axes, x: np.ndarray, y: np.ndarray, e: np.ndarray, branch: str, label: str) -> None:
    """The computed points (small markers, gid theory-points-BRANCH: exactly what the theory returned) and a
    monotone cubic line through them (no kinks at a coarse grid's points; the legend says so, _smooth_note)."""
    st = branch_style(branch)
    xd, yd = monotone_cubic(x, y)
    ax.plot(xd, yd, color=st["color"], linestyle=st["linestyle"], linewidth=1.5, label=label, zorder=3,
            gid=f"theory-{branch}")
    ax.plot(x, y, color=st["color"], linestyle="none", marker=st["marker"], markersize=2.4, zorder=3,
            gid=f"theory-points-{branch}")
    if np.any(e > 0):
        # +-2 standard errors of the integration: a thin band, invisible where the error is negligible
        ed = np.interp(xd, x, e)
        ax.fill_between(xd, yd - 2 * ed, yd + 2 * ed, color=st["color"], alpha=0.18, linewidth=0, zorder=2)


def _smooth_note(ax: Axes) -> None:
    """One legend entry saying that theory lines between computed points are an interpolation."""
    if any(str(ln.get_gid()).startswith("theory-points-") and len(ln.get_xdata()) >= 3 for ln in ax.get_lines()):
        ax.plot([], [], color="0.3", linestyle="-", marker="o", markersize=2.4, linewidth=1.0, label=SMOOTH_NOTE)


def _global_segments(ax: Axes, gm: list[tuple[str, Any]], value: Callable[[Any], float],
                     label: str = "global minimum", curves: Mapping[str, Sequence[Any]] | None = None,
                     alpha_c: float | None = None) -> None:
    """Thick underlay along whichever branch is the global minimum, drawn as one line that jumps vertically where
    the minimum switches branch (at alpha_c where given; plots.global_line)."""
    if not gm:
        return
    branches = {b: [(float(p.alpha), value(p), float(p.train_loss)) for p in _valid(pts)]
                for b, pts in (curves or {}).items()}
    # between computed points the underlay follows the branch's drawn (monotone cubic) line
    interp = {b: monotone_cubic_at(np.array([t[0] for t in v]), np.array([t[1] for t in v]))
              for b, v in branches.items() if v}
    path = global_path([(b, float(p.alpha), value(p)) for b, p in gm], branches, alpha_c, interp)
    if path.switches and path.interpolated:
        label += f" ({INTERPOLATED_NOTE})"
    if len(path.x) == 1:
        ax.plot(path.x, path.y, marker="o", markersize=7, linestyle="none", color=GLOBAL_STYLE["color"],
                alpha=GLOBAL_STYLE["alpha"], label=label, zorder=1.5)
    else:
        xs, ys = densified(path, interp)
        ax.plot(xs, ys, **GLOBAL_STYLE, label=label, zorder=1.5, gid="global-minimum")


def _title(omega: float | None, extra: str = "") -> str:
    t = rf"$\omega = {omega:g}$" if omega is not None else ""
    return ", ".join(s for s in (t, extra) if s)


# ------------------------------------------------------------------------------------------------- figures


@with_style
def plot_test_error(
    curves: Mapping[str, Sequence[Any]],
    out: str | Path,
    *,
    test_error_linear: float | None = None,
    simulation: pd.DataFrame | None = None,
    alpha_c: float | None = None,
    alpha_l: float | None = None,
    alpha_c_bracket: tuple[float, float] | None = None,
    alpha_l_bracket: tuple[float, float] | None = None,
    omega: float | None = None,
    d: int | None = None,
    global_minimum: Sequence[Any] | None = None,
) -> list[Path]:
    """Figure (a): test error vs alpha on each branch, the global minimum, the linear baseline and
    simulations.

    ``curves`` maps a branch name to its fixed points (e.g. ``{"positional": solve_curve(...), ...}``);
    invalid points are skipped.  alpha_c, alpha_l and their brackets are drawn as given (the theory's values);
    ``global_minimum``: the theory's global-minimum curve.  ``simulation`` is a store DataFrame (raw or
    aggregated); rows at ``omega`` and size ``d`` (default: the largest d) are drawn with standard-error bars.
    """
    fig, (ax,) = new_figure(width=5.0, height=4.4)
    for branch, pts in curves.items():
        v = _valid(pts)
        if v:
            x, y, e = _series(v, "test_error")
            _theory_line(ax, x, y, e, branch, f"theory, {branch}")
    _global_segments(ax, _global(curves, global_minimum), lambda p: float(p.test_error), curves=curves,
                     alpha_c=alpha_c)
    if test_error_linear is not None and finite(test_error_linear):
        ax.axhline(test_error_linear, **LINEAR_STYLE, label="linear baseline", zorder=1)
    sim, d_used = _select(simulation, omega=omega, d=d)
    if sim is not None:
        groups = _groups(sim)
        many = len({o for _, o, _ in groups}) > 1
        for init, opt, g in groups:
            y, e = _col(g, "test_error")
            _sim_errorbar(ax, g["alpha"].to_numpy(float), y, e, init, _sim_label(init, opt, d_used, many))
    _vline(ax, alpha_c, ALPHA_C_STYLE, r"$\alpha_c$", alpha_c_bracket)
    _vline(ax, alpha_l, ALPHA_L_STYLE, r"$\alpha_l$", alpha_l_bracket)
    ax.set_xlabel(ALPHA_LABEL)
    ax.set_ylabel("test error")
    ax.set_title(_title(omega))
    ax.set_xlim(left=0)
    _smooth_note(ax)
    legend_below(fig, ax)
    return style.save_figure(fig, out)


@with_style
def plot_loss_difference(
    curves: Mapping[str, Sequence[Any]],
    out: str | Path,
    *,
    simulation: pd.DataFrame | None = None,
    alpha_c: float | None = None,
    alpha_c_bracket: tuple[float, float] | None = None,
    omega: float | None = None,
    d: int | None = None,
) -> list[Path]:
    """Figure (b): train_loss(semantic) - train_loss(positional) vs alpha, theory and simulation.

    Theory: at the alphas where both branches have a valid fixed point, with a band of +-2 combined standard
    errors.  Simulation: difference of the per-init means at equal (d, alpha, optimizer), standard errors
    combined in quadrature.  Negative means the semantic minimum is the global one.
    """
    fig, (ax,) = new_figure()
    ax.axhline(0.0, color="0.5", linewidth=0.7, zorder=1)
    pairs = _match(_valid(curves.get("positional", [])), _valid(curves.get("semantic", [])))
    pairs = [(p, s) for p, s in pairs if finite(p.train_loss) and finite(s.train_loss)]
    if pairs:
        x = np.array([p.alpha for p, _ in pairs])
        y = np.array([s.train_loss - p.train_loss for p, s in pairs])
        e = np.array([math.hypot(_err(p, "train_loss"), _err(s, "train_loss")) for p, s in pairs])
        ax.plot(x, y, color="black", linestyle="-", linewidth=1.5, marker=".", markersize=5, label="theory",
                zorder=3)
        if np.any(e > 0):
            ax.fill_between(x, y - 2 * e, y + 2 * e, color="0.3", alpha=0.2, linewidth=0, zorder=2)
    sim, d_used = _select(simulation, omega=omega, d=d)
    if sim is not None and "init" in sim.columns:
        keys = [k for k in ("d", "alpha", "omega", "optimizer") if k in sim.columns]
        pos = sim[sim["init"] == "positional"]
        sem = sim[sim["init"] == "semantic"]
        merged = pos.merge(sem, on=keys, suffixes=("_pos", "_sem"))
        if len(merged):
            opts = sorted(merged["optimizer"].unique()) if "optimizer" in merged.columns else [None]
            markers = ["o", "D", "v", "^"]
            for i, opt in enumerate(opts):
                g = merged if opt is None else merged[merged["optimizer"] == opt]
                g = g.sort_values("alpha")
                diff = g["train_loss_mean_sem"].to_numpy(float) - g["train_loss_mean_pos"].to_numpy(float)
                err = np.hypot(_sem_or_zero(g, "train_loss_sem_sem"), _sem_or_zero(g, "train_loss_sem_pos"))
                label = ("simulation" + (f", d={d_used}" if d_used else "")
                         + (f", {opt}" if len(opts) > 1 else ""))
                ax.errorbar(g["alpha"].to_numpy(float), diff, yerr=err, fmt=markers[i % len(markers)],
                            color="#6a1b9a", mfc="white", markersize=4.5, capsize=2.5, elinewidth=0.9,
                            linestyle="none", label=label, zorder=4)
    _vline(ax, alpha_c, ALPHA_C_STYLE, r"$\alpha_c$", alpha_c_bracket)
    ax.set_xlabel(ALPHA_LABEL)
    ax.set_ylabel("train_loss(semantic) $-$ train_loss(positional)")
    ax.yaxis.label.set_size(9.5)
    ax.set_title(_title(omega))
    ax.set_xlim(left=0)
    ymin, ymax = ax.get_ylim()
    # say which side of zero means what, so that the sign convention can be read off the figure itself
    ax.annotate("positional is global min.", xy=(0.99, 0.98), xycoords="axes fraction", ha="right", va="top",
                fontsize=8, color="0.35")
    ax.annotate("semantic is global min.", xy=(0.99, 0.02), xycoords="axes fraction", ha="right", va="bottom",
                fontsize=8, color="0.35")
    ax.set_ylim(min(ymin, -0.05 * (ymax - ymin)), max(ymax, 0.05 * (ymax - ymin)))
    legend(ax, loc="center left")
    return style.save_figure(fig, out)


@with_style
def plot_overlaps(
    curves: Mapping[str, Sequence[Any]],
    out: str | Path,
    *,
    simulation: pd.DataFrame | None = None,
    alpha_c: float | None = None,
    omega: float | None = None,
    d: int | None = None,
    sigma: float | None = None,
    global_minimum: Sequence[Any] | None = None,
    unstable: Mapping[str, Sequence[Mapping[str, float]]] | None = None,
) -> list[Path]:
    """Figure (c): |m| (left) and |theta| (right) vs alpha, theory curves and simulation points.

    With ``sigma`` given the overlaps are divided by sigma^2, as in the study's figures.  ``unstable``: per
    branch, rows (alpha, m, theta, ...) of its unstable part (between a subcritical pitchfork and the fold
    where the branch ends), drawn thin and dashed.
    """
    fig, axes = new_figure(width=8.2, height=3.4, ncols=2)
    scale = 1.0 / sigma**2 if sigma else 1.0
    suffix = r" / $\sigma^2$" if sigma else ""
    sim, d_used = _select(simulation, omega=omega, d=d)
    for ax, name in zip(axes, ("m", "theta"), strict=True):
        for branch, pts in curves.items():
            v = _valid(pts)
            if v:
                x, y, e = _series(v, name, absolute=True)
                _theory_line(ax, x, y * scale, e * scale, branch, f"theory, {branch}")
        _global_segments(ax, _global(curves, global_minimum),
                         lambda p, name=name: abs(_scalar(p, name)) * scale, curves=curves, alpha_c=alpha_c)
        for branch, rows in (unstable or {}).items():
            rows = sorted(rows, key=lambda r: r["alpha"])
            if rows and name in rows[0]:
                ax.plot([r["alpha"] for r in rows], [abs(r[name]) * scale for r in rows],
                        color=branch_style(branch)["color"], linestyle=(0, (2, 2)), linewidth=1.0,
                        label=f"theory, {branch} (unstable)", zorder=3, gid=f"unstable-{branch}")
        if sim is not None and f"{name}_mean" in sim.columns:
            groups = _groups(sim)
            many = len({o for _, o, _ in groups}) > 1
            for init, opt, g in groups:
                y, e = _col(g, name)
                _sim_errorbar(ax, g["alpha"].to_numpy(float), np.abs(y) * scale, e * scale, init,
                              _sim_label(init, opt, d_used, many))
        _vline(ax, alpha_c, ALPHA_C_STYLE, r"$\alpha_c$")
        ax.set_xlabel(ALPHA_LABEL)
        sym = {"m": "$|m|$", "theta": r"$|\theta|$"}[name]
        ax.set_ylabel(sym + suffix)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
    axes[0].set_title("positional overlap " + _title(omega))
    axes[1].set_title("semantic overlap " + _title(omega))
    _smooth_note(axes[1])
    legend_below(fig, axes[1], ncols=4)  # one legend for both panels
    return style.save_figure(fig, out)


def _get(tr: Any, name: str) -> float | None:
    v = getattr(tr, name, None)
    return float(v) if finite(v) else None


def _bracket(tr: Any, name: str) -> tuple[float, float] | None:
    b = getattr(tr, f"{name}_bracket", None)
    if b is None or len(b) != 2 or not all(finite(v) for v in b):
        return None
    return float(b[0]), float(b[1])


def _kind(tr: Any, name: str) -> str | None:
    """What a critical value is, as the theory classified it (None for records without kinds, or no value)."""
    crit = getattr(tr, "critical", None)
    if isinstance(crit, Mapping) and name in crit and crit[name].kind is not None:
        return str(crit[name].kind)
    return None


def _search(tr: Any, name: str) -> str | None:
    """How the search for a critical value ended (None for records without one)."""
    crit = getattr(tr, "critical", None)
    if isinstance(crit, Mapping) and name in crit:
        return str(crit[name].search)
    return None


def _boundary(tr: Any) -> tuple[float | None, tuple[float, float] | None, str]:
    """alpha_c as the theory reported it: (value, interval, kind)."""
    return _get(tr, "alpha_c"), _bracket(tr, "alpha_c"), _kind(tr, "alpha_c") or "crossing"


@with_style
def plot_phase_diagram(
    transitions: Sequence[Any],
    out: str | Path,
    *,
    alpha_min: float = 0.0,
    alpha_max: float = 2.0,
    simulation: pd.DataFrame | None = None,
    d: int | None = None,
    show_spinodals: bool = True,
) -> list[Path]:
    """Figure (d): the (alpha, omega) phase diagram.

    alpha_c(omega), as each transition reported it, separates the positional (left) and semantic (right) global
    minimum; the hatched region right of alpha_l(omega) is where the attention model beats the linear
    positional baseline.  Brackets are drawn as horizontal error bars, spinodals as thin lines.  With
    ``simulation`` (a sweep store spanning several omegas and alphas) the simulated
    train_loss(semantic) - train_loss(positional) at size ``d`` (default: the largest) is shown as a heat
    map underneath.
    """
    trs = sorted([t for t in transitions if finite(getattr(t, "omega", None))], key=lambda t: t.omega)
    if not trs:
        raise InputError("phase diagram: no transition results to plot")
    fig, (ax,) = new_figure(width=5.4, height=5.0)
    omegas = np.array([t.omega for t in trs])

    heat = _heatmap(ax, fig, simulation, d)

    # region where attention beats the linear baseline: alpha > alpha_l(omega)
    hatch_om, hatch_al, beyond_l = _beats_linear_edge(trs, alpha_max)
    if len(hatch_om):
        ax.fill_betweenx(hatch_om, hatch_al, alpha_max, where=np.isfinite(hatch_al), interpolate=False,
                         facecolor="none" if heat else "0.92", edgecolor="0.45", hatch="////", linewidth=0.0,
                         zorder=1, label="attention beats linear baseline")
    for w0, a0, w1 in beyond_l:  # alpha_l leaves the range between w0 and w1: its line continues to the edge
        ax.plot([a0, alpha_max], [w0, w1], color=ALPHA_L_STYLE["color"], linestyle=(0, (1, 1.5)), linewidth=1.2,
                zorder=3)
    far_l = [float(t.omega) for t in trs if _get(t, "alpha_l") is None and never_beats_linear(t)]
    if far_l:
        ax.plot([1 - 3.2 * _EDGE] * len(far_l), far_l, transform=ax.get_yaxis_transform(),  # beside alpha_c's
                marker=">", markersize=6, color=ALPHA_L_STYLE["color"], mfc="white", linestyle="none",
                label=rf"$\alpha_l > {alpha_max:g}$", zorder=5)

    for name, line_style, marker, label in (
        ("alpha_c", {"color": "black", "linestyle": "-"}, "o", r"$\alpha_c$ (positional | semantic)"),
        ("alpha_l", {"color": ALPHA_L_STYLE["color"], "linestyle": "--"}, "s", r"$\alpha_l$ (beats linear)"),
    ):
        if name == "alpha_c":
            pts = [(t.omega, *_boundary(t)) for t in trs]
        else:
            pts = [(t.omega, _get(t, name), _bracket(t, name), "crossing") for t in trs]
        pts = [p for p in pts if p[1] is not None]
        if name == "alpha_c":
            # positional wins wherever both branches exist: the boundary lies beyond the computed range
            beyond = [t.omega for t in trs if _search(t, "alpha_c") == "above range"]
            if beyond:  # inside the frame, at its right edge (x in axes fractions)
                ax.plot([1 - _EDGE] * len(beyond), beyond, transform=ax.get_yaxis_transform(), marker=">",
                        markersize=6, color="black", linestyle="none", label=rf"$\alpha_c > {alpha_max:g}$",
                        zorder=5)
        if not pts:
            continue
        y = np.array([p[0] for p in pts])
        x = np.array([p[1] for p in pts])
        lo = np.array([x[i] - (p[2][0] if p[2] else x[i]) for i, p in enumerate(pts)])
        hi = np.array([(p[2][1] if p[2] else x[i]) - x[i] for i, p in enumerate(pts)])
        ax.errorbar(x, y, xerr=np.clip(np.vstack([lo, hi]), 0, None), marker=marker, markersize=4.5,
                    mfc="white", capsize=2.0, linewidth=1.5, elinewidth=0.8, label=label, zorder=4, **line_style)
        at_spinodal = np.array([p[3] == "at spinodal" for p in pts])
        if at_spinodal.any():
            ax.plot(x[at_spinodal], y[at_spinodal], marker="v", markersize=6, color="black", linestyle="none",
                    label="switch at the semantic spinodal", zorder=5)

    if show_spinodals:
        spinodals = (("alpha_sem_appears", (0, (1, 1.2)), "spinodal: semantic appears"),
                     ("alpha_pos_vanishes", (0, (3, 1, 1, 1, 1, 1)), "spinodal: positional vanishes"))
        for name, ls, label in spinodals:
            pts = [(t.omega, _get(t, name)) for t in trs if _get(t, name) is not None]
            if len(pts) >= 1:
                ax.plot([p[1] for p in pts], [p[0] for p in pts], color="0.4", linestyle=ls, linewidth=1.0,
                        marker="." if len(pts) == 1 else None, label=label, zorder=3)

    ax.set_xlim(alpha_min, alpha_max)
    pad = 0.04 * max(omegas.max() - omegas.min(), 0.1)  # room for the markers on the first and last omega
    ax.set_ylim(omegas.min() - pad, omegas.max() + pad)
    _region_labels(ax, trs, alpha_min, alpha_max, show_spinodals)
    ax.set_xlabel(ALPHA_LABEL)
    ax.set_ylabel(r"positional weight $\omega$")
    ax.set_title("phase diagram (global minimum)")
    legend_below(fig, ax, ncols=2, order=("alpha_c (", "alpha_l (", "attention", "switch", "alpha_c >", "alpha_l >"))
    return style.save_figure(fig, out)


_EDGE = 0.012  # axes fraction between the right frame and the centre of a "beyond the range" marker


def _beats_linear_edge(trs: Sequence[Any], alpha_max: float) -> tuple[np.ndarray, np.ndarray,
                                                                       list[tuple[float, float, float]]]:
    """The hatched region's left edge (omegas, alpha_l; NaN: no region there) and where alpha_l leaves the
    range: (omega, alpha_l) of the last computed point and the next omega, whose alpha_l lies above alpha_max.
    There the edge runs on to (alpha_max, next omega) -- the same straight line between computed omegas as
    everywhere else -- instead of stopping flat at the last point."""
    om = [float(t.omega) for t in trs]
    al = [_get(t, "alpha_l") for t in trs]
    above = [al[i] is None and never_beats_linear(t) for i, t in enumerate(trs)]
    xs: list[float] = []
    ys: list[float] = []
    beyond: list[tuple[float, float, float]] = []
    for i, (w, a) in enumerate(zip(om, al, strict=True)):
        if a is not None:
            xs.append(w)
            ys.append(a)
            continue
        prev_found = i > 0 and al[i - 1] is not None
        next_found = i + 1 < len(om) and al[i + 1] is not None
        if above[i] and (prev_found or next_found):
            if prev_found:
                beyond.append((om[i - 1], float(al[i - 1]), w))  # type: ignore[arg-type]
            if next_found:
                beyond.append((om[i + 1], float(al[i + 1]), w))  # type: ignore[arg-type]
            xs.append(w)
            ys.append(alpha_max)  # zero width at the next omega
        else:
            xs.append(w)
            ys.append(np.nan)
    return np.array(xs), np.array(ys, dtype=float), beyond


def never_beats_linear(tr: Any) -> bool:
    """The transition's own global minimum is not below its linear baseline at the largest alpha it solved (so
    alpha_l, if any, lies above the range); False when the record carries no curves to tell."""
    curves = getattr(tr, "curves", None)
    lin = getattr(tr, "test_error_linear", None)
    if not curves or not finite(lin):
        return False
    from attnphase.theory.state_evolution.results import global_minimum_curve

    gm = [p for p in global_minimum_curve(curves) if finite(getattr(p, "test_error", None))]
    return bool(gm) and float(max(gm, key=lambda p: p.alpha).test_error) >= float(lin)


def _region_labels(ax: Axes, trs: Sequence[Any], alpha_min: float, alpha_max: float,
                   spinodals: bool = True) -> None:
    """Label the regions left ("positional") and right ("semantic") of the alpha_c(omega) curve, each at the
    candidate point farthest from every drawn line (alpha_c, alpha_l, the spinodals) and from the frame, so the
    labels never sit on a line."""
    pts = sorted((t.omega, _boundary(t)[0]) for t in trs if _boundary(t)[0] is not None)
    if not pts:
        return
    w = np.array([p[0] for p in pts])
    ac = np.array([p[1] for p in pts])
    y0, y1 = ax.get_ylim()
    span_x = alpha_max - alpha_min
    span_y = (y1 - y0) or 1.0
    box = {"boxstyle": "round,pad=0.25", "facecolor": "white", "edgecolor": "0.6", "alpha": 0.9}
    gx, gy = np.meshgrid(np.linspace(0.08, 0.92, 29), np.linspace(0.1, 0.9, 17))
    gx, gy = gx.ravel(), gy.ravel()
    xs = alpha_min + gx * span_x
    ys = y0 + gy * span_y
    boundary = np.interp(ys, w, ac)  # alpha_c(omega), held constant beyond the computed omegas
    # distance (in axes fractions) to the curve, measured along alpha, and to the frame
    dist_curve = np.abs(xs - boundary) / span_x
    names = ("alpha_l",) + (("alpha_sem_appears", "alpha_pos_vanishes") if spinodals else ())
    for name in names:
        line = sorted((float(t.omega), _get(t, name)) for t in trs if _get(t, name) is not None)
        if not line:
            continue
        lw = np.array([p[0] for p in line])
        la = np.array([p[1] for p in line])
        inside = (ys >= lw.min() - 0.03 * span_y) & (ys <= lw.max() + 0.03 * span_y)
        d_line = np.where(inside, np.abs(xs - np.interp(ys, lw, la)) / span_x, np.inf)
        dist_curve = np.minimum(dist_curve, d_line)
    dist_frame = np.minimum.reduce([gx, 1 - gx, gy, 1 - gy])
    score = np.minimum(dist_curve, 2 * dist_frame)
    for text, mask in (("positional", xs < boundary), ("semantic", xs > boundary)):
        if not mask.any() or score[mask].max() < 0.04:
            continue  # the region is too thin to hold a label
        i = np.flatnonzero(mask)[np.argmax(score[mask])]
        ax.text(xs[i], ys[i], text, ha="center", va="center", fontsize=9.5, fontweight="bold", bbox=box,
                zorder=5)


def _heatmap(ax: Axes, fig: Figure, simulation: pd.DataFrame | None, d: int | None) -> bool:
    df = _aggregated(simulation)
    if df is None or not {"init", "omega", "alpha", "train_loss_mean"} <= set(df.columns):
        return False
    if "d" in df.columns:
        d = int(df["d"].max()) if d is None else d
        df = df[df["d"] == d]
    if "optimizer" in df.columns and df["optimizer"].nunique() > 1:
        df = df[df["optimizer"] == sorted(df["optimizer"].unique())[0]]
    keys = ["alpha", "omega"]
    pos = df[df["init"] == "positional"][keys + ["train_loss_mean"]]
    sem = df[df["init"] == "semantic"][keys + ["train_loss_mean"]]
    merged = pos.merge(sem, on=keys, suffixes=("_pos", "_sem"))
    if merged["omega"].nunique() < 2 or merged["alpha"].nunique() < 2:
        return False  # a heat map needs a 2-d grid; a single line of points says nothing a scatter can't
    merged["diff"] = merged["train_loss_mean_sem"] - merged["train_loss_mean_pos"]
    grid = merged.pivot_table(index="omega", columns="alpha", values="diff")
    z = grid.to_numpy(float)
    vmax = float(np.nanmax(np.abs(z))) or 1.0
    mesh = ax.pcolormesh(grid.columns.to_numpy(float), grid.index.to_numpy(float), np.ma.masked_invalid(z),
                         shading="nearest", cmap="RdBu_r", norm=mcolors.Normalize(-vmax, vmax), alpha=0.75,
                         zorder=0, rasterized=True)
    cb = fig.colorbar(mesh, ax=ax, pad=0.02, shrink=0.9)
    cb.set_label("simulated train_loss(sem.) $-$ train_loss(pos.)" + (f", d={d}" if d else ""), fontsize=8)
    cb.ax.tick_params(labelsize=8)
    return True


@with_style
def plot_finite_size(
    simulation: pd.DataFrame,
    out: str | Path,
    *,
    alpha: float,
    omega: float | None = None,
    theory: Mapping[str, Any] | None = None,
    test_error_linear: float | None = None,
    quantity: str = "test_error",
) -> list[Path]:
    """Figure (e): simulated ``quantity`` (default test_error) vs d at fixed alpha, one series per init, with
    the d -> infinity theory value of each branch (``theory``: branch -> FixedPoint) as a horizontal line."""
    df = _aggregated(simulation)
    if df is None:
        raise InputError("finite-size plot: no simulation results")
    if omega is not None and "omega" in df.columns:
        df = df[np.isclose(df["omega"].astype(float), float(omega), rtol=0, atol=1e-9)]
    df = df[np.isclose(df["alpha"].astype(float), float(alpha), rtol=0, atol=1e-9)]
    if len(df) == 0:
        raise InputError(f"finite-size plot: no simulation results at alpha = {alpha:g}"
                         + (f", omega = {omega:g}" if omega is not None else ""))
    fig, (ax,) = new_figure()
    opts = sorted(df["optimizer"].unique()) if "optimizer" in df.columns else [None]
    for init, g0 in df.groupby("init", sort=True):
        for opt in opts:
            g = g0 if opt is None else g0[g0["optimizer"] == opt]
            if len(g) == 0:
                continue
            g = g.sort_values("d")
            y, e = _col(g, quantity)
            st = branch_style(str(init))
            label = f"sim., {init} init" + (f", {opt}" if len(opts) > 1 else "")
            ax.errorbar(g["d"].to_numpy(float), y, yerr=e, fmt=st["marker"] + "-", color=st["color"],
                        linewidth=0.8, markersize=4.5, capsize=2.5, elinewidth=0.9, label=label, zorder=4)
    for branch, fp in (theory or {}).items():
        if fp is None or not getattr(fp, "valid", True):
            continue
        val = float(getattr(fp, quantity))
        st = branch_style(branch)
        # the value in the label: two lines may lie within a line width (at alpha_l the semantic error is the
        # baseline's)
        ax.axhline(val, color=st["color"], linestyle=st["linestyle"], linewidth=1.4,
                   label=rf"theory $d\to\infty$, {branch} ({val:.4g})", zorder=3)
        err = _err(fp, quantity)
        if err > 0:
            ax.axhspan(val - 2 * err, val + 2 * err, color=st["color"], alpha=0.15, linewidth=0, zorder=2)
    if test_error_linear is not None and quantity == "test_error" and finite(test_error_linear):
        ax.axhline(test_error_linear, **LINEAR_STYLE, label=f"linear baseline ({test_error_linear:.4g})",
                   zorder=1)
    ax.set_xscale("log")
    ds = np.unique(df["d"].to_numpy(int))
    ax.set_xticks(ds)
    ax.set_xticklabels([str(v) for v in ds])
    ax.minorticks_off()
    ax.set_xlabel("dimension $d$")
    ax.set_ylabel(quantity.replace("_", " ") if quantity == "test_error" else quantity)
    ax.set_title(_title(omega, rf"$\alpha = {alpha:g}$"))
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo - 0.06 * (hi - lo), hi + 0.06 * (hi - lo))  # no line on the frame
    legend_below(fig, ax, ncols=2)  # inside, it hid the largest d's error bars
    return style.save_figure(fig, out)
