"""The fused channel kernel (theory/_prox_kernel.channel_kernel) against the pointwise path (channel.pointwise_f with the
two-token prox, numpy around the compiled Newton), which it replaces in the study's case: same hat overlaps,
Moreau value, minimisers, recorded minima and counts, for the own starts and for continued evaluations, on every
branch; independent of the number of threads."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from attnphase.setting import Setting
from attnphase.theory.model import channel
from attnphase.theory.model.overlaps import Branch, Overlaps
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.prox import LocalMinima

S = Setting(omega=0.3)
ALPHA = 1.5
HATS = ("qhat", "mhat", "Vhat", "thetahat")


def _overlaps(q: float, m: float, theta: float, V: float) -> Overlaps:
    return Overlaps(q=np.array([[q]]), m=np.array([[m], [-0.8 * m]]), V=np.array([[V]]), theta=np.array([[theta]]))


# A generic point, and one at small V and large m where the large-|w| starts (prox_kernel's k = 3..5) run.
CASES = {"generic": _overlaps(0.09, 0.25, 0.13, 16.0), "large_w": _overlaps(0.3, 1.6, 0.1, 3.0)}


def _moved(o: Overlaps) -> Overlaps:
    """Overlaps a continued evaluation would see: each moved by ~1e-3 relative."""
    return Overlaps(q=o.q * 1.001, m=o.m * (1 - 1e-3), V=o.V * 1.002, theta=o.theta * (1 + 1e-3))


def _pointwise(o: Overlaps, z: np.ndarray, b: Branch, minima: LocalMinima | None = None) -> channel.ChannelOutput:
    return channel._update_pointwise(S, ALPHA, o, z, b, kernel="l2r1", warm=None, minima=minima)


def _assert_same(new: channel.ChannelOutput, old: channel.ChannelOutput) -> None:
    # The same arithmetic per point and the same reductions: bitwise equal where numba's exp, log are scipy's (libm's);
    # the tolerances leave room for a numba that vectorises them otherwise.
    for k in HATS:
        np.testing.assert_allclose(getattr(new.hats, k), getattr(old.hats, k), rtol=1e-12, atol=1e-16, err_msg=k)
    assert new.moreau == pytest.approx(old.moreau, rel=1e-12)
    assert (new.prox_failures, new.n_points) == (old.prox_failures, old.n_points)
    assert new.h.shape == old.h.shape
    np.testing.assert_allclose(new.h, old.h, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(new.minima.count, old.minima.count)
    np.testing.assert_allclose(new.minima.h, old.minima.h, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_update_equals_the_pointwise_path_on_every_branch(case):
    o = CASES[case]
    z = gaussian_sobol(12, 4, 3)
    if case == "large_w":  # the case exercises the large-|w| starts at most points
        w = z[:2] * np.sqrt(o.q[0, 0]) + o.m[:, :1]
        assert np.mean(np.abs(w).max(axis=0) >= 1.0) > 0.5
    for b in Branch:
        new = channel.update_hatoverlaps(S, ALPHA, o, z, b)
        old = _pointwise(o, z, b)
        _assert_same(new, old)
        if case == "generic":
            assert np.any(new.minima.count >= 2)  # points with more than one basin
        if b.has_theta:
            assert abs(new.hats.thetahat[0, 0]) > 0
        else:
            assert new.hats.thetahat[0, 0] == 0
        # continued: Newton from these minima at moved overlaps, in both paths
        _assert_same(channel.update_hatoverlaps(S, ALPHA, _moved(o), z, b, minima=new.minima),
                     _pointwise(_moved(o), z, b, minima=old.minima))


def test_fused_update_does_not_depend_on_the_thread_count():
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread here")
    o = CASES["large_w"]
    z = gaussian_sobol(12, 4, 4)
    before = numba.get_num_threads()
    out = {}
    try:
        for threads in (1, 2):
            numba.set_num_threads(threads)
            full = channel.update_hatoverlaps(S, ALPHA, o, z, "free")
            cont = channel.update_hatoverlaps(S, ALPHA, _moved(o), z, "free", minima=full.minima)
            out[threads] = (full, cont)
    finally:
        numba.set_num_threads(before)
    for a, b in zip(out[1], out[2], strict=True):
        for k in HATS:
            np.testing.assert_array_equal(getattr(a.hats, k), getattr(b.hats, k))
        assert a.moreau == b.moreau and a.prox_failures == b.prox_failures
        np.testing.assert_array_equal(a.h, b.h)
        np.testing.assert_array_equal(a.minima.h, b.minima.h)
        np.testing.assert_array_equal(a.minima.count, b.minima.count)


def test_fused_path_applies_to_the_study_case_only():
    assert channel._fused_applies(S, "auto") and channel._fused_applies(S, "l2r1")
    assert not channel._fused_applies(S, "general") and not channel._fused_applies(S, "reference")
    assert not channel._fused_applies(S.replace(r_star=2), "auto")
    assert not channel._fused_applies(S.replace(r=2), "auto")
    assert not channel._fused_applies(S.replace(student="untied"), "auto")


def test_fused_update_refuses_bad_points_and_minima():
    o = CASES["generic"]
    z = gaussian_sobol(8, 4, 0)
    with pytest.raises(ValueError, match="shape"):
        channel.update_hatoverlaps(S, ALPHA, o, z[:3], "free")
    full = channel.update_hatoverlaps(S, ALPHA, o, z, "free")
    with pytest.raises(ValueError, match="minima"):
        channel.update_hatoverlaps(S, ALPHA, o, z, "free", minima=LocalMinima(full.minima.h[:10], full.minima.count))
    bad = LocalMinima(full.minima.h, np.zeros_like(full.minima.count))
    with pytest.raises(ValueError, match="count"):
        channel.update_hatoverlaps(S, ALPHA, o, z, "free", minima=bad)
