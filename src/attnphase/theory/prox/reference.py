"""Slow, obviously correct proximal map: L-BFGS (scipy) from many starts, one point at a time (tied scores h h^T, or
with untied=True the untied student's h^Q h^K^T).

For tests and for holding the compiled kernels to account, never for fixed points.  Starts: w, -w, the
given extra starts, and random ones scaled like w and like the loss's own zeros (O(1) scores).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.problem import loss, loss_and_grad, student_attention


@dataclass
class ReferenceResult:
    h: np.ndarray
    value: np.ndarray
    converged: np.ndarray
    grad_norm: np.ndarray


def untied_loss_grad(h: np.ndarray, T: np.ndarray, sigma2: float) -> tuple[np.ndarray, np.ndarray]:
    """The untied loss and its gradient: h = (h^Q, h^K) (n, L, 2r'), scores s = h^Q h^K^T;
    with D = dl/ds (as in problem.loss_and_grad): dl/dh^Q = D h^K, dl/dh^K = D^T h^Q."""
    half = h.shape[2] // 2
    hq, hk = h[:, :, :half], h[:, :, half:]
    S = student_attention(hq, hk)
    value = loss(S, T, sigma2)
    gS = sigma2 * (S - T)
    D = S * (gS - np.sum(S * gS, axis=-1, keepdims=True))
    grad = np.concatenate([D @ hk, np.swapaxes(D, 1, 2) @ hq], axis=2)
    return value, grad


def objective(h: np.ndarray, w: np.ndarray, T: np.ndarray, Vinv: np.ndarray, sigma2: float,
              untied: bool = False) -> np.ndarray:
    """F(h) at every point: h, w (n, L, r), T (n, L, L)."""
    d = h - w
    value = untied_loss_grad(h, T, sigma2)[0] if untied else loss(student_attention(h), T, sigma2)
    return 0.5 * np.einsum("nlr,rs,nls->n", d, Vinv, d) + value


def objective_grad(h: np.ndarray, w: np.ndarray, T: np.ndarray, Vinv: np.ndarray, sigma2: float,
                   untied: bool = False):
    d = h - w
    val, g = untied_loss_grad(h, T, sigma2) if untied else loss_and_grad(h, T, sigma2)
    return val + 0.5 * np.einsum("nlr,rs,nls->n", d, Vinv, d), g + d @ Vinv


def prox_reference(w: np.ndarray, T: np.ndarray, Vinv: np.ndarray, sigma2: float, starts: np.ndarray | None = None,
                   *, gtol: float = 1e-9, n_random: int = 24, seed: int = 0, untied: bool = False) -> ReferenceResult:
    """untied: the scores h^Q h^K^T of h = (h^Q, h^K) (r even) instead of h h^T."""
    from scipy.optimize import minimize  # lazily: tests only, and scipy.optimize is slow to import

    n, L, r = w.shape
    rng = np.random.default_rng(seed)
    out_h = np.empty_like(w)
    out_v = np.empty(n)
    out_g = np.empty(n)
    for i in range(n):
        wi, Ti = w[i:i + 1], T[i:i + 1]

        def fg(x, wi=wi, Ti=Ti):
            v, g = objective_grad(x.reshape(1, L, r), wi, Ti, Vinv, sigma2, untied)
            return float(v[0]), g.reshape(-1)

        cands = [wi[0], -wi[0]]
        if starts is not None:
            cands.extend(s for s in starts[i] if np.all(np.isfinite(s)))
        scale = max(1.0, float(np.abs(wi).max()))
        cands.extend(rng.normal(0.0, 1.5, (n_random // 2, L, r)))
        cands.extend(rng.normal(0.0, scale, (n_random - n_random // 2, L, r)))
        best = None
        for x0 in cands:
            res = minimize(fg, np.asarray(x0, dtype=float).reshape(-1), jac=True, method="L-BFGS-B",
                           options=dict(maxiter=2000, gtol=1e-12, ftol=1e-15))
            if best is None or res.fun < best.fun:
                best = res
        out_h[i] = best.x.reshape(L, r)
        out_v[i] = best.fun
        out_g[i] = float(np.abs(fg(best.x)[1]).max())
    return ReferenceResult(h=out_h, value=out_v, converged=out_g < max(100 * gtol, 1e-6), grad_norm=out_g)
