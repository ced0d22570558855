"""The d -> infinity drifts of online SGD on the overlaps (q, m, theta): Gaussian averages over the fields.

One step on a fresh sample, Q <- Q - lr (grad_Q l + (lambda / d) Q), moves the overlaps by O(lr / d); in the time
t = samples / d they follow (docs/dynamics.md)

    dm/dt     = -lr [ G E[g] + sigma^2 m Hsum + lambda m ]
    dtheta/dt = -lr [ sigma^2 B + lambda theta ]
    dq/dt     = -lr [ sigma^2 (E[g]^T m + m^T E[g] + A + A^T) + 2 lambda q ] + lr^2 sigma^4 N

with g_l = dl/dh_l and, summed over tokens k,
    A = sum_k E[g_k (h_k - m_k)^T],  B = sum_k E[g_k h*_k^T],  Hsum = sum_k E[d^2 l / dh_k dh_k],  N = sum_k E[g_k g_k^T].
The fields: h*_l = sigma eta_l, h_l = m_l + (theta / sigma) eta_l + (q - theta theta^T / sigma^2)^{1/2} xi_l
(rho = sigma^2 I; this square root exists wherever the overlaps are realisable, q -> 0 included).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from attnphase.problem import teacher_attention as target_attention
from attnphase.setting import Setting
from attnphase.theory.dynamics._two_token_kernel import two_token_averages
from attnphase.theory.dynamics.local import loss_grad_hessdiag
from attnphase.theory.model.loss import target_diagonal
from attnphase.theory.model.quadrature import gauss_hermite_grid, gaussian_sobol
from attnphase.theory.solvers.fixed_point import Inadmissible

# Gauss-Hermite order per dimension where the fields live in at most GH_MAX_DIM dimensions (the study: 4).  The
# student's logistic sharpens as q grows, so the order grows with q (GH_SCHEDULE: (largest q / sigma^2, order));
# measured against order 40 (docs/dynamics.md): relative error of every drift <= 2e-3 up to q / sigma^2 = 8.
GH_ORDER, GH_MAX_DIM = 12, 4
GH_SCHEDULE = ((1.2, 12), (4.0, 20), (8.0, 28))
GH_BEYOND = 28  # past the schedule the same order: the drifts are accurate to ~1e-2 only (Trajectory warns)
# Elsewhere one fixed scrambling of 2^QMC_LOG2 Sobol points: deterministic, so the ODE's right-hand side is smooth.
QMC_LOG2, QMC_SEED = 15, 4242
# Realisability: q - theta theta^T / sigma^2 may dip below 0 by round-off; beyond this (relative) it is an error.
PSD_TOL = 1e-9


@dataclass(frozen=True, eq=False)
class Rule:
    """Integration points z (dim, n) of standard Gaussians and weights w (n,) summing to 1."""

    z: np.ndarray
    w: np.ndarray
    name: str


@lru_cache(maxsize=16)
def _rule(dim: int, order: int | None, log2_n: int | None) -> Rule:
    if dim <= GH_MAX_DIM and log2_n is None:
        n = GH_ORDER if order is None else order
        z, w = gauss_hermite_grid(n, dim)
        return Rule(z, w, f"gauss-hermite {n}^{dim}")
    k = QMC_LOG2 if log2_n is None else log2_n
    z = gaussian_sobol(k, dim, QMC_SEED)
    w = np.full(z.shape[1], 1.0 / z.shape[1])
    return Rule(z, w, f"sobol 2^{k}")


def integration_rule(setting: Setting, order: int | None = None, log2_n: int | None = None) -> Rule:
    """The rule for this setting's fields (dimension L (r + r*)): Gauss-Hermite of `order` up to 4 dimensions,
    else (or when log2_n is given) one fixed Sobol scrambling of 2^log2_n points."""
    return _rule(setting.L * (setting.r + setting.r_star), order, log2_n)


def rule_for(setting: Setting, q: np.ndarray) -> Rule:
    """The default rule at overlaps with this q: Gauss-Hermite with the order of GH_SCHEDULE (study dimensions), or
    the fixed Sobol rule."""
    if setting.L * (setting.r + setting.r_star) > GH_MAX_DIM:
        return integration_rule(setting)
    x = float(np.max(np.linalg.eigvalsh(q))) / setting.sigma**2
    for top, order in GH_SCHEDULE:
        if x <= top:
            return integration_rule(setting, order)
    return integration_rule(setting, GH_BEYOND)


def field_points(setting: Setting, q: np.ndarray, m: np.ndarray, theta: np.ndarray,
                 rule: Rule) -> tuple[np.ndarray, np.ndarray]:
    """Student fields h (n, L, r) and teacher fields h* (n, L, r*) at the rule's points."""
    L, r, rs = setting.L, setting.r, setting.r_star
    sig = setting.sigma
    n = rule.z.shape[1]
    xi = rule.z[: L * r].T.reshape(n, L, r)
    eta = rule.z[L * r:].T.reshape(n, L, rs)
    R = q - theta @ theta.T / sig**2
    R = 0.5 * (R + R.T)
    vals, vecs = np.linalg.eigh(R)
    scale = max(float(np.abs(q).max()), 1e-300)
    if not np.all(np.isfinite(vals)) or vals.min() < -PSD_TOL * scale:
        raise Inadmissible(f"q - theta theta^T / sigma^2 has eigenvalue {vals.min():.3g} < 0: not realisable")
    Rs = (vecs * np.sqrt(np.clip(vals, 0.0, None))) @ vecs.T
    hstar = sig * eta
    h = m[None] + np.einsum("nlb,ab->nla", eta, theta / sig) + np.einsum("nlb,ab->nla", xi, Rs)
    return h, hstar


@dataclass(frozen=True)
class Averages:
    """The Gaussian averages the drifts need (shapes: E_g L x r, A, Hsum, N r x r, B r x r*) and the test error."""

    test_error: float
    E_g: np.ndarray
    A: np.ndarray
    B: np.ndarray
    Hsum: np.ndarray
    N: np.ndarray


@lru_cache(maxsize=32)
def _two_token_targets(rule: Rule, sigma: float, omega: float, A11: float, A22: float) -> np.ndarray:
    """(T_11, T_22) at the rule's points: the teacher's fields do not depend on the overlaps (h*_l = sigma eta_l)."""
    t1, t2 = target_diagonal(sigma * rule.z[2], sigma * rule.z[3], omega, np.array([[A11, 0.0], [0.0, A22]]))
    out = np.stack([t1, t2])
    out.setflags(write=False)
    return out


def _two_token(setting: Setting, q: np.ndarray, m: np.ndarray, theta: np.ndarray, rule: Rule) -> Averages:
    """L = 2, r = r* = 1: the compiled one-pass kernel (about 10x faster than the array path)."""
    sig = setting.sigma
    th = float(theta[0, 0])
    R = float(q[0, 0]) - th * th / sig**2
    if not np.isfinite(R) or R < -PSD_TOL * max(abs(float(q[0, 0])), 1e-300):
        raise Inadmissible(f"q - theta theta^T / sigma^2 = {R:.3g} < 0: not realisable")
    A = setting.A_array
    t = _two_token_targets(rule, sig, setting.omega, float(A[0, 0]), float(A[1, 1]))
    o = two_token_averages(rule.z, rule.w, t, float(m[0, 0]), float(m[1, 0]), th / sig, np.sqrt(max(R, 0.0)), sig)
    one = lambda v: np.array([[v]])  # noqa: E731
    return Averages(float(o[0]), np.array([[o[1]], [o[2]]]), one(o[3]), one(o[4]), one(o[5]), one(o[6]))


def averages(setting: Setting, q: np.ndarray, m: np.ndarray, theta: np.ndarray, rule: Rule,
             compiled: bool = True) -> Averages:
    """The Gaussian averages at these overlaps (compiled=False: the array path also for L = 2, r = r* = 1)."""
    if compiled and setting.L == 2 and setting.r == 1 and setting.r_star == 1:
        return _two_token(setting, q, m, theta, rule)
    h, hstar = field_points(setting, q, m, theta, rule)
    T = target_attention(hstar, setting.omega, setting.A_array)
    val, g, H = loss_grad_hessdiag(h, T, setting.sigma**2)
    w = rule.w
    E_g = np.einsum("n,nlr->lr", w, g)
    A = np.einsum("n,nla,nlb->ab", w, g, h - m[None])
    B = np.einsum("n,nla,nlb->ab", w, g, hstar)
    Hsum = np.einsum("n,nlab->ab", w, H)
    N = np.einsum("n,nla,nlb->ab", w, g, g)
    return Averages(float(np.sum(w * val)), E_g, A, B, 0.5 * (Hsum + Hsum.T), 0.5 * (N + N.T))


@dataclass(frozen=True)
class Drift:
    """d/dt of the overlaps split by powers of the learning rate: full = lr * first-order + lr^2 * dq2.

    dq1, dm1, dtheta1: the gradient-flow drift per unit lr (minus the chain-rule gradient of the population risk
    plus weight decay); dq2: the coefficient of lr^2 in dq/dt (sigma^4 N, the gradient's second moment)."""

    dq1: np.ndarray
    dm1: np.ndarray
    dtheta1: np.ndarray
    dq2: np.ndarray
    averages: Averages

    def full(self, lr: float, lr2_term: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(dq/dt, dm/dt, dtheta/dt) at learning rate lr (lr2_term=False: without the lr^2 term, gradient flow)."""
        return lr * self.dq1 + (lr**2 * self.dq2 if lr2_term else 0.0), lr * self.dm1, lr * self.dtheta1


def drift(setting: Setting, q: np.ndarray, m: np.ndarray, theta: np.ndarray, rule: Rule | None = None,
          compiled: bool = True) -> Drift:
    """The drift terms at overlaps (q r x r, m L x r, theta r x r*) (see the module docstring)."""
    if rule is None:
        rule = rule_for(setting, q)
    s2, lam, G = setting.sigma**2, setting.lam, setting.gram
    av = averages(setting, q, m, theta, rule, compiled)
    dm1 = -(G @ av.E_g + s2 * m @ av.Hsum + lam * m)
    dth1 = -(s2 * av.B + lam * theta)
    C = av.E_g.T @ m + av.A
    dq1 = -(s2 * (C + C.T) + 2.0 * lam * q)
    dq2 = s2**2 * av.N
    return Drift(dq1, dm1, dth1, dq2, av)
