"""Compiled channel integrand for the study's case (L = 2, r = r* = 1, tied student): per integration point the
fields, the target's diagonal, the loss zeros, the proximal map (the kernel of theory/_prox_kernel.py, whose
per-point body best_of_starts it calls) and f_l = (hhat_l - omega_l) / V, in one parallel loop.

The unfused path (channel.pointwise_f with the l2r1 prox) spends about as much CPU in numpy around the Newton
kernel as in it; this kernel does the same arithmetic in the same order of operations, so its results equal
that path's to round-off (bitwise where the libm calls agree; tests/test_channel_l2r1.py holds them together).
It returns per-point terms only, laid out as the pointwise path's arrays: the sums over points are left to numpy,
the same reductions on the same numbers, so the hat overlaps equal that path's bitwise and do not depend on the
number of threads (a prange reduction would).

numba's cache does not see changes in functions imported from another file: after editing _prox_kernel.py,
clear this module's cache (its __pycache__/_channel_l2r1.*.nbi/.nbc) or touch this file.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from attnphase.theory._prox_kernel import MAX_MINIMA, best_of_starts

# Rows of channel_kernel's per-point products (n, L) (summed by the caller).
FF, FXI, FETA = range(3)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _expit(u):
    # scipy.special.expit's formula (1 / (1 + exp(-u))), so the targets equal attention.target_attention's.
    return 1.0 / (1.0 + math.exp(-u))


@numba.njit(cache=True, inline="always", error_model="numpy")
def _logit(p):
    # scipy.special.logit's formula (log1p near 1/2 for accuracy), so the zeros equal proximal.loss_zeros'.
    if p < 0.3 or p > 0.65:
        return math.log(p / (1.0 - p))
    s = 2.0 * (p - 0.5)
    return math.log1p(s) - math.log1p(-s)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _loss_zeros(t1, t2, w1, w2):
    """proximal.loss_zeros at one point."""
    eps = 1e-12
    u1 = _logit(min(max(t1, eps), 1 - eps))
    u2 = _logit(min(max(t2, eps), 1 - eps))
    c = u1 + u2
    if c > 1e-8:
        a = math.sqrt(c)
        return u1 / a, -u2 / a
    mid = 0.5 * (w1 + w2)
    return mid, mid


@numba.njit(cache=True, parallel=True, error_model="numpy")
def channel_kernel(z, sq, m1, m2, a, c, omega, A11, A22, V, V_prox, sigma2, gtol, max_iter, given, gcount):
    """The channel's per-point terms at points z (n, 4) (rows xi_1, xi_2, eta_1, eta_2 per point).

    Fields omega_l = xi_l sq + m_l, h*_l = a xi_l + c eta_l (sq = q^{1/2}, a = theta / sq, c = (rho - theta^2 /
    q)^{1/2}), targets T_ll = (1 - omega) expit(h*_l (h*_l - h*_k)) + omega A_ll, and the prox at V_prox from the
    own starts (gcount empty) or the given minima (given (n, K, 2), the first gcount[i] per point).  V_prox is the
    V the unfused path's prox sees (1 / (1 / V)); f_l = (hhat_l - omega_l) / V.

    Returns hhat (n, 2, 1), the distinct Newton end points (n, MAX_MINIMA, 2) and their count (n,), the products
    (3, n, 2) f_l f_l (row FF), f_l xi_l (FXI), f_l eta_l (FETA), sum_i f_l (2,) (serial, in point order: numpy's
    f.mean(axis=0) on (n, 2, 1) adds row by row), the value min_h F (n,) and the gradient norm at hhat (n,)."""
    n = z.shape[0]
    h = np.empty((n, 2, 1))
    mins = np.full((n, MAX_MINIMA, 2), np.nan)
    count = np.zeros(n, dtype=np.int64)
    prods = np.empty((3, n, 2))
    f = np.empty((n, 2))
    value = np.empty(n)
    grad = np.empty(n)
    inv_v = 1.0 / V_prox
    for i in numba.prange(n):
        xi1, xi2, eta1, eta2 = z[i, 0], z[i, 1], z[i, 2], z[i, 3]
        w1 = xi1 * sq + m1
        w2 = xi2 * sq + m2
        hs1 = a * xi1 + c * eta1
        hs2 = a * xi2 + c * eta2
        t1 = (1.0 - omega) * _expit(hs1 * (hs1 - hs2)) + omega * A11
        t2 = (1.0 - omega) * _expit(hs2 * (hs2 - hs1)) + omega * A22
        z1, z2 = _loss_zeros(t1, t2, w1, w2)
        h1, h2, v, g, k = best_of_starts(i, w1, w2, t1, t2, z1, z2, inv_v, sigma2, gtol, max_iter, given, gcount,
                                         mins)
        f1 = (h1 - w1) / V
        f2 = (h2 - w2) / V
        h[i, 0, 0] = h1
        h[i, 1, 0] = h2
        f[i, 0] = f1
        f[i, 1] = f2
        count[i] = k
        prods[FF, i, 0] = f1 * f1
        prods[FF, i, 1] = f2 * f2
        prods[FXI, i, 0] = f1 * xi1
        prods[FXI, i, 1] = f2 * xi2
        prods[FETA, i, 0] = f1 * eta1
        prods[FETA, i, 1] = f2 * eta2
        value[i] = v
        grad[i] = g
    f_sum = np.zeros(2)
    for i in range(n):  # (serial: not a parfor)
        f_sum[0] += f[i, 0]
        f_sum[1] += f[i, 1]
    return h, mins, count, prods, f_sum, value, grad
