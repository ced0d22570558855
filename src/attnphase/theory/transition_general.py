"""transition() for any setting the engine solves: the branch ends from where the solver finds each branch.

Beyond the study's geometry there is no branch-end adapter: each end is bracketed on the solver's validity
(:func:`attnphase.theory.branch_ends.validity_ends`, kind "unknown"), and alpha_c and alpha_l are found on the grid
as in the study's path (:mod:`attnphase.theory.transition_roots`), on fixed points started from the nearest valid
solved point of the branch.
"""

from __future__ import annotations

import math
import time

from attnphase.setting import Setting
from attnphase.theory.branch_ends import validity_ends
from attnphase.theory.curves import Critical, global_minimum_curve
from attnphase.theory.results import FixedPoint
from attnphase.theory.starts import solve_retrying
from attnphase.theory.transition import TransitionResult
from attnphase.theory.transition_roots import alpha_c_on_grid, alpha_l_on_grid, branch_curves


def transition_general(setting: Setting, grid: list[float], precision: str, xtol: float, seed: int, z: float,
                       te_lin: float, t0: float, c0: float) -> TransitionResult:
    """transition() for any setting the engine solves: the branch ends from the solver's validity
    (branch_ends.validity_ends), then the same crossings as the study's path, on fixed points started from the
    nearest valid solved point of the branch."""
    alpha_min, alpha_max = grid[0], grid[-1]
    ve = validity_ends(setting, grid, precision, seed, xtol=max(2 * xtol, 0.02))
    cache: dict[tuple[str, float], FixedPoint] = {(p.branch, round(p.alpha, 12)): p for p in ve.points}
    solves = [len(ve.points)]

    def exists(branch: str, a: float) -> bool:
        lo, hi = ve.range[branch]
        return lo < a < hi

    def fp(branch: str, a: float) -> FixedPoint:
        key = (branch, round(a, 12))
        if key not in cache:
            known = sorted((p for (b, _), p in cache.items() if b == branch and p.valid),
                           key=lambda p: abs(p.alpha - a))
            p, n = solve_retrying(setting, a, branch, precision, seed, init=known[0] if known else None)
            solves[0] += n
            cache[key] = p
        return cache[key]

    def delta(a: float) -> tuple[float, float]:
        if not (exists("semantic", a) and exists("positional", a)):
            return float("nan"), float("nan")
        ps, pp = fp("semantic", a), fp("positional", a)
        if not (ps.valid and pp.valid):
            return float("nan"), float("nan")
        return ps.train_loss - pp.train_loss, math.hypot(ps.errors.get("train_loss", 0.0),
                                                         pp.errors.get("train_loss", 0.0))

    def global_excess(a: float) -> tuple[float, float]:
        pts = {b: [fp(b, a)] for b in ("semantic", "positional") if exists(b, a)}
        gm = global_minimum_curve(pts)
        if not gm:
            gm = global_minimum_curve({"agnostic": [fp("agnostic", a)]})
        if not gm:
            return float("nan"), float("nan")
        return gm[0].test_error - te_lin, gm[0].errors.get("test_error", 0.0)

    critical = dict(ve.ends)
    for b in ("semantic", "positional"):
        critical[f"{b}_pitchfork"] = Critical.missing(f"{b}_pitchfork", "not in range", "the pitchfork condition is "
                                                      "located by the L = 2 adapter only (ends='adapter')")
    # --- alpha_c: the sign change of the loss difference on the grid where both branches are valid
    d_pts = [(a, d) for a in grid if math.isfinite(d := delta(a)[0])]
    sem_c = critical["alpha_sem_appears"]
    alpha_c = alpha_c_on_grid(d_pts, delta, xtol, z, alpha_min, alpha_max)
    if alpha_c is None:
        if sem_c.found and (not d_pts or all(d <= 0 for _, d in d_pts)):
            why = ("no positional fixed point where the semantic branch appears" if not d_pts else
                   "semantic below positional wherever both exist")
            alpha_c = Critical("alpha_c", sem_c.value, sem_c.lo, sem_c.hi, "at spinodal",
                               f"{why}: the global minimum switches where the semantic branch appears", why)
        elif ve.range["semantic"][0] == -math.inf and all(d <= 0 for _, d in d_pts):
            alpha_c = Critical.missing(
                "alpha_c", "not in range", f"the semantic branch is valid down to alpha_min = {alpha_min:g} and lower "
                f"than the positional one wherever both exist{'' if d_pts else ' (no positional fixed point found)'}: "
                f"alpha_c < {alpha_min:g}")
        else:
            alpha_c = Critical.missing("alpha_c", "failed", "no bracketed sign change of the training-loss difference")
    critical["alpha_c"] = alpha_c
    # --- alpha_l: the last crossing of the global minimum's test error with the baseline, seen from above
    g_pts = [(a, v) for a in grid if math.isfinite(v := global_excess(a)[0])]
    critical["alpha_l"] = alpha_l_on_grid(g_pts, alpha_c, global_excess, xtol, z, alpha_min)
    curves = branch_curves(cache)
    return TransitionResult(omega=setting.omega, critical=critical, test_error_linear=te_lin,
                            alpha_range=(alpha_min, alpha_max), curves=curves, solves=solves[0],
                            seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)
