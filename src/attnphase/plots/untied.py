"""Tied vs untied student against alpha (issue 10): test error, m and theta, simulation against both theories.

The function draws records computed elsewhere (``benchmarks/untied.py --json/--plot`` writes them; ``attnphase
plot untied`` reads them) and computes no physics.  Records are a mapping with two lists:

- ``theory``: rows ``{"student", "branch", "alpha", "status", "test_error", "m", "theta"}``, one per fixed point
  (student "tied" or "untied", branch "positional" or "semantic"); rows with status "ok" are drawn as lines,
  solid for the tied theory, dashed for the untied one;
- ``runs``: one record per simulation (``SimulationResult.to_dict()``): ``{"student", "init", "alpha",
  "seed", "test_error", "m", "theta", ...}``; per (student, init, alpha) the mean and standard error over seeds
  are drawn as markers with error bars, shifted sideways by :func:`dodge` so the six series do not overlap.
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
from attnphase.plots.style import BRANCH_STYLE, finite

__all__ = ["QUANTITIES", "dodge", "plot_untied", "simulation_series", "theory_series"]

QUANTITIES = ("test_error", "m", "theta")
STUDENTS = ("tied", "untied")
BRANCHES = ("positional", "semantic")
INITS = ("positional", "semantic", "random")
_LABEL = {"test_error": "test error", "m": r"$m$ (positional overlap)", "theta": r"$\theta$ (semantic overlap)"}
_COLOR = {"positional": BRANCH_STYLE["positional"]["color"], "semantic": BRANCH_STYLE["semantic"]["color"],
          "random": "0.35"}  # the branch colours of every attnphase figure
_MARKER = {"tied": "o", "untied": "s"}
_LINESTYLE = {"tied": "-", "untied": "--"}
_DODGE = 0.018  # alpha units between neighbouring simulation series


def dodge(student: str, init: str) -> float:
    """Sideways shift (in alpha) of the markers of one (student, init) series; 0 for unknown inits."""
    if init not in INITS:
        return 0.0
    k = STUDENTS.index(student) * len(INITS) + INITS.index(init)
    return (k - (len(STUDENTS) * len(INITS) - 1) / 2) * _DODGE




def _check(records: Any) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    if not isinstance(records, Mapping):
        raise InputError(f"records must be a mapping with 'theory' and 'runs' lists, got {type(records).__name__}")
    theory, runs = list(records.get("theory") or ()), list(records.get("runs") or ())
    if not theory and not runs:
        raise InputError("the records hold neither theory rows nor simulation runs")
    for i, r in enumerate(theory):
        if not isinstance(r, Mapping) or r.get("student") not in STUDENTS or r.get("branch") not in BRANCHES \
                or not finite(r.get("alpha")):
            raise InputError(f"theory row {i}: needs student in {STUDENTS}, branch in {BRANCHES} and a finite "
                             f"alpha, got {r!r}")
    for i, r in enumerate(runs):
        if not isinstance(r, Mapping) or r.get("student", "tied") not in STUDENTS or not r.get("init") \
                or not finite(r.get("alpha")):
            raise InputError(f"run {i}: needs student in {STUDENTS}, an init and a finite alpha, got {r!r}")
    return theory, runs


def theory_series(rows: Sequence[Mapping[str, Any]], student: str, branch: str,
                  quantity: str) -> tuple[np.ndarray, np.ndarray]:
    """(alpha, value) of the status-ok theory rows of one student and branch, sorted by alpha."""
    pts = sorted((float(r["alpha"]), float(r[quantity])) for r in rows
                 if r["student"] == student and r["branch"] == branch and r.get("status", "ok") == "ok"
                 and finite(r.get(quantity)))
    if not pts:
        return np.array([]), np.array([])
    a, v = zip(*pts, strict=True)
    return np.array(a), np.array(v)


def simulation_series(runs: Sequence[Mapping[str, Any]], student: str, init: str,
                      quantity: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(alpha, mean, sem) over seeds of one quantity of the runs of one (student, init); sem is 0 for one run.
    Runs without a finite value of the quantity are left out."""
    by_alpha: dict[float, list[float]] = {}
    for r in runs:
        if r.get("student", "tied") == student and r["init"] == init and finite(r.get(quantity)):
            by_alpha.setdefault(float(r["alpha"]), []).append(float(r[quantity]))
    alphas = sorted(by_alpha)
    vals = [np.array(by_alpha[a]) for a in alphas]
    mean = np.array([v.mean() for v in vals])
    sem = np.array([v.std(ddof=1) / math.sqrt(len(v)) if len(v) > 1 else 0.0 for v in vals])
    return np.array(alphas), mean, sem


def plot_untied(records: Mapping[str, Any], out: str | Path, omega: float | None = None,
                d: int | None = None) -> list[Path]:
    """Three panels against alpha (test error, m, theta): the tied (solid) and untied (dashed) theory of each
    branch, and the simulations of each (student, init) as mean +- one standard error over seeds.  Writes
    OUT.png and OUT.pdf and returns both paths; malformed records raise ValueError before any drawing."""
    theory, runs = _check(records)
    inits = [i for i in INITS if any(r["init"] == i for r in runs)]
    inits += sorted({str(r["init"]) for r in runs} - set(inits))
    fig = Figure(figsize=(11.5, 4.2), layout="constrained")
    axes = fig.subplots(1, 3)
    for ax, q in zip(axes, QUANTITIES, strict=True):
        ax.grid(True, color="0.9", linewidth=0.6)
        ax.set_axisbelow(True)
        for student in STUDENTS:
            for branch in BRANCHES:
                x, y = theory_series(theory, student, branch, q)
                if len(x):
                    ax.plot(x, y, color=_COLOR[branch], linestyle=_LINESTYLE[student], linewidth=1.3,
                            label=f"{student} theory, {branch}", gid=f"theory-{student}-{branch}-{q}")
            for init in inits:
                x, m, e = simulation_series(runs, student, init, q)
                if len(x):
                    ax.errorbar(x + dodge(student, init), m, yerr=e, color=_COLOR.get(init, "0.6"),
                                marker=_MARKER[student], linestyle="none", markersize=5, capsize=2.5,
                                markerfacecolor="white" if student == "untied" else _COLOR.get(init, "0.6"),
                                label=f"{student} sim., {init} start", gid=f"sim-{student}-{init}-{q}")
        ax.set_xlabel(r"sample complexity $\alpha = n/d$")
        ax.set_ylabel(_LABEL[q])
    bits = [f"$\\omega = {omega:g}$" if omega is not None else "", f"$d = {d}$" if d is not None else ""]
    bits = [b for b in bits if b]
    fig.suptitle("tied vs untied student" + (" (" + ", ".join(bits) + ")" if bits else ""))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", fontsize=7, frameon=False, ncols=5)
    return style.save_figure(fig, out)
