"""The linear positional baseline yhat = B x (see docs/model.md).

With L^2 parameters it reaches its population optimum B = E[T] at any alpha > 0 as d -> infinity, so
    test_error_linear = (1/2) sum_{l,k} sigma^2 Var(T_lk) = (1/2)(1 - omega)^2 sigma^2 sum_{l,k} Var(softmax(h* h*^T)_lk)
(T is affine in the softmax, attnphase.problem.teacher_from_softmax)
with h*_l iid N(0, rho I_{r*}).  For L = 2, r* = 1 each row is (s, 1 - s), so the sum is 2 Var(S_11) + 2 Var(S_22),
a two-dimensional integral done by a tensor Gauss-Hermite rule (error: 80- vs 60-point rules).  Otherwise the
L r*-dimensional integral is done with scrambled Sobol points (error: spread over scramblings).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.errors import InputTypeError
from attnphase.problem import teacher_from_softmax, teacher_softmax
from attnphase.setting import Setting
from attnphase.theory.model.quadrature import gauss_hermite_grid, gaussian_sobol


@dataclass(frozen=True)
class LinearBaseline:
    omega: float
    test_error_linear: float
    error: float  # quadrature error estimate (difference between two Gauss-Hermite orders)
    mean_attention: np.ndarray  # E[T], the matrix B converges to

    def to_dict(self) -> dict:
        return {"omega": self.omega, "test_error_linear": self.test_error_linear, "test_error_linear_err": self.error,
                "mean_attention": self.mean_attention.tolist()}


def _moments(n: int, rho: float) -> tuple[float, float, float, float]:
    z, w = gauss_hermite_grid(n, 2)
    S = teacher_softmax(np.sqrt(rho) * z.T[:, :, None])
    s1, s2 = np.ascontiguousarray(S[:, 0, 0]), np.ascontiguousarray(S[:, 1, 1])  # BLAS dot: contiguous, as before
    m1, m2 = float(w @ s1), float(w @ s2)
    return m1, m2, float(w @ s1**2) - m1**2, float(w @ s2**2) - m2**2


def _general(setting: Setting, log2_n: int = 16, replicas: int = 8) -> LinearBaseline:
    L, rs = setting.L, setting.r_star
    vals, means = [], []
    for k in range(replicas):
        z = gaussian_sobol(log2_n, L * rs, 4241 + k)
        hs = np.sqrt(setting.rho) * z.T.reshape(-1, L, rs)
        S = teacher_softmax(hs)
        mean = S.mean(axis=0)
        var = (S**2).mean(axis=0) - mean**2
        vals.append(0.5 * (1 - setting.omega) ** 2 * setting.sigma**2 * float(var.sum()))
        means.append(mean)
    v = np.array(vals)
    ET = teacher_from_softmax(np.mean(means, axis=0), setting.omega, setting.A_array)
    return LinearBaseline(omega=setting.omega, test_error_linear=float(v.mean()),
                          error=float(v.std(ddof=1) / np.sqrt(replicas)), mean_attention=ET)


def linear_baseline(setting: Setting) -> LinearBaseline:
    """Asymptotic test error of the linear positional baseline and E[T]."""
    if not isinstance(setting, Setting):
        raise InputTypeError("setting must be an attnphase.Setting")
    if not (setting.L == 2 and setting.r_star == 1):
        return _general(setting)
    sigma2 = setting.sigma**2
    omega = setting.omega

    def te(n: int) -> tuple[float, np.ndarray]:
        m1, m2, v1, v2 = _moments(n, setting.rho)
        value = (1 - omega) ** 2 * sigma2 * (v1 + v2)  # (1/2) * 2 (v1 + v2)
        soft = np.array([[m1, 1 - m1], [1 - m2, m2]])
        return value, teacher_from_softmax(soft, omega, setting.A_array)

    fine, ET = te(80)
    coarse, _ = te(60)
    return LinearBaseline(omega=omega, test_error_linear=fine, error=abs(fine - coarse), mean_attention=ET)
