"""`attnphase simulate`: finite-d experiments (train the attention layer, measure it); options shared with
`attnphase compare`."""

from __future__ import annotations

import argparse
from typing import Any

from attnphase.cli.common import (
    add_output_args,
    add_setting_args,
    emit,
    nonnegative_int,
    parse_int_spec,
    positive_float,
    positive_int,
    setting_from_args,
)
from attnphase.errors import InputError

SIM_COLUMNS = ("d", "n", "alpha", "omega", "init", "optimizer", "seed", "q", "m", "theta", "train_loss",
               "test_error", "test_error_linear", "converged", "seconds")
COMPARED = ("m", "theta", "q", "train_loss", "test_error")
# Copies of attnphase.experiments.simulation.INITS / OPTIMIZERS / STUDENTS (a test keeps them equal), the one set every
# training command's parser uses: importing the simulation package here would import torch every time any
# subcommand's parser is built.
INITS = ("positional", "semantic", "random", "positional_unit")
OPTIMIZERS = ("gd", "adam", "lbfgs")
STUDENTS = ("tied", "untied")


def add_training_options(p: argparse.ArgumentParser, optimizer_default: str) -> None:
    p.add_argument("--d", type=positive_int, required=True, help="dimension d (>= 2)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=optimizer_default,
                   help=f"gd (lr 0.15, 5000 steps), adam (lr 0.01, 2500 steps) or lbfgs "
                        f"(default {optimizer_default})")
    p.add_argument("--n-test", type=positive_int, default=10000, help="test-set size (default 10000)")
    p.add_argument("--steps", type=positive_int, default=None, help="optimiser steps (lbfgs: maximum iterations)")
    p.add_argument("--lr", type=positive_float, default=None, help="learning rate (default: the optimiser's)")
    p.add_argument("--gtol", type=float, default=None,
                   help="convergence tolerance on the rms gradient ||grad R||/sqrt(d r)")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="floating-point precision of the training (default float64)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="default: cuda if available, else cpu")
    p.add_argument("--student", choices=STUDENTS, default="tied",
                   help="tied query = key Q (the study's, default) or untied Q and K, each with the l2 penalty")
    p.add_argument("--init-scale", type=float, default=None,
                   help="standard deviation of the entries of a random start (default 0.1)")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("simulate", help="train the attention layer at finite d and measure it",
                              description="Train the attention layer on n = round(alpha d) samples "
                                          "(one run per seed) and report overlaps and errors.")
    add_training_options(p, "gd")
    p.add_argument("--alpha", type=positive_float, required=True, help="sample complexity alpha = n/d")
    add_setting_args(p)
    p.add_argument("--init", choices=INITS, default="positional", help="initialisation (default positional)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--seed", type=nonnegative_int, default=None, help="one seed (default 0)")
    g.add_argument("--seeds", type=str, default=None, help="seeds: 3, 0,1,5 or 0:4")
    add_output_args(p)
    p.set_defaults(func=run_simulate)


def omega_of(args: argparse.Namespace) -> float:
    try:
        return float(args.omega)
    except ValueError:
        raise InputError(f"--omega: expected one number, got {args.omega!r}") from None


def training_options(args: argparse.Namespace) -> dict[str, Any]:
    return {"steps": args.steps, "lr": args.lr, "gtol": args.gtol, "student": args.student,
            "init_scale": args.init_scale}


def run_simulate(args: argparse.Namespace) -> int:
    from attnphase.experiments.simulation import simulate

    setting = setting_from_args(args, omega=omega_of(args))
    seeds = parse_int_spec(args.seeds, "--seeds") if args.seeds is not None else [args.seed or 0]
    from attnphase.progress import progress_bar

    records = []
    for seed in progress_bar(seeds, label=f"simulate d={args.d} alpha={args.alpha:g}", unit="run",
                             enabled=not args.no_progress):
        res = simulate(setting, args.d, args.alpha, init=args.init, optimizer=args.optimizer, seed=seed,
                       n_test=args.n_test, dtype=args.dtype, device=args.device, **training_options(args))
        records.append(res.to_dict())
    if not args.json:
        # Table and CSV: a matrix overlap (L > 2, r > 1, r* > 1) as the theory table's scalar summary, not a nested
        # list (--json keeps the matrices).
        records = [_scalar_row(r) for r in records]
    emit(records, args, columns=SIM_COLUMNS)
    return 0


def _summary(name: str, value: Any) -> Any:
    """The theory table's scalar summaries: tr(q)/r, the rms over tokens of |m_l|, the largest singular value of
    theta.  Scalars pass through."""
    import numpy as np

    if not isinstance(value, list | tuple):
        return value
    a = np.atleast_2d(np.asarray(value, dtype=float))
    if name == "q":
        return float(np.trace(a) / a.shape[0])
    if name == "m":
        return float(np.sqrt(np.mean(np.sum(a * a, axis=1))))
    return float(np.linalg.svd(a, compute_uv=False)[0])


def _scalar_row(rec: dict[str, Any]) -> dict[str, Any]:
    return {**rec, **{k: _summary(k, rec.get(k)) for k in ("q", "m", "theta") if k in rec}}




