"""The study's appendix figure: test error of a rank-2 student against the rank-1 student across alpha.

The function draws records computed elsewhere (``benchmarks/rank2.py`` writes them; ``attnphase plot rank2``
reads them) and computes no physics.  Records are a mapping with two lists:

- ``theory``: rows ``{"rank", "branch", "alpha", "status", "test_error", "test_error_err", "train_loss"}``, one
  per fixed point (status "ok" rows only are drawn), and rows with ``"branch": "global"`` marking the theory's
  global minimum of that rank at that alpha (the lowest training loss, chosen by the script);
- ``simulation``: rows ``{"rank", "alpha", "init", "seed", "d", "test_error", "train_loss"}``.

Simulation points: for every (rank, alpha, seed) the run with the lower training loss of the two starts (the
minimum training found), then mean and standard error over seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from attnphase.errors import InputError
from attnphase.plots import style
from attnphase.plots.global_line import INTERPOLATED_NOTE, GlobalPath, global_path
from attnphase.plots.style import finite

__all__ = ["RANK_STYLE", "plot_rank_test_error", "simulation_points", "theory_series"]

RANK_STYLE: dict[int, dict[str, Any]] = {
    1: {"color": "#1f5fa8", "marker": "o", "label": "rank 1"},
    2: {"color": "#c0392b", "marker": "s", "label": "rank 2"},
}
BRANCH_LINESTYLE = {"positional": "--", "semantic": "-.", "free": ":", "agnostic": (0, (1, 3))}




def theory_series(rows: Sequence[Mapping[str, Any]], rank: int, branch: str) -> tuple[np.ndarray, np.ndarray]:
    """(alpha, test_error) of the status-ok theory rows of one rank and branch, sorted by alpha."""
    pts = sorted((float(r["alpha"]), float(r["test_error"])) for r in rows
                 if int(r["rank"]) == rank and r["branch"] == branch and r.get("status", "ok") == "ok"
                 and finite(r.get("test_error")))
    if not pts:
        return np.array([]), np.array([])
    a, t = zip(*pts, strict=True)
    return np.array(a), np.array(t)


def simulation_points(rows: Sequence[Mapping[str, Any]], rank: int,
                      d: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(alpha, mean, sem) of the simulated test error of one rank: per seed the start with the lower training
    loss, then mean and standard error (0 for a single seed) over seeds."""
    best: dict[tuple[float, int], Mapping[str, Any]] = {}
    for r in rows:
        if int(r["rank"]) != rank or (d is not None and int(r["d"]) != d) or not finite(r.get("train_loss")):
            continue
        key = (float(r["alpha"]), int(r["seed"]))
        if key not in best or float(r["train_loss"]) < float(best[key]["train_loss"]):
            best[key] = r
    alphas = sorted({a for a, _ in best})
    mean, sem = [], []
    for a in alphas:
        v = np.array([float(r["test_error"]) for (b, _), r in best.items() if b == a])
        mean.append(float(v.mean()))
        sem.append(float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0)
    return np.array(alphas), np.array(mean), np.array(sem)


def _global(rows: Sequence[Mapping[str, Any]], rank: int, alpha_c: float | None) -> GlobalPath | None:
    """The drawn global minimum of one rank: along the branch the records chose (``of``) at each alpha, jumping at
    the switch (alpha_c where given) instead of sloping between the grid points around it."""
    glob = [r for r in rows if int(r["rank"]) == rank and r["branch"] == "global" and r.get("status", "ok") == "ok"
            and finite(r.get("test_error"))]
    if not glob:
        return None
    own = {}
    for r in rows:
        if int(r["rank"]) == rank and r["branch"] != "global" and r.get("status", "ok") == "ok" \
                and finite(r.get("test_error")) and finite(r.get("train_loss")):
            own.setdefault(str(r["branch"]), []).append(
                (float(r["alpha"]), float(r["test_error"]), float(r["train_loss"])))
    # rows without ``of`` (older records) cannot say where the branch changes: one run, drawn as given
    along = [(str(r.get("of", "global")), float(r["alpha"]), float(r["test_error"])) for r in glob]
    return global_path(along, own, alpha_c)


def _critical(records: Mapping[str, Any], alpha_c: Mapping[int, float] | None) -> dict[int, float]:
    """alpha_c per rank: the argument, else the records' own ``alpha_c`` mapping (rank -> value, keys may be
    strings as JSON writes them)."""
    given = alpha_c if alpha_c is not None else records.get("alpha_c") or {}
    if not isinstance(given, Mapping):
        raise InputError(f"alpha_c must map a rank to a value, got {type(given).__name__}")
    out = {}
    for k, v in given.items():
        if not finite(v):
            continue
        try:
            out[int(k)] = float(v)
        except (TypeError, ValueError):
            raise InputError(f"alpha_c: rank {k!r} is not an integer") from None
    return out


def plot_rank_test_error(records: Mapping[str, Sequence[Mapping[str, Any]]], out: str | Path,
                         omega: float | None = None, d: int | None = None,
                         test_error_linear: float | None = None,
                         alpha_c: Mapping[int, float] | None = None) -> list[Path]:
    """Test error against alpha for each student rank in the records: the theory's global minimum (thick line,
    a vertical jump where it changes branch: at ``alpha_c[rank]`` (or the records' ``alpha_c``) when given,
    else at the interpolated train-loss crossing, which the legend then says), each valid branch (thin, line
    style per branch) and the simulations (markers with one-standard-error bars).
    Writes OUT.png and OUT.pdf and returns both paths."""
    critical = _critical(records, alpha_c)
    theory = list(records.get("theory", ()))
    sims = list(records.get("simulation", ()))
    ranks = sorted({int(r["rank"]) for r in theory} | {int(r["rank"]) for r in sims})
    if not ranks:
        raise InputError("the records hold neither theory nor simulation rows")
    fig = Figure(figsize=(5.6, 4.6), layout="constrained")
    ax = fig.add_subplot()
    ax.grid(True, color="0.9", linewidth=0.6)
    ax.set_axisbelow(True)
    for rank in ranks:
        rank_style = RANK_STYLE.get(rank, {"color": "0.3", "marker": "x", "label": f"rank {rank}"})
        path = _global(theory, rank, critical.get(rank))
        if path is not None and path.x:
            note = f", {INTERPOLATED_NOTE}" if path.switches and path.interpolated else ""
            ax.plot(path.x, path.y, color=rank_style["color"], linewidth=2.6, alpha=0.55, solid_capstyle="round",
                    label=f"{rank_style['label']} theory (global minimum{note})", gid=f"global-r{rank}")
        for branch, ls in BRANCH_LINESTYLE.items():
            x, y = theory_series(theory, rank, branch)
            if len(x):
                ax.plot(x, y, color=rank_style["color"], linestyle=ls, linewidth=1.0,
                        label=f"{rank_style['label']} {branch}" + (" (mixed)" if branch == "free" else ""),
                        gid=f"{branch}-r{rank}")
        x, m, e = simulation_points(sims, rank, d)
        if len(x):
            ax.errorbar(x, m, yerr=e, color=rank_style["color"], marker=rank_style["marker"], linestyle="none",
                        markersize=5, capsize=2.5, markerfacecolor="white",
                        label=f"{rank_style['label']} simulation", gid=f"sim-r{rank}")
    if test_error_linear is not None and finite(test_error_linear):
        ax.axhline(float(test_error_linear), color="0.35", linestyle=(0, (1, 1.5)), linewidth=1.2,
                   label="linear baseline", gid="linear")
    ax.set_xlabel(r"sample complexity $\alpha = n/d$")
    ax.set_ylabel("test error")
    bits = [f"$\\omega = {omega:g}$" if omega is not None else "", f"$d = {d}$" if d is not None else ""]
    ax.set_title("rank-2 vs rank-1 student" + (" (" + ", ".join(b for b in bits if b) + ")" if any(bits) else ""))
    # Below the axes: inside, ten entries hide the simulation points.
    fig.legend(loc="outside lower center", fontsize=7, frameon=False, ncols=2)
    return style.save_figure(fig, out)
