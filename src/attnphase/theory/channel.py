"""Channel side: overlaps (q, m, V, theta) -> hat overlaps, via the proximal map (MODEL.md section 3).

All Gaussian expectations are averages over one set of integration points `z` of shape (4, n) holding
(xi_1, xi_2, eta_1, eta_2).  The same points are reused across outer iterations, branches and alphas
(common random numbers), so integration errors are smooth in the parameters and cancel in differences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.theory.loss import target_diagonal
from attnphase.theory.proximal import solve_prox


@dataclass
class ChannelOutput:
    qhat: float
    mhat: float
    Vhat: float
    thetahat: float
    moreau: float  # E[min_h F], enters the free energy
    prox_failures: int  # points whose Newton did not reach the gradient tolerance


def teacher_fields(z: np.ndarray, q: float, theta: float, rho: float) -> tuple[np.ndarray, np.ndarray, float]:
    """h*_l = (theta / sqrt(q)) xi_l + sqrt(rho - theta^2 / q) eta_l, and that sqrt."""
    sq = np.sqrt(q)
    resid = rho - theta * theta / q
    if resid <= 0:
        raise ValueError(f"overlaps left the admissible set: rho - theta^2/q = {resid:.3g} <= 0")
    c = np.sqrt(resid)
    return (theta / sq) * z[0] + c * z[2], (theta / sq) * z[1] + c * z[3], c


def channel(z: np.ndarray, alpha: float, q: float, m: float, V: float, theta: float, *, omega: float,
            A: np.ndarray, sigma2: float, rho: float, branch: str) -> ChannelOutput:
    """Hat overlaps at (q, m, V, theta), averaged over the points z (shape (4, n)).

    (A control variate built on the large-V picture hhat ~ sign(h0 . w) h0, with closed-form conditional
    means for theta = 0, was measured: unbiased but 3-7x larger variance at the study's V ~ 10-30, where
    the quadratic term still moves hhat far from +-h0; not used.)"""
    sq = np.sqrt(q)
    w1 = sq * z[0] + m
    w2 = sq * z[1] - m
    hs1, hs2, c = teacher_fields(z, q, theta, rho)
    t1, t2 = target_diagonal(hs1, hs2, omega, A)
    sol = solve_prox(w1, w2, t1, t2, V, sigma2)
    f1 = (sol.h1 - w1) / V
    f2 = (sol.h2 - w2) / V
    qhat = alpha * float(np.mean(f1 * f1 + f2 * f2))
    # Exact branch symmetries: round-off must not push the iteration off its branch.
    mhat = alpha * float(np.mean(f1 - f2)) if branch in ("positional", "free") else 0.0
    if branch in ("semantic", "free"):
        thetahat = alpha * float(np.mean(f1 * z[2] + f2 * z[3])) / c
    else:
        thetahat = 0.0
    # Stein form of -alpha E[df/domega]: it keeps the contribution of the jumps of the global
    # minimiser between basins, which the pointwise Jacobian misses.
    Vhat = -alpha * float(np.mean(f1 * z[0] + f2 * z[1])) / sq + theta * thetahat / q
    return ChannelOutput(qhat=qhat, mhat=mhat, Vhat=Vhat, thetahat=thetahat,
                         moreau=float(np.mean(sol.value)), prox_failures=int(np.sum(~sol.converged)))
