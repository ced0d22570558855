"""Starting points for the general proximal problem (compiled, one point at a time).

The loss depends on h only through the scores h_l . h_k, and the quadratic term is weak (V ~ 10-30), so the
global minimiser sits near a zero (or near-zero) of the loss, in the orientation that best matches w, unless w is
large enough for the quadratic to pull it into another attention pattern.  A zero of the loss needs
    h_l . (h_k - h_l) = D_lk := log T_lk - log T_ll   for all l, k,
which fixes the pairwise squared distances |h_l - h_k|^2 = -(D_lk + D_kl) =: Delta_lk.  Classical
multidimensional scaling of Delta gives the configuration up to translation and rotation; the translation x0
then enters the equations linearly (least squares).  For L = 2, r = 1 this is exactly the closed-form zero
(h_1, h_2) = (u_1, -u_2) / sqrt(u_1 + u_2), u_l = logit T_ll; when T = softmax(h h^T) exactly, it returns h up
to rotation.  The rotation (h -> h R, R orthogonal, an exact symmetry of the loss) is chosen by orthogonal
Procrustes to w, the one the quadratic term prefers; the mirror start uses the best rotation of the other
determinant (for r = 1: minus the aligned zero).
"""

from __future__ import annotations

import math

import numba
import numpy as np

_TINY = 1e-300


@numba.njit(cache=True)
def sym_eig(A, n, lam, U):
    """Eigen-decomposition of the symmetric n x n matrix A (destroyed) by cyclic Jacobi: A = U diag(lam) U^T,
    lam in descending order."""
    for i in range(n):
        for j in range(n):
            U[i, j] = 1.0 if i == j else 0.0
    for _sweep in range(60):
        off = 0.0
        scale = 0.0
        for i in range(n):
            scale += A[i, i] * A[i, i]
            for j in range(i + 1, n):
                off += A[i, j] * A[i, j]
        if off <= 1e-32 * scale or off < 1e-300:
            break
        for p in range(n - 1):
            for q in range(p + 1, n):
                apq = A[p, q]
                if apq == 0.0:
                    continue
                theta = 0.5 * (A[q, q] - A[p, p]) / apq
                t = (1.0 if theta >= 0 else -1.0) / (abs(theta) + math.sqrt(theta * theta + 1.0))
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                for k in range(n):
                    akp = A[k, p]
                    akq = A[k, q]
                    A[k, p] = c * akp - s * akq
                    A[k, q] = s * akp + c * akq
                for k in range(n):
                    apk = A[p, k]
                    aqk = A[q, k]
                    A[p, k] = c * apk - s * aqk
                    A[q, k] = s * apk + c * aqk
                for k in range(n):
                    ukp = U[k, p]
                    ukq = U[k, q]
                    U[k, p] = c * ukp - s * ukq
                    U[k, q] = s * ukp + c * ukq
    for i in range(n):
        lam[i] = A[i, i]
    # selection sort, descending, columns of U along
    for i in range(n):
        best = i
        for j in range(i + 1, n):
            if lam[j] > lam[best]:
                best = j
        if best != i:
            tmp = lam[i]
            lam[i] = lam[best]
            lam[best] = tmp
            for k in range(n):
                tmp = U[k, i]
                U[k, i] = U[k, best]
                U[k, best] = tmp


@numba.njit(cache=True)
def loss_zero_point(T, L, r, z, D, B, lam, U, y, M, UM, lamM, vr):
    """Least-squares zero of the loss in canonical orientation into z (flat L * r); the rest is workspace:
    D, B, U (L, L); lam (L,); y (L, r); M, UM (r, r); lamM, vr (r,)."""
    for l in range(L):
        yll = math.log(max(T[l, l], _TINY))
        for k in range(L):
            D[l, k] = math.log(max(T[l, k], _TINY)) - yll
    # B = -1/2 J Delta J (double centring), Delta_lk = max(-(D_lk + D_kl), 0)
    tot = 0.0
    for l in range(L):
        lam[l] = 0.0  # row means of Delta
        for k in range(L):
            d = max(-(D[l, k] + D[k, l]), 0.0)
            B[l, k] = d
            lam[l] += d / L
            tot += d / (L * L)
    for l in range(L):
        for k in range(L):
            B[l, k] = -0.5 * (B[l, k] - lam[l] - lam[k] + tot)
    sym_eig(B, L, lam, U)
    for a in range(L):
        for al in range(r):
            y[a, al] = U[a, al] * math.sqrt(max(lam[al], 0.0)) if al < L else 0.0
    # Translation x0: sum_{l,k} [(y_k - y_l) . x0 - (D_lk - y_l . (y_k - y_l))]^2 -> min.
    for al in range(r):
        vr[al] = 0.0
        for be in range(r):
            M[al, be] = 0.0
    for l in range(L):
        for k in range(L):
            if k == l:
                continue
            c = D[l, k]
            for al in range(r):
                c -= y[l, al] * (y[k, al] - y[l, al])
            for al in range(r):
                dal = y[k, al] - y[l, al]
                vr[al] += dal * c
                for be in range(r):
                    M[al, be] += dal * (y[k, be] - y[l, be])
    # M is positive semidefinite; solve through its eigenbasis, dropping null directions (translation along
    # them does not change the scores' row differences).
    sym_eig(M, r, lamM, UM)
    for a in range(L):
        for al in range(r):
            z[a * r + al] = y[a, al]
    cut = 1e-12 * max(lamM[0], 0.0)
    for j in range(r):
        if lamM[j] > cut and lamM[j] > 0.0:
            c = 0.0
            for al in range(r):
                c += UM[al, j] * vr[al]
            c /= lamM[j]
            for a in range(L):
                for al in range(r):
                    z[a * r + al] += c * UM[al, j]


@numba.njit(cache=True)
def procrustes_point(z, w, Vinv, L, r, za, zb, Mp, MtM, W, R, R2, s2):
    """za = z R with R orthogonal maximising tr(R^T z^T w Vinv); zb = z R2, R2 the best with the other
    determinant (r = 1: the mirror -za).  Mp, MtM, W, R, R2 (r, r) and s2 (r,) are workspace."""
    # Mp = z^T (w Vinv), r x r
    for al in range(r):
        for be in range(r):
            Mp[al, be] = 0.0
            R[al, be] = 0.0
            R2[al, be] = 0.0
    for a in range(L):
        for al in range(r):
            for be in range(r):
                wv = 0.0
                for ga in range(r):
                    wv += w[a * r + ga] * Vinv[ga, be]
                Mp[al, be] += z[a * r + al] * wv
    # R = Mp (Mp^T Mp)^{-1/2} = Mp W diag(1/s) W^T, the orthogonal polar factor.
    for al in range(r):
        for be in range(r):
            acc = 0.0
            for ga in range(r):
                acc += Mp[ga, al] * Mp[ga, be]
            MtM[al, be] = acc
    sym_eig(MtM, r, s2, W)
    if s2[r - 1] > 1e-24 * max(s2[0], _TINY) and s2[r - 1] > 0.0:
        for al in range(r):
            for be in range(r):
                acc = 0.0
                acc2 = 0.0
                for j in range(r):
                    mw = 0.0
                    for ga in range(r):
                        mw += Mp[al, ga] * W[ga, j]
                    term = mw / math.sqrt(s2[j]) * W[be, j]
                    acc += term
                    acc2 += -term if j == r - 1 else term
                R[al, be] = acc
                R2[al, be] = acc2
    else:
        # w carries no orientation information (e.g. w = 0): identity and a reflection.
        for al in range(r):
            R[al, al] = 1.0
            R2[al, al] = 1.0
        R2[r - 1, r - 1] = -1.0
    for a in range(L):
        for be in range(r):
            acc = 0.0
            acc2 = 0.0
            for al in range(r):
                acc += z[a * r + al] * R[al, be]
                acc2 += z[a * r + al] * R2[al, be]
            za[a * r + be] = acc
            zb[a * r + be] = acc2


# Tokens whose mean field is at least this long get a start of their own (see own_starts).
BIG_TOKEN = 1.0


def n_own_starts(L: int, r: int) -> int:
    return (4 if r == 1 else 5) + L


@numba.njit(cache=True, parallel=True)
def own_starts(w, T, Vinv, block=64):
    """The solver's own starts, (n, S, N) flat: w, the loss zero aligned with w, its mirror, the midpoint
    m = (w + zero) / 2, for r >= 2 twice the zero, and then, per token l, m with token l put back at w_l.

    The per-token starts cover mixed basins at large |w| (one token stays near its large w_l while the others
    shrink towards the zero); they are only needed, and only filled (NaN otherwise: skipped), where |w_l| >=
    BIG_TOKEN."""
    n, N = w.shape
    L = T.shape[1]
    r = N // L
    n_base = 4 if r == 1 else 5
    out = np.empty((n, n_base + L, N))
    n_blocks = (n + block - 1) // block
    for bl in numba.prange(n_blocks):
        z = np.empty(N)
        D = np.empty((L, L))
        B = np.empty((L, L))
        U = np.empty((L, L))
        lam = np.empty(L)
        y = np.empty((L, r))
        M = np.empty((r, r))
        UM = np.empty((r, r))
        Mp = np.empty((r, r))
        R = np.empty((r, r))
        R2 = np.empty((r, r))
        lamM = np.empty(r)
        vr = np.empty(r)
        for i in range(bl * block, min(n, (bl + 1) * block)):
            loss_zero_point(T[i], L, r, z, D, B, lam, U, y, M, UM, lamM, vr)
            procrustes_point(z, w[i], Vinv, L, r, out[i, 1], out[i, 2], Mp, M, UM, R, R2, lamM)
            for j in range(N):
                out[i, 0, j] = w[i, j]
                out[i, 3, j] = 0.5 * (w[i, j] + out[i, 1, j])
                if n_base == 5:
                    out[i, 4, j] = 2.0 * out[i, 1, j]
            for l in range(L):
                norm2 = 0.0
                for al in range(r):
                    norm2 += w[i, l * r + al] ** 2
                k = n_base + l
                if norm2 >= BIG_TOKEN**2:
                    for j in range(N):
                        out[i, k, j] = out[i, 3, j]
                    for al in range(r):
                        out[i, k, l * r + al] = w[i, l * r + al]
                else:
                    for j in range(N):
                        out[i, k, j] = np.nan
    return out


# -- The untied student: fields H_l = (query field, key field) in R^{2r}, scores H_l^T B H_k, B = [[0, I], [0, 0]].

def score_form(r: int) -> np.ndarray:
    """B = [[0, I_r], [0, 0]] (2r x 2r): the untied student's scores s_lk = h^Q_l . h^K_k = H_l^T B H_k."""
    B = np.zeros((2 * r, 2 * r))
    B[:r, r:] = np.eye(r)
    return B


def _block_procrustes(zq: np.ndarray, zk: np.ndarray, wq: np.ndarray, wk: np.ndarray) -> tuple[np.ndarray, ...]:
    """The rotation (Q, K) -> (Q R, K R) (the untied loss's exact symmetry) that best aligns (zq, zk) with (wq, wk)
    and the best one of the other determinant; all (n, L, r).  Returns (zq R, zk R, zq R2, zk R2)."""
    C = np.einsum("nla,nlb->nab", zq, wq) + np.einsum("nla,nlb->nab", zk, wk)
    U, _, Vt = np.linalg.svd(C)
    R = U @ Vt
    U2 = U.copy()
    U2[:, :, -1] *= -1.0
    R2 = U2 @ Vt
    return zq @ R, zk @ R, zq @ R2, zk @ R2


def own_starts_untied(w: np.ndarray, T: np.ndarray, Vinv: np.ndarray) -> np.ndarray:
    """Starts for the untied loss, (n, 7, L, 2r) from w (n, L, 2r), T (n, L, L), Vinv (2r, 2r):

    A zero of the untied loss is any factorisation h^Q h^K^T = log T + c 1^T (row constants c free: the softmax
    ignores them).  Two families: (a) the tied zero z (softmax(z z^T) = T) lifted to (z, z), aligned with the
    mean of the two halves of w; (b) the truncated SVD of the row-centred log T (exact for L = 2, r = 1: the
    centred rows (a_l, -a_l) are rank one), singular values split evenly between the factors, rotated by the
    symmetry (Q, K) -> (Q R, K R) onto w.  Starts: w, (a), its mirror, (b), its mirror, the midpoint of w and (b),
    the midpoint of w and (a)."""
    n, L, r2 = w.shape
    r = r2 // 2
    wq, wk = w[:, :, :r], w[:, :, r:]
    # (a) the tied kernel's zero and mirror for the mean field, lifted.
    wbar = np.ascontiguousarray(0.5 * (wq + wk)).reshape(n, L * r)
    tied = own_starts(wbar, T, np.ascontiguousarray(Vinv[:r, :r])).reshape(n, -1, L, r)
    za, zam = tied[:, 1], tied[:, 2]
    # (b) truncated SVD of the row-centred log T.
    logT = np.log(np.maximum(T, _TINY))
    M = logT - logT.mean(axis=2, keepdims=True)
    U, s, Vt = np.linalg.svd(M)
    k = min(r, L)
    zq = np.zeros((n, L, r))
    zk = np.zeros((n, L, r))
    sq = np.sqrt(s[:, :k])
    zq[:, :, :k] = U[:, :, :k] * sq[:, None, :]
    zk[:, :, :k] = np.transpose(Vt[:, :k, :], (0, 2, 1)) * sq[:, None, :]
    bq, bk, bq2, bk2 = _block_procrustes(zq, zk, wq, wk)
    out = np.empty((n, 7, L, r2))
    out[:, 0] = w
    out[:, 1] = np.concatenate([za, za], axis=2)
    out[:, 2] = np.concatenate([zam, zam], axis=2)
    out[:, 3] = np.concatenate([bq, bk], axis=2)
    out[:, 4] = np.concatenate([bq2, bk2], axis=2)
    out[:, 5] = 0.5 * (w + out[:, 3])
    out[:, 6] = 0.5 * (w + out[:, 1])
    return out
