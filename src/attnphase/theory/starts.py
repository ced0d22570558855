"""Starting points: solves that fall back through several starts, starts built from a smaller problem, and the
extra starts of a multi-start solve.

solve_retrying: a solve from a neighbour's fixed point that fails is retried from the nearest solved point, then
from the default start (transition's fixed points and the bisection of branch_ends.validity_ends).

The mixed start of the free branch for a rank-2 student (r = 2, r* = 1): direction 1 is the rank-1 student's
semantic solution, direction 2 its positional one.  The free branch's default start runs off to a far positional
point at L = 2, alpha = 1.5 (m ~ 3, not converged), while from this start it converges to the mixed minimum that
simulations reach (one direction semantic, one positional; docs/rank2.md).
"""

from __future__ import annotations

import numpy as np

from attnphase.setting import Setting
from attnphase.theory.overlaps import Overlaps
from attnphase.theory.results import FixedPoint


def solve_retrying(setting: Setting, alpha: float, branch: str, precision: str, seed: int,
                   init: Overlaps | FixedPoint | None, nearest: FixedPoint | None = None) -> tuple[FixedPoint, int]:
    """solve() from init; where that fails, from the nearest solved point of the branch, then from the default
    start (a neighbour next to a branch end, where the order parameter is small, can lead the iteration onto the
    agnostic point).  A start that is init is not tried twice.  (last fixed point, solves)."""
    from attnphase.theory.state_evolution import solve

    p = solve(setting, alpha, branch, precision, init=init, seed=seed)
    n = 1
    for retry in ([nearest] if nearest is not None else []) + [None]:
        if p.valid or retry is init:
            continue
        p = solve(setting, alpha, branch, precision, init=retry, seed=seed)
        n += 1
    return p, n


def mixed_start_from(semantic: FixedPoint | None, positional: FixedPoint | None, L: int) -> Overlaps:
    """Rank-2 overlaps from rank-1 fixed points (invalid or missing ones replaced by the default start's values:
    q 0.05 / 0.02, V 15, theta 0.1, m 0.2 along the first token's sign pattern of the positional code)."""
    s = semantic if semantic is not None and semantic.valid else None
    p = positional if positional is not None and positional.valid else None
    qs, Vs, ts = (float(s.q[0, 0]), float(s.V[0, 0]), float(s.theta[0, 0])) if s else (0.05, 15.0, 0.1)
    qp, Vp = (float(p.q[0, 0]), float(p.V[0, 0])) if p else (0.02, 15.0)
    if p is not None:
        mp = np.asarray(p.m[:, 0], dtype=float)
    else:
        mp = np.zeros(L)
        mp[0], mp[1:] = 0.2, -0.2 / (L - 1)
    return Overlaps(q=np.diag([qs, qp]), m=np.stack([np.zeros(L), mp], axis=1), V=np.diag([Vs, Vp]),
                    theta=np.array([[ts], [0.0]]))


def mixed_start(setting: Setting, alpha: float, precision: str = "fast", seed: int = 0) -> Overlaps:
    """The mixed start of the free branch for r = 2, r* = 1, from the rank-1 student's semantic and positional
    fixed points at the same alpha (two rank-1 solves)."""
    from attnphase.theory.state_evolution import solve

    if setting.r != 2 or setting.r_star != 1:
        raise ValueError(f"the mixed start is built for r = 2, r* = 1; got r = {setting.r}, r* = {setting.r_star}")
    one = setting.replace(r=1)
    return mixed_start_from(solve(one, alpha, "semantic", precision, seed=seed),
                            solve(one, alpha, "positional", precision, seed=seed), setting.L)


def extra_starts(setting: Setting, alpha: float, branch: str, precision: str = "fast", seed: int = 0) -> list[Overlaps]:
    """Starts besides the default one for solve(..., multistart=True), each for a fixed point the default start
    was measured to miss (docs/rank2.md):

    - positional: q = 0.08, m twice the default's (for r* = 2 the default start converges to a far positional
      point, m 2.83, train loss 0.0138, which simulations never reach; this start to the near one, m 0.329,
      train loss 0.0060, alpha = 1.5); for L > 2 also a permutation-like pattern (one token against the others
      through G, rms 0.2): with permutation-symmetric A and G the positional minima form a shallow ring and the
      default start drifts along it;
    - free, r = 2, r* = 1: the mixed start (two rank-1 solves at this alpha; see mixed_start).
    The study's setting (L = 2, r = r* = 1) has none: its default starts are the measured ones."""
    from attnphase.theory.state_evolution import default_start

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
    if branch == "free" and setting.r == 2 and setting.r_star == 1:
        out.append(mixed_start(setting, alpha, precision, seed))
    return out
