"""Where the agnostic point turns unstable towards a branch, for any setting: the pitchfork condition in general.

At the symmetric (agnostic) fixed point the order parameter of a branch (theta for semantic, m in the range of the
positional Gram matrix for positional) is exactly zero, and the map restricted to the order parameter's block is
linear to first order: theta_new = J theta.  A branch bifurcates from the agnostic point where the largest
eigenvalue of J crosses 1; for L = 2, r = r* = 1 this is the study's condition d theta_new / d theta = 1
(:mod:`attnphase.theory.transition.adapter_map`).

The same holds at the positional fixed point for theta (base "positional"): theta = 0 is invariant there too, and
the mixed branch of a tied student of rank r >= 2 (one direction positional, one semantic) leaves the positional
branch where the leading eigenvalue of theta's block at the positional point crosses 1.

J and the base points on mirrored points: :mod:`attnphase.theory.state_evolution.symmetric` (the solver's
contraction certificate uses them too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnphase.setting import Setting
from attnphase.theory.model.overlaps import Overlaps
from attnphase.theory.solvers.fixed_point import Inadmissible
from attnphase.theory.state_evolution.order import INTERCEPT_ERRORS, squared_zero
from attnphase.theory.state_evolution.symmetric import (
    LOG2_POINTS,
    SCRAMBLINGS,
    base_point,
    mirrored_points,
    order_jacobian,
)
from attnphase.theory.transition.records import Critical, joined, spread_halfwidth

BASES = ("agnostic", "positional")  # the fixed points a branch can leave at a pitchfork


def leading_eigenvalue(setting: Setting, alpha: float, branch: str, points: np.ndarray,
                       start: Overlaps | None = None, base: str = "agnostic") -> tuple[float, Overlaps]:
    """The largest real part among the eigenvalues of J (branch's order parameter block) at alpha, and the base
    point (agnostic, or positional for theta's block: see the module) it was taken at."""
    if base not in BASES:
        raise ValueError(f"base must be one of {BASES}, got {base!r}")
    if base == "positional" and branch != "semantic":
        raise ValueError("at the positional point only theta's block (branch 'semantic') is linearised")
    point, minima = base_point(setting, alpha, base, points, start)
    J = order_jacobian(setting, alpha, branch, points, point, minima)
    return float(np.max(np.linalg.eigvals(J).real)), point


@dataclass(frozen=True)
class Instability:
    """The alpha at which the agnostic point turns unstable towards a branch: a record, plus per scrambling."""

    critical: Critical
    per_scrambling: tuple[float, ...]
    evaluations: int


def _predicted(solved: list[tuple[float, Overlaps]], a: float) -> Overlaps | None:
    """A start for the base point at a: q, m and V interpolated (or extrapolated, at most one spacing beyond) in
    alpha through the two nearest solved points, else the nearest one (a warm start only: the solve converges to
    its own tolerance from it)."""
    if not solved:
        return None
    near = sorted(solved, key=lambda t: abs(t[0] - a))
    (a1, o1) = near[0]
    if len(near) < 2 or near[1][0] == a1 or abs(a - a1) > abs(near[1][0] - a1):
        return o1
    a2, o2 = near[1]
    w = (a - a1) / (a2 - a1)
    q, V = o1.q + w * (o2.q - o1.q), o1.V + w * (o2.V - o1.V)
    if np.linalg.eigvalsh(q).min() <= 0 or np.linalg.eigvalsh(V).min() <= 0:
        return o1
    return Overlaps(q=q, m=o1.m + w * (o2.m - o1.m), V=V, theta=o1.theta, untied=o1.untied)


def instability(setting: Setting, branch: str, grid: list[float], seed: int = 0, xtol: float = 1e-3,
                name: str | None = None, base: str = "agnostic",
                known: Sequence[tuple[float, Overlaps]] = (), scan: GridScan | None = None,
                descending: bool = False) -> Instability:
    """The pitchfork condition (leading eigenvalue of J = 1) on the alpha grid, per scrambling: the first scrambling
    scans the grid upward to the first sign change and refines it by brentq; the others are bracketed near its
    root (they differ by the integration error).  value: the mean, interval: a 99% Student-t half-width of the
    spread plus xtol; 'not in range' where the eigenvalue does not cross 1 on the grid.  base: the fixed point
    linearised at (leading_eigenvalue); known: (alpha, overlaps) of that branch solved elsewhere, warm starts for
    its point on the mirrored points (the positional point needs one: its default start may find another).
    scan: :func:`stable_on_grid`'s scan of this branch, grid and seed, where it saw the eigenvalue reach 1: the first
    scrambling's scan is that one (the same points, warm starts and order: the same numbers, not solved again).
    descending: the first scrambling scans the grid downward from its top, where the eigenvalue must be below 1: the
    highest alpha where it falls back through 1 (a branch merging back into the base point above it)."""
    name = name or f"{branch}_pitchfork"
    method = (f"leading eigenvalue of the order parameter's block of the linearised map at the {base} point = 1 "
              f"(likelihood-ratio identity, mirrored Sobol points, {SCRAMBLINGS} x 2^{LOG2_POINTS + 1}), brentq to "
              f"{xtol:g}")
    grid = sorted(grid)
    lo, hi = grid[0], grid[-1]
    roots: list[float] = []
    n_eval = 0
    solved: list[tuple[float, Overlaps]] = list(known)  # (alpha, base point): the warm starts
    reuse = scan is not None and scan.crossed and (scan.branch, scan.seed, scan.grid) == (branch, seed, tuple(grid)) \
        and base == "agnostic" and not known
    for rep in range(SCRAMBLINGS):
        pts = mirrored_points(setting, branch, rep, seed)

        seen: dict[float, float] = {}  # brentq evaluates the bracket's ends again: 6 of 20 evaluations at L = 3
        if rep == 0 and reuse:
            for a, lam, sym in scan.solved:
                seen[a] = lam - 1.0
                solved.append((a, sym))

        def f(a: float, pts=pts, seen=seen) -> float:
            nonlocal n_eval
            if a not in seen:
                lam, sym = leading_eigenvalue(setting, a, branch, pts, _predicted(solved, a), base)
                solved.append((a, sym))
                n_eval += 1
                seen[a] = lam - 1.0
            return seen[a]

        try:
            if not roots:
                # A grid alpha whose base point is not found is passed over, not the end of the scan: one positional
                # point at 0.58 that did not converge left the mixed end of r = 2, omega 0 (seed 0) unclassified.
                vals: list[tuple[float, float]] = []
                missed: Inadmissible | None = None
                for a in (grid[::-1] if descending else grid):
                    try:
                        vals.append((a, f(a)))
                    except Inadmissible as exc:
                        missed = exc
                        continue
                    if descending and len(vals) == 1 and vals[0][1] >= 0:
                        top = "the top" if a == hi else "the highest alpha with a base point"
                        return Instability(Critical.missing(name, "not in range", f"the leading eigenvalue is at least "
                                                            f"1 at alpha = {a:g}, {top} of [{lo:g}, {hi:g}]", method),
                                           tuple(roots), n_eval)
                    if len(vals) > 1 and vals[-2][1] * vals[-1][1] <= 0:
                        break
                if len(vals) < 2 and missed is not None:
                    raise missed
                (a0, f0), (a1, f1) = sorted(vals[-2:] if len(vals) > 1 else vals * 2)
            else:
                w = 4 * xtol + 0.01
                a0, a1 = max(lo, roots[0] - w), min(hi, roots[0] + w)
                f0, f1 = f(a0), f(a1)
                while f0 * f1 > 0 and (a0 > lo or a1 < hi):
                    a0, a1 = max(lo, a0 - (a1 - a0)), min(hi, a1 + (a1 - a0))
                    f0, f1 = f(a0), f(a1)
        except Inadmissible as exc:
            return Instability(Critical.missing(name, "failed", str(exc), method), tuple(roots), n_eval)
        if f0 * f1 > 0:
            return Instability(Critical.missing(name, "not in range", f"the leading eigenvalue stays "
                                                f"{'below' if f1 < 0 else 'above'} 1 on [{lo:g}, {hi:g}] (scrambling "
                                                f"{rep})", method), tuple(roots), n_eval)
        from scipy.optimize import brentq  # lazily: scipy.optimize is slow to import

        try:
            roots.append(float(brentq(f, a0, a1, xtol=xtol)))
        except (ValueError, Inadmissible) as exc:
            return Instability(Critical.missing(name, "failed", f"root finding failed: {exc}", method),
                               tuple(roots), n_eval)
    v = float(np.mean(roots))
    half = spread_halfwidth(roots) + xtol
    return Instability(Critical(name, v, v - half, v + half, "pitchfork", method), tuple(roots), n_eval)


@dataclass(frozen=True)
class GridScan:
    """stable_on_grid's scan: the first scrambling's leading eigenvalue of a branch's order block at the agnostic point,
    upward over the grid, up to the first alpha where it reaches 1 or the point is not found (or the grid's end)."""

    branch: str
    seed: int
    grid: tuple[float, ...]
    solved: tuple[tuple[float, float, Overlaps], ...]  # (alpha, leading eigenvalue, agnostic point), in scan order
    crossed: bool  # the last eigenvalue solved reached 1
    evaluations: int  # (a point not found counts)

    @property
    def largest(self) -> float | None:
        """The largest eigenvalue over the whole grid, None where one reaches 1 or the point is not found (or the grid
        is empty)."""
        if self.crossed or not self.solved or len(self.solved) < len(self.grid):
            return None
        return float(max(lam for _, lam, _ in self.solved))

    @property
    def first(self) -> float:
        """The eigenvalue at the grid's first alpha (NaN where the point was not found there)."""
        return self.solved[0][1] if self.solved else float("nan")


def stable_on_grid(setting: Setting, branch: str, grid: list[float], seed: int = 0) -> GridScan:
    """Whether the agnostic point is stable towards a branch at every alpha of the grid (where it is, no branch is
    born from it in the range): GridScan.largest (the largest leading eigenvalue of the order parameter's block over
    the grid, or None as soon as one reaches 1 or the agnostic point is not found), .first (the eigenvalue at the
    grid's first alpha).  First scrambling, ascending alpha, warm-started as in :func:`instability`'s scan, which
    takes this one (``scan=``) instead of solving it again."""
    pts = mirrored_points(setting, branch, 0, seed)
    solved: list[tuple[float, Overlaps]] = []
    out: list[tuple[float, float, Overlaps]] = []
    grid = sorted(grid)
    crossed, n_eval = False, 0
    for a in grid:
        n_eval += 1
        try:
            lam, sym = leading_eigenvalue(setting, a, branch, pts, _predicted(solved, a))
        except Inadmissible:
            break
        solved.append((a, sym))
        out.append((a, lam, sym))
        if lam >= 1.0:
            crossed = True
            break
    return GridScan(branch, seed, tuple(grid), tuple(out), crossed, n_eval)


def theta_points(points: list, order: str = "theta") -> list[tuple[float, float, float]]:
    """(alpha, theta, its standard error) of the valid fixed points among points: order_squared_intercept's input.
    order "m": the positional branch's order parameter (rms m) instead."""
    return [(p.alpha, p.summary()[order], p.errors.get(order, float("nan"))) for p in points if p.valid]


def order_squared_intercept(points: list[tuple[float, float, float]], above: float,
                            side: str = "lower") -> tuple[float, float] | None:
    """Where the squared order parameter, extrapolated linearly in alpha from the two valid points nearest the end,
    reaches zero, and that intercept's standard error (from the points' standard errors).  points: (alpha, order
    parameter, its standard error).  side "lower" (a branch that exists above its end): the two lowest points above
    ``above``, the intercept below them; "upper" (a branch that exists below its end): the two highest points below
    ``above``, the intercept above them.  None with fewer than two such points or no intercept on that side.
    A supercritical pitchfork has order^2 ~ |alpha - alpha_p| next to alpha_p; a subcritical branch keeps a
    finite order parameter there, so its intercept lies well beyond the pitchfork."""
    upper = side == "upper"
    pts = sorted((p for p in points if (p[0] < above if upper else p[0] > above) and np.isfinite(p[1]) and p[1] > 0),
                 reverse=upper)[:2]
    if len(pts) < 2:
        return None
    ic = squared_zero(*pts)
    if ic is None:
        return None
    return ic if (ic[0] > pts[0][0] if upper else ic[0] < pts[0][0]) else None


def intercept_at(order: list[tuple[float, float, float]], pitch: Critical,
                 side: str = "lower") -> tuple[float, float] | None:
    """Where the squared order parameter of the valid points on the branch's side of the pitchfork (order: alpha,
    value, standard error; above its interval's bottom for side "lower", below its top for "upper") extrapolates to
    zero, and its standard error, where that lies inside the pitchfork's interval widened by 3 of those standard
    errors (a supercritical pitchfork); else None."""
    ic = order_squared_intercept(order, pitch.lo if side == "lower" else pitch.hi, side)
    if ic is None:
        return None
    margin = INTERCEPT_ERRORS * ic[1]
    return ic if pitch.lo - margin <= ic[0] <= pitch.hi + margin else None


def classify_end(end: Critical, pitch: Critical, side: str,
                 order: list[tuple[float, float, float]] | None = None) -> Critical:
    """The kind of a branch end found where the solver stops finding the branch (``end``, kind unknown), held
    against the pitchfork condition (``pitch``).  side 'lower': the branch exists above its end (semantic, the
    positional branch's appearance); 'upper': below it (the positional branch merging back into the agnostic point).
    - both found and overlapping: the branch ends at the pitchfork (supercritical): the pitchfork's value, the
      interval covering both;
    - the branch found beyond the pitchfork (below it for 'lower', above it for 'upper'): subcritical, the end is a
      fold; its location is the solver's bracket -- unless the squared order parameter of the valid points on the
      branch's side of the pitchfork (``order``: alpha, value, standard error) extrapolates to zero inside the
      pitchfork's interval (widened by 3 standard errors of the extrapolation): then the branch is supercritical and
      the valid points beyond the pitchfork are the finite point set's imperfect bifurcation (its Z2 symmetry is
      broken at O(n^-1/2), which sustains a small order parameter beyond alpha_p; measured at L = 3 simplex, omega
      0.3, fast: theta ~ 0.01 down to 0.18 below a pitchfork at 0.248, while at default precision theta^2 falls
      linearly to zero near 0.24; the study at omega 0.1, fast: m valid up to 1.37 where m's pitchfork is at 1.29);
    - the solver loses the branch before the pitchfork: 'pitchfork' where the same extrapolation lands inside the
      pitchfork's interval (the interval then reaches to the solver's bracket), else 'unknown', with the
      pitchfork named in the reason."""
    if not end.found or not pitch.found:
        why = pitch.reason if not pitch.found else "the solver did not locate the end"
        return Critical(end.name, end.value, end.lo, end.hi, end.kind, end.method,
                        joined(end.reason, f"pitchfork condition: {why}")) \
            if end.found else end
    # Strictly: a bracket ending at an end of the pitchfork's interval comes from a solve there (the solver asked at
    # the interval's ends first), which puts the solver's end outside the interval, not in it.
    if end.lo < pitch.hi and pitch.lo < end.hi:
        return Critical(end.name, pitch.value, min(pitch.lo, end.lo), max(pitch.hi, end.hi), "pitchfork",
                        f"{pitch.method}; confirmed by the solver's validity bracket [{end.lo:.4g}, {end.hi:.4g}]")
    lower = side == "lower"
    beyond = end.hi <= pitch.lo if lower else end.lo >= pitch.hi
    ic = intercept_at(order, pitch, side) if order else None
    way, last = ("below", end.hi) if lower else ("above", end.lo)
    if ic is not None and beyond:
        return Critical(end.name, pitch.value, pitch.lo, pitch.hi, "pitchfork",
                        f"{pitch.method}; the squared order parameter of the solver's points "
                        f"{'above' if lower else 'below'} it extrapolates to zero at alpha = {ic[0]:.4g} +- {ic[1]:.2g}",
                        f"supercritical: valid points {'down' if lower else 'up'} to alpha = {last:.4g}, {way} the "
                        f"pitchfork, are the finite point set's imperfect bifurcation (a small order parameter its "
                        f"broken symmetry sustains), not a subcritical branch")
    if ic is not None:
        # Lost before the pitchfork, but its order parameter heads to zero there: the solver's collapse test gives
        # up on a small order parameter first (within 3 standard errors of 0).  Both in the interval.
        lo, hi = (pitch.lo, max(pitch.hi, end.hi)) if lower else (min(pitch.lo, end.lo), pitch.hi)
        return Critical(end.name, pitch.value, lo, hi, "pitchfork",
                        f"{pitch.method}; the squared order parameter of the solver's points extrapolates to "
                        f"zero at alpha = {ic[0]:.4g} +- {ic[1]:.2g}; the solver's validity bracket "
                        f"[{end.lo:.4g}, {end.hi:.4g}] lies {'above' if lower else 'below'} it",
                        "supercritical: the solver stops resolving (or converging to) the small order parameter "
                        f"just {'above' if lower else 'below'} the pitchfork; the interval covers both")
    if beyond:
        return Critical(end.name, end.value, end.lo, end.hi, "fold", end.method,
                        f"subcritical: the branch exists beyond the pitchfork at alpha = {pitch.value:.4g} "
                        f"[{pitch.lo:.4g}, {pitch.hi:.4g}], so it ends at a fold, located where the solver stops "
                        f"finding it (the {'lower' if lower else 'upper'} bound is the solver's verdict)")
    return Critical(end.name, end.value, end.lo, end.hi, "unknown", end.method,
                    f"the solver loses the branch before the pitchfork condition at alpha = {pitch.value:.4g} "
                    f"[{pitch.lo:.4g}, {pitch.hi:.4g}]: not classified")
