"""The pitchfork condition for any setting (theory/transition/linearised.py): the order parameter's block of the
linearised map at the agnostic point, held against the study's adapter (an independent likelihood-ratio code for
L = 2) and against finite differences of the map in a general shape; the classification of solver-found ends."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase import Setting
from attnphase.theory.model.channel import update_hatoverlaps
from attnphase.theory.model.overlaps import Branch, Overlaps
from attnphase.theory.model.prior import update_overlaps
from attnphase.theory.transition import adapter_map as bm
from attnphase.theory.transition import linearised as lin
from attnphase.theory.transition.records import Critical


@pytest.mark.parametrize("branch, alpha", [("semantic", 0.72), ("semantic", 1.2), ("positional", 0.3),
                                           ("positional", 1.0)])
def test_jacobian_equals_the_study_adapter_slope(branch: str, alpha: float) -> None:
    s = Setting(omega=0.3)
    z = bm.symmetric_points(12, 0, 0, branch)
    sym = lin.agnostic_point(s, alpha, z)
    slope = bm.symmetric_map(s, alpha, branch, z, np.array([sym.q[0, 0], sym.V[0, 0]])).slope
    J = lin.order_jacobian(s, alpha, branch, z, sym)
    assert J.shape == (1, 1)
    assert J[0, 0] == pytest.approx(slope, rel=1e-8)


def test_jacobian_against_finite_differences_at_three_tokens() -> None:
    """L = 3 simplex, semantic: the score identity against a central difference of the raw map with a probe large
    enough to average over the basin switches (5% of sqrt(q rho)) on 2^15 mirrored points."""
    s = Setting(L=3, positions="simplex", omega=0.3)
    pts = lin.mirrored_points(s, "semantic", 0, 0, log2_n=14)
    sym = lin.agnostic_point(s, 0.3, pts)
    J = lin.order_jacobian(s, 0.3, "semantic", pts, sym)
    eps = 0.05 * float(np.sqrt(sym.q[0, 0] * s.rho))

    def theta_new(t: float) -> float:
        o = Overlaps(q=sym.q, m=sym.m, V=sym.V, theta=sym.theta + t)
        return float(update_overlaps(s, update_hatoverlaps(s, 0.3, o, pts, Branch.semantic).hats).theta[0, 0])

    fd = (theta_new(eps) - theta_new(-eps)) / (2 * eps)
    assert J[0, 0] == pytest.approx(fd, rel=0.05)
    assert abs(J[0, 0] - 1.0) > 0.05  # alpha = 0.3 is not at the pitchfork: the check can tell the two apart


def _c(name: str, v: float | None, lo: float | None = None, hi: float | None = None, kind: str = "unknown") -> Critical:
    if v is None:
        return Critical.missing(name, "not in range", "none")
    return Critical(name, v, lo, hi, kind, "test")


def test_classification_of_a_solver_found_end() -> None:
    pitch = _c("semantic_pitchfork", 0.72, 0.70, 0.74, "pitchfork")
    sup = lin.classify_end(_c("alpha_sem_appears", 0.73, 0.72, 0.74), pitch, "lower")
    assert sup.kind == "pitchfork" and sup.value == 0.72 and (sup.lo, sup.hi) == (0.70, 0.74)
    sub = lin.classify_end(_c("alpha_sem_appears", 0.60, 0.58, 0.62), pitch, "lower")
    assert sub.kind == "fold" and sub.value == 0.60 and "subcritical" in sub.reason
    lost = lin.classify_end(_c("alpha_sem_appears", 0.90, 0.88, 0.92), pitch, "lower")
    assert lost.kind == "unknown" and "before the pitchfork" in lost.reason
    none = lin.classify_end(_c("alpha_sem_appears", 0.90, 0.88, 0.92), _c("semantic_pitchfork", None), "lower")
    assert none.kind == "unknown" and "pitchfork condition" in none.reason
