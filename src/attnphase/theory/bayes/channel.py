"""The effective output channel of the Bayes-optimal problem: block sign retrieval (docs/bayes.md).

For omega < 1 the labels y of one sample determine the teacher's attention T, hence the fields h*_l up to one
global sign (see :mod:`attnphase.theory.bayes.readoff`).  In normalised units w = h* / sigma (so that w_l ~ N(0, 1)
under the prior) the channel of one sample is, for a block of L fields,

    P(y | w) = (1/2) [N(y; w, Delta I_L) + N(y; -w, Delta I_L)],

with Delta = 0 the noiseless model (two Dirac atoms) and Delta > 0 the noisy variant (Gaussian noise of variance
Delta sigma^2 on the teacher's fields before the softmax, Delta being the noise-to-signal ratio).

With w ~ N(omega, V I_L) the channel's partition function and its derivatives are closed forms (W = V + Delta):

    Z_out = (2 pi W)^(-L/2) exp(-(|y|^2 + |omega|^2) / (2 W)) cosh(u),      u = y . omega / W,
    g_out = d log Z_out / d omega = (y tanh u - omega) / W,
    d g_out / d omega = (y y^T (1 - tanh^2 u) / W - I) / W.

Averages over the state-evolution law (omega ~ N(0, q I_L), y | omega ~ N(omega, (1 - q + Delta) I_L); the
sign of y is irrelevant because Z_out is even in y) depend on the vectors only through r = |omega| and the
component y_par of y along omega: the L - 1 orthogonal components of y are N(0, W) and independent of u.
They are computed with a product rule: piecewise Gauss-Legendre in r (chi density; a piece [0, 8 sqrt(W)] resolves
the thin region where the block's sign is uncertain as W -> 0) times Gauss-Hermite in the noise of y_par.  The
error estimate is the difference to a rule of 3/4 the order.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import gammaln

from attnphase.errors import InputError
from attnphase.theory.model.quadrature import gauss_hermite

# Orders of the radial (Laguerre) and Gaussian (Hermite) rules; the error estimate uses 3/4 of both.
N_RADIAL = 64  # per radial piece (two pieces)
N_GAUSS = 96
# Below this variance W = 1 - q + Delta the noiseless channel is treated as perfectly recovered (q = 1).
W_MIN = 1e-13


def check_block(L: int) -> int:
    """The channel's block size (tokens per sample): an integer >= 1 (L = 1 is phase retrieval)."""
    from attnphase.setting import check_int

    return check_int("L", L, 1)


def check_delta(delta: float) -> float:
    """The noise-to-signal ratio of the noisy variant: a finite number >= 0 (0: noiseless)."""
    from attnphase.setting import check_number

    x = check_number("delta", delta)
    if x < 0:
        raise InputError(f"delta must be >= 0, got {x:g}")
    return x


def check_overlap(q: float) -> float:
    from attnphase.setting import check_number

    x = check_number("q", q)
    if not 0.0 <= x <= 1.0:
        raise InputError(f"q must lie in [0, 1], got {x:g}")
    return x


# ------------------------------------------------------------------------------------------ pointwise forms


def log_z_out(y: np.ndarray, omega: np.ndarray, V: np.ndarray | float, delta: float = 0.0) -> np.ndarray:
    """log Z_out for blocks y, omega of shape (..., L) and variance V (scalar or shape (...))."""
    W = np.asarray(V, dtype=float) + delta
    L = y.shape[-1]
    u = np.sum(y * omega, axis=-1) / W
    au = np.abs(u)
    logcosh = au + np.log1p(np.exp(-2.0 * au)) - np.log(2.0)
    return -0.5 * L * np.log(2 * np.pi * W) - (np.sum(y**2, -1) + np.sum(omega**2, -1)) / (2 * W) + logcosh


def g_out(y: np.ndarray, omega: np.ndarray, V: np.ndarray | float, delta: float = 0.0) -> np.ndarray:
    """g_out = (y tanh(u) - omega) / W, shape (..., L)."""
    W = np.asarray(V, dtype=float) + delta
    u = np.sum(y * omega, axis=-1) / W
    return (y * np.tanh(u)[..., None] - omega) / np.asarray(W)[..., None]


def dg_out_diag(y: np.ndarray, omega: np.ndarray, V: np.ndarray | float, delta: float = 0.0) -> np.ndarray:
    """Diagonal of d g_out / d omega: (y_l^2 (1 - tanh^2 u) / W - 1) / W, shape (..., L)."""
    W = np.asarray(V, dtype=float) + delta
    u = np.sum(y * omega, axis=-1) / W
    sech2 = 1.0 / np.cosh(np.clip(u, -350, 350)) ** 2
    Wb = np.asarray(W)[..., None]
    return (y**2 * sech2[..., None] / Wb - 1.0) / Wb


# ------------------------------------------------------------------------------------ state-evolution averages


@lru_cache(maxsize=16)
def _legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.polynomial.legendre.leggauss(n)


def _radial_rule(q: float, W: float, L: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes r and weights for E[f(|omega|)], omega ~ N(0, q I_L): Gauss-Legendre on [0, r_c] and [r_c, r_max]
    with r_c = 8 sqrt(W) (the region |omega| ~ sqrt(W) where the sign of the block is uncertain, which becomes
    thin as W -> 0) and r_max = sqrt(q) (sqrt(L) + 10) (the chi distribution's tail beyond is below e^-50)."""
    x, w = _legendre(n)
    r_max = np.sqrt(q) * (np.sqrt(L) + 10.0)
    r_c = min(8.0 * np.sqrt(W), r_max)
    pieces = [(0.0, r_c)] + ([(r_c, r_max)] if r_max > r_c * (1 + 1e-12) else [])
    nodes, weights = [], []
    for a, b in pieces:
        nodes.append(0.5 * (b - a) * x + 0.5 * (a + b))
        weights.append(0.5 * (b - a) * w)
    r = np.concatenate(nodes)
    wr = np.concatenate(weights)
    # chi density of r / sqrt(q) with L degrees of freedom, in log form (no overflow for large L)
    t = r / np.sqrt(q)
    with np.errstate(divide="ignore"):
        logpdf = (L - 1) * np.log(t) - 0.5 * t**2 - (0.5 * L - 1) * np.log(2.0) - gammaln(0.5 * L)
    dens = np.where(t > 0, np.exp(logpdf), 1.0 / np.sqrt(np.pi / 2) if L == 1 else 0.0) / np.sqrt(q)
    return r, wr * dens


def _points(q: float, L: int, delta: float, n_r: int, n_g: int):
    W = 1.0 - q + delta
    r, wr = _radial_rule(q, W, L, n_r)
    z, wz = gauss_hermite(n_g)
    r = r[:, None]
    ypar = r + np.sqrt(W) * z[None, :]
    u = r * ypar / W
    w = wr[:, None] * wz[None, :]
    return r, ypar, u, w, W


def _mean_g2(q: float, L: int, delta: float, n_r: int, n_g: int) -> float:
    if q == 0.0:
        return 0.0  # omega = 0: g_out = 0
    r, ypar, u, w, W = _points(q, L, delta, n_r, n_g)
    t = np.tanh(u)
    par = (ypar * t - r) ** 2 / W**2
    perp = (L - 1) * t**2 / W
    return float(np.sum(w * (par + perp)))


def _mean_logcosh(q: float, L: int, delta: float, n_r: int, n_g: int) -> float:
    if q == 0.0:
        return 0.0  # u = 0
    _, _, u, w, _ = _points(q, L, delta, n_r, n_g)
    au = np.abs(u)
    return float(np.sum(w * (au + np.log1p(np.exp(-2.0 * au)) - np.log(2.0))))


def mean_g2(q: float, L: int = 2, delta: float = 0.0, with_error: bool = False):
    """E ||g_out||^2 at overlap q (the state evolution's q_hat / alpha); with_error: (value, error estimate)."""
    q, L, delta = check_overlap(q), check_block(L), check_delta(delta)
    if 1.0 - q + delta < W_MIN:
        return (np.inf, 0.0) if with_error else np.inf
    v = _mean_g2(q, L, delta, N_RADIAL, N_GAUSS)
    if not with_error:
        return v
    c = _mean_g2(q, L, delta, 3 * N_RADIAL // 4, 3 * N_GAUSS // 4)
    return v, abs(v - c)


def psi_out(q: float, L: int = 2, delta: float = 0.0, with_error: bool = False):
    """Psi_out(q) = E log Z_out(y, sqrt(q) xi, 1 - q) under the Bayes-optimal law (normalised units).

    E |y|^2 = L (1 + delta), E |omega|^2 = L q, so only E log cosh(u) is integrated."""
    q, L, delta = check_overlap(q), check_block(L), check_delta(delta)
    W = 1.0 - q + delta
    if W < W_MIN:
        return (np.inf, 0.0) if with_error else np.inf
    base = -0.5 * L * np.log(2 * np.pi * W) - L * (1.0 + delta + q) / (2 * W)
    v = base + _mean_logcosh(q, L, delta, N_RADIAL, N_GAUSS)
    if not with_error:
        return v
    c = base + _mean_logcosh(q, L, delta, 3 * N_RADIAL // 4, 3 * N_GAUSS // 4)
    return v, abs(v - c)
