"""Observables at a fixed point: test error (smooth Gaussian integral) and the energy."""

from __future__ import annotations

import numpy as np

from attnphase.theory.loss import attention_loss, target_diagonal
from attnphase.theory.quadrature import gauss_hermite_grid

FINE, COARSE = 20, 14  # Gauss-Hermite orders; their difference is the quadrature error estimate


def test_error_rule(n: int, q: float, m: float, theta: float, *, omega, A, sigma2, rho) -> float:
    """E[l(h, h*)] with the n-point tensor Gauss-Hermite rule in each of the 4 dimensions."""
    z, w = gauss_hermite_grid(n, 4)
    sq = np.sqrt(q)
    c = np.sqrt(max(rho - theta * theta / q, 0.0))
    h1 = sq * z[0] + m
    h2 = sq * z[1] - m
    hs1 = (theta / sq) * z[0] + c * z[2]
    hs2 = (theta / sq) * z[1] + c * z[3]
    t1, t2 = target_diagonal(hs1, hs2, omega, A)
    return float(np.dot(w, attention_loss(h1, h2, t1, t2, sigma2)))


def test_error(q: float, m: float, theta: float, *, omega: float, A: np.ndarray, sigma2: float,
               rho: float) -> tuple[float, float]:
    """E[l(h, h*)] with (h, h*) jointly Gaussian (MODEL.md section 3), and an error estimate.

    The integrand is smooth, so a tensor Gauss-Hermite rule converges fast; the error estimate is the
    difference between the 20- and 14-point rules.
    """
    kw = dict(omega=omega, A=A, sigma2=sigma2, rho=rho)
    fine = test_error_rule(FINE, q, m, theta, **kw)
    coarse = test_error_rule(COARSE, q, m, theta, **kw)
    return fine, abs(fine - coarse)
