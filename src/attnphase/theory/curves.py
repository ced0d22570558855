"""Critical values as records, crossings of two curves, the global-minimum curve, and curves of several branches.

This module is the one place where critical values come from: ``transition`` builds its alpha_c and alpha_l
with :func:`crossing` and its branch ends with :mod:`attnphase.theory.branch_ends`; figures and reports draw
and print the :class:`Critical` records they are given, and never re-derive them from curves.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.stats import t as student_t

from attnphase.setting import Setting, check_alpha
from attnphase.theory.results import BRANCHES, FixedPoint

# crossing: root of a difference; pitchfork / fold: a branch end; at spinodal: alpha_c where the semantic branch
# appears below the positional one (no crossing); above range: alpha_c beyond alpha_max (positional lower
# wherever both exist); not in range: no such value in the searched range (reason says why); failed;
# unknown: a branch end located where the solver stops finding the branch, not classified.
KINDS = ("crossing", "pitchfork", "fold", "at spinodal", "above range", "not in range", "failed", "unknown")


@dataclass(frozen=True)
class Critical:
    """One critical value with its interval.

    value: the estimate (None when not found); (lo, hi): an interval meant to contain the exact value (integration
    error and root-finding tolerance included); kind: one of KINDS; method: how it was computed; reason: why there
    is no value, or a note."""

    name: str
    value: float | None
    lo: float | None
    hi: float | None
    kind: str
    method: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.value is not None and not (self.lo <= self.value <= self.hi):
            raise ValueError(f"{self.name}: value {self.value} outside its interval [{self.lo}, {self.hi}]")

    @property
    def found(self) -> bool:
        return self.value is not None

    @property
    def interval(self) -> tuple[float, float] | None:
        return None if self.value is None else (float(self.lo), float(self.hi))

    @property
    def width(self) -> float | None:
        return None if self.value is None else float(self.hi - self.lo)

    def overlaps(self, other: Critical) -> bool:
        if not (self.found and other.found):
            return False
        return self.lo <= other.hi and other.lo <= self.hi

    @classmethod
    def missing(cls, name: str, kind: str, reason: str, method: str = "") -> Critical:
        return cls(name, None, None, None, kind, method, reason)

    def to_dict(self, prefix: str | None = None) -> dict[str, Any]:
        p = prefix or self.name
        return {p: self.value, f"{p}_lo": self.lo, f"{p}_hi": self.hi, f"{p}_kind": self.kind,
                f"{p}_method": self.method, f"{p}_reason": self.reason}


def spread_halfwidth(values: Sequence[float], confidence: float = 0.99) -> float:
    """Half-width of a two-sided Student-t confidence interval of the mean of independent replicas."""
    k = len(values)
    if k < 2:
        return float("inf")
    sem = float(np.std(values, ddof=1)) / math.sqrt(k)
    return float(student_t.ppf(0.5 + confidence / 2, k - 1)) * sem


# ---------------------------------------------------------------------------------------------- crossings


def crossing(name: str, f: Callable[[float], tuple[float, float]], lo: float, hi: float, xtol: float,
             z: float = 3.0, method: str = "") -> Critical:
    """Root of f(alpha) = value on [lo, hi] where the value changes sign, with an interval.

    f returns (value, standard error).  The root of the value is found with brentq to xtol; the interval adds
    z standard errors of f at the root, divided by the local slope (secant over [root - h, root + h], h from
    the bracket), to the root-finding tolerance: a change of f by its error moves the root by error / slope."""
    cache: dict[float, tuple[float, float]] = {}

    def g(a: float) -> float:
        if a not in cache:
            cache[a] = f(a)
        return cache[a][0]

    glo, ghi = g(lo), g(hi)
    if not (np.isfinite(glo) and np.isfinite(ghi)):
        return Critical.missing(name, "failed", f"no valid value at the bracket ends [{lo:g}, {hi:g}]", method)
    if glo * ghi > 0:
        return Critical.missing(name, "not in range", f"no sign change on [{lo:g}, {hi:g}]", method)
    try:
        root = float(brentq(g, lo, hi, xtol=xtol / 4))
    except ValueError as exc:
        return Critical.missing(name, "failed", f"root finding failed: {exc}", method)
    _, err = f(root)
    h = max(4 * xtol, 0.02 * (hi - lo))
    a0, a1 = max(lo, root - h), min(hi, root + h)
    slope = (g(a1) - g(a0)) / (a1 - a0) if a1 > a0 else float("nan")
    if not (np.isfinite(err) and np.isfinite(slope)) or slope == 0:
        half = hi - lo
    else:
        half = z * err / abs(slope) + xtol
    return Critical(name, root, max(lo, root - half), min(hi, root + half), "crossing",
                    method or f"brentq to {xtol:g}, +- {z:g} standard errors / slope")


# ----------------------------------------------------------------------------------------- global minimum


def global_minimum_curve(curves: Mapping[str, Sequence[FixedPoint]], rtol: float = 1e-9) -> list[FixedPoint]:
    """At each alpha where some non-agnostic branch has a valid point, the one of lowest train_loss (the agnostic
    point only where no other is valid), in ascending alpha."""
    by_alpha: dict[float, list[FixedPoint]] = {}
    for pts in curves.values():
        for p in pts:
            if not p.valid or not math.isfinite(p.train_loss):
                continue
            key = next((k for k in by_alpha if math.isclose(k, p.alpha, rel_tol=rtol, abs_tol=1e-12)), p.alpha)
            by_alpha.setdefault(key, []).append(p)
    out = []
    for a in sorted(by_alpha):
        pts = by_alpha[a]
        cands = [p for p in pts if p.branch != "agnostic"] or pts
        out.append(min(cands, key=lambda p: p.train_loss))
    return out


# -------------------------------------------------------------------------------------------- curves


# Alphas per piece of an agnostic curve.  That branch has no order parameter to follow, and its points cost about
# the same from the default start as from a neighbour (omega = 0.3, default precision: 0.55 s at alpha 0.1 cold,
# 0.45-0.67 s continued), so its curve is solved in independent pieces that fill the workers left idle by the
# other branches' longer continuations (which a cold start costs 2-3 points' time, so they stay whole).
AGNOSTIC_PIECE = 4


def curve_pieces(alphas: Sequence[float], branch: str) -> list[list[float]]:
    """The ascending alphas of one branch's curve, split into the pieces solve_curve follows separately.  Fixed
    by the grid and the branch alone (not by the number of workers), so the numbers do not depend on it."""
    a = sorted(alphas)
    if branch != "agnostic" or len(a) <= AGNOSTIC_PIECE:
        return [a]
    k = math.ceil(len(a) / AGNOSTIC_PIECE)
    return [list(p) for p in np.array_split(np.array(a, dtype=float), k)]


def _curve_task(args: tuple) -> list[FixedPoint]:
    from attnphase.theory.state_evolution import solve_curve

    setting, alphas, branch, precision, seed = args
    return solve_curve(setting, alphas, branch, precision, seed=seed)


def solve_curves(setting: Setting, alphas: Sequence[float], branches: Sequence[str] = BRANCHES,
                 precision: str = "default", seed: int = 0, workers: int = 1) -> dict[str, list[FixedPoint]]:
    """solve_curve for several branches, each curve's pieces (:func:`curve_pieces`) in their own process with
    workers > 1."""
    from attnphase.parallel import map_tasks

    alphas = [check_alpha(a) for a in alphas]
    for b in branches:
        if b not in BRANCHES:
            raise ValueError(f"branch must be one of {', '.join(BRANCHES)}; got {b!r}")
    pieces = [(b, piece) for b in branches for piece in curve_pieces(alphas, b)]
    results = map_tasks(_curve_task, [(setting, piece, b, precision, seed) for b, piece in pieces], workers=workers,
                        progress=False)
    out: dict[str, list[FixedPoint]] = {b: [] for b in branches}
    for (b, _), pts in zip(pieces, results, strict=True):
        out[b].extend(pts)
    return out
