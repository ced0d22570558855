"""Compiled (numba) averages of the study's case, L = 2, r = r* = 1: one pass over the integration points.

The same algebra as theory.model.loss.loss_derivatives (u_1 = h_1 (h_1 - h_2), u_2 = h_2 (h_2 - h_1), l = sum_i
sigma^2 (logistic(u_i) - T_ii)^2), accumulated without temporaries; tests hold it against the numpy path.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def _expit(u: float) -> float:
    if u >= 0.0:
        return 1.0 / (1.0 + math.exp(-u))
    e = math.exp(u)
    return e / (1.0 + e)


@numba.njit(cache=True)
def two_token_averages(z: np.ndarray, w: np.ndarray, t: np.ndarray, m1: float, m2: float, a: float, rs: float,
                       sigma: float) -> np.ndarray:
    """[E l, E g_1, E g_2, A, B, Hsum, N] with h*_l = sigma eta_l, h_l = m_l + a eta_l + rs xi_l
    (rows of z: xi_1, xi_2, eta_1, eta_2; t: the targets (T_11, T_22) at the points, shape (2, n))."""
    s2 = sigma * sigma
    out = np.zeros(7)
    for i in range(w.shape[0]):
        e1, e2 = z[2, i], z[3, i]
        hs1, hs2 = sigma * e1, sigma * e2
        t1, t2 = t[0, i], t[1, i]
        x1 = a * e1 + rs * z[0, i]
        x2 = a * e2 + rs * z[1, i]
        h1, h2 = m1 + x1, m2 + x2
        s1 = _expit(h1 * (h1 - h2))
        s2_ = _expit(h2 * (h2 - h1))
        d1 = s1 - t1
        d2 = s2_ - t2
        p1 = s1 * (1.0 - s1)
        p2 = s2_ * (1.0 - s2_)
        c1 = 2.0 * s2 * d1 * p1
        c2 = 2.0 * s2 * d2 * p2
        cc1 = 2.0 * s2 * (p1 * p1 + d1 * p1 * (1.0 - 2.0 * s1))
        cc2 = 2.0 * s2 * (p2 * p2 + d2 * p2 * (1.0 - 2.0 * s2_))
        a1 = 2.0 * h1 - h2
        b1 = -h1
        a2 = -h2
        b2 = 2.0 * h2 - h1
        g1 = c1 * a1 + c2 * a2
        g2 = c1 * b1 + c2 * b2
        H11 = cc1 * a1 * a1 + cc2 * a2 * a2 + 2.0 * c1
        H22 = cc1 * b1 * b1 + cc2 * b2 * b2 + 2.0 * c2
        wi = w[i]
        out[0] += wi * s2 * (d1 * d1 + d2 * d2)
        out[1] += wi * g1
        out[2] += wi * g2
        out[3] += wi * (g1 * x1 + g2 * x2)
        out[4] += wi * (g1 * hs1 + g2 * hs2)
        out[5] += wi * (H11 + H22)
        out[6] += wi * (g1 * g1 + g2 * g2)
    return out
