"""General proximal kernel (any L, r): derivatives, starts, agreement with today's L = 2 kernel, brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize

from attnphase.problem import softmax_rows
from attnphase.theory.prox._general_draws import draw_problem
from attnphase.theory.prox._general_kernel import derivatives
from attnphase.theory.prox._general_starts import own_starts as _own_starts_flat
from attnphase.theory.prox._general_starts import score_form
from attnphase.theory.prox.general import ProxResult, objective, own_starts, prox_general
from attnphase.theory.prox.reference import prox_reference
from attnphase.theory.prox.two_token import loss_zeros, solve_prox


def _naive_objective(h, w, T, Vinv, sigma2):
    """One point, explicit loops: the definition of F read off literally."""
    L, r = h.shape
    quad = sum(0.5 * (h[l] - w[l]) @ Vinv @ (h[l] - w[l]) for l in range(L))
    loss = 0.0
    for l in range(L):
        scores = [float(h[l] @ h[k]) for k in range(L)]
        ex = [np.exp(s - max(scores)) for s in scores]
        for k in range(L):
            loss += (ex[k] / sum(ex) - T[l, k]) ** 2
    return quad + 0.5 * sigma2 * loss


def test_objective_matches_definition():
    rng = np.random.default_rng(0)
    for L, r in ((2, 1), (3, 2), (4, 1)):
        p = draw_problem(L, r, 20, seed=L + r)
        h = rng.normal(0, 1.5, p.w.shape)
        M = rng.normal(size=(r, r))
        Vinv = M @ M.T + 0.1 * np.eye(r)
        ref = [_naive_objective(h[i], p.w[i], p.T[i], Vinv, 0.3) for i in range(20)]
        np.testing.assert_allclose(objective(h, p.w, p.T, Vinv, 0.3), ref, rtol=1e-13)


@pytest.mark.parametrize("L,r", [(2, 1), (3, 1), (2, 2), (4, 1), (3, 2)])
def test_gradient_and_hessian_match_finite_differences(L, r):
    rng = np.random.default_rng(L * 10 + r)
    n, N = 40, L * r
    h = rng.normal(0, 1.2, (n, N))
    w = rng.normal(0, 1.0, (n, N))
    T = rng.dirichlet(np.ones(L), (n, L))
    M = rng.normal(size=(r, r))
    Vinv = M @ M.T / r + 0.1 * np.eye(r)
    val, g, H = derivatives(h, w, T, Vinv, 0.25)

    def F(x):
        return objective(x.reshape(n, L, r), w.reshape(n, L, r), T, Vinv, 0.25)

    np.testing.assert_allclose(val, F(h), rtol=1e-12)
    eps = 1e-5
    for j in range(N):
        e = np.zeros(N)
        e[j] = eps
        fd_g = (F(h + e) - F(h - e)) / (2 * eps)
        np.testing.assert_allclose(g[:, j], fd_g, atol=1e-8)
        fd_H = (derivatives(h + e, w, T, Vinv, 0.25)[1] - derivatives(h - e, w, T, Vinv, 0.25)[1]) / (2 * eps)
        np.testing.assert_allclose(H[:, :, j], fd_H, atol=1e-7)
    np.testing.assert_allclose(H, H.transpose(0, 2, 1), atol=1e-14)


def test_loss_zero_start_recovers_exact_zero():
    """With T = softmax(h h^T) exactly, the zero start has loss 0 and the same scores as h (up to the flat
    directions: for r >= L, translations orthogonal to the token differences shift whole rows of scores)."""
    rng = np.random.default_rng(1)
    for L, r in ((2, 1), (3, 1), (4, 1), (3, 2), (4, 2), (2, 2)):
        h = rng.normal(0, 0.8, (100, L, r))
        T = softmax_rows(h @ h.transpose(0, 2, 1))
        st = own_starts(h, T, np.eye(r) / 20)
        for k in (1, 2):
            z = st[:, k]
            assert objective(z, z, T, np.eye(r), 1.0).max() < 1e-20
            if r < L:
                np.testing.assert_allclose(z @ z.transpose(0, 2, 1), h @ h.transpose(0, 2, 1), atol=1e-9)
        if r < L:
            # Aligned with w = h by Procrustes: the start is h itself.
            np.testing.assert_allclose(st[:, 1], h, atol=1e-9)


def test_loss_zero_matches_closed_form_for_two_tokens():
    p = draw_problem(2, 1, 500, seed=4)
    z1, z2 = loss_zeros(p.T[:, 0, 0], p.T[:, 1, 1], p.w[:, 0, 0], p.w[:, 1, 0])
    st = own_starts(p.w, p.T, p.Vinv)
    sign = np.sign(st[:, 1, 0, 0] * z1)
    np.testing.assert_allclose(st[:, 1, 0, 0], sign * z1, atol=1e-10)
    np.testing.assert_allclose(st[:, 1, 1, 0], sign * z2, atol=1e-10)
    np.testing.assert_allclose(st[:, 2], -st[:, 1], atol=1e-12)
    # The aligned zero is the one the quadratic prefers: it points along w.
    assert np.all(np.einsum("nla,nla->n", st[:, 1], p.w) >= -1e-12)


def test_agrees_with_two_token_kernel():
    """L = 2, r = 1: the same Moreau envelope and minimiser as today's kernel, never a higher value.

    The general kernel's extra midpoint start finds a lower minimum at a few large-|w| points that today's three
    starts miss (about 1 in 4000 of these draws); there the lower value must be a genuine one."""
    lower_total = 0
    for seed in range(6):
        p = draw_problem(2, 1, 4096, seed=seed)
        res = prox_general(p.w, p.T, p.Vinv, p.sigma2)
        old = solve_prox(p.w[:, 0, 0], p.w[:, 1, 0], p.T[:, 0, 0], p.T[:, 1, 1], p.V, p.sigma2)
        assert res.converged.all() and old.converged.all()
        assert np.all(res.value <= old.value + 1e-9)
        equal = np.abs(res.value - old.value) < 1e-9
        assert equal.mean() > 0.998
        lower = np.nonzero(~equal)[0]
        lower_total += len(lower)
        np.testing.assert_allclose(objective(res.h[lower], p.w[lower], p.T[lower], p.Vinv, p.sigma2),
                                   res.value[lower], atol=1e-14)
        h_old = np.stack([old.h1, old.h2], axis=1)[:, :, None]
        same = np.abs(res.h - h_old).max(axis=(1, 2)) < 1e-6
        # Different minimisers only at exact mirror ties (same value) or where the general kernel went lower.
        assert np.all(same[equal] | (np.abs(res.h + h_old).max(axis=(1, 2))[equal] < 1e-6))
        assert same[equal].mean() > 0.999
    assert lower_total < 30


def _brute_force(w, T, Vinv, sigma2, grid_n, seed, n_polish=12, n_random=12):
    """Global minimum of F at one point: dense grid over a box holding every candidate minimiser, then a
    Nelder-Mead polish from the best grid cells and from random points (plain numpy/scipy, no compiled code)."""
    L, r = w.shape
    N = L * r
    zero_scale = 3.0  # the loss's zeros have O(1) scores here; minimisers lie between them and w
    B = max(np.abs(w).max(), zero_scale) * 1.15
    axes = [np.linspace(-B, B, grid_n)] * N
    G = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, L, r)
    F = objective(G, np.broadcast_to(w, G.shape), np.broadcast_to(T, (len(G), L, L)), Vinv, sigma2)
    order = np.argsort(F)
    rng = np.random.default_rng(seed)
    cands = [G[i] for i in order[:n_polish]] + list(rng.normal(0, 1.5, (n_random, L, r)))

    def f(x):
        return objective(x.reshape(1, L, r), w[None], T[None], Vinv, sigma2)[0]

    best = np.inf
    for x0 in cands:
        res = minimize(f, np.ravel(x0), method="Nelder-Mead",
                       options=dict(xatol=1e-9, fatol=1e-15, maxiter=20000, maxfev=20000))
        best = min(best, res.fun)
    return best


def _hard_points(p, res, k):
    """Indices of the largest |w| (where a basin between w and the zero can win) and of the smallest gaps between
    the best and second-best start (near switching surfaces), plus random ones."""
    n = len(res.value)
    rng = np.random.default_rng(0)
    own = own_starts(p.w, p.T, p.Vinv)
    vals = np.stack([prox_general(p.w, p.T, p.Vinv, p.sigma2, own[:, j:j + 1], own=False).value
                     for j in range(own.shape[1])], axis=1)
    vals = np.where(np.isnan(vals), np.inf, vals)  # per-token starts are NaN (skipped) at small |w_l|
    vals.sort(axis=1)
    second_gap = np.where(vals[:, 1] - vals[:, 0] > 1e-9, vals[:, 1] - vals[:, 0], np.inf)
    big_w = np.argsort(-np.abs(p.w).max(axis=(1, 2)))[:k]
    close = np.argsort(second_gap)[:k]
    return np.unique(np.concatenate([big_w, close, rng.choice(n, k, replace=False)]))


@pytest.mark.parametrize("L,r,grid_n", [(3, 1, 41), (2, 2, 19), (4, 1, 19)])
def test_prox_equals_brute_force_quick(L, r, grid_n):
    p = draw_problem(L, r, 512, seed=7, q=0.8, m=0.4, V=15.0, corr=0.4)
    res = prox_general(p.w, p.T, p.Vinv, p.sigma2)
    assert res.converged.all()
    idx = _hard_points(p, res, 1)
    for i in idx:
        ref = _brute_force(p.w[i], p.T[i], p.Vinv, p.sigma2, grid_n, seed=int(i), n_polish=4, n_random=2)
        assert res.value[i] <= ref + 1e-9, (i, res.value[i], ref)
        # and the kernel's minimiser is a real point with that value
        assert objective(res.h[i:i + 1], p.w[i:i + 1], p.T[i:i + 1], p.Vinv, p.sigma2)[0] == pytest.approx(
            res.value[i], abs=1e-14)


@pytest.mark.slow
@pytest.mark.parametrize("L,r,grid_n", [(3, 1, 41), (2, 2, 21), (4, 1, 21)])
@pytest.mark.parametrize("setting", range(4))
def test_prox_equals_brute_force_channel_draws(L, r, grid_n, setting):
    """Channel-like draws (random q, m, V, teacher correlation per setting), hardest points first."""
    p = draw_problem(L, r, 4096, seed=100 + setting)
    res = prox_general(p.w, p.T, p.Vinv, p.sigma2)
    assert res.converged.all()
    for i in _hard_points(p, res, 8):
        ref = _brute_force(p.w[i], p.T[i], p.Vinv, p.sigma2, grid_n, seed=int(i))
        assert res.value[i] <= ref + 1e-9, (i, res.value[i], ref)


def test_moreau_envelope_gradient():
    """d/dw min_h F = Vinv (w - hhat) per token: ties the returned minimiser to the returned value."""
    p = draw_problem(3, 2, 300, seed=11, q=0.3, m=0.2, V=12.0, corr=0.5)
    res = prox_general(p.w, p.T, p.Vinv, p.sigma2)
    eps = 1e-5
    expected = (p.w - res.h) @ p.Vinv
    smooth = 0
    for l, a in itertools.product(range(3), range(2)):
        e = np.zeros_like(p.w)
        e[:, l, a] = eps
        up = prox_general(p.w + e, p.T, p.Vinv, p.sigma2).value
        dn = prox_general(p.w - e, p.T, p.Vinv, p.sigma2).value
        ok = np.abs(up + dn - 2 * res.value) < 1e-9  # away from basin switches the envelope is smooth
        smooth += ok.mean()
        np.testing.assert_allclose((up - dn)[ok] / (2 * eps), expected[ok, l, a], atol=1e-7)
    assert smooth / 6 > 0.95


def test_rotation_equivariance():
    """Isotropic Vinv: w -> w R gives h -> h R and the same value (the loss sees only the scores)."""
    p = draw_problem(3, 2, 500, seed=12, q=0.4, m=0.3, V=20.0, corr=0.3)
    c, s = np.cos(0.7), np.sin(0.7)
    R = np.array([[c, -s], [s, c]])
    a = prox_general(p.w, p.T, p.Vinv, p.sigma2)
    b = prox_general(p.w @ R, p.T, p.Vinv, p.sigma2)
    np.testing.assert_allclose(b.value, a.value, atol=1e-10)
    unique = np.abs(b.h - a.h @ R).max(axis=(1, 2)) < 1e-6
    assert unique.mean() > 0.99


def test_caller_starts_are_used_and_non_finite_ones_skipped():
    p = draw_problem(3, 1, 200, seed=13)
    ref = prox_general(p.w, p.T, p.Vinv, p.sigma2)
    n_own = own_starts(p.w[:1], p.T[:1], p.Vinv).shape[1]
    starts = np.full((200, 2, 3, 1), np.nan)
    starts[:, 1] = ref.h  # the known minimiser as the second extra start
    res = prox_general(p.w, p.T, p.Vinv, p.sigma2, starts)
    np.testing.assert_allclose(res.value, ref.value, atol=1e-12)
    assert set(np.unique(res.winner)) <= set(range(n_own)) | {n_own + 1}
    only = prox_general(p.w, p.T, p.Vinv, p.sigma2, starts, own=False)
    assert np.all(only.winner == 1) and np.all(only.iterations == 0)
    np.testing.assert_array_equal(only.h, ref.h)


def test_result_fields_and_convergence_flag():
    p = draw_problem(4, 1, 300, seed=14)
    res = prox_general(p.w, p.T, p.Vinv, p.sigma2)
    assert isinstance(res, ProxResult)
    assert res.h.shape == (300, 4, 1) and res.value.shape == (300,) and res.converged.dtype == bool
    np.testing.assert_allclose(objective(res.h, p.w, p.T, p.Vinv, p.sigma2), res.value, atol=1e-14)
    assert res.converged.all() and (res.grad_norm < 1e-9).all()
    # One Newton step from each start cannot reach the tolerance everywhere: flagged, not hidden.
    short = prox_general(p.w, p.T, p.Vinv, p.sigma2, max_iter=1)
    assert not short.converged.all()
    np.testing.assert_array_equal(short.converged, short.grad_norm < 1e-9)


def test_saturated_scores_give_no_nan():
    L = 3
    w = np.array([[[1e3], [-1e3], [5.0]], [[1e6], [2e6], [-1e6]], [[0.0], [0.0], [0.0]]])
    T = np.full((3, L, L), 1.0 / L)
    T[1] = [[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]]
    res = prox_general(w, T, np.eye(1) / 15.0, 0.25)
    assert np.all(np.isfinite(res.h)) and np.all(np.isfinite(res.value))
    assert res.converged.all()
    # A target with exact zeros (an underflowed softmax) is accepted and handled.
    T0 = np.array([[[1.0, 0.0, 0.0], [0.0, 0.5, 0.5], [0.2, 0.2, 0.6]]])
    res0 = prox_general(np.array([[[0.3], [-0.2], [0.1]]]), T0, np.eye(1) / 15.0, 0.25)
    assert np.all(np.isfinite(res0.h)) and res0.converged.all()
    h = np.array([[1e100, -1e100, 3.0], [1e3, -1e3, 0.0]])
    val, g, H = derivatives(h, np.zeros_like(h), T[:2], np.eye(1) / 15.0, 0.25)
    assert np.all(np.isfinite(val)) and np.all(np.isfinite(g)) and np.all(np.isfinite(H))
    assert np.all(np.isfinite(objective(h[:, :, None], np.zeros((2, 3, 1)), T[:2], np.eye(1), 0.25)))


def test_flat_start_kernel_layout_matches_wrapper():
    p = draw_problem(2, 2, 50, seed=15)
    flat = _own_starts_flat(p.w.reshape(50, 4), p.T, p.Vinv)
    np.testing.assert_array_equal(flat.reshape(50, -1, 2, 2), own_starts(p.w, p.T, p.Vinv))


@pytest.mark.parametrize("kwargs,err,match", [
    (dict(w=np.zeros((5, 3))), ValueError, "shape"),
    (dict(w=np.zeros((5, 1, 1)), T=np.ones((5, 1, 1))), ValueError, "L >= 2"),
    (dict(T=np.full((5, 3, 3), 0.5)), ValueError, "rows summing"),
    (dict(T=np.full((5, 2, 2), 1 / 2)), ValueError, "T must have shape"),
    (dict(Vinv=-np.eye(1)), ValueError, "positive definite"),
    (dict(Vinv=np.eye(2)), ValueError, "Vinv must have shape"),
    (dict(sigma2=0.0), ValueError, "sigma2"),
    (dict(sigma2="0.25"), TypeError, "sigma2"),
    (dict(w=np.full((5, 3, 1), np.nan)), ValueError, "finite"),
    (dict(starts=np.zeros((5, 2, 3))), ValueError, "starts"),
    (dict(max_iter=0), ValueError, "max_iter"),
    (dict(gtol=-1.0), ValueError, "gtol"),
])
def test_bad_input_raises(kwargs, err, match):
    args = dict(w=np.zeros((5, 3, 1)), T=np.full((5, 3, 3), 1 / 3), Vinv=np.eye(1) / 15, sigma2=0.25)
    extra = {k: kwargs.pop(k) for k in list(kwargs) if k in ("starts", "max_iter", "gtol")}
    args.update(kwargs)
    with pytest.raises(err, match=match):
        prox_general(args["w"], args["T"], args["Vinv"], args["sigma2"], extra.pop("starts", None), **extra)


# -- The untied student's loss: scores h^Q h^K^T of h = (h^Q, h^K) (docs/untied.md)

def _naive_untied_objective(h, w, T, Vinv, sigma2):
    """One point, explicit loops: F with the scores h^Q_l . h^K_k."""
    L, r2 = h.shape
    r = r2 // 2
    quad = sum(0.5 * (h[l] - w[l]) @ Vinv @ (h[l] - w[l]) for l in range(L))
    loss = 0.0
    for l in range(L):
        scores = [float(h[l, :r] @ h[k, r:]) for k in range(L)]
        ex = [np.exp(s - max(scores)) for s in scores]
        for k in range(L):
            loss += (ex[k] / sum(ex) - T[l, k]) ** 2
    return quad + 0.5 * sigma2 * loss


def test_untied_objective_matches_definition_and_the_reference():
    from attnphase.theory.prox.reference import objective as ref_objective

    p = draw_problem(3, 4, 20, seed=21)
    h = p.w + np.random.default_rng(2).normal(0, 0.7, p.w.shape)
    ref = [_naive_untied_objective(h[i], p.w[i], p.T[i], p.Vinv, 0.3) for i in range(20)]
    np.testing.assert_allclose(objective(h, p.w, p.T, p.Vinv, 0.3, untied=True), ref, rtol=1e-13)
    np.testing.assert_allclose(ref_objective(h, p.w, p.T, p.Vinv, 0.3, untied=True), ref, rtol=1e-13)
    n, L, r2 = h.shape
    kv = derivatives(h.reshape(n, -1), p.w.reshape(n, -1), p.T, p.Vinv, 0.3, score_form(2))[0]
    np.testing.assert_allclose(kv, ref, rtol=1e-13)


def test_untied_at_equal_halves_is_the_tied_loss():
    p = draw_problem(3, 2, 30, seed=22)
    z = p.w[:, :, :2]
    zz = np.concatenate([z, z], axis=2)
    zero = np.zeros_like
    # the loss parts (objective minus the quadratic at w = 0) agree
    untied = objective(zz, zero(zz), p.T, np.eye(4), 0.25, untied=True) - 0.5 * (zz**2).sum((1, 2))
    tied = objective(z, zero(z), p.T, np.eye(2), 0.25) - 0.5 * (z**2).sum((1, 2))
    np.testing.assert_allclose(untied, tied, rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("L,r", [(2, 1), (3, 1), (2, 2), (4, 1)])
def test_untied_gradient_and_hessian_match_finite_differences(L, r):
    p = draw_problem(L, 2 * r, 40, seed=30 + L + r)
    rng = np.random.default_rng(L * 10 + r)
    n, N = 40, L * 2 * r
    h = (p.w + rng.normal(0, 0.8, p.w.shape)).reshape(n, N)
    w = p.w.reshape(n, N)
    B = score_form(r)
    val, g, H = derivatives(h, w, p.T, p.Vinv, 0.25, B)
    eps = 1e-6

    def F(x):
        return objective(x.reshape(n, L, 2 * r), p.w, p.T, p.Vinv, 0.25, untied=True)

    np.testing.assert_allclose(val, F(h), rtol=1e-13)
    for j in range(N):
        e = np.zeros(N)
        e[j] = eps
        np.testing.assert_allclose(g[:, j], (F(h + e) - F(h - e)) / (2 * eps), atol=1e-8)
        fd_H = (derivatives(h + e, w, p.T, p.Vinv, 0.25, B)[1] - derivatives(h - e, w, p.T, p.Vinv, 0.25, B)[1])
        np.testing.assert_allclose(H[:, :, j], fd_H / (2 * eps), atol=1e-7)
    np.testing.assert_allclose(H, H.transpose(0, 2, 1), atol=1e-14)


@pytest.mark.parametrize("L,r", [(2, 1), (3, 1), (4, 2)])
def test_untied_zero_starts_are_exact_zeros(L, r):
    """For L = 2 (any T) and for T = softmax(h^Q h^K^T) of rank r, the lifted tied zero (L = 2) and the SVD
    factorisation of the row-centred log T are zeros of the loss, and their mirrors too."""
    rng = np.random.default_rng(5)
    hq, hk = rng.normal(0, 0.8, (2, 60, L, r))
    T = softmax_rows(hq @ hk.transpose(0, 2, 1)) if L > 2 else draw_problem(2, 2, 60, seed=3).T
    w = rng.normal(0, 0.5, (60, L, 2 * r))
    st = own_starts(w, T, np.eye(2 * r) / 20, untied=True)
    assert st.shape == (60, 7, L, 2 * r)
    np.testing.assert_array_equal(st[:, 0], w)
    for k in ((1, 2, 3, 4) if L == 2 else (3, 4)):
        z = st[:, k]
        assert objective(z, z, T, np.eye(2 * r), 1.0, untied=True).max() < 1e-20
    # the SVD start is aligned with w by the joint rotation: its mirror is no closer
    d3 = ((st[:, 3] - w) ** 2).sum(axis=(1, 2))
    d4 = ((st[:, 4] - w) ** 2).sum(axis=(1, 2))
    assert np.all(d3 <= d4 + 1e-12)


@pytest.mark.parametrize("n,n_random", [(4, 8), pytest.param(24, 24, marks=pytest.mark.slow)])
def test_untied_prox_agrees_with_the_reference(n, n_random):
    """The scipy reference (L-BFGS from w, -w and random starts; its own numpy gradient) never goes lower."""
    p = draw_problem(2, 2, n, seed=41, q=0.6, m=0.4, V=15.0, corr=0.5)
    res = prox_general(p.w, p.T, p.Vinv, p.sigma2, untied=True)
    ref = prox_reference(p.w, p.T, p.Vinv, p.sigma2, untied=True, n_random=n_random)
    assert res.converged.all()
    assert np.all(res.value <= ref.value + 1e-10)
    np.testing.assert_allclose(res.value, ref.value, atol=1e-9)
    np.testing.assert_allclose(objective(res.h, p.w, p.T, p.Vinv, p.sigma2, untied=True), res.value, atol=1e-14)


def test_untied_prox_joint_sign_symmetry_and_random_starts():
    """(h^Q, h^K) -> -(h^Q, h^K) is exact: prox(-w) = -prox(w).  The own starts reach the best of them plus 24
    random starts (measured over 20 000 draws: 1 point in 20 000 missed, by 1e-2 in F)."""
    p = draw_problem(2, 2, 512, seed=43)
    res = prox_general(p.w, p.T, p.Vinv, p.sigma2, untied=True)
    neg = prox_general(-p.w, p.T, p.Vinv, p.sigma2, untied=True)
    np.testing.assert_allclose(neg.value, res.value, atol=1e-12)
    rng = np.random.default_rng(0)
    rnd = np.concatenate([rng.normal(0, 1.5, (512, 12, 2, 2)), rng.normal(0, 0.7, (512, 12, 2, 2))], axis=1)
    best = prox_general(p.w, p.T, p.Vinv, p.sigma2, rnd, untied=True)
    assert np.sum(res.value > best.value + 1e-9) <= 1
    assert res.converged.all()


def test_untied_protocol_and_bad_input():
    from attnphase.theory.prox import prox

    p = draw_problem(2, 2, 8, seed=44)
    out = prox(p.w, p.T, p.Vinv, p.sigma2, untied=True)
    np.testing.assert_allclose(out.value, prox_general(p.w, p.T, p.Vinv, p.sigma2, untied=True).value)
    with pytest.raises(ValueError, match="l2r1"):
        prox(p.w[:, :, :1], p.T, p.Vinv[:1, :1], p.sigma2, kernel="l2r1", untied=True)
    with pytest.raises(ValueError, match="even"):
        prox_general(p.w[:, :, :1], p.T, p.Vinv[:1, :1], p.sigma2, untied=True)
    with pytest.raises(TypeError, match="untied"):
        prox_general(p.w, p.T, p.Vinv, p.sigma2, untied="yes")
