"""The untied student softmax((x+p) Q K^T (x+p)^T / d) (issue 10): gradient, reduction to the tied one, runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from conftest import assert_gradient_matches_autograd_and_finite_differences

from attnphase import Setting
from attnphase.cli import main
from attnphase.simulation import EmpiricalRisk, sample_dataset, sample_errors, simulate
from attnphase.simulation.model import split_weights


def _problem(r: int = 1, d: int = 7, seed: int = 1):
    setting = Setting(r=r, r_star=r)
    return setting, sample_dataset(setting, d, 2.0, seed=seed, n_test=4, device="cpu")


def _weights(d: int, cols: int, seed: int = 4) -> torch.Tensor:
    return torch.randn((d, cols), dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("r", [1, 2])
def test_untied_gradient_matches_autograd_and_finite_differences(r):
    setting, pb = _problem(r)
    risk = EmpiricalRisk(pb.train, pb.p, setting.lam, student="untied")
    W = _weights(pb.d, 2 * r)
    assert_gradient_matches_autograd_and_finite_differences(risk, W)


def test_untied_risk_against_a_per_sample_loop():
    setting, pb = _problem(d=5)
    W = _weights(pb.d, 2)
    Q, K = W[:, :1].numpy(), W[:, 1:].numpy()
    x, p, T = pb.train.x.numpy(), pb.p.numpy(), pb.train.T.numpy()
    total = 0.0
    for mu in range(pb.n):
        z = x[mu] + p
        s = (z @ Q) @ (z @ K).T / pb.d
        S = np.exp(s - s.max(axis=1, keepdims=True))
        S /= S.sum(axis=1, keepdims=True)
        total += float(((T[mu] @ x[mu] - S @ z) ** 2).sum()) / (2 * pb.d)
    total += 0.5 * setting.lam * float((W.numpy() ** 2).sum())
    risk = EmpiricalRisk(pb.train, pb.p, setting.lam, student="untied")
    assert float(risk(W)) == pytest.approx(total, rel=1e-12)


def test_tied_is_the_untied_student_at_Q_equal_K():
    setting, pb = _problem()
    Q = _weights(pb.d, 1)
    tied = EmpiricalRisk(pb.train, pb.p, setting.lam)
    untied = EmpiricalRisk(pb.train, pb.p, setting.lam, student="untied")
    W = torch.cat([Q, Q], dim=1)
    assert abs(float(tied.data_term(Q)) - float(untied.data_term(W))) <= 1e-12 * float(tied.data_term(Q))
    # each factor carries the penalty, so at Q = K the untied risk has one extra (lambda/2)||Q||^2
    extra = 0.5 * setting.lam * float((Q**2).sum())
    assert float(untied(W)) - float(tied(Q)) == pytest.approx(extra, rel=1e-10)
    # the gradient of the data term w.r.t. Q and K at Q = K adds up to the tied gradient
    _, g_t = tied.value_and_grad(Q)
    _, g_u = untied.value_and_grad(W)
    gq, gk = split_weights(g_u, "untied")
    np.testing.assert_allclose((gq + gk - 2 * setting.lam * Q).numpy(), (g_t - setting.lam * Q).numpy(),
                               rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(sample_errors(pb.test, pb.p, Q).numpy(),
                               sample_errors(pb.test, pb.p, Q, K=Q).numpy(), rtol=1e-13)


def test_scores_depend_on_the_product_only():
    setting, pb = _problem()
    untied = EmpiricalRisk(pb.train, pb.p, 0.0, student="untied")
    W = _weights(pb.d, 2)
    W2 = torch.cat([3.0 * W[:, :1], W[:, 1:] / 3.0], dim=1)
    assert float(untied(W)) == pytest.approx(float(untied(W2)), rel=1e-12)


def test_untied_simulation_runs_and_reports_both_factors():
    res = simulate(Setting(omega=0.3), 40, 1.5, init="semantic", optimizer="lbfgs", seed=0, n_test=200,
                   device="cpu", student="untied")
    rec = res.to_dict()
    assert res.converged and rec["student"] == "untied"
    for k in ("m_Q", "m_K", "theta_Q", "theta_K", "q_Q", "q_K", "q_QK"):
        assert k in rec
    assert rec["m"] == pytest.approx(math.sqrt(abs(rec["m_Q"] * rec["m_K"])))
    assert rec["theta"] == pytest.approx(math.sqrt(abs(rec["theta_Q"] * rec["theta_K"])))
    # the penalty on both factors balances them at a minimum: ||Q|| = ||K|| (q_Q = q_K)
    assert rec["q_Q"] == pytest.approx(rec["q_K"], rel=1e-4)
    assert rec["test_error"] > 0 and math.isfinite(rec["train_loss"])


def test_untied_weights_shape_is_checked():
    with pytest.raises(ValueError, match="Q0"):
        simulate(Setting(), 10, 1.0, Q0=np.ones((10, 1)), student="untied", n_test=5, device="cpu")
    with pytest.raises(ValueError, match="student"):
        simulate(Setting(), 10, 1.0, student="both", n_test=5, device="cpu")


def test_cli_simulate_untied(capsys):
    rc = main(["simulate", "--d", "12", "--alpha", "1.5", "--init", "random", "--init-scale", "0.3", "--student",
               "untied", "--optimizer", "lbfgs", "--n-test", "20", "--device", "cpu", "--json"])
    recs = json.loads(capsys.readouterr().out)
    assert rc == 0 and recs[0]["student"] == "untied" and recs[0]["init_scale"] == 0.3
    assert main(["simulate", "--d", "12", "--alpha", "1", "--student", "half", "--device", "cpu"]) == 2
