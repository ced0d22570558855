"""``reproduce(out_dir)``: theory, simulations, figures and the report, resumable from DIR/results.sqlite."""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from attnphase.errors import InputError
from attnphase.experiments.store import ResultStore
from attnphase.reproduce.basins import BasinsRun, make_basins_figures, run_grids, transition_fields
from attnphase.reproduce.bayes import run_bayes
from attnphase.reproduce.figures import make_figures
from attnphase.reproduce.markdown import RUNS_NAME, STORE_NAME, write_report
from attnphase.reproduce.plan import Plan, plan_for
from attnphase.reproduce.simulations import run_simulations, sim_frame
from attnphase.reproduce.theory_jobs import TheoryCache, compute_theory


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


def reproduce(out_dir: str | os.PathLike[str], quick: bool = False, workers: int = 1,
              progress: bool = True, plan: Plan | None = None,
              task: Callable[..., Mapping[str, Any]] | None = None,
              basins_task: Callable[..., Mapping[str, Any]] | None = None) -> Path:
    """Compute everything, write the figures and DIR/report.md; return the report's path.

    Theory results and simulations go to one store, DIR/results.sqlite, as soon as each is computed; a rerun
    takes every result it finds there and computes only the rest.  ``plan`` overrides the standard quick /
    full plan, ``task`` the simulation of one grid point (``attnphase.experiments.sweep.simulation_task``) and
    ``basins_task`` one random start (``attnphase.experiments.simulation.basins.basins_task``); all three exist for tests.
    """
    workers = int(workers)
    if workers < 1:
        raise InputError(f"workers must be >= 1, got {workers}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out must be a directory, {out} is a file")
    out.mkdir(parents=True, exist_ok=True)
    plan = plan_for(quick) if plan is None else plan
    t_start = time.perf_counter()
    started = _dt.datetime.now().isoformat(timespec="seconds")
    timings: dict[str, float] = {}
    store_path = out / STORE_NAME

    t0 = time.perf_counter()
    with ResultStore(store_path) as store:  # checked (ours, undamaged) before anything is computed
        cache = TheoryCache(store)
        theory = compute_theory(plan, cache, workers=workers, progress=progress)
    timings["theory"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    sims = run_simulations(plan, store_path, workers=workers, progress=progress, task=task)
    timings["simulations"] = time.perf_counter() - t0
    sim_df = sim_frame(plan, store_path)

    basins: BasinsRun | None = None
    if plan.basins is not None:
        basins = run_grids(plan.basins, plan.setting, store_path, workers=workers, progress=progress,
                           task=basins_task)
        timings["basins"] = basins.seconds

    hist = None
    if plan.histogram is not None:  # the counting transformer (Section 2): its own figures and report block
        from attnphase.reproduce.histogram_section import histogram_section

        hist = histogram_section(out, store_path, quick=plan.histogram == "quick", progress=progress)
        timings["histogram"] = hist.seconds

    t0 = time.perf_counter()
    figures, notes = make_figures(out, plan, theory, sim_df)
    fields = transition_fields([*theory.diagram, theory.transition])
    if plan.basins is not None:
        try:
            figures.update(make_basins_figures(out, plan.basins, plan.setting, store_path, fields))
        except (ValueError, KeyError) as exc:
            notes.append(f"basins figures not produced: {exc}")
    timings["figures"] = time.perf_counter() - t0
    bayes = None
    if plan.bayes is not None:  # the best any estimator can do, drawn against this run's ERM results
        bayes = run_bayes(out, plan, theory)
        timings["bayes"] = bayes.seconds
    dyn, dyn_note = None, None
    if plan.dynamics is not None:  # online SGD against its ODE, the dynamical diagram beside this run's alpha_c
        from attnphase.reproduce.dynamics_section import dynamics_section

        t0 = time.perf_counter()
        try:
            dyn = dynamics_section(out, store_path, quick=plan.dynamics == "quick", fields=fields,
                                   setting=plan.setting, progress=progress)
        except (ValueError, ArithmeticError) as exc:  # one note, never a lost report
            dyn_note = f"online-SGD section not produced: {exc}"
        timings["dynamics"] = time.perf_counter() - t0
    wall = time.perf_counter() - t_start
    runs = _log_run(out, {
        "started": started, "plan": plan.name, "workers": workers, "wall": round(wall, 2),
        "timings": {k: round(v, 2) for k, v in timings.items()},
        "theory_computed": cache.misses, "simulations_ran": sum(ss.summary.ran for ss in sims),
        "basins_ran": basins.ran if basins is not None else 0,
    })
    report = write_report(out, plan, theory, sims, sim_df, figures, timings, cache, wall, notes, runs,
                          basins=basins, fields=fields, store=store_path)
    if hist is not None:
        report.write_text(report.read_text() + "\n" + hist.markdown())
    if bayes is not None:
        report.write_text(report.read_text() + "\n" + bayes.markdown())
    if dyn is not None:
        report.write_text(report.read_text() + "\n" + dyn.markdown())
    elif dyn_note is not None:
        report.write_text(report.read_text() + f"\n## Online SGD\n\n- {dyn_note}\n")
    return report
