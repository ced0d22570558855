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
