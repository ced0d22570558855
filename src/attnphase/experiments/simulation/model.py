"""The student attention layer and its empirical risk (docs/model.md), batched over samples.

    tied   (the study's):  yhat = softmax( (x+p) Q Q^T (x+p)^T / d ) (x+p),
                           R(Q) = sum_mu ||y^mu - yhat^mu||_F^2 / (2d) + (lambda/2) ||Q||_F^2;
    untied:                yhat = softmax( (x+p) Q K^T (x+p)^T / d ) (x+p),
                           R(Q, K) = same data term + (lambda/2) (||Q||_F^2 + ||K||_F^2).

The trainable parameter is one (d, r) tensor Q for the tied student and one (d, 2r) tensor W = [Q | K]
for the untied one, so that every optimiser works on a single tensor either way.  Note that the untied
student at Q = K has the tied student's data term but twice its penalty (each factor is penalised).
"""

from __future__ import annotations

import math

import torch

from attnphase.errors import InputError
from attnphase.experiments.simulation.sampling import Dataset
from attnphase.problem import fields, regulariser, regulariser_grad, student_attention

STUDENTS = ("tied", "untied")


def check_student(student: str) -> str:
    if student not in STUDENTS:
        raise InputError(f"student must be one of {', '.join(STUDENTS)}, got {student!r}")
    return student


def split_weights(W: torch.Tensor, student: str = "tied") -> tuple[torch.Tensor, torch.Tensor]:
    """(Q, K): for the tied student both are W; for the untied one W = [Q | K] (d, 2r)."""
    if check_student(student) == "tied":
        return W, W
    r2 = W.shape[-1]
    if r2 % 2:
        raise InputError(f"untied weights must have an even number of columns [Q | K], got {r2}")
    return W[:, : r2 // 2], W[:, r2 // 2:]


def attention_matrix(z: torch.Tensor, Q: torch.Tensor, K: torch.Tensor | None = None) -> torch.Tensor:
    """S = softmax_k(h_l . g_k), h_l = Q^T z_l / sqrt(d), g_k = K^T z_k / sqrt(d) (K = Q: tied);
    z (n, L, d), Q and K (d, r) -> (n, L, L)."""
    return student_attention(fields(z, Q), None if K is None else fields(z, K))


def attention_output(x: torch.Tensor, p: torch.Tensor, Q: torch.Tensor, K: torch.Tensor | None = None) -> torch.Tensor:
    """yhat = S (x + p), shape (n, L, d)."""
    z = x + p
    return attention_matrix(z, Q, K) @ z


def sample_errors(data: Dataset, p: torch.Tensor, Q: torch.Tensor, chunk: int = 2048,
                  K: torch.Tensor | None = None) -> torch.Tensor:
    """Per-sample ||y - yhat||_F^2 / (2d), computed directly from the tokens (chunked to bound memory)."""
    d = data.x.shape[-1]
    out = []
    with torch.no_grad():
        for start in range(0, data.n, chunk):
            x = data.x[start:start + chunk]
            y = data.T[start:start + chunk] @ x
            out.append(((y - attention_output(x, p, Q, K)) ** 2).sum(dim=(1, 2)) / (2 * d))
    return torch.cat(out)


class EmpiricalRisk:
    """R(Q) on a training set.

    The tokens enter the residual y - yhat = (T - S) x - S p only through L x L Gram matrices
    (x_k . x_k', x_k . p_k', p_k . p_k'), so these are precomputed once; each evaluation then touches
    the d-dimensional data only in h = (x+p) Q / sqrt(d) (and its backward pass).  This is an exact
    rewriting, not an approximation, and writing it with T - S (rather than expanding ||y||^2 - ...)
    avoids cancellation between O(d) terms, which matters in float32.
    """

    def __init__(self, data: Dataset, p: torch.Tensor, lam: float, student: str = "tied") -> None:
        self.student = check_student(student)
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

    def data_term(self, W: torch.Tensor) -> torch.Tensor:
        """sum_mu ||y - yhat||_F^2 / (2d)."""
        Q, K = split_weights(W, self.student)
        S = attention_matrix(self.z, Q, None if self.student == "tied" else K)
        D = self.T - S
        sq = ((D @ self.Gx) * D).sum() - 2.0 * ((D @ self.Cxp) * S).sum() + ((S @ self.Gp) * S).sum()
        return sq / (2 * self.d)

    def __call__(self, Q: torch.Tensor) -> torch.Tensor:
        """R(Q) (R(Q, K) for W = [Q | K]) as a differentiable torch expression (autograd reference for the
        hand-written gradient)."""
        return self.data_term(Q) + regulariser(Q, self.lam)

    def value_and_grad(self, Q: torch.Tensor) -> tuple[float, torch.Tensor]:
        """R(Q) and its gradient, back-propagated by hand.

        Autograd gives the same numbers (tests check it) but its per-operation overhead dominates at small
        d, where the hand-written pass is ~3x faster; at d ~ 1000 both are limited by reading x + p.
        """
        Q = Q.detach()
        sd = math.sqrt(self.d)
        # one pass over x + p for both projections of the untied student
        hg = self.z @ Q / sd
        if self.student == "tied":
            h = g = hg
        else:
            r = Q.shape[1] // 2
            h, g = hg[..., :r], hg[..., r:]
        S = student_attention(h, g)
        D = self.T - S
        sq = ((D @ self.Gx) * D).sum() - 2.0 * ((D @ self.Cxp) * S).sum() + ((S @ self.Gp) * S).sum()
        R = sq / (2 * self.d) + regulariser(Q, self.lam)
        dS = (S @ self._pz - D @ self._xz) / self.d
        dscores = S * (dS - (S * dS).sum(dim=-1, keepdim=True))  # softmax backward, row-wise
        if self.student == "tied":
            dhg = (dscores + dscores.transpose(-1, -2)) @ h
        else:
            dhg = torch.cat([dscores @ g, dscores.transpose(-1, -2) @ h], dim=-1)
        grad = self.z.reshape(-1, self.d).T @ dhg.reshape(-1, Q.shape[1]) / sd + regulariser_grad(Q, self.lam)
        return float(R), grad

    def autograd_value_and_grad(self, Q: torch.Tensor) -> tuple[float, torch.Tensor]:
        Qv = Q.detach().requires_grad_(True)
        R = self(Qv)
        (g,) = torch.autograd.grad(R, Qv)
        return float(R.detach()), g
