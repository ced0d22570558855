"""Observables at a fixed point: the test error E[l(h, h*)] (a smooth Gaussian integral).

h_l = m_l + q^{1/2} xi_l and h*_l = theta^T q^{-1/2} xi_l + c eta_l are jointly Gaussian.  For L = 2,
r = r* = 1 (four dimensions) a tensor Gauss-Hermite rule converges fast (error estimate: 20- vs 14-point
rules); in more dimensions scrambled Sobol points (error estimate: spread over scramblings).  The untied student
(setting.untied; fields h = (h^Q, h^K)) uses the bilinear scores h^Q h^K^T in the loss, always by QMC.
"""

from __future__ import annotations

import numpy as np

from attnphase.problem import Problem
from attnphase.setting import Setting
from attnphase.theory.model.channel import fields, points_dim
from attnphase.theory.model.overlaps import Overlaps
from attnphase.theory.model.quadrature import gauss_hermite_grid, gaussian_sobol
from attnphase.theory.prox._two_token_kernel import loss_at_nodes_kernel
from attnphase.theory.solvers.fixed_point import Inadmissible

FINE, COARSE = 20, 14  # Gauss-Hermite orders; their difference is the quadrature error estimate
QMC_LOG2, QMC_REPLICAS = 14, 4


def _te_2d(n: int, setting: Setting, o: Overlaps) -> float:
    z, w = gauss_hermite_grid(n, 4)
    q, theta = float(o.q[0, 0]), float(o.theta[0, 0])
    if q > 0 and np.isfinite(q):
        sq = np.sqrt(q)
        c = np.sqrt(max(setting.rho - theta * theta / q, 0.0))
        a = theta / sq
    else:
        # A collapsed student (q underflows to 0, e.g. sigma = 1e-4): its fields are their means m_l, and
        # |theta| <= sqrt(q rho) is 0 with q, so the teacher's fields are sqrt(rho) eta_l.  The limit, not a
        # division by zero.
        sq, a, c = 0.0, 0.0, np.sqrt(setting.rho)
    A = setting.A_array
    # (the loss per point compiled, 2-5x less CPU than numpy's temporaries: docs/numerics.md, "What a fixed point
    # costs"; then numpy's pairwise sum, not BLAS's dot: the same bits whatever the thread count (--workers 1 runs
    # with BLAS threads, the workers with one), measured to differ in the 16th digit otherwise)
    loss = loss_at_nodes_kernel(z, float(sq), float(o.m[0, 0]), float(o.m[1, 0]), float(a), float(c),
                                float(setting.omega), float(A[0, 0]), float(A[1, 1]), float(setting.sigma**2))
    return float(np.sum(w * loss))


def _te_qmc(setting: Setting, o: Overlaps, rep: int) -> float:
    z = gaussian_sobol(QMC_LOG2, points_dim(setting), 7919 + rep)
    try:
        w, hstar, _ = fields(setting, o, z)
    except Inadmissible:
        # q (or rho - theta^T q^-1 theta) is not positive definite at these overlaps (a collapsed or degenerate
        # point): no number rather than a crash; the fixed point's status says why.
        return float("nan")
    pb = Problem(setting)
    # The untied student's fields are (h^Q, h^K) side by side: the scores are h^Q h^K^T.
    half = w.shape[2] // 2
    S = pb.student_attention(w[:, :, :half], w[:, :, half:]) if setting.untied else pb.student_attention(w)
    return float(np.mean(pb.loss(S, pb.teacher_attention(hstar))))


def test_error_estimate(setting: Setting, o: Overlaps) -> float:
    """A single estimate (for per-replica spreads): the coarse Gauss-Hermite rule or one QMC scrambling.  The
    coarse rule's bias (fine - coarse, ~4e-9 at the study's fixed points) moves by under 2e-10 when the overlaps
    move by the scramblings' spread, which moves the test error by ~1e-6: the spread is the same as with the
    fine rule, at a seventh of the cost (measured, 2 ms against 16 ms)."""
    if o.dims == (2, 1, 1) and not setting.untied:
        return _te_2d(COARSE, setting, o)
    return _te_qmc(setting, o, 0)


def test_error(setting: Setting, o: Overlaps) -> tuple[float, float]:
    """E[l(h, h*)] and an estimate of its integration error."""
    if o.dims == (2, 1, 1) and not setting.untied:
        fine = _te_2d(FINE, setting, o)
        return fine, abs(fine - _te_2d(COARSE, setting, o))
    vals = np.array([_te_qmc(setting, o, k) for k in range(QMC_REPLICAS)])
    return float(vals.mean()), float(vals.std(ddof=1) / np.sqrt(len(vals)))
