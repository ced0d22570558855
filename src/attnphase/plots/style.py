"""The one style and the one save rule of every attnphase figure: colours, line styles and markers per branch,
text sizes, legends placed outside the data, and PNG + PDF written side by side (the stem kept whole).

Figures are built with the object-oriented API (``matplotlib.figure.Figure``, rendered by Agg) rather than pyplot,
so that importing a plots module never changes the caller's backend and no global figure state leaks.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure

# Line style + marker + colour per branch, so that a grey-scale print still tells them apart.
BRANCH_STYLE: dict[str, dict[str, Any]] = {
    "positional": {"color": "#1f5fa8", "linestyle": "--", "marker": "o", "label": "positional"},
    "semantic": {"color": "#c0392b", "linestyle": "-.", "marker": "s", "label": "semantic"},
    "agnostic": {"color": "#7f7f7f", "linestyle": ":", "marker": "^", "label": "agnostic"},
}
GLOBAL_STYLE: dict[str, Any] = {"color": "0.15", "linewidth": 5.0, "alpha": 0.25, "solid_capstyle": "round"}
LINEAR_STYLE: dict[str, Any] = {"color": "0.35", "linestyle": (0, (1, 1.5)), "linewidth": 1.4}
ALPHA_C_STYLE: dict[str, Any] = {"color": "black", "linestyle": (0, (4, 2)), "linewidth": 0.9}
ALPHA_L_STYLE: dict[str, Any] = {"color": "#2e7d32", "linestyle": (0, (6, 2, 1, 2)), "linewidth": 0.9}
_RC: dict[str, Any] = {
    "font.size": 9.5,
    "axes.labelsize": 10.5,
    "axes.titlesize": 10.5,
    "legend.fontsize": 8.0,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
}
ALPHA_LABEL = r"sample complexity $\alpha = n/d$"
_DPI = 200
P = ParamSpec("P")
R = TypeVar("R")


def branch_style(branch: str) -> dict[str, Any]:
    return BRANCH_STYLE.get(branch, {"color": "0.3", "linestyle": "-", "marker": "x", "label": branch})


def with_style(func: Callable[P, R]) -> Callable[P, R]:
    """Run a figure function inside an rc_context: text sizes are read from rcParams when each artist is
    created, so the whole body (not just figure creation) must see them; the caller's rcParams stay as
    they were."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with matplotlib.rc_context(_RC):
            return func(*args, **kwargs)

    return wrapper


def new_figure(width: float = 5.0, height: float = 3.6, ncols: int = 1) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0].tolist()
    for ax in axes:
        ax.tick_params(direction="in", top=True, right=True)
        ax.grid(True, color="0.9", linewidth=0.6)
        ax.set_axisbelow(True)
    return fig, axes


def legend(ax: Axes, **kw: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(frameon=True, framealpha=0.9, edgecolor="0.8", **kw)


def legend_below(fig: Figure, ax: Axes, ncols: int = 2, order: Sequence[str] = ()) -> None:
    """A legend under the axes: with up to ten entries, one inside would hide data points.  Entries whose
    label (TeX markup removed) starts with an element of ``order`` come first, in that order."""
    handles, labels = ax.get_legend_handles_labels()
    if order:
        def rank(label: str) -> int:
            plain = label.replace("$", "").replace("\\", "")
            return next((i for i, o in enumerate(order) if plain.startswith(o)), len(order))

        pairs = sorted(zip(handles, labels, strict=True), key=lambda hl: rank(hl[1]))
        handles, labels = [h for h, _ in pairs], [lab for _, lab in pairs]
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=min(ncols, len(handles)), frameon=False)


def save_figure(fig: Figure, out: str | Path) -> list[Path]:
    """Write ``fig`` as PNG and PDF next to each other (same stem) and return ``[png, pdf]``.

    ``out`` may carry a .png/.pdf suffix or none; any other suffix is kept as part of the stem so that a
    name like ``fig.omega0.3`` is not truncated.
    """
    out = Path(out)
    stem = out.with_suffix("") if out.suffix.lower() in (".png", ".pdf") else out
    stem.parent.mkdir(parents=True, exist_ok=True)
    png = stem.parent / (stem.name + ".png")
    pdf = stem.parent / (stem.name + ".pdf")
    fig.savefig(png, dpi=_DPI)
    fig.savefig(pdf)
    return [png, pdf]


def finite(x: Any) -> bool:
    """x converts to a finite float."""
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False
