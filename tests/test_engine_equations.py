"""The general equations checked against independent characterisations of the same quantities.

Channel side: every hat overlap is a derivative of the averaged Moreau envelope E[M] (M = min_h F) with respect
to the overlaps (envelope theorem plus the Gaussian identity d E[g]/d Cov = (1/2) E[d^2 g]):
    mhat_l = -alpha dE[M]/dm_l,   qhat = -2 alpha dE[M]/dV (r = 1),   thetahat = -alpha dE[M]/dtheta,
    Vhat_aa = 2 alpha dE[M]/dq_aa,   Vhat_ab = alpha dE[M]/d(q_ab = q_ba)   (h* held at fixed covariance theta).
The code computes them differently (f_l averages; Vhat and thetahat by Stein's lemma), so central finite
differences of E[M] on the same points are an independent check, including the jumps of the global minimiser.
Prior side: the closed form is the stationary point of the prior part of the free energy in the hat overlaps.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnphase import Setting
from attnphase.theory.model.channel import points_dim, update_hatoverlaps
from attnphase.theory.model.overlaps import HatOverlaps, Overlaps
from attnphase.theory.model.prior import prior_energy, update_overlaps
from attnphase.theory.model.quadrature import gaussian_sobol

CASES = [
    # (L, r, r*, positions, overlaps, log2 of the number of points: Stein and pathwise derivatives agree only up to
    # the integration error, measured to shrink with the points, e.g. thetahat_01 below: 4% apart at 2^13, 0.1% at 2^17)
    (3, 1, 1, "simplex", Overlaps(q=[[0.12]], m=[[0.2], [-0.05], [-0.15]], V=[[12.0]], theta=[[0.15]]), 13),
    (2, 2, 1, "antipodal", Overlaps(q=[[0.15, 0.02], [0.02, 0.05]], m=[[0.1, 0.03], [-0.1, -0.03]],
                                    V=[[12.0, 1.0], [1.0, 18.0]], theta=[[0.16], [0.02]]), 13),
    (2, 1, 2, "orthogonal", Overlaps(q=[[0.12]], m=[[0.15], [0.05]], V=[[14.0]], theta=[[0.14, 0.05]]), 17),
]


def _moreau(s, alpha, o, z):
    return update_hatoverlaps(s, alpha, o, z, "free").moreau


def _shift(o: Overlaps, name: str, delta: np.ndarray) -> Overlaps:
    kw = {k: getattr(o, k) for k in ("q", "m", "V", "theta")}
    kw[name] = kw[name] + delta
    return Overlaps(**kw)


@pytest.mark.parametrize("L,r,rs,pos,o,log2", CASES)
def test_hat_overlaps_are_derivatives_of_the_moreau_envelope(L, r, rs, pos, o, log2):
    s = Setting(L=L, r=r, r_star=rs, positions=pos)
    z = gaussian_sobol(log2, points_dim(s), 11)
    alpha = 1.0
    h = update_hatoverlaps(s, alpha, o, z, "free").hats

    def d(name, i, j, eps, sym=False):
        E = np.zeros_like(getattr(o, name))
        E[i, j] = eps
        if sym:
            E[j, i] = eps
        up = _moreau(s, alpha, _shift(o, name, E), z)
        dn = _moreau(s, alpha, _shift(o, name, -E), z)
        return (up - dn) / (2 * eps)

    for l in range(L):
        for a in range(r):
            assert h.mhat[l, a] == pytest.approx(-alpha * d("m", l, a, 1e-4), rel=1e-3, abs=1e-6)
    for a in range(r):
        for b in range(rs):
            assert h.thetahat[a, b] == pytest.approx(-alpha * d("theta", a, b, 1e-4), rel=0.03, abs=2e-4), (a, b)
    for a in range(r):
        assert h.Vhat[a, a] == pytest.approx(2 * alpha * d("q", a, a, 1e-4), rel=0.03, abs=2e-4)
        for b in range(a + 1, r):
            assert h.Vhat[a, b] == pytest.approx(alpha * d("q", a, b, 1e-4, sym=True), rel=0.05, abs=2e-4)
    if r == 1:
        assert h.qhat[0, 0] == pytest.approx(-2 * alpha * d("V", 0, 0, 1e-3), rel=1e-4)


@pytest.mark.parametrize("L,r,rs,pos,o,log2", CASES)
def test_prior_is_the_stationary_point_of_the_prior_energy(L, r, rs, pos, o, log2):
    s = Setting(L=L, r=r, r_star=rs, positions=pos)
    rng = np.random.default_rng(0)

    def sym(M):
        return 0.5 * (M + M.T)

    h = HatOverlaps(qhat=sym(rng.normal(0, 0.01, (r, r))) + 0.05 * np.eye(r), mhat=rng.normal(0, 0.1, (L, r)),
                    Vhat=sym(rng.normal(0, 0.2, (r, r))) + 2.0 * np.eye(r), thetahat=rng.normal(0, 0.3, (r, rs)))
    o_star = update_overlaps(s, h)
    for name in ("qhat", "mhat", "Vhat", "thetahat"):
        M = getattr(h, name)
        for idx in np.ndindex(M.shape):
            E = np.zeros_like(M)
            E[idx] = 1e-5
            if name in ("qhat", "Vhat"):
                E[idx[::-1]] = 1e-5

            def energy(delta, name=name):
                kw = {k: getattr(h, k) for k in ("qhat", "mhat", "Vhat", "thetahat")}
                kw[name] = kw[name] + delta
                return prior_energy(s, o_star, HatOverlaps(**kw))

            grad = (energy(E) - energy(-E)) / 2e-5
            assert abs(grad) < 1e-7, (name, idx, grad)
    # m lies in the range of G; V = sigma^2 K is symmetric positive definite.
    assert np.allclose(o_star.V, o_star.V.T) and np.linalg.eigvalsh(o_star.V).min() > 0
