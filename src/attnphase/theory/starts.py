"""Starting points built from solutions of a smaller problem.

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
