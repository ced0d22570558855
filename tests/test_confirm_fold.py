"""A fold read off the solver's validity is held at the next precision level (transition.ends.confirm_fold).

A finite point set breaks the Z2 symmetry of a branch's order parameter at O(n^-1/2), which unfolds a supercritical
pitchfork into a branch that goes on beyond it to a fold of its own; a subcritical branch exists beyond its pitchfork
at any number of points.  The references are the study's semantic branch, which ends at a supercritical pitchfork
near 0.72 (the L = 2 adapter: Newton on its exact slope, the branch followed by pseudo-arclength), and, slow, the
default precision's theta^2 at L = 3.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnphase import Setting
from attnphase.theory.state_evolution.curves import solve_curve
from attnphase.theory.transition.driver import transition
from attnphase.theory.transition.ends import confirm_fold
from attnphase.theory.transition.records import Critical

STUDY = Setting(omega=0.3)
PITCH = Critical("semantic_pitchfork", 0.7202, 0.7051, 0.7353, "pitchfork", "linearised")  # `transition`'s record


@pytest.fixture(scope="module")
def fast_semantic() -> list:
    points = solve_curve(STUDY, [0.8, 0.75], "semantic", "fast")
    assert all(p.valid for p in points)
    return points


def test_a_fold_where_the_branch_is_absent_at_the_finer_precision_is_the_pitchfork(fast_semantic) -> None:
    """A fold below the study's semantic pitchfork (where the d -> infinity branch does not exist): the default
    precision's solve halfway between it and the pitchfork collapses, so the end is the pitchfork."""
    fold = Critical("alpha_sem_appears", 0.51, 0.50, 0.52, "fold", "bisection")
    got = confirm_fold(STUDY, "semantic", fold, PITCH, "lower", "fast", 0, fast_semantic)
    assert got.kind == "pitchfork"
    assert (got.value, got.lo, got.hi) == (PITCH.value, PITCH.lo, PITCH.hi)


def test_a_fold_where_the_branch_exists_at_the_finer_precision_stands(fast_semantic) -> None:
    """The same branch with a pitchfork condition placed above where it exists (0.95-1.05): the default precision's
    solve at 0.875 is valid, so the fold stands, unchanged."""
    pitch = Critical("semantic_pitchfork", 1.0, 0.95, 1.05, "pitchfork", "placed")
    fold = Critical("alpha_sem_appears", 0.79, 0.78, 0.80, "fold", "bisection")
    got = confirm_fold(STUDY, "semantic", fold, pitch, "lower", "fast", 0, fast_semantic)
    assert got.kind == "fold" and (got.value, got.lo, got.hi) == (fold.value, fold.lo, fold.hi)


def test_a_fold_at_the_finest_precision_stands_with_the_reason_saying_so(fast_semantic) -> None:
    fold = Critical("alpha_sem_appears", 0.51, 0.50, 0.52, "fold", "bisection")
    got = confirm_fold(STUDY, "semantic", fold, PITCH, "lower", "high", 0, fast_semantic)
    assert got.kind == "fold" and (got.value, got.lo, got.hi) == (fold.value, fold.lo, fold.hi)
    assert got.reason


@pytest.mark.slow
def test_l3_semantic_end_is_the_pitchfork_the_default_precision_finds() -> None:
    """L = 3 simplex, omega 0.6 (`transition`'s fast precision): valid semantic points reach below the pitchfork's
    interval to a fold near 0.35 (the point set's imperfection).  At default precision theta^2 falls linearly to
    zero inside the recorded interval (measured 0.425 from four points at 0.47-0.6)."""
    s = Setting(L=3, positions="simplex", omega=0.6)
    r = transition(s)
    end = r.critical["alpha_sem_appears"]
    assert end.kind == "pitchfork", end
    ref = [p for p in solve_curve(s, [0.6, 0.5], "semantic", "default") if p.valid]
    assert len(ref) == 2
    (a1, t1), (a2, t2) = [(p.alpha, p.summary()["theta"]) for p in ref]
    zero = a1 - t1**2 * (a1 - a2) / (t1**2 - t2**2)
    assert np.isfinite(zero) and end.lo <= zero <= end.hi, (zero, end)


def test_a_fold_the_finer_precision_gives_no_verdict_on_is_unknown_from_fold_to_pitchfork(fast_semantic,
                                                                                        monkeypatch) -> None:
    """Where the finer solve ran out of iterations, either reading may hold: kind "unknown", the interval from the
    fold's bottom to the pitchfork's top."""
    from types import SimpleNamespace

    from attnphase.notes import Status
    from attnphase.theory.transition import ends

    monkeypatch.setattr(ends, "probe_valid", lambda *a: SimpleNamespace(valid=False, status=Status.not_converged))
    fold = Critical("alpha_sem_appears", 0.51, 0.50, 0.52, "fold", "bisection")
    got = confirm_fold(STUDY, "semantic", fold, PITCH, "lower", "fast", 0, fast_semantic)
    assert got.kind == "unknown" and got.value == fold.value
    assert (got.lo, got.hi) == (fold.lo, PITCH.hi)


def test_a_mixed_fold_where_the_branch_exists_at_the_finer_precision_stands() -> None:
    """The mixed branch (r = 2, omega 0.3, born near 0.57: `transition --rank 2`) with a pitchfork condition placed
    above where it exists: the default precision's solve at 1.125 is valid (both order parameters non-zero), so the
    fold stands."""
    s = Setting(r=2, omega=0.3)
    points = solve_curve(s, [1.2, 1.0], "mixed", "fast")
    assert all(p.valid for p in points)
    pitch = Critical("mixed_pitchfork", 1.35, 1.3, 1.4, "pitchfork", "placed")
    fold = Critical("alpha_mixed_appears", 0.925, 0.9, 0.95, "fold", "bisection")
    got = confirm_fold(s, "mixed", fold, pitch, "lower", "fast", 0, points)
    assert got.kind == "fold" and (got.value, got.lo, got.hi) == (fold.value, fold.lo, fold.hi)
