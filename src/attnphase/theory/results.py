"""Result containers of the theory engine."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

BRANCHES = ("positional", "semantic", "agnostic")


@dataclass(frozen=True)
class Overlaps:
    """Order parameters (q, m, V, theta) of MODEL.md section 3 (r = 1: plain floats)."""

    q: float
    m: float
    V: float
    theta: float


@dataclass(frozen=True)
class HatOverlaps:
    qhat: float
    mhat: float
    Vhat: float
    thetahat: float


@dataclass
class FixedPoint:
    """A solution of the self-consistent equations on one branch, with error estimates.

    `errors` maps a name (q, m, theta, V, train_loss, test_error, ...) to a one-standard-error estimate
    of the integration error (spread over independent scramblings of the integration points).
    `status` is "ok", "not converged", or "collapsed to <branch>" when the iteration left its branch
    (e.g. a semantic start flowing to theta -> 0).
    """

    alpha: float
    omega: float
    branch: str
    overlaps: Overlaps
    hats: HatOverlaps
    train_loss: float
    test_error: float
    errors: dict[str, float]
    converged: bool
    iterations: int
    residual: float
    status: str = "ok"
    n_points: int = 0
    n_replicas: int = 0
    seconds: float = 0.0
    precision: str = "default"
    setting: dict[str, Any] = field(default_factory=dict)

    @property
    def q(self) -> float:
        return self.overlaps.q

    @property
    def m(self) -> float:
        return self.overlaps.m

    @property
    def V(self) -> float:
        return self.overlaps.V

    @property
    def theta(self) -> float:
        return self.overlaps.theta

    @property
    def valid(self) -> bool:
        """Converged and still a distinct fixed point of its own branch."""
        return self.converged and self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "alpha": self.alpha,
            "omega": self.omega,
            "branch": self.branch,
            "q": self.q,
            "m": self.m,
            "theta": self.theta,
            "V": self.V,
            "train_loss": self.train_loss,
            "test_error": self.test_error,
            "converged": self.converged,
            "iterations": self.iterations,
            "residual": self.residual,
            "status": self.status,
        }
        d.update(asdict(self.hats))
        for k, v in self.errors.items():
            d[f"{k}_err"] = v
        d["n_points"] = self.n_points
        d["seconds"] = self.seconds
        d["precision"] = self.precision
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}
