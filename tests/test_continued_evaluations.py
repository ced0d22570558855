"""Continued evaluations of the fixed-point map (Newton from every local minimiser of a nearby full evaluation),
the chord's secant updates and the curve's per-scrambling starts: each against the plain, full computation."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.setting import Setting
from attnphase.theory.model.channel import points_dim, update_hatoverlaps
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.prox import LocalMinima, prox
from attnphase.theory.prox._general_draws import draw_problem
from attnphase.theory.prox.general import objective
from attnphase.theory.solvers.fixed_point import Status, _secant_update, anderson, chord, newton_matrix
from attnphase.theory.state_evolution.branch_map import CONTINUE_RADIUS, JACOBIAN_STEP, branch_map
from attnphase.theory.state_evolution.curves import solve_curve
from attnphase.theory.state_evolution.solve import solve
from attnphase.theory.state_evolution.starts import default_start


def _minima_values(p, minima: LocalMinima) -> np.ndarray:
    """F at every recorded minimiser (inf beyond each point's count), by the plain numpy objective."""
    n, K = minima.h.shape[:2]
    vals = np.full((n, K), np.inf)
    for k in range(K):
        ok = k < minima.count
        vals[ok, k] = objective(minima.h[ok, k], p.w[ok], p.T[ok], p.Vinv, p.sigma2)
    return vals


def test_two_token_kernel_records_its_distinct_local_minima():
    p = draw_problem(2, 1, 4096, seed=5)
    full = prox(p.w, p.T, p.Vinv, p.sigma2, kernel="l2r1")
    mins = full.minima
    assert mins.h.shape == (4096, 6, 2, 1)
    assert np.all(mins.count >= 1) and np.all(mins.count <= 6)
    assert np.any(mins.count >= 2)  # the mirror basins
    # NaN exactly beyond the count; the recorded points are distinct
    for k in range(6):
        assert np.all(np.isfinite(mins.h[:, k]).all(axis=(1, 2)) == (k < mins.count))
    two = mins.count >= 2
    assert np.all(np.abs(mins.h[two, 0] - mins.h[two, 1]).max(axis=(1, 2)) > 1e-6)
    # the returned minimiser is the lowest recorded one (values by the independent numpy objective)
    vals = _minima_values(p, mins)
    np.testing.assert_allclose(vals.min(axis=1), full.value, rtol=1e-12, atol=1e-14)
    # continuing them at the same problem changes nothing
    same = prox(p.w, p.T, p.Vinv, p.sigma2, kernel="l2r1", minima=mins)
    # (Newton stops at |grad| < 1e-9 where the curvature is ~1 / V: h to ~3e-8)
    np.testing.assert_allclose(same.h, full.h, atol=1e-7)
    np.testing.assert_allclose(same.value, full.value, atol=1e-13)


def test_other_kernels_continue_the_same_minima():
    p = draw_problem(2, 1, 2048, seed=6)
    mins = prox(p.w, p.T, p.Vinv, p.sigma2, kernel="l2r1").minima
    moved = draw_problem(2, 1, 2048, seed=6)
    w2 = moved.w * 1.002
    l2 = prox(w2, p.T, p.Vinv, p.sigma2, kernel="l2r1", minima=mins)
    gen = prox(w2, p.T, p.Vinv, p.sigma2, kernel="general", minima=mins)  # NaN rows are skipped starts
    assert np.mean(np.abs(gen.value - l2.value) < 1e-9) > 0.99
    ref = prox(w2[:12], p.T[:12], p.Vinv, p.sigma2, kernel="reference",
               minima=LocalMinima(mins.h[:12], mins.count[:12]))
    assert np.all(ref.value <= l2.value[:12] + 1e-9)  # the reference adds its own and random starts
    with pytest.raises(ValueError, match="minima"):
        prox(w2, p.T, p.Vinv, p.sigma2, minima=LocalMinima(mins.h[:10], mins.count[:10]))
    with pytest.raises(ValueError, match="count"):
        prox(w2, p.T, p.Vinv, p.sigma2, minima=LocalMinima(mins.h, np.zeros_like(mins.count)))
    with pytest.raises(ValueError, match="warm or minima"):
        prox(w2, p.T, p.Vinv, p.sigma2, warm=p.w, minima=mins)


@pytest.mark.parametrize(("branch", "alpha"), [("positional", 0.5), ("semantic", 1.5)])
def test_continued_map_is_the_full_map_near_its_anchor(branch, alpha):
    s = Setting(omega=0.3)
    fp = solve(s, alpha, branch, "fast")
    pts = gaussian_sobol(14, 4, 3)
    bm = branch_map(s, alpha, branch, pts)
    x0 = bm.pack(fp.overlaps)
    bm.step(x0)
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = x0 + 2e-3 * rng.choice([-1.0, 1.0], x0.size) * bm.layout.scale(x0)
        got = bm(x)
        want = branch_map(s, alpha, branch, pts)(x)  # a fresh map: a full evaluation (own starts)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert bm.evaluations == {"full": 1, "continued": 3}
    # beyond the radius it evaluates in full again (and re-anchors there)
    far = x0 * (1 + 3 * CONTINUE_RADIUS)
    np.testing.assert_allclose(bm(far), branch_map(s, alpha, branch, pts)(far), rtol=1e-12)
    assert bm.evaluations == {"full": 2, "continued": 3}


def test_the_radius_counts_a_small_order_entry_against_its_columns_size_in_the_fields():
    """BranchMap.move_scale: q, V as the layout's scale; an entry of m or theta against at least sqrt(q_aa) and
    sqrt(q_aa rho_bb) (by hand here).  At the rank-2 mixed point a move of the positional column's small theta by
    several times itself, but 2e-3 of that size, is a continued evaluation and equals a full one."""
    s = Setting(omega=0.3, r=2)
    fp = solve(s, 1.5, "mixed", "fast")
    assert fp.valid
    pts = gaussian_sobol(13, points_dim(s), 3)
    bm = branch_map(s, 1.5, "free", pts)
    x0 = bm.pack(fp.overlaps)
    o = bm.unpack(x0)
    names = bm.layout.names()
    sizes = bm.move_scale(x0)
    base = bm.layout.scale(x0)
    rho = s.rho_matrix
    for k, name in enumerate(names):
        i, j = (int(c) for c in name[name.index("[") + 1:-1].split(","))
        if name.startswith("theta"):
            assert sizes[k] == pytest.approx(max(abs(o.theta[i, j]), 1e-3, np.sqrt(o.q[i, i] * rho[j, j])))
        elif name.startswith("m_coord"):
            assert sizes[k] == pytest.approx(max(abs(x0[k]), 1e-3, np.sqrt(o.q[j, j])))
        else:
            assert sizes[k] == base[k]
    small = int(np.argmin(np.abs(o.theta.ravel()) / np.sqrt(np.diag(o.q)[:, None] * np.diag(rho)[None, :]).ravel()))
    k = bm.layout.block("theta").start + small
    assert abs(x0[k]) < 0.1 * sizes[k]  # the small entry
    bm.step(x0)
    x = x0.copy()
    x[k] += 2e-3 * sizes[k]  # many times the entry's own size (the layout's scale would call it far)
    assert 2e-3 * sizes[k] / base[k] > CONTINUE_RADIUS
    got = bm(x)
    assert bm.evaluations == {"full": 1, "continued": 1}
    want = branch_map(s, 1.5, "free", pts)(x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_continuing_a_single_minimum_is_not_enough():
    """Why every local minimiser is continued: from the global one alone (prox's warm path), points whose
    global minimiser switches basin are wrong, and at a move of the overlaps of 3e-2 the map's image is off by
    far more than the solver's tolerance; continuing all of them stays within it."""
    s = Setting(omega=0.3)
    fp = solve(s, 0.5, "positional", "fast")
    pts = gaussian_sobol(14, 4, 3)
    bm = branch_map(s, 0.5, "positional", pts)
    x0 = bm.pack(fp.overlaps)
    _, out0 = bm.step(x0)
    x = x0 * (1 + 3e-2)
    o = bm.unpack(x)
    full = bm.image(update_hatoverlaps(s, 0.5, o, pts, "positional"))
    one = bm.image(update_hatoverlaps(s, 0.5, o, pts, "positional", warm=out0.h))
    every = bm.image(update_hatoverlaps(s, 0.5, o, pts, "positional", minima=out0.minima))
    scale = bm.layout.scale(full)
    assert np.max(np.abs(one - full) / scale) > 10 * np.max(np.abs(every - full) / scale)


def test_secant_update_satisfies_the_secant_condition_and_skips_small_steps():
    rng = np.random.default_rng(0)
    M = np.eye(3) + 0.1 * rng.normal(size=(3, 3))
    dx, dr = rng.normal(size=3), rng.normal(size=3)
    sizes = np.array([1.0, 2.0, 0.5])
    M2 = _secant_update(M, dx, dr, sizes, 1e-2)
    np.testing.assert_allclose(M2 @ dr, -dx, atol=1e-12)
    assert _secant_update(M, 1e-3 * sizes, dr, sizes, 1e-2) is M


def test_chord_with_secant_updates_needs_fewer_evaluations_from_a_poor_matrix():
    A = np.array([[0.6, 0.2], [0.1, 0.85]])
    b = np.array([1.0, 0.5])
    x_star = np.linalg.solve(np.eye(2) - A, b)
    poor = newton_matrix(A + np.array([[0.25, 0.0], [0.0, -0.4]]))

    def fmap(x):
        return A @ x + b, None

    plain = chord(fmap, np.zeros(2), tol=1e-10, matrix=poor, max_iter=40)
    secant = chord(fmap, np.zeros(2), tol=1e-10, matrix=poor, max_iter=40, secant_min=1e-6)
    assert secant is not None and secant.status == Status.ok
    np.testing.assert_allclose(secant.x, x_star, rtol=1e-9)
    assert not plain.converged or secant.nit < plain.nit


def test_curve_continuation_agrees_with_a_standalone_solve():
    """The curve's starts (each scrambling from its own fixed point at the previous alpha) change where the
    solver starts, not the fixed points: the last point of a short curve against a solve from the default start."""
    s = Setting(omega=0.3)
    curve = solve_curve(s, [1.3, 1.4, 1.5], "positional", "default")
    alone = solve(s, 1.5, "positional", "default")
    assert curve[-1].valid and alone.valid
    for key, value in (("m", lambda p: p.overlaps.m[0, 0]), ("q", lambda p: p.overlaps.q[0, 0]),
                       ("train_loss", lambda p: p.train_loss)):
        # the same scramblings, each solved to a relative residual of 3e-5 (one more scrambling where the error
        # target is met only just): within one standard error
        err = max(curve[-1].errors[key], alone.errors[key])
        print(key, value(curve[-1]), value(alone), err)
        assert abs(value(curve[-1]) - value(alone)) < err, key


def test_theory_cli_gives_the_same_numbers_with_one_or_two_workers(capsys):
    """Reproducible: in-process (BLAS threads) and in single-threaded workers, every number but the seconds is
    the same to the last bit."""
    import json

    from attnphase.cli import main

    runs = []
    for workers in ("1", "2"):
        assert main(["theory", "--alpha", "1.0,1.5", "--branch", "all", "--precision", "fast", "--json", "--quiet",
                     "--workers", workers]) in (0, None)
        records = json.loads(capsys.readouterr().out)
        for rec in records:
            rec.pop("seconds")
        runs.append(records)
    assert len(runs[0]) == 6
    assert runs[0] == runs[1]


@pytest.mark.parametrize(("setting", "alphas", "branch"), [
    # a later scrambling of the continuation left the map's domain (the zero student, V-hat -1e5): no verdict
    (Setting(lam=0.1), [0.2, 0.5, 1.0, 1.3], "agnostic"),
    # a step longer than the single point's path takes (x2.5): its first scrambling converged, then collapsed
    (Setting(), [2.0, 5.0], "positional"),
])
def test_a_curves_point_whose_continuation_fails_without_a_verdict_is_the_single_points(setting, alphas, branch):
    """A curve's point is the single point's where continuation from the neighbour gives no answer of its own: the
    two measured cases (docs/numerics.md, "Measured cases behind solve.py": curves).  Without the curve's retry they
    read inadmissible at alpha 1 and collapsed at alpha 5 (measured), where the single point is ok."""
    curve = solve_curve(setting, alphas, branch, "fast", stability=False)
    for fp in curve:
        single = solve(setting, fp.alpha, branch, "fast", stability=False)
        assert fp.status == single.status == Status.ok, fp.alpha
        for name in ("q", "m", "V"):
            x, y = fp.summary()[name], single.summary()[name]
            err = np.hypot(fp.errors.get(name, 0.0), single.errors.get(name, 0.0))
            assert abs(x - y) <= 4 * err + 1e-6 * max(abs(y), 1e-3), (fp.alpha, name, x, y, err)


def test_fine_jacobian_uses_continued_steps_and_agrees_with_the_wider_difference():
    from attnphase.theory.solvers.fixed_point import jacobian

    s = Setting(omega=0.3)
    fp = solve(s, 1.5, "semantic", "fast")
    pts = gaussian_sobol(15, 4, 2)
    bm = branch_map(s, 1.5, "semantic", pts)
    x0 = bm.pack(fp.overlaps)
    assert bm.jacobian_step == JACOBIAN_STEP  # not known to record minima before its first evaluation
    bm.step(x0)
    assert bm.jacobian_step < CONTINUE_RADIUS
    J_fine, _ = jacobian(bm.step, x0, bm.jacobian_step, bm.layout.scale)
    assert bm.evaluations == {"full": 1, "continued": 1 + x0.size}
    wide = branch_map(s, 1.5, "semantic", pts)
    J_wide, _ = jacobian(wide.step, x0, JACOBIAN_STEP, wide.layout.scale)
    # what the chord uses: (I - J)^-1; the two differences agree to a few per cent
    A_fine, A_wide = np.linalg.inv(np.eye(x0.size) - J_fine), np.linalg.inv(np.eye(x0.size) - J_wide)
    assert np.max(np.abs(A_fine - A_wide)) < 0.05 * np.max(np.abs(A_wide))
    coarse = branch_map(s, 1.5, "semantic", gaussian_sobol(12, 4, 2))
    coarse.step(x0)
    assert coarse.jacobian_step == JACOBIAN_STEP


def test_basin_held_jacobian_agrees_with_the_full_maps_difference_and_serves_the_chord():
    """BranchMap.jacobian for the general kernel: central differences of the map with every point's minimiser held
    in its basin (cheap), after one exact evaluation.  Held against the forward difference of the full map at 1e-2
    (independent: own starts at every step; measured 0.5% apart at L = 3), and as a chord matrix on the other
    scramblings, where it converges (the untied student's semantic point at alpha 3: from the full map's difference
    the chord did not converge on any of three scramblings)."""
    from attnphase.theory.solvers.fixed_point import jacobian

    s = Setting(omega=0.3, L=3)
    fp = solve(s, 1.5, "semantic", "fast")
    pts = gaussian_sobol(13, points_dim(s), 0)
    bm = branch_map(s, 1.5, "semantic", pts)
    x0 = bm.pack(fp.overlaps)
    J, n = bm.jacobian(x0)
    assert n == 1 and bm.evaluations == {"full": 1, "continued": 0}
    J_full, _ = jacobian(branch_map(s, 1.5, "semantic", pts).step, x0, JACOBIAN_STEP, bm.layout.scale)
    assert np.linalg.norm(J - J_full) < 0.05 * np.linalg.norm(J_full)

    u = Setting(omega=0.3, student="untied")
    fu = solve(u, 3.0, "semantic", "fast")
    assert fu.valid
    bu = branch_map(u, 3.0, "semantic", gaussian_sobol(13, points_dim(u), 0))
    xu = bu.pack(fu.overlaps)
    M = newton_matrix(bu.jacobian(xu)[0])
    for rep in (1, 2, 3):
        other = branch_map(u, 3.0, "semantic", gaussian_sobol(13, points_dim(u), rep))
        start = xu * (1 + 0.01 * np.random.default_rng(rep).standard_normal(xu.size))
        res = chord(other.step, start, tol=3e-5, matrix=M, admissible=other.admissible, scale=other.layout.scale,
                    max_iter=12)
        assert res.converged and res.nit <= 6, (rep, res.status, res.nit)


def test_basin_held_jacobian_is_a_property_of_the_point():
    """Moved by 3e-4 (inside the solver's tolerance), the rank-2 semantic point's held Jacobian changes by under 2%
    (measured < 1%), where the full map's forward difference at 1e-2 changed by 8% and 146%."""
    s = Setting(omega=0.3, r=2)
    fp = solve(s, 1.5, "semantic", "fast")
    pts = gaussian_sobol(13, points_dim(s), 0)
    x = branch_map(s, 1.5, "semantic", pts).pack(fp.overlaps)
    J0, _ = branch_map(s, 1.5, "semantic", pts).jacobian(x)
    for k in (1, 2):
        xk = x * (1 + 3e-4 * np.random.default_rng(k).standard_normal(x.size))
        Jk, _ = branch_map(s, 1.5, "semantic", pts).jacobian(xk)
        assert np.linalg.norm(Jk - J0) < 0.02 * np.linalg.norm(J0)


def test_basin_held_jacobian_steps_one_sided_at_the_domain_edge():
    """Where one side of a coordinate leaves the map's domain, that column is the one-sided difference (equal to
    the central one within the step's truncation error); where both do, Inadmissible."""
    from attnphase.theory.solvers.fixed_point import Inadmissible
    from attnphase.theory.state_evolution.branch_map import BranchMap

    s = Setting(omega=0.3, L=3)
    fp = solve(s, 1.5, "semantic", "fast")
    pts = gaussian_sobol(12, points_dim(s), 0)
    x0 = branch_map(s, 1.5, "semantic", pts).pack(fp.overlaps)

    class Walled(BranchMap):
        sides = (1.0,)

        def cheap(self, x):
            if any(sign * (x[0] - x0[0]) > 0 for sign in self.sides):
                raise Inadmissible("beyond the wall")
            return super().cheap(x)

    J_both, _ = branch_map(s, 1.5, "semantic", pts).jacobian(x0)
    walled = Walled(s, 1.5, "semantic", pts)
    J_one, _ = walled.jacobian(x0)
    np.testing.assert_allclose(J_one[:, 1:], J_both[:, 1:], rtol=1e-12)
    np.testing.assert_allclose(J_one[:, 0], J_both[:, 0], rtol=1e-2, atol=1e-3 * np.abs(J_both).max())
    walled.sides = (1.0, -1.0)
    with pytest.raises(Inadmissible, match="both steps"):
        walled.jacobian(x0)


def test_general_kernel_records_its_distinct_local_minima():
    """The general kernel (any L, r) records every distinct end point of its starts; the returned minimiser is the
    lowest of them (values by the plain numpy objective) and continuing them at the same problem changes
    nothing."""
    for L, r in ((2, 2), (3, 1)):
        p = draw_problem(L, r, 1024, seed=7)
        full = prox(p.w, p.T, p.Vinv, p.sigma2, kernel="general")
        mins = full.minima
        K = mins.h.shape[1]
        assert mins.h.shape[0] == 1024 and mins.h.shape[2:] == (L, r)
        assert np.all(mins.count >= 1) and np.all(mins.count <= K)
        for k in range(K):
            assert np.all(np.isfinite(mins.h[:, k]).all(axis=(1, 2)) == (k < mins.count))
        vals = _minima_values(p, mins)
        np.testing.assert_allclose(vals.min(axis=1), full.value, rtol=1e-10, atol=1e-13)
        same = prox(p.w, p.T, p.Vinv, p.sigma2, kernel="general", minima=mins)
        np.testing.assert_allclose(same.value, full.value, atol=1e-12)
        assert same.minima is None  # only full evaluations (own starts) record an anchor


@pytest.mark.parametrize("branch", ["positional", "mixed"])
def test_general_continued_solve_equals_the_full_one_within_error_bars(branch):
    """A rank-2 student's fixed point with continued evaluations near each full one (the default) equals the one
    from full evaluations only, within three standard errors (measured at default precision: m 0.22618 vs 0.22616,
    standard error 2.5e-5, in a fifth of the time).  The mixed point has a small entry (theta of its positional
    column), whose moves the radius measures against its column's size in the fields (BranchMap.move_scale)."""
    from attnphase.theory.state_evolution import branch_map as bm_module

    s = Setting(omega=0.3, r=2)
    on = solve(s, 1.5, branch, "fast")
    orig = bm_module.BranchMap._near_anchor
    try:
        bm_module.BranchMap._near_anchor = lambda self, x: False
        off = solve(s, 1.5, branch, "fast")
    finally:
        bm_module.BranchMap._near_anchor = orig
    assert on.valid and off.valid
    for key in ("q", "m", "theta", "train_loss") if branch == "mixed" else ("q", "m", "train_loss"):
        a = on.summary()[key] if key != "train_loss" else on.train_loss
        b = off.summary()[key] if key != "train_loss" else off.train_loss
        err = np.hypot(on.errors[key], off.errors[key])
        assert abs(a - b) <= 3 * err + 1e-12, (key, a, b, err)


@pytest.mark.parametrize(("kw", "branch", "alpha"), [({"L": 3, "positions": "simplex"}, "semantic", 1.5),
                                                     ({"r": 2}, "positional", 1.5)])
def test_steering_by_continued_evaluations_reaches_the_full_maps_fixed_point(kw, branch, alpha):
    """anderson steered by the continued map (as solve does for the general kernel) against the plain iteration on
    full evaluations only: both converge, to the same fixed point, which a fresh map (own starts) confirms."""
    s = Setting(omega=0.3, **kw)
    pts = gaussian_sobol(13, points_dim(s), 11)
    tol = 1e-5
    x0 = branch_map(s, alpha, branch, pts).pack(default_start(s, branch))
    plain_map = branch_map(s, alpha, branch, pts)
    kw_solver = dict(tol=tol, max_iter=200, admissible=plain_map.admissible, scale=plain_map.layout.scale)
    plain = anderson(plain_map.step, x0, **kw_solver)
    bm = branch_map(s, alpha, branch, pts)
    steered = anderson(bm.step, x0, approx=bm.continued, **kw_solver)
    assert plain.status == Status.ok and steered.status == Status.ok
    assert steered.extra["approx"] > 0 and bm.evaluations["continued"] >= steered.extra["approx"]
    # the steps were the approximation's (had it been dropped, the plain run from x0 would add all its evaluations)
    assert steered.nit < plain.nit
    scale = plain_map.layout.scale(plain.x)
    # two points within tol of one map's fixed point (a contraction: within a few tol of each other)
    assert np.max(np.abs(steered.x - plain.x) / scale) < 20 * tol
    image = branch_map(s, alpha, branch, pts)(steered.x)  # a full evaluation from scratch
    assert np.max(np.abs(image - steered.x) / scale) < 20 * tol
