"""The attention loss for any number of tokens L and ranks r, r* (vectorised over integration points).

    S = row-wise softmax of the scores h_l . h_k,   T = (1 - omega) softmax(h*_l . h*_k) + omega A,
    l(h, h*) = (sigma^2 / 2) sum_{l,k} (S_lk - T_lk)^2.

Arrays carry the points first: h (n, L, r), h* (n, L, r*), S and T (n, L, L).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax over the last axis, overflow-safe (subtract the row maximum)."""
    s = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def scores(h: np.ndarray) -> np.ndarray:
    """Score matrices h_l . h_k, shape (n, L, L)."""
    return np.einsum("nlr,nkr->nlk", h, h)


def target_attention(hstar: np.ndarray, omega: float, A: np.ndarray) -> np.ndarray:
    """T = (1 - omega) softmax(h* h*^T) + omega A at every point, shape (n, L, L)."""
    if hstar.shape[1] == 2:
        # Two tokens: each row is (s, 1 - s) with s a logistic of a score difference (cheaper, overflow-safe).
        if hstar.shape[2] == 1:
            h1, h2 = hstar[:, 0, 0], hstar[:, 1, 0]
            u1, u2 = h1 * (h1 - h2), h2 * (h2 - h1)
        else:
            sc = scores(hstar)
            u1, u2 = sc[:, 0, 0] - sc[:, 0, 1], sc[:, 1, 1] - sc[:, 1, 0]
        s1, s2 = expit(u1), expit(u2)
        S = np.empty((hstar.shape[0], 2, 2))
        S[:, 0, 0], S[:, 0, 1], S[:, 1, 1], S[:, 1, 0] = s1, 1.0 - s1, s2, 1.0 - s2
    else:
        S = softmax_rows(scores(hstar))
    return (1.0 - omega) * S + omega * np.asarray(A)[None]


def attention_loss(h: np.ndarray, T: np.ndarray, sigma2: float) -> np.ndarray:
    """l(h, h*) = (sigma^2/2) sum_{l,k} (S_lk - T_lk)^2 at every point, shape (n,)."""
    E = softmax_rows(scores(h)) - T
    return 0.5 * sigma2 * np.einsum("nlk,nlk->n", E, E)


def attention_loss_grad(h: np.ndarray, T: np.ndarray, sigma2: float) -> tuple[np.ndarray, np.ndarray]:
    """Value and gradient with respect to h (n, L, r) of the loss.

    dl/dS = sigma^2 (S - T); through the softmax dl/ds_lk = S_lk (dl/dS_lk - sum_j S_lj dl/dS_lj);
    through s = h h^T, dl/dh = (D + D^T) h with D = dl/ds.
    """
    S = softmax_rows(scores(h))
    E = S - T
    value = 0.5 * sigma2 * np.einsum("nlk,nlk->n", E, E)
    gS = sigma2 * E
    D = S * (gS - np.sum(S * gS, axis=-1, keepdims=True))
    grad = np.einsum("nlk,nkr->nlr", D + np.swapaxes(D, 1, 2), h)
    return value, grad
