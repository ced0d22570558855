"""A generic fixed-point solver: Anderson acceleration with safeguards, and a frozen-Jacobian (chord) Newton.

It knows nothing of the physics: it gets a map x -> (G(x), aux) on a flat vector, predicates for
admissibility / collapse / divergence, and returns a :class:`SolverResult` with a machine-readable status.
A map that cannot be evaluated at x raises :class:`Inadmissible`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnphase.notes import Note, NoteCode, Status  # noqa: F401 - Status is read from here too


class Inadmissible(ValueError):
    """The map cannot be evaluated at this point (e.g. a matrix that must be positive definite is not)."""


Map = Callable[[np.ndarray], tuple[np.ndarray, Any]]
Predicate = Callable[[np.ndarray], bool]
Scale = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class SolverResult:
    """What every solver returns (never None): the point, a status to branch on, notes with codes, the cost."""

    x: np.ndarray  # last image G(x) (the fixed point when ok)
    status: Status
    warnings: tuple[Note, ...] = ()
    nit: int = 0  # map evaluations
    residual: float = float("inf")
    message: str = ""
    aux: Any = None  # the map's side output at the returned point
    extra: dict = field(default_factory=dict)
    jacobian: np.ndarray | None = None  # Newton solvers: the last Newton matrix (re-usable as a chord matrix)

    @property
    def converged(self) -> bool:
        return self.status == Status.ok


def default_scale(x: np.ndarray) -> np.ndarray:
    """Per-coordinate size for relative residuals: max(|x|, 1e-3)."""
    return np.maximum(np.abs(x), 1e-3)


def relative_residual(x: np.ndarray, gx: np.ndarray, scale: Scale | None = None) -> tuple[np.ndarray, float]:
    """G(x) - x and its size max |G(x) - x| / scale(x) (default max(|x|, 1e-3))."""
    r = gx - x
    if r.size == 0:
        return r, 0.0
    return r, float(np.max(np.abs(r) / (scale or default_scale)(x)))


def _true(x: np.ndarray) -> bool:
    return True


def _false(x: np.ndarray) -> bool:
    return False


def _evaluate(fmap: Map, x: np.ndarray) -> tuple[np.ndarray, Any]:
    gx, aux = fmap(x)
    if not np.all(np.isfinite(gx)):
        raise Inadmissible("the map returned non-finite values")
    return gx, aux


FAR_STEPS = 10  # anderson's damped steps while far from the fixed point (default)
FAR = 0.03  # anderson's default `far`: a relative residual above it is far from the fixed point
# anderson with an approximate map: at most this many approximate steps between exact evaluations (the
# approximation continues the last exact evaluation's minimisers, exact to 1e-8 for moves up to 3e-2 at L = 3;
# benchmarks/continued_evaluations.py)
EXACT_EVERY = 4


class _Dropped(Exception):
    """anderson's approximation was dropped after (exact, approximate) evaluations."""

    def __init__(self, exact: int, approx: int) -> None:
        super().__init__(exact, approx)
        self.exact, self.approx = exact, approx


def anderson(fmap: Map, x0: np.ndarray, *, tol: float, max_iter: int, admissible: Predicate = _true,
             collapsed: Predicate = _false, diverged: Predicate = _false, depth: int = 5, mixing: float = 0.5,
             far: float = FAR, far_mixing: float = 0.3, far_steps: int = FAR_STEPS, accept: float = 0.0,
             stagnation: int = 12, scale: Scale | None = None,
             collapsing: Callable[[np.ndarray, np.ndarray], str | None] | None = None,
             approx: Map | None = None, exact_every: int = EXACT_EVERY,
             keeps: Callable[[np.ndarray, np.ndarray], bool] | None = None) -> SolverResult:
    """Anderson-accelerated iteration x <- G(x) to relative residual < tol, with damping as fallback.

    - Far from the fixed point (residual > far) the first far_steps steps are damped (Anderson extrapolates
      wildly there and can throw the iterate into another branch's basin).
    - A step outside the admissible set (predicate, or G raising Inadmissible) is replaced by a damped one.
    - keeps(x, cand): whether an extrapolated step from x to cand stays on x's side of a symmetry of the map (the
      sign of an order parameter); one that does not is replaced by the step without history (x + damping * r,
      damping the mixing halved once per inadmissible evaluation) and the history cleared.  The map's own steps
      keep the side; an extrapolation across it lands on another fixed point (a mirror image, or the symmetric
      point between them, which is also a fixed point).
    - If the residual stalls at or below `accept` for `stagnation` iterations (the map is piecewise constant at
      the scale of one integration point changing basin), the best iterate is accepted with a warning.
    - collapsed(x): the branch's order parameter has decayed (the iterate flows to a more symmetric point).
    - diverged(x): the iterate runs away.
    - collapsing(x, G(x)): a reason why the iterate will flow to the more symmetric point (a certificate from the
      map's linearisation there), or None: status collapsed before the order parameter has decayed.
    - scale(x): per-coordinate sizes for the relative residual and Anderson's weighting (default max(|x|, 1e-3)).
    - approx(x) -> (G~(x), aux): an optional cheaper approximation of G, valid near the last exact evaluation (the
      same map continuing the local minimisers of its last exact evaluation).  It only steers: every verdict (ok,
      accepted at resolution, collapsed, diverged) and the returned point come from an exact evaluation.  The first
      step, every exact_every-th, and every step where the approximation would decide (residual below tol, the
      iterate collapsed, diverged) are exact; an approximation that would decide is repeated exactly at the same x,
      and where the exact map disagrees (or a round of approximate steps did not halve the exact residual where they
      saw one 4x below it) the approximation is dropped and the plain iteration runs from x0: the result is then the
      plain iteration's.  `stagnation` counts steps of both kinds (the best exact residual must stand that many
      steps, about stagnation / exact_every exact evaluations).  nit counts exact evaluations (of both runs),
      extra["approx"] the approximate ones.
    """
    kw = dict(tol=tol, max_iter=max_iter, admissible=admissible, collapsed=collapsed, diverged=diverged, depth=depth,
              mixing=mixing, far=far, far_mixing=far_mixing, far_steps=far_steps, accept=accept,
              stagnation=stagnation, scale=scale, collapsing=collapsing, keeps=keeps)
    if approx is None:
        return _anderson(fmap, x0, **kw)
    try:
        return _anderson(fmap, x0, approx=approx, exact_every=exact_every, **kw)
    except _Dropped as exc:
        dropped = exc
    plain = _anderson(fmap, x0, **kw)
    return dataclasses.replace(plain, nit=plain.nit + dropped.exact, extra={**plain.extra, "approx": dropped.approx})


def _anderson(fmap: Map, x0: np.ndarray, *, tol: float, max_iter: int, admissible: Predicate,
              collapsed: Predicate, diverged: Predicate, depth: int, mixing: float, far: float, far_mixing: float,
              far_steps: int, accept: float, stagnation: int, scale: Scale | None,
              collapsing: Callable[[np.ndarray, np.ndarray], str | None] | None, approx: Map | None = None,
              exact_every: int = EXACT_EVERY,
              keeps: Callable[[np.ndarray, np.ndarray], bool] | None = None) -> SolverResult:
    """anderson's iteration; raises _Dropped where the approximation is dropped."""
    scale = scale or default_scale
    x = np.array(x0, dtype=float)
    n = x.size
    X_hist: list[np.ndarray] = []
    R_hist: list[np.ndarray] = []
    res = np.inf
    gx = aux = None
    damping = mixing
    best: tuple = (np.inf, 0, None, None)
    n_approx = 0
    since_exact = exact_every  # (the first evaluation is exact)
    redo = False  # the last approximation would have decided: evaluate exactly at the same x
    last_exact = last_approx = np.inf  # the residuals at the last exact and approximate evaluations
    for it in range(1, max_iter + 1):
        exact = approx is None or redo or since_exact >= exact_every or collapsed(x)
        try:
            gx, aux = _evaluate(fmap if exact else approx, x)
        except Inadmissible as exc:
            n_approx += 0 if exact else 1
            if X_hist:
                x = X_hist[-1].copy()
                X_hist.clear()
                R_hist.clear()
                damping *= 0.5
                continue
            return SolverResult(x, Status.inadmissible, (), it - n_approx, np.inf, str(exc), aux, {"approx": n_approx})
        r, res = relative_residual(x, gx, scale)
        if not exact:
            n_approx += 1
            since_exact += 1
            last_approx = res
            redo = res < tol or diverged(gx)
            if redo:
                continue
        else:
            n_exact = it - n_approx  # (evaluations that raised Inadmissible count, as without approx)
            since_exact = 0
            done = {"approx": n_approx}
            if diverged(gx):
                return SolverResult(gx, Status.diverged, (), n_exact, res, "the iterate ran away", aux, done)
            if res < tol:
                return SolverResult(gx, Status.ok, (), n_exact, res, "", aux, done)
            if approx is not None and (redo or (res > 0.5 * last_exact and res > 4.0 * last_approx)):
                # The approximation's "converged" was not the exact map's, or its steps did not halve the exact
                # residual where the approximation saw one far below it: its fixed point is another.
                raise _Dropped(it - n_approx, n_approx)
            redo = False
            last_exact, last_approx = res, np.inf
            if res < best[0]:
                best = (res, it, gx, aux)
            elif accept > 0 and it - best[1] >= stagnation and best[0] <= accept:
                res_b, _, gx_b, aux_b = best
                return SolverResult(gx_b, Status.ok, (at_resolution(res_b),), n_exact,
                                    res_b, "map resolution", aux_b, done)
        X_hist.append(x.copy())
        R_hist.append(r.copy())
        if len(X_hist) > depth + 1:
            X_hist.pop(0)
            R_hist.pop(0)
        if exact:
            if collapsed(x):
                return SolverResult(gx, Status.collapsed, (), n_exact, res,
                                    "the branch's order parameter decayed to ~0", aux, done)
            why = collapsing(x, gx) if collapsing is not None else None
            if why:
                return SolverResult(gx, Status.collapsed, (), n_exact, res, why, aux, done)
        if res > far and it <= far_steps:
            X_hist.clear()
            R_hist.clear()
            x = x + far_mixing * r
            continue
        if len(X_hist) >= 2 and n > 0:
            dX = np.array([X_hist[i + 1] - X_hist[i] for i in range(len(X_hist) - 1)]).T
            dR = np.array([R_hist[i + 1] - R_hist[i] for i in range(len(R_hist) - 1)]).T
            # Scale by |x| so that small and large coordinates weigh alike.
            s = scale(x)
            gamma, *_ = np.linalg.lstsq(dR / s[:, None], r / s, rcond=None)
            cand = x + damping * r - (dX + damping * dR) @ gamma
            if keeps is not None and not keeps(x, cand):
                cand = x + damping * r
                X_hist.clear()
                R_hist.clear()
        else:
            cand = x + damping * r
        if not admissible(cand):
            cand = x + 0.2 * r
            X_hist.clear()
            R_hist.clear()
        x = cand
    out = gx if gx is not None else x
    return SolverResult(out, Status.not_converged, (), max_iter - n_approx, res, "maximum number of iterations reached", aux,
                        {"approx": n_approx})


def jacobian(fmap: Map, x: np.ndarray, rel_step: float = 1e-3, scale: Scale | None = None,
             central: bool = False) -> tuple[np.ndarray, int]:
    """Forward-difference Jacobian of G (common random points make it smooth enough), step rel_step * scale(x)_j.

    On a map averaged over n integration points the step must move many points' minimisers across a basin
    boundary, or the difference quotient of the jumps is noise of size 1 / (n step): measured at (L, r, r*) =
    (2, 2, 1) on 2^12 points, steps 1e-3 max(|x_j|, 1e-3) gave a spurious eigenvalue 313 and a chord that
    never converged, steps 1e-2 scale(x)_j none.

    A forward step that leaves the map's domain is taken backwards instead (a fixed point next to the domain's
    edge: r = 2, omega 0.3, alpha 7.9, the mixed point's semantic column at rho - theta^2 / q = 0.5% of rho, where
    +1% in theta leaves it; without a Jacobian there the branch could not be continued).  Raises Inadmissible where
    x or both steps of a coordinate lie outside.  Returns (J, evaluations).

    central=True: central differences (for a smooth map, e.g. one with every point's minimiser held in its basin),
    G(x) evaluated only for a coordinate whose one step leaves the domain (that column one-sided)."""
    if central:
        return _central_jacobian(fmap, x, rel_step, scale)
    g0 = _evaluate(fmap, x)[0]
    J = np.empty((x.size, x.size))
    sizes = (scale or default_scale)(x)
    n_eval = 1
    for j in range(x.size):
        h = rel_step * sizes[j]
        for sign in (1.0, -1.0):
            xp = x.copy()
            xp[j] += sign * h
            n_eval += 1
            try:
                J[:, j] = (_evaluate(fmap, xp)[0] - g0) / (sign * h)
                break
            except Inadmissible:
                if sign < 0:
                    raise
    return J, n_eval


def _central_jacobian(fmap: Map, x: np.ndarray, rel_step: float, scale: Scale | None) -> tuple[np.ndarray, int]:
    J = np.empty((x.size, x.size))
    sizes = (scale or default_scale)(x)
    n_eval = 0
    g0: np.ndarray | None = None
    for j in range(x.size):
        h = rel_step * sizes[j]
        images = []
        for sign in (1.0, -1.0):
            xs = x.copy()
            xs[j] += sign * h
            n_eval += 1
            try:
                images.append(_evaluate(fmap, xs)[0])
            except Inadmissible:
                images.append(None)
        up, down = images
        if up is not None and down is not None:
            J[:, j] = (up - down) / (2 * h)
            continue
        if up is None and down is None:
            raise Inadmissible(f"both steps of coordinate {j} leave the map's domain")
        if g0 is None:
            g0 = _evaluate(fmap, x)[0]
            n_eval += 1
        J[:, j] = (up - g0) / h if up is not None else (g0 - down) / h
    return J, n_eval


def newton_matrix(J: np.ndarray) -> np.ndarray | None:
    """(I - J)^{-1}, or None if it is (nearly) singular (e.g. a neutral direction of the map)."""
    A = np.eye(len(J)) - J
    if len(J) == 0:
        return A
    if np.linalg.cond(A) > 1e10:
        return None
    return np.linalg.inv(A)


def chord(fmap: Map, x0: np.ndarray, *, tol: float, matrix: np.ndarray, max_iter: int = 8,
          admissible: Predicate = _true, scale: Scale | None = None, accept: float = 0.0,
          cheap: Callable[[np.ndarray], np.ndarray] | None = None, cheap_iter: int = 6,
          secant_min: float = 0.0, give_up: Callable[[np.ndarray, np.ndarray], bool] | None = None) -> SolverResult:
    """Newton on G(x) - x with a frozen Jacobian from a nearby problem.  When the residual stops falling (with the
    best residual at most `accept`, or twice) or after max_iter evaluations: the best iterate if its residual is
    at most `accept` (with a warning: the map's resolution, as in :func:`anderson`), else a result with status
    ``not_converged`` (``inadmissible`` where a step left the map's domain).

    cheap(x) -> G~(x): an optional cheaper approximation of G, valid near the last exact evaluation (e.g. the
    same map with every inner minimisation warm-started from the last exact one).  After each exact evaluation,
    up to cheap_iter chord steps use G~ until its residual is below tol or stops falling; the next exact
    evaluation checks the result, so only G decides convergence and the returned point.  nit counts exact
    evaluations; extra["cheap"] the cheap ones.

    secant_min > 0: after an exact step of scaled size (max |dx| / scale) above secant_min, a Broyden update
    of the matrix from that step's secant.  Smaller steps would fit the map's graininess (its jumps when
    integration points switch basin), not its slope.

    give_up(x0, G(x0) - x0): where true at the first evaluation, return at once (``not_converged``, nit 1, x the
    image G(x0), extra["gave_up"] True): for a caller that reads such a start differently."""
    x = np.array(x0, dtype=float)
    prev = np.inf
    n_cheap = 0
    stalls = 0
    best: tuple = (np.inf, None, None, 0)
    last: tuple | None = None  # (x, r) of the previous exact evaluation
    for it in range(1, max_iter + 1):
        try:
            gx, aux = _evaluate(fmap, x)
        except Inadmissible as exc:
            return SolverResult(x, Status.inadmissible, (), it, np.inf, str(exc), None, {"cheap": n_cheap})
        r, res = relative_residual(x, gx, scale)
        if secant_min > 0 and last is not None:
            matrix = _secant_update(matrix, x - last[0], r - last[1], (scale or default_scale)(x), secant_min)
        last = (x.copy(), r.copy())
        if res < tol:
            return SolverResult(gx, Status.ok, (), it, res, "", aux, {"cheap": n_cheap})
        if it == 1 and give_up is not None and give_up(x, r):
            return SolverResult(gx, Status.not_converged, (), 1, res, "given up at the start", aux,
                                {"cheap": 0, "gave_up": True})
        if res < best[0]:
            best = (res, gx, aux, it)
        if res > 0.5 * prev:
            # Stalled: at the map's resolution if the best is within 10 tol; else one more try (a step may have met
            # a few basin switches; measured on the study map, accepting at the first stall up to `accept` moved
            # fast fixed points by 1.6 standard errors) before accepting up to `accept` or giving up.
            stalls += 1
            if stalls >= 2 or it == max_iter or best[0] <= min(accept, 10.0 * tol):
                return _chord_best(best, accept, it, n_cheap)
        prev = res
        x = x + matrix @ r
        if not admissible(x):
            return SolverResult(x, Status.inadmissible, (), it, res, "a chord step left the admissible set", None,
                                {"cheap": n_cheap})
        if cheap is None:
            continue
        prev_c, r_prev, dx = res, r, matrix @ r
        for _ in range(cheap_iter):
            try:
                gc = cheap(x)
            except Inadmissible:
                break
            n_cheap += 1
            if not np.all(np.isfinite(gc)):
                break
            rc, res_c = relative_residual(x, gc, scale)
            if res_c < tol:
                break
            # Broyden ("bad") update of (I - J)^{-1} from the cheap map's secant, which is smooth (no basin
            # switches), in scaled coordinates: it fixes directions where the frozen Jacobian is off.
            sw = 1.0 / (scale or default_scale)(x) ** 2
            dr = rc - r_prev
            den = float(np.sum(dr * dr * sw))
            if den > 0:
                matrix = matrix + np.outer(-dx - matrix @ dr, dr * sw) / den
            if res_c > 0.5 * prev_c:
                break
            prev_c, r_prev = res_c, rc
            dx = matrix @ rc
            xn = x + dx
            if not admissible(xn):
                break
            x = xn
    return _chord_best(best, accept, max_iter, n_cheap)


def _secant_update(matrix: np.ndarray, dx: np.ndarray, dr: np.ndarray, sizes: np.ndarray,
                   secant_min: float) -> np.ndarray:
    """Broyden's ("bad") update of M ~ (I - J)^{-1} so that M dr = -dx, weighted by 1 / sizes^2; unchanged for a
    step below secant_min (scaled)."""
    if float(np.max(np.abs(dx) / sizes, initial=0.0)) <= secant_min:
        return matrix
    sw = 1.0 / sizes**2
    den = float(np.sum(dr * dr * sw))
    if not den > 0:
        return matrix
    return matrix + np.outer(-dx - matrix @ dr, dr * sw) / den


def at_resolution(res: float) -> Note:
    return Note(NoteCode.at_resolution, f"accepted at the map's resolution (residual {res:.1e})")


def _chord_best(best: tuple, accept: float, nit: int, n_cheap: int) -> SolverResult:
    res_b, gx_b, aux_b, _ = best
    if res_b <= accept:
        return SolverResult(gx_b, Status.ok, (at_resolution(res_b),), nit, res_b, "map resolution", aux_b,
                            {"cheap": n_cheap})
    return SolverResult(gx_b, Status.not_converged, (), nit, res_b,
                        "the frozen-Jacobian steps stopped reducing the residual", aux_b, {"cheap": n_cheap})
