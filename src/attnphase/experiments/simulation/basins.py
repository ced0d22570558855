"""Basins of attraction: train from random starts and classify each end point against the theory's minima.

Classification rule (one rule for every start).  Let (m, theta) be the end point's overlaps as recorded by
`simulate` (r = r* = 1: |m| and |theta|; for the untied student the geometric means of its two factors), and
(m_B, theta_B) the theory's fixed point of branch B in {positional, semantic} at the same (alpha, omega)
(`theory_points`, precision 'fast').  The distance to B is the relative Euclidean distance

    D_B = || (m, theta) - (m_B, theta_B) || / || (m_B, theta_B) ||,

and the class is the branch with the smallest D_B provided D_B <= BASIN_TOL (0.5), else "other".  Only
branches whose theory solve has status "ok" take part: beyond a spinodal the branch does not exist, and an
end point there that is far from the other branch is "other".  At the study's scale the two fixed points are
more than 1 / BASIN_TOL of their own norm apart (alpha = 1.5, omega = 0.3: the positional point is at relative
distance 1.1 from the semantic one and the semantic at 2.1 from the positional), so the two balls never
overlap; an end point in neither (spurious finite-d minima, the agnostic saddle, unconverged runs) is "other".
Both distances are recorded with the class so that another threshold can be applied afterwards.

Starts: for every (alpha, omega) the seeds 0..N-1 each draw their own data set and teacher and their own
initial Q (i.i.d. N(0, scale^2) entries; the untied student draws Q and K independently).  The fraction of
semantic end points is therefore an average over initialisations and over data sets; at large d the landscape
concentrates and the data-set part of the variance vanishes.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from attnphase.errors import InputError
from attnphase.notes import Status
from attnphase.setting import Setting

BASIN_TOL = 0.5
CLASSES = ("positional", "semantic", "other")
BRANCHES = ("positional", "semantic")
# Default initial scales: 0.01 is the small-initialisation limit (Q near the critical point Q = 0, where the
# first steps follow the risk's most unstable direction); 1 is the scale of the teacher's own entries.
DEFAULT_SCALES = (0.01, 1.0)
# Default training for the basins: 1000 plain gradient-descent steps with the study's learning rate choose
# the basin by gradient-descent dynamics, then L-BFGS finishes the descent inside it (measured at d = 200-500:
# 5000 GD steps alone leave random starts unconverged).
DEFAULT_OPTIMIZER = "lbfgs"
DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {"lbfgs": {"warmup": 1000}, "gd": {}, "adam": {}}
TASK_MARK = "basins"  # options["task"]: keeps basins rows apart from plain sweep rows in a shared store


@dataclass(frozen=True)
class BranchPoint:
    """The theory's fixed point of one branch, reduced to what the classification needs.  status: the solve's
    Status (None where the solve raised); reason: the message beside it."""

    branch: str
    m: float
    theta: float
    train_loss: float
    test_error: float
    status: Status | None
    reason: str = ""

    def __post_init__(self) -> None:
        if self.status is not None:  # a code, never free text ("ok" is read as Status.ok)
            object.__setattr__(self, "status", Status(self.status))

    @property
    def exists(self) -> bool:
        return self.status == Status.ok and math.isfinite(self.m) and math.isfinite(self.theta)


def theory_points(setting: Setting, alpha: float) -> dict[str, BranchPoint]:
    """The theory's positional and semantic fixed points at (alpha, setting.omega), precision 'fast'.

    This is the only place the basins code calls the theory engine (adapt it here if the engine's result type
    changes).  Cached per (setting, alpha) in each process.
    """
    return dict(_theory_points_cached(json.dumps(setting.to_dict(), sort_keys=True), float(alpha)))


@functools.lru_cache(maxsize=256)
def _theory_points_cached(setting_json: str, alpha: float) -> tuple[tuple[str, BranchPoint], ...]:
    from attnphase.theory import solve

    setting = Setting.from_dict(json.loads(setting_json))
    out = []
    for branch in BRANCHES:
        try:
            fp = solve(setting, alpha, branch=branch, precision="fast")
            summ = fp.summary()  # the theory's scalar summaries (|m_1|, |theta| in the study's setting)
            pt = BranchPoint(branch, abs(float(summ["m"])), abs(float(summ["theta"])), float(fp.train_loss),
                             float(fp.test_error), fp.status)
        except (ValueError, ArithmeticError, RuntimeError) as exc:
            pt = BranchPoint(branch, math.nan, math.nan, math.nan, math.nan, None, f"failed: {exc}")
        out.append((branch, pt))
    return tuple(out)


def basin_distances(m: float, theta: float, points: Mapping[str, BranchPoint]) -> dict[str, float]:
    """D_B for each branch (NaN where the branch does not exist); see the module docstring."""
    out = {}
    for b in BRANCHES:
        p = points.get(b)
        if p is None or not p.exists:
            out[b] = math.nan
            continue
        norm = math.hypot(p.m, p.theta)
        out[b] = math.hypot(m - p.m, theta - p.theta) / norm if norm > 0 else math.inf
    return out


def classify(m: float, theta: float, points: Mapping[str, BranchPoint], tol: float = BASIN_TOL) -> str:
    """positional / semantic / other by the rule of the module docstring."""
    if not (math.isfinite(m) and math.isfinite(theta)):
        return "other"
    dist = basin_distances(abs(m), abs(theta), points)
    finite = {b: v for b, v in dist.items() if math.isfinite(v)}
    if not finite:
        return "other"
    best = min(finite, key=finite.get)
    return best if finite[best] <= tol else "other"


def classification_record(m: float, theta: float, points: Mapping[str, BranchPoint]) -> dict[str, Any]:
    """The columns a basins row adds to a simulation record."""
    dist = basin_distances(abs(m), abs(theta), points)
    rec: dict[str, Any] = {"basin": classify(m, theta, points)}
    for b in BRANCHES:
        p = points[b]
        rec[f"basin_distance_{b}"] = None if not math.isfinite(dist[b]) else dist[b]
        rec[f"theory_{b}_status"] = "failed" if p.status is None else p.status.value
        rec[f"theory_{b}_m"] = p.m if math.isfinite(p.m) else None
        rec[f"theory_{b}_theta"] = p.theta if math.isfinite(p.theta) else None
        rec[f"theory_{b}_train_loss"] = p.train_loss if p.exists and math.isfinite(p.train_loss) else None
    return rec


def basins_task(point: Any) -> dict[str, Any]:
    """Sweep task (attnphase.experiments.sweep.GridPoint -> record): one start, trained, measured and classified.

    The point's options carry the basins parameters (task mark, init_scale, student, optimizer options,
    record_every); everything but the mark goes to `simulate` unchanged, so a positional or semantic start
    gives exactly `simulate`'s numbers for the same seed.
    """
    from attnphase.experiments.simulation.experiment import simulate

    options = dict(json.loads(point.options))
    options.pop("task", None)
    record_every = int(options.get("record_every", 0) or 0)
    setting = point.setting()
    res = simulate(setting, point.d, point.alpha, init=point.init, optimizer=point.optimizer, seed=point.seed,
                   n_test=point.n_test, device=point.device, **options)
    rec = res.to_dict(include_trajectory=record_every > 0)
    m = float(res.m) if isinstance(res.m, int | float) else math.nan
    theta = float(res.theta) if isinstance(res.theta, int | float) else math.nan
    rec.update(classification_record(m, theta, theory_points(setting, point.alpha)))
    return rec


@dataclass
class BasinsSummary:
    """Counts over all scales of one `run_basins` call."""

    total: int = 0
    skipped: int = 0
    ran: int = 0
    failed: int = 0

    def line(self) -> str:
        return (f"{self.total} starts: {self.ran} ran, {self.skipped} skipped (already in store), "
                f"{self.failed} failed")


def basins_grids(d: Any, alphas: Any, omegas: Any, inits_per_point: int = 16, init_scales: Any = DEFAULT_SCALES,
                 optimizer: str = DEFAULT_OPTIMIZER, student: str = "tied", seeds: Any = None,
                 inits: Any = ("random",), n_test: int = 10000, options: Mapping[str, Any] | None = None,
                 sigma: float = 0.5, lam: float = 0.01, A: Any = None, device: str | None = None) -> list:
    """One attnphase.experiments.sweep.Grid per initial scale, every argument validated (ValueError before any work).

    seeds: default 0..inits_per_point-1; given explicitly, their number must equal inits_per_point.
    options: optimizer options (steps, lr, gtol, warmup, ...) and record_every; the defaults of
    DEFAULT_OPTIONS apply where not given.
    """
    from attnphase.experiments.simulation.model import check_student
    from attnphase.experiments.simulation.training import OPTIMIZERS, optimizer_options
    from attnphase.experiments.sweep import Grid
    from attnphase.setting import STUDY_A

    if optimizer not in OPTIMIZERS:
        raise InputError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    check_student(student)
    if isinstance(inits_per_point, bool) or not isinstance(inits_per_point, int) or inits_per_point < 1:
        raise InputError(f"inits-per-point must be a positive integer, got {inits_per_point!r}")
    from attnphase.experiments.sweep import MAX_GRID_POINTS

    # The size first, before a single seed is materialised (10^9 starts once grew to 23 GB before failing).
    n_d = len(d) if isinstance(d, tuple | list) else 1
    n_a = len(alphas) if isinstance(alphas, tuple | list) else 1
    n_w = len(omegas) if isinstance(omegas, tuple | list) else 1
    n_s = len(init_scales) if isinstance(init_scales, tuple | list) else 1
    n_i = len(inits) if isinstance(inits, tuple | list) else 1
    starts = inits_per_point * n_d * n_a * n_w * n_s * n_i
    if starts > MAX_GRID_POINTS:
        raise InputError(f"{starts:,} starts (inits-per-point {inits_per_point:,} x {n_d} d x {n_a} alphas x {n_w} "
                         f"omegas x {n_s} scales x {n_i} inits): more than the {MAX_GRID_POINTS:,} one study is "
                         "meant to hold")
    if seeds is None:
        seeds = tuple(range(inits_per_point))
    else:
        seeds = tuple(dict.fromkeys(seeds))
        if len(seeds) != inits_per_point:
            raise InputError(f"{len(seeds)} seeds given but inits-per-point is {inits_per_point}")
    scales = (init_scales,) if isinstance(init_scales, int | float) else tuple(init_scales)
    if not scales:
        raise InputError("init-scale: need at least one value")
    for s in scales:
        if isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s) or s <= 0:
            raise InputError(f"init-scale must be finite and > 0, got {s!r}")
    inits = (inits,) if isinstance(inits, str) else tuple(inits)
    for i in inits:
        if i not in ("random", "positional", "semantic"):
            raise InputError(f"basins inits must be random, positional or semantic, got {i!r}")
    opts = {**DEFAULT_OPTIONS.get(optimizer, {}), **dict(options or {})}
    record_every = opts.get("record_every", 0)
    if isinstance(record_every, bool) or not isinstance(record_every, int) or record_every < 0:
        raise InputError(f"record_every must be an integer >= 0, got {record_every!r}")
    optimizer_options(optimizer, {k: v for k, v in opts.items() if k != "record_every"})
    grids = []
    for s in scales if "random" in inits else scales[:1]:
        point_opts = {"task": TASK_MARK, **opts}
        if student != "tied":  # tied rows keep the key of a plain simulation with the same options
            point_opts["student"] = student
        if "random" in inits:
            point_opts["init_scale"] = float(s)
        grids.append(Grid(d=d, alphas=alphas, omegas=omegas, inits=inits, seeds=seeds, optimizer=optimizer,
                          n_test=n_test, sigma=sigma, lam=lam, A=STUDY_A if A is None else A,
                          options=point_opts, device=device))
    for g in grids:
        for om in g.omegas:
            Setting(omega=om, sigma=g.sigma, lam=g.lam, A=g.A).require_study_geometry()
    return grids


def check_grids_memory(grids: list, workers: int = 1, student: str = "tied") -> None:
    """Refuse (ValueError) a basins or sweep grid whose largest point does not fit `workers` times."""
    from attnphase.experiments.simulation.memory import check_memory
    from attnphase.experiments.simulation.sampling import resolve_device

    for g in grids:
        setting = Setting(omega=g.omegas[0], sigma=g.sigma, lam=g.lam, A=g.A)
        dtype = str(dict(g.options).get("dtype", "float64"))
        device = str(resolve_device(g.device))  # also refuses --device cuda without CUDA, before any work
        check_memory(setting, max(g.d), max(g.alphas), g.n_test, g.optimizer, student, dtype, device,
                     runs=max(1, int(workers)))


def run_basins(store_path: str, grids: list, workers: int = 1, scheduler: str | None = None,
               progress: bool = True, student: str = "tied", task: Any = None) -> BasinsSummary:
    """Run every start of every grid not yet in the store (resumable, parallel: attnphase.experiments.sweep.run_sweep).
    ``task`` replaces the real training of a start (tests); the memory check applies to the real one only."""
    from attnphase.experiments.sweep import run_sweep

    if task is None:
        check_grids_memory(grids, workers if scheduler is None else 1, student)
    total = BasinsSummary()
    for g in grids:
        s = run_sweep(store_path, g, workers=workers, scheduler=scheduler, task=task or basins_task,
                      progress=progress, label=f"basins (random starts, scale {g.options.get('init_scale', '?')})"
                      if len(grids) > 1 else "basins (random starts)")
        total.total += s.total
        total.skipped += s.skipped
        total.ran += s.ran
        total.failed += s.failed
    return total


def basin_fractions(df: Any, group: tuple[str, ...] = ("student", "init_scale", "d", "omega", "alpha")) -> Any:
    """Counts and fractions of the classes per group of a basins frame (`load_results` of a basins store).

    Columns: the group columns present, n, n_positional, n_semantic, n_other, n_converged, and for each class
    c the fraction f_c = n_c / n with its binomial standard error sqrt(f_c (1 - f_c) / n) (`<c>_se`); where
    f_c is 0 or 1 the plain formula gives 0, so `<c>_se` is max(sqrt(f (1 - f) / n), 1 / (2 (n + 1))): an
    all-or-nothing point still carries an error bar of the size of one start.
    """
    import pandas as pd

    if df is None or len(df) == 0 or "basin" not in df.columns:
        return pd.DataFrame()
    df = df[df["basin"].notna()].copy()
    if "student" not in df.columns:
        df["student"] = "tied"
    df["student"] = df["student"].fillna("tied")
    if "init_scale" in df.columns:
        df["init_scale"] = df["init_scale"].fillna(-1.0)  # structured starts have no scale
    cols = [c for c in group if c in df.columns]
    rows = []
    for keys, sub in df.groupby(cols, sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        n = len(sub)
        row: dict[str, Any] = dict(zip(cols, keys, strict=True))
        row["n"] = n
        row["n_converged"] = int(sub["converged"].astype(bool).sum()) if "converged" in sub else n
        for c in CLASSES:
            k = int((sub["basin"] == c).sum())
            f = k / n
            row[f"n_{c}"] = k
            row[f"{c}_fraction"] = f
            row[f"{c}_se"] = max(math.sqrt(f * (1 - f) / n), 1.0 / (2 * (n + 1)))
        rows.append(row)
    return pd.DataFrame(rows)
