"""State evolution of the Bayes-optimal estimator (and of GAMP) for the block sign-retrieval channel.

Normalised units (docs/bayes.md): the prior Q* ~ N(0, I_d) and the design rows x_l / (sigma sqrt(d)), so that the
fields w_l = h*_l / sigma are N(0, 1); q in [0, 1] is the overlap of the posterior mean with the teacher
(q = E[Q^_post . Q*] / d = |Q^_post|^2 / d; the package's theta = sigma^2 q).  With n = alpha d samples of L fields:

    q_hat = alpha E ||g_out||^2 (q),        q = q_hat / (1 + q_hat)           (Gaussian prior, rho = 1)

and the replica free entropy at its extremum over q_hat, as a function of q alone (the Gaussian prior's part is
a closed form):

    phi(q; alpha) = (q + log(1 - q)) / 2 + alpha Psi_out(q).

The fixed points are the roots of alpha(q) = alpha with alpha(q) = q / ((1 - q) E||g_out||^2(q)): the map moves q
up where alpha > alpha(q), so a root is stable (a local maximum of phi(q)) iff alpha(q) increases through it, and
the iteration from q -> 0+ stops at the first root.  alpha(q) is tabulated once per (L, delta) on a grid dense near q = 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.optimize import brentq

from attnphase.setting import check_alpha, check_int, check_number
from attnphase.theory.bayes.channel import W_MIN, check_block, check_delta, check_overlap, mean_g2, psi_out

# Tabulation grid of alpha(q): linear on [Q_MIN, 0.99], then 1 - q log-spaced down to 1e-10.
Q_MIN = 1e-7
Q_TOP = 1.0 - 1e-10
XTOL = 1e-12


def se_map(q: float, alpha: float, L: int = 2, delta: float = 0.0) -> float:
    """One step of state evolution: q -> q_hat / (1 + q_hat), q_hat = alpha E||g_out||^2(q)."""
    alpha = check_alpha(alpha)
    if 1.0 - q + delta < W_MIN:
        return 1.0
    qhat = alpha * mean_g2(q, L, delta)
    return float(qhat / (1.0 + qhat))


def q_hat(q: float, alpha: float, L: int = 2, delta: float = 0.0) -> float:
    return float(check_alpha(alpha) * mean_g2(q, L, delta))


def alpha_of_q(q: float, L: int = 2, delta: float = 0.0) -> float:
    """The alpha at which q is a fixed point: q / ((1 - q) E||g_out||^2(q)); at q -> 0 it tends to the weak
    recovery threshold (1 + delta)^2 / (L (L + 1)), at q -> 1 (delta = 0) to 1 / L."""
    q = check_overlap(q)
    if q == 0.0:
        return alpha_weak_value(L, delta)
    if 1.0 - q + delta < W_MIN:
        return 1.0 / check_block(L)
    return float(q / ((1.0 - q) * mean_g2(q, L, delta)))


def alpha_weak_value(L: int, delta: float = 0.0) -> float:
    """Linearisation at q = 0: E||g_out||^2 = q L (L + 1) / (1 + delta)^2 + O(q^2)."""
    L, delta = check_block(L), check_delta(delta)
    return (1.0 + delta) ** 2 / (L * (L + 1.0))


def free_entropy(q: float, alpha: float, L: int = 2, delta: float = 0.0) -> float:
    """phi(q; alpha) = (q + log(1 - q)) / 2 + alpha Psi_out(q), normalised units (fields h* / sigma).  At q = 1
    (delta = 0) it is +inf for alpha L > 1, -inf for alpha L < 1 (phi ~ (1 - alpha L) / 2 log(1 - q))."""
    q, alpha = check_overlap(q), check_alpha(alpha)
    if q >= 1.0:
        if delta > 0:
            return -np.inf
        return np.inf if alpha * L >= 1 else -np.inf
    return float(0.5 * (q + np.log1p(-q)) + alpha * psi_out(q, L, delta))


@lru_cache(maxsize=64)
def _table(L: int, delta: float) -> tuple[np.ndarray, np.ndarray]:
    qs = np.concatenate([np.linspace(Q_MIN, 0.99, 300)[:-1], 1.0 - np.logspace(-2, -10, 81)])
    a = np.array([q / ((1.0 - q) * mean_g2(float(q), L, delta)) for q in qs])
    qs.setflags(write=False)
    a.setflags(write=False)
    return qs, a


def alpha_curve(L: int = 2, delta: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The tabulated (q, alpha(q)) (read-only arrays): every fixed point of every alpha lies on it."""
    return _table(check_block(L), check_delta(delta))


@dataclass(frozen=True)
class SEFixedPoint:
    q: float
    stable: bool
    free_entropy: float


def fixed_points(alpha: float, L: int = 2, delta: float = 0.0) -> list[SEFixedPoint]:
    """Every fixed point of the state evolution at alpha, ascending in q (q = 0 always; q = 1 for delta = 0),
    with its stability and free entropy."""
    alpha, L, delta = check_alpha(alpha), check_block(L), check_delta(delta)
    qs, a = _table(L, delta)
    out = [SEFixedPoint(0.0, alpha < alpha_weak_value(L, delta), free_entropy(0.0, alpha, L, delta))]
    f = a - alpha
    for i in np.flatnonzero(np.sign(f[:-1]) != np.sign(f[1:])):
        root = brentq(lambda q: alpha_of_q(q, L, delta) - alpha, qs[i], qs[i + 1], xtol=XTOL)
        out.append(SEFixedPoint(float(root), bool(f[i] < 0 < f[i + 1]), free_entropy(root, alpha, L, delta)))
    if delta == 0.0:
        # q = 1 attracts iff alpha >= 1/L (marginal at equality, where the lower branch reaches it for L >= 2).
        out.append(SEFixedPoint(1.0, alpha * L >= 1.0, free_entropy(1.0, alpha, L, delta)))
    return out


def bayes_overlap(alpha: float, L: int = 2, delta: float = 0.0) -> float:
    """The Bayes-optimal overlap: the stable fixed point (a local maximum of phi(q)) of largest free entropy."""
    return best_fixed_point(fixed_points(alpha, L, delta)).q


def best_fixed_point(fps: list[SEFixedPoint]) -> SEFixedPoint:
    """The global maximum of phi(q) among the fixed points: a stable one (phi'(q) > 0 iff the map moves q up)."""
    stable = [p for p in fps if p.stable] or fps
    return max(stable, key=lambda p: p.free_entropy)


def amp_overlap(alpha: float, L: int = 2, delta: float = 0.0) -> float:
    """Where state evolution from q -> 0+ ends (what GAMP from an uninformative start reaches): the first fixed
    point q > 0 whose left neighbourhood the map pushes up; 0 below the weak-recovery threshold."""
    fps = fixed_points(alpha, L, delta)
    if fps[0].stable:
        return 0.0
    for p in fps[1:]:
        if p.stable:
            return p.q
    return fps[-1].q


def iterate(alpha: float, q0: float, n_iter: int = 100, L: int = 2, delta: float = 0.0,
            tol: float = 1e-12) -> np.ndarray:
    """The state-evolution iterates q_0 = q0, q_1, ... (stops early when |q_{t+1} - q_t| < tol or q reaches 1)."""
    alpha, q0 = check_alpha(alpha), check_overlap(q0)
    n_iter = check_int("n_iter", n_iter, 0)
    tol = check_number("tol", tol)
    out = [q0]
    q = q0
    for _ in range(n_iter):
        q_new = se_map(q, alpha, L, delta)
        out.append(q_new)
        if abs(q_new - q) < tol or q_new >= 1.0:
            break
        q = q_new
    return np.array(out)
