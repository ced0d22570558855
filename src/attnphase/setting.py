"""The problem: a validated, immutable description of the attention model (MODEL.md sections 1-2).

Every number attnphase prints is computed for a :class:`Setting`.  The defaults are the study's
(sigma = 0.5, lambda = 0.01, A = [[0.6, 0.4], [0.4, 0.6]], omega = 0.3, L = 2, r = r* = 1,
p_1 = -p_2 = 1/sqrt(d)).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

STUDY_A = ((0.6, 0.4), (0.4, 0.6))
APPENDIX_A = ((0.3, 0.7), (0.8, 0.2))


def _finite(name: str, value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return x


def check_alpha(alpha: Any) -> float:
    """Validate a sample complexity alpha = n/d (finite, > 0)."""
    a = _finite("alpha", alpha)
    if a <= 0:
        raise ValueError(f"alpha must be > 0, got {a:g}")
    return a


def parse_matrix(text: str) -> tuple[tuple[float, ...], ...]:
    """Parse "a11,a12;a21,a22" into a tuple of rows (no validation of stochasticity here)."""
    rows = [r for r in str(text).strip().split(";")]
    try:
        out = tuple(tuple(float(v) for v in row.split(",")) for row in rows)
    except ValueError:
        raise ValueError(f"A must look like 'a11,a12;a21,a22', got {text!r}") from None
    return out


@dataclass(frozen=True)
class Setting:
    """The model's parameters.  Immutable; build variants with :meth:`replace`.

    omega : weight of the positional part of the target attention, in [0, 1].
    sigma : token standard deviation (x_l ~ N(0, sigma^2 I_d)), > 0.
    lam   : ridge penalty lambda >= 0 on Q (the risk is a sum over samples).
    A     : fixed row-stochastic L x L positional attention matrix.
    """

    omega: float = 0.3
    sigma: float = 0.5
    lam: float = 0.01
    A: tuple[tuple[float, ...], ...] = STUDY_A
    r: int = 1
    r_star: int = 1
    _A_array: np.ndarray = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        omega = _finite("omega", self.omega)
        if not 0.0 <= omega <= 1.0:
            raise ValueError(f"omega must lie in [0, 1], got {omega:g}")
        sigma = _finite("sigma", self.sigma)
        if sigma <= 0:
            raise ValueError(f"sigma must be > 0, got {sigma:g}")
        lam = _finite("lam", self.lam)
        if lam < 0:
            raise ValueError(f"lambda must be >= 0, got {lam:g}")
        A = self.A
        if isinstance(A, str):
            A = parse_matrix(A)
        try:
            arr = np.array(A, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"A must be a square matrix of numbers, got {self.A!r}") from None
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] < 2:
            raise ValueError(f"A must be a square L x L matrix with L >= 2, got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError("A must contain only finite numbers")
        if np.any(arr < 0):
            raise ValueError("A must have non-negative entries")
        if not np.allclose(arr.sum(axis=1), 1.0, atol=1e-9):
            raise ValueError(f"A must be row-stochastic (rows sum to 1), row sums are {arr.sum(axis=1).tolist()}")
        for name in ("r", "r_star"):
            v = getattr(self, name)
            if not isinstance(v, int | np.integer) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        object.__setattr__(self, "omega", omega)
        object.__setattr__(self, "sigma", sigma)
        object.__setattr__(self, "lam", lam)
        object.__setattr__(self, "A", tuple(tuple(float(v) for v in row) for row in arr))
        arr.setflags(write=False)
        object.__setattr__(self, "_A_array", arr)

    @property
    def L(self) -> int:
        """Number of tokens."""
        return len(self.A)

    @property
    def A_array(self) -> np.ndarray:
        return self._A_array

    @property
    def rho(self) -> float:
        """Teacher self-overlap rho = sigma^2 Q*^T Q* / d -> sigma^2 (r* = 1)."""
        return self.sigma**2

    @property
    def gram(self) -> np.ndarray:
        """Gram matrix G_lk = p_l . p_k of the positional encodings (study: p_1 = -p_2, unit norm)."""
        if self.L != 2:
            raise ValueError("only L = 2 (antipodal positional encodings) is implemented")
        return np.array([[1.0, -1.0], [-1.0, 1.0]])

    def replace(self, **changes: Any) -> Setting:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "omega": self.omega,
            "sigma": self.sigma,
            "lam": self.lam,
            "A": [list(r) for r in self.A],
            "r": self.r,
            "r_star": self.r_star,
        }

    def require_study_geometry(self) -> None:
        """The asymptotic solver implements L = 2, r = r* = 1 (MODEL.md section 3)."""
        if self.L != 2 or self.r != 1 or self.r_star != 1:
            raise ValueError(
                f"the theory engine implements L = 2, r = r* = 1; got L = {self.L}, r = {self.r}, r* = {self.r_star}"
            )


STUDY = Setting()
