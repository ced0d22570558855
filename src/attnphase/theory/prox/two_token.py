"""Batched global solution of the non-convex proximal problem for L = 2, r = 1:

    hhat = argmin_h  F(h) = |h - w|^2 / (2V) + l(h, h*),   h in R^2,

at all integration points at once.  l depends on h only through the scores h_l h_k, so l(h) = l(-h)
and with the large V of this problem F has two mirror basins.  We run a safeguarded Newton method
from several starts and keep the lowest objective:

- the two exact zeros +-h0 of l (closed form when logit T_11 + logit T_22 > 0), near which the
  minimiser sits when V is large,
- w itself (the minimiser when the loss is saturated and the quadratic dominates; needed at large m),
- where a token is large (|w_l| >= 1): the midpoint of w and the zero on w's side, and that midpoint with token l
  put back at w_l (at large |w| the minimiser can sit in a basin between them, or one token stays near its w_l,
  that no other start reaches: the general kernel's starts, found there at about 1 point in 3000 of channel-like
  draws with q up to 1).
A fourth start at -w was measured never to lower the objective (42 settings x 16384 points), so it is
not used.  The test suite holds the result against a brute-force global search.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logit

from attnphase.errors import InputError
from attnphase.theory.model.loss import attention_loss, loss_derivatives
from attnphase.theory.prox._compile_notice import compile_notice

GTOL = 1e-9  # the compiled kernel's gradient tolerance (max norm), by default
MAX_ITER = 60  # its Newton iterations per start
STUDY_COMPILE = "20 s"  # first-use compilation of each study kernel (docs/numerics.md)


def converged(grad_norm: np.ndarray, gtol: float = GTOL) -> np.ndarray:
    """Points whose gradient norm at the returned minimiser counts as converged (a margin above gtol)."""
    return grad_norm < max(gtol * 100, 1e-8)


@dataclass
class ProxSolution:
    h1: np.ndarray
    h2: np.ndarray
    value: np.ndarray  # the Moreau envelope min_h F(h)
    grad_norm: np.ndarray
    converged: np.ndarray  # per point: gradient below tolerance
    minima: np.ndarray | None = None  # (n, MAX_MINIMA, 2) distinct Newton end points (NaN-padded), numba backend
    n_minima: np.ndarray | None = None  # (n,) how many


def objective(h1, h2, w1, w2, t1, t2, V: float, sigma2: float) -> np.ndarray:
    return ((h1 - w1) ** 2 + (h2 - w2) ** 2) / (2.0 * V) + attention_loss(h1, h2, t1, t2, sigma2)


def _newton(h1, h2, w1, w2, t1, t2, V, sigma2, max_iter=60, gtol=1e-9):
    """Safeguarded Newton from (h1, h2); arrays are modified copies. Works only on active points."""
    h1 = h1.copy()
    h2 = h2.copy()
    active = np.arange(h1.shape[0])
    inv_v = 1.0 / V
    # Smallest eigenvalue we allow in the (shifted) Hessian: keeps the step a descent direction.
    floor = 1e-3 * inv_v
    for _ in range(max_iter):
        if active.size == 0:
            break
        a1, a2 = h1[active], h2[active]
        aw1, aw2, at1, at2 = w1[active], w2[active], t1[active], t2[active]
        val, g1, g2, H11, H12, H22 = loss_derivatives(a1, a2, at1, at2, sigma2)
        f0 = val + ((a1 - aw1) ** 2 + (a2 - aw2) ** 2) * (0.5 * inv_v)
        g1 = g1 + (a1 - aw1) * inv_v
        g2 = g2 + (a2 - aw2) * inv_v
        H11 = H11 + inv_v
        H22 = H22 + inv_v
        gn = np.maximum(np.abs(g1), np.abs(g2))
        done = gn < gtol
        # Eigenvalue shift for indefinite Hessians.
        half_tr = 0.5 * (H11 + H22)
        disc = np.sqrt(0.25 * (H11 - H22) ** 2 + H12 * H12)
        lam_min = half_tr - disc
        pd = lam_min > floor
        shift = np.where(pd, 0.0, floor - lam_min)
        H11 = H11 + shift
        H22 = H22 + shift
        det = H11 * H22 - H12 * H12
        p1 = -(H22 * g1 - H12 * g2) / det
        p2 = -(H11 * g2 - H12 * g1) / det
        # Near the optimum the objective changes only at round-off, so an Armijo test can stall:
        # take the plain Newton step there (small gradient, positive-definite Hessian).
        plain = pd & (gn < 1e-7)
        slope = g1 * p1 + g2 * p2
        step = np.ones_like(g1)
        need = ~(plain | done)
        for _ls in range(40):
            if not need.any():
                break
            idx = np.nonzero(need)[0]
            t = step[idx]
            n1 = a1[idx] + t * p1[idx]
            n2 = a2[idx] + t * p2[idx]
            fn = objective(n1, n2, aw1[idx], aw2[idx], at1[idx], at2[idx], V, sigma2)
            ok = fn <= f0[idx] + 1e-4 * t * slope[idx]
            step[idx[~ok]] *= 0.5
            need[idx[ok]] = False
        step = np.where(done, 0.0, step)
        h1[active] = a1 + step * p1
        h2[active] = a2 + step * p2
        active = active[~done]
    # Final gradient for the reported convergence flag.
    val, g1, g2, *_ = loss_derivatives(h1, h2, t1, t2, sigma2)
    g1 = g1 + (h1 - w1) * inv_v
    g2 = g2 + (h2 - w2) * inv_v
    gnorm = np.maximum(np.abs(g1), np.abs(g2))
    value = val + ((h1 - w1) ** 2 + (h2 - w2) ** 2) * (0.5 * inv_v)
    return h1, h2, value, gnorm


def loss_zeros(t1: np.ndarray, t2: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A zero (or, if none exists, the minimiser along h_1 = h_2) of l; the other is its mirror.

    S_11 = T_11 and S_22 = T_22 need u_1 = logit T_11, u_2 = logit T_22 with u_1 + u_2 = (h_1 - h_2)^2,
    solvable iff c = u_1 + u_2 >= 0: h_1 = u_1 / sqrt(c), h_2 = -u_2 / sqrt(c).
    """
    eps = 1e-12
    u1 = logit(np.clip(t1, eps, 1 - eps))
    u2 = logit(np.clip(t2, eps, 1 - eps))
    c = u1 + u2
    ok = c > 1e-8
    a = np.sqrt(np.where(ok, c, 1.0))
    mid = 0.5 * (w1 + w2)
    z1 = np.where(ok, u1 / a, mid)
    z2 = np.where(ok, -u2 / a, mid)
    return z1, z2


def solve_prox(w1, w2, t1, t2, V: float, sigma2: float, gtol: float = GTOL, backend: str = "numba") -> ProxSolution:
    """Global minimiser of F at every point (arrays of equal shape (n,)); keeps the best of all starts.

    backend: "numba" (compiled, per-point early exit, both cores) or "numpy" (the vectorised reference).
    """
    w1 = np.ascontiguousarray(w1, dtype=float)
    w2 = np.ascontiguousarray(w2, dtype=float)
    t1 = np.ascontiguousarray(t1, dtype=float)
    t2 = np.ascontiguousarray(t2, dtype=float)
    z1, z2 = loss_zeros(t1, t2, w1, w2)
    mins = (None, None)
    if backend == "numba":
        from attnphase.theory.prox._two_token_kernel import prox_kernel

        with compile_notice("the two-token proximal kernel", (prox_kernel,), STUDY_COMPILE):
            h1, h2, val, gn, *mins = prox_kernel(w1, w2, t1, t2, z1, z2, float(V), float(sigma2), float(gtol),
                                                 MAX_ITER, *NO_GIVEN)
    elif backend == "numpy":
        best = None
        # The compiled kernel's starts: the zeros, w, and at large |w| the midpoint and the per-token ones.
        sg = np.where(z1 * w1 + z2 * w2 >= 0.0, 1.0, -1.0)
        m1, m2 = 0.5 * (w1 + sg * z1), 0.5 * (w2 + sg * z2)
        big1, big2 = np.abs(w1) >= 1.0, np.abs(w2) >= 1.0
        every = np.ones(w1.shape, dtype=bool)
        for s1, s2, use in ((z1, z2, every), (-z1, -z2, every), (w1, w2, every), (m1, m2, big1 | big2),
                            (w1, m2, big1), (m1, w2, big2)):
            cand = _newton(s1, s2, w1, w2, t1, t2, V, sigma2, gtol=gtol)
            if best is None:
                best = list(cand)
                continue
            better = (cand[2] < best[2]) & use
            for k, arr in enumerate(cand):
                best[k] = np.where(better, arr, best[k])
        h1, h2, val, gn = best
    else:
        raise InputError(f"backend must be 'numba' or 'numpy', got {backend!r}")
    return ProxSolution(h1=h1, h2=h2, value=val, grad_norm=gn, converged=converged(gn, gtol),
                        minima=mins[0], n_minima=mins[1])


# prox_kernel's "no given starts" (own starts): empty arrays of the types it is compiled for.
NO_GIVEN = (np.empty((0, 1, 2)), np.empty(0, dtype=np.int64))


def continue_minima(w1, w2, t1, t2, V: float, sigma2: float, minima: np.ndarray, n_minima: np.ndarray,
                    gtol: float = GTOL) -> ProxSolution:
    """Newton from each given local minimiser (minima (n, K, 2), the first n_minima per point) and the lowest
    end point: the continuation of an evaluation at nearby (w, t, V) on the same points."""
    from attnphase.theory.prox._two_token_kernel import prox_kernel

    c = np.ascontiguousarray
    w1, w2, t1, t2 = (c(a, dtype=float) for a in (w1, w2, t1, t2))
    with compile_notice("the two-token proximal kernel", (prox_kernel,), STUDY_COMPILE):
        h1, h2, val, gn, mins, cnt = prox_kernel(w1, w2, t1, t2, w1, w2, float(V), float(sigma2), float(gtol),
                                                 MAX_ITER, c(minima, dtype=float), c(n_minima, dtype=np.int64))
    return ProxSolution(h1=h1, h2=h2, value=val, grad_norm=gn, converged=converged(gn, gtol),
                        minima=mins, n_minima=cnt)
