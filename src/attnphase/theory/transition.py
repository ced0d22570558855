"""Critical sample complexities (MODEL.md section 7) by continuation in alpha and bracketing root finding.

- alpha_c: train_loss(semantic) = train_loss(positional).
- alpha_l: smallest alpha above which test_error(global minimum) stays below test_error_linear.
- alpha_sem_appears / alpha_pos_vanishes: spinodals of the semantic and positional branches.
A value that is not bracketed inside the searched range is None with a reason; every value comes with
its bracket.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import brentq

from attnphase.setting import Setting, check_alpha
from attnphase.theory.baseline import linear_baseline
from attnphase.theory.results import FixedPoint
from attnphase.theory.state_evolution import solve, solve_curve


@dataclass
class TransitionResult:
    omega: float
    alpha_c: float | None
    alpha_c_bracket: tuple[float, float] | None
    alpha_l: float | None
    alpha_l_bracket: tuple[float, float] | None
    test_error_linear: float
    alpha_sem_appears: float | None
    alpha_sem_appears_bracket: tuple[float, float] | None
    alpha_pos_vanishes: float | None
    alpha_pos_vanishes_bracket: tuple[float, float] | None
    alpha_range: tuple[float, float]
    reasons: dict[str, str] = field(default_factory=dict)
    curves: dict[str, list[FixedPoint]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        def lo(b):
            return None if b is None else b[0]

        def hi(b):
            return None if b is None else b[1]

        return {
            "omega": self.omega,
            "alpha_c": self.alpha_c, "alpha_c_lo": lo(self.alpha_c_bracket), "alpha_c_hi": hi(self.alpha_c_bracket),
            "alpha_l": self.alpha_l, "alpha_l_lo": lo(self.alpha_l_bracket), "alpha_l_hi": hi(self.alpha_l_bracket),
            "test_error_linear": self.test_error_linear,
            "alpha_sem_appears": self.alpha_sem_appears,
            "alpha_sem_appears_lo": lo(self.alpha_sem_appears_bracket),
            "alpha_sem_appears_hi": hi(self.alpha_sem_appears_bracket),
            "alpha_pos_vanishes": self.alpha_pos_vanishes,
            "alpha_pos_vanishes_lo": lo(self.alpha_pos_vanishes_bracket),
            "alpha_pos_vanishes_hi": hi(self.alpha_pos_vanishes_bracket),
            "note": "; ".join(f"{k}: {v}" for k, v in self.reasons.items()),
        }


def find_crossing(f: Callable[[float], float], lo: float, hi: float, xtol: float) -> tuple[float, tuple[float, float]]:
    """Root of f in [lo, hi] where f changes sign (scipy's brentq); returns the root and a bracket of
    half-width xtol around it (brentq's guarantee).  If f is NaN inside, falls back to bisection and
    returns the narrowest bracket it could establish (possibly wider than 2 xtol)."""
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
        # f is NaN somewhere inside (a branch failed to converge there, e.g. critically slow near a
        # spinodal): bisect on the sign and stop at the last bracket whose ends are both finite.
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


def _bisect_existence(exists: Callable[[float], bool], a_no: float, a_yes: float, xtol: float) -> tuple[float, float]:
    """Shrink [a_no, a_yes] (existence changes between them) to width xtol."""
    while abs(a_yes - a_no) > xtol:
        mid = 0.5 * (a_no + a_yes)
        if exists(mid):
            a_yes = mid
        else:
            a_no = mid
    return a_no, a_yes


def _status_summary(curve: list[FixedPoint]) -> str:
    counts: dict[str, int] = {}
    for p in curve:
        key = "ok" if p.valid else ("collapsed" if "collapsed" in p.status else "not converged")
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{v} {k}" for k, v in counts.items())


def _nearest_valid(curve: list[FixedPoint], alpha: float) -> FixedPoint | None:
    valid = [p for p in curve if p.valid]
    return min(valid, key=lambda p: abs(p.alpha - alpha)) if valid else None


def transition(setting: Setting, alpha_min: float = 0.05, alpha_max: float = 2.0, n_grid: int = 12,
               precision: str = "fast", xtol: float = 0.01, seed: int = 0) -> TransitionResult:
    """alpha_c, alpha_l and the spinodals for one setting, searched in [alpha_min, alpha_max].

    Both branches are solved on an n_grid alpha grid by continuation; crossings are refined with brentq
    to +-xtol, spinodals by bisection to a bracket of width 2 xtol.  A spinodal is where continuation
    from the neighbouring existing point stops finding a distinct fixed point (collapse, or no convergence
    within the iteration budget: convergence slows down critically there).
    """
    alpha_min, alpha_max = check_alpha(alpha_min), check_alpha(alpha_max)
    if alpha_max <= alpha_min:
        raise ValueError(f"alpha_max must exceed alpha_min, got {alpha_min:g}, {alpha_max:g}")
    if n_grid < 3:
        raise ValueError(f"n_grid must be >= 3, got {n_grid}")
    grid = np.linspace(alpha_min, alpha_max, n_grid)
    te_lin = linear_baseline(setting).test_error_linear
    reasons: dict[str, str] = {}
    cache: dict[tuple[str, float], FixedPoint] = {}

    def fp(branch: str, a: float, init: FixedPoint | None) -> FixedPoint:
        key = (branch, round(a, 12))
        if key not in cache:
            cache[key] = solve(setting, a, branch, precision, init=init, seed=seed)
        return cache[key]

    # Positional: continuation upward from small alpha; semantic: downward from large alpha, where it
    # exists, so that each branch is followed to its own spinodal (solve_curve does both).
    pos = solve_curve(setting, grid, "positional", precision, seed=seed)
    sem = solve_curve(setting, grid, "semantic", precision, seed=seed)
    for p in pos + sem:
        cache[(p.branch, round(p.alpha, 12))] = p

    def exists(branch: str, curve: list[FixedPoint]) -> Callable[[float], bool]:
        # Near a spinodal only continuation from the nearest existing point can find the branch; a
        # restart from the study's starting point would just flow elsewhere (slowly: critical slowing).
        return lambda a: fp(branch, a, _nearest_valid(curve, a)).valid

    # Spinodals.
    sem_ok = np.array([p.valid for p in sem])
    pos_ok = np.array([p.valid for p in pos])
    a_sem = b_sem = None
    if sem_ok.all():
        reasons["alpha_sem_appears"] = f"semantic fixed point exists on the whole range [{alpha_min:g}, {alpha_max:g}]"
    elif not sem_ok.any():
        reasons["alpha_sem_appears"] = (f"no valid semantic fixed point on the grid in [{alpha_min:g}, {alpha_max:g}] "
                                        f"({_status_summary(sem)})")
    else:
        i = int(np.argmax(sem_ok))  # first valid
        if i == 0:
            reasons["alpha_sem_appears"] = "semantic branch exists at alpha_min"
        else:
            b_sem = _bisect_existence(exists("semantic", sem), grid[i - 1], grid[i], 2 * xtol)
            b_sem = (float(b_sem[0]), float(b_sem[1]))
            a_sem = 0.5 * (b_sem[0] + b_sem[1])
    a_pos = b_pos = None
    if pos_ok.all():
        reasons["alpha_pos_vanishes"] = f"positional fixed point exists on the whole range [{alpha_min:g}, {alpha_max:g}]"
    elif not pos_ok.any():
        reasons["alpha_pos_vanishes"] = (f"no valid positional fixed point on the grid in [{alpha_min:g}, {alpha_max:g}] "
                                         f"({_status_summary(pos)})")
    else:
        j = len(pos_ok) - 1 - int(np.argmax(pos_ok[::-1]))  # last valid
        if j == len(pos_ok) - 1:
            reasons["alpha_pos_vanishes"] = "positional branch exists at alpha_max"
        else:
            b = _bisect_existence(exists("positional", pos), grid[j + 1], grid[j], 2 * xtol)
            b_pos = (float(min(b)), float(max(b)))
            a_pos = 0.5 * (b_pos[0] + b_pos[1])

    def near(branch: str, a: float) -> FixedPoint:
        """Solve at a by continuation from the nearest already-solved valid points of the branch."""
        known = sorted((p for (b, _), p in cache.items() if b == branch and p.valid), key=lambda p: abs(p.alpha - a))
        for init in known[:2] or [None]:
            p = fp(branch, a, init)
            if p.valid:
                return p
            cache.pop((branch, round(a, 12)), None)
        return fp(branch, a, None)

    # alpha_c: sign change of train_loss(semantic) - train_loss(positional) where both exist.
    def delta(a: float) -> float:
        ps = near("semantic", a)
        pp = near("positional", a)
        if not (ps.valid and pp.valid):
            return float("nan")
        return ps.train_loss - pp.train_loss

    # Candidate alphas where both branches exist: the grid plus the existing ends of the spinodal
    # brackets (the crossing often lies between the semantic spinodal and the next grid point).
    cand = {float(grid[k]) for k in range(n_grid) if sem[k].valid and pos[k].valid}
    for br in (b_sem and b_sem[1], b_pos and b_pos[0]):
        if br:
            cand.add(float(br))
    d_pts = [(a, delta(a)) for a in sorted(cand)]
    d_pts = [(a, d) for a, d in d_pts if np.isfinite(d)]
    alpha_c = c_br = None
    for (a0, d0), (a1, d1) in zip(d_pts, d_pts[1:], strict=False):
        if d0 > 0 >= d1:
            alpha_c, c_br = find_crossing(delta, a0, a1, xtol)
            break
    if alpha_c is None:
        if d_pts and all(d <= 0 for _, d in d_pts) and not sem_ok.all():
            # Semantic is lower already where it first exists: the global minimum switches where the
            # semantic branch appears.
            reasons["alpha_c"] = ("semantic loss below positional wherever both exist; the global minimum "
                                  "switches at the semantic spinodal alpha_sem_appears")
        elif d_pts and all(d > 0 for _, d in d_pts):
            reasons["alpha_c"] = f"positional lower wherever both exist in [{alpha_min:g}, {alpha_max:g}]"
        elif not d_pts:
            reasons["alpha_c"] = "positional and semantic never coexist on the grid"
        else:
            reasons["alpha_c"] = "no bracketed sign change of the training-loss difference"

    # alpha_l: test error of the global minimum against the linear baseline.
    def global_te(a: float) -> float:
        ps = near("semantic", a)
        pp = near("positional", a)
        cands = [p for p in (ps, pp) if p.valid]
        if not cands:
            return float("nan")
        return min(cands, key=lambda p: p.train_loss).test_error - te_lin

    g = np.array([global_te(a) for a in grid])
    alpha_l = l_br = None
    if np.all(np.isnan(g)):
        reasons["alpha_l"] = "no valid fixed point on the grid"
    elif g[-1] >= 0 or np.isnan(g[-1]):
        reasons["alpha_l"] = f"global minimum does not beat the linear baseline at alpha_max = {alpha_max:g}"
    else:
        # Last grid point at which attention is not better; alpha_l lies after it.
        bad = np.nonzero(~(g < 0))[0]
        if bad.size == 0:
            reasons["alpha_l"] = f"attention beats the linear baseline on the whole range from {alpha_min:g}"
        else:
            k = int(bad[-1])
            lo_a, hi_a = grid[k], grid[k + 1]
            # The global minimum jumps at alpha_c: if the jump itself crosses the baseline, alpha_l = alpha_c.
            if alpha_c is not None and lo_a <= alpha_c <= hi_a and global_te(c_br[1]) < 0 <= global_te(c_br[0]):
                alpha_l, l_br = alpha_c, c_br
            else:
                try:
                    alpha_l, l_br = find_crossing(global_te, lo_a, hi_a, xtol)
                except ValueError as exc:
                    reasons["alpha_l"] = f"could not bracket: {exc}"
    return TransitionResult(
        omega=setting.omega, alpha_c=alpha_c, alpha_c_bracket=c_br, alpha_l=alpha_l, alpha_l_bracket=l_br,
        test_error_linear=te_lin, alpha_sem_appears=a_sem, alpha_sem_appears_bracket=b_sem,
        alpha_pos_vanishes=a_pos, alpha_pos_vanishes_bracket=b_pos, alpha_range=(alpha_min, alpha_max),
        reasons=reasons, curves={"positional": pos, "semantic": sem},
    )


def _transition_task(args: tuple) -> TransitionResult:
    setting, kwargs = args
    return transition(setting, **kwargs)


def _single_threaded_worker() -> None:
    # One process per core: the compiled kernel must not also start a thread per core in each process.
    import numba

    numba.set_num_threads(1)


def phase_diagram(setting: Setting, omegas: Sequence[float], alpha_max: float = 2.0, precision: str = "fast",
                  progress: bool = True, workers: int = 1, **kwargs: Any) -> list[TransitionResult]:
    """transition() for each omega (in parallel processes with workers > 1)."""
    from tqdm.auto import tqdm

    settings = [setting.replace(omega=float(w)) for w in omegas]
    kw = dict(alpha_max=alpha_max, precision=precision, **kwargs)
    tasks = [(s, kw) for s in settings]
    if workers <= 1:
        return [_transition_task(t) for t in tqdm(tasks, desc="phase diagram", unit="omega", disable=not progress)]
    # spawn, not fork: numba's OpenMP thread pool does not survive fork().
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_single_threaded_worker) as pool:
        return list(tqdm(pool.map(_transition_task, tasks), total=len(tasks), desc="phase diagram", unit="omega",
                         disable=not progress))
