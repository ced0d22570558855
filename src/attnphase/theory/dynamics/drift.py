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

from attnphase.setting import Setting
from attnphase.theory.dynamics.local import loss_grad_hessdiag
from attnphase.theory.model.attention import target_attention
from attnphase.theory.model.loss import loss_derivatives, target_diagonal
from attnphase.theory.model.quadrature import gauss_hermite_grid, gaussian_sobol
from attnphase.theory.solvers.fixed_point import Inadmissible

# Gauss-Hermite order per dimension where the fields live in at most GH_MAX_DIM dimensions (the study: 4); measured
# in docs/dynamics.md: the drifts at order 12 agree with order 24 to ~1e-7 relative at the study's points.
GH_ORDER, GH_MAX_DIM = 12, 4
# Elsewhere one fixed scrambling of 2^QMC_LOG2 Sobol points: deterministic, so the ODE's right-hand side is smooth.
QMC_LOG2, QMC_SEED = 15, 4242
# Realisability: q - theta theta^T / sigma^2 may dip below 0 by round-off; beyond this (relative) it is an error.
PSD_TOL = 1e-9


@dataclass(frozen=True)
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


def _two_token(setting: Setting, h: np.ndarray, hstar: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """L = 2, r = r* = 1: the logistic closed forms of theory.model.loss (5x faster than the general path)."""
    t1, t2 = target_diagonal(hstar[:, 0, 0], hstar[:, 1, 0], setting.omega, setting.A_array)
    val, g1, g2, H11, _, H22 = loss_derivatives(h[:, 0, 0], h[:, 1, 0], t1, t2, setting.sigma**2)
    g = np.stack([g1, g2], axis=1)[:, :, None]
    H = np.stack([H11, H22], axis=1)[:, :, None, None]
    return val, g, H


def averages(setting: Setting, q: np.ndarray, m: np.ndarray, theta: np.ndarray, rule: Rule) -> Averages:
    h, hstar = field_points(setting, q, m, theta, rule)
    if setting.L == 2 and setting.r == 1 and setting.r_star == 1:
        val, g, H = _two_token(setting, h, hstar)
    else:
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

    def full(self, lr: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(dq/dt, dm/dt, dtheta/dt) at learning rate lr."""
        return lr * self.dq1 + lr**2 * self.dq2, lr * self.dm1, lr * self.dtheta1


def drift(setting: Setting, q: np.ndarray, m: np.ndarray, theta: np.ndarray, rule: Rule | None = None) -> Drift:
    """The drift terms at overlaps (q r x r, m L x r, theta r x r*) (see the module docstring)."""
    if rule is None:
        rule = integration_rule(setting)
    s2, lam, G = setting.sigma**2, setting.lam, setting.gram
    av = averages(setting, q, m, theta, rule)
    dm1 = -(G @ av.E_g + s2 * m @ av.Hsum + lam * m)
    dth1 = -(s2 * av.B + lam * theta)
    C = av.E_g.T @ m + av.A
    dq1 = -(s2 * (C + C.T) + 2.0 * lam * q)
    dq2 = s2**2 * av.N
    return Drift(dq1, dm1, dth1, dq2, av)
