"""The linear positional baseline yhat = B x (MODEL.md section 4).

With L^2 parameters it reaches its population optimum B = E[T] at any alpha > 0 as d -> infinity, so
    test_error_linear = (1/2) sum_{l,k} sigma^2 Var(T_lk) = (1/2)(1 - omega)^2 sigma^2 sum_{l,k} Var(softmax(h* h*^T)_lk)
with h*_l iid N(0, rho).  For L = 2 each row is (s, 1 - s), so the sum is 2 Var(S_11) + 2 Var(S_22).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from attnphase.setting import Setting
from attnphase.theory.quadrature import gauss_hermite_grid


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
    h1 = np.sqrt(rho) * z[0]
    h2 = np.sqrt(rho) * z[1]
    s1 = expit(h1 * (h1 - h2))
    s2 = expit(h2 * (h2 - h1))
    m1, m2 = float(w @ s1), float(w @ s2)
    return m1, m2, float(w @ s1**2) - m1**2, float(w @ s2**2) - m2**2


def linear_baseline(setting: Setting) -> LinearBaseline:
    """Asymptotic test error of the linear positional baseline and E[T]."""
    if setting.L != 2:
        raise ValueError(f"the linear baseline closed form is implemented for L = 2, got L = {setting.L}")
    sigma2 = setting.sigma**2
    omega = setting.omega

    def te(n: int) -> tuple[float, np.ndarray]:
        m1, m2, v1, v2 = _moments(n, setting.rho)
        value = (1 - omega) ** 2 * sigma2 * (v1 + v2)  # (1/2) * 2 (v1 + v2)
        soft = np.array([[m1, 1 - m1], [1 - m2, m2]])
        return value, (1 - omega) * soft + omega * setting.A_array

    fine, ET = te(80)
    coarse, _ = te(60)
    return LinearBaseline(omega=omega, test_error_linear=fine, error=abs(fine - coarse), mean_attention=ET)
