"""A positional point's stability along theta (state_evolution.stability), held against finite-d training from the
positional start and against the mixed branch the nonlinear solver finds; its Jacobian against finite differences is
tests/test_linearised.py::test_theta_block_at_the_positional_point_against_finite_differences."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.errors import InputError
from attnphase.notes import NoteCode
from attnphase.setting import Setting
from attnphase.theory.solvers.fixed_point import Status
from attnphase.theory.state_evolution.curves import solve_curve
from attnphase.theory.state_evolution.solve import solve
from attnphase.theory.state_evolution.stability import theta_stability


def _warned(fp) -> bool:
    return any(n.code == NoteCode.unstable_theta for n in fp.warnings)


def test_positional_point_warned_unstable_along_theta_where_training_from_it_leaves():
    """L = 3 simplex, omega 0.6 (fast): the positional point at alpha 1 is stable along theta and at 2.5 unstable
    (leading eigenvalue 0.8 and 1.16); L-BFGS from the positional start at d = 300 (2 seeds) stays positional at 1
    (m > theta) and ends at the semantic point at 2.5 (theta > m).  A curve through both carries the same warnings."""
    from attnphase.experiments.simulation import simulate

    s = Setting(L=3, omega=0.6, positions="simplex")
    for alpha, unstable in ((1.0, False), (2.5, True)):
        fp = solve(s, alpha, "positional", "fast")
        assert fp.valid and _warned(fp) == unstable, fp.warnings
        runs = [simulate(s, 300, alpha, init="positional", optimizer="lbfgs", seed=k, device="cpu").summary()
                for k in range(2)]
        assert all((r["theta"] > r["m"]) == unstable for r in runs), (alpha, runs)
    curve = solve_curve(s, [1.0, 2.5], "positional", "fast")
    assert [_warned(p) for p in curve] == [False, True]


def test_the_eigenvalue_crosses_one_where_the_mixed_branch_leaves_the_positional_one():
    """r = 2, omega 0.3 (fast): below the mixed branch's birth (alpha 0.5) the positional point is stable along theta
    and the mixed start gives no mixed point; above it (alpha 1) the positional point is unstable and the mixed point,
    found by the nonlinear solver, lies below it in training loss."""
    s = Setting(omega=0.3, r=2)
    lo, hi = solve(s, 0.5, "positional", "fast"), solve(s, 1.0, "positional", "fast")
    assert lo.valid and hi.valid and not _warned(lo) and _warned(hi)
    assert not solve(s, 0.5, "mixed", "fast").valid
    mixed = solve(s, 1.0, "mixed", "fast")
    assert mixed.valid and mixed.train_loss < hi.train_loss


def test_study_positional_point_is_stable_along_theta():
    """The study (L = 2, omega 0.3): the positional branch is a local minimum along theta at every alpha measured
    (eigenvalue 0.26 at 1, 0.54 at 3, each scrambling below 1), as training from it at finite d stays there."""
    s = Setting()
    for alpha in (1.0, 3.0):
        fp = solve(s, alpha, "positional", "fast")
        st = theta_stability(s, alpha, fp)
        assert not _warned(fp) and not st.unstable and max(st.per_scrambling) < 0.8
        assert st.error > 0 and abs(st.eigenvalue - np.mean(st.per_scrambling)) < 1e-12


def test_theta_stability_refuses_what_it_is_not_for():
    s = Setting()
    sem = solve(s, 1.5, "semantic", "fast")
    with pytest.raises(InputError, match="positional point"):
        theta_stability(s, 1.5, sem)
    with pytest.raises(InputError, match="tied student"):
        theta_stability(Setting(student="untied"), 1.5, sem.overlaps)
    with pytest.raises(InputError, match="alpha"):
        theta_stability(s, -1.0, solve(s, 1.5, "positional", "fast"))
    agn = solve(s, 1.5, "agnostic", "fast")
    assert agn.status == Status.ok and not _warned(agn)  # (only positional points are checked)


def test_theory_cli_names_the_unstable_points_on_stderr_and_in_the_json(capsys):
    """r = 2 (fast): the positional point at omega 0.3, alpha 1 is past the mixed branch's birth (0.57), at omega 0.6
    it is not (the mixed point is born above alpha 1 there): one line on stderr names the first, the JSON rows carry
    the code on the first only."""
    import json

    from attnphase.cli import main

    argv = ["theory", "--rank", "2", "--omega", "0.3,0.6", "--alpha", "1", "--branch", "positional",
            "--precision", "fast", "--json", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr()
    rows = json.loads(out.out)
    codes = {r["omega"]: r["warning_codes"] for r in rows}
    assert "unstable_theta" in codes[0.3] and "unstable_theta" not in codes[0.6]
    assert "unstable along theta at alpha = 1 (omega 0.3)" in out.err and "omega 0.6" not in out.err


def test_study_transition_finds_the_positional_branch_stable_along_theta():
    """The study's transition: no positional_saddle (the positional points it solved are stable along theta, as
    test_study_positional_point_is_stable_along_theta finds them)."""
    from attnphase.theory.transition.driver import transition
    from attnphase.theory.transition.records import Search

    res = transition(Setting())
    sad = res.critical["positional_saddle"]
    assert sad.search == Search.not_in_range and sad.value is None and "stable along theta" in sad.reason


@pytest.mark.slow
def test_transition_puts_the_positional_saddle_between_where_training_stays_and_where_it_leaves():
    """L = 3 simplex, omega 0.6: the transition's positional_saddle (1.62 [1.56, 1.67] measured) lies
    above alpha 1, where L-BFGS from the positional start stays positional, and below 2.5, where it leaves
    (test_positional_point_warned_unstable_along_theta_where_training_from_it_leaves), and the single points on either
    side of its interval carry the warning accordingly."""
    from attnphase.theory.transition.driver import transition

    s = Setting(L=3, omega=0.6, positions="simplex")
    sad = transition(s).critical["positional_saddle"]
    assert sad.found and 1.0 < sad.lo < sad.value < sad.hi < 2.5, sad
    below, above = solve(s, max(1.0, sad.lo - 0.2), "positional", "fast"), solve(s, 2.5, "positional", "fast")
    assert not _warned(below) and _warned(above)


def test_level_crossing_is_the_linear_interpolants_root():
    """The crossing the transition reads per scrambling: inside the points, beyond them, and none for equal values."""
    from attnphase.theory.state_evolution.order import level_crossing

    assert level_crossing((1.0, 0.8), (2.0, 1.2), 1.0) == pytest.approx(1.5)
    assert level_crossing((2.0, 1.2), (1.0, 0.8), 1.0) == pytest.approx(1.5)  # (order of the points)
    assert level_crossing((1.0, 0.5), (2.0, 0.9), 1.0) == pytest.approx(2.25)  # (beyond both)
    assert level_crossing((1.0, 0.9), (2.0, 0.9), 1.0) is None


def test_the_estimate_is_the_same_at_m_and_minus_m():
    """m -> -m is an exact symmetry of the equations and an iteration reaches either sign: the check's points are
    mirrored in xi as well as eta, so its estimate is the same at both to round-off, scrambling by scrambling (on the
    eta-mirrored points alone it was not: L = 3, omega 0.6, alpha 1.645, 0.980 +- 0.022 against 0.978 +- 0.009)."""
    import dataclasses

    for s, alpha in ((Setting(omega=0.3), 1.0), (Setting(L=3, positions="simplex", omega=0.6), 1.0)):
        fp = solve(s, alpha, "positional", "fast", stability=False)
        assert fp.valid
        flipped = dataclasses.replace(fp.overlaps, m=-fp.overlaps.m)
        a, b = theta_stability(s, alpha, fp), theta_stability(s, alpha, flipped)
        np.testing.assert_allclose(a.per_scrambling, b.per_scrambling, rtol=1e-9)
        assert a.error > 0  # (three scramblings that differ: an estimate, not a constant)


@pytest.mark.slow
def test_positional_saddle_interval_holds_the_crossing_of_independent_scramblings():
    """L = 3 simplex, omega 0.6 (fast): the transition's positional_saddle, with seeds 0 and 1, holds where the
    leading eigenvalue from 16 other scramblings of J's points (seed 7) crosses 1 between the grid's positional points
    (1.64 measured).  From 3 scramblings seed 1 said 1.533 [1.459, 1.606]: its three were 4 errors high together."""
    from attnphase.theory.state_evolution.order import level_crossing
    from attnphase.theory.transition.driver import transition

    s = Setting(L=3, omega=0.6, positions="simplex")
    grid = [0.05 + k * 1.95 / 11 for k in (8, 9, 10)]  # (the transition's grid points around the crossing)
    ev = [theta_stability(s, a, solve(s, a, "positional", "fast", stability=False), seed=7, at_least=16).eigenvalue
          for a in grid]
    k = next(k for k in range(2) if ev[k] < 1.0 <= ev[k + 1])
    ref = level_crossing((grid[k], ev[k]), (grid[k + 1], ev[k + 1]), 1.0)
    for seed in (0, 1):
        sad = transition(s, seed=seed).critical["positional_saddle"]
        assert sad.found and sad.lo <= ref <= sad.hi, (seed, ref, sad)
        assert sad.hi - sad.lo < 0.4, sad  # (16 scramblings: 1.742 [1.462, 2.021] from 3 at seed 0)


def test_positional_saddle_moves_its_pair_where_sixteen_scramblings_put_the_crossing_elsewhere(monkeypatch):
    """The saddle's scan on a known eigenvalue: scrambling r's is f(alpha) + offset_r with f convex, and the first
    three offsets lean up together, so three scramblings put the crossing a grid step too low.  With 16 at the pair
    the record is the crossing of the 16 (each linear between the pair that holds the true one), whatever three said."""
    from types import SimpleNamespace

    from attnphase.theory.state_evolution.stability import RESOLVE_SCRAMBLINGS, ThetaStability
    from attnphase.theory.transition import driver

    rng = np.random.default_rng(3)
    off = rng.normal(0.0, 0.02, RESOLVE_SCRAMBLINGS)
    off[:3] = 0.05 + rng.normal(0.0, 0.002, 3)
    off -= off.mean()  # (the 16's mean eigenvalue is f itself)

    def f(a):
        return 0.6 + 0.15 * a * a  # (1 at alpha = 1.633)

    def fake(setting, alpha, point, seed=0, at_least=3, known=None):  # (its values by index: known is a prefix)
        ev = [f(alpha) + o for o in off[: max(3, at_least)]]
        return ThetaStability(float(np.mean(ev)), float(np.std(ev, ddof=1) / np.sqrt(len(ev))), tuple(ev))

    monkeypatch.setattr(driver, "theta_stability", fake)
    monkeypatch.setattr(driver, "with_point_error", lambda setting, fp, st, seed: st)  # (these points have no error)
    grid = [1.0, 1.2, 1.4, 1.6, 1.8, 2.0]
    assert fake(None, 1.6, None).eigenvalue >= 1.0 > f(1.6)  # (three say the crossing lies below 1.6)
    cache = {("positional", a): SimpleNamespace(valid=True, alpha=a, overlaps=None) for a in grid}
    sad = driver._positional_saddle(Setting(L=3, positions="simplex", omega=0.6), cache, 0)
    per = [1.6 + (1.0 - f(1.6) - o) * 0.2 / (f(1.8) - f(1.6)) for o in off]  # (each linear between 1.6 and 1.8)
    assert sad.found and sad.value == pytest.approx(np.mean(per), abs=1e-12)
    assert 1.6 < sad.value < 1.8 and sad.lo <= np.sqrt(0.4 / 0.15) <= sad.hi


def test_an_extended_estimate_is_the_one_computed_afresh():
    """Scrambling k's points are the same on every call, so extending an estimate (``known``) gives the numbers a
    fresh one with as many scramblings gives, bitwise."""
    s = Setting(omega=0.3)
    fp = solve(s, 1.0, "positional", "fast", stability=False)
    three = theta_stability(s, 1.0, fp)
    assert len(three.per_scrambling) == 3
    assert theta_stability(s, 1.0, fp, at_least=6, known=three) == theta_stability(s, 1.0, fp, at_least=6)


def test_the_points_own_error_is_in_its_eigenvalues_error():
    """Study, omega 0.2, alpha 1.7 (fast), near where the positional branch merges back: the eigenvalue at the fast
    point is 7 of J's errors from the one at the default-precision point (16 other scramblings of J's points, seed
    7), because the fast point's m is off by its own integration error (measured 1.1665 +- 0.0074 against 1.1148).
    with_point_error adds that error (0.030 measured): the two then agree within 3 errors."""
    from attnphase.theory.state_evolution.stability import with_point_error

    s, a = Setting(omega=0.2), 1.7
    fast = solve(s, a, "positional", "fast", stability=False)
    ref = theta_stability(s, a, solve(s, a, "positional", "default", stability=False), seed=7, at_least=16)
    st = theta_stability(s, a, fast)
    both = with_point_error(s, fast, st)
    diff = abs(st.eigenvalue - ref.eigenvalue)
    assert diff > 3 * st.error and both.point_error > 2 * st.error, (st, both, ref)
    assert diff < 3 * np.hypot(both.total_error, ref.error), (both, ref)
    assert both.eigenvalue == st.eigenvalue and both.point_scramblings == fast.n_replicas


def test_study_saddle_at_omega_02_holds_default_precisions_crossing():
    """The study at omega 0.2 (fast): the positional point turns unstable along theta near 1.65, where default
    precision's eigenvalue crosses 1 (test_study_saddle_against_default_precision recomputes it).  From the
    eigenvalue at the mean points alone the transition read 1.594 [1.587, 1.601], which excludes it; with the points'
    own error it holds it."""
    from attnphase.theory.transition.driver import transition

    sad = transition(Setting(omega=0.2)).critical["positional_saddle"]
    assert sad.found and sad.lo <= 1.65 <= sad.hi and sad.hi - sad.lo < 0.3, sad


def test_study_saddle_at_omega_0_is_read_over_the_positional_branchs_range():
    """The study at omega 0 (fast, the L = 2 adapter's ends): the transition seeks alpha_c and alpha_l below 0.76, and
    its saddle, read from those positional points alone, was `not in range` ("stable").  Scanned over the branch's
    range (the grid, and a point between its last and the branch's end at 0.93) it holds default precision's
    crossing at 0.78 (test_study_saddle_against_default_precision recomputes it)."""
    from attnphase.theory.transition.driver import transition

    res = transition(Setting(omega=0.0))
    sad, end = res.critical["positional_saddle"], res.critical["alpha_pos_vanishes"]
    assert sad.found and sad.lo <= 0.78 <= sad.hi < end.value, (sad, end)


def _default_crossing(s: Setting, alphas: list[float]) -> float:
    """Where the eigenvalue at default-precision positional points (16 scramblings of J's points, seed 7) crosses 1,
    linear between the two of alphas that straddle it."""
    from attnphase.theory.state_evolution.order import level_crossing

    pts = solve_curve(s, alphas, "positional", "default", stability=False)
    ev = [theta_stability(s, p.alpha, p, seed=7, at_least=16).eigenvalue for p in pts]
    k = next(k for k in range(len(ev) - 1) if ev[k] < 1.0 <= ev[k + 1])
    return level_crossing((alphas[k], ev[k]), (alphas[k + 1], ev[k + 1]), 1.0)


@pytest.mark.slow
def test_study_saddle_against_default_precision():
    """The study at omega 0.2 and 0 (fast): both ways of finding the branch ends (the L = 2 adapter, the solver's)
    give a positional_saddle holding default precision's crossing (measured 1.65 and 0.78).  At omega 0 the adapter's
    transition solved positional points only up to 0.76 and read "stable"; the saddle now scans the branch's whole
    range (a point between the grid's last and the branch's end, 0.93)."""
    from attnphase.theory.transition.driver import transition

    for omega, alphas in ((0.2, [1.6, 1.625, 1.65, 1.675, 1.7]), (0.0, [0.74, 0.76, 0.78, 0.8, 0.82])):
        s = Setting(omega=omega)
        ref = _default_crossing(s, alphas)
        for ends in ("adapter", "solves"):
            sad = transition(s, ends=ends).critical["positional_saddle"]
            assert sad.found and sad.lo <= ref <= sad.hi, (omega, ends, ref, sad)
