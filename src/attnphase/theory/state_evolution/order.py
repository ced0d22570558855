"""Where a branch's order parameter vanishes along its path: the square of an order parameter is linear in alpha next
to a supercritical pitchfork (order^2 ~ |alpha - alpha_p|), so two points of the path extrapolate to the end."""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr, stdtrit

_CONFIDENCE = float(ndtr(3.0))  # of "zero within its error": that of 3 standard errors of a normal mean

# Standard errors by which an intercept must clear a value to count as beyond it (a branch's end read from its points:
# the transition's pitchfork interval, the internal continuation's failed step).
INTERCEPT_ERRORS = 3.0


def zero_within(k: float) -> float:
    """The standard errors within which the mean of k scramblings' values is zero (or at a level): the Student-t
    quantile (k - 1 degrees of freedom) at the confidence of 3 errors of a normal mean, 99.87% one-sided; 3.0 as k
    grows, 9.2 at k = 4 (fast), 5.5 at 6 (default).  With 3 the normal error of only 4 scramblings' mean called a
    branch present where it is not (docs/numerics.md, "Zero within its error")."""
    return float(stdtrit(k - 1, _CONFIDENCE)) if k > 1 else 0.0


def welch_count(parts: list[tuple[float, int]]) -> float:
    """The count of scramblings whose Student-t quantile bounds a sum of independent means, each (its standard error,
    its count): the Welch-Satterthwaite degrees of freedom plus one (a fraction in general; the count itself for one
    part).  J's scramblings and the point's own (stability.with_point_error)."""
    parts = [(e, k) for e, k in parts if k > 1 and np.isfinite(e) and e > 0]
    if len(parts) < 2:
        return float(parts[0][1]) if parts else 0.0
    var = sum(e * e for e, _ in parts)
    return 1.0 + var * var / sum(e**4 / (k - 1) for e, k in parts)


def undecided(size: float, error: float, k: int, floor: float = 0.0) -> bool:
    """Whether 3 standard errors and zero_within(k) disagree on whether size (a distance from zero, or from a level
    such as an eigenvalue's 1) lies beyond its error: at least max(floor, 3 errors) but below max(floor, zero_within(k)
    errors).  More scramblings decide (solve's collapse verdict, stability's eigenvalue against 1)."""
    e = error if np.isfinite(error) else 0.0
    return k > 1 and max(floor, 3.0 * e) <= size < max(floor, zero_within(k) * e)


def squared_zero(p1: tuple[float, float, float], p2: tuple[float, float, float]) -> tuple[float, float] | None:
    """Where the square of an order parameter, linear in alpha through two points (alpha, value, its standard error),
    reaches zero, and that intercept's standard error (from the points' errors; a NaN error counts as 0).  None where
    the two squares are equal or the alphas are.  With both values non-zero the intercept lies below both points
    where the square grows with alpha and above both where it falls."""
    (a1, t1, e1), (a2, t2, e2) = sorted([p1, p2])
    y1, y2 = t1 * t1, t2 * t2
    x0 = level_crossing((a1, y1), (a2, y2), 0.0)
    if x0 is None:
        return None
    # d x0 / d y1 = -(a2 - x0) / (y2 - y1), d x0 / d y2 = (a1 - x0) / (y2 - y1); s.e. of y = 2 t s.e. of t
    g1, g2 = -(a2 - x0) / (y2 - y1), (a1 - x0) / (y2 - y1)
    err = float(np.hypot(g1 * 2 * t1 * (e1 if np.isfinite(e1) else 0.0), g2 * 2 * t2 * (e2 if np.isfinite(e2) else 0.0)))
    return float(x0), err


def level_crossing(p1: tuple[float, float], p2: tuple[float, float], level: float) -> float | None:
    """Where a value linear in alpha through two points (alpha, value) reaches level (e.g. a leading eigenvalue
    reaching 1; beyond the points where both lie on one side).  None where the two values or alphas are equal."""
    (a1, y1), (a2, y2) = sorted([p1, p2])
    if a2 == a1 or y2 == y1:
        return None
    return float(a1 + (level - y1) * (a2 - a1) / (y2 - y1))


__all__ = ["INTERCEPT_ERRORS", "level_crossing", "squared_zero", "welch_count"]
