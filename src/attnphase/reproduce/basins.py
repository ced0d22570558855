"""The reproduction's basins study: random starts trained into the results store, three figures drawn from the
store's rows, and the numbers of the report's basins section.

Every start is one row of DIR/results.sqlite (the sweep machinery: a rerun skips finished starts, a killed
run loses nothing).  Every start records its trajectory, so the trajectory figure is drawn from stored rows too,
and the theory's fixed points it draws are the ones stored with each row by the classification: plotting
computes no physics.  The transition lines (alpha_c and the spinodals) are the reproduction's own transition
results; `transition_fields` is the one place that reads them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnphase.errors import InputError
from attnphase.experiments.basins_study import QuickPlan, basins_summary, transition_lines
from attnphase.experiments.simulation.basins import BasinsSummary
from attnphase.setting import Setting

FIGURES_BASINS = {
    "basins_heatmap": "fig_f_basins_heatmap",
    "basins_fraction": "fig_g_basins_fraction",
    "basins_trajectories": "fig_h_basins_trajectories",
}
TRANSITION_FIELDS = ("omega", "alpha_c", "alpha_sem_appears", "alpha_pos_vanishes")


def transition_fields(transitions: Sequence[Any]) -> list[dict[str, float | None]]:
    """{omega, alpha_c, alpha_sem_appears, alpha_pos_vanishes} of each transition result, one per omega (the
    only place the basins part reads transition results)."""
    out: dict[float, dict[str, float | None]] = {}
    for tr in transitions:
        row: dict[str, float | None] = {}
        for name in TRANSITION_FIELDS:
            v = tr.get(name) if isinstance(tr, Mapping) else getattr(tr, name, None)
            try:
                f = float(v)
            except (TypeError, ValueError):
                f = math.nan
            row[name] = f if math.isfinite(f) else None
        if row["omega"] is not None:
            out[round(row["omega"], 12)] = row
    return [out[w] for w in sorted(out)]


def at_omega(fields: Sequence[Mapping[str, float | None]], omega: float) -> Mapping[str, float | None]:
    for f in fields:
        if f["omega"] is not None and math.isclose(f["omega"], omega, abs_tol=1e-9):
            return f
    return dict.fromkeys(TRANSITION_FIELDS)


def _scan_points(bp: QuickPlan) -> set[tuple[int, float, float]]:
    pts = {(bp.heat_d, float(w), float(a)) for w in bp.heat_omegas for a in bp.heat_alphas}
    return pts | {(int(d), float(bp.fraction_omega), float(a)) for d in bp.fraction_ds for a in bp.heat_alphas}


def grid_points(bp: QuickPlan) -> set[tuple[int, float, float]]:
    """(d, omega, alpha) of every grid point of the plan."""
    return _scan_points(bp) | {(bp.trajectory_d, float(bp.fraction_omega), float(bp.trajectory_alpha))}


def make_grids(bp: QuickPlan, setting: Setting) -> list[Any]:
    """The sweep grids of the plan: the heat map's (alpha, omega) at heat_d, the fraction scan's other ds at
    fraction_omega, and the trajectory point if it is on neither; every start records its trajectory."""
    from attnphase.experiments.simulation.basins import basins_grids

    common = dict(inits_per_point=bp.starts, init_scales=(bp.init_scale,), n_test=bp.n_test,
                  options={"record_every": bp.record_every}, sigma=setting.sigma, lam=setting.lam, A=setting.A)
    grids = basins_grids(d=bp.heat_d, alphas=bp.heat_alphas, omegas=bp.heat_omegas, **common)
    on_heat = any(math.isclose(w, bp.fraction_omega) for w in bp.heat_omegas)
    other = tuple(int(d) for d in bp.fraction_ds if not (on_heat and d == bp.heat_d))
    if other:
        grids += basins_grids(d=other, alphas=bp.heat_alphas, omegas=bp.fraction_omega, **common)
    if (bp.trajectory_d, float(bp.fraction_omega), float(bp.trajectory_alpha)) not in _scan_points(bp):
        grids += basins_grids(d=bp.trajectory_d, alphas=(bp.trajectory_alpha,), omegas=bp.fraction_omega, **common)
    return grids


@dataclass
class BasinsRun(BasinsSummary):
    """What the reproduction's basins part did: the start counts of `run_basins` and its seconds."""

    seconds: float = 0.0


def run_grids(bp: QuickPlan, setting: Setting, store: Path, workers: int = 1, progress: bool = True,
              task: Callable[..., Mapping[str, Any]] | None = None) -> BasinsRun:
    """Train every start of the plan not yet in the store.  ``task`` replaces the real start (tests)."""
    from attnphase.experiments.simulation.basins import run_basins

    t0 = time.perf_counter()
    s = run_basins(os.fspath(store), make_grids(bp, setting), workers=workers, progress=progress, task=task)
    out = BasinsRun(**dataclasses.asdict(s))
    out.seconds = time.perf_counter() - t0
    return out


def plan_rows(bp: QuickPlan, setting: Setting, df: Any) -> Any:
    """The store rows of this plan's basins grid (tied student, its init scale, n_test and setting)."""
    from attnphase.reproduce.simulations import rows_for_setting

    if df is None or len(df) == 0 or "basin" not in df.columns:
        return df.iloc[0:0] if df is not None else df
    df = rows_for_setting(df[df["basin"].notna()], setting)
    keep = np.ones(len(df), dtype=bool)
    if "student" in df.columns:
        keep &= df["student"].fillna("tied").eq("tied").to_numpy()
    if "init_scale" in df.columns:
        keep &= np.isclose(df["init_scale"].astype(float).to_numpy(), bp.init_scale)
    if "n_test" in df.columns:
        keep &= (df["n_test"].astype(int) == bp.n_test).to_numpy()
    keep &= (df["init"] == "random").to_numpy()
    pts = grid_points(bp)
    keep &= np.array([(int(d), round(float(w), 9), round(float(a), 9)) in {(p[0], round(p[1], 9), round(p[2], 9))
                                                                         for p in pts}
                      for d, w, a in zip(df["d"], df["omega"], df["alpha"], strict=True)], dtype=bool)
    return df[keep]


def trajectories_from_rows(rows: Any, per_class: int = 3) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """Up to `per_class` stored trajectories per class (lowest seeds first) and the theory's fixed points stored
    with the rows (branches whose stored status is ok)."""
    trajs: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for _, r in rows.sort_values("seed").iterrows():
        traj = r.get("trajectory")
        if not isinstance(traj, list) or not traj:
            continue
        c = str(r["basin"])
        if counts.get(c, 0) >= per_class:
            continue
        counts[c] = counts.get(c, 0) + 1
        trajs.append({"seed": int(r["seed"]), "basin": c, "rows": traj})
    fps: dict[str, dict[str, float]] = {}
    if len(rows):
        first = rows.iloc[0]
        for b in ("positional", "semantic"):
            if first.get(f"theory_{b}_status") == "ok":
                vals = {k: first.get(f"theory_{b}_{k}") for k in ("m", "theta", "train_loss")}
                fps[b] = {k: float(v) for k, v in vals.items() if v is not None and math.isfinite(float(v))}
    return trajs, fps


def lbfgs_warmup(rows: Any) -> int | None:
    """The GD warm-up steps before L-BFGS, as stored with the rows' options, when all rows ran L-BFGS with the
    same warm-up (the trajectory figure's x axis changes scale there); None otherwise."""
    vals = set()
    for opt, options in zip(rows["optimizer"], rows["options"], strict=True):
        try:
            w = json.loads(options).get("warmup") if isinstance(options, str) else None
        except ValueError:
            w = None
        vals.add(int(w) if opt == "lbfgs" and isinstance(w, int) and w > 0 else None)
    return vals.pop() if len(vals) == 1 else None


def basins_figures_quick(out_dir: str | os.PathLike[str], store: str | os.PathLike[str],
                         transitions: Sequence[Any] | None = None, plan: QuickPlan | None = None,
                         workers: int = 1, progress: bool = False) -> list[Path]:
    """Run (or resume) the coarse basins grid of `plan` into `store` and draw the three basins figures.

    Returns the PNG and PDF paths of: fig_basins_heatmap (semantic fraction over (alpha, omega) with
    alpha_c and the spinodals from `transitions`), fig_basins_fraction (fraction against alpha at
    plan.fraction_omega for each d in plan.fraction_ds, binomial error bars) and fig_basins_trajectories
    (a few starts per minimum at plan.trajectory_d, plan.trajectory_alpha, omega = plan.fraction_omega).
    """
    from attnphase.experiments.basins_study import LINE_FIELDS, collect_trajectories, field_of
    from attnphase.experiments.simulation.basins import basin_fractions, basins_grids, run_basins, theory_points
    from attnphase.experiments.store import load_results
    from attnphase.plots.basins import plot_basin_heatmap, plot_fraction_vs_alpha, plot_trajectories

    plan = plan or QuickPlan()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    common = dict(inits_per_point=plan.starts, init_scales=(plan.init_scale,), n_test=plan.n_test)
    grids = basins_grids(d=plan.heat_d, alphas=plan.heat_alphas, omegas=plan.heat_omegas, **common)
    grids += basins_grids(d=plan.fraction_ds, alphas=plan.heat_alphas, omegas=plan.fraction_omega, **common)
    run_basins(os.fspath(store), grids, workers=workers, progress=progress)
    fr = basin_fractions(load_results(os.fspath(store)))
    lines = transition_lines(transitions)
    paths = plot_basin_heatmap(fr, out_dir / "fig_basins_heatmap", d=plan.heat_d, init_scale=plan.init_scale,
                               lines=lines)
    at = {name: None for name in LINE_FIELDS}
    for tr in transitions or ():
        if field_of(tr, "omega") is not None and math.isclose(float(field_of(tr, "omega")), plan.fraction_omega):
            at = {name: field_of(tr, field) for name, field in LINE_FIELDS.items()}
    paths += plot_fraction_vs_alpha(fr[fr["d"].isin(plan.fraction_ds)], out_dir / "fig_basins_fraction",
                                    omega=plan.fraction_omega, init_scale=plan.init_scale, alpha_c=at["alpha_c"],
                                    spinodals={k: v for k, v in at.items() if k != "alpha_c"})
    setting = Setting(omega=plan.fraction_omega)
    trajs = collect_trajectories(setting, plan.trajectory_d, plan.trajectory_alpha, tries=plan.trajectory_tries,
                                 init_scale=plan.init_scale, record_every=plan.record_every)
    fps = {b: {"m": p.m, "theta": p.theta, "train_loss": p.train_loss}
           for b, p in theory_points(setting, plan.trajectory_alpha).items() if p.exists}
    paths += plot_trajectories(trajs, out_dir / "fig_basins_trajectories", fixed_points=fps,
                               title=f"random starts, d = {plan.trajectory_d}, alpha = {plan.trajectory_alpha:g}, "
                                     f"omega = {plan.fraction_omega:g}")
    return paths


def make_basins_figures(out_dir: Path, bp: QuickPlan, setting: Setting, store: Path,
                        fields: Sequence[Mapping[str, float | None]]) -> dict[str, list[Path]]:
    """The three basins figures from the store's rows of this plan; raises ValueError when there are none."""
    from attnphase.experiments.simulation.basins import basin_fractions
    from attnphase.experiments.store import load_results
    from attnphase.plots.basins import plot_basin_heatmap, plot_fraction_vs_alpha, plot_trajectories

    rows = plan_rows(bp, setting, load_results(store))
    if rows is None or len(rows) == 0:
        raise InputError("no basins results in the store")
    fr = basin_fractions(rows)
    figs: dict[str, list[Path]] = {}
    heat = fr[(fr["d"] == bp.heat_d) & fr["omega"].round(9).isin([round(w, 9) for w in bp.heat_omegas])]
    figs["basins_heatmap"] = plot_basin_heatmap(heat, out_dir / FIGURES_BASINS["basins_heatmap"], d=bp.heat_d,
                                                init_scale=bp.init_scale, lines=transition_lines(fields))
    at = at_omega(fields, bp.fraction_omega)
    ds = {int(d) for d in bp.fraction_ds} | {bp.heat_d}
    figs["basins_fraction"] = plot_fraction_vs_alpha(
        fr[fr["d"].isin(ds)], out_dir / FIGURES_BASINS["basins_fraction"], omega=bp.fraction_omega,
        init_scale=bp.init_scale, alpha_c=at["alpha_c"],
        spinodals={"semantic spinodal": at["alpha_sem_appears"], "positional spinodal": at["alpha_pos_vanishes"]})
    sel = rows[(rows["d"] == bp.trajectory_d) & np.isclose(rows["alpha"].astype(float), bp.trajectory_alpha)
               & np.isclose(rows["omega"].astype(float), bp.fraction_omega)]
    trajs, fps = trajectories_from_rows(sel)
    figs["basins_trajectories"] = plot_trajectories(
        trajs, out_dir / FIGURES_BASINS["basins_trajectories"], fixed_points=fps, sigma=setting.sigma,
        warmup=lbfgs_warmup(sel),
        title=f"random starts, d = {bp.trajectory_d}, alpha = {bp.trajectory_alpha:g}, "
              f"omega = {bp.fraction_omega:g}")
    return figs


def summary_points(bp: QuickPlan, store: Path) -> dict[str, Any]:
    """`attnphase.experiments.basins_study.basins_summary` of the store, restricted to this plan's grid points and scale."""
    summ = basins_summary(store)
    pts = {(p[0], round(p[1], 9), round(p[2], 9)) for p in grid_points(bp)}
    summ["points"] = [p for p in summ["points"]
                      if (int(p["d"]), round(float(p["omega"]), 9), round(float(p["alpha"]), 9)) in pts
                      and p.get("student", "tied") == "tied" and p.get("init_scale") is not None
                      and math.isclose(float(p["init_scale"]), bp.init_scale)]
    return summ


def pooled(points: Sequence[Mapping[str, Any]]) -> tuple[int, int, float, float]:
    """(semantic starts, starts, fraction, binomial standard error) pooled over points."""
    k = sum(int(p["n_semantic"]) for p in points)
    n = sum(int(p["n"]) for p in points)
    if n == 0:
        return 0, 0, math.nan, math.nan
    f = k / n
    return k, n, f, max(math.sqrt(f * (1 - f) / n), 1.0 / (2 * (n + 1)))
