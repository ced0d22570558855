"""Random proximal problems drawn the way the channel draws them (for tests, start measurements, benchmarks).

w_l = q^{1/2} xi_l + m_l, teacher fields correlated with xi, T = (1 - omega) softmax(h* h*^T) + omega A with
A = (1 - a) I + (a / L) 1 1^T, V = v I_r.  Parameters that the fixed point would set (q, m, V, the teacher
correlation) are drawn per problem from the ranges met in practice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.problem import teacher_attention


@dataclass
class ProxProblem:
    w: np.ndarray  # (n, L, r)
    T: np.ndarray  # (n, L, L)
    Vinv: np.ndarray  # (r, r)
    sigma2: float
    q: float
    m: float
    V: float
    corr: float


def draw_problem(L: int, r: int, n: int, seed: int, *, q: float | None = None, m: float | None = None,
                 V: float | None = None, corr: float | None = None, omega: float = 0.3, a: float = 0.8,
                 sigma2: float = 0.25) -> ProxProblem:
    """n points of one channel-like problem; unspecified parameters drawn uniformly from q in [0.02, 1],
    m in [0, 0.5], V in [10, 30], teacher correlation in [0, 0.9]."""
    rng = np.random.default_rng(seed)
    q = float(rng.uniform(0.02, 1.0)) if q is None else q
    m = float(rng.uniform(0.0, 0.5)) if m is None else m
    V = float(rng.uniform(10.0, 30.0)) if V is None else V
    corr = float(rng.uniform(0.0, 0.9)) if corr is None else corr
    # Positional means: a fixed random pattern of norm m per token (antipodal for L = 2 in the study).
    mdir = rng.normal(size=(L, r))
    mdir /= np.linalg.norm(mdir, axis=1, keepdims=True)
    xi = rng.normal(size=(n, L, r))
    eta = rng.normal(size=(n, L, 1))
    w = np.sqrt(q) * xi + m * mdir
    sig = np.sqrt(sigma2)
    hs = sig * (corr * xi[:, :, :1] + np.sqrt(1.0 - corr**2) * eta)
    A = (1.0 - a) * np.eye(L) + (a / L) * np.ones((L, L))
    if L == 2:
        A = np.array([[0.6, 0.4], [0.4, 0.6]])
    T = teacher_attention(hs, omega, A)
    return ProxProblem(w=w, T=T, Vinv=np.eye(r) / V, sigma2=sigma2, q=q, m=m, V=V, corr=corr)
