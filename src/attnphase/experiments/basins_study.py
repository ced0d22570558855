"""The basins study for the reproduction and the report: a coarse basins grid, its trajectories, its numbers.

    from attnphase.experiments.basins_study import basins_summary
    numbers = basins_summary("out/basins.sqlite")

The classification rule and the sweep task live in :mod:`attnphase.experiments.simulation.basins`; the figures in
:mod:`attnphase.plots.basins` (drawn by :func:`attnphase.reproduce.basins.basins_figures_quick`: experiments never
import plots).  Transition lines (alpha_c and the spinodals against omega) are inputs, computed
by the theory's transition code: anything with attributes (or keys) omega, alpha_c, alpha_sem_appears,
alpha_pos_vanishes, e.g. ``attnphase.theory.TransitionResult`` or its ``to_dict()``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from attnphase.experiments.simulation.basins import (
    CLASSES,
    basin_fractions,
    classify,
    theory_points,
)
from attnphase.setting import Setting

__all__ = ["QuickPlan", "basins_summary", "collect_trajectories", "transition_lines"]

LINE_FIELDS = {"alpha_c": "alpha_c", "semantic spinodal": "alpha_sem_appears",
                "positional spinodal": "alpha_pos_vanishes"}


@dataclass(frozen=True)
class QuickPlan:
    """The coarse grid of `attnphase.reproduce.basins.basins_figures_quick` (about 2 minutes on one core by default)."""

    heat_d: int = 100
    heat_alphas: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0)
    heat_omegas: tuple[float, ...] = (0.1, 0.3, 0.5)
    fraction_ds: tuple[int, ...] = (50, 100)
    fraction_omega: float = 0.3
    starts: int = 6
    init_scale: float = 1.0
    n_test: int = 2000
    trajectory_d: int = 200
    trajectory_alpha: float = 1.5
    trajectory_tries: int = 8
    record_every: int = 10


def field_of(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def transition_lines(transitions: Sequence[Any] | None) -> dict[str, tuple[list[float], list[float | None]]]:
    """{line name: (omegas, alphas)} from transition results (alpha_c, semantic and positional spinodals)."""
    out: dict[str, tuple[list[float], list[float | None]]] = {}
    for name, field in LINE_FIELDS.items():
        oms, als = [], []
        for tr in transitions or ():
            om, a = field_of(tr, "omega"), field_of(tr, field)
            if om is not None:
                oms.append(float(om))
                als.append(None if a is None else float(a))
        if any(a is not None for a in als):
            out[name] = (oms, als)
    return out


def collect_trajectories(setting: Setting, d: int, alpha: float, tries: int = 8, init_scale: float = 1.0,
                         record_every: int = 10, seed0: int = 1000, per_class: int = 3,
                         optimizer: str = "lbfgs", **options: Any) -> list[dict[str, Any]]:
    """Train random starts (seeds seed0, seed0+1, ...) recording (m, theta, train loss) every `record_every`
    evaluations, until `per_class` starts ended in each minimum or `tries` starts ran; each returned item
    is {"seed", "basin", "rows"} with the class of the end point by the basins rule."""
    from attnphase.experiments.simulation import simulate
    from attnphase.experiments.simulation.basins import DEFAULT_OPTIONS

    opts = {**DEFAULT_OPTIONS.get(optimizer, {}), **options}
    points = theory_points(setting, alpha)
    out: list[dict[str, Any]] = []
    counts = dict.fromkeys(CLASSES, 0)
    for i in range(tries):
        res = simulate(setting, d, alpha, init="random", init_scale=init_scale, optimizer=optimizer, seed=seed0 + i,
                       n_test=100, record_every=record_every, **opts)
        c = classify(float(res.m), float(res.theta), points)
        if counts[c] >= per_class:
            continue
        counts[c] += 1
        out.append({"seed": seed0 + i, "basin": c, "rows": res.trajectory})
        if counts["positional"] >= per_class and counts["semantic"] >= per_class:
            break
    return out


def basins_summary(store: str | os.PathLike[str], omega: float | None = None) -> dict[str, Any]:
    """The numbers for the report's basins section, from a basins store.

    {"rule": text, "points": [one dict per (student, init_scale, d, omega, alpha): n, n_<class>,
    <class>_fraction, <class>_se (binomial), n_converged, mean train loss and test error per class and the
    theory's train losses], "total_starts": int, "converged_fraction": float}.  omega: keep one omega only.
    """
    from attnphase.experiments.simulation.basins import BASIN_TOL
    from attnphase.experiments.store import load_results

    df = load_results(os.fspath(store))
    if "basin" in df.columns:
        df = df[df["basin"].notna()]
    else:
        df = df.iloc[0:0]
    if omega is not None and len(df):
        df = df[[math.isclose(float(w), omega) for w in df["omega"]]]
    points = []
    if len(df):
        df = df.copy()
        df["student"] = df["student"].fillna("tied") if "student" in df else "tied"
        df["init_scale"] = df["init_scale"].fillna(-1.0) if "init_scale" in df else -1.0
        for keys, sel in df.groupby(["student", "init_scale", "d", "omega", "alpha"], sort=True):
            rec: dict[str, Any] = basin_fractions(sel).iloc[0].to_dict()
            rec = {k: (v.item() if hasattr(v, "item") else v) for k, v in rec.items()}
            rec["init_scale"] = None if keys[1] == -1.0 else float(keys[1])
            for c in CLASSES:
                sub = sel[sel["basin"] == c]
                rec[f"{c}_train_loss_mean"] = float(sub["train_loss"].mean()) if len(sub) else None
                rec[f"{c}_test_error_mean"] = float(sub["test_error"].mean()) if len(sub) else None
            for b in ("positional", "semantic"):
                col, status = f"theory_{b}_train_loss", f"theory_{b}_status"
                ok = sel[sel[status] == "ok"] if status in sel else sel.iloc[0:0]
                vals = ok[col].dropna() if col in ok else []
                rec[col] = float(vals.iloc[0]) if len(vals) else None  # None: the branch does not exist there
                rec[status] = str(sel[status].iloc[0]) if status in sel and len(sel) else None
            points.append(rec)
    return {
        "rule": f"nearest theory fixed point in relative (m, theta) distance, within {BASIN_TOL:g} of its norm; "
                f"else other",
        "points": points,
        "total_starts": int(len(df)),
        "converged_fraction": float(df["converged"].astype(bool).mean()) if len(df) else None,
    }
