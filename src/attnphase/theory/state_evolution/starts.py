"""Starting points of the iteration, built without solving anything: the default start of each branch, the
structured starts the default one was measured to miss, and the rank-2 mixed start from rank-1 fixed points.

The mixed start of the free branch for a rank-2 student (r = 2, r* = 1): direction 1 is the rank-1 student's
semantic solution, direction 2 its positional one.  The free branch's default start runs off to a far positional
point at L = 2, alpha = 1.5 (m ~ 3, not converged), while from this start it converges to the mixed minimum that
simulations reach (one direction semantic, one positional; docs/rank2.md).
"""

from __future__ import annotations

import numpy as np

from attnphase.setting import Setting
from attnphase.theory.model.overlaps import Branch, Layout, Overlaps, as_branch, lift_to_untied
from attnphase.theory.state_evolution.results import FixedPoint


def default_start(setting: Setting, branch: str | Branch) -> Overlaps:
    """Starting overlaps.  Study (L = 2, r = r* = 1): positional (q, m, V, theta) = (0.02, 0.2, 15, 0), semantic
    (0.9, 0, 15, 0.35), agnostic (0.05, 0, 15, 0).  In general: V = 15 (sigma^2 / lambda) / 25 times I; positional m
    along the leading direction of the positional Gram matrix in the first rank direction; semantic theta = 0.35
    on the first min(r, r*) diagonal entries with q = 0.9 there and 0.05 in the other student directions; free:
    both, with m in the first direction theta leaves free when r > min(r, r*) (the mixed start).  Untied
    student: the tied start lifted (overlaps.lift_to_untied: m = [m, m], theta = [theta; theta], q's blocks 0.9
    correlated)."""
    b = as_branch(branch)
    if setting.untied:
        # The tied default start lifted to the untied field rank (Q = K up to a slightly decorrelated q).
        return lift_to_untied(default_start(setting.replace(student="tied"), b))
    L, r, rs = setting.L, setting.r, setting.r_star
    V = 15.0 * (setting.sigma**2 / setting.lam) / 25.0 * np.eye(r)
    m = np.zeros((L, r))
    theta = np.zeros((r, rs))
    q = (0.05 if b == Branch.agnostic else 0.02) * np.eye(r)
    if b.has_m:
        U = Layout.for_setting(setting, b).basis
        # Free branch with r > min(r, r*): m in the first rank direction theta leaves free (the mixed start).
        col = min(r, rs) if (b == Branch.free and r > min(r, rs)) else 0
        if U.shape[1]:
            m[:, col] = 0.2 * U[:, 0]
    if b.has_theta:
        k = min(r, rs)
        theta[:k, :k] = 0.35 * np.eye(k)
        q = np.diag([0.9] * k + [0.05] * (r - k))
    return Overlaps(q=q, m=m, V=V, theta=theta)



def mixed_start_from(semantic: FixedPoint | None, positional: FixedPoint | None, setting: Setting) -> Overlaps:
    """Rank-2 overlaps from rank-1 fixed points (invalid or missing ones replaced by the default start's values:
    q 0.05 / 0.02, the default V, theta 0.1, m 0.2 along the first token's sign pattern of the positional code)."""
    L = setting.L
    V0 = float(default_start(setting.replace(r=1), "agnostic").V[0, 0])
    s = semantic if semantic is not None and semantic.valid else None
    p = positional if positional is not None and positional.valid else None
    qs, Vs, ts = (float(s.q[0, 0]), float(s.V[0, 0]), float(s.theta[0, 0])) if s else (0.05, V0, 0.1)
    qp, Vp = (float(p.q[0, 0]), float(p.V[0, 0])) if p else (0.02, V0)
    if p is not None:
        mp = np.asarray(p.m[:, 0], dtype=float)
    else:
        mp = np.zeros(L)
        mp[0], mp[1:] = 0.2, -0.2 / (L - 1)
    return Overlaps(q=np.diag([qs, qp]), m=np.stack([np.zeros(L), mp], axis=1), V=np.diag([Vs, Vp]),
                    theta=np.array([[ts], [0.0]]))


def structured_starts(setting: Setting, branch: str) -> list[Overlaps]:
    """Starts besides the default one that need no solve, each for a fixed point the default start was measured to
    miss (docs/rank2.md): positional, q = 0.08, m twice the default's (for r* = 2 the default start converges to a
    far positional point, m 2.83, train loss 0.0138, which simulations never reach; this start to the near one,
    m 0.329, train loss 0.0060, alpha = 1.5); for L > 2 also a permutation-like pattern (one token against the
    others through G, rms 0.2): with permutation-symmetric A and G the positional minima form a shallow ring and the
    default start drifts along it.  The study's setting (L = 2, r = r* = 1) has none."""
    if setting.untied:
        return []
    d0 = default_start(setting, branch)
    out: list[Overlaps] = []
    if branch == "positional" and (setting.L > 2 or setting.r > 1 or setting.r_star > 1):
        out.append(Overlaps(q=0.08 * np.eye(setting.r), m=2.0 * d0.m, V=d0.V, theta=d0.theta))
        if setting.L > 2:
            e = np.zeros(setting.L)
            e[0] = 1.0
            pattern = setting.gram @ (e - e.mean())
            if np.any(pattern != 0):
                m = np.zeros((setting.L, setting.r))
                m[:, 0] = 0.2 * pattern / np.sqrt(np.mean(pattern**2))
                out.append(Overlaps(q=d0.q, m=m, V=d0.V, theta=d0.theta))
    return out
