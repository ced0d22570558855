"""Critical sample complexities of one setting: branch ends, alpha_c, alpha_l (docs/model.md); the one driver.

- Where each branch exists comes first, from a branch-end strategy (:mod:`attnphase.theory.transition.strategies`):
  the study's geometry locates the semantic branch's end (where it appears) and the positional branch's (where it
  vanishes, if it does in range) as what they are, pitchfork or fold; any other setting where the solver stops
  finding each branch.  No fixed point of a branch is solved where that branch does not exist.
- alpha_c: train_loss(semantic) = train_loss(positional) (or the agnostic point's, where that is the lower one:
  no positional branch, or a subcritical semantic branch), where the global minimum switches from a point without
  semantic content to one with it (for a tied student of rank >= 2 the lower of the semantic and the mixed
  branch); alpha_l: the smallest alpha above which the test error of the global minimum
  (:func:`attnphase.theory.state_evolution.results.lowest`, every branch the setting has) stays below the linear
  baseline's.
  Both are roots of differences of fixed-point quantities (:mod:`attnphase.theory.transition.roots`).
Every value is a :class:`~attnphase.theory.transition.records.Critical` record: value, interval, kind, method,
reason.

Small omega: the two training losses cross at a shallow angle there, so a small bias in the losses moves alpha_c
a lot.  The study's published table (computed with a 12-point cubature, about 1% bias in the loss) gives
alpha_c(0) = 0.548; this package finds 0.616 (interval [0.601, 0.632] at precision fast), about 10% higher,
while its semantic branch end (a supercritical pitchfork at alpha = 0.513) agrees with an independent
high-precision solve.  Do not compare with the published alpha_c at small omega.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Executor
from typing import Any

import numpy as np

from attnphase.errors import InputError, InputTypeError
from attnphase.parallel import check_workers, pool
from attnphase.setting import Setting, check_alpha, check_int, check_number
from attnphase.theory.model.baseline import linear_baseline
from attnphase.theory.model.overlaps import Overlaps
from attnphase.theory.solvers.fixed_point import Status
from attnphase.theory.state_evolution.order import level_crossing
from attnphase.theory.state_evolution.precision import get_precision
from attnphase.theory.state_evolution.results import MIXED, FixedPoint, branches_for, lowest
from attnphase.theory.state_evolution.solve import solve_retrying
from attnphase.theory.state_evolution.stability import (
    RESOLVE_SCRAMBLINGS,
    ThetaStability,
    theta_stability,
    with_point_error,
)
from attnphase.theory.state_evolution.symmetric import LOG2_POINTS, SCRAMBLINGS
from attnphase.theory.transition.ends import bisect_valid, confirm_fold, narrow_at_interval
from attnphase.theory.transition.linearised import classify_end, instability, order_squared_intercept, theta_points
from attnphase.theory.transition.records import Critical, TransitionResult, spread_halfwidth
from attnphase.theory.transition.roots import alpha_c_on_grid, alpha_l_on_grid, branch_curves
from attnphase.theory.transition.strategies import AdapterEnds, BranchEnds, SolverEnds


def check_transition_args(alpha_min: Any, alpha_max: Any, n_grid: Any, precision: Any, xtol: Any,
                          seed: Any) -> tuple[float, float, int, float, int]:
    """Validate transition()'s options (before any work)."""
    alpha_min, alpha_max = check_alpha(alpha_min), check_alpha(alpha_max)
    if alpha_max <= alpha_min:
        raise InputError(f"alpha range is empty: alpha_max ({alpha_max:g}) must exceed alpha_min ({alpha_min:g})")
    n_grid = check_int("n_grid", n_grid, minimum=3)
    get_precision(precision)
    xtol = check_number("xtol", xtol)
    if xtol <= 0:
        raise InputError(f"xtol must be > 0, got {xtol:g}")
    if xtol >= alpha_max - alpha_min:
        raise InputError(f"xtol ({xtol:g}) must be smaller than the alpha range ({alpha_max - alpha_min:g})")
    seed = check_int("seed", seed, minimum=0)
    return alpha_min, alpha_max, n_grid, xtol, seed


def transition(setting: Setting, alpha_min: float = 0.05, alpha_max: float = 2.0, n_grid: int = 12,
               precision: str = "fast", xtol: float = 0.01, seed: int = 0, z: float = 3.0,
               ends: str = "auto", workers: int = 1) -> TransitionResult:
    """alpha_c, alpha_l and the branch ends of one setting, searched in [alpha_min, alpha_max].

    ends: "adapter" locates the branch ends as properties of the equations (pitchfork / fold, the L = 2,
    r = r* = 1, antipodal adapter); "solves" locates them where the solver stops finding each branch (any
    setting; kind "unknown"); "auto": the adapter where it applies and finds both pitchforks, else the
    solver's (the study from omega 0.6 on).  workers > 1: the positional branch's end (with
    the adapter) and its fixed points are computed in a second process while this one does the semantic branch's
    (same numbers; it pays only where the proximal kernel's own threads leave cores idle, e.g. many cores, or
    NUMBA_NUM_THREADS=1).

    The branch ends come first (they say where each branch exists).  Both branches are then solved on an n_grid
    alpha grid where they exist, downward from alpha_max until alpha_c and alpha_l are bracketed, and each
    crossing's bracket narrowed (new points solved inside it) until it is below xtol or inside the integration
    noise.  A crossing's interval holds the final bracket and z standard errors (spread over scramblings) of the
    difference over its slope around the value (roots.noisy_root); for the ends see the strategies."""
    if not isinstance(setting, Setting):
        raise InputTypeError("setting must be an attnphase.Setting")
    alpha_min, alpha_max, n_grid, xtol, seed = check_transition_args(alpha_min, alpha_max, n_grid, precision,
                                                                     xtol, seed)
    if ends not in ("auto", "adapter", "solves"):
        raise InputError(f"ends must be 'auto', 'adapter' or 'solves', got {ends!r}")
    check_workers(workers)
    if ends == "adapter":
        setting.require_study_geometry()
        if setting.untied:
            raise InputError("ends='adapter' holds for the tied student only (the untied one: ends='solves' or 'auto')")
    # The adapter's conditions are the tied study geometry's; every other setting, the untied student included,
    # takes its ends from the solver.
    general = ends == "solves" or (ends == "auto" and (setting.untied or not setting.is_study_geometry))
    t0, c0 = time.perf_counter(), time.process_time()
    te_lin = float(linear_baseline(setting).test_error_linear)
    grid = [float(a) for a in np.linspace(alpha_min, alpha_max, n_grid)]
    auto = ends == "auto"
    if workers > 1:
        with pool(1) as ex:
            return _transition(setting, grid, general, precision, xtol, seed, z, te_lin, t0, c0, ex, auto)
    return _transition(setting, grid, general, precision, xtol, seed, z, te_lin, t0, c0, None, auto)


def _transition(setting: Setting, grid: list[float], general: bool, precision: str, xtol: float, seed: int,
                z: float, te_lin: float, t0: float, c0: float, ex: Executor | None,
                auto: bool = False) -> TransitionResult:
    alpha_min, alpha_max = grid[0], grid[-1]
    step = (alpha_max - alpha_min) / (len(grid) - 1)
    ends: BranchEnds = (SolverEnds(setting, grid, precision, seed, xtol) if general
                        else AdapterEnds(setting, alpha_min, alpha_max, precision, seed, ex))
    if auto and isinstance(ends, AdapterEnds) and ends.no_pitchfork():
        # The adapter's Newton starts from a guess, unbracketed: where it finds no pitchfork (the study from omega 0.6
        # on, the semantic one above the range) every end read 'failed'; the solver's way scans the grid.
        ends = SolverEnds(setting, grid, precision, seed, xtol)
    cache: dict[tuple[str, float], FixedPoint] = {(p.branch, round(p.alpha, 12)): p for p in ends.seed_points()}
    solves = [len(cache)]

    def start(branch: str, a: float) -> tuple[Overlaps | FixedPoint | None, FixedPoint | None]:
        """(start, nearest solved point) for a solve of branch at a."""
        # A solved neighbour within a grid step carries its Newton matrix (chord steps from the start, a few map
        # evaluations per scrambling); the continuation path's overlaps are a start without one.
        known = sorted((p for (b, _), p in cache.items() if b == branch and p.valid), key=lambda p: abs(p.alpha - a))
        init: Overlaps | FixedPoint | None = known[0] if known and abs(known[0].alpha - a) <= 1.01 * step else None
        if init is None:
            init = ends.path_start(branch, a)
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

    # The branches with semantic content: the semantic one, and for a tied student of rank >= 2 the mixed one
    # (one direction positional, one semantic), which is then the global minimum where it exists (issue 21).
    mixed = MIXED in branches_for(setting)

    def semantic_like(a: float) -> FixedPoint | None:
        """The lowest valid fixed point with semantic content at a (the semantic branch where it exists; the mixed
        one wherever it is valid)."""
        pts = [fp("semantic", a)] if ends.exists("semantic", a) else []
        if mixed:
            pm = fp(MIXED, a)
            if not pm.valid and pm.status != Status.collapsed:
                # The mixed point is the lowest where it exists: a failed solve of it leaves no verdict here, not
                # "semantic only" (which read a false crossing: "Measured cases behind solve.py", curves).
                return None
            pts.append(pm)
        ok = [p for p in pts if p.valid]
        return min(ok, key=lambda p: p.train_loss) if ok else None

    def has_semantic(a: float) -> bool:
        return ends.exists("semantic", a) or (mixed and fp(MIXED, a).valid)

    def other(a: float) -> FixedPoint | None:
        """The lowest valid fixed point without semantic content at a: the positional one where that branch exists,
        or the agnostic one where it is lower (a subcritical semantic branch competes with the agnostic point
        between its fold and their crossing; where no positional branch exists, e.g. L = 3 simplex, omega 0.3,
        the agnostic point is the only competitor)."""
        best = lowest(([fp("positional", a)] if ends.exists("positional", a) else []) + [fp("agnostic", a)])
        if best is not None:
            competitors.add(best.branch)
        return best

    competitors: set[str] = set()

    def both(a: float) -> tuple[FixedPoint, FixedPoint] | None:
        if not has_semantic(a):
            return None
        key = ("positional", round(a, 12))
        if ex is not None and key not in cache and ends.exists("positional", a):
            # the positional solve in the other process while this one solves the semantic branch
            fut = ex.submit(solve_retrying, setting, a, "positional", precision, seed, *start("positional", a))
            semantic_like(a)
            cache[key], n = fut.result()
            solves[0] += n
        ps, pp = semantic_like(a), other(a)
        return (ps, pp) if ps is not None and pp is not None else None

    def delta(a: float) -> tuple[float, float]:
        pair = both(a)
        if pair is None:
            return float("nan"), float("nan")
        ps, pp = pair
        return ps.train_loss - pp.train_loss, math.hypot(ps.errors.get("train_loss", 0.0),
                                                         pp.errors.get("train_loss", 0.0))

    def global_excess(a: float) -> tuple[float, float]:
        """The global minimum's test error minus the baseline's: the lowest valid branch, the agnostic point
        included (the one definition: results.lowest)."""
        gm = lowest([fp(b, a) for b in ("semantic", "positional") if ends.exists(b, a)]
                    + ([fp(MIXED, a)] if mixed else []) + [fp("agnostic", a)])
        if gm is None:
            return float("nan"), float("nan")
        return gm.test_error - te_lin, gm.errors.get("test_error", 0.0)

    # Scan the grid downward from alpha_max (continuation: each solve starts from its neighbour above) until
    # both alpha_c and alpha_l are bracketed: alpha_l is by definition the last crossing seen from above, and
    # the branches are not solved where no critical value can lie.
    d_pts: list[tuple[float, float]] = []
    g_pts: list[tuple[float, float]] = []
    failed_pairs: list[float] = []  # alphas where both branches exist but a solve was not valid
    for a in reversed(grid):
        c_done = not has_semantic(a) or any(d > 0 for _, d in d_pts)
        l_done = any(v >= 0 for _, v in g_pts)
        if c_done and l_done:
            break
        if not c_done:
            if both(a) is not None:
                d_pts.append((a, delta(a)[0]))
            elif ends.exists("positional", a):
                failed_pairs.append(a)
        v = global_excess(a)[0]
        if math.isfinite(v):
            g_pts.append((a, v))
    if not d_pts and failed_pairs:
        # Both branches exist there but a solve failed (an unconverged point on a coarse grid): look a third of a
        # grid step to either side before reading the scan as "no valid pair".
        for a_f in sorted(failed_pairs, reverse=True):
            for a in (a_f + step / 3, a_f - step / 3):
                if alpha_min < a < alpha_max and both(a) is not None:
                    d_pts.append((a, delta(a)[0]))
                    v = global_excess(a)[0]
                    if math.isfinite(v):
                        g_pts.append((a, v))
    if ends.revisit([p for (b, _), p in cache.items() if b == "positional"]):
        for key in [key for key in cache if key[0] == "positional" and not ends.exists("positional", key[1])]:
            del cache[key]
    critical = ends.records()
    d_pts = sorted((a, d) for a, d in d_pts if math.isfinite(d))
    sem_c = ends.semantic_end()
    if mixed:
        critical["alpha_mixed_appears"], critical["mixed_pitchfork"] = _mixed_end(setting, cache, grid, precision,
                                                                                   seed, max(2 * xtol, 0.02))
        mix_c = critical["alpha_mixed_appears"]
        if mix_c.found and (not sem_c.found or mix_c.value < sem_c.value):
            sem_c = mix_c  # (the first branch with semantic content, as alpha grows)
    saddle = not mixed and not setting.untied  # (with a mixed branch: mixed_pitchfork; the untied: not checked)
    if saddle:
        critical["positional_saddle"] = Critical.missing("positional_saddle", "failed", "not reached")  # (its place)
    probed = False
    top = d_pts[0][0] if d_pts else float("nan")
    if d_pts and not any(d > 0 for _, d in d_pts) and sem_c.found and sem_c.hi < d_pts[0][0]:
        # The scan reached the semantic end without seeing positional lower: look right above the end too (at a
        # supercritical pitchfork the semantic loss there is the agnostic one, usually above the positional).
        # Several probes, nearest the grid point first: right next to the end the semantic solve is critically
        # slow and may fail, which must not be read as "no crossing".
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
    competitor = " or ".join(sorted(competitors)) if competitors else "positional"
    alpha_c = alpha_c_on_grid(d_pts, delta, xtol, z, alpha_min, alpha_max, competitor)
    if alpha_c is None:
        alpha_c = _alpha_c_without_crossing(d_pts, failed_pairs, sem_c, ends.semantic_from_min(), probed, top,
                                            alpha_min, competitor)
    critical["alpha_c"] = alpha_c
    critical["alpha_l"] = alpha_l_on_grid(g_pts, alpha_c, global_excess, xtol, z, alpha_min)
    if saddle:
        # Last, so that its points start no other solve.  Over the positional branch's whole range on the grid, not
        # only where alpha_c and alpha_l were sought: at omega 0 the adapter's points ended at 0.76, below the
        # saddle at 0.78, and it read "stable".
        for a in grid:
            if ends.exists("positional", a):
                fp("positional", a)
        top = max((p.alpha for (b, _), p in cache.items() if b == "positional" and p.valid), default=None)
        vanish = critical.get("alpha_pos_vanishes")
        if top is not None and vanish is not None and vanish.found and top < vanish.lo:
            fp("positional", 0.5 * (top + vanish.lo))  # (between the grid's last point and the branch's end)
        critical["positional_saddle"] = _positional_saddle(setting, cache, seed)
    return TransitionResult(omega=setting.omega, critical=critical, test_error_linear=te_lin,
                            alpha_range=(alpha_min, alpha_max), curves=branch_curves(cache), unstable=ends.unstable,
                            solves=solves[0], map_evaluations=ends.evaluations,
                            seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)


def _mixed_end(setting: Setting, cache: dict[tuple[str, float], FixedPoint], grid: list[float], precision: str,
               seed: int, xtol: float) -> tuple[Critical, Critical]:
    """Where the mixed branch (tied, r >= 2) appears, as alpha grows, and the pitchfork condition there (records
    alpha_mixed_appears, mixed_pitchfork).  The solver's end: bracketed between the mixed branch's lowest valid point
    and the nearest alpha below where it is not valid (solved at the grid point below if the scan did not go
    there), narrowed to the pitchfork condition's interval where the solver agrees at its ends, else bisected on
    the solver's validity to xtol; the interval also covers where theta^2 of its valid points extrapolates to zero
    (+- 3 standard errors).  Then held against the linearised condition (classify_end, as the semantic end): the
    branch leaves the positional one continuously (r = 2, omega 0.3, fast: theta 0.032, 0.024, 0.013 at alpha 0.7,
    0.65, 0.6), a supercritical pitchfork where theta's block at the positional point turns unstable, which the
    solver's collapse test resolves only a little above it."""
    name = "alpha_mixed_appears"
    method = f"bisection to {xtol:g} on the validity of the mixed fixed point (theta vanishing from the mixed start)"

    def missing(why: str) -> tuple[Critical, Critical]:
        return (Critical.missing(name, "not in range", why, method),
                Critical.missing("mixed_pitchfork", "not in range", f"not located: {why}"))

    valid = sorted((p for (b, _), p in cache.items() if b == MIXED and p.valid), key=lambda p: p.alpha)
    if not valid:
        return missing("no valid mixed fixed point was solved")
    p_ok = valid[0]
    below = [p for (b, _), p in cache.items() if b == MIXED and not p.valid and p.alpha < p_ok.alpha]
    if not below:
        lower = [a for a in grid if a < p_ok.alpha * (1 - 1e-12)]
        if not lower:
            return missing(f"the mixed branch is valid at alpha = {p_ok.alpha:g}, the lowest alpha solved")
        p_bad, _ = solve_retrying(setting, lower[-1], MIXED, precision, seed, p_ok)
        cache[(MIXED, round(lower[-1], 12))] = p_bad
        if p_bad.valid:
            return missing(f"the mixed branch is valid down to alpha = {lower[-1]:g}")
        below = [p_bad]
    a_bad, a_ok = max(p.alpha for p in below), p_ok.alpha
    p_prev = valid[1] if len(valid) > 1 else None
    pitch = _mixed_pitchfork(setting, cache, grid, seed, a_bad, a_ok, 0.5 * xtol)
    pts: list[FixedPoint] = []
    bracket = (a_ok, p_ok, p_prev, a_bad)
    if pitch.found:
        # The solver's validity at the pitchfork interval's ends first: where it is valid at the top and not at the
        # bottom, the end lies inside the interval already reported (two solves instead of five or six).  From p_ok
        # alone: extrapolated through a point a grid step away the start overshoots (127 against 64 evaluations).
        bracket, _ = narrow_at_interval(setting, MIXED, bracket, pitch, precision, seed, pts, extrapolate=False)
    a_ok, p_ok, p_prev, a_bad = bracket
    if not (pitch.found and pitch.lo <= a_bad and a_ok <= pitch.hi):
        a_ok, a_bad = bisect_valid(setting, MIXED, a_ok, p_ok, a_bad, precision, seed, xtol, pts, p_prev=p_prev)
    else:
        method = "the validity of the mixed fixed point at the ends of the pitchfork condition's interval"
    for p in pts:
        cache[(MIXED, round(p.alpha, 12))] = p
    order = theta_points([p for (b, _), p in cache.items() if b == MIXED])
    ic = order_squared_intercept(order, a_bad)
    lo, hi, why = a_bad, a_ok, "the solver's validity bracket"
    if ic is not None and ic[0] < a_ok:
        lo = min(lo, ic[0] - 3 * ic[1])
        why += f"; theta^2 of the mixed points extrapolates to zero at alpha = {ic[0]:.4g} +- {ic[1]:.2g}"
    end = Critical(name, 0.5 * (a_ok + a_bad), lo, hi, "unknown", method,
                   f"the mixed branch (one direction positional, one semantic) leaves the positional one here "
                   f"({why})")
    mixed = [p for (b, _), p in cache.items() if b == MIXED]
    return confirm_fold(setting, MIXED, classify_end(end, pitch, "lower", order), pitch, "lower", precision, seed,
                        mixed), pitch


def _mixed_pitchfork(setting: Setting, cache: dict[tuple[str, float], FixedPoint], grid: list[float], seed: int,
                     a_bad: float, a_ok: float, xtol: float) -> Critical:
    """Where the positional point turns unstable in theta (linearised.instability, base "positional"): scanned
    from the grid point below the solver's bracket [a_bad, a_ok] of the mixed end to its lowest valid mixed point,
    and over the whole grid where the eigenvalue does not cross 1 there (a pitchfork further away: a fold of the
    mixed branch or an imperfect bifurcation)."""
    known = [(p.alpha, p.overlaps) for (b, _), p in cache.items() if b == "positional" and p.valid]
    if not known:
        return Critical.missing("mixed_pitchfork", "not in range", "no valid positional fixed point was solved")
    # (only where the positional branch was found: below it there is no positional point to linearise at)
    grid = [g for g in grid if g >= min(a for a, _ in known)]
    below = [g for g in grid if g < a_bad]
    near = sorted(set(below[-1:] + [a_ok]))
    kw = dict(seed=seed, xtol=xtol, name="mixed_pitchfork", base="positional", known=known)
    inst = instability(setting, "semantic", near, **kw) if len(near) > 1 else None
    wide = sorted(set(grid) | {a_ok})
    if (inst is None or not inst.critical.found) and len(wide) > 1 and wide != near:
        inst = instability(setting, "semantic", wide, **kw)
    return inst.critical if inst is not None else Critical.missing(
        "mixed_pitchfork", "not in range", f"no alpha to scan below the mixed branch's lowest valid point {a_ok:g}")


def _positional_saddle(setting: Setting, cache: dict[tuple[str, float], FixedPoint], seed: int) -> Critical:
    """Where the positional point turns unstable along theta, a saddle from there on (a branch with theta != 0 leaves
    it: docs/numerics.md, "Stability along theta"): stability.theta_stability at the positional points the transition
    solved, upward to the first two whose mean eigenvalues straddle 1, both then from RESOLVE_SCRAMBLINGS scramblings
    (the pair moved up or down where those put the crossing outside it); per scrambling the eigenvalue linear between
    them and its crossing, the value their mean and the interval their 99% Student-t spread (as linearised.instability:
    each scrambling's points are the same at every alpha, so its eigenvalue is smooth in alpha and its offset from
    the others is the integration error; with 3 scramblings the spread understated it: L = 3 simplex, omega 0.6,
    fast, seed 1, 1.533 [1.459, 1.606] where 12 others put the crossing at 1.64), widened by the two points' own
    integration error (stability.with_point_error; without it the study at omega 0.2, fast, read 1.594 [1.587,
    1.601] from the adapter's points and 1.638 [1.627, 1.649] from the solver's, where default precision puts the
    crossing near 1.65).  The points: every grid point where the positional branch exists, and one between the last
    and the branch's end."""
    name = "positional_saddle"
    method = (f"leading eigenvalue of theta's block of the linearised map at the solved positional points "
              f"({SCRAMBLINGS} scramblings of 2^{LOG2_POINTS + 2} points mirrored in eta and xi, {RESOLVE_SCRAMBLINGS} "
              "at the two that straddle 1), linear between those two")
    pts = sorted((p for (b, _), p in cache.items() if b == "positional" and p.valid), key=lambda p: p.alpha)
    if len(pts) < 2:
        return Critical.missing(name, "not in range", "fewer than two positional points were solved", method)
    where = f"the positional points solved in [{pts[0].alpha:.4g}, {pts[-1].alpha:.4g}]"
    st = [theta_stability(setting, pts[0].alpha, pts[0].overlaps, seed)]
    if st[0].eigenvalue >= 1.0:
        return Critical.missing(name, "not in range", f"unstable along theta already at the lowest of {where} "
                                f"(leading eigenvalue {st[0].eigenvalue:.3f})", method)

    def full(i: int) -> ThetaStability:
        if len(st[i].per_scrambling) < RESOLVE_SCRAMBLINGS:
            st[i] = theta_stability(setting, pts[i].alpha, pts[i].overlaps, seed, at_least=RESOLVE_SCRAMBLINGS,
                                    known=st[i])
        return st[i]

    i = 1
    while i < len(pts):
        if i == len(st):
            st.append(theta_stability(setting, pts[i].alpha, pts[i].overlaps, seed))
        if i == 0 or not st[i - 1].eigenvalue < 1.0 <= st[i].eigenvalue:  # (i 0: moved down past the lowest)
            i += 1
            continue
        if full(i).eigenvalue < 1.0:  # (the crossing lies further up)
            i += 1
            continue
        if full(i - 1).eigenvalue >= 1.0:  # (further down: the pair below)
            i -= 1
            continue
        break
    if i == len(pts) and st[0].eigenvalue >= 1.0:  # (16 scramblings at the lowest point put it at or above 1)
        return Critical.missing(name, "not in range", f"unstable along theta already at the lowest of {where} "
                                f"(leading eigenvalue {st[0].eigenvalue:.3f} from {len(st[0].per_scrambling)} "
                                "scramblings)", method)
    if i == len(pts):
        return Critical.missing(name, "not in range", f"stable along theta at {where} (leading eigenvalue at most "
                                f"{max(s.eigenvalue for s in st):.3f})", method)
    (a0, s0), (a1, s1) = (pts[i - 1].alpha, st[i - 1]), (pts[i].alpha, st[i])
    roots = [level_crossing((a0, e0), (a1, e1), 1.0) for e0, e1 in zip(s0.per_scrambling, s1.per_scrambling,
                                                                        strict=True)]
    xs = [r for r in roots if r is not None]
    if len(xs) < len(roots):
        return Critical.missing(name, "failed", f"a scrambling's eigenvalue is the same at {a0:.4g} and {a1:.4g}",
                                method)
    # The points' own integration error moves both eigenvalues (the same scramblings of the solve at both: taken as
    # fully correlated, the larger error of the crossing), propagated to it linearly and added to the crossings'.
    p0, p1 = (with_point_error(setting, pts[j], st[j], seed) for j in (i - 1, i))
    (e0, e1), slope = (s0.eigenvalue, s1.eigenvalue), s1.eigenvalue - s0.eigenvalue
    moved = (a1 - a0) * (abs(e1 - 1.0) * p0.point_error + abs(1.0 - e0) * p1.point_error) / slope**2
    also = (moved, min(p0.point_scramblings, p1.point_scramblings))
    v, half = float(np.mean(xs)), spread_halfwidth(xs, also=also)
    return Critical(name, v, v - half, v + half, "pitchfork", method,
                    f"the leading eigenvalue crosses 1 between the positional points at {a0:.4g} ({s0.eigenvalue:.3f} "
                    f"+- {s0.error:.2g}, the point's own error {p0.point_error:.2g}) and {a1:.4g} ({s1.eigenvalue:.3f} "
                    f"+- {s1.error:.2g}, {p1.point_error:.2g}); {len(xs)} scramblings' crossings from {min(xs):.4g} to "
                    f"{max(xs):.4g}, the points' error {moved:.2g} in alpha")


def _alpha_c_without_crossing(d_pts: list[tuple[float, float]], failed_pairs: list[float], sem_c: Critical,
                              semantic_from_min: bool, probed: bool, top: float, alpha_min: float,
                              competitor: str = "positional") -> Critical:
    """alpha_c where the loss difference shows no sign change on the grid: what the valid pairs say (competitor:
    what the semantic branch was compared with)."""
    if not d_pts:
        if failed_pairs:
            where = ", ".join(f"{a:.4g}" for a in sorted(failed_pairs))
            return Critical.missing("alpha_c", "failed", f"both branches exist at alpha = {where}, but no valid pair "
                                    f"of fixed points was found there")
        if sem_c.found:
            why = "no positional fixed point where the semantic branch appears"
            return Critical("alpha_c", sem_c.value, sem_c.lo, sem_c.hi, "at spinodal",
                            f"{why}: the global minimum switches where the semantic branch appears", why)
        if semantic_from_min:
            return Critical.missing("alpha_c", "not in range", f"the semantic branch is valid down to alpha_min = "
                                    f"{alpha_min:g} (no positional fixed point found): alpha_c < {alpha_min:g}")
        return Critical.missing("alpha_c", "not in range", "positional and semantic never coexist on the grid")
    if all(d <= 0 for _, d in d_pts):
        if sem_c.found and not (probed and d_pts[0][0] > 0.5 * (sem_c.hi + top)):
            which = "mixed" if sem_c.name == "alpha_mixed_appears" else "semantic"
            return Critical("alpha_c", sem_c.value, sem_c.lo, sem_c.hi, "at spinodal",
                            f"semantic lower wherever both exist: the global minimum switches where the {which} "
                            "branch appears", f"semantic below {competitor} wherever both exist")
        if sem_c.found:
            return Critical.missing("alpha_c", "failed", f"semantic below {competitor} at every valid pair, but no "
                                    "valid pair of fixed points right above the semantic end to confirm a switch "
                                    "there")
        if semantic_from_min:
            return Critical.missing("alpha_c", "not in range", f"the semantic branch is valid down to alpha_min = "
                                    f"{alpha_min:g} and lower than the positional one wherever both exist: "
                                    f"alpha_c < {alpha_min:g}")
    return Critical.missing("alpha_c", "failed", "no bracketed sign change of the training-loss difference")

