"""The online-SGD part of ``attnphase reproduce``: the d -> infinity ODE against finite-d runs, and the dynamical
phase diagram beside the static alpha_c.

``dynamics_section(out_dir, store, quick, fields)`` runs (or reads back from the store) the simulations, integrates
the ODEs, writes two figures and returns the numbers and a markdown block.  Quick plan (measured 54 s on one
shared core): d = 200, 4 seeds, t_max 20 at lr 5, and a 3 x 2 diagram; the full plan: d = 1000, 8 seeds, t_max 40
and a 5 x 3 diagram.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnphase.setting import Setting


@dataclass(frozen=True)
class DynamicsPlan:
    name: str
    d: int
    seeds: tuple[int, ...]
    lr: float
    init_scales: tuple[float, ...]  # the trajectories' starts (small, larger)
    t_max: float
    n_points: int
    n_test: int
    diagram_omegas: tuple[float, ...]
    diagram_t_max: float


QUICK = DynamicsPlan("quick", d=200, seeds=(0, 1, 2, 3), lr=5.0, init_scales=(0.1,), t_max=20.0, n_points=41,
                     n_test=200, diagram_omegas=(0.1, 0.3, 0.45), diagram_t_max=40.0)
FULL = DynamicsPlan("full", d=1000, seeds=tuple(range(8)), lr=5.0, init_scales=(0.01, 1.0), t_max=40.0, n_points=81,
                    n_test=1000, diagram_omegas=(0.1, 0.2, 0.3, 0.4, 0.5), diagram_t_max=100.0)
DIAGRAM_SCALES = {"quick": (0.01, 1.0), "full": (0.01, 0.1, 1.0)}


@dataclass(frozen=True)
class DynamicsSection:
    plan: DynamicsPlan
    omega: float
    comparisons: list[dict[str, Any]]
    ode: list[dict[str, Any]]
    diagram: list[dict[str, Any]]
    figures: dict[str, list[Path]]
    seconds: float
    reused: int
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        p = self.plan
        lines = ["## Online SGD: which mechanism training finds, and when\n",
                 f"Plan {p.name}: one-pass SGD at lr {p.lr:g} (time t = samples / d), omega {self.omega:g}, d = {p.d}, "
                 f"{len(p.seeds)} seeds, t_max {p.t_max:g}; {self.reused} seeds read from the store, "
                 f"{self.seconds:.1f} s. The ODE (d -> infinity) is integrated from each seed's own start "
                 "(docs/dynamics.md).\n",
                 "| init scale | mechanism (SGD seeds) | ODE | escape of m, SGD (median) | ODE | max gap of mean m | "
                 "its s.e. | max gap of mean q |", "|---|---|---|---|---|---|---|---|"]
        for c in self.comparisons:
            lines.append(f"| {c['init_scale']:g} | {c['mechanisms_sgd']} | {c['mechanisms_ode']} | "
                         f"{_f(c['escape_m_sgd'])} | {_f(c['escape_m_ode'])} | {_f(c['dist_m'])} | {_f(c['sem_m'])} | "
                         f"{_f(c['dist_q'])} |")
        lines += ["", "ODE from the typical start (rms overlaps of the random start at d):\n",
                  "| init scale | mechanism at t_max | escape of m | escape of theta | m | theta | test error |",
                  "|---|---|---|---|---|---|---|"]
        for o in self.ode:
            lines.append(f"| {o['init_scale']:g} | {o['mechanism']} | {_f(o['escape_m'])} | {_f(o['escape_theta'])} | "
                         f"{_f(o['m'])} | {_f(o['theta'])} | {_f(o['test_error'])} |")
        lines += ["", f"Dynamical phase diagram (ODE, d = {p.d}, t_max {p.diagram_t_max:g}):\n",
                  "| omega | init scale | mechanism | escape of m | escape of theta | static alpha_c |",
                  "|---|---|---|---|---|---|"]
        for c in self.diagram:
            lines.append(f"| {c['omega']:g} | {c['init_scale']:g} | {c['mechanism']} | {_f(c['escape_m'])} | "
                         f"{_f(c['escape_theta'])} | {_f(c.get('alpha_c'))} |")
        lines.append("")
        lines += [f"- {n}" for n in self.notes]
        for name, paths in self.figures.items():
            lines.append(f"![{name}]({paths[0].name})\n")
        return "\n".join(lines) + "\n"


def _f(v: Any) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return f"{v:.3g}"


def dynamics_section(out_dir: str | os.PathLike[str], store: str | os.PathLike[str], quick: bool = True,
                     fields: Sequence[Mapping[str, float | None]] = (), setting: Setting | None = None,
                     progress: bool = False, plan: DynamicsPlan | None = None) -> DynamicsSection:
    """Simulations and ODEs of the plan at omega = setting.omega; figures ``dynamics_trajectories`` and
    ``dynamics_diagram`` (PNG + PDF) in `out_dir`.  fields: transition results ({omega, alpha_c}) for the diagram."""
    import numpy as np

    from attnphase.experiments.online import run_online
    from attnphase.experiments.online.compare import compare_with_ode
    from attnphase.experiments.online.diagram import dynamical_diagram
    from attnphase.plots.dynamics import plot_dynamical_diagram, plot_dynamics

    plan = plan or (QUICK if quick else FULL)
    setting = setting or Setting(omega=0.3)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    comparisons, sims, extra, reused = [], [], [], 0
    for s in plan.init_scales:
        res = run_online(setting, d=plan.d, lr=plan.lr, init_scale=s, t_max=plan.t_max, seeds=plan.seeds,
                         n_points=plan.n_points, n_test=plan.n_test, store=os.fspath(store), progress=progress)
        reused += res.reused
        c = compare_with_ode(res)
        comparisons.append({**c.row(), "init_scale": s, "sem_m": c.sem["m"]})
        sims.append({"label": f"SGD d = {plan.d}, s = {s:g}", **res.mean()})
        extra.append({"label": f"ODE from the seeds' starts, s = {s:g}", "t": res.t, **c.ode})
    ode = [c.to_dict() for c in dynamical_diagram(setting, [setting.omega], list(plan.init_scales), lr=plan.lr,
                                                   d=plan.d, t_max=plan.t_max, n_points=plan.n_points)]
    scales = DIAGRAM_SCALES[plan.name] if plan.name in DIAGRAM_SCALES else plan.init_scales
    cells = [c.to_dict() for c in dynamical_diagram(setting, plan.diagram_omegas, scales, lr=plan.lr, d=plan.d,
                                                    t_max=plan.diagram_t_max, n_points=201, progress=progress)]
    ac = {round(float(f["omega"]), 9): f.get("alpha_c") for f in fields if f.get("omega") is not None}
    for c in cells:
        c["alpha_c"] = ac.get(round(float(c["omega"]), 9))
    alpha_c = None
    if ac:
        oms = sorted(ac)
        alpha_c = {"omega": oms, "alpha_c": [ac[w] for w in oms]}
    figures = {
        "dynamics_trajectories": plot_dynamics(None, out / "dynamics_trajectories", sims=sims, extra_ode=extra,
                                               title=f"online SGD, omega = {setting.omega:g}, lr = {plan.lr:g}"),
        "dynamics_diagram": plot_dynamical_diagram(cells, out / "dynamics_diagram", alpha_c=alpha_c,
                                                   title=f"online SGD from a random start (ODE, d = {plan.d})"),
    }
    notes = []
    if any(not np.isfinite(c["dist_m"]) for c in comparisons):
        notes.append("an ODE run stopped early: see its status")
    return DynamicsSection(plan=plan, omega=setting.omega, comparisons=comparisons, ode=ode, diagram=cells,
                           figures=figures, seconds=time.perf_counter() - t0, reused=reused, notes=notes)
