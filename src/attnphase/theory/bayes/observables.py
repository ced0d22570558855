"""The Bayes-optimal test error as a function of the overlap q (docs/bayes.md).

The Bayes-optimal prediction of a fresh sample's labels is E[y | x, data] = E[T | x, data] x, so (d -> infinity,
the contract's normalisation: test error = E ||y - yhat||^2 / (2d))

    test_error(q) = (1/2) sigma^2 sum_{l,k} E[Var(T_lk | posterior of the fresh fields)]
                  = (1/2) sigma^2 (1 - omega)^2 sum_{l,k} E_xi Var_eta S_lk(h),
    h_l = sigma (sqrt(q) xi_l + sqrt(1 - q + delta) eta_l),   S = softmax(h h^T) row-wise,

with xi, eta ~ N(0, I_L): given the data the fresh fields are Gaussian with mean sigma sqrt(q) xi and variance
sigma^2 (1 - q) (plus the noisy variant's sigma^2 delta, which the teacher's softmax sees too).  The posterior's
global sign does not matter: T depends on h only through h h^T.  At q = 0 (delta = 0) this is the linear
baseline's error; at q = 1 it is 0.

Integration: nested tensor Gauss-Hermite (outer xi, inner eta; the inner variance is computed directly, no
cancellation as q -> 1) for L <= 4, error = difference to a rule with fewer points; scrambled Sobol points in both
for L > 4, error = spread over scramblings.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from attnphase.errors import InputTypeError
from attnphase.problem import teacher_softmax
from attnphase.setting import Setting
from attnphase.theory.bayes.channel import check_delta, check_overlap
from attnphase.theory.model.quadrature import gauss_hermite_grid, gaussian_sobol

# Points per dimension of the nested rule by L (outer = inner), and of the rule giving the error estimate.
GH_ORDER = {1: (40, 30), 2: (24, 18), 3: (10, 8), 4: (6, 5)}
CHUNK = 2_000_000  # score matrices evaluated at once


def _scores_softmax(h: np.ndarray) -> np.ndarray:
    """The teacher's softmax at scalar fields h (..., L) (rank-1 teacher)."""
    return teacher_softmax(h[..., None])


def _nested_gh(q: float, L: int, sigma: float, delta: float, n: int) -> float:
    xo, wo = gauss_hermite_grid(n, L)
    xi, wi = gauss_hermite_grid(n, L)
    a, b = sigma * np.sqrt(q), sigma * np.sqrt(max(1.0 - q + delta, 0.0))
    per = max(1, CHUNK // xi.shape[1])
    total = 0.0
    for s in range(0, xo.shape[1], per):
        h = a * xo[:, s:s + per].T[:, None, :] + b * xi.T[None, :, :]  # (outer, inner, L)
        S = _scores_softmax(h)
        mean = np.einsum("j,ojlk->olk", wi, S)
        var = np.einsum("j,ojlk->o", wi, (S - mean[:, None]) ** 2)
        total += float(wo[s:s + per] @ var)
    return total


def _nested_sobol(q: float, L: int, sigma: float, delta: float, seed: int) -> float:
    xo = gaussian_sobol(10, L, 7001 + seed).T
    xi = gaussian_sobol(9, L, 9001 + seed).T
    a, b = sigma * np.sqrt(q), sigma * np.sqrt(max(1.0 - q + delta, 0.0))
    total = 0.0
    per = max(1, CHUNK // xi.shape[0])
    for s in range(0, xo.shape[0], per):
        S = _scores_softmax(a * xo[s:s + per, None, :] + b * xi[None, :, :])
        total += float(np.sum(S.var(axis=1, ddof=1)))
    return total / xo.shape[0]


def softmax_variance(q: float, L: int, sigma: float, delta: float = 0.0) -> tuple[float, float]:
    """sum_{l,k} E_xi Var_eta S_lk (see the module docstring) and an error estimate."""
    return _softmax_variance(check_overlap(q), int(L), float(sigma), check_delta(delta))


@lru_cache(maxsize=256)
def _softmax_variance(q: float, L: int, sigma: float, delta: float) -> tuple[float, float]:
    if L < 2:
        return 0.0, 0.0  # softmax over one token is 1
    if q >= 1.0 and delta == 0.0:
        return 0.0, 0.0
    if L in GH_ORDER:
        n, m = GH_ORDER[L]
        v = _nested_gh(q, L, sigma, delta, n)
        return v, abs(v - _nested_gh(q, L, sigma, delta, m))
    vals = np.array([_nested_sobol(q, L, sigma, delta, k) for k in range(4)])
    return float(vals.mean()), float(vals.std(ddof=1) / 2.0)


def bayes_test_error(setting: Setting, q: float, delta: float = 0.0) -> tuple[float, float]:
    """(test error, error estimate) of the Bayes-optimal predictor at overlap q, in the contract's units."""
    if not isinstance(setting, Setting):
        raise InputTypeError("setting must be an attnphase.Setting")
    pref = 0.5 * setting.sigma**2 * (1.0 - setting.omega) ** 2
    if pref == 0.0:
        return 0.0, 0.0
    v, e = softmax_variance(q, setting.L, setting.sigma, delta)
    return pref * v, pref * e
