"""The per-sample loss in the fields, with its gradient and the diagonal blocks of its Hessian (any L, r).

    l(h, h*) = (sigma^2 / 2) sum_{l,k} (S_lk - T_lk)^2,   S = softmax_rows(h h^T),   h (n, L, r).

Row l of the loss is phi_l(s_l) with s_l the scores of row l.  With e = sigma^2 (S - T) and the softmax Jacobian
J_l = diag(S_l) - S_l S_l^T, the score gradient is D_l = J_l e_l and the score Hessian of row l is
    P^l = sigma^2 J_l J_l + diag(D_l) - S_l D_l^T - D_l S_l^T.
Through s_lk = h_l . h_k:
    dl/dh_i = sum_k (D_ik + D_ki) h_k,
    d^2 l/dh_i dh_i = 2 D_ii I + h^T P^i h + v_i h_i^T + h_i v_i^T + sum_l P^l_ii h_l h_l^T,   v_i = h^T P^i_{:, i}.
The online-SGD drifts need only these diagonal blocks (docs/dynamics.md).
"""

from __future__ import annotations

import numpy as np

from attnphase.problem import scores, softmax_rows


def loss_grad_hessdiag(h: np.ndarray, T: np.ndarray, sigma2: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Value (n,), gradient (n, L, r) and diagonal Hessian blocks d^2 l / dh_i dh_i (n, L, r, r)."""
    S = softmax_rows(scores(h))
    e = sigma2 * (S - T)
    value = 0.5 * np.einsum("nlk,nlk->n", e, S - T)
    D = S * (e - np.sum(S * e, axis=-1, keepdims=True))
    grad = np.einsum("nlk,nkr->nlr", D + np.swapaxes(D, 1, 2), h)
    L, r = h.shape[1], h.shape[2]
    # J_l = diag(S_l) - S_l S_l^T for every row: (n, L, L, L), index [n, l, k, k'].
    J = np.einsum("nlk,kj->nlkj", S, np.eye(L)) - np.einsum("nlk,nlj->nlkj", S, S)
    P = sigma2 * np.einsum("nlka,nlaj->nlkj", J, J)
    P = P + np.einsum("nlk,kj->nlkj", D, np.eye(L)) - np.einsum("nlk,nlj->nlkj", S, D) - np.einsum("nlk,nlj->nlkj", D, S)
    idx = np.arange(L)
    Pi = P[:, idx, :, :]  # P^i, (n, i, k, k')
    hPh = np.einsum("nka,nikj,njb->niab", h, Pi, h)
    v = np.einsum("nka,nik->nia", h, P[:, idx, :, idx].transpose(1, 0, 2))  # v_i = h^T P^i[:, i]
    hv = np.einsum("nia,nib->niab", v, h)
    Pll = P[:, :, idx, idx]  # P^l_ii, (n, l, i)
    outer = np.einsum("nli,nla,nlb->niab", Pll, h, h)
    H = 2.0 * D[:, idx, idx][:, :, None, None] * np.eye(r)[None, None] + hPh + hv + np.swapaxes(hv, 2, 3) + outer
    return value, grad, H
