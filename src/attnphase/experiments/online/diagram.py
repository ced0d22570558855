"""The dynamical phase diagram: which mechanism online SGD reaches, and when, over omega and the init scale (or lr).

Each cell integrates the d -> infinity ODE (attnphase.theory.dynamics) from the typical random start at dimension d:
for r = r* = 1 the root-mean-square overlaps of Q_ij iid N(0, s^2), q = sigma^2 s^2, m_1 = s / sqrt(d),
theta = sigma^2 s / sqrt(d) (both grow from the same relative size, so the ODE, not the draw, decides which
wins); other shapes draw one random start (theory.dynamics.random_start, `seed`).  The mechanism is the theory's
classification at t_max, the escape times the theory's (5% of tr q positional / teacher).  The theory's own
grid, attnphase.theory.dynamics.dynamical_phase_diagram, starts every cell from one random draw (its `seed`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from attnphase.errors import InputError
from attnphase.progress import progress_bar
from attnphase.setting import Setting, check_number

AXES = ("init_scale", "lr")


def typical_start(setting: Setting, init_scale: float, d: int) -> dict[str, Any] | None:
    """The root-mean-square overlaps of a random start (r = r* = 1), or None for other shapes."""
    if setting.r != 1 or setting.r_star != 1:
        return None
    import numpy as np

    from attnphase.theory.dynamics.start import gram_factor

    s2, s = setting.sigma ** 2, float(init_scale)
    C = gram_factor(setting.gram)
    a = np.full((C.shape[1], 1), s / math.sqrt(d))
    return {"q": [[s2 * s * s]], "m": (C @ a).tolist(), "theta": [[s2 * s / math.sqrt(d)]]}


@dataclass(frozen=True)
class DiagramCell:
    omega: float
    init_scale: float
    lr: float
    mechanism: str
    escape_m: float
    escape_theta: float
    m: float
    theta: float
    test_error: float
    status: str

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def dynamical_diagram(setting: Setting, omegas: Sequence[float], values: Sequence[float], *, axis: str = "init_scale",
                      lr: float = 5.0, init_scale: float = 0.1, d: int = 1000, t_max: float = 100.0,
                      n_points: int = 201, seed: int = 0, progress: bool = False) -> list[DiagramCell]:
    """One ODE trajectory per (omega, value); `axis` says whether `values` are init scales or learning rates."""
    from attnphase.theory.dynamics import DynamicsStatus, integrate

    if axis not in AXES:
        raise InputError(f"axis must be one of {', '.join(AXES)}, got {axis!r}")
    omegas = [check_number("omega", w) for w in omegas]
    values = [check_number(axis, v) for v in values]
    if not omegas or not values:
        raise InputError("the diagram needs at least one omega and one value")
    for w in omegas:
        setting.replace(omega=w)  # each omega valid before any work
    for v in values:
        if v <= 0:
            raise InputError(f"{axis} must be > 0, got {v:g}")
    cells = []
    with progress_bar(label="dynamical phase diagram", total=len(omegas) * len(values), enabled=progress) as bar:
        for w in omegas:
            st = setting.replace(omega=w)
            for v in values:
                s = v if axis == "init_scale" else init_scale
                eta = v if axis == "lr" else lr
                start = typical_start(st, s, d)
                if start is None:
                    tr = integrate(st, lr=eta, init_scale=s, d=d, seed=seed, t_max=t_max, n_points=n_points)
                else:
                    tr = integrate(st, lr=eta, init=start, t_max=t_max, n_points=n_points)
                ok = tr.status == DynamicsStatus.ok  # a stopped integration has no mechanism: its status stands there
                cells.append(DiagramCell(omega=w, init_scale=s, lr=eta,
                                         mechanism=tr.mechanism().value if ok else tr.status.value,
                                         escape_m=tr.escape_time("m"), escape_theta=tr.escape_time("theta"),
                                         m=float(tr.m_abs[-1]), theta=float(tr.theta_abs[-1]),
                                         test_error=float(tr.test_error[-1]), status=tr.status.value))
                bar.update(1)
    return cells
