"""The per-sample attention loss of attnphase.problem written out for L = 2, r = r* = 1, with its derivatives.

For two tokens the row-wise softmax is a logistic:
    S_11 = logistic(h_1 (h_1 - h_2)),  S_22 = logistic(h_2 (h_2 - h_1)),
and l(h, h*) = sigma^2 [(S_11 - T_11)^2 + (S_22 - T_22)^2] (problem.loss: each row's two errors are equal and
opposite).  scipy's expit is overflow-safe, so huge scores saturate cleanly instead of producing NaN.  The closed
forms are the prox's objective and Newton derivatives; tests/test_problem.py holds them equal to problem.loss.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from attnphase.problem import teacher_attention


def target_diagonal(hs1: np.ndarray, hs2: np.ndarray, omega: float, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Diagonal entries (T_11, T_22) of the teacher's T (problem.teacher_attention) at scalar fields (h*_1, h*_2)."""
    hs1, hs2 = np.broadcast_arrays(np.asarray(hs1, dtype=np.float64), np.asarray(hs2, dtype=np.float64))
    T = teacher_attention(np.stack([hs1, hs2], axis=-1)[..., None], omega, A)
    return T[..., 0, 0], T[..., 1, 1]


def attention_loss(h1: np.ndarray, h2: np.ndarray, t1: np.ndarray, t2: np.ndarray, sigma2: float) -> np.ndarray:
    """l(h, h*) for targets (T_11, T_22)."""
    with np.errstate(over="ignore", invalid="ignore"):
        s1 = expit(h1 * (h1 - h2))
        s2 = expit(h2 * (h2 - h1))
    return sigma2 * ((s1 - t1) ** 2 + (s2 - t2) ** 2)


def loss_derivatives(h1, h2, t1, t2, sigma2):
    """Value, gradient (g1, g2) and Hessian (H11, H12, H22) of l with respect to h.

    With u_1 = h_1^2 - h_1 h_2 and u_2 = h_2^2 - h_1 h_2, l = sum_i c(u_i) where
    c(u) = sigma^2 (s(u) - T)^2, so grad l = sum_i c'(u_i) grad u_i and
    Hess l = sum_i c''(u_i) grad u_i grad u_i^T + c'(u_i) Hess u_i.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        # Huge fields overflow the scores to +-inf; expit saturates them cleanly.
        u1 = h1 * (h1 - h2)
        u2 = h2 * (h2 - h1)
    s1 = expit(u1)
    s2 = expit(u2)
    e1 = s1 - t1
    e2 = s2 - t2
    d1 = s1 * (1.0 - s1)
    d2 = s2 * (1.0 - s2)
    value = sigma2 * (e1 * e1 + e2 * e2)
    c1 = 2.0 * sigma2 * e1 * d1
    c2 = 2.0 * sigma2 * e2 * d2
    cc1 = 2.0 * sigma2 * (d1 * d1 + e1 * d1 * (1.0 - 2.0 * s1))
    cc2 = 2.0 * sigma2 * (d2 * d2 + e2 * d2 * (1.0 - 2.0 * s2))
    # grad u_1 = (2 h1 - h2, -h1), grad u_2 = (-h2, 2 h2 - h1);
    # Hess u_1 = [[2, -1], [-1, 0]], Hess u_2 = [[0, -1], [-1, 2]].
    a1 = 2.0 * h1 - h2
    b1 = -h1
    a2 = -h2
    b2 = 2.0 * h2 - h1
    g1 = c1 * a1 + c2 * a2
    g2 = c1 * b1 + c2 * b2
    H11 = cc1 * a1 * a1 + cc2 * a2 * a2 + 2.0 * c1
    H12 = cc1 * a1 * b1 + cc2 * a2 * b2 - c1 - c2
    H22 = cc1 * b1 * b1 + cc2 * b2 * b2 + 2.0 * c2
    return value, g1, g2, H11, H12, H22
