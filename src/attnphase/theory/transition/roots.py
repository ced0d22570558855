"""The roots transition() reports: alpha_c and alpha_l from differences of fixed-point quantities on an alpha grid.

The driver scans a grid for a sign change of train_loss(semantic) - train_loss(positional or agnostic, the lower)
(alpha_c) and of the
global minimum's test error minus the linear baseline's (alpha_l), then refines it by regula falsi whose interval
carries the integration noise (:func:`noisy_root`).  :func:`find_crossing` is the deterministic counterpart.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from attnphase.errors import InputError
from attnphase.theory.state_evolution.results import FixedPoint
from attnphase.theory.transition.records import Critical

# f(alpha) -> (value, standard error): a difference of fixed-point quantities and its integration error.
Noisy = Callable[[float], tuple[float, float]]


def noisy_root(name: str, f: Noisy, a: float, b: float, xtol: float, z: float, method: str) -> Critical:
    """Root of f's value between a and b (values of opposite sign) by the Illinois variant of regula falsi,
    with an interval of z standard errors of f divided by the slope, plus the root-finding tolerance."""
    fa, ea = f(a)
    fb, eb = f(b)
    if not (math.isfinite(fa) and math.isfinite(fb)):
        return Critical.missing(name, "failed", f"no valid value at [{a:g}, {b:g}]", method)
    if fa * fb > 0:
        return Critical.missing(name, "not in range", f"no sign change on [{a:g}, {b:g}]", method)
    ga, gb = fa, fb  # Illinois-modified values
    c, ec, step = a, ea, b - a
    side = 0
    for _ in range(40):
        c_new = (a * gb - b * ga) / (gb - ga) if gb != ga else 0.5 * (a + b)
        if not a < c_new < b:
            c_new = 0.5 * (a + b)
        fc, ec = f(c_new)
        if not math.isfinite(fc):
            # A failed solve inside the bracket: keep the bracket as the interval.
            mid = 0.5 * (a + b)
            return Critical(name, mid, a, b, "crossing", method + "; a solve failed inside the bracket")
        step = abs(c_new - c)
        c = c_new
        if fc == 0:
            a = b = c
            break
        if fc * fb > 0:
            b, fb, gb = c, fc, fc
            if side == -1:
                ga *= 0.5
            side = -1
        else:
            a, fa, ga = c, fc, fc
            if side == 1:
                gb *= 0.5
            side = 1
        if b - a < xtol or step < 0.5 * xtol or (math.isfinite(ec) and abs(fc) <= ec):
            # (the last: the root is pinned down to within the integration noise; more steps only chase it)
            break
    slope = (fb - fa) / (b - a) if b > a else float("nan")
    tol = max(min(b - a, step), xtol / 4)
    if math.isfinite(slope) and slope != 0:
        tol = min(tol, abs(fc) / abs(slope) + xtol / 4)
    if not (math.isfinite(slope) and slope != 0 and math.isfinite(ec)):
        half = max(b - a, xtol)
    else:
        half = z * ec / abs(slope) + tol
    return Critical(name, float(c), float(c - half), float(c + half), "crossing", method)


def find_crossing(f: Callable[[float], float], lo: float, hi: float, xtol: float) -> tuple[float, tuple[float, float]]:
    """Root of a deterministic f in [lo, hi] where it changes sign (brentq), with a bracket of half-width xtol.
    If f is NaN inside, bisects on the sign and returns the narrowest bracket with finite ends.  (For noisy
    fixed-point quantities use transition(), whose intervals include the integration error.)"""
    from scipy.optimize import brentq

    flo, fhi = f(lo), f(hi)
    if not (np.isfinite(flo) and np.isfinite(fhi)) or flo * fhi > 0:
        raise InputError(f"no sign change of f on [{lo:g}, {hi:g}]: f = {flo:.3g}, {fhi:.3g}")
    if flo == 0:
        return float(lo), (float(lo), float(lo))
    if fhi == 0:
        return float(hi), (float(hi), float(hi))
    try:
        root = float(brentq(f, lo, hi, xtol=xtol))
        return root, (float(max(lo, root - xtol)), float(min(hi, root + xtol)))
    except ValueError:
        pass
    while hi - lo > 2 * xtol:
        mid = 0.5 * (lo + hi)
        fm = f(mid)
        if not np.isfinite(fm):
            break
        if (fm > 0) == (flo > 0):
            lo, flo = mid, fm
        else:
            hi, fhi = mid, fm
    return float(0.5 * (lo + hi)), (float(lo), float(hi))


def alpha_c_on_grid(d_pts: list[tuple[float, float]], delta: Noisy, xtol: float, z: float, alpha_min: float,
                    alpha_max: float, competitor: str = "positional") -> Critical | None:
    """alpha_c from the training-loss differences d_pts (ascending alpha) where they settle it: the first sign
    change from the competitor lower (d > 0) to semantic lower, refined; or 'above range' where the competitor is
    lower at every point.  None: no sign change seen, which each path reads in its own way.  competitor: what
    the semantic branch was compared with, for the record ("positional", "agnostic", or the lower of both)."""
    method = f"regula falsi (Illinois) on train_loss(semantic) - train_loss({competitor}) to {xtol:g}, " \
             f"+- {z:g} standard errors / slope"
    for (a0, d0), (a1, d1) in zip(d_pts, d_pts[1:], strict=False):
        if d0 > 0 >= d1:
            return noisy_root("alpha_c", delta, a0, a1, xtol, z, method)
    if d_pts and all(d > 0 for _, d in d_pts):
        return Critical.missing("alpha_c", "above range",
                                f"{competitor} lower wherever both exist in [{alpha_min:g}, {alpha_max:g}]")
    return None


def alpha_l_on_grid(g_pts: list[tuple[float, float]], alpha_c: Critical, global_excess: Noisy, xtol: float,
                    z: float, alpha_min: float) -> Critical:
    """alpha_l from the global minimum's test error minus the baseline's, g_pts (ascending alpha): its last
    crossing seen from above, refined; alpha_c itself where the global minimum's test error jumps across the
    baseline there (the minimum switches branch)."""
    if not g_pts:
        return Critical.missing("alpha_l", "failed", "no valid fixed point on the grid")
    if g_pts[-1][1] >= 0:
        return Critical.missing("alpha_l", "not in range",
                                f"the global minimum does not beat the linear baseline at alpha = {g_pts[-1][0]:g}")
    if not any(v >= 0 for _, v in g_pts):
        return Critical.missing("alpha_l", "not in range",
                                f"attention beats the linear baseline on the whole range from {alpha_min:g}")
    k = max(i for i, (_, v) in enumerate(g_pts) if v >= 0)
    lo_a, hi_a = g_pts[k][0], g_pts[k + 1][0]
    ac = alpha_c
    if ac.found and lo_a <= ac.value <= hi_a and global_excess(ac.hi)[0] < 0 <= global_excess(ac.lo)[0]:
        return Critical("alpha_l", ac.value, ac.lo, ac.hi, ac.kind,
                        "the global minimum's test error jumps below the baseline at alpha_c", "= alpha_c")
    method = f"regula falsi on test_error(global minimum) - test_error_linear to {xtol:g}, +- {z:g} " \
             f"standard errors / slope"
    return noisy_root("alpha_l", global_excess, lo_a, hi_a, xtol, z, method)


def branch_curves(cache: dict[tuple[str, float], FixedPoint]) -> dict[str, list[FixedPoint]]:
    """The positional and semantic fixed points solved on the way (keyed (branch, alpha)), in ascending alpha, and
    the mixed and agnostic ones where they were solved (the agnostic point competes where it is the lower)."""
    names = ("positional", "semantic") + tuple(b for b in ("mixed", "agnostic") if any(bb == b for bb, _ in cache))
    return {b: sorted((p for (bb, _), p in cache.items() if bb == b), key=lambda p: p.alpha) for b in names}
