"""One-command reproduction: theory, a set of finite-d simulations, figures (a)-(e) and a markdown report.

``reproduce(out_dir)`` (``attnphase reproduce --out DIR``) computes

* the omega = 0.3 curves of both branches (``solve_curve``) and the transition at omega = 0.3,
* the phase diagram (``transition`` at each omega),
* simulations at omega = 0.3 and a finite-size set at alpha = 1.5 (``run_sweep`` into ``DIR/results.sqlite``),

then writes the figures and ``DIR/report.md``.  It resumes: the sweep store skips finished points and every
theory result is cached in ``DIR/theory_cache.json`` as soon as it is computed, under a key that contains
everything it depends on (setting, precision, grid), so an interrupted or repeated run recomputes nothing it
already has and a changed plan never reuses a stale number.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import datetime as _dt
import json
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attnphase import plots
from attnphase.setting import Setting
from attnphase.theory.results import FixedPoint, HatOverlaps, Overlaps

__all__ = ["Plan", "plan_for", "reproduce", "rows_for_setting", "TransitionRecord", "TheoryCache"]

CACHE_NAME = "theory_cache.json"
RUNS_NAME = "runs.json"
STORE_NAME = "results.sqlite"
REPORT_NAME = "report.md"
FIGURES = {
    "test_error": "fig_a_test_error",
    "loss_difference": "fig_b_loss_difference",
    "overlaps": "fig_c_overlaps",
    "phase_diagram": "fig_d_phase_diagram",
    "finite_size": "fig_e_finite_size",
}


@dataclass(frozen=True)
class Plan:
    """Everything a reproduction computes.  ``plan_for(quick)`` gives the two standard plans."""

    name: str
    setting: Setting
    precision: str
    curve_alphas: tuple[float, ...]
    pd_omegas: tuple[float, ...]
    pd_alpha_min: float
    pd_alpha_max: float
    pd_n_grid: int
    pd_precision: str
    pd_xtol: float
    sim_d: int
    sim_alphas: tuple[float, ...]
    sim_seeds: tuple[int, ...]
    optimizer: str
    n_test: int
    fs_ds: tuple[int, ...]
    fs_alpha: float
    inits: tuple[str, ...] = ("positional", "semantic")
    sim_options: Mapping[str, Any] = field(default_factory=dict)


def _grid(a: float, b: float, n: int) -> tuple[float, ...]:
    # 12 significant digits: the same canonical form as the store's keys, and stable cache keys
    return tuple(float(f"{v:.12g}") for v in np.linspace(a, b, n))


def plan_for(quick: bool, setting: Setting | None = None) -> Plan:
    """The quick plan (a few minutes on 2 cores) or the study's full plan (MODEL.md section 5)."""
    setting = Setting(omega=0.3) if setting is None else setting
    if quick:
        return Plan(
            name="quick", setting=setting, precision="fast",
            curve_alphas=_grid(0.1, 2.0, 10),
            # a coarse grid and a 0.05 tolerance on the crossings: each transition costs ~30 fixed points
            pd_omegas=(0.05, 0.1, 0.2, 0.3, 0.4, 0.45), pd_alpha_min=0.1, pd_alpha_max=2.0, pd_n_grid=6,
            pd_precision="fast", pd_xtol=0.05,
            sim_d=100, sim_alphas=(0.5, 1.0, 1.5, 2.0), sim_seeds=(0, 1), optimizer="lbfgs", n_test=2000,
            fs_ds=(50, 100, 200), fs_alpha=1.5,
        )
    return Plan(
        name="full", setting=setting, precision="default",
        curve_alphas=_grid(0.01, 2.0, 25),
        pd_omegas=_grid(0.02, 0.5, 13), pd_alpha_min=0.05, pd_alpha_max=2.0, pd_n_grid=20,
        pd_precision="default", pd_xtol=0.01,
        sim_d=1000, sim_alphas=_grid(0.01, 2.0, 25), sim_seeds=(0, 1, 2, 3, 4), optimizer="gd", n_test=50000,
        fs_ds=(100, 200, 500, 1000), fs_alpha=1.5,
    )


# ------------------------------------------------------------------------------------------ serialisation


def fixed_point_to_json(fp: FixedPoint) -> dict[str, Any]:
    return dataclasses.asdict(fp)


def fixed_point_from_json(d: Mapping[str, Any]) -> FixedPoint:
    names = {f.name for f in dataclasses.fields(FixedPoint)}
    kw = {k: v for k, v in d.items() if k in names}
    kw["overlaps"] = Overlaps(**kw["overlaps"])
    kw["hats"] = HatOverlaps(**kw["hats"])
    return FixedPoint(**kw)


def _opt_float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _opt_pair(v: Any) -> tuple[float, float] | None:
    if v is None:
        return None
    try:
        a, b = (float(x) for x in v)
    except (TypeError, ValueError):
        return None
    return (a, b) if math.isfinite(a) and math.isfinite(b) else None


@dataclass
class TransitionRecord:
    """A JSON-serialisable copy of a ``TransitionResult`` with the same attributes, so that cached and
    freshly computed transitions are interchangeable for the figures and the report."""

    omega: float
    alpha_c: float | None
    alpha_c_bracket: tuple[float, float] | None
    alpha_l: float | None
    alpha_l_bracket: tuple[float, float] | None
    test_error_linear: float | None
    alpha_sem_appears: float | None
    alpha_pos_vanishes: float | None
    reasons: dict[str, str]
    curves: dict[str, list[FixedPoint]]
    alpha_sem_appears_bracket: tuple[float, float] | None = None
    alpha_pos_vanishes_bracket: tuple[float, float] | None = None

    @classmethod
    def from_result(cls, tr: Any) -> TransitionRecord:
        return cls(
            omega=float(tr.omega),
            alpha_c=_opt_float(tr.alpha_c),
            alpha_c_bracket=_opt_pair(getattr(tr, "alpha_c_bracket", None)),
            alpha_l=_opt_float(tr.alpha_l),
            alpha_l_bracket=_opt_pair(getattr(tr, "alpha_l_bracket", None)),
            test_error_linear=_opt_float(getattr(tr, "test_error_linear", None)),
            alpha_sem_appears=_opt_float(getattr(tr, "alpha_sem_appears", None)),
            alpha_pos_vanishes=_opt_float(getattr(tr, "alpha_pos_vanishes", None)),
            reasons={str(k): str(v) for k, v in (getattr(tr, "reasons", None) or {}).items()},
            curves={str(b): list(pts) for b, pts in (getattr(tr, "curves", None) or {}).items()},
            alpha_sem_appears_bracket=_opt_pair(getattr(tr, "alpha_sem_appears_bracket", None)),
            alpha_pos_vanishes_bracket=_opt_pair(getattr(tr, "alpha_pos_vanishes_bracket", None)),
        )

    def to_json(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "curves"}
        d["curves"] = {b: [fixed_point_to_json(p) for p in pts] for b, pts in self.curves.items()}
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TransitionRecord:
        kw = dict(d)
        for name in ("alpha_c", "alpha_l", "alpha_sem_appears", "alpha_pos_vanishes"):
            kw[f"{name}_bracket"] = _opt_pair(kw.get(f"{name}_bracket"))
        kw["curves"] = {b: [fixed_point_from_json(p) for p in pts] for b, pts in kw.get("curves", {}).items()}
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        """The flat row of ``TransitionResult.to_dict()``."""
        c, l_ = self.alpha_c_bracket or (None, None), self.alpha_l_bracket or (None, None)
        return {
            "omega": self.omega, "alpha_c": self.alpha_c, "alpha_c_lo": c[0], "alpha_c_hi": c[1],
            "alpha_l": self.alpha_l, "alpha_l_lo": l_[0], "alpha_l_hi": l_[1],
            "test_error_linear": self.test_error_linear, "alpha_sem_appears": self.alpha_sem_appears,
            "alpha_pos_vanishes": self.alpha_pos_vanishes,
            "note": "; ".join(f"{k}: {v}" for k, v in self.reasons.items()),
        }


class TheoryCache:
    """A JSON file of theory results keyed by everything they depend on.

    Written atomically (temporary file + rename) after every new entry, so an interrupted run keeps what it
    finished and a crash mid-write cannot leave a truncated cache behind.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {}
        if path.is_file():
            try:
                self.data = json.loads(path.read_text())
            except (json.JSONDecodeError, OSError):
                # an unreadable cache only costs recomputation; never fail the report over it
                print(f"reproduce: ignoring unreadable cache {path}", file=sys.stderr)
                self.data = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Any | None:
        v = self.data.get(key)
        if v is not None:
            self.hits += 1
        return v

    def put(self, key: str, value: Any) -> None:
        self.misses += 1
        self.data[key] = value
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, default=_json_default))
        os.replace(tmp, self.path)


def _json_default(v: Any) -> Any:
    # numpy scalars and arrays reach the cache from the theory's results
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    raise TypeError(f"cannot cache a {type(v).__name__}")


def _key(kind: str, setting: Setting, **params: Any) -> str:
    return json.dumps({"kind": kind, "setting": setting.to_dict(), **params}, sort_keys=True)


# ------------------------------------------------------------------------------------------------- theory


@contextlib.contextmanager
def _single_threaded_children() -> Iterator[None]:
    """Spawned theory workers inherit the environment; BLAS reads these variables when numpy is imported,
    which happens while the child unpickles its first job, too early for an initializer to help.  Without
    them N workers would each start a thread per core."""
    names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")
    saved = {n: os.environ.get(n) for n in names}
    for n in names:
        os.environ.setdefault(n, "1")
    try:
        yield
    finally:
        for n, v in saved.items():
            if v is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = v


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
class _Job:
    key: str
    label: str
    func: Callable[..., Any]
    args: tuple[Any, ...]
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]
    cost: float = 1.0  # rough, in fixed points: only orders the parallel queue


def _run_jobs(jobs: Sequence[_Job], cache: TheoryCache, workers: int, progress: bool) -> dict[str, Any]:
    """Run the uncached jobs (in parallel processes when workers > 1), caching each as it finishes."""
    from tqdm import tqdm

    results: dict[str, Any] = {}
    todo = []
    for job in jobs:
        hit = cache.get(job.key)
        if hit is not None:
            results[job.key] = job.decode(hit)
        else:
            todo.append(job)
    bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), desc="theory", unit="job", file=sys.stderr,
               disable=not progress, dynamic_ncols=True)
    try:
        if workers <= 1 or len(todo) <= 1:
            for job in todo:
                bar.set_postfix_str(job.label, refresh=True)
                value = job.func(*job.args)
                cache.put(job.key, job.encode(value))
                results[job.key] = value
                bar.update(1)
        else:
            # Longest jobs first, so that no worker is left with a transition while the others idle.
            todo.sort(key=lambda j: j.cost, reverse=True)
            # spawn, not fork: the parent may hold torch / BLAS thread pools that do not survive a fork
            ctx = multiprocessing.get_context("spawn")
            with _single_threaded_children():
                ex = cf.ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=ctx)
            try:
                futures = {ex.submit(job.func, *job.args): job for job in todo}
                for fut in cf.as_completed(futures):
                    job = futures[fut]
                    value = fut.result()
                    cache.put(job.key, job.encode(value))
                    results[job.key] = value
                    bar.set_postfix_str(job.label, refresh=False)
                    bar.update(1)
            except BaseException:
                # an error or Ctrl-C: finished jobs are cached already; do not wait for the running ones
                ex.shutdown(wait=False, cancel_futures=True)
                raise
            ex.shutdown(wait=True)
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
    """All theory a reproduction needs, from the cache where possible."""
    s = plan.setting
    jobs: list[_Job] = []
    curve_keys = {}
    for branch in ("positional", "semantic"):
        k = _key("curve", s, branch=branch, alphas=list(plan.curve_alphas), precision=plan.precision)
        curve_keys[branch] = k
        jobs.append(_Job(k, f"curve {branch}", _curve_job, (s, plan.curve_alphas, branch, plan.precision),
                         lambda v: [fixed_point_to_json(p) for p in v],
                         lambda v: [fixed_point_from_json(p) for p in v], cost=len(plan.curve_alphas)))
    omegas = list(plan.pd_omegas)
    if not any(math.isclose(w, s.omega, abs_tol=1e-12) for w in omegas):
        omegas.append(s.omega)  # the transition at the curves' omega, at the diagram's precision
    tr_keys = {}
    for w in omegas:
        sw = s.replace(omega=w)
        k = _key("transition", sw, alpha_min=plan.pd_alpha_min, alpha_max=plan.pd_alpha_max,
                 n_grid=plan.pd_n_grid, precision=plan.pd_precision, xtol=plan.pd_xtol)
        tr_keys[w] = k
        jobs.append(_Job(k, f"transition omega={w:g}", _transition_job,
                         (sw, plan.pd_alpha_min, plan.pd_alpha_max, plan.pd_n_grid, plan.pd_precision,
                          plan.pd_xtol),
                         TransitionRecord.to_json, TransitionRecord.from_json, cost=4.0 * plan.pd_n_grid))
    fs_keys = {}
    for branch in ("positional", "semantic"):
        k = _key("solve", s, alpha=plan.fs_alpha, branch=branch, precision=plan.precision)
        fs_keys[branch] = k
        jobs.append(_Job(k, f"solve {branch} alpha={plan.fs_alpha:g}", _solve_job,
                         (s, plan.fs_alpha, branch, plan.precision), fixed_point_to_json,
                         fixed_point_from_json))
    res = _run_jobs(jobs, cache, workers, progress)

    k_lin = _key("linear_baseline", s)
    lin = cache.get(k_lin)
    if lin is None:
        from attnphase.theory import linear_baseline

        lin = float(linear_baseline(s).test_error_linear)
        cache.put(k_lin, lin)
    this = next(w for w in omegas if math.isclose(w, s.omega, abs_tol=1e-12))
    diagram = [res[tr_keys[w]] for w in sorted(plan.pd_omegas)]
    return TheoryResults(
        curves={b: res[k] for b, k in curve_keys.items()},
        transition=res[tr_keys[this]],
        diagram=diagram,
        finite_size={b: res[k] for b, k in fs_keys.items()},
        test_error_linear=float(lin),
    )


# ---------------------------------------------------------------------------------------------- simulation


@dataclass
class SimSet:
    name: str
    d: tuple[int, ...]
    alphas: tuple[float, ...]
    summary: Any = None
    seconds: float = 0.0


def run_simulations(plan: Plan, store: Path, workers: int = 1, progress: bool = True,
                    task: Callable[..., Mapping[str, Any]] | None = None) -> list[SimSet]:
    from attnphase.sweep import Grid, run_sweep

    common = dict(omegas=(plan.setting.omega,), inits=plan.inits, seeds=plan.sim_seeds,
                  optimizer=plan.optimizer, n_test=plan.n_test, sigma=plan.setting.sigma,
                  lam=plan.setting.lam, A=plan.setting.A, options=dict(plan.sim_options))
    sets = [SimSet("alpha scan", (plan.sim_d,), plan.sim_alphas),
            SimSet("finite size", plan.fs_ds, (plan.fs_alpha,))]
    for ss in sets:
        t0 = time.perf_counter()
        ss.summary = run_sweep(store, Grid(d=ss.d, alphas=ss.alphas, **common), workers=workers,
                               progress=progress, task=task)
        ss.seconds = time.perf_counter() - t0
    return sets


def rows_for_setting(df: Any, setting: Setting) -> Any:
    """The rows of a store DataFrame simulated with this setting's sigma, lambda and A (any omega): a store
    may hold several sweeps, and results of different settings must never be averaged or drawn together."""
    from attnphase.store import canon_matrix

    if df is None or len(df) == 0:
        return df
    keep = np.ones(len(df), dtype=bool)
    for col, val in (("sigma", setting.sigma), ("lam", setting.lam)):
        if col in df.columns:
            keep &= np.isclose(df[col].astype(float).to_numpy(), float(val), rtol=1e-9, atol=0.0)
    if "A" in df.columns:
        keep &= (df["A"].astype(str) == canon_matrix(setting.A)).to_numpy()
    return df[keep]


def _sim_frame(plan: Plan, store: Path) -> Any:
    """This plan's rows of the store (its optimizer and n_test as well as its setting)."""
    from attnphase.store import load_results

    df = rows_for_setting(load_results(store), plan.setting)
    if len(df) == 0:
        return df
    keep = np.ones(len(df), dtype=bool)
    if "n_test" in df.columns:
        keep &= (df["n_test"].astype(int) == plan.n_test).to_numpy()
    if "optimizer" in df.columns:
        keep &= (df["optimizer"] == plan.optimizer).to_numpy()
    return df[keep]


# ------------------------------------------------------------------------------------------------- report


def _f(v: Any, digits: int = 4) -> str:
    f = _opt_float(v)
    if f is None:
        return "-"
    if f != 0 and (abs(f) < 1e-3 or abs(f) >= 1e4):
        return f"{f:.{digits - 1}e}"
    return f"{f:.{digits}g}"


def _bracket_text(v: Any, b: tuple[float, float] | None) -> str:
    if _opt_float(v) is None:
        return "-"
    return f"{_f(v)} [{_f(b[0])}, {_f(b[1])}]" if b else _f(v)


def _flagged(curves: Iterable[tuple[float, str, FixedPoint]]) -> tuple[list[str], dict[str, int]]:
    """Non-converged points (a real problem: listed) and branch collapses (the expected sign of a
    spinodal: counted)."""
    problems: list[str] = []
    collapsed: dict[str, int] = {}
    for omega, branch, p in curves:
        if p.status.startswith("collapsed"):
            collapsed[branch] = collapsed.get(branch, 0) + 1
        elif not p.converged or p.status != "ok":
            problems.append(f"omega = {omega:g}, {branch}, alpha = {p.alpha:.4g}: {p.status} "
                            f"(residual {_f(p.residual, 2)}, {p.iterations} iterations)")
    return problems, collapsed


def _all_points(theory: TheoryResults) -> list[tuple[float, str, FixedPoint]]:
    out = [(theory.transition.omega, b, p) for b, pts in theory.curves.items() for p in pts]
    for tr in [theory.transition, *[t for t in theory.diagram if t is not theory.transition]]:
        out += [(tr.omega, b, p) for b, pts in tr.curves.items() for p in pts]
    out += [(theory.transition.omega, b, p) for b, p in theory.finite_size.items()]
    return out


def _img(paths: Mapping[str, list[Path]], name: str, caption: str) -> str:
    if name not in paths:
        return f"*({caption}: not produced, see the note at the top)*\n"
    png, pdf = paths[name]
    return f"![{name.replace('_', ' ')}]({png.name})\n\n*{caption}* ([PDF]({pdf.name}))\n"


def _log_run(out_dir: Path, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Append this run to DIR/runs.json: a resumed run takes seconds, so the report also needs the
    cumulative cost of producing the directory's results."""
    path = out_dir / RUNS_NAME
    runs: list[dict[str, Any]] = []
    if path.is_file():
        try:
            runs = list(json.loads(path.read_text()))
        except (json.JSONDecodeError, OSError, TypeError):
            runs = []
    runs.append(entry)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(runs, indent=1))
    os.replace(tmp, path)
    return runs


def write_report(out_dir: Path, plan: Plan, theory: TheoryResults, sims: list[SimSet], sim_df: Any,
                 figures: Mapping[str, list[Path]], timings: Mapping[str, float], cache: TheoryCache,
                 wall: float, notes: Sequence[str], runs: Sequence[Mapping[str, Any]] = ()) -> Path:
    from attnphase import __version__

    s = plan.setting
    tr = theory.transition
    lines: list[str] = []
    add = lines.append
    add(f"# attnphase reproduction ({plan.name})\n")
    add(f"Generated {_dt.datetime.now().isoformat(timespec='seconds')} by attnphase {__version__}; "
        f"wall time of this run {wall:.1f} s (theory cache: {cache.hits} reused, {cache.misses} computed).\n")
    add("Model and conventions: MODEL.md (Cui, Behrens, Krzakala, Zdeborova, NeurIPS 2024).\n")
    for n in notes:
        add(f"> **Note:** {n}\n")

    add("## Setting\n")
    add("| quantity | value |\n|---|---|")
    add(f"| sigma | {s.sigma:g} |\n| lambda | {s.lam:g} |\n| A | {[list(r) for r in s.A]} |")
    add(f"| L, r, r* | {s.L}, {s.r}, {s.r_star} |\n| omega (curves, simulations) | {s.omega:g} |")
    add(f"| theory precision (curves / phase diagram) | {plan.precision} / {plan.pd_precision} |")
    add(f"| alpha grid of the curves | {len(plan.curve_alphas)} values in "
        f"[{min(plan.curve_alphas):g}, {max(plan.curve_alphas):g}] |")
    add(f"| test_error_linear (MODEL.md section 4) | {_f(theory.test_error_linear)} |\n")

    add(f"## Transition at omega = {s.omega:g}\n")
    add("| alpha_c | alpha_l | semantic branch appears | positional branch vanishes |\n|---|---|---|---|")
    add(f"| {_bracket_text(tr.alpha_c, tr.alpha_c_bracket)} "
        f"| {_bracket_text(tr.alpha_l, tr.alpha_l_bracket)} "
        f"| {_bracket_text(tr.alpha_sem_appears, tr.alpha_sem_appears_bracket)} "
        f"| {_bracket_text(tr.alpha_pos_vanishes, tr.alpha_pos_vanishes_bracket)} |\n")
    for k, v in tr.reasons.items():
        add(f"- {k}: {v}")
    add("")
    add(_img(figures, "test_error", f"(a) test error vs alpha at omega = {s.omega:g}: theory of both "
             "branches (band: +-2 integration standard errors), global minimum (thick grey), linear "
             f"baseline, simulations (d = {plan.sim_d}, mean +- standard error over seeds)"))
    add(_img(figures, "loss_difference", "(b) train_loss(semantic) - train_loss(positional): theory and "
             "simulation; alpha_c is where it crosses zero"))
    add(_img(figures, "overlaps", "(c) overlaps |m| / sigma^2 and |theta| / sigma^2 vs alpha"))

    add("## Phase diagram\n")
    add(f"omega in {[float(f'{w:.4g}') for w in plan.pd_omegas]}; transition on {plan.pd_n_grid} alphas "
        f"in [{plan.pd_alpha_min:g}, {plan.pd_alpha_max:g}] refined to a tolerance of {plan.pd_xtol:g}, "
        f"precision {plan.pd_precision}. Brackets [lo, hi] enclose each crossing; '-' means none in range "
        "(see note).\n")
    add("| omega | alpha_c [bracket] | alpha_l [bracket] | test_error_linear | semantic appears | "
        "positional vanishes | note |\n|---|---|---|---|---|---|---|")
    for t in theory.diagram:
        note = "; ".join(f"{k}: {v}" for k, v in t.reasons.items()).replace("|", "/")
        add(f"| {t.omega:g} | {_bracket_text(t.alpha_c, t.alpha_c_bracket)} | "
            f"{_bracket_text(t.alpha_l, t.alpha_l_bracket)} | {_f(t.test_error_linear)} | "
            f"{_bracket_text(t.alpha_sem_appears, t.alpha_sem_appears_bracket)} | "
            f"{_bracket_text(t.alpha_pos_vanishes, t.alpha_pos_vanishes_bracket)} | {note} |")
    add("")
    add(_img(figures, "phase_diagram", "(d) phase diagram: alpha_c(omega) separates the positional and "
             "semantic global minimum; hatched: attention beats the linear baseline (alpha > alpha_l)"))

    add("## Simulations\n")
    add(f"Finite-d training (MODEL.md section 5) at omega = {s.omega:g}, optimizer {plan.optimizer}, "
        f"inits {', '.join(plan.inits)}, seeds {list(plan.sim_seeds)}, n_test = {plan.n_test}; store "
        f"`{STORE_NAME}` (rerunning skips finished points).\n")
    add("| set | d | alphas | points | ran now | skipped (stored) | failed | wall time (s) |\n"
        "|---|---|---|---|---|---|---|---|")
    for ss in sims:
        sm = ss.summary
        add(f"| {ss.name} | {', '.join(str(v) for v in ss.d)} | {', '.join(f'{a:g}' for a in ss.alphas)} | "
            f"{sm.total} | {sm.ran} | {sm.skipped} | {sm.failed} | {ss.seconds:.1f} |")
    add("")
    if sim_df is not None and len(sim_df):
        n_nc = int((~sim_df["converged"].astype(bool)).sum()) if "converged" in sim_df.columns else 0
        secs = float(sim_df["seconds"].sum()) if "seconds" in sim_df.columns else float("nan")
        add(f"{len(sim_df)} stored runs of this plan, {n_nc} flagged not converged by the optimizer; "
            f"total training time {secs:.1f} s (CPU seconds summed over runs).\n")
    if any(ss.summary.failed for ss in sims):
        add("**Some simulations failed**; their errors are in the store's `failures` table and they are "
            "retried on the next run.\n")
    add(_img(figures, "finite_size", f"(e) finite-size check: simulated test error vs d at alpha = "
             f"{plan.fs_alpha:g}, omega = {s.omega:g}; horizontal lines: d -> infinity theory"))

    add("## Theory points flagged\n")
    problems, collapsed = _flagged(_all_points(theory))
    if problems:
        add(f"**{len(problems)} fixed point(s) did not converge** (not drawn in the figures):\n")
        lines.extend(f"- {p}" for p in problems)
        add("")
    else:
        add("All fixed points converged.\n")
    if collapsed:
        add("Points where a branch's iteration left the branch (expected beyond a spinodal: the branch does "
            "not exist there; not drawn): " + ", ".join(f"{b}: {n}" for b, n in sorted(collapsed.items()))
            + ".\n")

    add("## Timing\n")
    add("| stage | seconds |\n|---|---|")
    for k, v in timings.items():
        add(f"| {k} | {v:.1f} |")
    add(f"| total | {wall:.1f} |\n")
    if len(runs) > 1:
        total = sum(float(r.get("wall", 0.0)) for r in runs)
        add(f"This directory was produced by {len(runs)} runs (`{RUNS_NAME}`), {total:.1f} s of wall time "
            f"in all; the first took {float(runs[0].get('wall', 0.0)):.1f} s.\n")
    add(f"Rerun with `attnphase reproduce --out {out_dir}{' --quick' if plan.name == 'quick' else ''}`; "
        "cached theory and stored simulations are reused.\n")
    path = out_dir / REPORT_NAME
    path.write_text("\n".join(lines))
    return path


def make_figures(out_dir: Path, plan: Plan, theory: TheoryResults,
                 sim_df: Any) -> tuple[dict[str, list[Path]], list[str]]:
    """Figures (a)-(e); a figure that cannot be drawn is reported, never fatal to the whole report."""
    from attnphase.store import aggregate

    s, tr = plan.setting, theory.transition
    agg = aggregate(sim_df) if sim_df is not None and len(sim_df) else None
    main = agg[agg["d"] == plan.sim_d] if agg is not None else None
    figs: dict[str, list[Path]] = {}
    notes: list[str] = []

    def attempt(name: str, func: Callable[[], list[Path]]) -> None:
        try:
            figs[name] = func()
        except (ValueError, KeyError) as exc:
            notes.append(f"figure {name} not produced: {exc}")

    out = out_dir / FIGURES["test_error"]
    attempt("test_error", lambda: plots.plot_test_error(
        theory.curves, out, test_error_linear=theory.test_error_linear, simulation=main, alpha_c=tr.alpha_c,
        alpha_l=tr.alpha_l, alpha_c_bracket=tr.alpha_c_bracket, alpha_l_bracket=tr.alpha_l_bracket,
        omega=s.omega, d=plan.sim_d))
    attempt("loss_difference", lambda: plots.plot_loss_difference(
        theory.curves, out_dir / FIGURES["loss_difference"], simulation=main, alpha_c=tr.alpha_c,
        alpha_c_bracket=tr.alpha_c_bracket, omega=s.omega, d=plan.sim_d))
    attempt("overlaps", lambda: plots.plot_overlaps(
        theory.curves, out_dir / FIGURES["overlaps"], simulation=main, alpha_c=tr.alpha_c, omega=s.omega,
        d=plan.sim_d, sigma=s.sigma))
    attempt("phase_diagram", lambda: plots.plot_phase_diagram(
        theory.diagram, out_dir / FIGURES["phase_diagram"], alpha_max=plan.pd_alpha_max, simulation=agg))
    attempt("finite_size", lambda: plots.plot_finite_size(
        agg, out_dir / FIGURES["finite_size"], alpha=plan.fs_alpha, omega=s.omega, theory=theory.finite_size,
        test_error_linear=theory.test_error_linear))
    return figs, notes


def reproduce(out_dir: str | os.PathLike[str], quick: bool = False, workers: int = 1,
              progress: bool = True, plan: Plan | None = None,
              task: Callable[..., Mapping[str, Any]] | None = None) -> Path:
    """Compute everything, write the figures and DIR/report.md; return the report's path.

    ``plan`` overrides the standard quick/full plan and ``task`` the simulation of one grid point
    (``attnphase.sweep.simulation_task``); both exist for tests.  Resumable: see the module docstring.
    """
    workers = int(workers)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out must be a directory, {out} is a file")
    out.mkdir(parents=True, exist_ok=True)
    plan = plan_for(quick) if plan is None else plan
    t_start = time.perf_counter()
    started = _dt.datetime.now().isoformat(timespec="seconds")
    timings: dict[str, float] = {}
    cache = TheoryCache(out / CACHE_NAME)

    t0 = time.perf_counter()
    theory = compute_theory(plan, cache, workers=workers, progress=progress)
    timings["theory"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    store = out / STORE_NAME
    sims = run_simulations(plan, store, workers=workers, progress=progress, task=task)
    timings["simulations"] = time.perf_counter() - t0
    sim_df = _sim_frame(plan, store)

    t0 = time.perf_counter()
    figures, notes = make_figures(out, plan, theory, sim_df)
    timings["figures"] = time.perf_counter() - t0
    wall = time.perf_counter() - t_start
    runs = _log_run(out, {
        "started": started, "plan": plan.name, "workers": workers, "wall": round(wall, 2),
        "timings": {k: round(v, 2) for k, v in timings.items()},
        "theory_computed": cache.misses, "simulations_ran": sum(ss.summary.ran for ss in sims),
    })
    return write_report(out, plan, theory, sims, sim_df, figures, timings, cache, wall, notes, runs)
