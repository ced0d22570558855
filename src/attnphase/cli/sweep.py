"""`attnphase sweep`: a resumable grid of finite-d simulations into an SQLite store."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from attnphase.cli.common import (
    CLIError,
    add_setting_args,
    check_store_path,
    grid_A,
    parse_int_spec,
    parse_spec,
    positive_int,
)
from attnphase.cli.simulate import INITS, OPTIMIZERS, STUDENTS
from attnphase.errors import InputError

DEVICES = ("cpu", "cuda")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="run simulations over a grid into a resumable SQLite store",
        description="Run every grid point d x alpha x omega x init x seed not yet in the store. Each "
        "finished point is committed at once; rerun the same command to resume after an interruption.",
    )
    p.add_argument("--store", required=True, help="SQLite results file (created if missing)")
    p.add_argument("--d", required=True,
                   help="dimension(s): an integer or a comma list (finite-size scaling)")
    p.add_argument("--alphas", required=True,
                   help="sample complexities: number, comma list or start:stop:num")
    p.add_argument("--omegas", required=True,
                   help="positional weights: number, comma list or start:stop:num")
    p.add_argument("--inits", default="positional,semantic",
                   help=f"comma list of initialisations, each one of {', '.join(INITS)} (default positional,semantic)")
    p.add_argument("--seeds", default="0", help="integer, comma list or start:stop inclusive (default 0)")
    p.add_argument("--optimizer", default="gd", choices=OPTIMIZERS,
                   help=f"training algorithm: {', '.join(OPTIMIZERS)} (default gd)")
    p.add_argument("--n-test", type=positive_int, default=10000, help="fresh test samples per run (default 10000)")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="extra option for simulate (e.g. steps=500, lr=0.15, dtype=float32); repeatable; "
                   "part of each point's identity")
    p.add_argument("--device", default=None, choices=DEVICES,
                   help="torch device for the simulations: cpu or cuda (default: cuda when available); not part "
                   "of a point's identity")
    p.add_argument("--student", default="tied", choices=STUDENTS,
                   help="tied query = key (default) or untied Q and K (part of each point's identity)")
    add_setting_args(p, omega=False)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--workers", type=positive_int, default=1, help="local worker processes (default 1: in-process)")
    g.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="address of a running Dask distributed scheduler, e.g. tcp://host:8786")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (--quiet also hides the summary)")
    # Hidden: swap the experiment for another module-level function (tests use a fast fake).
    p.add_argument("--task", default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=_sweep)


def _parse_opts(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key.isidentifier():
            raise InputError(f"--opt: expected KEY=VALUE, got {item!r}")
        try:
            # JSON reads numbers, booleans and lists; anything else is a plain string (e.g. float32).
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        out[key] = value
    return out


def _grid_from_args(args: argparse.Namespace):
    from attnphase.experiments.sweep import Grid

    ds = parse_int_spec(args.d, "--d")
    inits = [s.strip() for s in str(args.inits).split(",") if s.strip()]
    if not inits:
        raise InputError("--inits: empty list")
    return Grid(
        d=tuple(ds),
        alphas=tuple(parse_spec(args.alphas, "--alphas")),
        omegas=tuple(parse_spec(args.omegas, "--omegas")),
        inits=tuple(inits),
        seeds=tuple(parse_int_spec(args.seeds, "--seeds")),
        optimizer=args.optimizer,
        n_test=args.n_test,
        sigma=args.sigma,
        lam=args.lam,
        A=grid_A(args),
        options={**_parse_opts(args.opt), **({"student": args.student} if args.student != "tied" else {})},
        device=args.device,
    )


def check_simulation_grid(grid, workers: int = 1, student: str = "tied") -> None:  # noqa: ANN001 - a sweep.Grid
    """Everything `simulate` would refuse at every grid point, refused once before the first point runs:
    unknown inits, optimizer options that are unknown or out of range, a device that is not there, and
    runs too large for this machine's memory."""
    from attnphase.experiments.simulation import training
    from attnphase.experiments.simulation.sampling import resolve_device

    bad = [i for i in grid.inits if i not in INITS]
    if bad:
        raise CLIError(f"--inits: unknown initialisation {bad[0]!r} (choose from {', '.join(INITS)})")
    options = dict(grid.options)
    dtype = options.pop("dtype", "float64")
    if dtype not in ("float64", "float32"):
        raise CLIError(f"--opt dtype: expected float64 or float32, got {dtype!r}")
    options.pop("student", None)
    ridge = options.pop("linear_ridge", 0.0)
    if isinstance(ridge, bool) or not isinstance(ridge, int | float) or not ridge >= 0:
        raise CLIError(f"--opt linear_ridge: expected a number >= 0, got {ridge!r}")
    try:
        training.optimizer_options(grid.optimizer, options)
    except ValueError as exc:
        raise CLIError(f"--opt: {exc}") from None
    try:
        resolve_device(grid.device or "cpu")
    except ValueError as exc:
        raise CLIError(f"--device: {exc}") from None
    try:
        from attnphase.experiments.simulation.basins import check_grids_memory

        check_grids_memory([grid], workers, student)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _sweep(args: argparse.Namespace) -> int:
    from attnphase.experiments.sweep import load_task, run_sweep

    check_store_path(args.store)  # a foreign or damaged file is refused before any point runs
    grid = _grid_from_args(args)
    task = load_task(args.task) if args.task else None
    if task is None:
        check_simulation_grid(grid, workers=args.workers if args.scheduler is None else 1, student=args.student)
    if args.scheduler is not None:
        from attnphase.experiments.sweep import check_scheduler

        check_scheduler(args.scheduler)
    summary = run_sweep(args.store, grid, workers=args.workers, scheduler=args.scheduler, task=task,
                        progress=not args.no_progress)
    if not args.quiet or summary.failed:
        print(f"attnphase sweep: {summary.line()}", file=sys.stderr)
    # Failed points are retried by a rerun; a non-zero status tells scripts the store is incomplete.
    return 1 if summary.failed else 0


