"""Stationary points of the population risk plus weight decay, by direct minimisation over a realisation of Q.

The ODE's gradient-flow part is minus the chain-rule gradient of F(q, m, theta) = E[l] + lambda tr(q) / (2 sigma^2)
(the per-step objective; docs/dynamics.md), so its stationary points are those of F over the realisable overlaps.
An independent computation: write Q / sqrt(d) = e a + u b + w c (e: the positional span, u = Q* / sqrt(d), w: r
further orthonormal directions), so that
    m = C a,   theta = sigma^2 b^T,   q = sigma^2 (a^T a + b^T b + c^T c),
and minimise F over (a, b, c) with scipy, E[l] from theory.model.observables.test_error (its own parametrisation and
quadrature, not the ODE's).  Branches fix b = 0 (positional) or a = 0 (semantic): invariant sets of the ODE.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from attnphase.errors import InputError
from attnphase.setting import Setting
from attnphase.theory.dynamics.start import gram_factor
from attnphase.theory.model.observables import test_error
from attnphase.theory.model.overlaps import Overlaps

BRANCHES = ("positional", "semantic", "free")


@dataclass(frozen=True)
class Stationary:
    """A minimiser of F: overlaps q (r x r), m (L x r), theta (r x r*), F (objective) and E[l] (test_error)."""

    branch: str
    q: np.ndarray
    m: np.ndarray
    theta: np.ndarray
    objective: float
    test_error: float
    success: bool
    message: str

    def as_dict(self) -> dict:
        return {"branch": self.branch, "q": self.q.tolist(), "m": self.m.tolist(), "theta": self.theta.tolist(),
                "objective": self.objective, "test_error": self.test_error, "success": self.success,
                "message": self.message}


def overlaps_of(setting: Setting, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, ...]:
    """(q, m, theta) of Q / sqrt(d) = e a + u b + w c."""
    s2 = setting.sigma**2
    C = gram_factor(setting.gram)
    q = s2 * (a.T @ a + b.T @ b + c.T @ c)
    return 0.5 * (q + q.T), C @ a, s2 * b.T


def objective(setting: Setting, q: np.ndarray, m: np.ndarray, theta: np.ndarray) -> float:
    """F = E[l] + lambda tr(q) / (2 sigma^2), E[l] by theory.model.observables.test_error."""
    te, _ = test_error(setting, Overlaps(q=q, m=m, V=np.eye(q.shape[0]), theta=theta))
    return te + setting.lam * float(np.trace(q)) / (2.0 * setting.sigma**2)


def minimise(setting: Setting, branch: str = "free", start: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
             *, gtol: float = 1e-9) -> Stationary:
    """A local minimiser of F on a branch, by BFGS from `start` = (a, b, c) (shapes k x r, r* x r, r x r; default a
    branch-typical point).  Finite-difference gradients of a smooth Gauss-Hermite (study) or fixed-QMC average."""
    if branch not in BRANCHES:
        raise InputError(f"branch must be one of {', '.join(BRANCHES)}, got {branch!r}")
    k = gram_factor(setting.gram).shape[1]
    r, rs = setting.r, setting.r_star
    if start is None:
        a0 = np.full((k, r), 0.0 if branch == "semantic" else 0.3)
        b0 = np.zeros((rs, r))
        b0[: min(rs, r), : min(rs, r)] = np.eye(min(rs, r)) * (0.0 if branch == "positional" else 0.6)
        c0 = 0.05 * np.eye(r)
    else:
        a0, b0, c0 = (np.array(x, dtype=float) for x in start)
    use_a, use_b = branch != "semantic", branch != "positional"
    sizes = [k * r if use_a else 0, rs * r if use_b else 0, r * r]

    def split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        i = 0
        a = x[i:i + sizes[0]].reshape(k, r) if use_a else np.zeros((k, r))
        i += sizes[0]
        b = x[i:i + sizes[1]].reshape(rs, r) if use_b else np.zeros((rs, r))
        i += sizes[1]
        return a, b, x[i:].reshape(r, r)

    def f(x: np.ndarray) -> float:
        return objective(setting, *overlaps_of(setting, *split(x)))

    x0 = np.concatenate([a0.ravel() if use_a else [], b0.ravel() if use_b else [], c0.ravel()])
    res = minimize(f, x0, method="BFGS", options={"gtol": gtol, "maxiter": 2000})
    q, m, theta = overlaps_of(setting, *split(res.x))
    te, _ = test_error(setting, Overlaps(q=q, m=m, V=np.eye(r), theta=theta))
    return Stationary(branch=branch, q=q, m=m, theta=theta, objective=float(res.fun), test_error=float(te),
                      success=bool(res.success), message=str(res.message))
