"""Critical sample complexities of one setting: branch ends, alpha_c, alpha_l (docs/model.md).

- The semantic branch's end (where it appears) and the positional branch's end (where it vanishes, if it does
  in range) are located as what they are, pitchfork or fold (:mod:`attnphase.theory.branch_ends`); no fixed
  point of a branch is solved where that branch does not exist.
- alpha_c: train_loss(semantic) = train_loss(positional); alpha_l: the smallest alpha above which the test
  error of the global minimum stays below the linear baseline's.  Both are roots of differences of fixed-point
  quantities (:func:`attnphase.theory.curves.crossing`-style records).
Every value is a :class:`~attnphase.theory.curves.Critical` record: value, interval, kind, method, reason.

Small omega: the two training losses cross at a shallow angle there, so a small bias in the losses moves alpha_c
a lot.  The study's published table (computed with a 12-point cubature, about 1% bias in the loss) gives
alpha_c(0) = 0.548; this package finds 0.616 (interval [0.601, 0.632] at precision fast), about 10% higher,
while its semantic branch end (a supercritical pitchfork at alpha = 0.513) agrees with an independent
high-precision solve.  Do not compare with the published alpha_c at small omega.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnphase.setting import Setting, check_alpha, check_int, check_number
from attnphase.theory.baseline import linear_baseline
from attnphase.theory.branch_ends import EndResult, branch_end, merge_end, path_as_overlaps
from attnphase.theory.curves import Critical, global_minimum_curve
from attnphase.theory.results import FixedPoint, Overlaps
from attnphase.theory.state_evolution import get_precision, solve

NAMES = ("alpha_c", "alpha_l", "alpha_sem_appears", "alpha_pos_vanishes")


@dataclass
class TransitionResult:
    """The critical values of one setting (records in ``critical``, keyed by NAMES plus the pitchforks
    ``semantic_pitchfork`` and ``positional_pitchfork``), the branch curves solved on the way, and the
    unstable parts of the branches (rows alpha, q, V, m, theta) for dashed curves."""

    omega: float
    critical: dict[str, Critical]
    test_error_linear: float
    alpha_range: tuple[float, float]
    curves: dict[str, list[FixedPoint]] = field(default_factory=dict)
    unstable: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    solves: int = 0  # fixed points solved (each: all scramblings)
    map_evaluations: int = 0  # evaluations of the map spent on the branch ends
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # this process's CPU time: comparable across loads of a shared machine

    # The flat attributes of the first version (figures and the report read these).
    def _value(self, name: str) -> float | None:
        return self.critical[name].value

    def _interval(self, name: str) -> tuple[float, float] | None:
        return self.critical[name].interval

    alpha_c = property(lambda self: self._value("alpha_c"))
    alpha_l = property(lambda self: self._value("alpha_l"))
    alpha_sem_appears = property(lambda self: self._value("alpha_sem_appears"))
    alpha_pos_vanishes = property(lambda self: self._value("alpha_pos_vanishes"))
    alpha_c_bracket = property(lambda self: self._interval("alpha_c"))
    alpha_l_bracket = property(lambda self: self._interval("alpha_l"))
    alpha_sem_appears_bracket = property(lambda self: self._interval("alpha_sem_appears"))
    alpha_pos_vanishes_bracket = property(lambda self: self._interval("alpha_pos_vanishes"))

    @property
    def reasons(self) -> dict[str, str]:
        return {k: c.reason for k, c in self.critical.items() if k in NAMES and c.reason}

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"omega": self.omega}
        for name in NAMES:
            d.update(self.critical[name].to_dict(name))
        d["test_error_linear"] = self.test_error_linear
        d["note"] = "; ".join(f"{k}: {v}" for k, v in self.reasons.items())
        return d


def check_transition_args(alpha_min: Any, alpha_max: Any, n_grid: Any, precision: Any, xtol: Any,
                          seed: Any) -> tuple[float, float, int, float, int]:
    """Validate transition()'s options (before any work)."""
    alpha_min, alpha_max = check_alpha(alpha_min), check_alpha(alpha_max)
    if alpha_max <= alpha_min:
        raise ValueError(f"alpha range is empty: alpha_max ({alpha_max:g}) must exceed alpha_min ({alpha_min:g})")
    n_grid = check_int("n_grid", n_grid, minimum=3)
    get_precision(precision)
    xtol = check_number("xtol", xtol)
    if xtol <= 0:
        raise ValueError(f"xtol must be > 0, got {xtol:g}")
    if xtol >= alpha_max - alpha_min:
        raise ValueError(f"xtol ({xtol:g}) must be smaller than the alpha range ({alpha_max - alpha_min:g})")
    seed = check_int("seed", seed, minimum=0)
    return alpha_min, alpha_max, n_grid, xtol, seed


def _root(name: str, f: Callable[[float], tuple[float, float]], a: float, b: float, xtol: float, z: float,
          method: str) -> Critical:
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
        raise ValueError(f"no sign change of f on [{lo:g}, {hi:g}]: f = {flo:.3g}, {fhi:.3g}")
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


def transition(setting: Setting, alpha_min: float = 0.05, alpha_max: float = 2.0, n_grid: int = 12,
               precision: str = "fast", xtol: float = 0.01, seed: int = 0, z: float = 3.0,
               ends: str = "auto", workers: int = 1) -> TransitionResult:
    """alpha_c, alpha_l and the branch ends of one setting, searched in [alpha_min, alpha_max].

    ends: "adapter" locates the branch ends as properties of the equations (pitchfork / fold, the L = 2,
    r = r* = 1, antipodal adapter); "solves" locates them where the solver stops finding each branch (any
    setting; kind "unknown"); "auto": the adapter where it applies.  workers > 1 (adapter path): the positional
    branch's end and its fixed points are computed in a second process while this one does the semantic branch's
    (same numbers; it pays only where the proximal kernel's own threads leave cores idle, e.g. many cores, or
    NUMBA_NUM_THREADS=1).

    The branch ends come first (they say where each branch exists).  Both branches are then solved on an n_grid
    alpha grid where they exist (the semantic one from its continuation path's overlaps as the start), and the
    crossings refined by regula falsi to xtol.  Intervals: z standard errors (spread over scramblings) of the
    difference, divided by its slope, plus the tolerance; for the ends see branch_ends."""
    if not isinstance(setting, Setting):
        raise TypeError("setting must be an attnphase.Setting")
    alpha_min, alpha_max, n_grid, xtol, seed = check_transition_args(alpha_min, alpha_max, n_grid, precision,
                                                                     xtol, seed)
    if ends not in ("auto", "adapter", "solves"):
        raise ValueError(f"ends must be 'auto', 'adapter' or 'solves', got {ends!r}")
    from attnphase.parallel import check_workers, pool

    check_workers(workers)
    if setting.untied:
        # The branch-end adapter is the tied student's, and the general path has not been validated for the
        # untied one (solve() and compare() handle it): refuse rather than return unchecked critical values.
        raise ValueError("transition implements the tied student only; got student='untied' "
                         "(use solve / attnphase theory --student untied for its fixed points)")
    if ends == "adapter":
        setting.require_study_geometry()
    general = ends == "solves" or (ends == "auto" and not setting.is_study_geometry)
    t0, c0 = time.perf_counter(), time.process_time()
    te_lin = float(linear_baseline(setting).test_error_linear)
    grid = [float(a) for a in np.linspace(alpha_min, alpha_max, n_grid)]
    if general:
        return _transition_general(setting, grid, precision, xtol, seed, z, te_lin, t0, c0)
    if workers > 1:
        with pool(1) as ex:
            return _transition_study(setting, alpha_min, alpha_max, n_grid, precision, xtol, seed, z, te_lin, t0,
                                     c0, ex)
    return _transition_study(setting, alpha_min, alpha_max, n_grid, precision, xtol, seed, z, te_lin, t0, c0, None)


def _positional_ends(setting: Setting, alpha_min: float, alpha_max: float, precision: str,
                     seed: int) -> tuple[EndResult, EndResult | None]:
    """The positional branch's pitchfork (where it appears) and, where the agnostic point is stable again in m at
    alpha_max (omega <= 0.2), where it merges back into it: (pitchfork end, merge end or None)."""
    # The positional branch appears at a supercritical pitchfork at small alpha; whether it vanishes (at a fold)
    # in range is only followed by continuation when its curve says it may (a point that is not valid above
    # the pitchfork): following it to alpha_max costs more than the rest of the transition.
    pos_end = branch_end(setting, "positional", alpha_min, alpha_max, precision, seed, follow=False)
    merge = None
    if pos_end.pitchfork.found:
        merge = merge_end(setting, "positional", max(pos_end.pitchfork.hi, alpha_min), alpha_max, precision, seed)
    return pos_end, merge


def _solve_retrying(setting: Setting, a: float, branch: str, precision: str, seed: int,
                    init: Overlaps | FixedPoint | None, nearest: FixedPoint | None) -> tuple[FixedPoint, int]:
    """solve() from init; where that fails, from the nearest solved point of the branch, then from the default
    start (a neighbour next to a branch end, where the order parameter is small, can lead the iteration onto the
    agnostic point).  (fixed point, solves)."""
    p = solve(setting, a, branch, precision, init=init, seed=seed)
    n = 1
    for retry in ([nearest] if nearest is not None else []) + [None]:
        if p.valid or retry is init:
            continue
        p = solve(setting, a, branch, precision, init=retry, seed=seed)
        n += 1
    return p, n


def _transition_study(setting: Setting, alpha_min: float, alpha_max: float, n_grid: int, precision: str,
                      xtol: float, seed: int, z: float, te_lin: float, t0: float, c0: float,
                      ex: Any) -> TransitionResult:
    """transition() with the branch ends from the L = 2 adapter; ``ex``: an executor for the positional branch's
    work, or None (serial)."""
    critical: dict[str, Critical] = {}
    grid = [float(a) for a in np.linspace(alpha_min, alpha_max, n_grid)]
    solves = [0]
    cache: dict[tuple[str, float], FixedPoint] = {}
    pos_future = ex.submit(_positional_ends, setting, alpha_min, alpha_max, precision, seed) if ex else None
    sem_end = branch_end(setting, "semantic", alpha_min, alpha_max, precision, seed)
    pos_end, merge = (pos_future.result() if pos_future is not None
                      else _positional_ends(setting, alpha_min, alpha_max, precision, seed))
    pos_followed = False
    if merge is not None:
        if merge.critical.found:
            pos_end = EndResult("positional", merge.critical, pos_end.pitchfork, per_scrambling=merge.per_scrambling,
                                evaluations=pos_end.evaluations + merge.evaluations, order_name=merge.order_name)
            pos_followed = True

    def exists(branch: str, a: float) -> bool:
        end = sem_end if branch == "semantic" else pos_end
        c = end.critical
        if branch == "semantic":
            lo = c.hi if c.found else (end.pitchfork.hi if end.pitchfork.found else alpha_min)
            return a > lo if (c.found or end.pitchfork.found) else True
        if c.found and c.name == "alpha_pos_vanishes" and a >= c.lo:  # (not the pitchfork where it appears)
            return False
        return not (end.pitchfork.found and a <= end.pitchfork.hi)

    def path_start(end: EndResult, a: float) -> Overlaps | None:
        """Overlaps on the branch's continuation path at alpha (where the path is a graph over alpha)."""
        P = end.path
        if len(P) < 2:
            return None
        k = end.unstable.shape[0] - 1 if len(end.unstable) else 0
        P = P[max(k, 0):]
        al = P[:, 3]
        if not (np.all(np.diff(al) > 0) and al[0] <= a <= al[-1]):
            return None
        q, V, t = (float(np.interp(a, al, P[:, i])) for i in range(3))
        return Overlaps(q, 0.0, V, t) if end.branch == "semantic" else Overlaps(q, t, V, 0.0)

    def start(branch: str, a: float) -> tuple[Overlaps | FixedPoint | None, FixedPoint | None]:
        """(start, nearest solved point) for a solve of branch at a."""
        # A solved neighbour within a grid step carries its Newton matrix (chord steps from the start, a few map
        # evaluations per scrambling); the continuation path's overlaps are a start without one.
        known = sorted((p for (b, _), p in cache.items() if b == branch and p.valid), key=lambda p: abs(p.alpha - a))
        end = sem_end if branch == "semantic" else pos_end
        step = (alpha_max - alpha_min) / (n_grid - 1)
        init: Overlaps | FixedPoint | None = known[0] if known and abs(known[0].alpha - a) <= 1.01 * step else None
        if init is None:
            init = path_start(end, a)
        if init is None and known:
            init = known[0]
        return init, known[0] if known else None

    def fp(branch: str, a: float) -> FixedPoint:
        key = (branch, round(a, 12))
        if key not in cache:
            p, n = _solve_retrying(setting, a, branch, precision, seed, *start(branch, a))
            solves[0] += n
            cache[key] = p
        return cache[key]

    def both(a: float) -> tuple[FixedPoint, FixedPoint] | None:
        if not (exists("semantic", a) and exists("positional", a)):
            return None
        key = ("positional", round(a, 12))
        if ex is not None and key not in cache:
            # the positional solve in the other process while this one solves the semantic branch
            fut = ex.submit(_solve_retrying, setting, a, "positional", precision, seed, *start("positional", a))
            ps = fp("semantic", a)
            cache[key], n = fut.result()
            solves[0] += n
        ps, pp = fp("semantic", a), fp("positional", a)
        return (ps, pp) if ps.valid and pp.valid else None

    def delta(a: float) -> tuple[float, float]:
        pair = both(a)
        if pair is None:
            return float("nan"), float("nan")
        ps, pp = pair
        return ps.train_loss - pp.train_loss, math.hypot(ps.errors.get("train_loss", 0.0),
                                                         pp.errors.get("train_loss", 0.0))

    def global_excess(a: float) -> tuple[float, float]:
        gm = global_minimum_curve({b: [fp(b, a)] for b in ("semantic", "positional") if exists(b, a)})
        if not gm:
            return float("nan"), float("nan")
        return gm[0].test_error - te_lin, gm[0].errors.get("test_error", 0.0)

    # Scan the grid downward from alpha_max (continuation: each solve starts from its neighbour above) until
    # both alpha_c and alpha_l are bracketed: alpha_l is by definition the last crossing seen from above, and
    # the branches are not solved where no critical value can lie.
    d_pts: list[tuple[float, float]] = []
    g_pts: list[tuple[float, float]] = []
    for a in reversed(grid):
        c_done = not exists("semantic", a) or any(d > 0 for _, d in d_pts)
        l_done = any(v >= 0 for _, v in g_pts)
        if c_done and l_done:
            break
        if not c_done and both(a) is not None:
            d_pts.append((a, delta(a)[0]))
        v = global_excess(a)[0]
        if math.isfinite(v):
            g_pts.append((a, v))
    solved_pos = [p for (b, _), p in cache.items() if b == "positional"]
    if solved_pos and not all(p.valid for p in solved_pos) and not pos_followed:
        pos_end = branch_end(setting, "positional", alpha_min, alpha_max, precision, seed)
        pos_followed = True
        for key in [key for key in cache if key[0] == "positional" and not exists("positional", key[1])]:
            del cache[key]
    if pos_followed or not pos_end.pitchfork.found:
        critical["alpha_pos_vanishes"] = pos_end.critical
    else:
        critical["alpha_pos_vanishes"] = Critical.missing(
            "alpha_pos_vanishes", "not in range",
            f"the positional branch appears at a pitchfork at alpha = {pos_end.pitchfork.value:.4g}, is a valid "
            f"fixed point at every alpha solved up to {alpha_max:g}, and the agnostic point is unstable in m there",
            "continuation along the alpha grid")
    if critical["alpha_pos_vanishes"].kind == "not in range" and merge is not None and not merge.critical.found \
            and merge.critical.kind == "failed":
        critical["alpha_pos_vanishes"] = merge.critical
    critical["alpha_sem_appears"] = sem_end.critical
    critical["semantic_pitchfork"] = sem_end.pitchfork
    critical["positional_pitchfork"] = pos_end.pitchfork
    d_pts = sorted((a, d) for a, d in d_pts if math.isfinite(d))
    sem_c = sem_end.critical
    probed = False
    if d_pts and not any(d > 0 for _, d in d_pts) and sem_c.found and sem_c.hi < d_pts[0][0]:
        # The scan reached the semantic end without seeing positional lower: look right above the end too (at a
        # supercritical pitchfork the semantic loss there is the agnostic one, usually above the positional).
        # Several probes, nearest the grid point first: right next to the end the semantic solve is critically
        # slow and may fail, which must not be read as "no crossing".
        top = d_pts[0][0]
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

    # --- alpha_c
    c_method = f"regula falsi (Illinois) on train_loss(semantic) - train_loss(positional) to {xtol:g}, " \
               f"+- {z:g} standard errors / slope"
    alpha_c: Critical | None = None
    for (a0, d0), (a1, d1) in zip(d_pts, d_pts[1:], strict=False):
        if d0 > 0 >= d1:
            alpha_c = _root("alpha_c", delta, a0, a1, xtol, z, c_method)
            break
    if alpha_c is None:
        sem_c = sem_end.critical
        if not d_pts:
            alpha_c = Critical.missing("alpha_c", "not in range", "positional and semantic never coexist on the grid")
        elif all(d <= 0 for _, d in d_pts) and sem_c.found and not (probed and d_pts[0][0] > 0.5 * (sem_c.hi + top)):
            alpha_c = Critical("alpha_c", sem_c.value, sem_c.lo, sem_c.hi, "at spinodal",
                               "semantic lower wherever both exist: the global minimum switches where the semantic "
                               "branch appears", "semantic below positional wherever both exist")
        elif all(d <= 0 for _, d in d_pts) and sem_c.found:
            alpha_c = Critical.missing("alpha_c", "failed", "semantic below positional at every valid pair, but no "
                                       "valid pair of fixed points right above the semantic end to confirm a switch "
                                       "there")
        elif all(d > 0 for _, d in d_pts):
            alpha_c = Critical.missing("alpha_c", "above range",
                                       f"positional lower wherever both exist in [{alpha_min:g}, {alpha_max:g}]")
        else:
            alpha_c = Critical.missing("alpha_c", "failed", "no bracketed sign change of the training-loss difference")
    critical["alpha_c"] = alpha_c

    # --- alpha_l
    l_method = f"regula falsi on test_error(global minimum) - test_error_linear to {xtol:g}, +- {z:g} " \
               f"standard errors / slope"
    finite = g_pts
    if not finite:
        alpha_l = Critical.missing("alpha_l", "failed", "no valid fixed point on the grid")
    elif finite[-1][1] >= 0:
        alpha_l = Critical.missing("alpha_l", "not in range",
                                   f"the global minimum does not beat the linear baseline at alpha = {finite[-1][0]:g}")
    else:
        bad = [i for i, (_, v) in enumerate(finite) if v >= 0]
        if not bad:
            alpha_l = Critical.missing("alpha_l", "not in range",
                                       f"attention beats the linear baseline on the whole range from {alpha_min:g}")
        else:
            k = bad[-1]
            lo_a, hi_a = finite[k][0], finite[k + 1][0]
            ac = alpha_c
            if (ac.found and lo_a <= ac.value <= hi_a and global_excess(ac.hi)[0] < 0 <= global_excess(ac.lo)[0]):
                # The global minimum's test error jumps across the baseline at alpha_c.
                alpha_l = Critical("alpha_l", ac.value, ac.lo, ac.hi, ac.kind,
                                   "the global minimum's test error jumps below the baseline at alpha_c", "= alpha_c")
            else:
                alpha_l = _root("alpha_l", global_excess, lo_a, hi_a, xtol, z, l_method)
    critical["alpha_l"] = alpha_l

    curves = {b: sorted((p for (bb, _), p in cache.items() if bb == b), key=lambda p: p.alpha)
              for b in ("positional", "semantic")}
    unstable = {b: path_as_overlaps(e) for b, e in (("semantic", sem_end), ("positional", pos_end))
                if len(e.unstable)}
    return TransitionResult(omega=setting.omega, critical=critical, test_error_linear=te_lin,
                            alpha_range=(alpha_min, alpha_max), curves=curves, unstable=unstable, solves=solves[0],
                            map_evaluations=sem_end.evaluations + pos_end.evaluations,
                            seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)


def _transition_general(setting: Setting, grid: list[float], precision: str, xtol: float, seed: int, z: float,
                        te_lin: float, t0: float, c0: float) -> TransitionResult:
    """transition() for any setting the engine solves: the branch ends from the solver's validity
    (branch_ends.validity_ends), then the same crossings as the study's path, on fixed points started from the
    nearest valid solved point of the branch."""
    from attnphase.theory.branch_ends import validity_ends

    alpha_min, alpha_max = grid[0], grid[-1]
    ve = validity_ends(setting, grid, precision, seed, xtol=max(2 * xtol, 0.02))
    cache: dict[tuple[str, float], FixedPoint] = {(p.branch, round(p.alpha, 12)): p for p in ve.points}
    solves = [len(ve.points)]

    def exists(branch: str, a: float) -> bool:
        lo, hi = ve.range[branch]
        return lo < a < hi

    def fp(branch: str, a: float) -> FixedPoint:
        key = (branch, round(a, 12))
        if key not in cache:
            known = sorted((p for (b, _), p in cache.items() if b == branch and p.valid),
                           key=lambda p: abs(p.alpha - a))
            p = solve(setting, a, branch, precision, init=known[0] if known else None, seed=seed)
            solves[0] += 1
            if not p.valid and known:
                p = solve(setting, a, branch, precision, seed=seed)
                solves[0] += 1
            cache[key] = p
        return cache[key]

    def delta(a: float) -> tuple[float, float]:
        if not (exists("semantic", a) and exists("positional", a)):
            return float("nan"), float("nan")
        ps, pp = fp("semantic", a), fp("positional", a)
        if not (ps.valid and pp.valid):
            return float("nan"), float("nan")
        return ps.train_loss - pp.train_loss, math.hypot(ps.errors.get("train_loss", 0.0),
                                                         pp.errors.get("train_loss", 0.0))

    def global_excess(a: float) -> tuple[float, float]:
        pts = {b: [fp(b, a)] for b in ("semantic", "positional") if exists(b, a)}
        gm = global_minimum_curve(pts)
        if not gm:
            gm = global_minimum_curve({"agnostic": [fp("agnostic", a)]})
        if not gm:
            return float("nan"), float("nan")
        return gm[0].test_error - te_lin, gm[0].errors.get("test_error", 0.0)

    critical = dict(ve.ends)
    for b in ("semantic", "positional"):
        critical[f"{b}_pitchfork"] = Critical.missing(f"{b}_pitchfork", "not in range", "the pitchfork condition is "
                                                      "located by the L = 2 adapter only (ends='adapter')")
    # --- alpha_c: the sign change of the loss difference on the grid where both branches are valid
    c_method = f"regula falsi (Illinois) on train_loss(semantic) - train_loss(positional) to {xtol:g}, " \
               f"+- {z:g} standard errors / slope"
    d_pts = [(a, d) for a in grid if math.isfinite(d := delta(a)[0])]
    sem_c = critical["alpha_sem_appears"]
    alpha_c: Critical | None = None
    for (a0, d0), (a1, d1) in zip(d_pts, d_pts[1:], strict=False):
        if d0 > 0 >= d1:
            alpha_c = _root("alpha_c", delta, a0, a1, xtol, z, c_method)
            break
    if alpha_c is None:
        if d_pts and all(d > 0 for _, d in d_pts):
            alpha_c = Critical.missing("alpha_c", "above range",
                                       f"positional lower wherever both exist in [{alpha_min:g}, {alpha_max:g}]")
        elif sem_c.found and (not d_pts or all(d <= 0 for _, d in d_pts)):
            why = ("no positional fixed point where the semantic branch appears" if not d_pts else
                   "semantic below positional wherever both exist")
            alpha_c = Critical("alpha_c", sem_c.value, sem_c.lo, sem_c.hi, "at spinodal",
                               f"{why}: the global minimum switches where the semantic branch appears", why)
        elif ve.range["semantic"][0] == -math.inf and all(d <= 0 for _, d in d_pts):
            alpha_c = Critical.missing(
                "alpha_c", "not in range", f"the semantic branch is valid down to alpha_min = {alpha_min:g} and lower "
                f"than the positional one wherever both exist{'' if d_pts else ' (no positional fixed point found)'}: "
                f"alpha_c < {alpha_min:g}")
        else:
            alpha_c = Critical.missing("alpha_c", "failed", "no bracketed sign change of the training-loss difference")
    critical["alpha_c"] = alpha_c
    # --- alpha_l: the last crossing of the global minimum's test error with the baseline, seen from above
    l_method = f"regula falsi on test_error(global minimum) - test_error_linear to {xtol:g}, +- {z:g} " \
               f"standard errors / slope"
    g_pts = [(a, v) for a in grid if math.isfinite(v := global_excess(a)[0])]
    if not g_pts:
        alpha_l = Critical.missing("alpha_l", "failed", "no valid fixed point on the grid")
    elif g_pts[-1][1] >= 0:
        alpha_l = Critical.missing("alpha_l", "not in range",
                                   f"the global minimum does not beat the linear baseline at alpha = {g_pts[-1][0]:g}")
    elif not any(v >= 0 for _, v in g_pts):
        alpha_l = Critical.missing("alpha_l", "not in range",
                                   f"attention beats the linear baseline on the whole range from {alpha_min:g}")
    else:
        k = max(i for i, (_, v) in enumerate(g_pts) if v >= 0)
        lo_a, hi_a = g_pts[k][0], g_pts[k + 1][0]
        ac = alpha_c
        if ac.found and lo_a <= ac.value <= hi_a and global_excess(ac.hi)[0] < 0 <= global_excess(ac.lo)[0]:
            alpha_l = Critical("alpha_l", ac.value, ac.lo, ac.hi, ac.kind,
                               "the global minimum's test error jumps below the baseline at alpha_c", "= alpha_c")
        else:
            alpha_l = _root("alpha_l", global_excess, lo_a, hi_a, xtol, z, l_method)
    critical["alpha_l"] = alpha_l
    curves = {b: sorted((p for (bb, _), p in cache.items() if bb == b), key=lambda p: p.alpha)
              for b in ("positional", "semantic")}
    return TransitionResult(omega=setting.omega, critical=critical, test_error_linear=te_lin,
                            alpha_range=(alpha_min, alpha_max), curves=curves, solves=solves[0],
                            seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)


def positional_slope(setting: Setting, alpha: float, precision: str = "fast", seed: int = 0) -> float:
    """d m_new / d m at the agnostic fixed point (> 1: the agnostic point is unstable towards the positional
    branch).  NaN where the agnostic point cannot be solved."""
    from attnphase.theory import _branch_map as bm
    from attnphase.theory.branch_ends import _agnostic_start

    z = bm.symmetric_points(get_precision(precision).log2_points, 0, seed, "positional")
    try:
        y, _ = _agnostic_start(setting, alpha, "positional", z)
        return float(bm.symmetric_map(setting, alpha, "positional", z, np.abs(y)).slope)
    except (ValueError, ArithmeticError):
        return float("nan")


def global_minimum_curve_of(result: TransitionResult) -> list[FixedPoint]:
    """The global minimum along the transition's own curves."""
    return global_minimum_curve(result.curves)


def _transition_task(args: tuple) -> TransitionResult:
    setting, kwargs = args
    return transition(setting, **kwargs)


def phase_diagram(setting: Setting, omegas: Sequence[float], alpha_max: float = 2.0, precision: str = "fast",
                  progress: bool = True, workers: int = 1, **kwargs: Any) -> list[TransitionResult]:
    """transition() for each omega, in parallel processes (attnphase.parallel) with workers > 1.  All options
    are validated before any work starts."""
    from attnphase.parallel import check_workers, map_tasks

    check_workers(workers)
    settings = [setting.replace(omega=float(w)) for w in omegas]
    if not settings:
        raise ValueError("phase_diagram: no omegas given")
    kw = dict(alpha_max=alpha_max, precision=precision, **kwargs)
    check_transition_args(kw.get("alpha_min", 0.05), alpha_max, kw.get("n_grid", 12), precision,
                          kw.get("xtol", 0.01), kw.get("seed", 0))
    if len(settings) == 1:
        # One omega: in this process, whose compiled kernel already uses every core (measured on 2 cores:
        # 8.1 s, against 12.2 s with the positional branch in a second process, workers=2 inside).
        return [transition(settings[0], **kw)]
    return map_tasks(_transition_task, [(s, kw) for s in settings], workers=workers, progress=progress,
                     desc="phase diagram", unit="omega")


def positional_limit(setting: Setting, omega_lo: float, omega_hi: float, alpha_max: float = 2.0,
                     precision: str = "fast", tol: float = 0.005, **kwargs: Any) -> Critical:
    """The omega above which the positional minimum is global for every alpha <= alpha_max: the root in omega
    of alpha_c(omega) = alpha_max, between omega_lo (alpha_c found below alpha_max) and omega_hi (alpha_c above
    range).  Regula falsi on alpha_c(omega) - alpha_max where alpha_c is found, bisection where it is not; the
    interval is the final omega bracket (widened by alpha_c's own interval through the local slope)."""
    lo, hi = check_number("omega_lo", omega_lo), check_number("omega_hi", omega_hi)
    if not 0 <= lo < hi <= 1:
        raise ValueError(f"need 0 <= omega_lo < omega_hi <= 1, got {lo:g}, {hi:g}")
    tol = check_number("tol", tol)
    if tol <= 0:
        raise ValueError(f"tol must be > 0, got {tol:g}")

    def alpha_c(w: float) -> Critical:
        return transition(setting.replace(omega=w), alpha_max=alpha_max, precision=precision, **kwargs).critical[
            "alpha_c"]

    c_lo, c_hi = alpha_c(lo), alpha_c(hi)
    if not (c_lo.found and c_lo.value < alpha_max):
        return Critical.missing("omega_positional", "not in range", f"alpha_c(omega = {lo:g}) not below {alpha_max:g}")
    if c_hi.kind != "above range":
        return Critical.missing("omega_positional", "not in range", f"alpha_c(omega = {hi:g}) is not above range")
    f_lo = c_lo.value - alpha_max
    half_lo = (c_lo.hi - c_lo.lo) / 2
    for _ in range(12):
        if hi - lo < tol:
            break
        # alpha_c grows faster than linearly toward the limit: never step closer than a quarter to either end.
        w = lo + (hi - lo) * 0.5
        if f_lo < 0 and c_hi.found:
            w = lo + (hi - lo) * min(max(-f_lo / (c_hi.value - alpha_max - f_lo), 0.25), 0.75)
        c = alpha_c(w)
        if c.found and c.value < alpha_max:
            lo, c_lo, f_lo, half_lo = w, c, c.value - alpha_max, (c.hi - c.lo) / 2
        else:
            hi, c_hi = w, c
    mid = 0.5 * (lo + hi)
    return Critical("omega_positional", mid, lo, hi, "crossing",
                    f"bisection on omega of alpha_c(omega) = {alpha_max:g} to {tol:g} (last alpha_c below: "
                    f"{c_lo.value:.4g} +- {half_lo:.2g})")
