"""Measurements at the end of training (docs/model.md): overlaps, errors, linear baseline."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attnphase.experiments.simulation.model import sample_errors
from attnphase.experiments.simulation.sampling import Dataset


@dataclass
class Overlaps:
    """q = sigma^2 Q^T Q / d (r x r), m_l = p_l^T Q / sqrt(d) (L x r), theta = sigma^2 Q^T Q* / d (r x r*).

    For the study's setting (p = None below), m holds only m_1 = 1^T Q / d (shape (r,); m_2 = -m_1),
    computed as before so that the recorded numbers stay what they were.
    """

    q: np.ndarray
    m: np.ndarray
    theta: np.ndarray

    @property
    def m_norm(self) -> float:
        """Root mean square over tokens of |m_l|, ||m||_F / sqrt(L): the theory's m_norm (its summary m, the study's
        |m_1|), so that the two commands' records compare key by key (before: the Frobenius norm, sqrt(L) times it)."""
        return float(np.linalg.norm(self.m) / np.sqrt(np.atleast_2d(self.m).shape[0]))

    @property
    def theta_sv(self) -> list[float]:
        """Singular values of theta, largest first."""
        return np.linalg.svd(np.atleast_2d(self.theta), compute_uv=False).tolist()


def overlaps(Q: torch.Tensor, Q_star: torch.Tensor, sigma: float, p: torch.Tensor | None = None) -> Overlaps:
    """Overlaps of a student matrix Q (d, r).  p (L, d): the positional encodings (m is then L x r); None
    gives the study's m_1 = 1^T Q / d."""
    d = Q.shape[0]
    Qd = Q.detach().to(torch.float64)
    Qs = Q_star.detach().to(torch.float64)
    if p is None:
        m = Qd.sum(dim=0) / d
    else:
        m = p.detach().to(torch.float64) @ Qd / math.sqrt(d)
    return Overlaps(
        q=(sigma**2 * Qd.T @ Qd / d).cpu().numpy(),
        m=m.cpu().numpy(),
        theta=(sigma**2 * Qd.T @ Qs / d).cpu().numpy(),
    )


def generalization_error(data: Dataset, p: torch.Tensor, Q: torch.Tensor, K: torch.Tensor | None = None) -> float:
    """Mean over the test set of ||y - yhat||_F^2 / (2d) (K: the untied student's key matrix)."""
    return float(sample_errors(data, p, Q, K=K).mean())


def fit_linear(data: Dataset, ridge: float = 0.0) -> torch.Tensor:
    """Closed-form least squares for yhat = B x, B in R^{L x L}, on a training set.

    Minimises sum_mu ||y - B x||_F^2 / (2d) + (ridge/2) ||B||_F^2 (same normalisation as R(Q)).  Every
    row of B solves the same L x L normal equations B (sum_mu x x^T + ridge d I) = sum_mu y x^T, and
    y x^T = T x x^T, so only the L x L Gram matrices of the tokens are needed.
    """
    x = data.x.to(torch.float64)
    T = data.T.to(torch.float64)
    G = x @ x.transpose(-1, -2)
    Gsum = G.sum(dim=0)
    Csum = (T @ G).sum(dim=0)
    d = x.shape[-1]
    eye = torch.eye(Gsum.shape[0], dtype=torch.float64, device=Gsum.device)
    # B M = C with M symmetric  <=>  M B^T = C^T
    return torch.linalg.solve(Gsum + ridge * d * eye, Csum.T).T


def linear_test_error(data: Dataset, B: torch.Tensor, chunk: int = 2048) -> float:
    """Mean over the test set of ||y - B x||_F^2 / (2d)."""
    d = data.x.shape[-1]
    Bc = B.to(dtype=data.x.dtype, device=data.x.device)
    total = 0.0
    with torch.no_grad():
        for start in range(0, data.n, chunk):
            x = data.x[start:start + chunk]
            y = data.T[start:start + chunk] @ x
            total += float(((y - Bc @ x) ** 2).sum(dim=(1, 2)).sum())
    return total / (2 * d * data.n)


def scalar_or_list(a: np.ndarray, absolute: bool) -> float | list:
    """r = r* = 1: a float (absolute value: Q -> -Q is a symmetry); otherwise nested lists."""
    if a.size == 1:
        v = float(a.reshape(()))
        return abs(v) if absolute else v
    return a.tolist()
