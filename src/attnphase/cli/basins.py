"""`attnphase basins`: random starts per (alpha, omega), trained and classified against the theory's minima."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from attnphase.cli.common import (
    add_output_args,
    add_setting_args,
    check_store_path,
    emit,
    grid_A,
    parse_int_spec,
    parse_spec,
)
from attnphase.cli.simulate import OPTIMIZERS, STUDENTS
from attnphase.errors import InputError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "basins",
        help="which minimum training finds from random starts (resumable SQLite store)",
        description="For every (d, alpha, omega) train N random starts (Q with iid N(0, S^2) entries) and classify "
        "each end point as positional, semantic or other by its relative distance in (m, theta) to the theory's "
        "fixed points (nearest branch within 0.5 of its own norm, else other). Results go to the same resumable "
        "store as `attnphase sweep`; `attnphase export` writes one row per start with the class in column 'basin'.",
    )
    p.add_argument("--store", required=True, help="SQLite results file (created if missing)")
    p.add_argument("--d", required=True, help="dimension(s): an integer or a comma list")
    p.add_argument("--alphas", required=True, help="sample complexities: number, comma list or start:stop:num")
    p.add_argument("--omegas", required=True, help="positional weights: number, comma list or start:stop:num")
    p.add_argument("--inits-per-point", type=int, default=16, help="random starts per (d, alpha, omega) (default 16)")
    p.add_argument("--init-scale", default="0.01,1",
                   help="standard deviation(s) of the initial entries; comma list (default 0.01,1: the "
                        "small-initialisation limit and the teacher's scale)")
    p.add_argument("--inits", default="random",
                   help="starts: random (default), or positional / semantic (the structured starts of simulate)")
    p.add_argument("--optimizer", default="lbfgs", choices=OPTIMIZERS,
                   help="default lbfgs after 1000 gradient-descent steps (warmup), so that GD picks the basin")
    p.add_argument("--student", default="tied", choices=STUDENTS, help="tied Q = K (default) or untied Q, K")
    p.add_argument("--seeds", default=None, help="seeds of the starts (default 0..N-1); their number must be N")
    p.add_argument("--n-test", type=int, default=10000, help="fresh test samples per run (default 10000)")
    p.add_argument("--steps", type=int, default=None, help="optimiser steps (lbfgs: maximum iterations)")
    p.add_argument("--lr", type=float, default=None, help="learning rate")
    p.add_argument("--warmup", type=int, default=None, help="lbfgs: gradient-descent steps first (default 1000)")
    p.add_argument("--record-every", type=int, default=0, help="store a trajectory every K steps (default off)")
    p.add_argument("--device", default=None, help="torch device (not part of the identity)")
    add_setting_args(p, omega=False)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--workers", type=int, default=1, help="local worker processes (default 1)")
    g.add_argument("--scheduler", default=None, metavar="ADDRESS", help="address of a Dask scheduler")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (--quiet also hides the summary)")
    add_output_args(p)
    p.set_defaults(func=_basins)


def _grids(args: argparse.Namespace) -> list:
    from attnphase.experiments.simulation.basins import basins_grids

    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers must be >= 1, got {args.workers}")
    if args.n_test < 1:
        raise InputError(f"--n-test must be >= 1, got {args.n_test}")
    if args.device not in (None, "cpu") and not str(args.device).startswith("cuda"):
        raise InputError(f"--device must be cpu or cuda, got {args.device!r}")
    if args.device and str(args.device).startswith("cuda"):
        from attnphase.experiments.simulation.sampling import resolve_device

        resolve_device(args.device)
    options: dict[str, Any] = {k: v for k, v in (("steps", args.steps), ("lr", args.lr)) if v is not None}
    if args.warmup is not None:
        if args.optimizer != "lbfgs":
            raise InputError("--warmup applies to --optimizer lbfgs only")
        options["warmup"] = args.warmup
    if args.record_every:
        options["record_every"] = args.record_every
    seeds = parse_int_spec(args.seeds, "--seeds") if args.seeds is not None else None
    ds = parse_int_spec(args.d, "--d")
    bad = [d for d in ds if d < 2]
    if bad:  # simulate's own rule, before the first start (every start used to fail at d = 1)
        raise InputError(f"--d must be >= 2, got {bad[0]}")
    return basins_grids(
        d=tuple(ds), alphas=tuple(parse_spec(args.alphas, "--alphas")),
        omegas=tuple(parse_spec(args.omegas, "--omegas")), inits_per_point=args.inits_per_point,
        init_scales=tuple(parse_spec(args.init_scale, "--init-scale")), optimizer=args.optimizer,
        student=args.student, seeds=seeds, inits=tuple(s.strip() for s in args.inits.split(",") if s.strip()),
        n_test=args.n_test, options=options, sigma=args.sigma, lam=args.lam, A=grid_A(args),
        device=args.device)


FRACTION_COLUMNS = ["init_scale", "d", "omega", "alpha", "n", "positional_fraction", "semantic_fraction",
                    "other_fraction", "n_converged"]


def _basins(args: argparse.Namespace) -> int:
    from attnphase.experiments.simulation.basins import basin_fractions, check_grids_memory, run_basins

    check_store_path(args.store)  # a foreign or damaged store is refused before any start runs
    grids = _grids(args)
    check_grids_memory(grids, args.workers if args.scheduler is None else 1, args.student)
    if args.scheduler is not None:
        from attnphase.experiments.sweep import check_scheduler

        check_scheduler(args.scheduler)
    summary = run_basins(args.store, grids, workers=args.workers if args.scheduler is None else 1,
                         scheduler=args.scheduler, progress=not args.no_progress, student=args.student)
    if not args.quiet or summary.failed:
        print(f"attnphase basins: {summary.line()}", file=sys.stderr)
    # The answer: the fraction of starts in each basin, per point of this run's grid.
    from attnphase.experiments.store import load_results

    fr = basin_fractions(load_results(args.store))
    if len(fr):
        keep = fr["alpha"].isin([float(a) for g in grids for a in g.alphas]) & fr["omega"].isin(
            [float(w) for g in grids for w in g.omegas]) & fr["d"].isin([int(d) for g in grids for d in g.d])
        if "student" in fr.columns:
            keep &= fr["student"] == args.student
        if "init_scale" in fr.columns:
            scales = {float(g.options.get("init_scale", -1.0)) for g in grids}
            keep &= fr["init_scale"].astype(float).isin(scales)
        records = fr[keep].to_dict("records")
        emit(records, args, FRACTION_COLUMNS if not (args.json or args.csv) else None)
    return 1 if summary.failed else 0
