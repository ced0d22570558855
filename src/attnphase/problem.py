"""The model, written once (docs/model.md): teacher attention, student attention, the loss and the regulariser.

    fields      h_l = Q^T z_l / sqrt(d)                       (z = x + p for the student, x for the teacher)
    scores      s_lk = h_l . g_k                              (g = h: tied; g_k = K^T z_k / sqrt(d): untied)
    student     S = softmax_k(s_lk)
    teacher     T = (1 - omega) softmax_k(h*_l . h*_k) + omega A
    loss        l(h, h*) = (sigma^2 / 2) sum_{l,k} (S_lk - T_lk)^2        (high-dimensional, per sample)
    regulariser (lambda / 2) ||Q||_F^2

Every Python-side user reads these functions: the finite-d simulations and their sampler (torch tensors), the
state evolution's integrands, the test error, the baseline, Bayes and GAMP (numpy arrays).  The functions take
either kind of array and return the same kind: the few operations where numpy and torch differ (the row softmax,
the batched score product) dispatch on the array's type, each to the implementation its users always had, so that
every number is what it was.  The numba kernels of theory/prox keep a compiled copy of the teacher and the loss
(tests/test_problem.py holds them equal to these).  Adding a teacher or a loss means changing this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnphase.setting import Setting

Array = Any  # a numpy array or a torch tensor


def _is_torch(x: Array) -> bool:
    # No torch import here: theory runs without it; a tensor's type names its module.
    return type(x).__module__.startswith("torch")


# Rows up to this length are reduced token by token (numpy adds a row this short in the same order).
_SHORT_ROW = 7


def softmax_rows(scores: Array) -> Array:
    """Row-wise softmax over the last axis, overflow-safe (numpy: subtract the row maximum; torch: torch.softmax)."""
    if _is_torch(scores):
        return scores.softmax(dim=-1)
    L = scores.shape[-1]
    if L > _SHORT_ROW:
        s = scores - scores.max(axis=-1, keepdims=True)
        e = np.exp(s)
        return e / e.sum(axis=-1, keepdims=True)
    # Short rows: numpy reduces a short last axis element by element (8 ms for 32768 3 x 3 matrices); the same
    # maximum and the same sequential sum, token by token, take a third of that and give the same numbers, bitwise.
    m = scores[..., 0]
    for k in range(1, L):
        m = np.maximum(m, scores[..., k])
    e = np.exp(scores - m[..., None])
    tot = e[..., 0].copy()
    for k in range(1, L):
        tot += e[..., k]
    return e / tot[..., None]


def scores(h: Array, g: Array | None = None) -> Array:
    """Score matrices s_lk = h_l . g_k (g = h when None): h, g (..., L, r) -> (..., L, L)."""
    g = h if g is None else g
    if _is_torch(h):
        return h @ g.transpose(-1, -2)
    if h.shape[-1] == 2:
        # einsum runs a rank-2 contraction element by element (4.6 ms for 32768 pairs of 2 x 2 fields); the two
        # products added are its numbers, bitwise, in a ninth of the time.  (Other ranks: einsum's order differs.)
        return h[..., :, None, 0] * g[..., None, :, 0] + h[..., :, None, 1] * g[..., None, :, 1]
    return np.einsum("...lr,...kr->...lk", h, g)


def fields(z: Array, Q: Array) -> Array:
    """h_l = Q^T z_l / sqrt(d) for tokens z (..., L, d) and Q (d, r): (..., L, r)."""
    return z @ Q / math.sqrt(z.shape[-1])


def student_attention(h: Array, g: Array | None = None) -> Array:
    """S = softmax_k(h_l . g_k); g = None is the tied student (g = h)."""
    return softmax_rows(scores(h, g))


def _two_token_softmax(h: np.ndarray) -> np.ndarray:
    """softmax of h h^T for two tokens: each row is (s, 1 - s), s the logistic of a score difference (numpy;
    cheaper than the general softmax and overflow-safe; the two-token kernel computes the same expit)."""
    from scipy.special import expit  # here: `import attnphase` stays numpy-only

    if h.shape[-1] == 1:
        h1, h2 = h[..., 0, 0], h[..., 1, 0]
        u1, u2 = h1 * (h1 - h2), h2 * (h2 - h1)
    else:
        sc = scores(h)
        u1, u2 = sc[..., 0, 0] - sc[..., 0, 1], sc[..., 1, 1] - sc[..., 1, 0]
    s1, s2 = expit(u1), expit(u2)
    S = np.empty(h.shape[:-2] + (2, 2))
    S[..., 0, 0], S[..., 0, 1], S[..., 1, 1], S[..., 1, 0] = s1, 1.0 - s1, s2, 1.0 - s2
    return S


def teacher_softmax(hstar: Array) -> Array:
    """The teacher's softmax_k(h*_l . h*_k) for teacher fields h* (..., L, r*): (..., L, L)."""
    if not _is_torch(hstar) and hstar.shape[-2] == 2:
        return _two_token_softmax(hstar)
    return student_attention(hstar)


def teacher_from_softmax(S: Array, omega: float, A: Array) -> Array:
    """T = (1 - omega) S + omega A.  Linear in S, so E[T] = teacher_from_softmax(E[S]) (the baseline's B, the
    Bayes posterior's prediction)."""
    if _is_torch(S):
        A = S.new_tensor(np.asarray(A, dtype=np.float64).tolist())
    else:
        A = np.asarray(A)
    return (1.0 - omega) * S + omega * A


def softmax_from_teacher(T: Array, omega: float, A: Array) -> Array:
    """The inverse of teacher_from_softmax, S = (T - omega A) / (1 - omega), numpy (omega < 1: at omega = 1 T = A)."""
    return (T - omega * np.asarray(A)) / (1.0 - omega)


def teacher_attention(hstar: Array, omega: float, A: Array) -> Array:
    """T = (1 - omega) softmax_k(h*_l . h*_k) + omega A for teacher fields h* (..., L, r*): (..., L, L)."""
    return teacher_from_softmax(teacher_softmax(hstar), omega, A)


def loss(S: Array, T: Array, sigma2: float) -> Array:
    """l = (sigma^2 / 2) sum_{l,k} (S_lk - T_lk)^2 per sample: S, T (..., L, L) -> (...)."""
    E = S - T
    if _is_torch(E):
        return 0.5 * sigma2 * (E * E).sum(dim=(-2, -1))
    return 0.5 * sigma2 * np.einsum("...lk,...lk->...", E, E)


def loss_and_grad(h: np.ndarray, T: np.ndarray, sigma2: float) -> tuple[np.ndarray, np.ndarray]:
    """The tied student's loss l(softmax(h h^T), T) and its gradient with respect to h (..., L, r), numpy.

    dl/dS = sigma^2 (S - T); through the softmax dl/ds_lk = S_lk (dl/dS_lk - sum_j S_lj dl/dS_lj);
    through s = h h^T, dl/dh = (D + D^T) h with D = dl/ds.
    """
    S = student_attention(h)
    value = loss(S, T, sigma2)
    gS = sigma2 * (S - T)
    D = S * (gS - np.sum(S * gS, axis=-1, keepdims=True))
    grad = np.einsum("...lk,...kr->...lr", D + np.swapaxes(D, -1, -2), h)
    return value, grad


def regulariser(Q: Array, lam: float) -> Array:
    """(lambda / 2) ||Q||_F^2 (for the untied student W = [Q | K]: both factors, each penalised)."""
    return 0.5 * lam * (Q * Q).sum()


def regulariser_grad(Q: Array, lam: float) -> Array:
    """Its gradient lambda Q.  (The state evolution's prior side is this ridge's closed form: theory/model/prior.py.)"""
    return lam * Q


@dataclass(frozen=True)
class Sample:
    """Finite-d data drawn by :meth:`Problem.sample` (numpy): teacher Q* (d, r*), tokens x (n, L, d) and the
    teacher's attention T (n, L, L) for the training and test sets; labels y = T x."""

    Q_star: np.ndarray
    x: np.ndarray
    T: np.ndarray
    x_test: np.ndarray
    T_test: np.ndarray

    @property
    def y(self) -> np.ndarray:
        return self.T @ self.x


@dataclass(frozen=True)
class Problem:
    """The model of a :class:`Setting`: its teacher, student attention, loss and regulariser."""

    setting: Setting

    @property
    def omega(self) -> float:
        return self.setting.omega

    @property
    def A(self) -> np.ndarray:
        return self.setting.A_array

    @property
    def sigma2(self) -> float:
        return self.setting.sigma**2

    def teacher_fields(self, x: Array, Q_star: Array) -> Array:
        """h*_l = Q*^T x_l / sqrt(d) (the teacher sees the tokens without positional encodings)."""
        return fields(x, Q_star)

    def teacher_attention(self, hstar: Array) -> Array:
        return teacher_attention(hstar, self.omega, self.A)

    def student_attention(self, h: Array, g: Array | None = None) -> Array:
        return student_attention(h, g)

    def loss(self, S: Array, T: Array) -> Array:
        return loss(S, T, self.sigma2)

    def regulariser(self, Q: Array) -> Array:
        return regulariser(Q, self.setting.lam)

    def sample(self, d: int, n: int, n_test: int, seed: int) -> Sample:
        """Q* with iid N(0, 1) entries, n training and n_test test sequences of tokens N(0, sigma^2 I_d), numpy.

        Independent streams (teacher, train, test) from one seed, so that n_test never changes the training set.
        The finite-d simulations draw with torch (experiments.simulation.sampling): same law, other numbers."""
        s = self.setting
        teacher, train, test = (np.random.default_rng(c) for c in np.random.SeedSequence([int(seed), 28]).spawn(3))
        Q_star = teacher.standard_normal((d, s.r_star))
        x = s.sigma * train.standard_normal((n, s.L, d))
        x_test = s.sigma * test.standard_normal((n_test, s.L, d))
        return Sample(Q_star=Q_star, x=x, T=self.teacher_attention(self.teacher_fields(x, Q_star)), x_test=x_test,
                      T_test=self.teacher_attention(self.teacher_fields(x_test, Q_star)))
