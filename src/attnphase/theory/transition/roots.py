"""The roots transition() reports: alpha_c and alpha_l from differences of fixed-point quantities on an alpha grid.

The driver scans a grid for a sign change of train_loss(semantic) - train_loss(positional or agnostic, the lower)
(alpha_c) and of the global minimum's test error minus the linear baseline's (alpha_l), then narrows the bracket
(:func:`noisy_root`) until it is below the tolerance or inside the integration noise; the interval holds both.
:func:`find_crossing` is the deterministic counterpart.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from attnphase.errors import InputError
from attnphase.theory.state_evolution.results import FixedPoint
from attnphase.theory.transition.records import Critical, joined

# f(alpha) -> (value, standard error): a difference of fixed-point quantities and its integration error.
Noisy = Callable[[float], tuple[float, float]]


def noisy_root(name: str, f: Noisy, a: float, b: float, xtol: float, z: float, method: str) -> Critical:
    """Root of f's value between a and b (values of opposite sign).  The bracket is kept and narrowed (Illinois
    regula falsi, bisection where that stalls) until it is below xtol or inside the statistical half-width, so the
    estimate converges on any grid; the interval holds both the final bracket and z standard errors of f over its
    slope around the interpolated root (:func:`root_interval`)."""
    fa, ea = f(a)
    fb, eb = f(b)
    if not (math.isfinite(fa) and math.isfinite(fb)):
        return Critical.missing(name, "failed", f"no valid value at [{a:g}, {b:g}]", method)
    if fa * fb > 0 or fa == fb:
        return Critical.missing(name, "not in range", f"no sign change on [{a:g}, {b:g}]", method)
    # a's side of the sign change (a zero at a counts with it; anywhere else a zero counts with b's side)
    sa = math.copysign(1.0, fa) if fa != 0 else -math.copysign(1.0, fb)
    ga, gb = fa, fb  # Illinois-modified values
    side = 0
    widths = [b - a]
    failed = False
    for _ in range(60):
        s = stat_halfwidth(a, fa, ea, b, fb, eb, z)
        if b - a <= xtol or (math.isfinite(s) and b - a <= 2 * s):
            break  # (the last: the noise, not the search, sets the uncertainty from here on)
        mid = 0.5 * (a + b)
        x = (a * gb - b * ga) / (gb - ga) if gb != ga else mid
        if len(widths) >= 3 and widths[-1] > 0.5 * widths[-3]:
            x = mid  # regula falsi did not halve the bracket in two steps (one-sided): bisect
        # at least xtol / 2 inside either end: a step taken next to the root then closes the bracket
        m = min(0.5 * xtol, 0.25 * (b - a))
        x = min(max(x, a + m), b - m)
        fx, ex = f(x)
        if not math.isfinite(fx) and x != mid:
            x = mid
            fx, ex = f(x)
        if not math.isfinite(fx):
            failed = True  # a solve failed inside the bracket: the interval is the bracket so far
            break
        if fx * sa > 0:
            a, fa, ea, ga = x, fx, ex, fx
            if side == 1:
                gb *= 0.5
            side = 1
        else:
            b, fb, eb, gb = x, fx, ex, fx
            if side == -1:
                ga *= 0.5
            side = -1
        widths.append(b - a)
    why = f"a solve failed at alpha = {x:.4g} inside the bracket: the interval is the bracket reached" if failed else ""
    return root_interval(name, a, fa, ea, b, fb, eb, z, method, why)


def stat_halfwidth(a: float, fa: float, ea: float, b: float, fb: float, eb: float, z: float) -> float:
    """z standard errors (the larger of the two ends') over the slope of the secant through the bracket's ends:
    how far the noise alone can move the root.  NaN without an error estimate."""
    if not (math.isfinite(ea) and math.isfinite(eb)) or b <= a:
        return float("nan")
    return z * max(ea, eb) / (abs(fb - fa) / (b - a))


def root_interval(name: str, a: float, fa: float, ea: float, b: float, fb: float, eb: float, z: float,
                  method: str, reason: str = "") -> Critical:
    """The root of the secant through a bracket [a, b] (f of opposite signs at its ends), with an interval that
    contains the bracket (where the search left the root) and the root +- the statistical half-width (where the
    noise may put it, also outside the bracket where the ends' signs are within the noise)."""
    c = a + (b - a) * fa / (fa - fb) if fa != fb else 0.5 * (a + b)
    c = min(max(c, a), b)
    s = stat_halfwidth(a, fa, ea, b, fb, eb, z)
    if not math.isfinite(s):
        s = b - a  # (no error estimate: twice the bracket)
        reason = joined(reason, "no integration error estimate: the interval is twice the bracket")
    return Critical(name, float(c), float(min(a, c - s)), float(max(b, c + s)), "crossing", method, reason)


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
    method = f"bracketed regula falsi (Illinois, bisection where it stalls) on train_loss(semantic) - " \
             f"train_loss({competitor}) to {xtol:g}; interval: the final bracket and +- {z:g} standard errors / slope"
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
    method = f"bracketed regula falsi (Illinois, bisection where it stalls) on test_error(global minimum) - " \
             f"test_error_linear to {xtol:g}; interval: the final bracket and +- {z:g} standard errors / slope"
    return noisy_root("alpha_l", global_excess, lo_a, hi_a, xtol, z, method)


def branch_curves(cache: dict[tuple[str, float], FixedPoint]) -> dict[str, list[FixedPoint]]:
    """The positional and semantic fixed points solved on the way (keyed (branch, alpha)), in ascending alpha, and
    the mixed and agnostic ones where they were solved (the agnostic point competes where it is the lower)."""
    names = ("positional", "semantic") + tuple(b for b in ("mixed", "agnostic") if any(bb == b for bb, _ in cache))
    return {b: sorted((p for (bb, _), p in cache.items() if bb == b), key=lambda p: p.alpha) for b in names}
