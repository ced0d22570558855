"""Figures of the online-SGD dynamics: the ODE with the finite-d runs overlaid, and the dynamical phase diagram.

The functions draw arrays they are given (computed by attnphase.theory.dynamics and attnphase.experiments.online)
and compute no physics.  Each writes a PNG and a PDF with the same stem and returns both paths.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from attnphase.errors import InputError
from attnphase.plots import style

__all__ = ["plot_dynamical_diagram", "plot_dynamics"]

_PANELS = (("q", "q"), ("m", "|m|"), ("theta", r"|$\theta$|"), ("test_error", "test error"))
MECHANISM_COLOURS = {"positional": style.BRANCH_STYLE["positional"]["color"],
                     "semantic": style.BRANCH_STYLE["semantic"]["color"],
                     "agnostic": style.BRANCH_STYLE["agnostic"]["color"], "mixed": "#8e44ad"}


@style.with_style
def plot_dynamics(ode: Mapping[str, Sequence[float]] | None, out: str | Path,
                  sims: Sequence[Mapping[str, Any]] = (), title: str | None = None, log_overlaps: bool = True,
                  extra_ode: Sequence[Mapping[str, Any]] = ()) -> list[Path]:
    """q, |m|, |theta| and the test error against t = samples / d.

    ode: {"t", "q", "m", "theta", "test_error"} (one ODE trajectory, drawn black) or None; extra_ode: more ODE curves
    {"label", "t", "q", ...} (dashed); sims: one item per finite-d run {"label", "t", "<name>", "<name>_sem"
    (optional), "seeds": [{"t", "<name>"}, ...] (optional, thin lines)}.  log_overlaps: log scale for |m| and |theta|.
    """
    if ode is None and not sims:
        raise InputError("nothing to draw: neither an ODE trajectory nor a simulation")
    fig = Figure(figsize=(10.5, 6.4), layout="constrained")
    axes = fig.subplots(2, 2).ravel()
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#17becf"]
    for k, sim in enumerate(sims):
        c = colours[k % len(colours)]
        t = np.asarray(sim["t"], dtype=float)
        for ax, (key, _) in zip(axes, _PANELS, strict=True):
            for seed in sim.get("seeds", ()):
                ax.plot(seed["t"], seed[key], color=c, linewidth=0.5, alpha=0.35)
            y = np.asarray(sim[key], dtype=float)
            ax.plot(t, y, color=c, linewidth=1.4, label=sim.get("label"))
            sem = sim.get(f"{key}_sem")
            if sem is not None:
                s = np.asarray(sem, dtype=float)
                ax.fill_between(t, y - s, y + s, color=c, alpha=0.2, linewidth=0)
    for j, curve in enumerate(extra_ode):
        for ax, (key, _) in zip(axes, _PANELS, strict=True):
            ax.plot(curve["t"], curve[key], color="0.35", linestyle=("--", ":", "-.")[j % 3], linewidth=1.2,
                    label=curve.get("label"))
    if ode is not None:
        for ax, (key, _) in zip(axes, _PANELS, strict=True):
            ax.plot(ode["t"], ode[key], color="black", linewidth=1.8, label=ode.get("label", "ODE (d -> infinity)"))
    for ax, (key, name) in zip(axes, _PANELS, strict=True):
        ax.set_xlabel("t = samples / d")
        ax.set_ylabel(name)
        if log_overlaps and key in ("m", "theta"):
            ax.set_yscale("log")
    style.legend_below(fig, axes[2], ncols=4)
    if title:
        fig.suptitle(title, fontsize=10)
    return style.save_figure(fig, out)


@style.with_style
def plot_dynamical_diagram(cells: Sequence[Mapping[str, Any]], out: str | Path, y: str = "init_scale",
                           alpha_c: Mapping[str, Sequence[float | None]] | None = None,
                           title: str | None = None) -> list[Path]:
    """Left: the mechanism online SGD ends in (colour) over omega and `y` (init_scale or lr), each cell annotated with
    the escape time of its mechanism.  Right (when `alpha_c` = {"omega": [...], "alpha_c": [...]} is given): the
    static transition alpha_c(omega), the sample complexity above which the semantic minimum is the global one.

    cells: [{"omega", y, "mechanism", "escape_m", "escape_theta"}, ...].
    """
    if not cells:
        raise InputError("no cells to draw")
    oms = sorted({float(c["omega"]) for c in cells})
    ys = sorted({float(c[y]) for c in cells})
    ncols = 2 if alpha_c else 1
    fig = Figure(figsize=(5.2 * ncols, 3.9), layout="constrained")
    axes = fig.subplots(1, ncols)
    axes = list(np.atleast_1d(axes))
    ax = axes[0]
    seen: set[str] = set()
    for c in cells:
        i, j = oms.index(float(c["omega"])), ys.index(float(c[y]))
        mech = str(c["mechanism"])
        col = MECHANISM_COLOURS.get(mech, "white")
        ax.add_patch(_rect(i, j, col, label=None if mech in seen else mech))
        seen.add(mech)
        esc = c.get("escape_m") if mech == "positional" else c.get("escape_theta") if mech == "semantic" else None
        if mech == "mixed":
            esc = min((v for v in (c.get("escape_m"), c.get("escape_theta")) if v is not None and math.isfinite(v)),
                      default=None)
        txt = f"{esc:.3g}" if esc is not None and math.isfinite(esc) else "-"
        ax.text(i, j, txt, ha="center", va="center", fontsize=7.5, color="white")
    ax.set_xlim(-0.5, len(oms) - 0.5)
    ax.set_ylim(-0.5, len(ys) - 0.5)
    ax.set_xticks(range(len(oms)), [f"{v:g}" for v in oms])
    ax.set_yticks(range(len(ys)), [f"{v:g}" for v in ys])
    ax.set_xlabel(r"$\omega$")
    ax.set_ylabel({"init_scale": "init scale s", "lr": r"learning rate $\eta$"}.get(y, y))
    ax.set_title("mechanism at t_max (escape time written in)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7.5, frameon=False)
    if alpha_c:
        a2 = axes[1]
        om = [o for o, a in zip(alpha_c["omega"], alpha_c["alpha_c"], strict=True) if a is not None]
        ac = [a for a in alpha_c["alpha_c"] if a is not None]
        a2.plot(om, ac, **{**style.ALPHA_C_STYLE, "marker": "o"}, label=r"static $\alpha_c(\omega)$")
        a2.set_xlabel(r"$\omega$")
        a2.set_ylabel(r"$\alpha_c$ (semantic global minimum above)")
        a2.set_title("static transition")
        style.legend(a2)
    if title:
        fig.suptitle(title, fontsize=10)
    return style.save_figure(fig, out)


def _rect(i: int, j: int, colour: str, label: str | None) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((i - 0.5, j - 0.5), 1.0, 1.0, facecolor=colour, edgecolor="white", label=label)
