"""Compiled (numba) core of the general proximal solver: value, gradient and Hessian of

    F(h) = sum_l (1/2)(h_l - w_l)^T Vinv (h_l - w_l) + (sigma2/2) sum_{l,k} (S_lk(h) - T_lk)^2,
    S = row-wise softmax of the scores Z = h h^T,

and a safeguarded Newton method run from every start of every point, keeping the lowest objective.

h (L x r) is stored flat, index a * r + alpha.  Derivatives, one softmax row s (with e = s - t,
ebar = sum_j e_j s_j) at a time:
    dl/dZ_lk       G_lk = sigma2 s_k (e_k - ebar)
    d2l/dZ_lk dZ_lm P_km = sigma2 [delta_km s_k v_k - s_k s_m (v_k + v_m - |s|^2)],  v = s + e - ebar
(P = sigma2 (J J + sum_j e_j Hess s_j) with J = diag(s) - s s^T).  The chain rule through Z_lk = h_l . h_k gives
    grad_a = sum_k (G_ak + G_ka) h_k,
    Hess   = (G + G^T) (x) I_r + sum_l D_l^T P^l D_l,  (D_l)_{k,(a,alpha)} = delta_la h_k,alpha + delta_ka h_l,alpha.
value_b / derivs_b / hess_b do the same for scores Z = h Bm h^T with any score form Bm (the untied student:
Bm = [[0, I], [0, 0]]), with X_k = Bm h_k and Y_l = Bm^T h_l in place of h in the chain rule; newton and
multistart take form = 0 (tied, the functions above, unchanged) or 1 (score form Bm).
"""

from __future__ import annotations

import math

import numba
import numpy as np

# Scores beyond this are clamped: exp(z - max) is then exactly 0 or 1 (a saturated row), never inf - inf = NaN.
_ZMAX = 1e300
# Inlining: forceinline (LLVM's alwaysinline), not numba's inline="always".  Inlined at numba's IR level into
# multistart's parallel loop, the Newton code made numba's parfor passes take minutes on first use (about 100 s
# of CPU on 2 cores, 5 minutes on a loaded machine); inlined by LLVM it compiles in about 25 s and gives the same
# numbers bitwise.  No fastmath: the functions' fastmath flags never applied (numba's IR inlining compiles the
# inlined code with the caller's flags, and multistart has none), and with LLVM's inlining they would change the
# rounding.  Measured in docs/numerics.md.


@numba.njit(cache=True, forceinline=True)
def _quadratic(h, w, Vinv, L, r):
    """sum_l (1/2)(h_l - w_l)^T Vinv (h_l - w_l)."""
    f = 0.0
    for a in range(L):
        for al in range(r):
            acc = 0.0
            for be in range(r):
                acc += Vinv[al, be] * (h[a * r + be] - w[a * r + be])
            f += 0.5 * (h[a * r + al] - w[a * r + al]) * acc
    return f


@numba.njit(cache=True, forceinline=True)
def _quadratic_grad(h, w, Vinv, L, r, g):
    """g = Vinv (h_l - w_l) per token (the gradient of the quadratic term)."""
    for a in range(L):
        for al in range(r):
            acc = 0.0
            for be in range(r):
                acc += Vinv[al, be] * (h[a * r + be] - w[a * r + be])
            g[a * r + al] = acc


@numba.njit(cache=True, forceinline=True)
def _softmax_loss(S, T, L):
    """Scores in S -> row-wise softmax in place (scores clamped); returns sum_lk (S_lk - T_lk)^2."""
    loss = 0.0
    for l in range(L):
        mx = -math.inf
        for k in range(L):
            z = min(max(S[l, k], -_ZMAX), _ZMAX)
            S[l, k] = z
            if z > mx:
                mx = z
        tot = 0.0
        for k in range(L):
            e = math.exp(S[l, k] - mx)
            S[l, k] = e
            tot += e
        for k in range(L):
            S[l, k] /= tot
            d = S[l, k] - T[l, k]
            loss += d * d
    return loss


@numba.njit(cache=True, forceinline=True)
def _loss_dZ(S, T, sigma2, L, G):
    """G = dl/dZ for the softmax S: sigma2 s_k (e_k - ebar) per row, e = s - t, ebar = sum_j e_j s_j."""
    for l in range(L):
        ebar = 0.0
        for k in range(L):
            ebar += (S[l, k] - T[l, k]) * S[l, k]
        for k in range(L):
            G[l, k] = sigma2 * S[l, k] * ((S[l, k] - T[l, k]) - ebar)


@numba.njit(cache=True, forceinline=True)
def value(h, w, T, Vinv, sigma2, L, r, S):
    """F at h; leaves the softmax S(h) in S for derivs."""
    f = _quadratic(h, w, Vinv, L, r)
    for l in range(L):
        for k in range(L):
            z = 0.0
            for al in range(r):
                z += h[l * r + al] * h[k * r + al]
            S[l, k] = z
    return f + 0.5 * sigma2 * _softmax_loss(S, T, L)


@numba.njit(cache=True, forceinline=True)
def derivs(h, w, T, Vinv, sigma2, L, r, order, S, G, P, u, g, H):
    """Gradient of F into g and, with order 2, the Hessian into H; S must hold the softmax at h (from value)."""
    _quadratic_grad(h, w, Vinv, L, r, g)
    _loss_dZ(S, T, sigma2, L, G)
    for a in range(L):
        for k in range(L):
            c = G[a, k] + G[k, a]
            for al in range(r):
                g[a * r + al] += c * h[k * r + al]
    if order == 2:
        hess(h, Vinv, sigma2, L, r, S, T, G, P, u, H)


@numba.njit(cache=True, forceinline=True)
def _quadratic_hess(Vinv, L, r, H):
    """H = the quadratic term's Hessian: Vinv in every token's diagonal block, zero elsewhere."""
    N = L * r
    for i in range(N):
        for j in range(N):
            H[i, j] = 0.0
    for a in range(L):
        for al in range(r):
            for be in range(r):
                H[a * r + al, a * r + be] += Vinv[al, be]


@numba.njit(cache=True, forceinline=True)
def _softmax_curvature(X, Y, S, T, sigma2, L, r, Pf, PX, H):
    """Add sum_l D_l^T P^l D_l to H: the softmax loss's curvature through the scores, with
    (D_l)_{k,(a,al)} = delta_la X_k,al + delta_ka Y_l,al (tied scores h h^T: X = Y = h as L x r; score form Bm:
    X_k = Bm h_k, Y_l = Bm^T h_l) and P^l applied without forming it.  Pf (row 0) and PX (L x r) are workspaces."""
    for l in range(L):
        ebar = 0.0
        ss = 0.0
        for k in range(L):
            ebar += (S[l, k] - T[l, k]) * S[l, k]
            ss += S[l, k] * S[l, k]
        # P^l = sigma2 [diag(c) - c s^T - s c^T + |s|^2 s s^T], c_k = s_k (2 s_k - t_k - ebar)
        for k in range(L):
            Pf[0, k] = S[l, k] * (2.0 * S[l, k] - T[l, k] - ebar)
        for al in range(r):
            sx = 0.0
            cx = 0.0
            for k in range(L):
                sx += S[l, k] * X[k, al]
                cx += Pf[0, k] * X[k, al]
            for b in range(L):
                PX[b, al] = sigma2 * (Pf[0, b] * (X[b, al] - sx) - S[l, b] * (cx - ss * sx))
        for al in range(r):
            for be in range(r):
                acc = 0.0
                for k in range(L):
                    acc += X[k, al] * PX[k, be]
                H[l * r + al, l * r + be] += acc
                ylb = Y[l, be]
                for b in range(L):
                    c = PX[b, al] * ylb
                    H[l * r + al, b * r + be] += c
                    H[b * r + be, l * r + al] += c
        for a in range(L):
            sa = S[l, a]
            ca = Pf[0, a]
            for b in range(L):
                pab = sigma2 * (ss * sa * S[l, b] - ca * S[l, b] - sa * Pf[0, b])
                if a == b:
                    pab += sigma2 * ca
                for al in range(r):
                    c = pab * Y[l, al]
                    for be in range(r):
                        H[a * r + al, b * r + be] += c * Y[l, be]


@numba.njit(cache=True, forceinline=True)
def hess(h, Vinv, sigma2, L, r, S, T, G, P, u, H):
    """Hessian of F into H; S and G must hold the softmax and dl/dZ at h (from value and derivs)."""
    _quadratic_hess(Vinv, L, r, H)
    for a in range(L):
        for b in range(L):
            c = G[a, b] + G[b, a]
            for al in range(r):
                H[a * r + al, b * r + al] += c
    hv = h.reshape((L, r))
    _softmax_curvature(hv, hv, S, T, sigma2, L, r, P, u, H)


@numba.njit(cache=True, forceinline=True)
def value_b(h, w, T, Vinv, sigma2, L, r, Bm, S):
    """F at h with the scores Z = h Bm h^T (any r x r score form Bm); leaves the softmax in S."""
    f = _quadratic(h, w, Vinv, L, r)
    for l in range(L):
        for k in range(L):
            z = 0.0
            for al in range(r):
                hl = h[l * r + al]
                if hl != 0.0:
                    for be in range(r):
                        z += hl * Bm[al, be] * h[k * r + be]
            S[l, k] = z
    return f + 0.5 * sigma2 * _softmax_loss(S, T, L)


@numba.njit(cache=True, forceinline=True)
def derivs_b(h, w, T, Vinv, sigma2, L, r, Bm, S, G, X, Y, g):
    """Gradient of F with the score form Bm into g; leaves X_k = Bm h_k, Y_l = Bm^T h_l (rows of X, Y) and
    dl/dZ in G for hess_b.  dZ_lk/dh_a = delta_la X_k + delta_ka Y_l, so grad_a = sum_k G_ak X_k + G_ka Y_k."""
    _quadratic_grad(h, w, Vinv, L, r, g)
    for k in range(L):
        for al in range(r):
            x = 0.0
            y = 0.0
            for be in range(r):
                x += Bm[al, be] * h[k * r + be]
                y += Bm[be, al] * h[k * r + be]
            X[k, al] = x
            Y[k, al] = y
    _loss_dZ(S, T, sigma2, L, G)
    for a in range(L):
        for k in range(L):
            gak = G[a, k]
            gka = G[k, a]
            for al in range(r):
                g[a * r + al] += gak * X[k, al] + gka * Y[k, al]


@numba.njit(cache=True, forceinline=True)
def hess_b(Vinv, sigma2, L, r, Bm, S, T, G, X, Y, PX, Pf, H):
    """Hessian of F with the score form Bm into H; S, G, X, Y from value_b and derivs_b.

    Hess = Vinv per token + [G_ab Bm_{al,be} + G_ba Bm_{be,al}] + sum_l D_l^T P^l D_l with
    (D_l)_{k,(a,al)} = delta_la X_k,al + delta_ka Y_l,al (the tied hess with X = Y = h, Bm = I)."""
    _quadratic_hess(Vinv, L, r, H)
    for a in range(L):
        for b in range(L):
            gab = G[a, b]
            gba = G[b, a]
            for al in range(r):
                for be in range(r):
                    H[a * r + al, b * r + be] += gab * Bm[al, be] + gba * Bm[be, al]
    _softmax_curvature(X, Y, S, T, sigma2, L, r, Pf, PX, H)


@numba.njit(cache=True, forceinline=True)
def fgh(h, w, T, Vinv, sigma2, L, r, order, S, G, P, u, g, H):
    """F at h; with order >= 1 also the gradient into g, with order 2 the Hessian into H."""
    f = value(h, w, T, Vinv, sigma2, L, r, S)
    if order >= 1:
        derivs(h, w, T, Vinv, sigma2, L, r, order, S, G, P, u, g, H)
    return f


@numba.njit(cache=True, forceinline=True)
def _val(h, w, T, Vinv, sigma2, L, r, S, form, Bm):
    """value (form 0: tied scores h h^T) or value_b (form 1: the score form Bm)."""
    if form == 0:
        return value(h, w, T, Vinv, sigma2, L, r, S)
    return value_b(h, w, T, Vinv, sigma2, L, r, Bm, S)


@numba.njit(cache=True, forceinline=True)
def _grad(h, w, T, Vinv, sigma2, L, r, S, G, P, u, g, H, form, Bm, X, Y):
    if form == 0:
        derivs(h, w, T, Vinv, sigma2, L, r, 1, S, G, P, u, g, H)
    else:
        derivs_b(h, w, T, Vinv, sigma2, L, r, Bm, S, G, X, Y, g)


@numba.njit(cache=True, forceinline=True)
def _hess(h, Vinv, sigma2, L, r, S, T, G, P, u, H, form, Bm, X, Y):
    if form == 0:
        hess(h, Vinv, sigma2, L, r, S, T, G, P, u, H)
    else:
        hess_b(Vinv, sigma2, L, r, Bm, S, T, G, X, Y, u, P, H)


@numba.njit(cache=True, forceinline=True)
def _chol_solve(H, g, N, floor, C, p):
    """p = -(H + tau I)^{-1} g with the smallest tau in {0, -min diag + floor, doubling} that makes H + tau I
    positive definite (Cholesky succeeds with pivots above floor). Returns tau."""
    mind = math.inf
    for i in range(N):
        if H[i, i] < mind:
            mind = H[i, i]
    tau = 0.0 if mind > floor else floor - mind
    for _try in range(200):
        ok = True
        for i in range(N):
            for j in range(i + 1):
                acc = H[i, j] + (tau if i == j else 0.0)
                for k in range(j):
                    acc -= C[i, k] * C[j, k]
                if i == j:
                    if acc <= floor:
                        ok = False
                        break
                    C[i, i] = math.sqrt(acc)
                else:
                    C[i, j] = acc / C[j, j]
            if not ok:
                break
        if ok:
            break
        tau = max(2.0 * tau, floor)
    # forward/back substitution: C C^T p = -g
    for i in range(N):
        acc = -g[i]
        for k in range(i):
            acc -= C[i, k] * p[k]
        p[i] = acc / C[i, i]
    for i in range(N - 1, -1, -1):
        acc = p[i]
        for k in range(i + 1, N):
            acc -= C[k, i] * p[k]
        p[i] = acc / C[i, i]
    return tau


@numba.njit(cache=True, forceinline=True)
def newton(h, w, T, Vinv, sigma2, L, r, gtol, max_iter, floor, S, G, P, u, g, H, C, p, ht, found, n_found, form, Bm,
           X, Y):
    """Safeguarded Newton from h (modified in place). Returns (F(h), max |grad F(h)|, iterations, duplicate).

    duplicate: the iterate came within 1e-4 (relative) of one of the n_found converged minimisers in found, deep
    inside its region of quadratic convergence (basins here are O(0.1) wide), so the run was stopped: it would
    only reproduce that minimiser."""
    N = L * r
    f = 0.0
    gn = math.inf
    it = 0
    f = _val(h, w, T, Vinv, sigma2, L, r, S, form, Bm)
    while True:
        # S holds the softmax at h (from the last accepted value call); the Hessian only once it is needed.
        _grad(h, w, T, Vinv, sigma2, L, r, S, G, P, u, g, H, form, Bm, X, Y)
        gn = 0.0
        for i in range(N):
            gn = max(gn, abs(g[i]))
        if not (gn >= gtol) or it >= max_iter:  # also stops on NaN
            break
        for k in range(n_found):
            dist = 0.0
            size = 1.0
            for i in range(N):
                dist = max(dist, abs(h[i] - found[k, i]))
                size = max(size, abs(found[k, i]))
            if dist < 1e-4 * size:
                return f, gn, it, True
        it += 1
        _hess(h, Vinv, sigma2, L, r, S, T, G, P, u, H, form, Bm, X, Y)
        tau = _chol_solve(H, g, N, floor, C, p)
        if tau == 0.0 and gn < 1e-7:
            # Round-off regime: F changes only in its last digits, so an Armijo test could stall; the Hessian is
            # positive definite, so the plain Newton step converges quadratically.
            for i in range(N):
                h[i] += p[i]
            f = _val(h, w, T, Vinv, sigma2, L, r, S, form, Bm)
            continue
        slope = 0.0
        for i in range(N):
            slope += g[i] * p[i]
        t = 1.0
        accepted = False
        for _ls in range(60):
            for i in range(N):
                ht[i] = h[i] + t * p[i]
            fn = _val(ht, w, T, Vinv, sigma2, L, r, S, form, Bm)
            if fn <= f + 1e-4 * t * slope:
                accepted = True
                break
            t *= 0.5
        if not accepted:
            break
        f = fn
        for i in range(N):
            h[i] = ht[i]
    return f, gn, it, False


@numba.njit(cache=True, forceinline=True)
def _repeats(starts_i, s, N):
    """Start s equals an earlier one to round-off (e.g. for L = 2, r >= 2 the loss zero is collinear, so its
    mirror rotation is the zero itself): its run would only repeat that one's."""
    for t in range(s):
        same = True
        for j in range(N):
            a = starts_i[t, j]
            # written so that a NaN (a skipped start) never counts as equal
            if not (abs(starts_i[s, j] - a) <= 1e-12 * max(1.0, abs(a))):
                same = False
                break
        if same:
            return True
    return False


@numba.njit(cache=True, parallel=True)
def multistart(w, T, Vinv, sigma2, starts, gtol, max_iter, block, form, Bm):
    """Newton from every finite start of every point; keep the lowest F.  form 0: the tied scores h h^T (Bm
    unused); form 1: the scores h Bm h^T.

    w (n, N), T (n, L, L), starts (n, S, N) flat. Returns h (n, N), value, grad_norm, winner (index of the start
    that gave the kept minimiser, -1 if no start was finite), iterations summed over starts, and the distinct end
    points (n, S, N; NaN-padded) with their count (n,): every converged minimiser, and the kept one where it did
    not converge (the record a continued evaluation starts from).
    """
    n = w.shape[0]
    N = w.shape[1]
    L = T.shape[1]
    r = N // L
    n_starts = starts.shape[1]
    out_h = np.empty((n, N))
    out_val = np.full(n, np.nan)
    out_gn = np.full(n, np.nan)
    out_win = np.full(n, -1, dtype=np.int64)
    out_it = np.zeros(n, dtype=np.int64)
    out_found = np.full((n, n_starts, N), np.nan)
    out_nfound = np.zeros(n, dtype=np.int64)
    # Smallest curvature allowed in the shifted Hessian: a fraction of the quadratic term's.
    tr = 0.0
    for al in range(r):
        tr += Vinv[al, al]
    floor = 1e-3 * tr / r
    n_blocks = (n + block - 1) // block
    for b in numba.prange(n_blocks):
        S = np.empty((L, L))
        G = np.empty((L, L))
        P = np.empty((L, L))
        u = np.empty((L, r))
        X = np.empty((L, r))
        Y = np.empty((L, r))
        g = np.empty(N)
        H = np.empty((N, N))
        C = np.empty((N, N))
        p = np.empty(N)
        ht = np.empty(N)
        h = np.empty(N)
        found = np.empty((n_starts, N))
        for i in range(b * block, min(n, (b + 1) * block)):
            best = math.inf
            n_found = 0
            for s in range(n_starts):
                finite = True
                for j in range(N):
                    h[j] = starts[i, s, j]
                    if not math.isfinite(h[j]):
                        finite = False
                if not finite or _repeats(starts[i], s, N):
                    continue
                f, gn, it, dup = newton(h, w[i], T[i], Vinv, sigma2, L, r, gtol, max_iter, floor, S, G, P, u, g, H,
                                        C, p, ht, found, n_found, form, Bm, X, Y)
                out_it[i] += it
                if dup:
                    continue
                if gn < gtol:
                    for j in range(N):
                        found[n_found, j] = h[j]
                    n_found += 1
                if f < best:
                    best = f
                    out_val[i] = f
                    out_gn[i] = gn
                    out_win[i] = s
                    for j in range(N):
                        out_h[i, j] = h[j]
            for k in range(n_found):
                for j in range(N):
                    out_found[i, k, j] = found[k, j]
            if out_win[i] >= 0 and not (out_gn[i] < gtol) and n_found < n_starts:
                for j in range(N):
                    out_found[i, n_found, j] = out_h[i, j]
                n_found += 1
            out_nfound[i] = n_found
            if out_win[i] < 0:
                for j in range(N):
                    out_h[i, j] = np.nan
    return out_h, out_val, out_gn, out_win, out_it, out_found, out_nfound


def derivatives(h: np.ndarray, w: np.ndarray, T: np.ndarray, Vinv: np.ndarray, sigma2: float,
                Bm: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """F, grad F and Hess F at each point (for the finite-difference tests). h, w (n, N); Bm: the score form
    (None: the tied scores h h^T)."""
    r = h.shape[1] // T.shape[1]
    form = 0 if Bm is None else 1
    Bm = np.zeros((r, r)) if Bm is None else np.ascontiguousarray(Bm, dtype=float)
    return _derivatives(np.ascontiguousarray(h, dtype=float), np.ascontiguousarray(w, dtype=float),
                        np.ascontiguousarray(T, dtype=float), np.ascontiguousarray(Vinv, dtype=float), float(sigma2),
                        form, Bm)


@numba.njit(cache=True)
def _derivatives(h, w, T, Vinv, sigma2, form, Bm):
    n, N = h.shape
    L = T.shape[1]
    r = N // L
    val = np.empty(n)
    grad = np.empty((n, N))
    hess = np.empty((n, N, N))
    for i in range(n):
        S = np.empty((L, L))
        G = np.empty((L, L))
        P = np.empty((L, L))
        u = np.empty((L, r))
        X = np.empty((L, r))
        Y = np.empty((L, r))
        if form == 0:
            val[i] = fgh(h[i], w[i], T[i], Vinv, sigma2, L, r, 2, S, G, P, u, grad[i], hess[i])
        else:
            val[i] = value_b(h[i], w[i], T[i], Vinv, sigma2, L, r, Bm, S)
            derivs_b(h[i], w[i], T[i], Vinv, sigma2, L, r, Bm, S, G, X, Y, grad[i])
            hess_b(Vinv, sigma2, L, r, Bm, S, T[i], G, X, Y, u, P, hess[i])
    return val, grad, hess
