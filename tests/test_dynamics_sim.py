"""Finite-d online SGD (attnphase.experiments.online) and the `attnphase dynamics` command.

The SGD step is held against an independent numpy implementation of the update rule written from the model's
definition (tokens, softmax, residual; no Gram-matrix rewriting), whose gradient is itself checked by finite
differences.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from attnphase.experiments.online import run_online  # noqa: E402
from attnphase.experiments.online.sgd import OnlineSGD, draw_seed, online_rng  # noqa: E402
from attnphase.setting import Setting  # noqa: E402


def _softmax(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _loss(W: np.ndarray, x: np.ndarray, p: np.ndarray, Qs: np.ndarray, st: Setting, untied: bool) -> float:
    d = x.shape[1]
    hs = x @ Qs / math.sqrt(d)
    T = (1 - st.omega) * _softmax(hs @ hs.T) + st.omega * st.A_array
    z = x + p
    r = W.shape[1] // 2
    Q, K = (W[:, :r], W[:, r:]) if untied else (W, W)
    S = _softmax((z @ Q) @ (z @ K).T / d)
    return float(((T @ x - S @ z) ** 2).sum() / (2 * d))


def _grad(W: np.ndarray, x: np.ndarray, p: np.ndarray, Qs: np.ndarray, st: Setting, untied: bool) -> np.ndarray:
    """d loss / d W by the chain rule through yhat = S z, straight from the tokens."""
    d = x.shape[1]
    hs = x @ Qs / math.sqrt(d)
    T = (1 - st.omega) * _softmax(hs @ hs.T) + st.omega * st.A_array
    z = x + p
    r = W.shape[1] // 2
    Q, K = (W[:, :r], W[:, r:]) if untied else (W, W)
    H, G = z @ Q / math.sqrt(d), z @ K / math.sqrt(d)
    S = _softmax(H @ G.T)
    g_yhat = -(T @ x - S @ z) / d  # (L, d)
    g_S = g_yhat @ z.T
    g_sc = np.zeros_like(S)
    for ell in range(S.shape[0]):  # softmax Jacobian row by row: diag(s) - s s^T
        s = S[ell]
        g_sc[ell] = (np.diag(s) - np.outer(s, s)) @ g_S[ell]
    gQ = z.T @ (g_sc @ G) / math.sqrt(d)
    gK = z.T @ (g_sc.T @ H) / math.sqrt(d)
    return np.concatenate([gQ, gK], axis=1) if untied else gQ + gK


def _p(d: int) -> np.ndarray:
    p1 = np.full(d, 1 / math.sqrt(d))
    return np.stack([p1, -p1])


@pytest.mark.parametrize("untied", [False, True])
def test_reference_gradient_is_the_finite_difference_gradient(untied: bool) -> None:
    st, d = Setting(omega=0.3), 7
    rng = np.random.default_rng(3)
    W = rng.normal(size=(d, 2 if untied else 1)) * 2
    x, Qs = 0.5 * rng.normal(size=(2, d)), rng.normal(size=(d, 1))
    g = _grad(W, x, _p(d), Qs, st, untied)
    fd = np.zeros_like(W)
    eps = 1e-6
    for idx in np.ndindex(*W.shape):
        e = np.zeros_like(W)
        e[idx] = eps
        fd[idx] = (_loss(W + e, x, _p(d), Qs, st, untied) - _loss(W - e, x, _p(d), Qs, st, untied)) / (2 * eps)
    assert np.abs(g - fd).max() < 1e-7 * max(1.0, np.abs(fd).max())


@pytest.mark.parametrize("untied", [False, True])
def test_sgd_steps_equal_the_numpy_update_rule(untied: bool) -> None:
    st = Setting(omega=0.4, lam=0.3, student="untied" if untied else "tied")
    d, lr, steps, seeds = 40, 0.8, 6, (3, 11)
    cols = st.field_rank
    probs = [draw_seed(st, d, s, 0.7, 5, cols) for s in seeds]
    sgd = OnlineSGD(st, d, probs, lr, untied=untied, block=4)  # two blocks: 4 + 2 samples
    online = sgd.advance(steps)
    for i, (s, pr) in enumerate(zip(seeds, probs, strict=True)):
        W = pr.W0.numpy().copy()
        Qs = pr.Q_star.numpy()
        rng = online_rng(s)
        losses = []
        for _ in range(steps):
            x = st.sigma * rng.standard_normal((st.L, d))
            losses.append(_loss(W, x, _p(d), Qs, st, untied))
            W = W - lr * (_grad(W, x, _p(d), Qs, st, untied) + (st.lam / d) * W)
        assert np.abs(sgd.W[i].numpy() - W).max() < 1e-12 * max(1.0, np.abs(W).max())
        assert online[i] == pytest.approx(np.mean(losses), rel=1e-10)


def test_block_size_and_batching_do_not_change_a_seed() -> None:
    st, d = Setting(omega=0.3), 30
    a = OnlineSGD(st, d, [draw_seed(st, d, s, 0.5, 3, 1) for s in (0, 1, 2)], 1.5, block=64)
    b = OnlineSGD(st, d, [draw_seed(st, d, 1, 0.5, 3, 1)], 1.5, block=5)
    a.advance(37)
    b.advance(37)
    assert float((a.W[1] - b.W[0]).abs().max()) < 1e-12


def test_overlaps_and_test_error_are_measured_from_the_weights() -> None:
    st, d = Setting(omega=0.3), 50
    probs = [draw_seed(st, d, s, 1.0, 40, 1) for s in (5, 6)]
    sgd = OnlineSGD(st, d, probs, 2.0)
    sgd.advance(120)
    q, m, th = sgd.overlaps()
    for i, pr in enumerate(probs):
        W, Qs = sgd.W[i].numpy(), pr.Q_star.numpy()
        s2 = st.sigma ** 2
        assert q[i, 0, 0] == pytest.approx(s2 * W[:, 0] @ W[:, 0] / d, rel=1e-12)
        assert m[i, 0, 0] == pytest.approx(W[:, 0].sum() / d, rel=1e-12)  # the study's m = 1^T Q / d
        assert m[i, 1, 0] == pytest.approx(-W[:, 0].sum() / d, rel=1e-12)
        assert th[i, 0, 0] == pytest.approx(s2 * W[:, 0] @ Qs[:, 0] / d, rel=1e-12)
        x = pr.test_x.numpy()
        errs = [_loss(W, x[k], _p(d), Qs, st, False) for k in range(x.shape[0])]
        assert sgd.test_error()[i] == pytest.approx(np.mean(errs), rel=1e-10)


def test_run_is_reproducible_resumable_and_starts_at_the_drawn_overlaps(tmp_path) -> None:
    st = Setting(omega=0.3)
    kw = dict(d=60, lr=3.0, init_scale=0.4, t_max=2.0, n_points=5, n_test=30)
    a = run_online(st, seeds=[0, 1], **kw)
    b = run_online(st, seeds=[1], **kw)
    assert a.status == "ok" and not a.warnings
    assert np.array_equal(a.t, [0.0, 0.5, 1.0, 1.5, 2.0])
    assert np.abs(a.m[1] - b.m[0]).max() < 1e-12 and np.abs(a.test_error[1] - b.test_error[0]).max() < 1e-12
    W0 = draw_seed(st, 60, 0, 0.4, 1, 1).W0.numpy()[:, 0]
    assert a.q[0, 0, 0, 0] == pytest.approx(0.25 * W0 @ W0 / 60, rel=1e-12)
    assert np.isnan(a.train_error[0, 0]) and np.all(np.isfinite(a.train_error[:, 1:]))
    path = tmp_path / "s.sqlite"
    c = run_online(st, seeds=[0, 1], store=str(path), **kw)
    d = run_online(st, seeds=[1, 0, 2], store=str(path), batch=2, **kw)
    assert c.reused == 0 and d.reused == 2
    assert np.abs(d.theta[:2] - a.theta[::-1]).max() < 1e-12
    mu = d.mean()
    assert mu["m"].shape == (5,) and np.all(np.isfinite(mu["m_sem"]))


def test_divergence_is_a_status() -> None:
    r = run_online(Setting(omega=0.3), d=20, lr=5000.0, init_scale=3.0, t_max=3.0, n_points=3, n_test=5)
    assert r.status == "diverged" and str(r.warnings[0].code) == "diverged"


@pytest.mark.parametrize("kw", [dict(d=1), dict(lr=0.0), dict(lr=math.inf), dict(init_scale=-1.0), dict(t_max=0.0),
                                dict(n_points=1), dict(seeds=[1, 1]), dict(seeds=[-1]), dict(d=2.5),
                                dict(t_max=1e9)])
def test_bad_input_is_refused_before_work(kw) -> None:
    base = dict(d=20, lr=1.0, init_scale=0.1, t_max=1.0, seeds=[0], n_points=3)
    with pytest.raises((ValueError, TypeError)):
        run_online(Setting(), **{**base, **kw})


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attnphase", "dynamics", *argv], capture_output=True, text=True,
                          timeout=300)


def test_cli_json_has_the_fields_per_time_point(tmp_path) -> None:
    out = _cli("--lr", "5", "--t-max", "2", "--n-points", "5", "--d", "40", "--seeds", "0:1", "--n-test", "20",
               "--json", "--quiet", "--store", str(tmp_path / "s.sqlite"))
    assert out.returncode == 0, out.stderr
    recs = json.loads(out.stdout)
    sources = [r["source"] for r in recs]
    assert sources.count("ode") == 5 and sources.count("sgd") == 5 and sources.count("ode_seeds") == 5
    for r in recs:
        for k in ("t", "q", "m", "theta", "test_error"):
            assert k in r
    sgd = [r for r in recs if r["source"] == "sgd"]
    assert [r["t"] for r in sgd] == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.0])
    # the SGD mean equals the library's numbers for the same seeds
    res = run_online(Setting(omega=0.3), d=40, lr=5.0, init_scale=0.1, t_max=2.0, seeds=[0, 1], n_points=5,
                     n_test=20)
    assert [r["m"] for r in sgd] == pytest.approx(res.mean()["m"].tolist(), rel=1e-12)
    # the ODE's start is the typical one: m = s / sqrt(d), q = sigma^2 s^2
    ode0 = next(r for r in recs if r["source"] == "ode")
    assert ode0["m"] == pytest.approx(0.1 / math.sqrt(40)) and ode0["q"] == pytest.approx(0.25 * 0.01)


@pytest.mark.parametrize("argv", [["--lr", "0"], ["--lr", "nan"], ["--init-scale", "-1"], ["--t-max", "0"],
                                  ["--d", "1"], ["--seeds", "1,1"], ["--seeds", "x"], ["--omega", "0.1,0.2"],
                                  ["--omega", "2"], ["--lam", "-1"], ["--t-max", "1e9"], ["--student", "untied"],
                                  ["--diagram", "--init-scales", "0,1"], ["--device", "tpu"]])
def test_cli_bad_input_is_one_line_exit_2(argv, capsys) -> None:
    from attnphase.cli import main

    assert main(["dynamics", *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.slow
def test_reproduce_section_writes_figures_and_resumes(tmp_path) -> None:
    from attnphase.reproduce.dynamics_section import DynamicsPlan, dynamics_section

    plan = DynamicsPlan("tiny", d=30, seeds=(0, 1), lr=5.0, init_scales=(0.1,), t_max=2.0, n_points=5, n_test=10,
                        diagram_omegas=(0.3,), diagram_t_max=2.0)
    fields = [{"omega": 0.3, "alpha_c": 0.9}]
    a = dynamics_section(tmp_path, tmp_path / "r.sqlite", plan=plan, fields=fields)
    b = dynamics_section(tmp_path, tmp_path / "r.sqlite", plan=plan, fields=fields)
    assert a.reused == 0 and b.reused == 2
    assert a.comparisons[0]["dist_m"] == pytest.approx(b.comparisons[0]["dist_m"], rel=1e-12)
    assert b.diagram[0]["alpha_c"] == 0.9
    for paths in b.figures.values():
        assert all(p.is_file() for p in paths)
    assert "## Online SGD" in b.markdown()


@pytest.mark.slow
def test_mean_trajectory_follows_the_ode() -> None:
    """d = 500, 8 seeds (benchmarks/dynamics_vs_ode.py's first row): the seeds' mean stays within 3 standard errors
    of the mean of the ODEs started from each seed's own overlaps (measured: 1.1 for |m|), the mechanisms agree and
    the median escape times are within 10% (measured 6.98 and 6.86)."""
    from attnphase.experiments.online.compare import compare_with_ode

    res = run_online(Setting(omega=0.3), d=500, lr=5.0, init_scale=0.1, t_max=30.0, seeds=range(8), n_points=61,
                     n_test=200)
    c = compare_with_ode(res)
    assert c.mechanisms_sgd == c.mechanisms_ode == ("positional",) * 8
    for k in ("q", "m", "theta"):
        assert c.distance[k] < 3 * c.sem[k], k
    med_sgd, med_ode = np.median(c.escape_sgd["m"]), np.median(c.escape_ode["m"])
    assert abs(med_sgd - med_ode) < 0.1 * med_ode


def test_an_informed_start_adds_the_tilt_to_the_overlaps() -> None:
    st, d = Setting(omega=0.3), 50
    base, tilted = draw_seed(st, d, 4, 0.3, 1, 1), draw_seed(st, d, 4, 0.3, 1, 1, tilt=(0.05, 0.2))
    dW = (tilted.W0 - base.W0).numpy()[:, 0]
    Qs = base.Q_star.numpy()[:, 0]
    assert dW.sum() / d == pytest.approx(0.05 + 0.2 * Qs.sum() / d, rel=1e-12)  # m_1 = 1^T Q / d
    assert np.allclose(dW, 0.05 + 0.2 * Qs, atol=1e-14)
