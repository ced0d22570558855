"""The general engine at L = 2, r = r* = 1, antipodal positions reproduces the study-only engine it replaced.

Two references, both independent of the general code:
- a frozen copy (below) of the study-only channel and prior sides as they were before the general engine
  (scalar formulas of the study, two-dimensional proximal kernel), compared map by map on the same points;
- fixed points computed by the study-only engine (commit 6551984 of this repository, `solve(Setting(...), alpha,
  branch, precision)` with seed 0), hard-coded below.  Compared within one standard error plus the relative
  iteration tolerance tol of the precision level: the points are the same scramblings, but the solver's path has
  changed since (coarse pre-solve, Jacobian steps, chord acceptance), and each scrambling's fixed point is only
  defined to tol, which the error bars do not contain (measured after that change: at most 1e-4 relative at
  default, 4.6e-4 at fast, where tol = 3e-4 and the train_loss error bar is 7.5e-5 relative).
"""

from __future__ import annotations

import numpy as np
import pytest

from attnphase import Setting
from attnphase.theory import Overlaps, branch_map, solve
from attnphase.theory.model.loss import target_diagonal
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.prox.two_token import solve_prox
from attnphase.theory.state_evolution.precision import PRECISIONS


def _study_map(z, alpha, q, m, V, theta, *, omega, A, sigma2, lam, rho, branch):
    """Frozen copy of the study-only channel + prior: (q, m, V, theta) -> new (q, m, V, theta)."""
    sq = np.sqrt(q)
    w1, w2 = sq * z[0] + m, sq * z[1] - m
    c = np.sqrt(rho - theta * theta / q)
    hs1, hs2 = (theta / sq) * z[0] + c * z[2], (theta / sq) * z[1] + c * z[3]
    t1, t2 = target_diagonal(hs1, hs2, omega, A)
    sol = solve_prox(w1, w2, t1, t2, V, sigma2)
    f1, f2 = (sol.h1 - w1) / V, (sol.h2 - w2) / V
    qhat = alpha * np.mean(f1 * f1 + f2 * f2)
    mhat = alpha * np.mean(f1 - f2) if branch == "positional" else 0.0
    thetahat = alpha * np.mean(f1 * z[2] + f2 * z[3]) / c if branch == "semantic" else 0.0
    Vhat = -alpha * np.mean(f1 * z[0] + f2 * z[1]) / sq + theta * thetahat / q
    K = 1.0 / (lam + sigma2 * Vhat)
    return np.array([sigma2 * K * K * (sigma2 * qhat + mhat**2 + sigma2 * rho * thetahat**2), K * mhat, sigma2 * K,
                     sigma2 * rho * K * thetahat])


@pytest.mark.parametrize("branch,x", [("positional", (0.05, 0.25, 13.6, 0.0)), ("semantic", (0.094, 0.0, 16.0, 0.135)),
                                      ("agnostic", (0.07, 0.0, 29.0, 0.0)), ("positional", (0.5, 0.1, 3.0, 0.0))])
@pytest.mark.parametrize("omega,A", [(0.3, ((0.6, 0.4), (0.4, 0.6))), (0.1, ((0.3, 0.7), (0.8, 0.2)))])
def test_general_map_equals_study_map(branch, x, omega, A):
    s = Setting(omega=omega, A=A)
    z = gaussian_sobol(12, 4, 5)
    q, m, V, theta = x
    ref = _study_map(z, 1.3, q, m, V, theta, omega=omega, A=s.A_array, sigma2=s.sigma**2, lam=s.lam, rho=s.rho,
                     branch=branch)
    bm = branch_map(s, 1.3, branch, z)
    new = bm.unpack(bm(bm.pack(Overlaps(q=q, m=m, V=V, theta=theta))))
    got = np.array([new.q[0, 0], new.m[0, 0], new.V[0, 0], new.theta[0, 0]])
    np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-14)  # prox gradient tolerance 1e-9
    assert new.m[1, 0] == -new.m[0, 0]


def test_general_prox_kernel_on_study_geometry_agrees_with_2d_kernel():
    """The same map with the general batched kernel forced instead of the compiled 2-D one."""
    s = Setting()
    z = gaussian_sobol(12, 4, 9)
    for branch, o in (("positional", Overlaps(q=0.05, m=0.25, V=13.6, theta=0.0)),
                      ("semantic", Overlaps(q=0.094, m=0.0, V=16.0, theta=0.135))):
        a = branch_map(s, 1.5, branch, z)
        b = branch_map(s, 1.5, branch, z, kernel="general")
        ga, oa = a.step(a.pack(o))
        gb, ob = b.step(b.pack(o))
        np.testing.assert_allclose(gb, ga, rtol=1e-7)
        assert ob.moreau == pytest.approx(oa.moreau, rel=1e-10)


# Study-only engine (commit 6551984), seed 0: (branch, alpha, precision, omega, A) -> q, m, V, theta, train, test.
STUDY_REFERENCE = [
    ("positional", 1.5, "fast", 0.3, None,
     (0.049471202571316535, 0.254721980976339, 13.605689087189031, 0.0, 0.003296765971286632, 0.003439749922024356)),
    ("semantic", 1.5, "fast", 0.3, None,
     (0.09400248646532854, 0.0, 15.987303574454145, 0.1346722708303811, 0.003053737775606901, 0.0019574256677522025)),
    ("agnostic", 1.0, "fast", 0.3, None,
     (0.06718483938271495, 0.0, 29.08259533375393, 0.0, 0.0024074508383173476, 0.0037949674409387788)),
    ("semantic", 1.0, "fast", 0.1, ((0.3, 0.7), (0.8, 0.2)),
     (0.05719030419479451, 0.0, 17.1319202152928, 0.09791534291349713, 0.0020356653413685197, 0.0023414650963912266)),
]


@pytest.mark.parametrize("branch,alpha,precision,omega,A,ref", STUDY_REFERENCE)
def test_fixed_points_equal_study_engine(branch, alpha, precision, omega, A, ref):
    fp = solve(Setting(omega=omega, A=A), alpha, branch, precision)
    assert fp.converged
    _assert_within_errors(fp, ref)


def _assert_within_errors(fp, ref):
    got = fp.to_dict()
    tol = PRECISIONS[fp.precision].tol
    for key, value in zip(("q", "m", "V", "theta", "train_loss", "test_error"), ref, strict=True):
        assert abs(got[key] - value) <= fp.errors[key] + tol * abs(value) + 1e-12, (key, got[key], value)


@pytest.mark.slow
@pytest.mark.parametrize("branch,alpha,ref", [
    ("semantic", 1.5, (0.09393704157063977, 0.0, 16.028375572946548, 0.13451340581957508, 0.0030535657578809744,
                       0.001961521350709843)),
    ("positional", 0.8, (0.03937757388510537, 0.241981491169057, 17.85647802811074, 0.0, 0.0017465869614959196,
                         0.00327585058882324)),
])
def test_default_precision_fixed_points_equal_study_engine(branch, alpha, ref):
    fp = solve(Setting(), alpha, branch, "default")
    assert fp.converged
    _assert_within_errors(fp, ref)
