"""What one sample (x, y) reveals about the teacher: the channel's preprocessing (docs/bayes.md).

1. T from (x, y): y = T x with x (L x d) of full rank L (d >= L, almost surely), so T = y x^T (x x^T)^{-1} exactly.
2. S = (T - omega A) / (1 - omega) = softmax(h* h*^T) (omega < 1; at omega = 1, T = A reveals nothing).
3. log S_lk = h_l h_k - c_l with a row constant c_l, so the row-centred matrix
   C_lk = log S_lk - mean_j log S_lj = h_l (h_k - hbar) is the rank-one matrix h (h - hbar 1)^T.
4. From its leading singular pair C = s u v^T: h = t u, h - hbar 1 = (s / t) v, and with u - ubar 1 = (h - hbar 1) / t,
   t^2 = s v . (u - ubar 1) / |u - ubar 1|^2.  So h = +-|t| u: the fields up to one global sign, for every L >= 2,
   unless all fields of the sample are equal (a null set; flagged as degenerate).  L = 2: C = (h1 - h2)/2 *
   [[h1, -h1], [h2, -h2]] gives h1 - h2 and h1 + h2 up to the common sign, the same statement.

The sign is fixed by a convention (the largest |h_l| positive): it carries no information, and the channel is even.
"""

from __future__ import annotations

import numpy as np

from attnphase.errors import InputError
from attnphase.problem import softmax_from_teacher
from attnphase.setting import Setting

# A sample whose centred fields |u - ubar| fall below this is degenerate (all fields equal).
DEGENERATE = 1e-20
TINY = 1e-300


def attention_from_labels(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """T with y = T x for every sample: x, y of shape (n, L, d) -> (n, L, L) (least squares, exact for rank L)."""
    G = np.einsum("nld,nkd->nlk", x, x)
    Y = np.einsum("nld,nkd->nlk", y, x)
    # T G = Y with G symmetric: T^T = G^{-1} Y^T.
    return np.swapaxes(np.linalg.solve(G, np.swapaxes(Y, 1, 2)), 1, 2)


def fields_from_attention(T: np.ndarray, omega: float, A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fields h (n, L) up to sign, residual max |C - h (h - hbar)^T| per sample, degenerate mask) from T."""
    if omega >= 1.0:
        raise InputError("omega = 1: T = A reveals nothing about the teacher's fields")
    S = softmax_from_teacher(T, omega, A)
    logS = np.log(np.clip(S, TINY, None))
    C = logS - logS.mean(axis=2, keepdims=True)
    U, s, Vt = np.linalg.svd(C)
    u, v, s0 = U[:, :, 0], Vt[:, 0, :], s[:, 0]
    uc = u - u.mean(axis=1, keepdims=True)
    nrm = np.sum(uc**2, axis=1)
    degenerate = nrm < DEGENERATE
    t2 = s0 * np.sum(v * uc, axis=1) / np.where(degenerate, 1.0, nrm)
    h = np.sqrt(np.abs(t2))[:, None] * u
    idx = np.argmax(np.abs(h), axis=1)
    sign = np.sign(h[np.arange(h.shape[0]), idx])
    h = h * np.where(sign == 0, 1.0, sign)[:, None]
    resid = np.max(np.abs(C - h[:, :, None] * (h - h.mean(axis=1, keepdims=True))[:, None, :]), axis=(1, 2))
    return h, resid, degenerate


def read_fields(setting: Setting, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The teacher's fields (up to one sign per sample) from tokens x and labels y, shape (n, L, d) each."""
    T = attention_from_labels(x, y)
    return fields_from_attention(T, setting.omega, setting.A_array)
