"""Adapter: the compiled two-dimensional Newton kernel (theory/_prox_kernel.py) behind the prox protocol.

For L = 2 each row of S and T sums to 1, so the loss depends on T only through its diagonal, and for r = 1 the
quadratic term's Vinv is a scalar.  Extra starts are not needed by this kernel: its four starts (the two zeros
of the loss, w, and the midpoint of w and the zero on its side) were measured to cover the basins the general
kernel finds; they are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.theory.proximal import solve_prox


@dataclass
class L2R1Result:
    h: np.ndarray
    value: np.ndarray
    converged: np.ndarray
    grad_norm: np.ndarray


def prox_l2r1(w: np.ndarray, T: np.ndarray, Vinv: np.ndarray, sigma2: float, starts: np.ndarray | None = None,
              *, gtol: float = 1e-9) -> L2R1Result:
    if w.shape[1:] != (2, 1):
        raise ValueError(f"prox_l2r1 needs L = 2, r = 1, got w of shape {w.shape}")
    V = 1.0 / float(np.asarray(Vinv).reshape(-1)[0])
    sol = solve_prox(w[:, 0, 0], w[:, 1, 0], T[:, 0, 0], T[:, 1, 1], V, sigma2, gtol=gtol)
    h = np.stack([sol.h1, sol.h2], axis=1)[:, :, None]
    return L2R1Result(h=h, value=sol.value, converged=sol.converged, grad_norm=sol.grad_norm)


def prox_l2r1_warm(w: np.ndarray, T: np.ndarray, Vinv: np.ndarray, sigma2: float, warm: np.ndarray,
                   *, gtol: float = 1e-9) -> L2R1Result:
    """Newton from the given minimisers (n, 2, 1) of a nearby evaluation only: ~4x cheaper than prox_l2r1 and
    blind to basin switches, so for a solver's speculative steps, never for a reported number."""
    from attnphase.theory._prox_kernel import prox_kernel

    if w.shape[1:] != (2, 1) or np.shape(warm) != w.shape:
        raise ValueError(f"prox_l2r1_warm needs w and warm of shape (n, 2, 1), got {w.shape}, {np.shape(warm)}")
    V = 1.0 / float(np.asarray(Vinv).reshape(-1)[0])
    c = np.ascontiguousarray
    h1, h2, val, gn = prox_kernel(c(w[:, 0, 0]), c(w[:, 1, 0]), c(T[:, 0, 0]), c(T[:, 1, 1]), c(warm[:, 0, 0]),
                                  c(warm[:, 1, 0]), V, float(sigma2), float(gtol), 60, True)
    return L2R1Result(h=np.stack([h1, h2], axis=1)[:, :, None], value=val, converged=gn < max(gtol * 100, 1e-8),
                      grad_norm=gn)
