"""Compiled (numba) proximal solver: the same safeguarded multi-start Newton as proximal._newton, one
point at a time, so each point stops as soon as it converges and no temporaries are allocated.

Held against the vectorised numpy implementation and a brute-force global search in the tests.
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


@numba.njit(cache=True, error_model="numpy")
def _newton_point(h1, h2, w1, w2, t1, t2, inv_v, sigma2, gtol, max_iter):
    floor = 1e-3 * inv_v
    gn = math.inf
    f0, s1, s2 = _obj_s(h1, h2, w1, w2, t1, t2, inv_v, sigma2)
    for _ in range(max_iter):
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
            break
        H11 = cc1 * a1 * a1 + cc2 * a2 * a2 + 2.0 * c1 + inv_v
        H12 = cc1 * a1 * b1 + cc2 * a2 * b2 - c1 - c2
        H22 = cc1 * b1 * b1 + cc2 * b2 * b2 + 2.0 * c2 + inv_v
        half_tr = 0.5 * (H11 + H22)
        disc = math.sqrt(0.25 * (H11 - H22) ** 2 + H12 * H12)
        lam_min = half_tr - disc
        pd = lam_min > floor
        if not pd:
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
            continue
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
        f0 = fn
        if accepted:
            s1, s2 = sn1, sn2
        else:
            s1 = _expit(h1 * (h1 - h2))
            s2 = _expit(h2 * (h2 - h1))
    return h1, h2, f0, gn


BIG_TOKEN = 1.0  # |w_l| from which token l gets a start of its own (as in prox/_general_starts.py)
MAX_MINIMA = 6  # distinct local minimisers recorded per point: at most one per own start
_SAME = 1e-6  # two Newton end points closer than this (max norm, relative to 1 + |h|) are one minimiser


@numba.njit(cache=True, inline="always", error_model="numpy")
def best_of_starts(i, w1, w2, t1, t2, z1, z2, inv_v, sigma2, gtol, max_iter, given, gcount, mins):
    """Point i's global minimiser (prox_kernel's starts; w1 ... z2 are point i's values), its distinct Newton end
    points written into mins[i] (row of shape (MAX_MINIMA, 2), NaN beforehand): (h1, h2, value, grad_norm, count).
    The per-point body of prox_kernel and of the fused channel kernel (theory/_channel_l2r1.py): one
    implementation of the starts, the Newton runs and the bookkeeping of the minima.  (numba's cache of that
    module does not see edits here: see its docstring.)"""
    own = gcount.shape[0] == 0
    best_v = math.inf
    bh1 = bh2 = bg = 0.0
    count = 0
    sg = 1.0 if z1 * w1 + z2 * w2 >= 0.0 else -1.0
    m1 = 0.5 * (w1 + sg * z1)
    m2 = 0.5 * (w2 + sg * z2)
    n_starts = 6 if own else min(gcount[i], given.shape[1])
    for k in range(n_starts):
        if not own:
            s1, s2 = given[i, k, 0], given[i, k, 1]
        elif k == 0:
            s1, s2 = z1, z2
        elif k == 1:
            s1, s2 = -z1, -z2
        elif k == 2:
            s1, s2 = w1, w2
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
        if v < best_v:
            best_v, bh1, bh2, bg = v, h1, h2, g
        seen = False
        for j in range(count):
            if max(abs(mins[i, j, 0] - h1), abs(mins[i, j, 1] - h2)) <= _SAME * (1.0 + abs(h1) + abs(h2)):
                seen = True
                break
        if not seen:
            mins[i, count, 0] = h1
            mins[i, count, 1] = h2
            count += 1
    return bh1, bh2, best_v, bg, count


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
    for i in numba.prange(n):
        h1, h2, v, g, c = best_of_starts(i, w1[i], w2[i], t1[i], t2[i], z1[i], z2[i], inv_v, sigma2, gtol, max_iter,
                                         given, gcount, mins)
        out_h1[i] = h1
        out_h2[i] = h2
        out_val[i] = v
        out_gn[i] = g
        count[i] = c
    return out_h1, out_h2, out_val, out_gn, mins, count
