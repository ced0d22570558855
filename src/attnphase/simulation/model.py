"""The student attention layer and its empirical risk (MODEL.md sections 1-2), batched over samples.

    yhat = softmax( (x+p) Q Q^T (x+p)^T / d ) (x+p),
    R(Q) = sum_mu ||y^mu - yhat^mu||_F^2 / (2d) + (lambda/2) ||Q||_F^2.
"""

from __future__ import annotations

import math

import torch

from attnphase.simulation.sampling import Dataset


def attention_matrix(z: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """S = softmax_k(h_l . h_k) with h_l = Q^T z_l / sqrt(d); z (n, L, d), Q (d, r) -> (n, L, L)."""
    h = z @ Q / math.sqrt(z.shape[-1])
    return torch.softmax(h @ h.transpose(-1, -2), dim=-1)


def attention_output(x: torch.Tensor, p: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """yhat = S (x + p), shape (n, L, d)."""
    z = x + p
    return attention_matrix(z, Q) @ z


def sample_errors(data: Dataset, p: torch.Tensor, Q: torch.Tensor, chunk: int = 2048) -> torch.Tensor:
    """Per-sample ||y - yhat||_F^2 / (2d), computed directly from the tokens (chunked to bound memory)."""
    d = data.x.shape[-1]
    out = []
    with torch.no_grad():
        for start in range(0, data.n, chunk):
            x = data.x[start:start + chunk]
            y = data.T[start:start + chunk] @ x
            out.append(((y - attention_output(x, p, Q)) ** 2).sum(dim=(1, 2)) / (2 * d))
    return torch.cat(out)


class EmpiricalRisk:
    """R(Q) on a training set.

    The tokens enter the residual y - yhat = (T - S) x - S p only through L x L Gram matrices
    (x_k . x_k', x_k . p_k', p_k . p_k'), so these are precomputed once; each evaluation then touches
    the d-dimensional data only in h = (x+p) Q / sqrt(d) (and its backward pass).  This is an exact
    rewriting, not an approximation, and writing it with T - S (rather than expanding ||y||^2 - ...)
    avoids cancellation between O(d) terms, which matters in float32.
    """

    def __init__(self, data: Dataset, p: torch.Tensor, lam: float) -> None:
        x = data.x
        self.d = int(x.shape[-1])
        self.n = data.n
        self.lam = float(lam)
        self.z = x + p
        self.T = data.T
        self.Gx = x @ x.transpose(-1, -2)
        self.Cxp = x @ p.transpose(0, 1)
        self.Gp = p @ p.transpose(0, 1)
        # x_j . z_k and p_j . z_k: the residual's derivative w.r.t. S is -(r_l . z_k)/d, with
        # r_l . z_k = sum_j D_lj x_j . z_k - sum_j S_lj p_j . z_k.
        self._xz = self.Gx + self.Cxp
        self._pz = self.Cxp.transpose(-1, -2) + self.Gp

    def data_term(self, Q: torch.Tensor) -> torch.Tensor:
        """sum_mu ||y - yhat||_F^2 / (2d)."""
        S = attention_matrix(self.z, Q)
        D = self.T - S
        sq = ((D @ self.Gx) * D).sum() - 2.0 * ((D @ self.Cxp) * S).sum() + ((S @ self.Gp) * S).sum()
        return sq / (2 * self.d)

    def __call__(self, Q: torch.Tensor) -> torch.Tensor:
        """R(Q) as a differentiable torch expression (autograd reference for the hand-written gradient)."""
        return self.data_term(Q) + 0.5 * self.lam * (Q * Q).sum()

    def value_and_grad(self, Q: torch.Tensor) -> tuple[float, torch.Tensor]:
        """R(Q) and its gradient, back-propagated by hand.

        Autograd gives the same numbers (tests check it) but its per-operation overhead dominates at small
        d, where the hand-written pass is ~3x faster; at d ~ 1000 both are limited by reading x + p.
        """
        Q = Q.detach()
        sd = math.sqrt(self.d)
        h = self.z @ Q / sd
        S = torch.softmax(h @ h.transpose(-1, -2), dim=-1)
        D = self.T - S
        sq = ((D @ self.Gx) * D).sum() - 2.0 * ((D @ self.Cxp) * S).sum() + ((S @ self.Gp) * S).sum()
        R = sq / (2 * self.d) + 0.5 * self.lam * (Q * Q).sum()
        dS = (S @ self._pz - D @ self._xz) / self.d
        dscores = S * (dS - (S * dS).sum(dim=-1, keepdim=True))  # softmax backward, row-wise
        dh = (dscores + dscores.transpose(-1, -2)) @ h
        r = Q.shape[1]
        g = self.z.reshape(-1, self.d).T @ dh.reshape(-1, r) / sd + self.lam * Q
        return float(R), g

    def autograd_value_and_grad(self, Q: torch.Tensor) -> tuple[float, torch.Tensor]:
        Qv = Q.detach().requires_grad_(True)
        R = self(Qv)
        (g,) = torch.autograd.grad(R, Qv)
        return float(R.detach()), g
