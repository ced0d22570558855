"""The full-resolution restart after a coarse collapse (state_evolution.BranchMap.with_order, _coarse_start)."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase import Setting
from attnphase.theory.model.overlaps import Overlaps
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.solvers.fixed_point import Status
from attnphase.theory.state_evolution.branch_map import BranchMap, branch_map
from attnphase.theory.state_evolution.precision import Precision
from attnphase.theory.state_evolution.results import summaries
from attnphase.theory.state_evolution.solve import solve

S = Setting(omega=0.3)


def test_with_order_rescales_the_order_parameter_only():
    bm = branch_map(S, 0.9, "semantic", gaussian_sobol(13, 4, 0))
    x = bm.pack(Overlaps(q=0.09, m=0.0, V=16.0, theta=-0.05))
    y = bm.with_order(x, 5.0)
    k = bm.layout.names().index("theta[0,0]")
    threshold = 1e-2 * np.sqrt(0.09 * S.rho)
    assert y[k] == pytest.approx(-5.0 * threshold, rel=1e-12)  # sign (direction) kept
    np.testing.assert_array_equal(np.delete(y, k), np.delete(x, k))
    assert not bm.collapsed(y) and bm.collapsed(bm.with_order(x, 0.5))
    x[k] = 0.0
    assert bm.with_order(x, 5.0) is None  # no direction to restore
    pos = branch_map(S, 0.9, "positional", gaussian_sobol(13, 4, 0))
    xp = pos.pack(Overlaps(q=0.04, m=np.array([[0.3], [-0.3]]), V=13.0, theta=0.0))
    assert summaries(pos.unpack(pos.with_order(xp, 5.0)))["m"] == pytest.approx(5e-2 * 0.2, rel=1e-12)
    agn = branch_map(S, 0.9, "agnostic", gaussian_sobol(13, 4, 0))
    assert agn.with_order(agn.pack(Overlaps(q=0.04, m=0.0, V=13.0, theta=0.0)), 5.0) is None


def test_collapse_verdict_after_the_coarse_restart_is_the_full_maps(monkeypatch):
    """Below the semantic end (0.72 at omega 0.3) the solve collapses, with or without the coarse pre-solve; with
    it, the full resolution restarts from the coarse end point with theta put back to 5x the collapse threshold
    and carries it to zero itself."""
    no_coarse = Precision("no-coarse", 15, 6, 3e-5, max_iter=100, accept=1e-3, target=1e-3, max_replicas=12)
    assert solve(S, 0.4, "semantic", no_coarse).status == Status.collapsed
    seen = []
    step = BranchMap.step

    def recording(self, x):
        out = step(self, x)
        seen.append((self.points.shape[1], summaries(self.unpack(x)), summaries(self.unpack(out[0]))))
        return out

    monkeypatch.setattr(BranchMap, "step", recording)
    low = solve(S, 0.4, "semantic", "default")
    assert low.status == Status.collapsed and low.n_replicas == 1
    full = [s for s in seen if s[0] == 2**15]
    coarse = [s for s in seen if s[0] == 2**12]
    assert coarse and full
    first = full[0][1]
    assert first["theta"] == pytest.approx(5e-2 * np.sqrt(first["q"] * S.rho), rel=1e-9)
    assert first["q"] == pytest.approx(coarse[-1][2]["q"], rel=1e-12)  # the coarse end point's q
    assert full[-1][2]["theta"] < first["theta"] / 5  # decayed at full resolution
