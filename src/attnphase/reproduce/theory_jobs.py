"""The theory a reproduction needs, as jobs that run once: each result is written to the results store
(its theory table) as soon as it is computed, so an interrupted or repeated run recomputes nothing it has,
and a changed plan never reuses a stale number (the key holds everything a result depends on)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from attnphase.experiments.store import ResultStore, TheoryKey
from attnphase.progress import progress_bar
from attnphase.reproduce.plan import Plan
from attnphase.reproduce.pool import run_in_pool
from attnphase.reproduce.records import TransitionRecord, fixed_point_from_json, fixed_point_to_json
from attnphase.setting import Setting
from attnphase.theory.state_evolution.results import FixedPoint

SEED = 0  # the Sobol scramblings' seed of every theory result of a reproduction
# Part of a stored transition's key: raised when transition() computes its records differently, so that a store
# filled before is not read back (2: crossings narrowed to xtol with the bracket in the interval, issue 31).
TRANSITION_REVISION = 2


class TheoryCache:
    """Theory results of one store, read and written by key, with hit / miss counts for the report."""

    def __init__(self, store: ResultStore) -> None:
        self.store = store
        self.hits = 0
        self.misses = 0

    def _get(self, key: TheoryKey) -> Any | None:
        return self.store.get_theory(key)

    def _put(self, key: TheoryKey, value: Any) -> None:
        self.store.put_theory(key, value)

    # -- fixed points: one row per (setting, alpha, branch, precision, seed [, continuation path]) ---------
    @staticmethod
    def _fp_key(setting: Setting, alpha: float, branch: str, precision: str,
                path: Sequence[float] | None = None) -> TheoryKey:
        params = {} if path is None else {"continuation": [float(a) for a in path]}
        return TheoryKey("fixed_point", setting.to_dict(), alpha=alpha, branch=branch, precision=precision,
                         seed=SEED, params=params)

    def get_curve(self, setting: Setting, alphas: Sequence[float], branch: str, precision: str
                  ) -> list[FixedPoint] | None:
        """A branch followed along `alphas` (each point's key holds the path: continuation matters)."""
        out = []
        for a in alphas:
            v = self._get(self._fp_key(setting, a, branch, precision, alphas))
            if v is None:
                return None
            out.append(fixed_point_from_json(v))
        return out

    def put_curve(self, setting: Setting, alphas: Sequence[float], branch: str, precision: str,
                  points: Sequence[FixedPoint]) -> None:
        for a, p in zip(alphas, points, strict=True):
            self._put(self._fp_key(setting, a, branch, precision, alphas), fixed_point_to_json(p))

    def get_fixed_point(self, setting: Setting, alpha: float, branch: str, precision: str) -> FixedPoint | None:
        v = self._get(self._fp_key(setting, alpha, branch, precision))
        return None if v is None else fixed_point_from_json(v)

    def put_fixed_point(self, setting: Setting, alpha: float, branch: str, precision: str,
                        fp: FixedPoint) -> None:
        self._put(self._fp_key(setting, alpha, branch, precision), fixed_point_to_json(fp))

    # -- transitions and the linear baseline -----------------------------------------------------------
    @staticmethod
    def _tr_key(setting: Setting, precision: str, **grid: Any) -> TheoryKey:
        return TheoryKey("transition", setting.to_dict(), precision=precision, seed=SEED,
                         params={**grid, "revision": TRANSITION_REVISION})

    def get_transition(self, setting: Setting, precision: str, **grid: Any) -> TransitionRecord | None:
        v = self._get(self._tr_key(setting, precision, **grid))
        return None if v is None else TransitionRecord.from_json(v)

    def put_transition(self, setting: Setting, precision: str, record: TransitionRecord, **grid: Any) -> None:
        self._put(self._tr_key(setting, precision, **grid), record.to_json())

    def linear_baseline(self, setting: Setting) -> float:
        key = TheoryKey("linear_baseline", setting.to_dict(), precision="exact")
        v = self._get(key)
        if v is not None:
            self.hits += 1
            return float(v)
        from attnphase.theory import linear_baseline

        self.misses += 1
        value = float(linear_baseline(setting).test_error_linear)
        self._put(key, value)
        return value


def _transition_job(setting: Setting, alpha_min: float, alpha_max: float, n_grid: int,
                    precision: str, xtol: float) -> TransitionRecord:
    from attnphase.theory import transition

    tr = transition(setting, alpha_min=alpha_min, alpha_max=alpha_max, n_grid=n_grid, precision=precision,
                    xtol=xtol)
    return TransitionRecord.from_result(tr)


def _curve_job(setting: Setting, alphas: Sequence[float], branch: str, precision: str) -> list[FixedPoint]:
    from attnphase.theory import solve_curve

    return list(solve_curve(setting, list(alphas), branch, precision=precision))


def _solve_job(setting: Setting, alpha: float, branch: str, precision: str) -> FixedPoint:
    from attnphase.theory import solve

    return solve(setting, alpha, branch=branch, precision=precision)


@dataclass
class Job:
    """One theory computation: `func(*args)`, found in / saved to the cache by `load` / `save`."""

    name: str
    label: str
    func: Callable[..., Any]
    args: tuple[Any, ...]
    load: Callable[[TheoryCache], Any | None]
    save: Callable[[TheoryCache, Any], None]
    cost: float = 1.0  # rough, in fixed points: only orders the parallel queue


def run_jobs(jobs: Sequence[Job], cache: TheoryCache, workers: int, progress: bool) -> dict[str, Any]:
    """Run the jobs not in the cache (in parallel processes when workers > 1), storing each as it finishes."""
    results: dict[str, Any] = {}
    todo = []
    for job in jobs:
        hit = job.load(cache)
        if hit is not None:
            cache.hits += 1
            results[job.name] = hit
        else:
            todo.append(job)
    bar = progress_bar(label="theory (curves, transitions)", total=len(jobs), initial=len(jobs) - len(todo),
                       unit="job", enabled=progress)

    def finished(job: Job, value: Any) -> None:
        job.save(cache, value)
        cache.misses += 1
        results[job.name] = value
        bar.set_postfix_str(job.label, refresh=False)
        bar.update(1)

    try:
        if workers <= 1 or len(todo) <= 1:
            for job in todo:
                bar.set_postfix_str(job.label, refresh=True)
                finished(job, job.func(*job.args))
        else:
            # Longest jobs first, so that no worker is left with a transition while the others idle.
            todo.sort(key=lambda j: j.cost, reverse=True)
            for i, value in run_in_pool([(j.func, j.args) for j in todo], workers):
                finished(todo[i], value)
    finally:
        bar.close()
    return results


@dataclass
class TheoryResults:
    curves: dict[str, list[FixedPoint]]
    transition: TransitionRecord
    diagram: list[TransitionRecord]
    finite_size: dict[str, FixedPoint]
    test_error_linear: float


def compute_theory(plan: Plan, cache: TheoryCache, workers: int = 1, progress: bool = True) -> TheoryResults:
    """All theory a reproduction needs, from the store where possible."""
    s = plan.setting
    jobs: list[Job] = []
    for branch in ("positional", "semantic"):
        args = (s, plan.curve_alphas, branch, plan.precision)
        jobs.append(Job(f"curve {branch}", f"curve {branch}", _curve_job, args,
                        lambda c, a=args: c.get_curve(*a), lambda c, v, a=args: c.put_curve(*a, v),
                        cost=len(plan.curve_alphas)))
    omegas = list(plan.pd_omegas)
    if not any(math.isclose(w, s.omega, abs_tol=1e-12) for w in omegas):
        omegas.append(s.omega)  # the transition at the curves' omega, at the diagram's precision
    grid = {"alpha_min": plan.pd_alpha_min, "alpha_max": plan.pd_alpha_max, "n_grid": plan.pd_n_grid,
            "xtol": plan.pd_xtol}
    for w in omegas:
        sw = s.replace(omega=w)
        jobs.append(Job(f"transition {w!r}", f"transition omega={w:g}", _transition_job,
                        (sw, plan.pd_alpha_min, plan.pd_alpha_max, plan.pd_n_grid, plan.pd_precision, plan.pd_xtol),
                        lambda c, sw=sw: c.get_transition(sw, plan.pd_precision, **grid),
                        lambda c, v, sw=sw: c.put_transition(sw, plan.pd_precision, v, **grid),
                        cost=4.0 * plan.pd_n_grid))
    for branch in ("positional", "semantic"):
        args = (s, plan.fs_alpha, branch, plan.precision)
        jobs.append(Job(f"solve {branch}", f"solve {branch} alpha={plan.fs_alpha:g}", _solve_job, args,
                        lambda c, a=args: c.get_fixed_point(*a), lambda c, v, a=args: c.put_fixed_point(*a, v)))
    res = run_jobs(jobs, cache, workers, progress)
    lin = cache.linear_baseline(s)
    this = next(w for w in omegas if math.isclose(w, s.omega, abs_tol=1e-12))
    return TheoryResults(
        curves={b: res[f"curve {b}"] for b in ("positional", "semantic")},
        transition=res[f"transition {this!r}"],
        diagram=[res[f"transition {w!r}"] for w in sorted(plan.pd_omegas)],
        finite_size={b: res[f"solve {b}"] for b in ("positional", "semantic")},
        test_error_linear=lin,
    )
