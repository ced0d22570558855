"""The unconstrained ("free") branch: reachable through solve, reduces to the semantic point for the rank-1
student, and for the rank-2 student holds the mixed minimum (one direction semantic, one positional)."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase import Setting
from attnphase.notes import NoteCode, Status
from attnphase.theory.state_evolution.solve import mixed_start, solve
from attnphase.theory.state_evolution.starts import default_start, mixed_start_from


def test_free_branch_of_the_rank1_student_is_the_semantic_point():
    # At omega = 0.3, alpha = 1.5 the semantic point is the global minimum; with nothing constrained the iteration
    # from the default start (m and theta both non-zero) must find it: m decays, the rest agrees.
    free = solve(Setting(), 1.5, "free", "fast")
    sem = solve(Setting(), 1.5, "semantic", "fast")
    assert free.valid and free.branch == "free"
    assert free.m_norm < 1e-3
    assert free.theta_norm == pytest.approx(sem.theta_norm, rel=1e-3)
    assert free.train_loss == pytest.approx(sem.train_loss, rel=1e-3)


def test_free_default_start_separates_m_and_theta_for_rank2():
    o = default_start(Setting(L=2, r=2), "free")
    assert o.theta[0, 0] > 0 and o.theta[1, 0] == 0 and np.all(o.m[:, 0] == 0) and np.all(o.m[:, 1] != 0)


def test_mixed_start_shapes_and_refusal():
    o = mixed_start_from(None, None, Setting(L=3, r=2))
    assert o.dims == (3, 2, 1) and o.m[:, 0].tolist() == [0, 0, 0] and o.m[:, 1].sum() == pytest.approx(0)
    with pytest.raises(ValueError, match="rank r >= 2"):
        mixed_start(Setting(L=2, r=1), 1.5)


@pytest.mark.slow
def test_rank2_student_mixed_minimum_is_the_lowest():
    # Measured (fast): free 0.002356 < positional 0.002624 < semantic 0.002724; m 0.219, theta 0.102 (simulation
    # d = 500: m 0.213, theta 0.100, train loss 0.00240 +- 0.00005).
    s = Setting(L=2, r=2, omega=0.3)
    free = solve(s, 1.5, "free", "fast", init=mixed_start(s, 1.5))
    assert free.valid
    pos, sem = solve(s, 1.5, "positional", "fast"), solve(s, 1.5, "semantic", "fast")
    assert free.train_loss < min(p.train_loss for p in (pos, sem) if p.valid)
    assert free.m_norm == pytest.approx(0.219, rel=0.03) and free.theta_norm == pytest.approx(0.102, rel=0.03)
    # The two order parameters live in orthogonal student directions.
    assert abs(float(free.theta[:, 0] @ free.m[0])) < 1e-3


def test_rank2_student_positional_single_point_is_the_curves_not_a_far_one():
    """r = 2 (L = 2, r* = 1), alpha 2, fast: from the default start the positional iteration reaches a far point
    (q 2.06, m 3.44, train loss 0.047, kept as the answer before) that is a mirror cycle, not a fixed point (the map
    sends it to its mirror image: tests/test_mirror_cycle.py); the single point is the scaled start's, which is the
    branch continued from alpha 1.5 (q 0.044, m 0.226, train loss 0.00344)."""
    from attnphase.theory.state_evolution.curves import solve_curve

    s = Setting(omega=0.3, r=2)
    single = solve(s, 2.0, "positional", "fast")
    curve = solve_curve(s, [1.5, 2.0], "positional", "fast")[-1]
    assert single.valid and curve.valid
    assert [st.name for st in single.starts] == ["default", "scaled"]
    assert single.starts[0].status == Status.not_converged  # the far point: a mirror cycle
    assert single.summary()["q"] < 0.1
    for key in ("q", "m", "V"):
        err = np.hypot(single.errors[key], curve.errors[key])
        assert single.summary()[key] == pytest.approx(curve.summary()[key], abs=4 * err + 1e-3 * curve.summary()[key])
    err = np.hypot(single.errors["train_loss"], curve.errors["train_loss"])
    assert single.train_loss == pytest.approx(curve.train_loss, abs=4 * err + 1e-3 * curve.train_loss)


def test_multistart_finds_the_positional_point_simulations_reach_for_a_rank2_teacher():
    """(L, r, r*) = (2, 1, 2), alpha = 1.5: from the default start the positional iteration ends at a far point
    (m 2.83, train loss 0.0138) no simulation reaches, a mirror cycle (tests/test_mirror_cycle.py); multistart finds
    the point d = 500 simulations (slow test in test_engine_vs_simulation.py) measured at rms m 0.3235 +- 0.0041,
    train loss 0.005911 +- 0.00012."""
    s = Setting(L=2, r=1, r_star=2, omega=0.3)
    plain = solve(s, 1.5, "positional", "fast", multistart=False)
    best = solve(s, 1.5, "positional", "fast")  # (multistart is the default: issue 21)
    assert best.valid and best.m_norm == pytest.approx(0.3235, abs=3 * 0.0041 + 0.02 * 0.3235)
    assert best.train_loss == pytest.approx(0.005911, abs=3 * 0.00012 + 0.02 * 0.005911)
    assert not plain.valid or plain.train_loss > best.train_loss
    # (the first valid start kept: the far point was the only reason to try them all)
    assert [st.name for st in best.starts] == ["default", "scaled"]
    assert best.starts[0].status == Status.not_converged  # the far point: a mirror cycle
    assert any(w.code == NoteCode.multistart for w in best.warnings)
    # The study's setting has no extra starts: multistart changes nothing there.
    a = solve(Setting(), 1.5, "positional", "fast")
    b = solve(Setting(), 1.5, "positional", "fast", multistart=True)
    assert a.train_loss == b.train_loss and not any(w.code == NoteCode.multistart for w in b.warnings) and b.starts == ()
    with pytest.raises(TypeError, match="multistart"):
        solve(Setting(), 1.5, "positional", "fast", multistart="yes")


def test_mixed_is_a_branch_value_on_the_free_layout_and_map():
    """"mixed" is a value of the one Branch type: the free layout, the free default start and the free map (same
    points, same image to the last bit); it differs only in what its points must have (m and theta non-zero)."""
    from attnphase.theory.model.channel import points_dim
    from attnphase.theory.model.overlaps import Branch, Layout, as_branch
    from attnphase.theory.model.quadrature import gaussian_sobol
    from attnphase.theory.state_evolution.branch_map import branch_map

    s = Setting(omega=0.3, r=2)
    assert as_branch("mixed") is Branch.mixed and Branch.mixed.has_m and Branch.mixed.has_theta
    assert Layout.for_setting(s, "mixed").names() == Layout.for_setting(s, "free").names()
    d_mixed, d_free = default_start(s, "mixed"), default_start(s, "free")
    for key in ("q", "m", "V", "theta"):
        np.testing.assert_array_equal(getattr(d_mixed, key), getattr(d_free, key))
    pts = gaussian_sobol(10, points_dim(s), 0)
    start = mixed_start_from(solve(Setting(omega=0.3), 1.5, "semantic", "fast"),
                             solve(Setting(omega=0.3), 1.5, "positional", "fast"), s)
    images = [branch_map(s, 1.5, b, pts).step(branch_map(s, 1.5, b, pts).pack(start))[0] for b in ("mixed", "free")]
    np.testing.assert_array_equal(images[0], images[1])


@pytest.mark.parametrize("alpha, why", [(0.3, "theta vanished"), (0.4, "theta vanishing")])
def test_below_the_mixed_birth_the_mixed_solve_reaches_the_positional_point(alpha, why):
    """r = 2, omega 0.3, fast, below where the mixed branch is born (theta's block at the positional point crosses 1
    at 0.571 [0.529, 0.613]: `transition --rank 2`, mixed_pitchfork): the solve from the mixed start loses theta and
    is `collapsed` (no mixed point), whether it converged there (alpha 0.3) or ran out of iterations on the way with
    theta already at zero (0.4).  Independently: theta's block at the positional point is below 1 there (the
    linearised condition: no branch with theta leaves it), and the point the mixed solve reached is the positional
    one (m and q within 5e-4 relative)."""
    from attnphase.theory.transition import linearised as lin

    s = Setting(omega=0.3, r=2)
    mixed = solve(s, alpha, "mixed", "fast", stability=False)
    pos = solve(s, alpha, "positional", "fast", stability=False)
    assert mixed.status == Status.collapsed and mixed.message.startswith(why), mixed.message
    lam, _ = lin.leading_eigenvalue(s, alpha, "semantic", lin.mirrored_points(s, "semantic", 0, 0), pos.overlaps,
                                    base="positional")
    assert lam < 0.95, lam
    for key in ("m", "q"):
        assert mixed.summary()[key] == pytest.approx(pos.summary()[key], rel=5e-4), key
