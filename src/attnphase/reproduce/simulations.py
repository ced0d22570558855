"""The reproduction's finite-d simulations (two sweeps into the store) and the store rows that belong to a
plan or a setting."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnphase.reproduce.plan import Plan
from attnphase.setting import Setting


@dataclass
class SimSet:
    name: str
    d: tuple[int, ...]
    alphas: tuple[float, ...]
    summary: Any = None
    seconds: float = 0.0


def run_simulations(plan: Plan, store: Path, workers: int = 1, progress: bool = True,
                    task: Callable[..., Mapping[str, Any]] | None = None) -> list[SimSet]:
    from attnphase.experiments.sweep import Grid, run_sweep

    common = dict(omegas=(plan.setting.omega,), inits=plan.inits, seeds=plan.sim_seeds,
                  optimizer=plan.optimizer, n_test=plan.n_test, sigma=plan.setting.sigma,
                  lam=plan.setting.lam, A=plan.setting.A, options=dict(plan.sim_options))
    sets = [SimSet("alpha scan", (plan.sim_d,), plan.sim_alphas),
            SimSet("finite size", plan.fs_ds, (plan.fs_alpha,))]
    for ss in sets:
        t0 = time.perf_counter()
        ss.summary = run_sweep(store, Grid(d=ss.d, alphas=ss.alphas, **common), workers=workers,
                               progress=progress, task=task)
        ss.seconds = time.perf_counter() - t0
    return sets


def rows_for_setting(df: Any, setting: Setting) -> Any:
    """The rows of a store DataFrame simulated with this setting's sigma, lambda and A (any omega): a store
    may hold several sweeps, and results of different settings must never be averaged or drawn together."""
    from attnphase.experiments.store import canon_matrix

    if df is None or len(df) == 0:
        return df
    keep = np.ones(len(df), dtype=bool)
    for col, val in (("sigma", setting.sigma), ("lam", setting.lam)):
        if col in df.columns:
            keep &= np.isclose(df[col].astype(float).to_numpy(), float(val), rtol=1e-9, atol=0.0)
    if "A" in df.columns:
        keep &= (df["A"].astype(str) == canon_matrix(setting.A)).to_numpy()
    return df[keep]


def sim_frame(plan: Plan, store: Path) -> Any:
    """This plan's rows of the store (its optimizer and n_test as well as its setting), without the basins
    part's random starts, which share the store."""
    from attnphase.experiments.store import load_results

    df = rows_for_setting(load_results(store), plan.setting)
    if len(df) == 0:
        return df
    keep = np.ones(len(df), dtype=bool)
    if "basin" in df.columns:
        keep &= df["basin"].isna().to_numpy()
    if "init" in df.columns:
        keep &= df["init"].isin(plan.inits).to_numpy()
    if "n_test" in df.columns:
        keep &= (df["n_test"].astype(int) == plan.n_test).to_numpy()
    if "optimizer" in df.columns:
        keep &= (df["optimizer"] == plan.optimizer).to_numpy()
    return df[keep]


