"""Smooth lines through a theory curve's computed points: monotone cubic (PCHIP) interpolation, which passes through
every point, never overshoots between two of them and has no kink at them.  A drawing device only: the figure
also marks the computed points and says in its legend that the line between them is this interpolation."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["NOTE", "monotone_cubic", "monotone_cubic_at"]

NOTE = "theory: computed points, monotone cubic between"


def _usable(x: np.ndarray, y: np.ndarray) -> bool:
    return len(x) >= 3 and bool(np.all(np.diff(x) > 0)) and bool(np.all(np.isfinite(y)))


def monotone_cubic(x: np.ndarray, y: np.ndarray, per_gap: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) sampled ``per_gap`` times per interval along the interpolant, the computed points included; fewer
    than three points, or x not strictly increasing: the points as given."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if not _usable(x, y):
        return x, y
    from scipy.interpolate import PchipInterpolator

    fine = np.concatenate([np.linspace(a, b, per_gap, endpoint=False) for a, b in zip(x, x[1:], strict=False)]
                          + [x[-1:]])
    return fine, PchipInterpolator(x, y)(fine)


def monotone_cubic_at(x: np.ndarray, y: np.ndarray) -> Callable[[float], float | None]:
    """The interpolant as a function of one alpha (linear for fewer than three points); None outside [x0, xn]."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) == 0:
        return lambda a: None
    if _usable(x, y):
        from scipy.interpolate import PchipInterpolator

        f = PchipInterpolator(x, y)

        def value(a: float) -> float | None:
            return float(f(a)) if x[0] - 1e-12 <= a <= x[-1] + 1e-12 else None
    else:
        def value(a: float) -> float | None:
            return float(np.interp(a, x, y)) if x[0] - 1e-12 <= a <= x[-1] + 1e-12 else None
    return value
