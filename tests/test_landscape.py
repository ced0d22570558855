"""theory.landscape: the replica-symmetric saddle with theta held fixed, against the free fixed point and against
finite differences of its own energy ((L, r, r*) = (2, 1, 2), antipodal, omega = 0.3, fast precision)."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase import Setting
from attnphase.theory import Overlaps, solve
from attnphase.theory.state_evolution.landscape import constrained_fixed_point, energy_curve


@pytest.fixture(scope="module")
def setting() -> Setting:
    return Setting(L=2, r=1, r_star=2, positions="antipodal", omega=0.3)


@pytest.fixture(scope="module")
def free4(setting):  # noqa: ANN001, ANN201
    fp = solve(setting, 4.0, "semantic", "fast")
    assert fp.valid, fp.status
    return fp


@pytest.mark.parametrize("alpha", [2.0, 4.0])
def test_theta_held_at_the_free_fixed_point_returns_it(setting, free4, alpha):
    """At the free fixed point's theta the constrained saddle is the free fixed point: same q, V, energy (same
    integration points), and the Lagrange multiplier equals the channel's thetahat there.  Measured: alpha = 2,
    q 0.18001 vs 0.18005, E 0.0085281 vs 0.0085288, multiplier 0.027556 vs thetahat 0.027631 (slope -4e-5 +- 1.4e-4);
    alpha = 4, E 0.0162874 vs 0.0162871, slope -3e-6 +- 2.2e-4."""
    fp = free4 if alpha == 4.0 else solve(setting, alpha, "semantic", "fast")
    assert fp.valid
    t = float(fp.overlaps.theta[0, 0])
    cp = constrained_fixed_point(setting, alpha, "semantic", t, "fast", init=fp)
    assert cp.valid, (cp.status, cp.message)
    np.testing.assert_allclose(cp.overlaps.theta, [[t, 0.0]])
    assert np.all(cp.overlaps.m == 0)
    for key in ("q", "V"):
        got, want = float(getattr(cp.overlaps, key)[0, 0]), float(getattr(fp.overlaps, key)[0, 0])
        assert abs(got - want) <= 3 * (cp.errors[key] + fp.errors[key]) + 1e-3 * want, (key, got, want)
    assert abs(cp.train_loss - fp.train_loss) <= 3 * (cp.errors["train_loss"] + fp.errors["train_loss"])
    # the multiplier is the channel's thetahat (the dropped equation holds at a free fixed point)
    assert abs(cp.hats.thetahat[0, 0] - fp.hats.thetahat[0, 0]) <= 3 * cp.errors["slope"] + 0.01 * fp.hats.thetahat[0, 0]
    assert abs(cp.slope[0, 0]) <= 3 * cp.errors["slope"] + 1e-4


def test_slope_is_the_finite_difference_of_the_energy(setting, free4):
    """dE/dtheta from the envelope theorem (multiplier - channel thetahat) against central differences of E(t) on
    common integration points: ~0 at the free fixed point, negative below it, positive above it.  Measured at alpha
    = 4: t = 0.12, slope -0.02048, difference -0.0204; t = 0.2098: difference -2e-4 (E's curvature is 0.5)."""
    t0 = float(free4.overlaps.theta[0, 0])
    h = 0.01
    for t, sign in ((0.12, -1), (t0, 0)):
        cps = energy_curve(setting, 4.0, [t + h, t, t - h], "semantic", "fast", init=free4)
        assert all(c.valid for c in cps), [c.status for c in cps]
        fd = (cps[0].train_loss - cps[2].train_loss) / (2 * h)
        slope, err = float(cps[1].slope[0, 0]), cps[1].errors["slope"]
        assert abs(fd - slope) <= 3 * err + 0.05 * abs(fd) + 5e-4, (t, fd, slope, err)
        if sign:
            assert np.sign(fd) == sign and abs(fd) > 0.01, (t, fd)
        else:
            # E is minimal at the free fixed point: both neighbours higher, the central difference ~ 0
            assert cps[0].train_loss > cps[1].train_loss and cps[2].train_loss > cps[1].train_loss
            assert abs(fd) < 1e-3, fd


def test_array_target_and_start_independence(setting, free4):
    """An (r, r*) target is the number's (t, 0); a far start reaches the same saddle."""
    a = constrained_fixed_point(setting, 4.0, "semantic", 0.15, "fast", init=free4)
    far = Overlaps(q=np.array([[0.6]]), m=np.zeros((2, 1)), V=np.array([[40.0]]), theta=np.array([[0.3, 0.0]]))
    b = constrained_fixed_point(setting, 4.0, "semantic", np.array([[0.15, 0.0]]), "fast", init=far)
    assert a.valid and b.valid
    assert abs(a.train_loss - b.train_loss) <= 1e-6
    np.testing.assert_allclose(a.overlaps.q, b.overlaps.q, rtol=1e-3)
    rec = a.to_dict()
    assert rec["status"] == "ok" and rec["theta_target"] == [[0.15, 0.0]]


@pytest.mark.parametrize("kwargs, exc", [
    ({"branch": "positional"}, ValueError),
    ({"branch": "agnostic"}, ValueError),
    ({"theta_target": 0.0}, ValueError),
    ({"theta_target": np.zeros((2, 1))}, ValueError),
    ({"theta_target": np.nan}, ValueError),
    ({"theta_target": True}, TypeError),
    ({"theta_target": "a"}, TypeError),
    ({"alpha": -1.0}, ValueError),
    ({"precision": "nope"}, ValueError),
    ({"init": "start"}, TypeError),
])
def test_bad_input_is_refused_before_any_work(setting, kwargs, exc):
    args = {"setting": setting, "alpha": 2.0, "branch": "semantic", "theta_target": 0.1, "precision": "fast"}
    args.update(kwargs)
    with pytest.raises(exc):
        constrained_fixed_point(**args)


def test_untied_student_is_refused(setting):
    with pytest.raises(ValueError, match="tied"):
        constrained_fixed_point(setting.replace(student="untied"), 2.0, "semantic", 0.1)
