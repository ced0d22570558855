"""Independent check of the asymptotic theory against finite-d experiments (docs/model.md).

alpha = 1.5, omega = 0.3 (study's sigma, lambda, A), d = 400, 8 seeds per start, L-BFGS to round-off.
Each branch is compared with the runs from its own start (positional start <-> positional branch,
semantic start <-> semantic branch).  Allowance for a simulated mean against the theory value:
3 standard errors over seeds (seed-to-seed fluctuations are O(1/sqrt(d)) and dominate) plus 5% of the
theory value (finite-size bias; the tolerance of the theory itself is far smaller).  The overlap that is
zero on a branch (theta on the positional one, m on the semantic one) is only |.|-measurable at finite d,
where it is O(1/sqrt(d)): it must stay below 1/sqrt(d).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnphase import Setting

pytestmark = pytest.mark.slow

D = 400
ALPHA = 1.5
SEEDS = range(8)
SETTING = Setting(omega=0.3)


def _runs(init: str):
    from attnphase.experiments.simulation import simulate

    return [simulate(SETTING, D, ALPHA, init=init, optimizer="lbfgs", seed=s, n_test=10000, device="cpu")
            for s in SEEDS]


def _check(name: str, values: list[float], theory: float, rel: float = 0.05) -> str:
    v = np.asarray(values, dtype=float)
    mean, se = float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v)))
    allowed = 3 * se + rel * abs(theory)
    msg = f"{name}: simulated {mean:.6g} +- {se:.2g} (d = {D}, {len(v)} seeds), theory {theory:.6g}"
    print(msg + f", |diff| {abs(mean - theory):.2g}, allowed {allowed:.2g}")
    assert abs(mean - theory) <= allowed, msg + f", allowed {allowed:.2g}"
    return msg


@pytest.mark.parametrize("branch", ["positional", "semantic"])
def test_branch_matches_simulations(branch):
    from attnphase.theory import linear_baseline, solve

    fp = solve(SETTING, ALPHA, branch=branch, precision="default")
    assert fp.converged and fp.status == "ok", f"theory {branch} branch: {fp.status}"
    runs = _runs(branch)
    assert all(r.converged for r in runs)
    # The theory's overlaps are arrays (L x r, r x r*); their scalar summaries are the study's q, m, theta.
    theory = {**fp.summary(), "train_loss": fp.train_loss, "test_error": fp.test_error}
    for name in ("q", "train_loss", "test_error"):
        _check(name, [getattr(r, name) for r in runs], theory[name])
    live, dead = ("m", "theta") if branch == "positional" else ("theta", "m")
    _check(live, [getattr(r, live) for r in runs], theory[live])
    assert theory[dead] == 0.0
    dead_mean = float(np.mean([getattr(r, dead) for r in runs]))
    assert dead_mean < 1 / math.sqrt(D), f"{dead} = {dead_mean:.3g} on the {branch} branch"
    # the linear baseline does not depend on the branch; check it here too
    _check("test_error_linear", [r.test_error_linear for r in runs],
           linear_baseline(SETTING).test_error_linear)


def test_semantic_wins_at_this_alpha_in_both():
    """At alpha = 1.5, omega = 0.3 the theory puts the global minimum on the semantic branch; the runs
    from the semantic start must have the lower training loss too (same samples, seed by seed)."""
    from attnphase.theory import solve

    pos = solve(SETTING, ALPHA, branch="positional")
    sem = solve(SETTING, ALPHA, branch="semantic")
    theory_says_semantic = sem.train_loss < pos.train_loss
    from attnphase.experiments.simulation import simulate

    wins = 0
    for s in SEEDS:
        kw = dict(optimizer="lbfgs", seed=s, n_test=100, device="cpu")
        p = simulate(SETTING, D, ALPHA, init="positional", **kw)
        q = simulate(SETTING, D, ALPHA, init="semantic", **kw)
        wins += q.train_loss < p.train_loss
    if theory_says_semantic:
        assert wins >= len(SEEDS) - 1
    else:
        assert wins <= 1
