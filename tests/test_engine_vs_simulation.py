"""The general theory against finite-d simulation (slow; run by hand or in the long suite).

For each shape (omega = 0.3, alpha = 1.5, d = 500, four seeds, lbfgs) the simulations from both starts are held
against the theory's fixed point of the branch they land on (measured, docs/equations.md "Held against
simulation"):

- (3, 1, 1) simplex and (4, 1, 1) orthogonal: both starts end semantic; the theory's positional branch has no
  fixed point there (collapsed / left the admissible set).
- (2, 2, 1): the rank-2 student ends in the mixed minimum (one direction semantic, one positional), the theory's
  "free" branch from the mixed start (theory/starts.py).
- (2, 1, 2): the positional start ends on the positional branch.  The semantic start keeps theta ~ 0.13 while the
  theory has no semantic fixed point below alpha ~ 1.75: an open discrepancy (strict xfail below).

Compared: train loss and test error, and the scalar summaries of the overlaps (tr(q)/r, rms over tokens of |m_l|,
largest singular value of theta), within 3 standard errors of the seed mean plus 5%.  The order parameter a branch
sets to zero (m on the semantic branch, theta on the positional one) is O(1/sqrt(d)) in simulation: it must be
below 1/sqrt(d).

Finite size, measured: the simulated losses contain the positional part of the output, (S p)_l, whose squared norm
over 2d is O(1/d) and vanishes in the theory's limit.  With orthogonal codes it is large at d = 500 (test error
0.00303 vs 0.00201 without it, L = 4; the excess times d is 0.51 at d = 250 and 500); codes with zero row sums
(simplex, antipodal) nearly cancel it.  The comparison removes this term exactly (same data, same trained Q).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnphase import Setting
from attnphase.theory import Overlaps, solve
from attnphase.theory.results import summaries

OMEGA, ALPHA, D, SEEDS, REL = 0.3, 1.5, 500, (0, 1, 2, 3), 0.05
# (L, r, r*, positions) -> [(theory branch, simulation start), ...]
CASES = {
    (3, 1, 1, "simplex"): [("semantic", "semantic"), ("semantic", "positional")],
    (2, 2, 1, "antipodal"): [("free", "semantic"), ("free", "positional")],
    (2, 1, 2, "antipodal"): [("positional", "positional")],
    (4, 1, 1, "orthogonal"): [("semantic", "semantic"), ("semantic", "positional")],
}
# The positional branch beyond L = 2 where it is the minimum: L = 3 simplex, omega = 0.6, alpha = 0.5, at d = 1000.
# Measured rms |m| (lbfgs): 0.171 +- 0.003 at d = 500, 0.160 +- 0.003 at d = 1000, 0.171 +- 0.0015 at d = 2000,
# theory 0.1588: above the theory by 1-8% with no trend in d, at d = 2000 exactly at the tolerance (docs/rank2.md).
L3_POSITIONAL = {"shape": (3, 1, 1, "simplex"), "omega": 0.6, "alpha": 0.5, "d": 1000}
KEYS = ("train_loss", "test_error", "q", "m", "theta")


def setting_of(shape: tuple, omega: float = OMEGA) -> Setting:
    L, r, rs, pos = shape
    return Setting(L=L, r=r, r_star=rs, positions=pos, omega=omega)


def theory_point(setting: Setting, alpha: float, branch: str, precision: str = "fast"):  # noqa: ANN201
    """The branch's fixed point with the lowest training loss over a few starts (the default start alone lands on
    a far, higher-loss positional point for r* = 2: m 2.83, train loss 0.0138 against 0.0060)."""
    from attnphase.theory.starts import mixed_start
    from attnphase.theory.state_evolution import default_start

    if branch == "free":
        return solve(setting, alpha, "free", precision, init=mixed_start(setting, alpha, precision))
    pts = [solve(setting, alpha, branch, precision)]
    if branch == "positional":
        d0 = default_start(setting, branch)
        starts = [Overlaps(q=0.08 * np.eye(setting.r), m=2.0 * d0.m, V=d0.V, theta=d0.theta)]
        if setting.L > 2:
            # A permutation-like pattern (one token against the others, rms 0.2): for permutation-symmetric A and
            # G the positional minima form a shallow ring in the zero-sum plane, along which the iteration from
            # the default start drifts without converging (measured at L = 3); this pattern is a symmetric point.
            e = np.zeros(setting.L)
            e[0] = 1.0
            pattern = setting.gram @ (e - e.mean())
            m = np.zeros((setting.L, setting.r))
            m[:, 0] = 0.2 * pattern / np.sqrt(np.mean(pattern**2))
            starts.append(Overlaps(q=d0.q, m=m, V=d0.V, theta=d0.theta))
        pts += [solve(setting, alpha, branch, precision, init=o) for o in starts]
    ok = [p for p in pts if p.valid]
    return min(ok, key=lambda p: p.train_loss) if ok else pts[0]


def content_losses(setting: Setting, d: int, alpha: float, seed: int, Q: np.ndarray) -> tuple[float, float]:
    """(train loss, test error) of a trained Q without the positional part of the output: yhat = S x instead
    of S (x + p), on the same training and test sets (the O(1/d) term the theory's limit drops)."""
    import torch

    from attnphase.simulation import sample_dataset
    from attnphase.simulation.model import attention_matrix

    pb = sample_dataset(setting, d, alpha, seed=seed)
    Qt = torch.as_tensor(Q, dtype=torch.float64)

    def per_sample(data) -> torch.Tensor:  # noqa: ANN001
        with torch.no_grad():
            S = attention_matrix(data.x + pb.p, Qt)
            return ((data.T @ data.x - S @ data.x) ** 2).sum(dim=(1, 2)) / (2 * d)

    train = float(per_sample(pb.train).sum()) / d + 0.5 * setting.lam * float((Qt**2).sum()) / d
    return train, float(per_sample(pb.test).mean())


def sim_record(setting: Setting, init: str, seed: int, d: int = D, alpha: float = ALPHA) -> dict[str, float]:
    import torch

    from attnphase.simulation import simulate

    torch.set_num_threads(1)
    res = simulate(setting, d=d, alpha=alpha, init=init, optimizer="lbfgs", seed=seed)
    L, r, rs = setting.L, setting.r, setting.r_star
    o = Overlaps(q=np.atleast_2d(res.q), m=np.asarray(res.m, dtype=float).reshape(L, r), V=np.eye(r),
                 theta=np.atleast_2d(res.theta).reshape(r, rs))
    s = summaries(o)
    train, test = content_losses(setting, d, alpha, seed, res.Q)
    return {"train_loss": train, "test_error": test, "train_loss_raw": float(res.train_loss),
            "test_error_raw": float(res.test_error), "q": s["q"], "m": s["m"], "theta": s["theta"]}


def compare(fp, sims: list[dict[str, float]], d: int = D) -> list[tuple]:  # noqa: ANN001
    """Rows (quantity, theory, sim mean, sim sem, ok)."""
    theory = {"train_loss": fp.train_loss, "test_error": fp.test_error, **fp.summary()}
    zero = {"semantic": "m", "positional": "theta"}.get(fp.branch)
    rows = []
    for key in KEYS:
        v = np.array([x[key] for x in sims])
        mean, sem = float(v.mean()), float(v.std(ddof=1) / np.sqrt(len(v)))
        if key == zero:
            ok = mean <= 1.0 / math.sqrt(d)
        else:
            ok = abs(theory[key] - mean) <= 3 * sem + REL * abs(theory[key])
        rows.append((key, float(theory[key]), mean, sem, bool(ok)))
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("shape", list(CASES), ids=lambda s: "L{}r{}rs{}-{}".format(*s))
def test_theory_matches_simulation(shape):
    setting = setting_of(shape)
    for branch, init in CASES[shape]:
        fp = theory_point(setting, ALPHA, branch)
        assert fp.valid, (branch, fp.status, fp.message)
        rows = compare(fp, [sim_record(setting, init, s) for s in SEEDS])
        bad = [row for row in rows if not row[-1]]
        assert not bad, (branch, init, bad)


@pytest.mark.slow
def test_positional_branch_beyond_two_tokens_matches_simulation():
    c = L3_POSITIONAL
    setting = setting_of(c["shape"], c["omega"])
    fp = theory_point(setting, c["alpha"], "positional")
    assert fp.valid, (fp.status, fp.message)
    rows = compare(fp, [sim_record(setting, "positional", s, d=c["d"], alpha=c["alpha"]) for s in SEEDS], d=c["d"])
    bad = [row for row in rows if not row[-1]]
    assert not bad, bad


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="open: at L = 2, r = 1, r* = 2, alpha = 1.5 simulations from the semantic "
                   "start keep theta ~ 0.13 (d = 250 ... 2000) while the theory's semantic branch collapses")
def test_rank2_teacher_semantic_branch_exists_at_alpha_1_5():
    fp = solve(setting_of((2, 1, 2, "antipodal")), ALPHA, "semantic", "fast")
    assert fp.valid and fp.theta_norm > 0.1
