"""Where the semantic and positional branches end, located by the condition that fits each end.

Both branches break a Z2 symmetry of the equations (theta -> -theta on the semantic branch, m -> -m on the
positional one), so each leaves the agnostic point (theta = m = 0) at a pitchfork: where the derivative of the
order parameter's image with respect to the order parameter, at the agnostic fixed point, equals 1.  That slope
is smooth and cheap (the adapter computes it exactly for every scrambling by a likelihood-ratio identity), so
the pitchfork is root-found directly.  Whether the branch ends there (supercritical pitchfork: the order
parameter goes continuously to 0) or turns back at a fold first (subcritical) is decided by following the
branch from the pitchfork with pseudo-arclength continuation of the desingularised equations (the order
parameter's equation divided by the order parameter), which passes folds.

Each end is located for every scrambling of the integration points (the other scramblings re-use the first
one's Newton matrix); its interval is the Student-t 99% interval of the mean over scramblings plus the
location tolerance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from attnphase.setting import Setting
from attnphase.theory.model.overlaps import ORDER_NAME, Overlaps, as_branch
from attnphase.theory.solvers.continuation import (
    BranchEnd,
    EndKind,
    Path,
    PathStop,
    arclength,
    bracket_from_above,
    classify_end,
    desingularised,
    locate_pitchfork,
    newton,
    refine_fold,
)
from attnphase.theory.solvers.fixed_point import Inadmissible, Status
from attnphase.theory.state_evolution.curves import solve_curve
from attnphase.theory.state_evolution.precision import Precision, get_precision
from attnphase.theory.state_evolution.solve import solve_retrying
from attnphase.theory.state_evolution.starts import default_start
from attnphase.theory.transition import adapter_map as bm
from attnphase.theory.transition import linearised
from attnphase.theory.transition.linearised import theta_points
from attnphase.theory.transition.records import Critical, joined, spread_halfwidth

# Where the branch exists relative to its end: the semantic branch above its end in alpha, the positional one
# below (it is followed from its pitchfork at small alpha up to where it vanishes, if it does).
SIDE = {"semantic": "lower", "positional": "upper"}
# Where to look for the pitchfork first (Newton starts there; the slope is monotone in alpha in all
# settings measured).
ALPHA_GUESS = {"semantic": 0.7, "positional": 0.1}
# How far above its pitchfork a branch that exists above its end is followed (enough to have passed any fold).
PAST = 0.25
# The record each branch's end fills: the semantic branch's end is where it appears, the positional one's where
# it vanishes (where it appears is its pitchfork).
END_NAME = {"semantic": "alpha_sem_appears", "positional": "alpha_pos_vanishes"}
# validity_ends: the end below which a branch does not exist (where it appears, as alpha grows)
APPEARS = {"semantic": "alpha_sem_appears", "positional": "alpha_pos_appears"}
VANISHES = END_NAME["positional"]  # the positional branch's upper end (it merges back into the agnostic point)


@dataclass
class EndResult:
    """The end of one branch.  ``critical``: the end as a record (kind pitchfork / fold / not in range);
    ``pitchfork``: the pitchfork from the agnostic point (value and interval over scramblings), also when the
    end is a fold; ``path``: (q, V, t, alpha) along the branch from the pitchfork (first scrambling);
    ``unstable``: the part of it between the pitchfork and the fold (empty for a supercritical pitchfork)."""

    branch: str
    critical: Critical
    pitchfork: Critical
    path: np.ndarray = field(default_factory=lambda: np.empty((0, 4)))
    unstable: np.ndarray = field(default_factory=lambda: np.empty((0, 4)))
    per_scrambling: list[float] = field(default_factory=list)
    evaluations: int = 0
    order_name: str = ""


def _resolutions(precision: str | Precision) -> tuple[int, int, int]:
    """(log2 points of the followed path, log2 points of the pitchfork, scramblings).  The path: half the points,
    mirrored (the cost per map evaluation of a plain solve); it only classifies.  The pitchfork, which is the
    reported value, takes 4x more: its Newton needs few evaluations."""
    prec = get_precision(precision)
    return max(prec.log2_points - 1, 6), min(prec.log2_points + 1, 22), max(prec.replicas, 3)


def _slope_map(setting: Setting, branch: str, z: np.ndarray) -> Callable[[np.ndarray, float], tuple[np.ndarray, float]]:
    """(y, alpha) -> (image of the agnostic point's (q, V), the order parameter's slope there) on points z."""

    def S(y: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
        v = bm.symmetric_map(setting, alpha, branch, z, y)
        return v.gy, v.slope
    return S


def _agnostic_start(setting: Setting, alpha: float, branch: str, z: np.ndarray) -> tuple[np.ndarray, int]:
    """The agnostic fixed point (q, V) at alpha: a few damped steps from the default start, then Newton."""
    d0 = default_start(setting, "agnostic")
    y = np.array([float(d0.q[0, 0]), float(d0.V[0, 0])])
    n = 0
    for _ in range(6):
        y = 0.5 * y + 0.5 * bm.symmetric_map(setting, alpha, branch, z, y).gy
        n += 1

    def F(u: np.ndarray) -> np.ndarray:
        return (bm.symmetric_map(setting, alpha, branch, z, u).gy - u) / np.abs(y)

    r = newton(F, y, [0, 1], 1e-3 * np.abs(y), tol=1e-9, accept=1e-5, max_iter=15)
    return r.x, n + r.nit


def _agnostic_at(setting: Setting, alpha: float, branch: str, z: np.ndarray, y0: np.ndarray,
                 jacobian: np.ndarray | None = None) -> tuple[np.ndarray, float, np.ndarray | None, int]:
    """The agnostic fixed point at alpha by Newton from y0 (a neighbour's), and the order parameter's slope
    there: (y, slope, Newton matrix, evaluations).  Raises ValueError where Newton fails."""

    def F(u: np.ndarray) -> np.ndarray:
        return (bm.symmetric_map(setting, alpha, branch, z, u).gy - u) / np.abs(y0)

    r = newton(F, y0, [0, 1], 1e-3 * np.abs(y0), tol=1e-9, accept=1e-5, max_iter=15, jacobian=jacobian)
    if not r.converged:
        raise Inadmissible(f"agnostic point not found at alpha = {alpha:g}: {r.message}")
    v = bm.symmetric_map(setting, alpha, branch, z, r.x)
    return r.x, float(v.slope), r.jacobian, r.nit + 1


def _pitchforks(setting: Setting, branch: str, y0: np.ndarray, a0: float, log2_p: int, R: int, seed: int,
                tol: float) -> tuple[list, int, str]:
    """The pitchfork (slope = 1 with the agnostic fixed point) for each of R scramblings, the first from
    (y0, a0), the others from the first one's solution and Newton matrix: (converged results, evaluations,
    message of the first one's failure)."""
    y_scale = np.abs(y0)
    pfs: list = []
    J = None
    n_eval = 0
    for rep in range(R):
        z = bm.symmetric_points(log2_p, rep, seed, branch)
        start_y, start_a = (y0, a0) if not pfs else (pfs[0].y, pfs[0].p)
        pf = locate_pitchfork(_slope_map(setting, branch, z), start_y, start_a, y_scale=y_scale, p_step=1e-3,
                              tol=tol, jacobian=J, accept=1e-4, max_iter=20)
        n_eval += pf.evaluations
        if not pf.converged:
            if rep == 0:
                return [], n_eval, pf.message
            continue
        J = pf.jacobian
        pfs.append(pf)
    return pfs, n_eval, ""


def merge_end(setting: Setting, branch: str, alpha_lo: float, alpha_hi: float,
              precision: str | Precision = "fast", seed: int = 0, tol: float = 1e-6) -> EndResult:
    """Where a branch that exists at alpha_lo merges back into the agnostic point below alpha_hi: the pitchfork
    at which the order parameter's slope at the agnostic point falls through 1 (from above at alpha_lo to below
    at alpha_hi).  Bracketed by stepping down from alpha_hi on the slope (agnostic point by warm-started Newton),
    then located per scrambling (Newton on slope = 1 jointly with the agnostic point); interval: Student-t 99%
    over scramblings plus the tolerance.

    kind "pitchfork": the order parameter is not followed from it, so a subcritical merge (a fold just above
    the pitchfork) is not excluded; the method says so."""
    name = END_NAME[branch]
    log2, log2_p, R = _resolutions(precision)
    z0 = bm.symmetric_points(log2, 0, seed, branch)
    try:
        y, n_eval = _agnostic_start(setting, alpha_hi, branch, z0)
        y = np.abs(y)
        y, s_hi, J, k = _agnostic_at(setting, alpha_hi, branch, z0, y)
    except (ValueError, ArithmeticError) as exc:
        c = Critical.missing(name, "failed", f"agnostic point at alpha = {alpha_hi:g}: {exc}", "slope of the map")
        return EndResult(branch, c, c, evaluations=0)
    n_eval += k
    if not s_hi < 1:
        c = Critical.missing(name, "not in range", f"the agnostic point is unstable in {ORDER_NAME[branch]} "
                             f"at alpha = {alpha_hi:g} (slope {s_hi:.3g} >= 1)", "slope of the map")
        return EndResult(branch, c, c, evaluations=n_eval)
    # Bracket: step down until the slope exceeds 1 again (eight steps cover [alpha_lo, alpha_hi]); each step
    # starts Newton from the previous agnostic point with its matrix.
    state = {"y": y, "J": J, "n": 0, "ys": {alpha_hi: y}}

    def f(a: float) -> float:
        y_a, s_a, state["J"], k_a = _agnostic_at(setting, a, branch, z0, state["y"], state["J"])
        state["y"] = state["ys"][a] = y_a
        state["n"] += k_a
        return s_a - 1.0

    h = (alpha_hi - alpha_lo) / 8
    br = bracket_from_above(f, alpha_lo, alpha_hi, s_hi - 1.0)
    n_eval += state["n"]
    if br is None:
        c = Critical.missing(name, "failed", f"the slope of the {ORDER_NAME[branch]} map at the agnostic point "
                             f"does not rise through 1 on [{alpha_lo:.4g}, {alpha_hi:g}]: no merge located",
                             "slope of the map")
        return EndResult(branch, c, c, evaluations=n_eval)
    a_lo, f_lo, a_hi, f_hi = br
    y, y_hi = state["ys"][a_lo], state["ys"][a_hi]
    a0 = a_lo + (a_hi - a_lo) * f_lo / (f_lo - f_hi)
    pfs, k, msg = _pitchforks(setting, branch, 0.5 * (y + y_hi), a0, log2_p, R, seed, tol)
    n_eval += k
    method = (f"slope of the {ORDER_NAME[branch]} map at the agnostic point falls through 1 (bracketed on "
              f"[{a_lo:.4g}, {a_hi:.4g}], Newton), {len(pfs)} scramblings; the branch is not followed from it, so "
              f"a fold right above the pitchfork (subcritical merge) is not excluded")
    alphas = [pf.p for pf in pfs]
    if not pfs or not all(a_lo - h <= x <= a_hi + h for x in alphas):
        c = Critical.missing(name, "failed", f"pitchfork not located in [{a_lo:.4g}, {a_hi:.4g}]: {msg or alphas}",
                             method)
        return EndResult(branch, c, c, evaluations=n_eval)
    a_p = float(np.mean(alphas))
    half = spread_halfwidth(alphas) + 10 * tol
    c = Critical(name, a_p, a_p - half, a_p + half, "pitchfork", method)
    return EndResult(branch, c, c, per_scrambling=alphas, evaluations=n_eval, order_name=ORDER_NAME[branch])


def _pitchfork_end(name: str, pitch: Critical, alpha_min: float, alpha_max: float, note: str,
                   not_this_end: str | None, outside_note: bool = False) -> Critical:
    """The branch's end where the followed branch does not turn back at a fold: the pitchfork itself (note added
    to its method), 'not in range' where it lies outside [alpha_min, alpha_max] (note added to the reason with
    outside_note), or 'not in range' for the reason not_this_end where the pitchfork is not this end at all."""
    if not_this_end is not None:
        return Critical.missing(name, "not in range", not_this_end, "pseudo-arclength continuation")
    if not alpha_min <= pitch.value <= alpha_max:
        return Critical.missing(name, "not in range", f"pitchfork at alpha = {pitch.value:.4g} outside "
                                f"[{alpha_min:g}, {alpha_max:g}]" + (f"; {note}" if outside_note else ""),
                                pitch.method)
    return Critical(name, pitch.value, pitch.lo, pitch.hi, "pitchfork", pitch.method + "; " + note)


def branch_end(setting: Setting, branch: str, alpha_min: float, alpha_max: float,
               precision: str | Precision = "fast", seed: int = 0, tol: float = 1e-6,
               follow: bool = True) -> EndResult:
    """The end of ``branch`` ("semantic": where it appears; "positional": where it vanishes) in
    [alpha_min, alpha_max], classified and located, with an interval over scramblings."""
    side = SIDE[branch]
    name = END_NAME[branch]
    log2, log2_p, R = _resolutions(precision)
    n_eval = 0

    def G_for(z):
        def G(y, t, alpha):
            v = bm.branch_map(setting, alpha, branch, z, y, t)
            return v.gy, v.gt
        return G

    # --- the pitchfork, for every scrambling
    z0 = bm.symmetric_points(log2, 0, seed, branch)
    y0, k = _agnostic_start(setting, ALPHA_GUESS[branch], branch, z0)
    y0 = np.abs(y0)
    n_eval += k
    y_scale = np.abs(y0)
    pfs, k, msg = _pitchforks(setting, branch, y0, ALPHA_GUESS[branch], log2_p, R, seed, tol)
    n_eval += k
    if not pfs:
        pc = Critical.missing(f"{branch}_pitchfork", "failed", f"pitchfork not located: {msg}", "Newton on slope = 1")
        return EndResult(branch, Critical.missing(name, "failed", pc.reason), pc, evaluations=n_eval)
    alphas = [pf.p for pf in pfs]
    a_p = float(np.mean(alphas))
    half = spread_halfwidth(alphas) + 10 * tol
    method = f"slope of the {ORDER_NAME[branch]} map at the agnostic point = 1 (Newton), {len(pfs)} scramblings"
    pitch = Critical(f"{branch}_pitchfork", a_p, a_p - half, a_p + half, "pitchfork", method)
    if not follow:
        return EndResult(branch, pitch, pitch, per_scrambling=alphas, evaluations=n_eval,
                         order_name=ORDER_NAME[branch])

    # --- the branch from the pitchfork (first scrambling): pitchfork or fold?
    pf0 = pfs[0]
    q0 = float(pf0.y[0])
    t_scale = np.sqrt(q0 * setting.rho) if branch == "semantic" else np.sqrt(q0)
    # Arclength metric: typical sizes along the whole branch (q grows ~10x from a pitchfork at small alpha).
    scale = np.array([max(y_scale[0], 0.05), y_scale[1], max(t_scale, 0.1), 1.0])
    # G_t / t is grainy for t below a few per cent of its scale: interpolate there (desingularised()).
    t_min = 0.05 * t_scale
    F0 = desingularised(G_for(z0), _slope_map(setting, branch, z0), 0.1 * y_scale, t_min=t_min)
    u0 = np.array([pf0.y[0], pf0.y[1], 0.0, pf0.p])

    def stop(u: np.ndarray) -> PathStop | None:
        if u[3] > alpha_max + 0.05 or u[3] < max(alpha_min - 0.2, 1e-3):
            return PathStop.left_range
        if side == "lower" and u[3] > pf0.p + PAST:
            # Back above the pitchfork by a margin: any fold (which lies below the pitchfork on this side) is
            # already on the path, so the end is classified; the fixed points beyond are solved from neighbours.
            return PathStop.past_pitchfork
        if branch == "semantic" and u[2] ** 2 >= 0.95 * u[0] * setting.rho:
            return PathStop.at_bound
        if u[2] < 0:
            return PathStop.sign_change
        return None

    path = arclength(F0, u0, np.array([0.0, 0.0, 1.0, 0.0]), scale=scale, ds=0.2, ds_max=1.0, tol=3e-4,
                     accept=3e-3, max_steps=30, stop=stop)
    n_eval += path.evaluations
    end: BranchEnd = classify_end(path, side)
    if end.kind in (EndKind.pitchfork, EndKind.none):
        left = path.stop in (PathStop.left_range, PathStop.at_bound, PathStop.past_pitchfork)
        if end.kind == EndKind.none and not left:
            crit = Critical.missing(name, "failed", f"continuation of the {branch} branch from its pitchfork at "
                                    f"alpha = {a_p:.4g} stopped at alpha = {path.u[-1, 3]:.3g} ({path.message}) "
                                    f"before turning back or leaving the range", "pseudo-arclength continuation")
        else:
            # A supercritical pitchfork is where the positional branch *appears*; it vanishes only at a fold.
            no_turn = (f"the {branch} branch leaves the agnostic point at a pitchfork at alpha = {a_p:.4g} and does "
                       f"not turn back up to alpha = {path.u[-1, 3]:.3g} ({path.message})")
            crit = _pitchfork_end(name, pitch, alpha_min, alpha_max,
                                  "supercritical (branch followed by pseudo-arclength continuation)",
                                  no_turn if branch == "positional" or end.kind == EndKind.none else None)
        return EndResult(branch, crit, pitch, path=path.u, per_scrambling=alphas, evaluations=n_eval,
                         order_name=ORDER_NAME[branch])
    # A fold: refine per scrambling on the first scrambling's path.  A turn that most scramblings do not
    # confirm, or that does not lie clearly below the pitchfork, is a wiggle of the integration noise (the
    # desingularised equation G_t / t is noisiest next to the pitchfork): the end is then the pitchfork.
    folds = []
    for rep in range(R):
        z = z0 if rep == 0 else bm.symmetric_points(log2, rep, seed, branch)
        Fr = F0 if rep == 0 else desingularised(G_for(z), _slope_map(setting, branch, z), 0.1 * y_scale,
                                                t_min=t_min)
        tp = refine_fold(Fr, path, end.fold, scale=scale, tol=1e-4, accept=3e-3, max_rounds=3 if rep == 0 else 2)
        n_eval += 1
        if tp.confirmed:
            folds.append(tp.p)
    a_f = float(np.mean(folds)) if folds else float("nan")
    half_f = spread_halfwidth(folds) + max(end.fold.interpolation, 1e-4) if len(folds) > 1 else float("inf")
    beyond = a_f + half_f < pitch.lo if side == "lower" else a_f - half_f > pitch.hi
    if len(folds) < max(2, (R + 1) // 2) or not beyond:
        note = (f"a turn of the followed branch at alpha = {end.fold.p:.4g} was not confirmed by the other "
                f"scramblings ({len(folds)} of {R}) or not clearly beyond the pitchfork: taken as integration noise")
        crit = _pitchfork_end(name, pitch, alpha_min, alpha_max, note, note if branch == "positional" else None,
                              outside_note=True)
        return EndResult(branch, crit, pitch, path=path.u, per_scrambling=alphas, evaluations=n_eval,
                         order_name=ORDER_NAME[branch])
    fmethod = (f"fold of the branch followed by pseudo-arclength continuation from a subcritical pitchfork at "
               f"alpha = {a_p:.4g}; parabola vertex refined per scrambling ({len(folds)} of {R})")
    if not alpha_min <= a_f <= alpha_max:
        crit = Critical.missing(name, "not in range", f"fold at alpha = {a_f:.4g} outside [{alpha_min:g}, "
                                f"{alpha_max:g}]", fmethod)
    else:
        crit = Critical(name, a_f, a_f - half_f, a_f + half_f, "fold", fmethod)
    return EndResult(branch, crit, pitch, path=path.u, unstable=end.unstable, per_scrambling=folds,
                     evaluations=n_eval, order_name=ORDER_NAME[branch])


@dataclass
class ValidityEnds:
    """Branch ends of a setting without the L = 2 adapter, from where the solver finds each branch (a valid fixed
    point with its order parameter non-zero beyond its error).  ``range``: per branch the (lo, hi) alpha
    interval in which it exists on the grid (lo > hi: nowhere), ``ends``: records alpha_sem_appears,
    alpha_pos_appears, alpha_pos_vanishes; ``points``: every fixed point solved on the way."""

    ends: dict[str, Critical]
    range: dict[str, tuple[float, float]]
    points: list = field(default_factory=list)
    merge: Critical | None = None  # the positional branch's merge pitchfork, where validity_ends was given one


def _extrapolated(p1, p2, a: float) -> Overlaps | None:
    """Overlaps linearly extrapolated to alpha from two valid fixed points of a branch (None without two)."""
    if p1 is None or p2 is None or p1.alpha == p2.alpha:
        return None
    c = (a - p1.alpha) / (p1.alpha - p2.alpha)
    o1, o2 = p1.overlaps, p2.overlaps
    return Overlaps(q=o1.q + c * (o1.q - o2.q), m=o1.m + c * (o1.m - o2.m), V=o1.V + c * (o1.V - o2.V),
                    theta=o1.theta + c * (o1.theta - o2.theta), untied=o1.untied)


def probe_valid(setting: Setting, branch: str, a: float, p_ok, p_prev, precision, seed: int):
    """The branch's fixed point at a for a search of its end: from the two valid points nearest the end (p_ok, and
    p_prev or None) extrapolated linearly, then from p_ok, then from the default start (solve_retrying)."""
    ext = _extrapolated(p_ok, p_prev, a)
    if ext is not None:
        return solve_retrying(setting, a, branch, precision, seed, init=ext, nearest=p_ok)[0]
    return solve_retrying(setting, a, branch, precision, seed, init=p_ok)[0]


def bisect_valid(setting: Setting, branch: str, a_ok: float, p_ok, a_bad: float, precision, seed: int,
                  xtol: float, points: list, p_prev=None) -> tuple[float, float]:
    """Shrink [a_bad, a_ok] (either order) to xtol on the solver's validity.  Each solve starts from the two valid
    points nearest the boundary extrapolated linearly (next to a fold the stable branch's basin narrows, and the
    nearest point alone, a bracket away, can lead onto the agnostic point), then from the nearest point, then
    from the default start (a failure from a neighbour can be the neighbour's fault)."""
    bracket = (a_ok, p_ok, p_prev, a_bad)
    while abs(bracket[0] - bracket[3]) > xtol:
        bracket = narrow_bracket(setting, branch, 0.5 * (bracket[0] + bracket[3]), bracket, precision, seed, points)
    return bracket[0], bracket[3]


def narrow_bracket(setting: Setting, branch: str, a: float, bracket: tuple, precision, seed: int, points: list,
                   extrapolate: bool = True) -> tuple:
    """One solve at a inside bracket = (a_ok, p_ok, p_prev, a_bad) (probe_valid; from p_ok alone where not
    extrapolate), appended to points; the bracket with a as its new valid or invalid end."""
    a_ok, p_ok, p_prev, a_bad = bracket
    p = probe_valid(setting, branch, a, p_ok, p_prev if extrapolate else None, precision, seed)
    points.append(p)
    return (a, p, p_ok, a_bad) if p.valid else (a_ok, p_ok, p_prev, a)


FINER = {"fast": "default", "default": "high"}  # the level a fold read at one precision is held at


def confirm_fold(setting: Setting, branch: str, end: Critical, pitch: Critical, side: str, precision, seed: int,
                 points: list) -> Critical:
    """A fold read off the solver's validity (``end``, kind "fold": the branch valid beyond its pitchfork's
    interval, below it for side "lower", above it for "upper"), held at the next precision level halfway between
    the fold's valid end and the pitchfork's interval, from the branch's valid points there (``points``).
    A subcritical branch exists on that whole stretch at any number of integration points.  A finite point set
    breaks the Z2 symmetry at O(n^-1/2) and unfolds a supercritical pitchfork into a branch that goes on beyond it
    to a fold of its own (L = 3 simplex, omega 0.6, semantic, fast: theta 0.018 at 0.4046 in every scrambling, below
    the pitchfork's interval [0.401, 0.485], while at default precision theta^2 falls linearly to zero at 0.425 and
    the branch is collapsed at 0.45 and below).  Where the finer solve collapses, the end is the pitchfork; where it
    is valid, the fold stands, confirmed; where it gives no verdict, kind "unknown" with the interval from the fold
    to the pitchfork; where there is no finer level, the fold stands and its reason says so."""
    if end.kind != "fold" or not pitch.found:
        return end
    level = get_precision(precision).name
    finer = FINER.get(level)
    lower = side == "lower"
    a = 0.5 * (end.hi + pitch.lo) if lower else 0.5 * (end.lo + pitch.hi)
    near = sorted((p for p in points if p.branch == branch and p.valid), key=lambda p: abs(p.alpha - a))[:2]
    if finer is None or not near:
        why = f"no precision finer than {level}" if finer is None else "no valid point to start from"
        return Critical(end.name, end.value, end.lo, end.hi, end.kind, end.method,
                        joined(end.reason, f"not held at a finer precision ({why})"))
    p = probe_valid(setting, branch, a, near[0], near[1] if len(near) > 1 else None, finer, seed)
    if p.valid:
        sizes = ", ".join(f"{n} = {p.summary()[n]:.3g}" for n in as_branch(branch).order_parameters)
        return Critical(end.name, end.value, end.lo, end.hi, end.kind, end.method,
                        joined(end.reason, f"confirmed at {finer} precision: valid at alpha = {a:.4g} ({sizes})"))
    if p.status != Status.collapsed:
        # (no verdict there: either reading may hold, so the end is somewhere from the fold to the pitchfork)
        lo, hi = (end.lo, max(end.hi, pitch.hi)) if lower else (min(end.lo, pitch.lo), end.hi)
        return Critical(end.name, end.value, lo, hi, "unknown", end.method,
                        joined(end.reason, f"not confirmed at {finer} precision ({p.status.value} at alpha = "
                                            f"{a:.4g}): a fold or the pitchfork at {pitch.value:.4g}, the interval "
                                            f"covering both"))
    way = "below" if lower else "above"
    return Critical(end.name, pitch.value, pitch.lo, pitch.hi, "pitchfork", pitch.method,
                    f"supercritical: the branch's valid points {way} the pitchfork at {level} precision (a fold at "
                    f"[{end.lo:.4g}, {end.hi:.4g}]) are the finite point set's imperfect bifurcation: at {finer} "
                    f"precision it is collapsed at alpha = {a:.4g}, between that fold and the pitchfork")


def narrow_at_interval(setting: Setting, branch: str, bracket: tuple, pitch: Critical, precision, seed: int,
                       points: list, extrapolate: bool = True) -> tuple[tuple, bool]:
    """The bracket (a_ok, p_ok, p_prev, a_bad; a_ok above or below a_bad) narrowed by solves at the ends of the
    pitchfork's interval that lie inside it, the one nearer a_ok first (narrow_bracket), and whether any was solved."""
    solved = False
    for a in ((pitch.hi, pitch.lo) if bracket[0] > bracket[3] else (pitch.lo, pitch.hi)):
        if min(bracket[0], bracket[3]) < a < max(bracket[0], bracket[3]):
            bracket = narrow_bracket(setting, branch, a, bracket, precision, seed, points, extrapolate=extrapolate)
            solved = True
    return bracket, solved


def _settle_at_pitchfork(setting: Setting, branch: str, bracket: tuple, pitch: Critical | None, precision,
                         seed: int, points: list, side: str = "lower") -> Critical | tuple:
    """A branch end held against its pitchfork condition before any bisection: side "lower", the end of a branch
    that exists above it (its appearance); "upper", of one that exists below it (the positional branch merging back
    into the agnostic point).  The solver's fixed point at the ends of the pitchfork's interval that lie inside the
    grid bracket (a_ok, p_ok, p_prev, a_bad).  The pitchfork itself (kind "pitchfork") where the solver's end lies
    inside its interval, or where the squared order parameter of its valid points extrapolates to zero inside it (a
    supercritical pitchfork: linearised.classify_end), whether the branch is valid through the interval (the valid
    points beyond it are the finite point set's imperfection) or the solver did not converge at its far end (the
    interval then reaches to the nearest valid point); else the (narrowed) bracket for the bisection."""
    if pitch is None or not pitch.found:
        return bracket
    # (where no end of the interval lies inside the bracket, the grid's bracket is held against it as it is)
    bracket, _ = narrow_at_interval(setting, branch, bracket, pitch, precision, seed, points)
    a_ok, _, _, a_bad = bracket
    lower = side == "lower"
    name = APPEARS[branch] if lower else VANISHES
    below, above = sorted((a_ok, a_bad))
    if pitch.lo <= below and above <= pitch.hi:
        return Critical(name, pitch.value, pitch.lo, pitch.hi, "pitchfork", pitch.method,
                        f"the solver's validity bracket [{below:.4g}, {above:.4g}] lies inside the pitchfork's "
                        "interval")
    # Where the squared order parameter of the valid points heads to zero inside the interval: the pitchfork
    # (classify_end), if the branch is valid through the interval, or if the solve at its far end did not converge
    # (no verdict, and bisecting towards it would solve more such points: L = 3 simplex, omega 0.6, 250 s for the same
    # record).  Where that end collapsed, the bisection narrows the bracket.
    edge = next((p for p in reversed(points) if p.branch == branch and p.alpha == a_bad), None)
    through = a_ok <= pitch.lo if lower else a_ok >= pitch.hi
    short = a_ok > pitch.hi if lower else a_ok < pitch.lo
    if through or (short and edge is not None and edge.status == Status.not_converged):
        order = theta_points([p for p in points if p.branch == branch], ORDER_NAME[branch])
        end = linearised.classify_end(Critical(name, 0.5 * (a_ok + a_bad), below, above, "unknown", ""),
                                      pitch, side, order)
        if end.kind == "pitchfork":
            return end
    return bracket


def _end_between(setting: Setting, branch: str, bracket: tuple, pitch: Critical | None, side: str, precision,
                 seed: int, xtol: float, points: list, method: str) -> tuple[Critical, float]:
    """A branch end inside the grid bracket (a_ok, p_ok, p_prev, a_bad): settled at its pitchfork where that does it
    (_settle_at_pitchfork), else bisected on the solver's validity to xtol (kind unknown, the final bracket); and
    where the branch's range stops (the pitchfork, or the last valid alpha)."""
    settled = _settle_at_pitchfork(setting, branch, bracket, pitch, precision, seed, points, side)
    if isinstance(settled, Critical):
        return settled, settled.value
    a_ok, p_ok, p_prev, a_bad = settled
    a_ok, a_bad = bisect_valid(setting, branch, a_ok, p_ok, a_bad, precision, seed, xtol, points, p_prev=p_prev)
    name = APPEARS[branch] if side == "lower" else VANISHES
    return Critical(name, 0.5 * (a_ok + a_bad), min(a_ok, a_bad), max(a_ok, a_bad), "unknown", method), a_ok


def validity_ends(setting: Setting, grid: list[float], precision: str | Precision = "fast", seed: int = 0,
                  xtol: float = 0.02, stable: dict[str, float] | None = None,
                  pitchforks: dict[str, Critical] | None = None,
                  merge: Callable[[float], Critical | None] | None = None) -> ValidityEnds:
    """Ends of the semantic and positional branches located on the solver's validity: both branches solved
    along the grid by continuation (solve_curve), each end bracketed between a grid point where the branch is
    valid and its neighbour where it is not (collapsed onto the agnostic point, or no convergence), then
    bisected to xtol.  kind "unknown": a collapse test does not say pitchfork or fold; the interval is the final
    bracket, so it holds the end as the solver sees it (at this precision), not an extrapolation.

    stable: branch -> the largest leading eigenvalue of its block at the agnostic point over the grid, for the
    branches towards which the agnostic point is stable at every grid alpha (linearised.stable_on_grid).  No such
    branch is born in the range, so one that exists there reaches in from outside, through an end of the range:
    it is solved at the grid's two ends first, and along the whole grid only where one of them is valid.
    pitchforks: branch -> its pitchfork condition at the agnostic point (linearised.instability), where known: the
    ends of its interval are solved first for the branch's appearance, and where the solver settles the end there
    (_settle_at_pitchfork) the end is that pitchfork, with no bisection of the solver's collapse.
    merge: where the solver loses the positional branch in the range, the pitchfork where it merges back into the
    agnostic point, given the lowest alpha where it exists (or None where there is none): its upper end is settled
    there the same way (ValidityEnds.merge records it)."""
    stable = stable or {}
    pitchforks = pitchforks or {}
    merged = None

    grid = sorted(grid)
    points: list = []
    ends: dict[str, Critical] = {}
    rng: dict[str, tuple[float, float]] = {}
    method = f"bisection to {xtol:g} on the validity of the solver's fixed point (collapse of the order parameter " \
             f"or no convergence), from an alpha grid of {len(grid)} points"
    for branch in ("semantic", "positional"):
        curve = []
        if branch in stable:
            # (each end solved as the curve's own first point would be: from the start set)
            curve = [solve_curve(setting, [a], branch, precision, seed=seed, stability=False)[0]
                     for a in (grid[0], grid[-1])]
        if not curve or any(p.valid for p in curve):
            curve = solve_curve(setting, grid, branch, precision, seed=seed, stability=False)
        points.extend(curve)
        ok = [p.valid for p in curve]
        if not any(ok):
            reason = f"no valid {branch} fixed point on the grid [{grid[0]:g}, {grid[-1]:g}] (continuation and the " \
                     f"default start)"
            if branch in stable:
                reason = f"the agnostic point is stable towards the {branch} branch at every alpha of the grid " \
                         f"[{grid[0]:g}, {grid[-1]:g}] (leading eigenvalue of its block at most {stable[branch]:.3g}), " \
                         f"so none is born there, and none reaches in through an end of the range (no valid " \
                         f"{branch} fixed point at alpha = {grid[0]:g} or {grid[-1]:g} from the start set)"
            for name in (APPEARS[branch],) + ((VANISHES,) if branch == "positional" else ()):
                ends[name] = Critical.missing(name, "not in range", reason, method)
            rng[branch] = (float("inf"), -float("inf"))
            continue
        # The run of valid points that matters: from the top for the semantic branch (it exists at large alpha),
        # from the lowest valid point for the positional one.
        if branch == "semantic":
            i1 = len(curve) - 1 if ok[-1] else max(i for i, v in enumerate(ok) if v)
            i0 = i1
            while i0 > 0 and ok[i0 - 1]:
                i0 -= 1
        else:
            i0 = ok.index(True)
            i1 = i0
            while i1 < len(ok) - 1 and ok[i1 + 1]:
                i1 += 1
        lo_name = APPEARS[branch]
        lo = grid[0]
        if i0 == 0:
            ends[lo_name] = Critical.missing(lo_name, "not in range", f"the {branch} branch is valid at alpha = "
                                             f"{grid[0]:g}, the lower end of the range", method)
            lo = -float("inf")
        else:
            bracket = (grid[i0], curve[i0], curve[i0 + 1] if i0 + 1 <= i1 else None, grid[i0 - 1])
            ends[lo_name], lo = _end_between(setting, branch, bracket, pitchforks.get(branch), "lower", precision,
                                             seed, xtol, points, method)
        hi = float("inf")
        if branch == "positional":
            if i1 == len(curve) - 1:
                ends[VANISHES] = Critical.missing(
                    VANISHES, "not in range", f"the positional branch is valid from alpha = "
                    f"{grid[i0]:g} up to {grid[-1]:g}", method)
                hi = float("inf")
            else:
                bracket = (grid[i1], curve[i1], curve[i1 - 1] if i1 - 1 >= i0 else None, grid[i1 + 1])
                merged = merge(lo) if merge is not None else None
                ends[VANISHES], hi = _end_between(setting, branch, bracket, merged, "upper", precision, seed, xtol,
                                                  points, method)
        rng[branch] = (lo, hi)
    return ValidityEnds(ends, rng, points, merged)


def path_as_overlaps(end: EndResult, part: str = "unstable") -> list[dict[str, float]]:
    """Rows (alpha, q, V, m, theta) of the unstable part (or the whole path) for drawing."""
    rows = end.unstable if part == "unstable" else end.path
    t_name = end.order_name or ("theta" if end.branch == "semantic" else "m")
    other = "m" if t_name == "theta" else "theta"
    return [{"alpha": float(u[3]), "q": float(u[0]), "V": float(u[1]), t_name: float(u[2]), other: 0.0}
            for u in rows]


__all__ = ["EndResult", "Path", "ValidityEnds", "bisect_valid", "branch_end", "merge_end", "path_as_overlaps",
           "narrow_at_interval", "narrow_bracket", "probe_valid",
           "validity_ends"]
