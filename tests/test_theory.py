"""Theory engine: proximal solver, derivatives, fixed points, baseline, errors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from attnphase import Setting
from attnphase.theory import Status, find_crossing, linear_baseline, solve, solve_all
from attnphase.theory.model.loss import attention_loss, loss_derivatives, target_diagonal
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.prox.two_token import objective, solve_prox
from attnphase.theory.state_evolution.solve import solve_screened

A = np.array([[0.6, 0.4], [0.4, 0.6]])
S2 = 0.25


def _problem(q, m, theta, n_log2=12, seed=3, omega=0.3, rho=0.25):
    z = gaussian_sobol(n_log2, 4, seed)
    sq = np.sqrt(q)
    c = np.sqrt(rho - theta**2 / q)
    w1, w2 = sq * z[0] + m, sq * z[1] - m
    t1, t2 = target_diagonal(theta / sq * z[0] + c * z[2], theta / sq * z[1] + c * z[3], omega, A)
    return w1, w2, t1, t2


def _brute(w1, w2, t1, t2, V):
    """Dense grid over [-8, 8]^2, then a local polish from the best grid point."""
    g = np.linspace(-8, 8, 801)
    G1, G2 = np.meshgrid(g, g)
    F = objective(G1, G2, w1, w2, t1, t2, V, S2)
    k = np.argmin(F)
    r = minimize(lambda h: objective(h[0], h[1], w1, w2, t1, t2, V, S2), [G1.flat[k], G2.flat[k]],
                 method="Nelder-Mead", options=dict(xatol=1e-10, fatol=1e-14, maxiter=4000))
    return r.fun


@pytest.mark.parametrize("q,m,theta,V", [(0.05, 0.25, 0.0, 13.6), (0.094, 0.0, 0.135, 16.0), (0.5, 0.3, 0.2, 3.0),
                                         (0.09, 0.0, 0.0, 26.4)])
def test_prox_equals_brute_force(q, m, theta, V):
    w1, w2, t1, t2 = _problem(q, m, theta)
    sol = solve_prox(w1, w2, t1, t2, V, S2)
    assert sol.converged.all()
    # The compiled kernel and the vectorised numpy reference find the same minimisers.
    ref = solve_prox(w1, w2, t1, t2, V, S2, backend="numpy")
    np.testing.assert_allclose(sol.value, ref.value, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sol.h1, ref.h1, atol=1e-6)
    rng = np.random.default_rng(0)
    # Random points plus the points nearest the basin-switching surface, where the two mirror local
    # minima have almost the same objective (F(h) - F(-h) = -h.w/V is smallest there).
    near = np.argsort(np.abs(sol.h1 * w1 + sol.h2 * w2))[:15]
    idx = np.concatenate([rng.choice(len(w1), 25, replace=False), near])
    for i in idx:
        ref = _brute(w1[i], w2[i], t1[i], t2[i], V)
        assert sol.value[i] <= ref + 1e-9, (i, sol.value[i], ref)


def test_loss_derivatives_match_finite_differences():
    rng = np.random.default_rng(1)
    h1, h2 = rng.normal(0, 1.5, 200), rng.normal(0, 1.5, 200)
    t1, t2 = rng.uniform(0.1, 0.9, 200), rng.uniform(0.1, 0.9, 200)
    val, g1, g2, H11, H12, H22 = loss_derivatives(h1, h2, t1, t2, S2)
    eps = 1e-6

    def L(a, b):
        return attention_loss(a, b, t1, t2, S2)

    np.testing.assert_allclose(val, L(h1, h2), rtol=1e-12)
    np.testing.assert_allclose(g1, (L(h1 + eps, h2) - L(h1 - eps, h2)) / (2 * eps), atol=1e-7)
    np.testing.assert_allclose(g2, (L(h1, h2 + eps) - L(h1, h2 - eps)) / (2 * eps), atol=1e-7)

    def grad(a, b):
        return loss_derivatives(a, b, t1, t2, S2)[1:3]

    np.testing.assert_allclose(H11, (grad(h1 + eps, h2)[0] - grad(h1 - eps, h2)[0]) / (2 * eps), atol=1e-6)
    np.testing.assert_allclose(H12, (grad(h1, h2 + eps)[0] - grad(h1, h2 - eps)[0]) / (2 * eps), atol=1e-6)
    np.testing.assert_allclose(H22, (grad(h1, h2 + eps)[1] - grad(h1, h2 - eps)[1]) / (2 * eps), atol=1e-6)


def test_moreau_gradient_is_minus_f():
    """d/dw min_h F(h; w) = -(hhat - w)/V = -f: checks the f used in every hat equation."""
    w1, w2, t1, t2 = _problem(0.094, 0.0, 0.135, n_log2=8)
    V = 16.0
    sol = solve_prox(w1, w2, t1, t2, V, S2)
    eps = 1e-5
    up = solve_prox(w1 + eps, w2, t1, t2, V, S2).value
    dn = solve_prox(w1 - eps, w2, t1, t2, V, S2).value
    fd = (up - dn) / (2 * eps)
    f1 = (sol.h1 - w1) / V
    # Away from the switching surface the envelope is differentiable.
    smooth = np.abs(up + dn - 2 * sol.value) < 1e-9
    assert smooth.mean() > 0.9
    np.testing.assert_allclose(fd[smooth], -f1[smooth], atol=1e-6)


def test_softmax_is_stable_for_huge_arguments():
    h = np.array([1e6, -1e6, 1e154, 0.0, 3e3])
    val, *rest = loss_derivatives(h, -h, np.full(5, 0.7), np.full(5, 0.7), S2)
    assert np.all(np.isfinite(val))
    for arr in rest:
        assert np.all(np.isfinite(arr))
    sol = solve_prox(np.array([1e3, -1e3]), np.array([-1e3, 5.0]), np.array([0.7, 0.7]), np.array([0.6, 0.9]),
                     15.0, S2)
    assert np.all(np.isfinite(sol.value)) and np.all(np.isfinite(sol.h1))


def test_agnostic_branch_and_small_alpha_limit():
    s = Setting()
    ag = solve(s, 1.0, "agnostic", "fast")
    assert ag.valid and np.all(ag.m == 0.0) and np.all(ag.theta == 0.0) and ag.q[0, 0] > 0
    # alpha -> 0: no data, the ridge alone: hats -> 0, so V -> sigma^2/lambda, q -> 0, train_loss -> 0.
    # Vhat vanishes only like sqrt(alpha): the jumps of the global minimiser across the switching surface
    # give E[f xi]/sqrt(q) ~ 1/sqrt(q) with q ~ alpha.
    tiny = solve(s, 1e-5, "agnostic", "fast")
    small = solve(s, 1e-3, "agnostic", "fast")
    assert tiny.converged and small.converged
    tV, sV = tiny.summary()["V"], small.summary()["V"]
    assert tV == pytest.approx(s.sigma**2 / s.lam, rel=3e-3)
    dev_tiny, dev_small = abs(tV - 25.0), abs(sV - 25.0)
    assert dev_small / dev_tiny == pytest.approx(10.0, rel=0.3)  # sqrt(1e-3 / 1e-5)
    assert tiny.summary()["q"] / 1e-5 == pytest.approx(small.summary()["q"] / 1e-3, rel=0.05)  # q ~ alpha
    assert tiny.train_loss / 1e-5 == pytest.approx(small.train_loss / 1e-3, rel=0.05)
    # Test error at q -> 0 (uniform attention S = 1/2): sigma^2 E[(1/2 - T_11)^2 + (1/2 - T_22)^2].
    rng = np.random.default_rng(0)
    hs = rng.normal(0, s.sigma, (2, 400_000))
    t1, t2 = target_diagonal(hs[0], hs[1], s.omega, s.A_array)
    mc = s.sigma**2 * np.mean((0.5 - t1) ** 2 + (0.5 - t2) ** 2)
    assert tiny.test_error == pytest.approx(mc, rel=2e-2)


def test_branch_symmetries_are_exact():
    s = Setting()
    pos = solve(s, 1.5, "positional", "fast")
    sem = solve(s, 1.5, "semantic", "fast")
    assert pos.valid and sem.valid
    assert np.all(pos.theta == 0.0) and np.all(pos.hats.thetahat == 0.0) and pos.m_norm > 0.1
    assert pos.m[0, 0] == -pos.m[1, 0]  # antipodal codes: m_2 = -m_1 exactly
    assert np.all(sem.m == 0.0) and np.all(sem.hats.mhat == 0.0) and sem.theta_norm > 0.05
    # Global minimum at alpha = 1.5 (study setting) is the lower of the two.
    assert min(pos.train_loss, sem.train_loss) == solve(s, 1.5, "global", "fast").train_loss


@pytest.mark.parametrize(("omega", "alpha"), [(0.3, 1.5), (0.0, 1.5), (0.3, 0.5)])
def test_global_at_default_precision_is_the_lowest_of_every_branch(omega, alpha):
    """`global` solves at default precision only the branches whose fast point can be the minimum
    (solve_screened); its answer is still the lowest of every branch solved at default precision (solve_all),
    number for number, and the branches left out lie above it there."""
    s = Setting(omega=omega)
    every = solve_all(s, alpha, "default")
    best = min((p for p in every.values() if p.valid), key=lambda p: p.train_loss)
    g = solve(s, alpha, "global", "default")
    assert g.branch == best.branch and g.precision == "default"
    np.testing.assert_array_equal(g.m, best.m)
    assert g.train_loss == best.train_loss and g.test_error == best.test_error
    kept = solve_screened(s, alpha, "default")
    for b in set(every) - set(kept):
        assert every[b].valid and every[b].train_loss > best.train_loss


def test_semantic_branch_collapse_is_reported():
    s = Setting()
    fp = solve(s, 0.3, "semantic", "fast")
    assert not fp.valid and not fp.converged
    assert fp.status == Status.collapsed and "collapsed" in fp.status


def test_linear_baseline_matches_monte_carlo():
    for omega, Amat in [(0.3, ((0.6, 0.4), (0.4, 0.6))), (0.1, ((0.3, 0.7), (0.8, 0.2)))]:
        s = Setting(omega=omega, A=Amat, sigma=0.7)
        b = linear_baseline(s)
        rng = np.random.default_rng(2)
        hs = rng.normal(0, s.sigma, (2, 2_000_000))
        t1, t2 = target_diagonal(hs[0], hs[1], omega, s.A_array)
        # (1/2) sum_{l,k} sigma^2 Var(T_lk), each row (t, 1 - t).
        mc = 0.5 * s.sigma**2 * (2 * t1.var() + 2 * t2.var())
        assert b.test_error_linear == pytest.approx(mc, rel=1e-2)
        np.testing.assert_allclose(b.mean_attention[0, 0], t1.mean(), atol=1e-3)
        np.testing.assert_allclose(b.mean_attention.sum(axis=1), 1.0)
    # The study's value.
    assert linear_baseline(Setting()).test_error_linear == pytest.approx(0.00197, abs=1e-5)


def test_error_estimate_covers_more_precise_solve():
    s = Setting()
    for branch in ("semantic", "positional"):
        fast = solve(s, 1.5, branch, "fast")
        ref = solve(s, 1.5, branch, "default", seed=7)
        for key in ("q", "V", "train_loss", "test_error", "m" if branch == "positional" else "theta"):
            a, b = ({**p.summary(), "train_loss": p.train_loss, "test_error": p.test_error}[key] for p in (fast, ref))
            err = np.hypot(fast.errors[key], ref.errors[key])
            assert abs(a - b) <= 4 * err + 1e-12, (branch, key, a, b, err)


@pytest.mark.parametrize(
    "kwargs,match",
    [(dict(omega=1.5), "omega"), (dict(omega=float("nan")), "omega"), (dict(sigma=0), "sigma"),
     (dict(lam=-1), "lambda"), (dict(A=((0.5, 0.6), (0.4, 0.6))), "row-stochastic"),
     (dict(A=((1.2, -0.2), (0.4, 0.6))), "non-negative"), (dict(A=((1.0,),)), "square"),
     (dict(sigma=float("inf")), "sigma")],
)
def test_bad_settings_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Setting(**kwargs)


@pytest.mark.parametrize("alpha", [0, -1, float("nan"), float("inf")])
def test_bad_alpha_raises(alpha):
    with pytest.raises(ValueError, match="alpha"):
        solve(Setting(), alpha, "positional", "fast")


def test_bad_branch_and_precision():
    with pytest.raises(ValueError, match="branch"):
        solve(Setting(), 1.0, "nonsense")
    with pytest.raises(ValueError, match="precision"):
        solve(Setting(), 1.0, "positional", "ultra")


def test_find_crossing_known_root():
    root, (lo, hi) = find_crossing(lambda a: np.cos(a) - a, 0.0, 1.5, 1e-6)
    assert lo <= 0.7390851332 <= hi and hi - lo <= 2.1e-6
    with pytest.raises(ValueError, match="sign"):
        find_crossing(lambda a: a * a + 1, -1, 1, 1e-6)
    # NaN inside the bracket (a branch that failed to converge there): a wider, still valid bracket.
    root, (lo, hi) = find_crossing(lambda a: np.nan if 0.65 < a < 0.75 else 0.7 - a, 0.0, 1.0, 1e-3)
    assert lo <= 0.7 <= hi and lo < root < hi


def test_cli_theory_json_and_errors(capsys):
    import json

    from attnphase.cli import main

    assert main(["theory", "--alpha", "1.5", "--branch", "semantic", "--precision", "fast", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    keys = {"alpha", "omega", "branch", "q", "m", "theta", "V", "train_loss", "test_error", "converged", "iterations"}
    assert keys <= set(rec[0])
    assert rec[0]["branch"] == "semantic" and isinstance(rec[0]["theta"], float)
    for bad in (["theory", "--omega", "2"], ["theory", "--alpha", "0"], ["theory", "--A", "0.5,0.6;0.4,0.6"],
                ["theory", "--alpha", "1:2"], ["baseline", "--sigma", "-1"]):
        assert main(bad) == 2
        err = capsys.readouterr().err
        assert "error" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main(["baseline", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out[0]["omega"] == 0.3 and 0.0019 < out[0]["test_error_linear"] < 0.0021
