"""What a reproduction computes: the quick plan (minutes) and the study's full plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnphase.experiments.basins_study import QuickPlan
from attnphase.setting import Setting


@dataclass(frozen=True)
class Plan:
    """Everything a reproduction computes.  ``plan_for(quick)`` gives the two standard plans."""

    name: str
    setting: Setting
    precision: str
    curve_alphas: tuple[float, ...]
    pd_omegas: tuple[float, ...]
    pd_alpha_min: float
    pd_alpha_max: float
    pd_n_grid: int
    pd_precision: str
    pd_xtol: float
    sim_d: int
    sim_alphas: tuple[float, ...]
    sim_seeds: tuple[int, ...]
    optimizer: str
    n_test: int
    fs_ds: tuple[int, ...]
    fs_alpha: float
    inits: tuple[str, ...] = ("positional", "semantic")
    sim_options: Mapping[str, Any] = field(default_factory=dict)
    # random starts classified by the minimum they reach (omega grid, ds, alphas, starts); None: no basins part
    basins: QuickPlan | None = None
    # the Bayes-optimal section (attnphase.reproduce.bayes): "quick", "full" or None
    bayes: str | None = None
    # the counting-transformer section (attnphase.reproduce.histogram_section): "quick", "full" or None
    histogram: str | None = None
    # online SGD against its d -> infinity ODE (attnphase.reproduce.dynamics_section): "quick", "full" or None
    dynamics: str | None = None


# The basins part of the quick plan, under a minute on one core: 48 starts (1000 GD steps then L-BFGS, about
# 0.4 s at d = 50 and 0.6 s at d = 100) and the theory's two fixed points at each of the 12 (alpha, omega)
# (about 1.5 s each); alpha spans alpha_c at all three omegas.
QUICK_BASINS = QuickPlan(heat_d=100, heat_alphas=(0.5, 1.0, 1.5, 2.0), heat_omegas=(0.2, 0.3, 0.4),
                         fraction_ds=(50, 100), fraction_omega=0.3, starts=3, init_scale=1.0, n_test=2000,
                         trajectory_d=100, trajectory_alpha=1.5, record_every=10)
# The full plan's: the grid (alpha in 0.5..2, d = 200 and 500, 16 starts) and a heat map at d = 200.
FULL_BASINS = QuickPlan(heat_d=200, heat_alphas=(0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0),
                        heat_omegas=(0.1, 0.2, 0.3, 0.4), fraction_ds=(100, 200, 500), fraction_omega=0.3,
                        starts=16, init_scale=1.0, n_test=10000, trajectory_d=500, trajectory_alpha=1.5,
                        record_every=10)


def _grid(a: float, b: float, n: int) -> tuple[float, ...]:
    # 12 significant digits: the same canonical form as the store's keys, and stable cache keys
    return tuple(float(f"{v:.12g}") for v in np.linspace(a, b, n))


def plan_for(quick: bool, setting: Setting | None = None) -> Plan:
    """The quick plan (a few minutes on 2 cores) or the study's full plan (d = 1000, 25 alphas, 5 seeds)."""
    setting = Setting(omega=0.3) if setting is None else setting
    if quick:
        return Plan(
            name="quick", setting=setting, precision="fast",
            curve_alphas=_grid(0.1, 2.0, 10),
            # a coarse grid and a 0.05 tolerance on the crossings: each transition costs ~30 fixed points
            pd_omegas=(0.05, 0.1, 0.2, 0.3, 0.4, 0.45), pd_alpha_min=0.1, pd_alpha_max=2.0, pd_n_grid=6,
            pd_precision="fast", pd_xtol=0.05,
            sim_d=100, sim_alphas=(0.5, 1.0, 1.5, 2.0), sim_seeds=(0, 1), optimizer="lbfgs", n_test=2000,
            fs_ds=(50, 100, 200), fs_alpha=1.5,
            basins=QUICK_BASINS, bayes="quick", histogram="quick", dynamics="quick",
        )
    return Plan(
        name="full", setting=setting, precision="default",
        curve_alphas=_grid(0.01, 2.0, 25),
        pd_omegas=_grid(0.02, 0.5, 13), pd_alpha_min=0.05, pd_alpha_max=2.0, pd_n_grid=20,
        pd_precision="default", pd_xtol=0.01,
        sim_d=1000, sim_alphas=_grid(0.01, 2.0, 25), sim_seeds=(0, 1, 2, 3, 4), optimizer="gd", n_test=50000,
        fs_ds=(100, 200, 500, 1000), fs_alpha=1.5,
        basins=FULL_BASINS, bayes="full", histogram="full", dynamics="full",
    )


