"""An order parameter is zero within its error at the confidence of 3 normal errors, whatever the scramblings' count.

The mean of k scramblings' fixed points has k - 1 degrees of freedom: with 3 errors as the bound, 4 scramblings (fast)
called a branch present where the exact map has none (L = 4 orthogonal, omega 0.3, alpha 2, pattern 1+1-: its first
four scramblings all leaned one way, m 4.7 errors from zero)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm
from scipy.stats import t as student_t

from attnphase import Setting
from attnphase.theory import solve
from attnphase.theory.model.overlaps import Branch
from attnphase.theory.solvers.fixed_point import Status
from attnphase.theory.state_evolution.branch_map import BranchMap
from attnphase.theory.state_evolution.precision import get_precision, integration_points
from attnphase.theory.state_evolution.solve import RESOLVE_REPLICAS, check_pattern, zero_within


def test_zero_within_is_the_student_quantile_at_the_confidence_of_three_normal_errors():
    for k in range(2, 41):
        assert math.isclose(zero_within(k), student_t.ppf(norm.cdf(3.0), k - 1), rel_tol=1e-9), k
    assert 9.0 < zero_within(4) < 9.5 and 5.4 < zero_within(6) < 5.6
    assert 3.0 < zero_within(10_000) < 3.01


def test_a_token_pattern_whose_first_scramblings_lean_one_way_is_not_a_branch():
    """The exact map is odd in m (Q -> -Q per student direction), so at m = 0 its image has m = 0: the finite point
    sets' images there scatter around zero.  The first four lean one way (the fixed points' m -0.008, -0.010, -0.0015,
    -0.005), 16 do not; with them the verdict is the exact map's: collapsed, as at alpha 1.8 and 2.2.  (Since
    anderson keeps each order parameter's sign, the contraction certificate can give the same verdict first.)"""
    s = Setting(L=4, positions="orthogonal", omega=0.3)
    pattern = check_pattern(s, "positional", "1+1-")
    prec = get_precision("fast")
    fp = solve(s, 2.0, "positional", "fast", pattern="1+1-", stability=False)
    assert fp.status == Status.collapsed and ("zero within its error" in fp.message or "contracts" in fp.message)
    # the independent reference: the images of m = 0 over RESOLVE_REPLICAS scramblings, zero within 3 errors
    x = BranchMap(s, 2.0, Branch.positional, integration_points(s, prec, 0, 0), pattern=pattern).layout.pack(
        solve(s, 2.0, "agnostic", "fast").overlaps)
    images = []
    for rep in range(RESOLVE_REPLICAS):
        bm = BranchMap(s, 2.0, Branch.positional, integration_points(s, prec, rep, 0), pattern=pattern)
        images.append(bm.unpack(bm.step(x)[0]).m[0, 0])
    images = np.array(images)
    first = images[:prec.replicas]
    assert abs(first.mean()) > 3 * first.std(ddof=1) / 2  # the first four lean one way (the case this rule is for)
    assert abs(images.mean()) < 3 * images.std(ddof=1) / math.sqrt(len(images))


def test_a_valid_point_reports_an_order_parameter_beyond_the_bound_of_its_scramblings():
    """A valid point's reported order parameter (the summary tables print) is beyond zero_within(k) of its reported
    errors.  The untied student's verdict took the tied student's size of the scramblings' mean against the untied
    sizes' error: `fast`, omega 0.3, semantic, alpha 0.585 was `ok` with theta 0.0036 +- 0.0017 (2.1 errors), below
    the linearised pitchfork (0.702): points its finite point sets sustain."""
    from attnphase.theory import solve_curve

    for setting, branch, alphas in ((Setting(student="untied"), "semantic", [0.59, 0.585, 0.58]),
                                    (Setting(), "positional", [0.5, 0.9, 1.0])):
        for fp in solve_curve(setting, alphas, branch, "fast"):
            name = "theta" if branch == "semantic" else "m"
            if fp.valid:
                assert fp.summary()[name] >= zero_within(fp.n_replicas) * fp.errors[name], (fp.alpha, fp.summary())


def test_a_theta_eigenvalue_is_unstable_beyond_the_student_bound_of_its_scramblings():
    """stability.ThetaStability against 1 with the same bound: beyond it `unstable` and resolved; between 3 errors
    and it, not unstable and not resolved (theta_stability then adds scramblings); within 3 errors, resolved."""
    from attnphase.theory.state_evolution.stability import ThetaStability

    def st(values):
        v = np.asarray(values)
        return ThetaStability(float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size)), tuple(values))

    bound = student_t.ppf(norm.cdf(3.0), 2)  # (3 scramblings: 19.2)
    far = st([1.031, 1.034, 1.037])  # 1.034 +- 0.0017: 19.6 errors above 1
    assert far.error * bound < far.eigenvalue - 1.0 and far.unstable and far.resolved
    mid = st([1.02, 1.034, 1.048])  # +- 0.0081: 4.2 errors
    assert not mid.unstable and not mid.resolved
    near = st([0.99, 1.01, 1.02])  # 0.4 errors
    assert not near.unstable and near.resolved


def test_welch_count_is_welch_satterthwaites_against_scipy():
    """order.welch_count (J's error and a positional point's own, each with its count) against the degrees of freedom
    of scipy's Welch t-test on samples with those standard errors and counts (plus one); one part: its own count."""
    from scipy.stats import ttest_ind

    from attnphase.theory.state_evolution.order import welch_count

    rng = np.random.default_rng(0)
    for na, nb, sb in ((3, 4, 5.0), (16, 4, 0.3), (6, 12, 1.0)):
        a, b = rng.normal(0.0, 1.0, na), rng.normal(0.0, sb, nb)
        ea, eb = a.std(ddof=1) / np.sqrt(na), b.std(ddof=1) / np.sqrt(nb)
        df = ttest_ind(a, b, equal_var=False).df
        assert welch_count([(ea, na), (eb, nb)]) == pytest.approx(df + 1.0, rel=1e-12)
        assert min(na, nb) <= welch_count([(ea, na), (eb, nb)]) <= na + nb - 1
    assert welch_count([(0.01, 6)]) == 6.0 and welch_count([(0.01, 6), (0.0, 4)]) == 6.0
    assert welch_count([]) == 0.0


def test_a_theta_eigenvalue_with_its_points_error_is_unstable_beyond_both_together():
    """ThetaStability with the point's own error: `unstable` only where the eigenvalue clears 1 by the Student-t bound
    of both errors together (Welch's count); a point error that is large undoes J's verdict, a small one does not
    (L = 3, omega 0.6, alpha 2, fast: 1.0895 +- 0.0141 from 6 of J's, 0.0050 from 4 of the point's: still unstable)."""
    import dataclasses

    from attnphase.theory.state_evolution.stability import ThetaStability

    j = ThetaStability(1.0895, 0.0141, (1.0,) * 6)
    assert j.unstable and j.total_error == j.error
    small = dataclasses.replace(j, point_error=0.0050, point_scramblings=4)
    large = dataclasses.replace(j, point_error=0.03, point_scramblings=4)
    assert small.unstable and not large.unstable
    k = 1.0 + (0.0141**2 + 0.005**2) ** 2 / (0.0141**4 / 5 + 0.005**4 / 3)
    bound = student_t.ppf(norm.cdf(3.0), k - 1)
    assert (small.eigenvalue - bound * np.hypot(0.0141, 0.005) > 1.0) == small.unstable
