"""transition() in the study's geometry (L = 2, r = r* = 1, antipodal): the branch ends from the adapter.

The branch ends are located as properties of the equations (:mod:`attnphase.theory.branch_ends`: pitchfork or
fold), then both branches are solved on the alpha grid downward from alpha_max only where they exist, until
alpha_c and alpha_l are bracketed (:mod:`attnphase.theory.transition_roots`).  With an executor, the positional
branch's end and fixed points are computed in a second process while this one does the semantic branch's.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from attnphase.setting import Setting
from attnphase.theory.branch_ends import EndResult, branch_end, merge_end, path_as_overlaps
from attnphase.theory.curves import Critical, global_minimum_curve
from attnphase.theory.results import FixedPoint, Overlaps
from attnphase.theory.starts import solve_retrying
from attnphase.theory.transition import TransitionResult
from attnphase.theory.transition_roots import alpha_c_on_grid, alpha_l_on_grid, branch_curves


def _positional_ends(setting: Setting, alpha_min: float, alpha_max: float, precision: str,
                     seed: int) -> tuple[EndResult, EndResult | None]:
    """The positional branch's pitchfork (where it appears) and, where the agnostic point is stable again in m at
    alpha_max (omega <= 0.2), where it merges back into it: (pitchfork end, merge end or None)."""
    # The positional branch appears at a supercritical pitchfork at small alpha; whether it vanishes (at a fold)
    # in range is only followed by continuation when its curve says it may (a point that is not valid above
    # the pitchfork): following it to alpha_max costs more than the rest of the transition.
    pos_end = branch_end(setting, "positional", alpha_min, alpha_max, precision, seed, follow=False)
    merge = None
    if pos_end.pitchfork.found:
        merge = merge_end(setting, "positional", max(pos_end.pitchfork.hi, alpha_min), alpha_max, precision, seed)
    return pos_end, merge


def transition_study(setting: Setting, alpha_min: float, alpha_max: float, n_grid: int, precision: str,
                     xtol: float, seed: int, z: float, te_lin: float, t0: float, c0: float,
                     ex: Any) -> TransitionResult:
    """transition() with the branch ends from the L = 2 adapter; ``ex``: an executor for the positional branch's
    work, or None (serial)."""
    critical: dict[str, Critical] = {}
    grid = [float(a) for a in np.linspace(alpha_min, alpha_max, n_grid)]
    solves = [0]
    cache: dict[tuple[str, float], FixedPoint] = {}
    pos_future = ex.submit(_positional_ends, setting, alpha_min, alpha_max, precision, seed) if ex else None
    sem_end = branch_end(setting, "semantic", alpha_min, alpha_max, precision, seed)
    pos_end, merge = (pos_future.result() if pos_future is not None
                      else _positional_ends(setting, alpha_min, alpha_max, precision, seed))
    pos_followed = False
    if merge is not None:
        if merge.critical.found:
            pos_end = EndResult("positional", merge.critical, pos_end.pitchfork, per_scrambling=merge.per_scrambling,
                                evaluations=pos_end.evaluations + merge.evaluations, order_name=merge.order_name)
            pos_followed = True

    def exists(branch: str, a: float) -> bool:
        end = sem_end if branch == "semantic" else pos_end
        c = end.critical
        if branch == "semantic":
            lo = c.hi if c.found else (end.pitchfork.hi if end.pitchfork.found else alpha_min)
            return a > lo if (c.found or end.pitchfork.found) else True
        if c.found and c.name == "alpha_pos_vanishes" and a >= c.lo:  # (not the pitchfork where it appears)
            return False
        return not (end.pitchfork.found and a <= end.pitchfork.hi)

    def path_start(end: EndResult, a: float) -> Overlaps | None:
        """Overlaps on the branch's continuation path at alpha (where the path is a graph over alpha)."""
        P = end.path
        if len(P) < 2:
            return None
        k = end.unstable.shape[0] - 1 if len(end.unstable) else 0
        P = P[max(k, 0):]
        al = P[:, 3]
        if not (np.all(np.diff(al) > 0) and al[0] <= a <= al[-1]):
            return None
        q, V, t = (float(np.interp(a, al, P[:, i])) for i in range(3))
        return Overlaps(q, 0.0, V, t) if end.branch == "semantic" else Overlaps(q, t, V, 0.0)

    def start(branch: str, a: float) -> tuple[Overlaps | FixedPoint | None, FixedPoint | None]:
        """(start, nearest solved point) for a solve of branch at a."""
        # A solved neighbour within a grid step carries its Newton matrix (chord steps from the start, a few map
        # evaluations per scrambling); the continuation path's overlaps are a start without one.
        known = sorted((p for (b, _), p in cache.items() if b == branch and p.valid), key=lambda p: abs(p.alpha - a))
        end = sem_end if branch == "semantic" else pos_end
        step = (alpha_max - alpha_min) / (n_grid - 1)
        init: Overlaps | FixedPoint | None = known[0] if known and abs(known[0].alpha - a) <= 1.01 * step else None
        if init is None:
            init = path_start(end, a)
        if init is None and known:
            init = known[0]
        return init, known[0] if known else None

    def fp(branch: str, a: float) -> FixedPoint:
        key = (branch, round(a, 12))
        if key not in cache:
            p, n = solve_retrying(setting, a, branch, precision, seed, *start(branch, a))
            solves[0] += n
            cache[key] = p
        return cache[key]

    def both(a: float) -> tuple[FixedPoint, FixedPoint] | None:
        if not (exists("semantic", a) and exists("positional", a)):
            return None
        key = ("positional", round(a, 12))
        if ex is not None and key not in cache:
            # the positional solve in the other process while this one solves the semantic branch
            fut = ex.submit(solve_retrying, setting, a, "positional", precision, seed, *start("positional", a))
            ps = fp("semantic", a)
            cache[key], n = fut.result()
            solves[0] += n
        ps, pp = fp("semantic", a), fp("positional", a)
        return (ps, pp) if ps.valid and pp.valid else None

    def delta(a: float) -> tuple[float, float]:
        pair = both(a)
        if pair is None:
            return float("nan"), float("nan")
        ps, pp = pair
        return ps.train_loss - pp.train_loss, math.hypot(ps.errors.get("train_loss", 0.0),
                                                         pp.errors.get("train_loss", 0.0))

    def global_excess(a: float) -> tuple[float, float]:
        gm = global_minimum_curve({b: [fp(b, a)] for b in ("semantic", "positional") if exists(b, a)})
        if not gm:
            return float("nan"), float("nan")
        return gm[0].test_error - te_lin, gm[0].errors.get("test_error", 0.0)

    # Scan the grid downward from alpha_max (continuation: each solve starts from its neighbour above) until
    # both alpha_c and alpha_l are bracketed: alpha_l is by definition the last crossing seen from above, and
    # the branches are not solved where no critical value can lie.
    d_pts: list[tuple[float, float]] = []
    g_pts: list[tuple[float, float]] = []
    for a in reversed(grid):
        c_done = not exists("semantic", a) or any(d > 0 for _, d in d_pts)
        l_done = any(v >= 0 for _, v in g_pts)
        if c_done and l_done:
            break
        if not c_done and both(a) is not None:
            d_pts.append((a, delta(a)[0]))
        v = global_excess(a)[0]
        if math.isfinite(v):
            g_pts.append((a, v))
    solved_pos = [p for (b, _), p in cache.items() if b == "positional"]
    if solved_pos and not all(p.valid for p in solved_pos) and not pos_followed:
        pos_end = branch_end(setting, "positional", alpha_min, alpha_max, precision, seed)
        pos_followed = True
        for key in [key for key in cache if key[0] == "positional" and not exists("positional", key[1])]:
            del cache[key]
    if pos_followed or not pos_end.pitchfork.found:
        critical["alpha_pos_vanishes"] = pos_end.critical
    else:
        critical["alpha_pos_vanishes"] = Critical.missing(
            "alpha_pos_vanishes", "not in range",
            f"the positional branch appears at a pitchfork at alpha = {pos_end.pitchfork.value:.4g}, is a valid "
            f"fixed point at every alpha solved up to {alpha_max:g}, and the agnostic point is unstable in m there",
            "continuation along the alpha grid")
    if critical["alpha_pos_vanishes"].kind == "not in range" and merge is not None and not merge.critical.found \
            and merge.critical.kind == "failed":
        critical["alpha_pos_vanishes"] = merge.critical
    critical["alpha_sem_appears"] = sem_end.critical
    critical["semantic_pitchfork"] = sem_end.pitchfork
    critical["positional_pitchfork"] = pos_end.pitchfork
    d_pts = sorted((a, d) for a, d in d_pts if math.isfinite(d))
    sem_c = sem_end.critical
    probed = False
    if d_pts and not any(d > 0 for _, d in d_pts) and sem_c.found and sem_c.hi < d_pts[0][0]:
        # The scan reached the semantic end without seeing positional lower: look right above the end too (at a
        # supercritical pitchfork the semantic loss there is the agnostic one, usually above the positional).
        # Several probes, nearest the grid point first: right next to the end the semantic solve is critically
        # slow and may fail, which must not be read as "no crossing".
        top = d_pts[0][0]
        for frac in (0.6, 0.3, 0.1):
            a_e = sem_c.hi + frac * (top - sem_c.hi)
            d_e = delta(a_e)[0]
            if not math.isfinite(d_e):
                continue
            d_pts.insert(0, (a_e, d_e))
            v = global_excess(a_e)[0]
            if math.isfinite(v):
                g_pts.append((a_e, v))
            if d_e > 0:
                break
        probed = True
    g_pts = sorted(g_pts)

    # --- alpha_c: where no sign change is seen, the semantic end decides (if the scan reached it)
    alpha_c = alpha_c_on_grid(d_pts, delta, xtol, z, alpha_min, alpha_max)
    if alpha_c is None:
        sem_c = sem_end.critical
        if not d_pts:
            alpha_c = Critical.missing("alpha_c", "not in range", "positional and semantic never coexist on the grid")
        elif all(d <= 0 for _, d in d_pts) and sem_c.found and not (probed and d_pts[0][0] > 0.5 * (sem_c.hi + top)):
            alpha_c = Critical("alpha_c", sem_c.value, sem_c.lo, sem_c.hi, "at spinodal",
                               "semantic lower wherever both exist: the global minimum switches where the semantic "
                               "branch appears", "semantic below positional wherever both exist")
        elif all(d <= 0 for _, d in d_pts) and sem_c.found:
            alpha_c = Critical.missing("alpha_c", "failed", "semantic below positional at every valid pair, but no "
                                       "valid pair of fixed points right above the semantic end to confirm a switch "
                                       "there")
        else:
            alpha_c = Critical.missing("alpha_c", "failed", "no bracketed sign change of the training-loss difference")
    critical["alpha_c"] = alpha_c
    critical["alpha_l"] = alpha_l_on_grid(g_pts, alpha_c, global_excess, xtol, z, alpha_min)
    curves = branch_curves(cache)
    unstable = {b: path_as_overlaps(e) for b, e in (("semantic", sem_end), ("positional", pos_end))
                if len(e.unstable)}
    return TransitionResult(omega=setting.omega, critical=critical, test_error_linear=te_lin,
                            alpha_range=(alpha_min, alpha_max), curves=curves, unstable=unstable, solves=solves[0],
                            map_evaluations=sem_end.evaluations + pos_end.evaluations,
                            seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)
