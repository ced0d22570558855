"""The Bayes-optimal limit (issue 19): channel expectations against brute-force Monte Carlo, the free entropy's
derivatives, the thresholds and their limits (L = 1 phase retrieval, omega = 1), the test error's ends, the read-off
on the package's sampled data, GAMP against state evolution (slow), the CLI's input rules."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from attnphase import Setting
from attnphase.notes import NoteCode
from attnphase.theory.bayes import (
    alpha_of_q,
    amp_overlap,
    bayes_curve,
    bayes_overlap,
    fixed_points,
    free_entropy,
    iterate,
    se_map,
    thresholds,
)
from attnphase.theory.bayes.channel import dg_out_diag, g_out, log_z_out, mean_g2, psi_out
from attnphase.theory.bayes.observables import bayes_test_error
from attnphase.theory.bayes.state_evolution import alpha_weak_value
from attnphase.theory.model.baseline import linear_baseline

# ------------------------------------------------------------------------------------ channel vs Monte Carlo


def _mc(q: float, L: int, delta: float, n: int = 400_000, seed: int = 0):
    rng = np.random.default_rng(seed)
    om = math.sqrt(q) * rng.standard_normal((n, L))
    w = om + math.sqrt(1 - q) * rng.standard_normal((n, L))
    s = rng.choice([-1.0, 1.0], size=(n, 1))
    y = s * w + math.sqrt(delta) * rng.standard_normal((n, L))
    return y, om


@pytest.mark.parametrize("L,q,delta", [(1, 0.3, 0.0), (2, 0.2, 0.0), (2, 0.7, 0.0), (3, 0.5, 0.0), (2, 0.5, 0.3)])
def test_channel_expectations_against_monte_carlo(L, q, delta):
    y, om = _mc(q, L, delta)
    V = 1 - q
    g2 = np.sum(g_out(y, om, V, delta) ** 2, axis=1)
    minus_dg = -np.sum(dg_out_diag(y, om, V, delta), axis=1)
    lz = log_z_out(y, om, V, delta)
    se = lambda x: 4 * x.std() / math.sqrt(x.size)  # noqa: E731
    assert mean_g2(q, L, delta) == pytest.approx(g2.mean(), abs=se(g2))
    # Nishimori: E||g||^2 = -E tr dg/domega (the identity GAMP's variance update rests on)
    assert mean_g2(q, L, delta) == pytest.approx(minus_dg.mean(), abs=se(minus_dg))
    assert psi_out(q, L, delta) == pytest.approx(lz.mean(), abs=se(lz))


def test_z_out_is_the_channel_integrated_against_the_gaussian():
    """Z_out(y, omega, V) = E_{w ~ N(omega, V)} P(y | w) for the noisy channel (a density in y), by Monte Carlo."""
    rng = np.random.default_rng(1)
    L, V, delta = 2, 0.4, 0.25
    y, om = np.array([0.7, -0.3]), np.array([0.2, 0.5])
    w = om + math.sqrt(V) * rng.standard_normal((1_000_000, L))
    dens = lambda m: np.exp(-np.sum((y - m) ** 2, 1) / (2 * delta)) / (2 * np.pi * delta) ** (L / 2)  # noqa: E731
    p = 0.5 * (dens(w) + dens(-w))
    assert math.exp(log_z_out(y, om, V, delta)) == pytest.approx(p.mean(), abs=4 * p.std() / 1000)


def test_two_atom_posterior_mean_is_what_g_out_encodes():
    """Noiseless: the posterior of w given (y, omega, V) has atoms +-y with weights ~ exp(+-y.omega/V), so
    E[w | y] = y tanh(y.omega/V) and g_out = (E[w|y] - omega)/V; checked against the weights computed directly."""
    rng = np.random.default_rng(2)
    y, om, V = rng.standard_normal(3), rng.standard_normal(3), 0.6
    lp = -np.sum((y - om) ** 2) / (2 * V)
    lm = -np.sum((-y - om) ** 2) / (2 * V)
    pp = 1 / (1 + math.exp(lm - lp))
    mean = pp * y - (1 - pp) * y
    np.testing.assert_allclose(g_out(y, om, V), (mean - om) / V, rtol=1e-12)


# --------------------------------------------------------------------------------------------- free entropy


@pytest.mark.parametrize("L,delta", [(1, 0.0), (2, 0.0), (3, 0.0), (2, 0.2)])
def test_psi_out_derivative_is_half_mean_g2(L, delta):
    """dPsi_out/dq = E||g_out||^2 / 2 (so q_hat = 2 alpha dPsi_out/dq): central finite differences."""
    for q in (0.15, 0.5, 0.85):
        h = 1e-5
        fd = (psi_out(q + h, L, delta) - psi_out(q - h, L, delta)) / (2 * h)
        assert fd == pytest.approx(0.5 * mean_g2(q, L, delta), rel=1e-6)


@pytest.mark.parametrize("L,alpha", [(2, 0.3), (2, 0.45), (1, 0.8), (3, 0.2)])
def test_free_entropy_derivative_in_alpha_is_psi_out_at_the_overlap(L, alpha):
    """I-MMSE analogue: d phi(alpha)/d alpha = Psi_out(q*(alpha)) (envelope theorem: phi is stationary in q)."""
    h = 1e-4

    def phi(a: float) -> float:
        q = bayes_overlap(a, L)
        return free_entropy(q, a, L)

    fd = (phi(alpha + h) - phi(alpha - h)) / (2 * h)
    assert fd == pytest.approx(psi_out(bayes_overlap(alpha, L), L), rel=1e-5)


def test_fixed_points_are_stationary_points_of_the_potential():
    for p in fixed_points(0.35, 2)[1:-1]:
        h = 1e-6
        assert (free_entropy(p.q + h, 0.35, 2) - free_entropy(p.q - h, 0.35, 2)) / (2 * h) == pytest.approx(0, abs=1e-6)
        assert se_map(p.q, 0.35, 2) == pytest.approx(p.q, abs=1e-10)


# ------------------------------------------------------------------------------------------------ thresholds


@pytest.mark.parametrize("L,delta", [(1, 0.0), (2, 0.0), (3, 0.0), (2, 0.3)])
def test_weak_recovery_from_linearisation_matches_where_the_iterated_map_leaves_zero(L, delta):
    aw = thresholds(L, 0.3, delta)["alpha_weak"].value
    assert aw == pytest.approx((1 + delta) ** 2 / (L * (L + 1)), rel=1e-12)
    q0 = 1e-7
    below = iterate(aw * 0.97, q0, 300, L, delta)
    above = iterate(aw * 1.03, q0, 300, L, delta)
    assert below[-1] < q0 and above[-1] > 100 * q0
    # the growth factor of the map at q -> 0 crosses 1 at alpha_weak
    assert se_map(1e-9, aw, L, delta) / 1e-9 == pytest.approx(1.0, abs=1e-4)
    assert alpha_of_q(1e-7, L, delta) == pytest.approx(aw, rel=1e-4)


def test_phase_retrieval_limit_L1():
    """L = 1 is noiseless real phase retrieval with a Gaussian prior: weak recovery at 1/2, perfect recovery (IT)
    at 1, and the algorithmic threshold about 1.13 (the known value of the hard phase's upper end)."""
    th = thresholds(1, 0.3)
    assert th["alpha_weak"].value == pytest.approx(0.5, abs=1e-9)
    assert th["alpha_it"].value == pytest.approx(1.0, abs=1e-9)
    assert th["alpha_alg"].kind == "fold" and th["alpha_alg"].value == pytest.approx(1.128, abs=2e-3)
    assert "first order" in th["alpha_it"].reason
    assert bayes_overlap(0.99, 1) < 0.6 and bayes_overlap(1.01, 1) == pytest.approx(1.0, abs=1e-12)
    assert amp_overlap(1.05, 1) < 0.7 and amp_overlap(1.2, 1) == pytest.approx(1.0, abs=1e-12)


def test_block_channel_thresholds_and_their_L_dependence():
    for L in (2, 3):
        th = thresholds(L, 0.3)
        assert th["alpha_weak"].value == pytest.approx(1 / (L * (L + 1)), rel=1e-12)
        assert th["alpha_it"].value == pytest.approx(1 / L, rel=1e-12)
        assert th["alpha_alg"].value == pytest.approx(1 / L, rel=1e-9)  # no hard phase for L >= 2
        assert "continuous" in th["alpha_it"].reason
        assert bayes_overlap(1 / L * 0.999, L) > 0.98  # the overlap reaches 1 continuously


def test_thresholds_do_not_depend_on_omega_below_one_and_vanish_at_one():
    ref = thresholds(2, 0.0).to_dict()
    for w in (0.3, 0.9):
        d = thresholds(2, w).to_dict()
        for k in ("alpha_weak", "alpha_it", "alpha_alg", "alpha_spinodal"):
            assert d[k] == pytest.approx(ref[k], rel=1e-12)
    th = thresholds(2, 1.0)
    assert all(not c.found and c.kind is None and c.search == "not in range" for c in th.critical.values())


def test_noisy_variant_is_continuous_in_delta():
    assert bayes_overlap(0.35, 2, 1e-6) == pytest.approx(bayes_overlap(0.35, 2, 0.0), abs=1e-4)
    assert bayes_overlap(0.8, 2, 0.1) < 0.99  # noise: no perfect recovery
    assert alpha_weak_value(2, 0.5) == pytest.approx(1.5**2 / 6)


def test_small_noise_keeps_phase_retrieval_hard_phase():
    th = thresholds(1, 0.3, 1e-3)
    assert th["alpha_alg"].kind == "fold" and th["alpha_spinodal"].kind == "fold"
    assert th["alpha_spinodal"].value < th["alpha_it"].value < th["alpha_alg"].value
    # the noisy IT threshold returns to the noiseless 1/L as delta -> 0 (logarithmically slowly)
    small = thresholds(1, 0.3, 1e-6)
    assert 1.0 < small["alpha_it"].value < th["alpha_it"].value
    assert small["alpha_alg"].value == pytest.approx(thresholds(1, 0.3)["alpha_alg"].value, abs=2e-3)


# ---------------------------------------------------------------------------------------------- test error


def test_test_error_ends_zero_overlap_is_the_linear_baseline_full_overlap_zero():
    for L in (2, 3):
        s = Setting(omega=0.3, L=L)
        lb = linear_baseline(s)
        te0, err0 = bayes_test_error(s, 0.0)
        assert te0 == pytest.approx(lb.test_error_linear, abs=3 * (err0 + lb.error) + 1e-7 * (L - 1) ** 2)
        assert bayes_test_error(s, 1.0)[0] == pytest.approx(0.0, abs=1e-15)
    s = Setting(omega=0.3)
    vals = [bayes_test_error(s, q)[0] for q in (0.0, 0.3, 0.6, 0.9, 0.99)]
    assert all(a > b for a, b in zip(vals, vals[1:], strict=False))


def test_test_error_against_monte_carlo():
    """(1/2) sigma^2 (1-omega)^2 sum E_xi Var(S | xi) by nested Monte Carlo (fields given xi sampled directly)."""
    s = Setting(omega=0.3)
    q = 0.6
    rng = np.random.default_rng(3)
    xi = rng.standard_normal((4000, 1, 2))
    eta = rng.standard_normal((4000, 400, 2))
    h = s.sigma * (math.sqrt(q) * xi + math.sqrt(1 - q) * eta)
    e = np.exp(h[..., :, None] * h[..., None, :])
    S = e / e.sum(-1, keepdims=True)
    per = 0.5 * s.sigma**2 * 0.7**2 * np.sum(S.var(axis=1, ddof=1), axis=(1, 2))
    assert bayes_test_error(s, q)[0] == pytest.approx(per.mean(), abs=4 * per.std() / math.sqrt(per.size))


def test_bayes_curve_overlap_does_not_depend_on_omega():
    alphas = [0.1, 0.25, 0.4, 0.7]
    ref = bayes_curve(Setting(omega=0.0), alphas)
    for w in (0.3, 0.8):
        pts = bayes_curve(Setting(omega=w), alphas)
        for p, r in zip(pts, ref, strict=True):
            assert p.overlap == pytest.approx(r.overlap, abs=1e-12)
            assert p.test_error == pytest.approx(r.test_error * (1 - w) ** 2, rel=1e-9, abs=1e-15)
    one = bayes_curve(Setting(omega=1.0), alphas)
    for p in one:
        assert p.overlap == pytest.approx(0.0, abs=1e-15) and p.test_error == pytest.approx(0.0, abs=1e-15)
        assert NoteCode.uninformative_channel in {n.code for n in p.warnings}


def test_bayes_point_record():
    p = bayes_curve(Setting(omega=0.3), [0.3])[0]
    d = p.to_dict()
    for k in ("alpha", "overlap", "test_error", "status", "converged"):
        assert k in d
    assert p.converged and 0 < p.overlap < 1 and p.phase == "partial"
    assert p.test_error < p.test_error_linear
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        p.alpha = 1.0  # frozen


# ------------------------------------------------------------------------------------ read-off and GAMP


@pytest.mark.parametrize("L,omega", [(2, 0.3), (2, 0.9), (3, 0.0), (4, 0.6)])
def test_readoff_recovers_the_fields_up_to_sign(L, omega):
    pytest.importorskip("torch")
    from attnphase.experiments.simulation.sampling import sample_dataset
    from attnphase.theory.bayes.readoff import read_fields

    s = Setting(omega=omega, L=L)
    pb = sample_dataset(s, 100, 2.0, seed=4, n_test=1)
    x, y = pb.train.x.numpy(), pb.train.y.numpy()
    h, resid, _ = read_fields(s, x, y)
    true = (x @ pb.Q_star.numpy())[:, :, 0] / 10.0
    sign = np.sign(np.sum(h * true, axis=1))[:, None]
    assert np.median(np.abs(h - sign * true)) < 1e-10
    assert np.quantile(np.abs(h - sign * true), 0.99) < 1e-6
    assert resid.max() < 1e-8


def test_readoff_is_the_same_for_every_omega_below_one():
    """Same seed, different omega: the same fields (so GAMP's overlap cannot depend on omega)."""
    pytest.importorskip("torch")
    from attnphase.experiments.simulation.sampling import sample_dataset
    from attnphase.theory.bayes.readoff import read_fields

    out = []
    for w in (0.1, 0.5, 0.95):
        s = Setting(omega=w)
        pb = sample_dataset(s, 80, 1.0, seed=5, n_test=1)
        out.append(read_fields(s, pb.train.x.numpy(), pb.train.y.numpy())[0])
    assert np.median(np.abs(out[0] - out[1])) < 1e-10 and np.median(np.abs(out[0] - out[2])) < 1e-9


def test_gamp_small_run_reaches_perfect_recovery_and_is_seeded():
    from attnphase.theory.bayes.amp import run_amp

    s = Setting(omega=0.3)
    r = run_amp(s, 300, 0.9, seed=1, n_test=200)
    assert r.converged and r.overlap == pytest.approx(1.0, abs=1e-3) and r.test_error < 1e-8
    assert r.history_test_error[0] > 1e-4  # the random start predicts like the baseline
    r2 = run_amp(s, 300, 0.9, seed=1, n_test=200)
    assert r2.overlap == pytest.approx(r.overlap, rel=1e-14) and r2.iterations == r.iterations
    d = r.to_dict(history=True)
    assert {"overlap", "test_error", "iterations", "converged"} <= set(d) and len(d["history"]["overlap"]) > 1


def test_gamp_runs_without_pytorch():
    """GAMP draws its data with attnphase.problem (numpy): the theory side never loads PyTorch."""
    import subprocess
    import sys

    code = ("import sys; from attnphase import Setting; from attnphase.theory.bayes.amp import run_amp; "
            "r = run_amp(Setting(), 60, 1.0, seed=0, n_test=5, max_iter=3); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_gamp_overlap_does_not_depend_on_omega():
    """Same seed at omega = 0.3 and 0.7: the read-off gives the same fields, so GAMP's iterates agree to round-off."""
    from attnphase.theory.bayes.amp import run_amp

    r1 = run_amp(Setting(omega=0.3), 200, 0.9, seed=3, n_test=50)
    r2 = run_amp(Setting(omega=0.7), 200, 0.9, seed=3, n_test=50)
    np.testing.assert_allclose(r1.history_overlap[:5], r2.history_overlap[:5], rtol=1e-7, atol=1e-9)


@pytest.mark.slow
def test_gamp_noisy_variant_tracks_state_evolution():
    """delta = 0.1 (noise on the teacher's fields): d = 2000, two seeds, alpha = 0.8; state evolution 0.842."""
    from attnphase.theory.bayes.amp import run_amp

    s = Setting(omega=0.3)
    runs = [run_amp(s, 2000, 0.8, seed=k, delta=0.1, init="informative", q0=0.2) for k in range(2)]
    q_se = iterate(0.8, 0.2, 2000, 2, 0.1)[-1]
    assert np.mean([r.overlap for r in runs]) == pytest.approx(q_se, abs=0.03)
    ratio = np.mean([r.test_error / r.test_error_linear_measured for r in runs])
    assert ratio == pytest.approx(bayes_test_error(s, q_se, 0.1)[0] / bayes_test_error(s, 0.0, 0.1)[0], abs=0.06)


@pytest.mark.slow
def test_gamp_tracks_state_evolution_at_finite_d():
    """d = 2500, four seeds, alphas below weak recovery, in the partial phase and above perfect recovery; informative
    start q0 = 0.2 (state evolution from the same q0).  Final overlaps within 3 standard errors over seeds plus 0.02
    (the finite-d bias, measured in benchmarks/bayes.py); the first iterations within 0.03; the measured test error
    relative to the baseline's predictor on the same test set within 0.08 of the theory's ratio."""
    from attnphase.theory.bayes.amp import run_amp

    s = Setting(omega=0.3)
    te_lin = bayes_test_error(s, 0.0)[0]
    for alpha in (0.12, 0.3, 0.8):
        runs = [run_amp(s, 2500, alpha, seed=k, n_test=2000, init="informative", q0=0.2) for k in range(4)]
        m = np.array([r.overlap for r in runs])
        se_traj = iterate(alpha, 0.2, 2000)
        q_se = se_traj[-1]
        assert abs(m.mean() - q_se) < 3 * m.std(ddof=1) / 2 + 0.02, (alpha, m, q_se)
        for t in (1, 2, 5):
            assert np.mean([r.history_overlap[t] for r in runs]) == pytest.approx(se_traj[t], abs=0.03)
        ratio = np.mean([r.test_error / r.test_error_linear_measured for r in runs])
        assert ratio == pytest.approx(bayes_test_error(s, q_se)[0] / te_lin, abs=0.08), alpha


# ------------------------------------------------------------------------------------------------------- CLI


def _cli(capsys, argv):
    from attnphase.cli import main

    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_bayes_rows_and_thresholds(capsys):
    rc, out, _ = _cli(capsys, ["bayes", "--omega", "0.3", "--alpha", "0.1,0.3,0.7", "--json"])
    assert rc == 0
    rows = json.loads(out)
    assert len(rows) == 3 and {"alpha", "overlap", "test_error", "status", "converged"} <= set(rows[0])
    assert rows[0]["overlap"] == pytest.approx(0.0, abs=1e-12) and rows[2]["overlap"] == pytest.approx(1.0)
    rc, out, _ = _cli(capsys, ["bayes", "--thresholds", "--omega", "0.3", "--L", "3", "--json"])
    th = json.loads(out)
    assert rc == 0 and th["alpha_weak"] == pytest.approx(1 / 12) and th["alpha_it"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("argv", [["bayes", "--omega", "1.5"], ["bayes", "--alpha", "0,1"], ["bayes", "--L", "1"],
                                  ["bayes", "--delta", "-0.1"], ["bayes", "--thresholds", "--alpha", "1"],
                                  ["bayes", "--alpha", "x"], ["amp", "--d", "100", "--alpha", "1", "--omega", "1"],
                                  ["amp", "--d", "1", "--alpha", "1"], ["amp", "--d", "10", "--alpha", "-1"],
                                  ["amp", "--d", "200000", "--alpha", "50"],
                                  ["amp", "--d", "10", "--alpha", "1", "--q0", "0"]])
def test_cli_bad_input_is_one_line_exit_2(capsys, argv):
    rc, out, err = _cli(capsys, argv)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1


def test_cli_commands_are_documented_and_accept_quiet():
    import argparse

    from attnphase.cli import build_parser

    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("bayes", "amp"):
        sub = subs.choices[name]
        assert sub.description
        assert "--quiet" in {s for a in sub._actions for s in a.option_strings}
        assert all(a.help for a in sub._actions if not isinstance(a, argparse._HelpAction))


def test_cli_amp_json(capsys):
    rc, out, _ = _cli(capsys, ["amp", "--d", "200", "--alpha", "0.9", "--omega", "0.3", "--seed", "0",
                               "--n-test", "100", "--json"])
    d = json.loads(out)
    assert rc == 0 and {"overlap", "test_error", "iterations", "converged"} <= set(d)


# ---------------------------------------------------------------------------------------- figures, section


def test_bayes_section_quick_writes_records_and_figures(tmp_path):
    pytest.importorskip("torch")
    from attnphase.reproduce.bayes_section import bayes_section

    records, paths = bayes_section(Setting(omega=0.3), [0.1, 0.3, 0.6], tmp_path, quick=True, amp_d=150,
                                   amp_seeds=(0,), amp_alphas=(0.9,))
    kinds = [r["kind"] for r in records]
    assert kinds.count("bayes") == 3 and "bayes_thresholds" in kinds and kinds.count("amp") == 1
    assert all(p.exists() for p in paths) and {p.suffix for p in paths} == {".png", ".pdf"}
    json.dumps(records)  # machine-readable


def test_phase_diagram_figure_from_thresholds_alone(tmp_path):
    from attnphase.plots.bayes import plot_bayes_phase_diagram

    ths = [thresholds(2, w) for w in (0.0, 0.3, 0.6, 1.0)]
    paths = plot_bayes_phase_diagram(ths, tmp_path / "pd")
    assert all(p.exists() for p in paths)
