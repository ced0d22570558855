"""A certificate that an iterate of the positional or the semantic branch flows to the agnostic point: the linearised
map of the branch's order parameter at the agnostic point (symmetric.order_jacobian) contracts, and the iterate is in
its linear regime.

Near the agnostic point the map is c_new = J c + O(|c|^2) + the finite point set's forcing (its broken Z2), c the
order parameter's coordinates (m in an orthonormal basis of range(G); theta's entries).  Where ||J|| + the iterate's
measured deviation from J c stays below CONTRACTION_MAX, every further step shrinks it (the nonlinear part shrinks
with c; q and V relax to the agnostic point's), so the start has no distinct fixed point of the branch.  Without it
the damped / Anderson iteration on 2^13 points wanders at the forcing's level (rms m 0.003-0.02, L = 3 simplex,
omega 0.3, fast) for tens of evaluations until m crosses the collapse threshold or the iterations run out
(docs/numerics.md, "Collapse in the linear regime").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.setting import Setting
from attnphase.theory.model.overlaps import Overlaps, range_frame
from attnphase.theory.solvers.fixed_point import Inadmissible
from attnphase.theory.state_evolution.symmetric import base_point, mirrored_points, order_jacobian

CONTRACTION_MAX = 0.95  # ||J|| plus the measured deviation from J m: a certified step shrinks m by at least 5%
NEAR_AGNOSTIC = 0.1  # largest relative distance of q and V from the agnostic point's for the linear regime
# J on 2^13 mirrored points, its agnostic point to 1e-5: J's integration error (~1e-2) is what limits it, far inside
# the margin between CONTRACTION_MAX and the ||J|| where the certificate is used (<= 0.84, L = 3 simplex, omega 0.3).
LOG2_POINTS = 12
TOL = 1e-5


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-12))


@dataclass(frozen=True)
class OrderContraction:
    """A branch's order parameter's linearised map J at the agnostic point, in its coordinates c: for "positional"
    m = U c (U an orthonormal basis of range(G)), for "semantic" theta's entries (U = I); norm = ||J||_2."""

    J: np.ndarray
    U: np.ndarray
    sym: Overlaps
    norm: float
    branch: str = "positional"

    @classmethod
    def at(cls, setting: Setting, alpha: float, seed: int = 0, near: Overlaps | None = None,
           branch: str = "positional") -> OrderContraction | None:
        """At alpha, on the mirrored points of scrambling 0 (the agnostic point solved from ``near``'s q and V where
        given, else from the default start); None where the agnostic point is not found."""
        if branch not in ("positional", "semantic"):
            raise ValueError(f"branch must be 'positional' or 'semantic', got {branch!r}")
        pts = mirrored_points(setting, branch, 0, seed, log2_n=LOG2_POINTS)
        start = None
        if near is not None:
            start = Overlaps(q=near.q, m=np.zeros_like(near.m), V=near.V, theta=np.zeros_like(near.theta))
        try:
            sym, minima = base_point(setting, alpha, "agnostic", pts, start, tol=TOL)
        except (Inadmissible, ArithmeticError):
            return None
        J = order_jacobian(setting, alpha, branch, pts, sym, minima)
        if not np.all(np.isfinite(J)):
            return None
        U = range_frame(setting.gram) if branch == "positional" else np.eye(setting.field_rank)
        return cls(J, U, sym, float(np.linalg.norm(J, 2)), branch)

    def coordinates(self, o: Overlaps) -> np.ndarray:
        """The order parameter's coordinates c (J's columns)."""
        return (self.U.T @ (o.m if self.branch == "positional" else o.theta)).ravel()

    def deviation(self, o: Overlaps, image: Overlaps) -> float:
        """|c_new - J c| / |c| for an iterate o and its image (inf where c = 0)."""
        c, c_new = self.coordinates(o), self.coordinates(image)
        size = float(np.linalg.norm(c))
        return float(np.linalg.norm(c_new - self.J @ c)) / size if size > 0 else float("inf")

    def verdict(self, o: Overlaps, image: Overlaps) -> str | None:
        """Why the iterate o (with its image under the map) flows to the agnostic point, or None where that is not
        certified here (J itself does not contract enough, q or V far from the agnostic point's, or the map's
        image of the order parameter too far from J c)."""
        if self.norm >= CONTRACTION_MAX:
            return None
        if max(_rel(o.q, self.sym.q), _rel(o.V, self.sym.V)) > NEAR_AGNOSTIC:
            return None
        kappa = self.deviation(o, image)
        if self.norm + kappa > CONTRACTION_MAX:
            return None
        return (f"the order parameter contracts in the agnostic point's linear regime (||J|| {self.norm:.3f} + "
                f"deviation {kappa:.3f} <= {CONTRACTION_MAX:g})")


__all__ = ["CONTRACTION_MAX", "NEAR_AGNOSTIC", "OrderContraction"]
