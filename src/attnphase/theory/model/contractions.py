"""The channel's two contractions over the integration points, compiled: x M (each point's (L, a) block times an
(a, b) matrix) and sum over points and tokens of f_l g_l^T.

For these shapes (a, b <= 6, n L ~ 1e4-1e5) numpy's einsum loops element by element: 0.7 ms per call at n = 32768,
L = r = 2, about 10 % of a rank-2 map evaluation and a third of a continued one.  BLAS would be as fast, but a
multithreaded BLAS call on skinny shapes was measured 100x slower on a machine shared by several processes; these
loops are serial and always the same order (docs/numerics.md, "Contractions over the points")."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _right_matmul(x, M, out):
    n, L, a = x.shape
    b = M.shape[1]
    for i in range(n):
        for l in range(L):  # noqa: E741
            for j in range(b):
                s = 0.0
                for k in range(a):
                    s += x[i, l, k] * M[k, j]
                out[i, l, j] = s


@numba.njit(cache=True)
def _outer_sum(f, g, out):
    n, L, a = f.shape
    b = g.shape[2]
    for i in range(n):
        for l in range(L):  # noqa: E741
            for p in range(a):
                fp = f[i, l, p]
                for q in range(b):
                    out[p, q] += fp * g[i, l, q]


def right_matmul(x: np.ndarray, M: np.ndarray) -> np.ndarray:
    """x (n, L, a) times M (a, b): (n, L, b), as np.einsum("nla,ab->nlb", x, M) (to round-off)."""
    x = np.asarray(x, dtype=float)
    M = np.ascontiguousarray(M, dtype=float)
    if x.ndim != 3 or M.ndim != 2 or x.shape[2] != M.shape[0]:
        raise ValueError(f"right_matmul: shapes {x.shape} and {M.shape} do not match (n, L, a) x (a, b)")
    out = np.empty(x.shape[:2] + (M.shape[1],))
    _right_matmul(x, M, out)
    return out


def outer_sum(f: np.ndarray, g: np.ndarray) -> np.ndarray:
    """sum over points and tokens of f_l g_l^T: (n, L, a), (n, L, b) -> (a, b), as np.einsum("nla,nlb->ab", f, g)
    (to round-off)."""
    f = np.asarray(f, dtype=float)
    g = np.asarray(g, dtype=float)
    if f.ndim != 3 or g.ndim != 3 or f.shape[:2] != g.shape[:2]:
        raise ValueError(f"outer_sum: shapes {f.shape} and {g.shape} do not match (n, L, a), (n, L, b)")
    out = np.zeros((f.shape[2], g.shape[2]))
    _outer_sum(f, g, out)
    return out
