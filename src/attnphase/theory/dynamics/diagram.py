"""A dynamical phase diagram: which mechanism the ODE reaches from the typical random start, and when, over a grid
of omega and the init scale (or the learning rate)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from attnphase.errors import InputError
from attnphase.setting import Setting, check_number
from attnphase.theory.dynamics.trajectory import DynamicsStatus, integrate


@dataclass(frozen=True)
class DiagramCell:
    """One grid point: the mechanism at t_max, the escape times of f_m and f_theta (trajectory.escape_time; NaN
    if never), the final objective (train_error) and the trajectory's status."""

    omega: float
    init_scale: float
    lr: float
    mechanism: str
    t_m: float
    t_theta: float
    train_error: float
    test_error: float
    status: str

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class DynamicalDiagram:
    setting: Setting
    d: int
    t_max: float
    seed: int
    cells: tuple[DiagramCell, ...]

    def as_dict(self) -> dict:
        return {"setting": self.setting.to_dict(), "d": self.d, "t_max": self.t_max, "seed": self.seed,
                "cells": [c.as_dict() for c in self.cells]}


def dynamical_phase_diagram(setting: Setting, omegas: Sequence[float], *, init_scales: Sequence[float] = (0.1,),
                            lrs: Sequence[float] = (1.0,), d: int = 1000, t_max: float = 2000.0, seed: int = 0,
                            progress: Callable[[int, int], None] | None = None) -> DynamicalDiagram:
    """Integrate the ODE from the random start (init scale s, dimension d, seed) at every (omega, s, lr)."""
    omegas = [check_number("omega", o) for o in omegas]
    scales = [check_number("init_scale", s) for s in init_scales]
    lrs_ = [check_number("lr", x) for x in lrs]
    if not omegas or not scales or not lrs_:
        raise InputError("omegas, init_scales and lrs must each hold at least one value")
    cells = []
    total = len(omegas) * len(scales) * len(lrs_)
    for om in omegas:
        st = setting.replace(omega=om)
        for s in scales:
            for lr in lrs_:
                tr = integrate(st, lr=lr, init_scale=s, d=d, t_max=t_max, seed=seed, n_points=400)
                ok = tr.status == DynamicsStatus.ok
                cells.append(DiagramCell(omega=om, init_scale=s, lr=lr,
                                         mechanism=tr.mechanism().value if ok else tr.status.value,
                                         t_m=tr.escape_time("m"), t_theta=tr.escape_time("theta"),
                                         train_error=float(tr.train_error[-1]), test_error=float(tr.test_error[-1]),
                                         status=tr.status.value))
                if progress is not None:
                    progress(len(cells), total)
    return DynamicalDiagram(setting=setting, d=int(d), t_max=float(t_max), seed=int(seed), cells=tuple(cells))


