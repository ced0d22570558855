"""Adapter: the compiled two-dimensional Newton kernel (theory/prox/_two_token_kernel.py) behind the prox protocol.

For L = 2 each row of S and T sums to 1, so the loss depends on T only through its diagonal, and for r = 1 the
quadratic term's Vinv is a scalar.  Extra starts are not needed by this kernel: its four starts (the two zeros
of the loss, w, and the midpoint of w and the zero on its side) were measured to cover the basins the general
kernel finds; they are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.errors import InputError
from attnphase.theory.prox.protocol import LocalMinima, check_minima
from attnphase.theory.prox.two_token import GTOL, ProxSolution, continue_minima, solve_prox


@dataclass
class L2R1Result:
    h: np.ndarray
    value: np.ndarray
    converged: np.ndarray
    grad_norm: np.ndarray
    minima: LocalMinima | None = None  # the distinct local minimisers the Newton runs ended at


def _result(sol: ProxSolution) -> L2R1Result:
    h = np.stack([sol.h1, sol.h2], axis=1)[:, :, None]
    minima = None
    if sol.n_minima is not None:
        minima = LocalMinima(h=sol.minima[:, :, :, None], count=sol.n_minima)
    return L2R1Result(h=h, value=sol.value, converged=sol.converged, grad_norm=sol.grad_norm, minima=minima)


def prox_l2r1(w: np.ndarray, T: np.ndarray, Vinv: np.ndarray, sigma2: float, starts: np.ndarray | None = None,
              *, gtol: float = GTOL) -> L2R1Result:
    if w.shape[1:] != (2, 1):
        raise InputError(f"prox_l2r1 needs L = 2, r = 1, got w of shape {w.shape}")
    V = 1.0 / float(np.asarray(Vinv).reshape(-1)[0])
    return _result(solve_prox(w[:, 0, 0], w[:, 1, 0], T[:, 0, 0], T[:, 1, 1], V, sigma2, gtol=gtol))


def prox_l2r1_continue(w: np.ndarray, T: np.ndarray, Vinv: np.ndarray, sigma2: float, minima: LocalMinima,
                       *, gtol: float = GTOL) -> L2R1Result:
    """Newton from each of the given local minimisers (those of an evaluation at nearby (w, T, V) on the same
    points), the lowest end point kept: see prox.prox's ``minima``."""
    if w.shape[1:] != (2, 1):
        raise InputError(f"prox_l2r1_continue needs L = 2, r = 1, got w of shape {w.shape}")
    mh = check_minima(minima, w.shape)
    V = 1.0 / float(np.asarray(Vinv).reshape(-1)[0])
    return _result(continue_minima(w[:, 0, 0], w[:, 1, 0], T[:, 0, 0], T[:, 1, 1], V, sigma2, mh[:, :, :, 0],
                                   minima.count, gtol=gtol))


def prox_l2r1_warm(w: np.ndarray, T: np.ndarray, Vinv: np.ndarray, sigma2: float, warm: np.ndarray,
                   *, gtol: float = GTOL) -> L2R1Result:
    """Newton from the given minimisers (n, 2, 1) of a nearby evaluation only: ~4x cheaper than prox_l2r1 and
    blind to basin switches, so for a solver's speculative steps, never for a reported number."""
    if w.shape[1:] != (2, 1) or np.shape(warm) != w.shape:
        raise InputError(f"prox_l2r1_warm needs w and warm of shape (n, 2, 1), got {w.shape}, {np.shape(warm)}")
    one = LocalMinima(h=np.asarray(warm, dtype=float)[:, None], count=np.ones(w.shape[0], dtype=np.int64))
    return prox_l2r1_continue(w, T, Vinv, sigma2, one, gtol=gtol)
