"""The study's map's Jacobian with the points that switch basin counted (BranchMap.score_jacobian: likelihood-ratio
columns along q, m, theta by channel.reweighted_hats, the basin-held column along V), held against central
differences of the full map on 2^19 points (an independent reference: many points average the basin switches that
make a difference on few points noise) and, for its V column, against the general kernel's basin-held derivative
(an independent prox).  A diagnostic: the solver's matrix stays BranchMap.jacobian (docs/numerics.md)."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.setting import Setting
from attnphase.theory.model.channel import pointwise_f, reweighted_hats, update_hatoverlaps
from attnphase.theory.model.overlaps import Overlaps
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.solvers.fixed_point import jacobian
from attnphase.theory.state_evolution.branch_map import branch_map
from attnphase.theory.state_evolution.solve import solve


def _scaled(J: np.ndarray, x: np.ndarray, bm) -> np.ndarray:
    S = bm.layout.scale(x)
    return J * S[None, :] / S[:, None]


def _reference(s: Setting, alpha: float, branch: str, x: np.ndarray) -> np.ndarray:
    """Central differences (step 3e-3 of the scale) of the full map on 2^19 points of their own scrambling."""
    bm = branch_map(s, alpha, branch, gaussian_sobol(19, 4, 7))
    return jacobian(bm.step, x, 3e-3, bm.layout.scale, central=True)[0]


def test_reweighted_hats_at_the_same_overlaps_are_the_maps():
    """With o_new = o every weight is 1: the hats are the channel's (to round-off); with another V, refused."""
    s = Setting(omega=0.3)
    fp = solve(s, 1.2, "semantic", "fast")
    pts = gaussian_sobol(13, 4, 0)
    o = fp.overlaps
    f = pointwise_f(s, o, pts)[0]
    got = reweighted_hats(s, 1.2, o, pts, "semantic", f, o)
    want = update_hatoverlaps(s, 1.2, o, pts, "semantic").hats
    for name in ("qhat", "mhat", "Vhat", "thetahat"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-10, atol=1e-14)
    with pytest.raises(ValueError, match="V"):
        reweighted_hats(s, 1.2, o, pts, "semantic", f, Overlaps(q=o.q, m=o.m, V=1.01 * o.V, theta=o.theta))


@pytest.mark.parametrize(("omega", "alpha", "branch", "within"), [
    # next to the positional branch's end at omega 0 (0.93): the solver's difference 14-62% off, the basin-held 87%
    (0.0, 0.8, "positional", 0.12),
    # next to it at omega 0.1 (1.289): the solver's 17-69% off, with eigenvalues 1.01 and 2.87
    (0.1, 1.2, "positional", 0.12),
    (0.3, 0.8, "semantic", 0.03),
])
def test_score_jacobian_is_the_maps_on_every_scrambling(omega, alpha, branch, within):
    """On three scramblings of 2^15 points the score Jacobian is within `within` (Frobenius, scaled) of the reference
    (measured 7.1-7.7% at omega 0, 5.1-5.4% at omega 0.1, 1.0-1.6% at the semantic point:
    benchmarks/study_jacobian.py); next to the ends, where the reference's eigenvalues lie at 0.73 and 0.63, none of
    its eigenvalues within 0.1 of 1 (where (I - J)^-1, the chord's matrix, blows up)."""
    s = Setting(omega=omega)
    fp = solve(s, alpha, branch, "fast", stability=False)
    assert fp.valid
    x = branch_map(s, alpha, branch, gaussian_sobol(13, 4, 0)).pack(fp.overlaps)
    ref = _reference(s, alpha, branch, x)
    for rep in (0, 1, 2):
        bm = branch_map(s, alpha, branch, gaussian_sobol(15, 4, rep))
        J = bm.score_jacobian(x)
        assert np.linalg.norm(_scaled(J - ref, x, bm)) < within * np.linalg.norm(_scaled(ref, x, bm))
        if branch == "positional":
            ev = np.linalg.eigvals(J)
            assert np.all(np.abs(ev - 1.0) > 0.1), ev


def test_score_jacobians_v_column_is_the_general_kernels_basin_held_one():
    """The V column (each point's minimiser held in its basin) equals the general kernel's basin-held derivative on
    the same points (another prox: Newton from the warm minimiser), within 1e-3 of that column; the kernels it is not
    for are refused."""
    s = Setting(omega=0.1)
    fp = solve(s, 1.2, "positional", "fast", stability=False)
    pts = gaussian_sobol(15, 4, 1)
    bm = branch_map(s, 1.2, "positional", pts)
    x = bm.pack(fp.overlaps)
    J = bm.score_jacobian(x)
    general = branch_map(s, 1.2, "positional", pts, kernel="general")
    Jg, _ = general.jacobian(x)
    v = bm.layout.block("V")
    np.testing.assert_allclose(J[:, v], Jg[:, v], rtol=0, atol=1e-3 * np.abs(Jg[:, v]).max())
    with pytest.raises(ValueError, match="two-token"):
        general.score_jacobian(x)
