"""Generic continuation on toy maps whose bifurcations are known in closed form."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.theory.solvers.continuation import (
    arclength,
    bracket_from_above,
    classify_end,
    desingularised,
    locate_pitchfork,
    newton,
    refine_fold,
    turning_points,
)

P0 = 0.7


def _maps(kind: str):
    """Spectator y (fixed point 2 + t^2 / 5), order parameter t, parameter p.  The t != 0 branch:
    supercritical: p - P0 = 3 t^2 (ends at the pitchfork P0);
    subcritical: p - P0 = t^4 - t^2 (turns at a fold p = P0 - 1/4, t^2 = 1/2, after leaving P0 downward)."""

    def g_t(t: float, p: float) -> float:
        if kind == "supercritical":
            return t * (1 + (p - P0) / 3 - t * t)
        return t * (1 + (p - P0) + t * t - t**4)

    def G(y, t, p):
        return np.array([0.5 * y[0] + 1 + 0.1 * t * t]), g_t(t, p)

    def S(y, p):
        slope = 1 + (p - P0) / 3 if kind == "supercritical" else 1 + (p - P0)
        return np.array([0.5 * y[0] + 1]), slope

    return G, S


@pytest.mark.parametrize("tol", [1e-6, 1e-9])
def test_pitchfork_located_to_tolerance(tol: float) -> None:
    _, S = _maps("supercritical")
    pf = locate_pitchfork(S, np.array([1.0]), 0.3, y_scale=np.array([1.0]), p_step=1e-4, tol=tol)
    assert pf.converged
    assert abs(pf.p - P0) < 10 * tol
    assert abs(pf.y[0] - 2.0) < 10 * tol


@pytest.mark.parametrize("kind, end_kind, end_p", [("supercritical", "pitchfork", P0),
                                                    ("subcritical", "fold", P0 - 0.25)])
def test_branch_end_classified_and_located(kind: str, end_kind: str, end_p: float) -> None:
    G, S = _maps(kind)
    pf = locate_pitchfork(S, np.array([1.0]), 0.5, y_scale=np.array([1.0]), p_step=1e-4, tol=1e-10)
    F = desingularised(G, S, np.array([1.0]))
    u0 = np.array([pf.y[0], 0.0, pf.p])
    path = arclength(F, u0, np.array([0.0, 1.0, 0.0]), scale=np.ones(3), ds=0.08, tol=1e-10, max_steps=60,
                     stop=lambda u: "far" if u[1] > 1.2 else None)
    # every path point solves the toy's equations
    for y, t, _p in path.u:
        assert abs(y - (2 + 0.1 * t * t / 0.5)) < 1e-7
    end = classify_end(path, "lower")
    assert end.kind == end_kind
    if end_kind == "fold":
        fold = refine_fold(F, path, end.fold, scale=np.ones(3), tol=1e-9)
        assert abs(fold.p - end_p) < 1e-6
        assert abs(fold.u[1] ** 2 - 0.5) < 1e-3
        # the unstable part runs from the pitchfork (t = 0) to the fold
        assert end.unstable[0, 1] == 0.0 and end.unstable[-1, 1] ** 2 == pytest.approx(0.5, abs=0.15)
        assert abs(end.pitchfork_p - P0) < 1e-9
    else:
        assert abs(end.p - end_p) < 1e-9
        assert len(end.unstable) == 0
        assert not turning_points(path)


def test_plain_fold_normal_form_is_passed() -> None:
    """x -> x + p - x^2: fixed points p = x^2, a fold at p = 0; continuation from x = 1 runs through it."""
    def F(u):
        x, p = u
        return np.array([p - x * x])

    path = arclength(F, np.array([1.0, 1.0]), np.array([-1.0, -2.0]), scale=np.ones(2), ds=0.1, tol=1e-12,
                     max_steps=40, stop=lambda u: "done" if u[0] < -0.8 else None)
    assert path.u[-1, 0] < -0.8  # went through the fold to the other half of the parabola
    (tp,) = turning_points(path)
    assert tp.kind == "min"
    fold = refine_fold(F, path, tp, scale=np.ones(2), tol=1e-10)
    assert abs(fold.p) < 1e-8
    end = classify_end(path, "lower")  # path does not start at a pitchfork here, but the turn is still found
    assert end.kind == "fold"


def test_newton_reuses_a_given_jacobian_and_refreshes_a_bad_one() -> None:
    def F(u):
        return np.array([u[0] ** 3 - 8.0, u[1] - 1.0])

    r = newton(F, np.array([2.5, 0.0]), [0, 1], np.full(2, 1e-7), tol=1e-12)
    assert r.converged and np.allclose(r.x, [2.0, 1.0])
    # a grossly wrong Jacobian is replaced, not trusted
    r2 = newton(F, np.array([2.5, 0.0]), [0, 1], np.full(2, 1e-7), tol=1e-12, jacobian=-np.eye(2))
    assert r2.converged and np.allclose(r2.x, [2.0, 1.0])
    # a stalled iteration accepted at the residual `accept` says so with a code
    stalled = newton(lambda u: np.array([u[0] - 1.0 + 1e-6 * np.sign(np.sin(1e9 * u[0]))]), np.array([0.0]), [0],
                     np.full(1, 1e-3), tol=1e-12, accept=1e-3)
    assert stalled.converged and [w.code for w in stalled.warnings] == ["at_resolution"]


@pytest.mark.parametrize("p_hi", [1.33, 2.0])
def test_merging_branch_located_from_the_slope_falling_through_one(p_hi: float) -> None:
    """A branch that merges back into the symmetric point at P0: the slope at the symmetric point falls through
    1 there (1 - (p - P0) / 3, a pitchfork from above); bracketed by stepping down from p_hi with a warm-started
    solve of the symmetric point, then located jointly with it."""
    def S(y, p):
        return np.array([0.5 * y[0] + 1 + 0.2 * p]), 1 - (p - P0) / 3 - 0.5 * (p - P0) ** 2

    calls = []

    def f(p: float) -> float:
        calls.append(p)
        return S(np.array([2.0]), p)[1] - 1.0

    a, fa, b, fb = bracket_from_above(f, 0.1, p_hi, f(p_hi))
    assert a <= P0 < b and fa >= 0 > fb
    assert len(calls) <= 1 + 8 and calls[1] < p_hi  # walked down from p_hi only
    p0 = a + (b - a) * fa / (fa - fb)
    pf = locate_pitchfork(S, np.array([1.0]), p0, y_scale=np.array([1.0]), p_step=1e-4, tol=1e-10)
    assert pf.converged and abs(pf.p - P0) < 1e-8 and abs(pf.y[0] - 2 * (1 + 0.2 * P0)) < 1e-8


def test_bracket_from_above_says_none_without_a_crossing() -> None:
    assert bracket_from_above(lambda p: -1.0 - p, 0.0, 1.0, -2.0) is None

    def failing(p: float) -> float:
        raise ValueError("left the admissible set")

    assert bracket_from_above(failing, 0.0, 1.0, -1.0) is None
    with pytest.raises(ValueError, match="must be < 0"):
        bracket_from_above(lambda p: 1.0, 0.0, 1.0, 0.5)
