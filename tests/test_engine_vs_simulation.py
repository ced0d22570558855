"""The general theory against finite-d simulation (slow; run by hand or in the long suite).

For each shape, both inits: the simulation (d >= 500, several seeds) started from the branch's init must land on the
theory's fixed point of that branch, where the theory reports one (status ok): train loss, test error and the scalar
summaries of the overlaps (tr(q)/r, rms over tokens of |m_l|, largest singular value of theta) within 3 standard
errors of the seed mean plus a few percent (finite-d corrections).  The simulation API is
attnphase.simulation.simulate(setting, d=..., alpha=..., init=..., optimizer=..., seed=...).
"""

from __future__ import annotations

import numpy as np
import pytest

from attnphase import Setting
from attnphase.theory import Overlaps, solve
from attnphase.theory.results import summaries

CASES = [
    # (L, r, r*, positions, omega, alpha)
    (3, 1, 1, "simplex", 0.3, 1.5),
    (2, 2, 1, "antipodal", 0.3, 1.5),
    (2, 1, 2, "antipodal", 0.3, 1.5),
    (4, 1, 1, "orthogonal", 0.3, 1.5),
]
D, SEEDS, REL = 500, (0, 1, 2, 3), 0.05


def sim_summary(res, setting: Setting) -> dict[str, float]:
    o = Overlaps(q=np.atleast_2d(res.q), m=np.asarray(res.m, dtype=float).reshape(setting.L, setting.r),
                 V=np.eye(setting.r), theta=np.atleast_2d(res.theta).reshape(setting.r, setting.r_star))
    s = summaries(o)
    return {"train_loss": float(res.train_loss), "test_error": float(res.test_error), "q": s["q"], "m": s["m"],
            "theta": s["theta"]}


def compare(setting: Setting, alpha: float, branch: str, d: int = D, seeds=SEEDS, optimizer: str = "gd"):
    """Rows (quantity, theory, sim mean, sim sem, ok) for one branch, or None when the theory has no fixed point."""
    from attnphase.simulation import simulate

    fp = solve(setting, alpha, branch, "default")
    if not fp.converged:
        return fp, None
    sims = [sim_summary(simulate(setting, d=d, alpha=alpha, init=branch, optimizer=optimizer, seed=s), setting)
            for s in seeds]
    theory = {"train_loss": fp.train_loss, "test_error": fp.test_error, **fp.summary()}
    rows = []
    for key in ("train_loss", "test_error", "q", "m", "theta"):
        v = np.array([x[key] for x in sims])
        mean, sem = float(v.mean()), float(v.std(ddof=1) / np.sqrt(len(v)))
        ok = abs(theory[key] - mean) <= 3 * sem + REL * abs(theory[key]) + 1e-4 * (key in ("m", "theta"))
        rows.append((key, float(theory[key]), mean, sem, bool(ok)))
    return fp, rows


@pytest.mark.slow
@pytest.mark.parametrize("L,r,rs,pos,omega,alpha", CASES)
def test_theory_matches_simulation(L, r, rs, pos, omega, alpha):
    s = Setting(L=L, r=r, r_star=rs, positions=pos, omega=omega)
    checked = 0
    for branch in ("semantic", "positional"):
        fp, rows = compare(s, alpha, branch)
        if rows is None:
            continue
        checked += 1
        bad = [row for row in rows if not row[-1]]
        assert not bad, (branch, bad)
    assert checked >= 1, "the theory found no fixed point on either branch"
