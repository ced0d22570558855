"""Finite-d experiments: data, model, risk, optimisers, measurements, CLI (issue 3)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from conftest import assert_gradient_matches_autograd_and_finite_differences

from attnphase import Setting
from attnphase.cli import main
from attnphase.experiments.simulation import (
    EmpiricalRisk,
    SimulationResult,
    attention_output,
    fit_linear,
    initial_Q,
    linear_test_error,
    sample_dataset,
    sample_errors,
    simulate,
)

STUDY = Setting()


def _small(seed: int = 0, d: int = 7, alpha: float = 2.0, n_test: int = 11, setting: Setting = STUDY):
    return sample_dataset(setting, d, alpha, seed=seed, n_test=n_test, device="cpu")


# --- data -------------------------------------------------------------------------------------------


def test_labels_follow_the_teacher_without_positional_encodings():
    pb = _small()
    x = pb.train.x.numpy()
    Qs = pb.Q_star.numpy()[:, 0]
    d = pb.d
    A = np.array(STUDY.A)
    for mu in range(3):
        h = x[mu] @ Qs / math.sqrt(d)
        scores = np.outer(h, h)
        soft = np.exp(scores - scores.max(axis=1, keepdims=True))
        soft /= soft.sum(axis=1, keepdims=True)
        T = (1 - STUDY.omega) * soft + STUDY.omega * A
        np.testing.assert_allclose(pb.train.y.numpy()[mu], T @ x[mu], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(pb.train.T.sum(dim=-1).numpy(), 1.0, atol=1e-12)
    p = pb.p.numpy()
    np.testing.assert_allclose(p[0], np.ones(d) / math.sqrt(d))
    np.testing.assert_allclose(p[1], -p[0])


def test_token_statistics():
    pb = sample_dataset(Setting(sigma=0.7), 50, 4.0, seed=3, n_test=10, device="cpu")
    x = pb.train.x
    assert tuple(x.shape) == (200, 2, 50)
    assert abs(float(x.var()) - 0.49) < 0.03
    assert abs(float(x.mean())) < 0.02


def test_same_seed_same_data_and_test_set_independent_of_train():
    a, b = _small(seed=5), _small(seed=5)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.Q_star, b.Q_star)
    assert torch.equal(a.test.x, b.test.x)
    c = _small(seed=6)
    assert not torch.equal(a.train.x, c.train.x)
    # changing the test-set size leaves the teacher and the training set alone
    e = _small(seed=5, n_test=3)
    assert torch.equal(a.train.x, e.train.x) and torch.equal(a.Q_star, e.Q_star)
    # the test set is a fresh draw, not a copy of training samples
    assert not torch.allclose(a.test.x[:3], a.train.x[:3])


# --- model and risk ---------------------------------------------------------------------------------


def test_attention_output_matches_per_sample_formula():
    pb = _small()
    Q = torch.randn((pb.d, 1), dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    yhat = attention_output(pb.train.x, pb.p, Q).numpy()
    for mu in range(3):
        z = pb.train.x[mu].numpy() + pb.p.numpy()
        s = z @ Q.numpy() @ Q.numpy().T @ z.T / pb.d
        S = np.exp(s - s.max(axis=1, keepdims=True))
        S /= S.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(yhat[mu], S @ z, rtol=1e-12, atol=1e-14)


def test_gram_form_of_the_risk_equals_the_direct_sum():
    pb = _small(d=9)
    Q = torch.randn((pb.d, 1), dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    risk = EmpiricalRisk(pb.train, pb.p, lam=0.03)
    direct = float(sample_errors(pb.train, pb.p, Q).sum()) + 0.015 * float((Q**2).sum())
    assert float(risk(Q)) == pytest.approx(direct, rel=1e-12)


@pytest.mark.parametrize("r", [1, 2])
def test_gradient_matches_autograd_and_finite_differences(r):
    setting = Setting(r=r, r_star=r)
    pb = sample_dataset(setting, 6, 2.0, seed=1, n_test=2, device="cpu")
    risk = EmpiricalRisk(pb.train, pb.p, setting.lam)
    Q = torch.randn((pb.d, r), dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    assert_gradient_matches_autograd_and_finite_differences(risk, Q)


# --- linear baseline --------------------------------------------------------------------------------


def test_closed_form_linear_fit_equals_generic_least_squares():
    pb = sample_dataset(STUDY, 5, 1.4, seed=2, n_test=3, device="cpu")  # n = 7
    x = pb.train.x.numpy()
    y = pb.train.y.numpy()
    n, L, d = x.shape
    # unknowns B_lk (row-major); one equation per (sample, row l, coordinate i): y_li = sum_k B_lk x_ki
    rows, rhs = [], []
    for mu in range(n):
        for l in range(L):
            for i in range(d):
                a = np.zeros(L * L)
                a[l * L:(l + 1) * L] = x[mu, :, i]
                rows.append(a)
                rhs.append(y[mu, l, i])
    sol, *_ = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)
    np.testing.assert_allclose(fit_linear(pb.train).numpy(), sol.reshape(L, L), rtol=1e-10, atol=1e-12)
    # the test error is the direct average of ||y - B x||^2 / (2d)
    B = sol.reshape(L, L)
    yt, xt = pb.test.y.numpy(), pb.test.x.numpy()
    direct = np.mean([np.sum((yt[mu] - B @ xt[mu]) ** 2) / (2 * d) for mu in range(xt.shape[0])])
    assert linear_test_error(pb.test, torch.tensor(B)) == pytest.approx(direct, rel=1e-12)


def test_linear_baseline_is_exact_for_a_purely_positional_teacher():
    setting = Setting(omega=1.0)
    res = simulate(setting, 60, 1.0, optimizer="lbfgs", seed=0, n_test=500, device="cpu")
    assert res.test_error_linear < 1e-20
    np.testing.assert_allclose(res.B_linear, setting.A_array, atol=1e-12)


def test_linear_baseline_near_population_value():
    # docs/model.md: at omega = 0.3 the population optimum is about 0.00197, independent of alpha
    res = simulate(STUDY, 200, 1.0, optimizer="lbfgs", steps=5, seed=1, n_test=4000, device="cpu")
    assert res.test_error_linear == pytest.approx(0.00197, rel=0.15)


# --- training ---------------------------------------------------------------------------------------


def test_status_and_stop_code_of_a_run():
    """A run's status is ok exactly when its gradient reached the tolerance; otherwise a code says why it stopped."""
    from attnphase.notes import NoteCode, Status

    kw = dict(d=20, alpha=1.5, init="semantic", seed=0, n_test=20, device="cpu")
    done = simulate(STUDY, optimizer="lbfgs", **kw)
    short = simulate(STUDY, optimizer="lbfgs", steps=2, warmup=0, **kw)
    few = simulate(STUDY, optimizer="gd", steps=3, **kw)
    assert done.status == Status.ok and done.converged and done.warnings == () and done.grad_rms <= 1e-9
    for res in (short, few):
        assert res.status == Status.not_converged and not res.converged
        assert [n.code for n in res.warnings] == [NoteCode.max_iterations] and res.grad_rms > 1e-9
        d = res.to_dict()
        assert d["status"] == "not_converged" and d["converged"] is False and d["warning_codes"] == ["max_iterations"]
    assert few.stop_reason == "3 steps done, gradient above tolerance"


def test_same_seed_identical_results_different_seed_different():
    kw = dict(d=20, alpha=1.5, optimizer="lbfgs", n_test=50, device="cpu")
    a, b = simulate(STUDY, seed=3, **kw), simulate(STUDY, seed=3, **kw)
    da, db = a.to_dict(), b.to_dict()
    for k in ("seconds", "train_seconds"):
        da.pop(k), db.pop(k)
    assert da == db
    np.testing.assert_array_equal(a.Q, b.Q)
    c = simulate(STUDY, seed=4, **kw)
    assert c.q != a.q and c.test_error != a.test_error


def test_gd_and_lbfgs_reach_the_same_minimum():
    # lambda = 0.1 makes the smallest curvature 10x larger than the study's, so 2000 GD steps converge
    # to round-off on this small problem; both starts are tried.
    setting = Setting(omega=0.3, lam=0.1)
    for init in ("positional", "semantic"):
        kw = dict(init=init, seed=0, n_test=20, device="cpu")
        gd = simulate(setting, 30, 2.0, optimizer="gd", steps=2000, **kw)
        lb = simulate(setting, 30, 2.0, optimizer="lbfgs", **kw)
        assert gd.converged and lb.converged
        assert lb.steps < gd.steps
        for k in ("q", "m", "theta"):
            assert abs(getattr(gd, k) - getattr(lb, k)) < 1e-3, k
        assert gd.train_loss == pytest.approx(lb.train_loss, rel=1e-8)
        assert gd.train_loss == pytest.approx(gd.loss_curve[-1], rel=1e-12)


def test_gd_decreases_the_risk_and_reports_an_honest_flag():
    res = simulate(STUDY, 20, 1.0, optimizer="gd", steps=30, seed=0, n_test=20, device="cpu")
    assert res.loss_curve[-1] < res.loss_curve[0]
    assert not res.converged  # 30 steps cannot reach g_rms <= 1e-5
    assert res.steps == 30 and res.grad_norm > 0


def test_adam_and_float32_run():
    ad = simulate(STUDY, 20, 1.0, optimizer="adam", steps=300, seed=0, n_test=20, device="cpu")
    assert ad.loss_curve[-1] < ad.loss_curve[0]
    f64 = simulate(STUDY, 20, 1.0, init="semantic", optimizer="lbfgs", seed=0, n_test=20, device="cpu")
    f32 = simulate(STUDY, 20, 1.0, init="semantic", optimizer="lbfgs", seed=0, n_test=20, device="cpu",
                   dtype="float32")
    assert f32.dtype == "float32" and f32.Q.dtype == np.float32
    assert f32.train_loss == pytest.approx(f64.train_loss, rel=1e-3)


def test_initialisations():
    pb = _small(d=16)
    Q, name = initial_Q("positional", pb, 0)
    assert name == "positional" and float(Q.sum() / pb.d) == pytest.approx(1.0)  # m = 1
    Q, _ = initial_Q("positional_unit", pb, 0)
    assert float(torch.linalg.vector_norm(Q)) == pytest.approx(1.0)
    Q, _ = initial_Q("semantic", pb, 0)
    assert torch.equal(Q, pb.Q_star)
    Qa, _ = initial_Q("random", pb, 0)
    Qb, _ = initial_Q("random", pb, 0)
    assert torch.equal(Qa, Qb) and 0.02 < float(Qa.std()) < 0.3
    Q, name = initial_Q(np.arange(16.0), pb, 0)
    assert name == "custom" and Q.shape == (16, 1)
    res = simulate(STUDY, 16, 1.0, Q0=np.ones(16), optimizer="gd", steps=1, n_test=5, device="cpu")
    assert res.init == "custom"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    kw = dict(d=40, alpha=1.5, init="semantic", optimizer="lbfgs", seed=0, n_test=100)
    cpu, gpu = simulate(STUDY, device="cpu", **kw), simulate(STUDY, device="cuda", **kw)
    assert gpu.device.startswith("cuda")
    assert gpu.train_loss == pytest.approx(cpu.train_loss, rel=1e-8)


# --- result and validation --------------------------------------------------------------------------

KEYS = {"d", "n", "alpha", "omega", "sigma", "lam", "init", "optimizer", "seed", "q", "m", "theta",
        "train_loss", "test_error", "test_error_linear", "converged", "seconds", "grad_norm", "steps"}


def test_result_to_dict_is_plain_json():
    res = simulate(STUDY, 12, 1.0, optimizer="gd", steps=5, n_test=5, device="cpu")
    assert isinstance(res, SimulationResult)
    d = res.to_dict()
    assert KEYS <= set(d)
    assert json.loads(json.dumps(d)) == d
    assert d["n"] == 12 and isinstance(d["converged"], bool) and isinstance(d["q"], float)
    assert "loss_curve" not in d and "loss_curve" in res.to_dict(include_curve=True)


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(d=1), "d"),
        (dict(d=2.5), "d"),
        (dict(alpha=0.0), "alpha"),
        (dict(alpha=-1.0), "alpha"),
        (dict(alpha=float("nan")), "alpha"),
        (dict(d=10, alpha=0.01), "alpha"),  # n = round(0.1) = 0
        (dict(init="semantik"), "init"),
        (dict(optimizer="sgd"), "optimizer"),
        (dict(n_test=0), "n_test"),
        (dict(dtype="float16"), "dtype"),
        (dict(seed=-1), "seed"),
        (dict(steps=0), "steps"),
        (dict(lr=-0.1), "lr"),
        (dict(momentum=0.9), "momentum"),
        (dict(Q0=np.ones(3)), "Q0"),
    ],
)
def test_validation(kwargs, word):
    args = dict(d=10, alpha=1.0, n_test=5, device="cpu") | kwargs
    with pytest.raises(ValueError, match=word) as exc:
        simulate(STUDY, **args)
    assert "\n" not in str(exc.value)


# --- CLI --------------------------------------------------------------------------------------------


def test_cli_simulate_json(capsys):
    rc = main(["simulate", "--d", "12", "--alpha", "1.5", "--init", "semantic", "--optimizer", "lbfgs",
               "--seeds", "0:1", "--n-test", "20", "--device", "cpu", "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    recs = json.loads(out)
    assert [r["seed"] for r in recs] == [0, 1]
    assert {"d", "n", "alpha", "omega", "init", "optimizer", "seed", "q", "m", "theta", "train_loss",
            "test_error", "test_error_linear", "converged", "seconds"} <= set(recs[0])
    assert recs[0]["n"] == 18 and recs[0]["init"] == "semantic"


def test_cli_simulate_table(capsys):
    rc = main(["simulate", "--d", "8", "--alpha", "1", "--steps", "3", "--n-test", "5", "--device", "cpu"])
    out = capsys.readouterr().out
    assert rc == 0 and "test_error_linear" in out.splitlines()[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--d", "1", "--alpha", "1"],
        ["simulate", "--d", "10", "--alpha", "0"],
        ["simulate", "--d", "10", "--alpha", "1", "--omega", "1.5"],
        ["simulate", "--d", "10", "--alpha", "1", "--omega", "0.1,0.2"],
        ["simulate", "--d", "10", "--alpha", "1", "--init", "nope"],
        ["simulate", "--d", "10", "--alpha", "1", "--seeds", "a:b"],
        ["simulate", "--d", "10", "--alpha", "1", "--n-test", "0"],
        ["simulate", "--alpha", "1"],
    ],
)
def test_cli_simulate_bad_input_exit_2(argv, capsys):
    assert main(argv + ["--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "error" in err[-1]  # argparse prints its usage first; the error is one line


def test_cli_choices_match_the_library():
    from attnphase.cli import simulate as cli_sim
    from attnphase.experiments.simulation import INITS, OPTIMIZERS, STUDENTS

    assert cli_sim.INITS == INITS and cli_sim.OPTIMIZERS == OPTIMIZERS and cli_sim.STUDENTS == STUDENTS


def test_cli_compare_json(capsys):
    rc = main(["compare", "--d", "20", "--alpha", "1.5", "--seeds", "0:1", "--optimizer", "lbfgs",
               "--precision", "fast", "--n-test", "50", "--device", "cpu", "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    recs = json.loads(out)
    assert [r["init"] for r in recs] == ["positional", "semantic"]
    for r in recs:
        for k in ("m", "theta", "q", "train_loss", "test_error"):
            assert {k, f"{k}_se", f"{k}_theory"} <= set(r)
        assert r["seeds"] == 2 and r["n"] == 30


def test_cli_compare_general_setting_compares_the_theorys_summaries(capsys):
    """Off the study's geometry (r = 2: q, m, theta are matrices) compare reports the theory's scalar summaries for
    the runs too (it raised a TypeError before): m is the mean of simulate's m_norm for the same runs, q of
    tr(q) / r, theta of the largest singular value (simulate --json, the other command)."""
    args = ["--d", "20", "--alpha", "1.5", "--seeds", "0:1", "--optimizer", "lbfgs", "--n-test", "50",
            "--device", "cpu", "--rank", "2", "--json"]
    assert main(["compare", *args, "--precision", "fast"]) == 0
    recs = {r["init"]: r for r in json.loads(capsys.readouterr().out)}
    for init in ("positional", "semantic"):
        assert main(["simulate", *args, "--init", init]) == 0
        runs = json.loads(capsys.readouterr().out)
        assert recs[init]["m"] == pytest.approx(np.mean([r["m_norm"] for r in runs]), rel=1e-12)
        assert recs[init]["q"] == pytest.approx(np.mean([np.trace(r["q"]) / 2 for r in runs]), rel=1e-12)
        assert recs[init]["theta"] == pytest.approx(np.mean([r["theta_sv"][0] for r in runs]), rel=1e-12)
        assert recs[init]["m_theory"] is None or recs[init]["m_theory"] >= 0


def test_untied_run_summary_is_the_theorys_untied_summary():
    """An untied run's summary (r = 2: from each factor's recorded overlaps) against the theory's untied summaries
    of the overlaps computed from the weights directly."""
    from attnphase.experiments.simulation import sample_dataset
    from attnphase.theory.model.overlaps import Overlaps
    from attnphase.theory.state_evolution.results import summaries

    setting, d = Setting(r=2), 30
    res = simulate(setting, d, 1.0, init="random", optimizer="gd", steps=5, seed=3, n_test=40, device="cpu",
                   student="untied")
    pb = sample_dataset(setting, d, 1.0, seed=3, n_test=40, device="cpu")
    W = torch.as_tensor(res.Q)
    Q, K = W[:, :2], W[:, 2:]
    s2 = setting.sigma**2
    F = torch.cat([Q, K], dim=1)
    o = Overlaps(q=(s2 * F.T @ F / d).numpy(), m=(pb.p @ F / math.sqrt(d)).numpy(), V=np.eye(4),
                 theta=(s2 * F.T @ pb.Q_star / d).numpy(), untied=True)
    want = summaries(o)
    got = res.summary()
    for k in ("q", "m", "theta"):
        assert got[k] == pytest.approx(want[k], rel=1e-10)


def test_cli_compare_bad_alpha_exit_2(capsys):
    assert main(["compare", "--d", "20", "--alpha", "x", "--device", "cpu"]) == 2
    assert "--alpha" in capsys.readouterr().err


# --- general settings (positions from a Gram matrix, ranks), reference numbers, L-BFGS port ---------------


@pytest.mark.parametrize(
    "setting",
    [Setting(L=3), Setting(L=4, positions="orthogonal"), Setting(L=3, positions=[[2, 1, 0], [1, 2, 1], [0, 1, 2]]),
     Setting(L=3, positions=[[1, 1, 0], [1, 1, 0], [0, 0, 0]])],  # a rank-1 Gram matrix (p_1 = p_2, p_3 = 0)
)
def test_positions_reproduce_the_gram_matrix(setting):
    from attnphase.experiments.simulation import positional_encodings

    d = 40
    p = positional_encodings(d, setting.L, gram=setting.gram)
    np.testing.assert_allclose((p @ p.T).numpy(), setting.gram, atol=1e-12)
    # the first direction is the all-ones one; the construction is deterministic
    p2 = positional_encodings(d, setting.L, gram=setting.gram)
    assert torch.equal(p, p2)


def test_study_positions_are_bit_for_bit_the_antipodal_pair():
    from attnphase.experiments.simulation import positional_encodings

    for d in (7, 500):
        p = positional_encodings(d, 2, gram=Setting().gram)
        ref = torch.full((d,), 1.0 / math.sqrt(d), dtype=torch.float64)
        assert torch.equal(p[0], ref) and torch.equal(p[1], -ref)


@pytest.mark.parametrize("setting", [Setting(L=3), Setting(r=2), Setting(r_star=2), Setting(L=4, positions="orthogonal")])
def test_general_measurements_against_direct_computation(setting):
    from attnphase.experiments.simulation.experiment import measure
    from attnphase.theory.model.overlaps import Overlaps
    from attnphase.theory.state_evolution.results import summaries

    d = 30
    res = simulate(setting, d, 1.0, init="random", optimizer="gd", steps=20, seed=2, n_test=40, device="cpu")
    pb = sample_dataset(setting, d, 1.0, seed=2, n_test=40, device="cpu")
    Q = torch.as_tensor(res.Q)
    s2 = setting.sigma**2
    q = s2 * Q.T @ Q / d
    m = pb.p @ Q / math.sqrt(d)  # m_l = p_l^T Q / sqrt(d), L x r
    theta = s2 * Q.T @ pb.Q_star / d
    rec = res.to_dict()
    np.testing.assert_allclose(np.atleast_2d(rec["q"]) if setting.r > 1 else rec["q"], q.numpy().squeeze(), rtol=1e-12)
    np.testing.assert_allclose(np.array(rec["m"]).reshape(m.shape), m.numpy(), rtol=1e-10, atol=1e-14)
    # m_norm: the theory's summary (root mean square over tokens), the same key with the same meaning in both
    assert rec["m_norm"] == pytest.approx(float(torch.linalg.norm(m)) / math.sqrt(setting.L), rel=1e-10)
    assert rec["m_norm"] == pytest.approx(summaries(Overlaps(q=q.numpy(), m=m.numpy(), V=np.eye(setting.r),
                                                             theta=theta.numpy()))["m"], rel=1e-10)
    np.testing.assert_allclose(rec["theta_sv"], np.linalg.svd(theta.numpy(), compute_uv=False), rtol=1e-10)
    assert measure(Q, pb)["m_norm"] == pytest.approx(rec["m_norm"])
    # the test error is the direct mean over fresh samples of ||y - yhat||^2 / (2d)
    assert res.test_error == pytest.approx(float(sample_errors(pb.test, pb.p, Q).mean()), rel=1e-12)


def test_general_inits():
    setting = Setting(L=3, r=2)
    pb = sample_dataset(setting, 30, 1.0, seed=0, n_test=5, device="cpu")
    Q, _ = initial_Q("positional", pb, 0)
    # in the span of the positional codes: projecting onto it changes nothing
    U = torch.linalg.svd(pb.p.T, full_matrices=False)[0][:, :2]
    np.testing.assert_allclose((U @ (U.T @ Q)).numpy(), Q.numpy(), atol=1e-10)
    assert torch.linalg.matrix_rank(Q) == 2
    Qs, _ = initial_Q("semantic", pb, 0)  # r = 2 > r* = 1: Q* padded with a small random column
    assert torch.equal(Qs[:, :1], pb.Q_star) and float(Qs[:, 1].abs().max()) < 1.0
    Qr, _ = initial_Q("random", pb, 0, init_scale=2.0)
    assert float(Qr.std()) == pytest.approx(2.0, rel=0.3)


def test_positional_start_above_the_span_dimension_is_not_degenerate():
    # L = 2, r = 2: the positional span is one-dimensional.  Two equal columns would stay equal under training
    # (a rank-1 student for ever); the second column is a small random one instead, as for the semantic start.
    pb = sample_dataset(Setting(L=2, r=2), 40, 1.0, seed=0, n_test=5, device="cpu")
    Q, _ = initial_Q("positional", pb, 0)
    assert torch.equal(Q[:, 0], torch.ones(40, dtype=Q.dtype))
    assert torch.linalg.matrix_rank(Q) == 2 and 0.0 < float(Q[:, 1].abs().max()) < 1.0
    assert torch.equal(Q, initial_Q("positional", pb, 0)[0]) and not torch.equal(Q, initial_Q("positional", pb, 1)[0])
    res = simulate(Setting(L=2, r=2), 40, 1.0, init="positional", optimizer="lbfgs", seed=0, n_test=50, device="cpu")
    q = np.array(res.q)
    assert abs(q[0, 1]) < 0.99 * np.sqrt(q[0, 0] * q[1, 1])  # the two directions did not stay parallel


def test_study_setting_numbers_unchanged():
    approx = pytest.approx
    # Values printed by the code on main (commit 6551984, before the general settings) for these exact calls.  Another
    # CPU or BLAS changes the last digits (summation order), so compare to 1e-6 relative: any change of the model,
    # the sampler or the optimiser moves them by far more.
    s = Setting(omega=0.3)
    r = simulate(s, 40, 1.5, init="positional", optimizer="gd", seed=3, n_test=500, steps=200, device="cpu")
    assert (r.q, r.m, r.theta) == approx((0.03769888169674309, 0.29488614544637076, 0.012181730989888468), rel=1e-6)
    assert (r.train_loss, r.test_error) == approx((0.005599166852623917, 0.004476184857004644), rel=1e-6)
    r = simulate(s, 40, 1.5, init="semantic", optimizer="lbfgs", seed=3, n_test=500, device="cpu")
    assert (r.q, r.m, r.theta) == approx((0.08626832155844384, 0.04791100183984331, 0.13532290140640418), rel=1e-6)
    assert (r.train_loss, r.test_error_linear) == approx((0.004267868975162517, 0.0024089062782169266), rel=1e-6)
    r = simulate(s, 40, 1.5, init="random", optimizer="gd", seed=3, n_test=500, steps=100, device="cpu")
    assert (r.m, r.theta, r.test_error) == approx((0.04652906093581868, 0.025854142949668812, 0.004584518638522203),
                                                  rel=1e-6)


def test_flat_lbfgs_is_torch_lbfgs_bit_for_bit():
    from attnphase.experiments.simulation.lbfgs import FlatLBFGS

    pb = _small(d=9, alpha=3.0)
    risk = EmpiricalRisk(pb.train, pb.p, 0.01)
    Q0 = torch.randn((9, 1), dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    out = []
    for cls in (torch.optim.LBFGS, FlatLBFGS):
        Q = Q0.clone()
        opt = cls([Q] if cls is torch.optim.LBFGS else Q, lr=1.0, max_iter=15, max_eval=30, tolerance_grad=0.0,
                  tolerance_change=0.0, history_size=5, line_search_fn="strong_wolfe")

        def closure(Q=Q):
            R, Q.grad = risk.value_and_grad(Q)
            return R

        for _ in range(3):
            opt.step(closure)
        out.append(Q.clone())
    assert torch.equal(out[0], out[1])
    assert not torch.equal(out[0], Q0)
