"""The solver's shortcuts (speculative cheap steps, acceptance at the map's resolution, scaled Jacobian steps, the
warm-started channel map) and the two-token kernel's extra starts: each held against the exact computation."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase import Setting
from attnphase.theory import Overlaps, branch_map
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.prox._general_draws import draw_problem
from attnphase.theory.prox.general import prox_general
from attnphase.theory.prox.reference import prox_reference
from attnphase.theory.prox.two_token import solve_prox
from attnphase.theory.solvers.fixed_point import Inadmissible, Status, chord, jacobian, newton_matrix

A = np.array([[0.4, 0.1], [-0.2, 0.3]])
B = np.array([1.0, 2.0])
X_STAR = np.linalg.solve(np.eye(2) - A, B)


def _exact(x):
    return A @ x + B, None


def test_chord_converges_to_the_exact_map_not_to_its_cheap_approximation():
    calls = {"exact": 0}

    def exact(x):
        calls["exact"] += 1
        return _exact(x)

    def cheap(x):  # a biased approximation: its own fixed point is off by ~1e-2
        return A @ x + B + 1e-2

    M = newton_matrix(A + 0.05)  # a Jacobian from a "nearby problem"
    res = chord(exact, np.zeros(2), tol=1e-10, matrix=M, max_iter=20, cheap=cheap)
    assert res is not None and res.status == Status.ok
    np.testing.assert_allclose(res.x, X_STAR, rtol=1e-9)
    assert res.nit == calls["exact"] and res.extra["cheap"] > 0
    # Without the cheap map the same answer (to tol).
    plain = chord(_exact, np.zeros(2), tol=1e-10, matrix=M, max_iter=40)
    np.testing.assert_allclose(plain.x, res.x, rtol=1e-9)


def test_chord_broyden_updates_rescue_a_poor_jacobian():
    M_bad = newton_matrix(np.zeros((2, 2)))  # identity: plain iteration, rate ~0.4 per exact step
    with_cheap = chord(_exact, np.zeros(2), tol=1e-10, matrix=M_bad, max_iter=8, cheap=lambda x: _exact(x)[0])
    assert with_cheap is not None and with_cheap.nit <= 3
    assert chord(_exact, np.zeros(2), tol=1e-10, matrix=M_bad, max_iter=8).status == Status.not_converged


def test_chord_accepts_only_at_the_maps_resolution():
    def grainy(x):  # piecewise constant at the scale 1e-4: the residual cannot fall below ~1e-4
        return np.round(A @ x + B, 4), None

    M = newton_matrix(A)
    ok = chord(grainy, np.zeros(2), tol=1e-10, matrix=M, accept=1e-3)
    assert ok is not None and ok.status == Status.ok and ok.residual <= 1e-3 and ok.warnings
    np.testing.assert_allclose(ok.x, X_STAR, atol=1e-3)
    assert chord(grainy, np.zeros(2), tol=1e-10, matrix=M, accept=1e-7).status == Status.not_converged


def test_jacobian_steps_scale_with_the_given_scale():
    seen = []

    def g(x):
        seen.append(x.copy())
        return np.array([x[0] ** 2, 3.0 * x[1]]), None

    x = np.array([2.0, 1e-5])
    J, n = jacobian(g, x, 1e-2, lambda v: np.array([10.0, 1.0]))
    assert n == 3
    np.testing.assert_allclose(seen[1] - x, [0.1, 0.0])
    np.testing.assert_allclose(seen[2] - x, [0.0, 1e-2])
    np.testing.assert_allclose(J, [[4.1, 0.0], [0.0, 3.0]], rtol=1e-12)


def test_jacobian_steps_backwards_where_the_forward_step_leaves_the_domain():
    """A point next to the domain's edge (x0 < 1): the forward step of x0 raises, the backward one is taken (a
    one-sided quotient of the same order); a coordinate with both steps outside still raises."""
    def g(x):
        if x[0] >= 1.0:
            raise Inadmissible("x0 >= 1")
        return np.array([1.0 / (1.0 - x[0]), x[0] * x[1]]), None

    x = np.array([0.995, 2.0])
    J, n = jacobian(g, x, 1e-2, lambda v: np.abs(v))
    assert n == 4  # g(x), the refused forward step, the backward one, the step of x1
    h = 1e-2 * 0.995
    assert J[0, 0] == pytest.approx((1 / 0.005 - 1 / (0.005 + h)) / h, rel=1e-12)  # the backward quotient
    assert J[0, 0] > 0 and J[1, 0] == pytest.approx(2.0, rel=1e-12)
    np.testing.assert_allclose(J[:, 1], [0.0, 0.995], rtol=1e-12)

    def walled(x):
        if abs(x[0] - 0.5) > 1e-9:
            raise Inadmissible("off the line")
        return x.copy(), None

    with pytest.raises(Inadmissible):
        jacobian(walled, np.array([0.5, 1.0]), 1e-2, lambda v: np.abs(v))


def test_cheap_branch_map_reproduces_the_exact_one_near_its_last_evaluation():
    s = Setting(L=3)
    bm = branch_map(s, 1.5, "semantic", gaussian_sobol(11, 6, 3))
    assert bm.warmable
    x = bm.pack(Overlaps(q=0.13, m=np.zeros((3, 1)), V=11.5, theta=0.17))
    g = bm(x)
    np.testing.assert_allclose(bm.cheap(x), g, rtol=1e-10)
    xp = x * (1 + 1e-3)
    gp = bm.cheap(xp)
    exact = bm(xp)
    # Warm starts miss only basin switches: a few points of 2048, each O(1/n).
    assert np.max(np.abs(gp - exact) / np.abs(exact)) < 2e-3
    # The two-token kernel takes warm starts (prox's warm path) but its maps do not use them (see BranchMap).
    assert not branch_map(Setting(), 1.5, "semantic", gaussian_sobol(8, 4, 0)).warmable
    assert not branch_map(s, 1.5, "semantic", gaussian_sobol(8, 6, 0), kernel="reference").warmable


def test_two_token_warm_kernel_converges_to_a_local_minimum_never_below_the_global_one():
    """The 2-D kernel's warm path (cheap steps for L = 2, r = 1): from the global minimisers it returns them; from
    perturbed starts it ends at stationary points whose values are never below the multi-start kernel's."""
    from attnphase.theory.prox import prox

    p = draw_problem(2, 1, 4096, seed=2)
    full = prox(p.w, p.T, p.Vinv, p.sigma2, kernel="l2r1")
    same = prox(p.w, p.T, p.Vinv, p.sigma2, kernel="l2r1", warm=full.h)
    np.testing.assert_allclose(same.h, full.h, atol=1e-9)
    np.testing.assert_allclose(same.value, full.value, atol=1e-12)
    start = full.h + np.random.default_rng(0).normal(scale=0.3, size=full.h.shape)
    moved = prox(p.w, p.T, p.Vinv, p.sigma2, kernel="l2r1", warm=start)
    # the general kernel's warm path from the same starts ends at the same local minima
    gen = prox(p.w, p.T, p.Vinv, p.sigma2, kernel="general", warm=start)
    assert np.mean(np.abs(gen.value - moved.value) < 1e-9) > 0.99
    with pytest.raises(ValueError, match="warm"):
        prox(p.w, p.T, p.Vinv, p.sigma2, warm=start[:10])
    assert np.mean(moved.converged) > 0.999
    assert np.all(moved.value >= full.value - 1e-10)
    # and somewhere a perturbed start falls into another basin (the warm path is not the global minimiser)
    assert np.any(moved.value > full.value + 1e-6)


def test_two_token_kernel_finds_the_midpoint_and_mixed_basins():
    """Large-|w| points where the general kernel's midpoint / per-token starts reach a lower minimum than the
    zeros and w (6 of 16384 here before these starts were added to the 2-D kernel): now found there too,
    and never above the reference (L-BFGS from many starts)."""
    p = draw_problem(2, 1, 16384, seed=4)
    args = (p.w[:, 0, 0], p.w[:, 1, 0], p.T[:, 0, 0], p.T[:, 1, 1], p.V, p.sigma2)
    new = solve_prox(*args)
    gen = prox_general(p.w, p.T, p.Vinv, p.sigma2)
    assert np.sum(gen.value < new.value - 1e-9) <= 1
    # Two of the points the zeros and w alone missed (mixed basins, one per token; a stable draw): the reference
    # (2-3 s a point) finds nothing lower.
    pts = np.array([2412, 5554])
    assert np.all(np.abs(p.w[pts]).max(axis=(1, 2)) > 1.5)
    ref = prox_reference(p.w[pts], p.T[pts], p.Vinv, p.sigma2)
    assert np.all(new.value[pts] <= ref.value + 1e-9)
    np.testing.assert_allclose(new.value[pts], gen.value[pts], atol=1e-12)
    big = np.nonzero(np.abs(p.w).max(axis=(1, 2)) > 1.0)[0]
    numpy = solve_prox(*(a[big] if isinstance(a, np.ndarray) else a for a in args), backend="numpy")
    np.testing.assert_allclose(numpy.value, new.value[big], atol=1e-12)
