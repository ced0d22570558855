"""Compiled (numba) kernels of the study's two-token case: the proximal solver, the same safeguarded
multi-start Newton as proximal._newton, one point at a time, so each point stops as soon as it converges and no
temporaries are allocated; and the channel integrand (channel_kernel: fields, targets, loss zeros, that prox and
f_l = (hhat_l - omega_l) / V per point in one parallel loop).

Held against the vectorised numpy implementation and a brute-force global search in the tests.  Both kernels
live in this one file because numba's on-disk cache is invalidated per file: a kernel that called jitted
functions imported from another file kept their old compiled code after an edit there.

The unfused channel path (channel.pointwise_f with the l2r1 prox) spends about as much CPU in numpy around the
Newton kernel as in it; channel_kernel does the same arithmetic in the same order of operations, so its results
equal that path's to round-off (bitwise where the libm calls agree; tests/test_channel_l2r1.py holds them
together).  It returns per-point terms only, laid out as the pointwise path's arrays: the sums over points are
left to numpy, the same reductions on the same numbers, so the hat overlaps equal that path's bitwise and do not
depend on the number of threads (a prange reduction would).

The Newton code is inlined (numba's inline="always") into best_of_starts: with the interleaved starts and the
square-root-free definiteness test it makes an evaluation about 40 % cheaper.  Called per point instead, the
arrays' reference counting and the lost interleaving cost 20-40 % of the runtime.  best_of_starts itself is
inlined by LLVM (forceinline) into the per-block functions the parallel loops call, so numba compiles it once for
both kernels and its parfor passes see a one-call loop body: inlined by numba into the parallel loops, as before,
the first compilation took 26 s (prox_kernel) and 32 s (channel_kernel) of CPU; now about 17 s and 3 s, with the
same numbers bitwise and the same speed (docs/numerics.md; cached afterwards).
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, inline="always", error_model="numpy")
def _expit(u):
    if u >= 0:
        return 1.0 / (1.0 + math.exp(-u))
    e = math.exp(u)
    return e / (1.0 + e)


@numba.njit(cache=True, error_model="numpy")
def _obj(h1, h2, w1, w2, t1, t2, inv_v, sigma2):
    s1 = _expit(h1 * (h1 - h2))
    s2 = _expit(h2 * (h2 - h1))
    return 0.5 * inv_v * ((h1 - w1) ** 2 + (h2 - w2) ** 2) + sigma2 * ((s1 - t1) ** 2 + (s2 - t2) ** 2)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _obj_s(h1, h2, w1, w2, t1, t2, inv_v, sigma2):
    """_obj and the attention weights it computed (reused by the next Newton step: the exponentials dominate)."""
    s1 = _expit(h1 * (h1 - h2))
    s2 = _expit(h2 * (h2 - h1))
    return 0.5 * inv_v * ((h1 - w1) ** 2 + (h2 - w2) ** 2) + sigma2 * ((s1 - t1) ** 2 + (s2 - t2) ** 2), s1, s2


@numba.njit(cache=True, inline="always", error_model="numpy")
def _newton_step(h1, h2, f0, s1, s2, w1, w2, t1, t2, inv_v, sigma2, gtol, floor):
    """One iteration of the safeguarded Newton method from (h1, h2) with objective f0 and attention weights s1, s2
    there: (h1, h2, f0, s1, s2) after it, the gradient norm at the point it started from, and whether that was
    below gtol (then nothing moved: the run is over)."""
    e1 = s1 - t1
    e2 = s2 - t2
    d1 = s1 * (1.0 - s1)
    d2 = s2 * (1.0 - s2)
    c1 = 2.0 * sigma2 * e1 * d1
    c2 = 2.0 * sigma2 * e2 * d2
    cc1 = 2.0 * sigma2 * (d1 * d1 + e1 * d1 * (1.0 - 2.0 * s1))
    cc2 = 2.0 * sigma2 * (d2 * d2 + e2 * d2 * (1.0 - 2.0 * s2))
    a1 = 2.0 * h1 - h2
    b1 = -h1
    a2 = -h2
    b2 = 2.0 * h2 - h1
    g1 = c1 * a1 + c2 * a2 + (h1 - w1) * inv_v
    g2 = c1 * b1 + c2 * b2 + (h2 - w2) * inv_v
    gn = max(abs(g1), abs(g2))
    if gn < gtol:
        return h1, h2, f0, s1, s2, gn, True
    H11 = cc1 * a1 * a1 + cc2 * a2 * a2 + 2.0 * c1 + inv_v
    H12 = cc1 * a1 * b1 + cc2 * a2 * b2 - c1 - c2
    H22 = cc1 * b1 * b1 + cc2 * b2 * b2 + 2.0 * c2 + inv_v
    # Positive definite beyond the floor (smallest eigenvalue > floor) by the 2 x 2 minors of H - floor I, which
    # needs no square root; the eigenvalue itself only where it is not.
    pd = H11 > floor and (H11 - floor) * (H22 - floor) > H12 * H12
    if not pd:
        lam_min = 0.5 * (H11 + H22) - math.sqrt(0.25 * (H11 - H22) ** 2 + H12 * H12)
        H11 += floor - lam_min
        H22 += floor - lam_min
    det = H11 * H22 - H12 * H12
    p1 = -(H22 * g1 - H12 * g2) / det
    p2 = -(H11 * g2 - H12 * g1) / det
    if pd and gn < 1e-7:
        # Round-off regime: the plain Newton step (an Armijo test could stall here).
        h1 += p1
        h2 += p2
        f0, s1, s2 = _obj_s(h1, h2, w1, w2, t1, t2, inv_v, sigma2)
        return h1, h2, f0, s1, s2, gn, False
    slope = g1 * p1 + g2 * p2
    t = 1.0
    fn = f0
    sn1 = sn2 = 0.0
    accepted = False
    for _ls in range(40):
        fn, sn1, sn2 = _obj_s(h1 + t * p1, h2 + t * p2, w1, w2, t1, t2, inv_v, sigma2)
        if fn <= f0 + 1e-4 * t * slope:
            accepted = True
            break
        t *= 0.5
    h1 = h1 + t * p1
    h2 = h2 + t * p2
    if accepted:
        s1, s2 = sn1, sn2
    else:
        s1 = _expit(h1 * (h1 - h2))
        s2 = _expit(h2 * (h2 - h1))
    return h1, h2, fn, s1, s2, gn, False


@numba.njit(cache=True, error_model="numpy")
def _newton_point(h1, h2, w1, w2, t1, t2, inv_v, sigma2, gtol, max_iter):
    """The safeguarded Newton method (analytic gradient and Hessian, a diagonal shift where the Hessian is not
    positive definite, Armijo backtracking, plain steps in the round-off regime) from (h1, h2): the end point,
    its objective and gradient norm."""
    floor = 1e-3 * inv_v
    gn = math.inf
    f0, s1, s2 = _obj_s(h1, h2, w1, w2, t1, t2, inv_v, sigma2)
    for _ in range(max_iter):
        h1, h2, f0, s1, s2, gn, done = _newton_step(h1, h2, f0, s1, s2, w1, w2, t1, t2, inv_v, sigma2, gtol, floor)
        if done:
            break
    return h1, h2, f0, gn


@numba.njit(cache=True, inline="always", error_model="numpy")
def _newton_three(a1, a2, b1, b2, c1, c2, w1, w2, t1, t2, inv_v, sigma2, gtol, max_iter):
    """_newton_point from three starts at once, one iteration of each per pass: the three runs are independent
    chains of dependent floating-point operations (divisions, exponentials), which the processor
    overlaps when they are interleaved.  Each run is _newton_point's arithmetic, step for step, so the end points
    are the same, bitwise."""
    floor = 1e-3 * inv_v
    fa, sa1, sa2 = _obj_s(a1, a2, w1, w2, t1, t2, inv_v, sigma2)
    fb, sb1, sb2 = _obj_s(b1, b2, w1, w2, t1, t2, inv_v, sigma2)
    fc, sc1, sc2 = _obj_s(c1, c2, w1, w2, t1, t2, inv_v, sigma2)
    ga = gb = gc = math.inf
    da = db = dc = False
    for _ in range(max_iter):
        if not da:
            a1, a2, fa, sa1, sa2, ga, da = _newton_step(a1, a2, fa, sa1, sa2, w1, w2, t1, t2, inv_v, sigma2, gtol,
                                                        floor)
        if not db:
            b1, b2, fb, sb1, sb2, gb, db = _newton_step(b1, b2, fb, sb1, sb2, w1, w2, t1, t2, inv_v, sigma2, gtol,
                                                        floor)
        if not dc:
            c1, c2, fc, sc1, sc2, gc, dc = _newton_step(c1, c2, fc, sc1, sc2, w1, w2, t1, t2, inv_v, sigma2, gtol,
                                                        floor)
        if da and db and dc:
            break
    return a1, a2, fa, ga, b1, b2, fb, gb, c1, c2, fc, gc


BIG_TOKEN = 1.0  # |w_l| from which token l gets a start of its own (as in prox/_general_starts.py)
MAX_MINIMA = 6  # distinct local minimisers recorded per point: at most one per own start
_SAME = 1e-6  # two Newton end points closer than this (max norm, relative to 1 + |h|) are one minimiser


@numba.njit(cache=True, inline="always", error_model="numpy")
def _keep(i, h1, h2, v, g, best_v, bh1, bh2, bg, count, mins):
    """A Newton end point: the best so far if lower, and recorded in mins[i] unless it is one already there."""
    if v < best_v:
        best_v, bh1, bh2, bg = v, h1, h2, g
    for j in range(count):
        if max(abs(mins[i, j, 0] - h1), abs(mins[i, j, 1] - h2)) <= _SAME * (1.0 + abs(h1) + abs(h2)):
            return best_v, bh1, bh2, bg, count
    mins[i, count, 0] = h1
    mins[i, count, 1] = h2
    return best_v, bh1, bh2, bg, count + 1


@numba.njit(cache=True, forceinline=True, error_model="numpy")
def best_of_starts(i, w1, w2, t1, t2, z1, z2, inv_v, sigma2, gtol, max_iter, given, gcount, mins):
    """Point i's global minimiser (prox_kernel's starts; w1 ... z2 are point i's values), its distinct Newton end
    points written into mins[i] (row of shape (MAX_MINIMA, 2), NaN beforehand): (h1, h2, value, grad_norm, count).
    The per-point body of prox_kernel and of channel_kernel: one implementation of the starts, the Newton runs and
    the bookkeeping of the minima."""
    own = gcount.shape[0] == 0
    best_v = math.inf
    bh1 = bh2 = bg = 0.0
    count = 0
    sg = 1.0 if z1 * w1 + z2 * w2 >= 0.0 else -1.0
    m1 = 0.5 * (w1 + sg * z1)
    m2 = 0.5 * (w2 + sg * z2)
    if own:
        # The three starts every point has (the loss zeros +-z and w), interleaved (_newton_three), kept in the
        # order k = 0, 1, 2 of the loop below.
        ra1, ra2, fa, ga, rb1, rb2, fb, gb, rc1, rc2, fc, gc = _newton_three(
            z1, z2, -z1, -z2, w1, w2, w1, w2, t1, t2, inv_v, sigma2, gtol, max_iter)
        best_v, bh1, bh2, bg, count = _keep(i, ra1, ra2, fa, ga, best_v, bh1, bh2, bg, count, mins)
        best_v, bh1, bh2, bg, count = _keep(i, rb1, rb2, fb, gb, best_v, bh1, bh2, bg, count, mins)
        best_v, bh1, bh2, bg, count = _keep(i, rc1, rc2, fc, gc, best_v, bh1, bh2, bg, count, mins)
    n_starts = 6 if own else min(gcount[i], given.shape[1])
    for k in range(3 if own else 0, n_starts):
        if not own:
            s1, s2 = given[i, k, 0], given[i, k, 1]
        elif k == 3:
            # The midpoint of w and the zero on w's side: at large |w| the minimiser can sit in a basin
            # between them that no other start reaches (the general kernel's starts, prox/general.py).  Only
            # where a token is large: all such points measured had |w_l| > 1.5, and elsewhere it would cost
            # a third more time.
            if max(abs(w1), abs(w2)) < BIG_TOKEN:
                continue
            s1, s2 = m1, m2
        elif k == 4:
            # Mixed basins at large |w|: one token stays near its w_l while the other shrinks.
            if abs(w1) < BIG_TOKEN:
                continue
            s1, s2 = w1, m2
        else:
            if abs(w2) < BIG_TOKEN:
                continue
            s1, s2 = m1, w2
        h1, h2, v, g = _newton_point(s1, s2, w1, w2, t1, t2, inv_v, sigma2, gtol, max_iter)
        best_v, bh1, bh2, bg, count = _keep(i, h1, h2, v, g, best_v, bh1, bh2, bg, count, mins)
    return bh1, bh2, best_v, bg, count


@numba.njit(cache=True, error_model="numpy")
def _prox_block(lo, hi, w1, w2, t1, t2, z1, z2, inv_v, sigma2, gtol, max_iter, given, gcount, out_h1, out_h2, out_val,
                out_gn, mins, count):
    """prox_kernel's points lo..hi-1 (serial).  The parallel loop only calls this: numba's parfor passes then see
    a one-call body, not the inlined Newton code (their cost grows steeply with the body's size)."""
    for i in range(lo, hi):
        h1, h2, v, g, c = best_of_starts(i, w1[i], w2[i], t1[i], t2[i], z1[i], z2[i], inv_v, sigma2, gtol, max_iter,
                                         given, gcount, mins)
        out_h1[i] = h1
        out_h2[i] = h2
        out_val[i] = v
        out_gn[i] = g
        count[i] = c


_BLOCK = 64  # points per task of the parallel loops


@numba.njit(cache=True, parallel=True, error_model="numpy")
def prox_kernel(w1, w2, t1, t2, z1, z2, V, sigma2, gtol, max_iter, given, gcount):
    """Global minimiser from the own starts (the loss zeros +-z, w, and at large |w| the midpoint / per-token
    ones), or, where gcount is non-empty, from the given starts given[i, :gcount[i]] (shape (n, K, 2)) only (the
    local minimisers of an evaluation at nearby parameters: Newton continues each of them).

    Returns the best point's (h1, h2, value, grad_norm) and the distinct Newton end points (n, MAX_MINIMA, 2)
    with their number per point (NaN beyond it), which a nearby evaluation can continue."""
    n = w1.shape[0]
    out_h1 = np.empty(n)
    out_h2 = np.empty(n)
    out_val = np.empty(n)
    out_gn = np.empty(n)
    mins = np.full((n, MAX_MINIMA, 2), np.nan)
    count = np.zeros(n, dtype=np.int64)
    inv_v = 1.0 / V
    n_blocks = (n + _BLOCK - 1) // _BLOCK
    for b in numba.prange(n_blocks):
        _prox_block(b * _BLOCK, min(n, (b + 1) * _BLOCK), w1, w2, t1, t2, z1, z2, inv_v, sigma2, gtol, max_iter,
                    given, gcount, out_h1, out_h2, out_val, out_gn, mins, count)
    return out_h1, out_h2, out_val, out_gn, mins, count


# Rows of channel_kernel's per-point products (n, L) (summed by the caller).
FF, FXI, FETA = range(3)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _expit_scipy(u):
    # scipy.special.expit's formula (1 / (1 + exp(-u))), so the targets equal problem.teacher_attention's.
    return 1.0 / (1.0 + math.exp(-u))


@numba.njit(cache=True, inline="always", error_model="numpy")
def _targets(hs1, hs2, omega, A11, A22):
    """The teacher's (T_11, T_22) at fields (h*_1, h*_2): problem.teacher_attention's arithmetic, in its order."""
    return ((1.0 - omega) * _expit_scipy(hs1 * (hs1 - hs2)) + omega * A11,
            (1.0 - omega) * _expit_scipy(hs2 * (hs2 - hs1)) + omega * A22)


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


@numba.njit(cache=True, error_model="numpy")
def _channel_block(lo, hi, z, sq, m1, m2, a, c, omega, A11, A22, V, inv_v, sigma2, gtol, max_iter, given, gcount, h,
                   mins, count, prods, f, value, grad):
    """channel_kernel's points lo..hi-1 (serial; see _prox_block)."""
    for i in range(lo, hi):
        xi1, xi2, eta1, eta2 = z[i, 0], z[i, 1], z[i, 2], z[i, 3]
        w1 = xi1 * sq + m1
        w2 = xi2 * sq + m2
        t1, t2 = _targets(a * xi1 + c * eta1, a * xi2 + c * eta2, omega, A11, A22)
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
    n_blocks = (n + _BLOCK - 1) // _BLOCK
    for b in numba.prange(n_blocks):
        _channel_block(b * _BLOCK, min(n, (b + 1) * _BLOCK), z, sq, m1, m2, a, c, omega, A11, A22, V, inv_v, sigma2,
                       gtol, max_iter, given, gcount, h, mins, count, prods, f, value, grad)
    f_sum = np.zeros(2)
    for i in range(n):  # (serial: not a parfor)
        f_sum[0] += f[i, 0]
        f_sum[1] += f[i, 1]
    return h, mins, count, prods, f_sum, value, grad


@numba.njit(cache=True, parallel=True, error_model="numpy")
def loss_at_nodes_kernel(z, sq, m1, m2, a, c, omega, A11, A22, sigma2):
    """The per-sample loss l(h, h*) at points z (4, n) (rows xi_1, xi_2, eta_1, eta_2): fields h_l = sq xi_l + m_l,
    h*_l = a xi_l + c eta_l, in observables' arithmetic and order (loss.attention_loss at target_diagonal's
    targets), one loop without temporaries.  Per-point values only: the caller's weighted sum is numpy's, so the test
    error equals the numpy path's where the libm calls agree, whatever the thread count."""
    n = z.shape[1]
    out = np.empty(n)
    for i in numba.prange(n):
        h1 = sq * z[0, i] + m1
        h2 = sq * z[1, i] + m2
        t1, t2 = _targets(a * z[0, i] + c * z[2, i], a * z[1, i] + c * z[3, i], omega, A11, A22)
        s1 = _expit_scipy(h1 * (h1 - h2))
        s2 = _expit_scipy(h2 * (h2 - h1))
        out[i] = sigma2 * ((s1 - t1) ** 2 + (s2 - t2) ** 2)
    return out
