"""Numerical continuation of fixed points in one parameter: generic, no physics.

Notation: a fixed-point map G(y, t, p) with spectator coordinates y, an order parameter t and a parameter p,
Z2-symmetric: G_y is even and G_t odd in t.  Then t = 0 (the symmetric point) is always a fixed point, and a
branch with t != 0 leaves it at a pitchfork, where the slope dG_t/dt at t = 0 equals 1.

- :func:`newton`: Newton's method with a finite-difference Jacobian that is kept (chord method) while it still
  contracts, so that a good Jacobian is re-used across nearby problems (neighbouring points of a path, other
  scramblings of the integration points).
- :func:`locate_pitchfork`: root of "slope = 1" together with the symmetric fixed point (y, p unknown);
  :func:`bracket_from_above` brackets a pitchfork through which the slope falls (a branch merging back).
- :func:`desingularised`: the residual whose zero set is the t != 0 branch *and* its pitchfork: the t
  equation G_t - t = 0 divided by t (a smooth function, equal to slope - 1 at t = 0).  The pitchfork is then a
  regular point of the branch, not a branch point, and continuation starts right there.
- :func:`arclength`: pseudo-arclength continuation (secant predictor, Newton corrector on the arclength
  constraint, step-size control) which passes folds in p.
- :func:`turning_points` and :func:`classify_end`: where p turns back along a path (folds, located by the
  vertex of the parabola through the three points around the turn), and whether a branch's end in p is the
  pitchfork itself (supercritical) or a fold after a subcritical pitchfork.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from attnphase.errors import InputError
from attnphase.theory.solvers.fixed_point import SolverResult, Status, at_resolution

Residual = Callable[[np.ndarray], np.ndarray]


def fd_jacobian(F: Residual, u: np.ndarray, free: np.ndarray, steps: np.ndarray,
                f0: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Forward-difference Jacobian of F with respect to the coordinates ``free``."""
    n_eval = 0
    if f0 is None:
        f0 = F(u)
        n_eval += 1
    J = np.empty((len(f0), len(free)))
    for j, c in enumerate(free):
        up = u.copy()
        up[c] += steps[c]
        J[:, j] = (F(up) - f0) / steps[c]
        n_eval += 1
    return J, n_eval


def newton(F: Residual, u0: np.ndarray, free, steps, *, tol: float, max_iter: int = 12,
           jacobian: np.ndarray | None = None, accept: float = 0.0) -> SolverResult:
    """Solve F(u) = 0 for the coordinates ``free`` of u (the others held), from u0.

    The Jacobian (given, or by forward differences) is kept while the residual falls by a factor 10 or more per
    step; otherwise it is recomputed once at the current point.  ``accept``: a residual at which a stalled
    iteration still counts as converged (a map computed with finitely many integration points is piecewise
    constant at a small scale, below which the residual only jitters; such a result carries the at_resolution
    warning).  Returns the solvers' one result type: x the best point, nit the residual evaluations (Jacobian
    columns included), jacobian the last Newton matrix on the free coordinates, extra["corrections"] the Newton
    steps taken."""
    free = np.asarray(free, int)
    steps = np.asarray(steps, float)
    u = np.array(u0, float)
    n_eval = 0
    J = jacobian
    fresh = False
    prev = np.inf
    best = (np.inf, u.copy())
    n_steps = 0
    for _ in range(max_iter):
        try:
            f = F(u)
        except ValueError as exc:
            return _result(best[1], Status.inadmissible, n_eval, best[0], J, f"left the admissible set: {exc}", n_steps)
        n_eval += 1
        res = float(np.max(np.abs(f)))
        if res < best[0]:
            best = (res, u.copy())
        if res < tol:
            return _result(u, Status.ok, n_eval, res, J, "", n_steps)
        if res > (0.9 if fresh else 0.1) * prev:
            if fresh:
                ok = best[0] <= accept
                return _result(best[1], Status.ok if ok else Status.not_converged, n_eval, best[0], J,
                               "" if ok else "Newton stalled", n_steps, stalled=ok and best[0] >= tol)
            # The chord matrix no longer contracts: refresh it at the best point so far.
            J = None
            if res > best[0]:
                u = best[1].copy()
                f = F(u)
                n_eval += 1
                res = best[0]
        if J is None:
            try:
                J, k = fd_jacobian(F, u, free, steps, f0=f)
            except ValueError as exc:
                return _result(best[1], Status.inadmissible, n_eval, best[0], None, f"left the admissible set: {exc}",
                               n_steps)
            n_eval += k
            fresh = True
        else:
            fresh = False
        prev = res
        try:
            du = np.linalg.lstsq(J, -f, rcond=None)[0]
        except np.linalg.LinAlgError:
            return _result(best[1], Status.not_converged, n_eval, best[0], J, "singular Jacobian", n_steps)
        u = u.copy()
        u[free] += du
        n_steps += 1
    ok = best[0] <= max(tol, accept)
    return _result(best[1], Status.ok if ok else Status.not_converged, n_eval, best[0], J,
                   "" if ok else "maximum number of Newton steps", n_steps, stalled=ok and best[0] >= tol)


def _result(u: np.ndarray, status: Status, n_eval: int, res: float, J: np.ndarray | None, message: str,
            corrections: int, stalled: bool = False) -> SolverResult:
    return SolverResult(u, status, (at_resolution(res),) if stalled else (), n_eval, res, message,
                        extra={"corrections": corrections}, jacobian=J)


# ------------------------------------------------------------------------------------ Z2-symmetric maps


SymmetricMap = Callable[[np.ndarray, float], tuple[np.ndarray, float]]  # (y, p) -> (G_y(y, 0, p), dG_t/dt)
FullMap = Callable[[np.ndarray, float, float], tuple[np.ndarray, float]]  # (y, t, p) -> (G_y, G_t)


def desingularised(G: FullMap, S: SymmetricMap, y_scale: np.ndarray, t_min: float = 0.0) -> Residual:
    """Residual on u = (y, t, p): [(G_y - y) / max(|y|, y_scale), G_t / t - 1], with the t = 0 limit slope - 1
    (from S).  (Relative residuals: the spectators can grow by orders of magnitude along a branch.)

    Below |t| = t_min the order parameter's equation uses the symmetric slope plus the quadratic term
    interpolated to G_t/t at t_min, so that a map whose G_t is grainy at small t stays smooth there."""
    ny = len(y_scale)

    def F(u: np.ndarray) -> np.ndarray:
        y, t, p = u[:ny], float(u[ny]), float(u[ny + 1])
        if abs(t) >= max(t_min, 1e-300):
            gy, gt = G(y, t, p)
            return np.append((gy - y) / np.maximum(np.abs(y), y_scale), gt / t - 1.0)
        gy, slope = S(y, p)
        if t_min > 0 and t != 0:
            _, gt = G(y, t_min, p)
            slope = slope + (gt / t_min - slope) * (t / t_min) ** 2
        return np.append((gy - y) / np.maximum(np.abs(y), y_scale), slope - 1.0)

    return F


@dataclass(frozen=True)
class Pitchfork:
    y: np.ndarray
    p: float
    status: Status
    evaluations: int
    residual: float
    jacobian: np.ndarray | None
    message: str = ""

    @property
    def converged(self) -> bool:
        return self.status == Status.ok


def locate_pitchfork(S: SymmetricMap, y0: np.ndarray, p0: float, *, y_scale: np.ndarray, p_step: float,
                     tol: float, jacobian: np.ndarray | None = None, accept: float = 0.0,
                     max_iter: int = 15) -> Pitchfork:
    """The symmetric fixed point y and the parameter p at which the slope dG_t/dt at t = 0 equals 1."""
    ny = len(y0)

    def F(u: np.ndarray) -> np.ndarray:
        gy, slope = S(u[:ny], float(u[ny]))
        return np.append((gy - u[:ny]) / y_scale, slope - 1.0)

    steps = np.append(1e-3 * np.asarray(y_scale, float), p_step)
    r = newton(F, np.append(y0, p0), np.arange(ny + 1), steps, tol=tol, jacobian=jacobian, accept=accept,
               max_iter=max_iter)
    return Pitchfork(r.x[:ny], float(r.x[ny]), r.status, r.nit, r.residual, r.jacobian, r.message)


def bracket_from_above(f: Callable[[float], float], p_lo: float, p_hi: float, f_hi: float,
                       steps: int = 8) -> tuple[float, float, float, float] | None:
    """Step down from p_hi (where f < 0) in ``steps`` equal steps towards p_lo until f >= 0: the bracket
    (a, f(a), b, f(b)) with f(a) >= 0 > f(b) next to p_hi, or None (no sign change, or f raised ValueError /
    ArithmeticError before one).  For a pitchfork through which the slope falls (f = slope - 1): the first
    crossing below p_hi, found with evaluations that walk a warm-started solve down in p."""
    if not f_hi < 0:
        raise ValueError(f"f(p_hi) must be < 0, got {f_hi:g}")  # a caller's bug, not bad input
    h = (p_hi - p_lo) / steps
    b, fb = p_hi, f_hi
    for k in range(1, steps + 1):
        a = p_hi - k * h
        try:
            fa = f(a)
        except (ValueError, ArithmeticError):
            return None
        if fa >= 0:
            return a, fa, b, fb
        b, fb = a, fa
    return None


# ----------------------------------------------------------------------------- pseudo-arclength continuation


class PathStop(StrEnum):
    """Why a continuation stopped; a ``stop`` callback returns one of the last four (or None to go on)."""

    max_steps = "maximum number of steps"
    step_too_small = "step size below minimum"
    no_progress = "no progress"
    left_range = "left the alpha range"
    at_bound = "theta reached its bound"
    past_pitchfork = "past the pitchfork"
    sign_change = "order parameter changed sign"
    callback = "stopped by the stop test"  # any other truthy reason a caller's stop() returns (message: its text)


@dataclass(frozen=True)
class Path:
    """Points u_k (rows) along a solution curve of F(u) = 0, F: R^(n+1) -> R^n, in order of arclength."""

    u: np.ndarray
    s: np.ndarray  # cumulative arclength (scaled coordinates)
    evaluations: int
    stop: PathStop
    message: str  # the stop reason in words, with the corrector's message where it failed
    tangents: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    predictors: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))


def arclength(F: Residual, u0: np.ndarray, tangent: np.ndarray, *, scale: np.ndarray, ds: float, tol: float,
              max_steps: int = 40, ds_min: float | None = None, ds_max: float | None = None,
              stop: Callable[[np.ndarray], PathStop | str | None] | None = None, accept: float = 0.0,
              jacobian: np.ndarray | None = None, fd_rel: float = 1e-3) -> Path:
    """Pseudo-arclength continuation of F(u) = 0 from the solution u0 in the direction ``tangent``.

    In scaled coordinates v = u / scale: predictor v_k + ds tau_k (tau: secant of the last two points, the given
    tangent at the start), corrector Newton on [F(u); tau . (v - v_pred)] = 0, i.e. on the hyperplane
    orthogonal to the tangent, which stays well posed at folds (where p turns back).  The Newton matrix is kept
    from point to point and refreshed only when the chord iteration stops contracting.  The step grows after
    easy corrections and halves after failed ones.  Stops after max_steps points, when ``stop(u)`` returns a
    reason, or when the step falls below ds_min."""
    scale = np.asarray(scale, float)
    ds_min = ds_min if ds_min is not None else ds / 16
    ds_max = ds_max if ds_max is not None else 4 * ds
    N = len(u0)
    tau = np.asarray(tangent, float) / scale
    tau /= np.linalg.norm(tau)
    pts = [np.array(u0, float)]
    taus = [tau.copy()]
    preds = [np.array(u0, float)]
    n_eval = 0
    J = jacobian
    why: PathStop = PathStop.max_steps
    message = why.value
    steps_fd = fd_rel * scale
    while len(pts) <= max_steps:
        v = pts[-1] / scale
        v_pred = v + ds * tau
        u_pred = v_pred * scale
        t_k = tau.copy()

        def Fext(u: np.ndarray, v_pred=v_pred, t_k=t_k) -> np.ndarray:
            return np.append(F(u), t_k @ (u / scale - v_pred))

        r = newton(Fext, u_pred, np.arange(N), steps_fd, tol=tol, jacobian=J, accept=accept, max_iter=10)
        n_eval += r.nit
        if not r.converged:
            ds *= 0.5
            J = None
            if ds < ds_min:
                why, message = PathStop.step_too_small, f"{PathStop.step_too_small.value} ({r.message})"
                break
            continue
        J = r.jacobian
        u_new = r.x
        v_new = u_new / scale
        sec = v_new - v
        if np.linalg.norm(sec) == 0:
            why = PathStop.no_progress
            message = why.value
            break
        tau = sec / np.linalg.norm(sec)
        pts.append(u_new)
        taus.append(tau.copy())
        preds.append(u_pred)
        ds = min(ds * 1.5, ds_max) if r.extra["corrections"] <= 3 else ds
        if stop is not None:
            reason = stop(u_new)
            if reason:
                why = reason if isinstance(reason, PathStop) else PathStop.callback
                message = why.value if isinstance(reason, PathStop) else str(reason)
                break
    U = np.array(pts)
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(U / scale, axis=0), axis=1))])
    return Path(U, s, n_eval, why, message, np.array(taus), np.array(preds))


class Turn(StrEnum):
    min = "min"
    max = "max"


class EndKind(StrEnum):
    pitchfork = "pitchfork"
    fold = "fold"
    none = "none"


@dataclass(frozen=True)
class TurningPoint:
    index: int  # the path point closest to the turn
    p: float  # parameter at the vertex of the parabola through the three points around the turn
    u: np.ndarray  # the path point closest to the turn
    kind: Turn  # min or max of p along the path
    interpolation: float  # |vertex - nearest computed point|: an estimate of the interpolation error
    confirmed: bool = True  # refine_fold: a parabola of the right curvature was fitted at least once


def turning_points(path: Path, p_index: int = -1) -> list[TurningPoint]:
    """Folds: interior extrema of the parameter along the path."""
    p = path.u[:, p_index]
    out = []
    for k in range(1, len(p) - 1):
        d0, d1 = p[k] - p[k - 1], p[k + 1] - p[k]
        if d0 * d1 < 0:
            s3 = path.s[k - 1:k + 2]
            c = np.polyfit(s3 - s3[1], p[k - 1:k + 2], 2)
            vertex = c[2] - c[1] ** 2 / (4 * c[0]) if c[0] != 0 else p[k]
            kind = Turn.min if d0 < 0 else Turn.max
            # the vertex cannot lie beyond the extreme computed point on the wrong side
            vertex = min(vertex, p[k]) if kind == Turn.min else max(vertex, p[k])
            out.append(TurningPoint(k, float(vertex), path.u[k].copy(), kind, float(abs(vertex - p[k]))))
    return out


@dataclass(frozen=True)
class BranchEnd:
    """Where a branch (the part of a path away from its symmetric start) ends in the parameter.

    kind: "pitchfork" (supercritical: the branch reaches the symmetric point monotonically in p), "fold"
    (the branch turns back in p before reaching the symmetric point, which it then reaches through a
    subcritical pitchfork; the points between are the unstable part of the branch), or "none" (no end on
    the followed path)."""

    kind: EndKind
    p: float
    pitchfork_p: float
    fold: TurningPoint | None
    unstable: np.ndarray  # path points between the pitchfork and the fold (empty for a supercritical one)


def classify_end(path: Path, side: str, p_index: int = -1) -> BranchEnd:
    """Classify the end of a branch followed by a path that starts at its pitchfork (t = 0).

    side="lower": the branch is the far part of the path (it exists above its end in p): walking back from the
    path's last point while p decreases, the end is the first turn met (a fold), or the pitchfork itself if p
    decreases all the way back to it (supercritical).  side="upper": the branch is the part next to the
    pitchfork (it exists above the pitchfork and ends where p first stops increasing): the end is the first
    turn met walking forward from the pitchfork (a fold), or none within the path.  The path points between
    the pitchfork and a fold are returned as ``unstable`` for side="lower"."""
    if side not in ("lower", "upper"):
        raise InputError(f"side must be 'lower' or 'upper', got {side!r}")
    p = path.u[:, p_index]
    p0 = float(p[0])
    turns = {tp.index: tp for tp in turning_points(path, p_index)}
    if side == "lower":
        k = len(p) - 1
        while k > 0 and p[k - 1] < p[k]:
            k -= 1
        if k == 0 or k not in turns:
            return BranchEnd(EndKind.pitchfork, p0, p0, None, path.u[:0].copy())
        tp = turns[k]
        return BranchEnd(EndKind.fold, tp.p, p0, tp, path.u[:k + 1].copy())
    k = 0
    while k < len(p) - 1 and p[k + 1] > p[k]:
        k += 1
    if k == len(p) - 1 or k not in turns:
        return BranchEnd(EndKind.none, float(p[-1]), p0, None, path.u[:0].copy())
    tp = turns[k]
    return BranchEnd(EndKind.fold, tp.p, p0, tp, path.u[k:].copy())


def refine_fold(F: Residual, path: Path, tp: TurningPoint, *, scale: np.ndarray, tol: float, p_index: int = -1,
                accept: float = 0.0, jacobian: np.ndarray | None = None, max_rounds: int = 6) -> TurningPoint:
    """Shrink the parabola through three points around a fold until its vertex moves by less than tol.
    ``confirmed`` is False when no round found a turn (the residual F may be another realisation of a noisy
    map, in which the turn of ``path`` need not exist).

    The points are corrected on hyperplanes orthogonal to the fold's secant direction tau, at distances
    -h, 0, +h (scaled coordinates) from the current centre; the parameter is a parabola in that distance near
    the fold.  Each round recentres at the vertex and quarters h."""
    scale = np.asarray(scale, float)
    k = tp.index
    v = path.u / scale
    tau = v[k + 1] - v[k - 1]
    tau /= np.linalg.norm(tau)
    centre = v[k]
    h = 0.5 * float(np.linalg.norm(v[k + 1] - v[k - 1]))
    N = path.u.shape[1]
    J = jacobian
    vertex_prev = tp.p
    best = TurningPoint(tp.index, tp.p, tp.u, tp.kind, tp.interpolation, confirmed=False)
    guess = {j: path.u[k + j].copy() for j in (-1, 0, 1)}
    for _ in range(max_rounds):
        ps, us = [], []
        for j in (-1, 0, 1):
            target = centre + j * h * tau

            def Fext(u: np.ndarray, target=target) -> np.ndarray:
                return np.append(F(u), tau @ (u / scale - target))

            r = newton(Fext, guess.get(j, target * scale), np.arange(N), 1e-3 * scale, tol=tol, jacobian=J,
                       accept=accept, max_iter=8)
            if not r.converged:
                return best
            J = r.jacobian
            ps.append(float(r.x[p_index]))
            us.append(r.x)
        a = 0.5 * (ps[0] + ps[2]) - ps[1]
        b = 0.5 * (ps[2] - ps[0])
        if a == 0 or (a > 0) != (tp.kind == Turn.min):
            return best
        x_star = -b / (2 * a)  # in units of h
        vertex = ps[1] - b * b / (4 * a)
        best = TurningPoint(k, float(vertex), us[1], tp.kind, float(abs(vertex - vertex_prev)), confirmed=True)
        if abs(vertex - vertex_prev) < tol or abs(x_star) > 1.5:
            return best
        vertex_prev = vertex
        centre = centre + float(np.clip(x_star, -1, 1)) * h * tau
        h *= 0.25
        guess = {0: us[1]}
    return best
