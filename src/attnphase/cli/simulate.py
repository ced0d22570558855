"""`attnphase simulate` (finite-d experiments) and `attnphase compare` (experiments next to theory)."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from attnphase.cli.common import (
    add_output_args,
    add_setting_args,
    emit,
    nonnegative_int,
    parse_int_spec,
    parse_spec,
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


def _add_training_args(p: argparse.ArgumentParser, optimizer_default: str) -> None:
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
    _add_training_args(p, "gd")
    p.add_argument("--alpha", type=positive_float, required=True, help="sample complexity alpha = n/d")
    add_setting_args(p)
    p.add_argument("--init", choices=INITS, default="positional", help="initialisation (default positional)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--seed", type=nonnegative_int, default=None, help="one seed (default 0)")
    g.add_argument("--seeds", type=str, default=None, help="seeds: 3, 0,1,5 or 0:4")
    add_output_args(p)
    p.set_defaults(func=run_simulate)

    c = subparsers.add_parser("compare", help="simulations from both inits next to the theory's branches",
                              description="For each alpha and seed, train from the positional and the "
                                          "semantic start; print mean +- standard error next to the "
                                          "fixed point of the matching theory branch.")
    _add_training_args(c, "gd")
    c.add_argument("--alpha", type=str, required=True, help="alphas: 1.5, 0.5,1,2 or 0.5:2:4")
    add_setting_args(c)
    c.add_argument("--seeds", type=str, default="0:2", help="seeds (default 0:2)")
    c.add_argument("--precision", type=str, default="default", help="theory precision (default 'default')")
    add_output_args(c)
    c.set_defaults(func=run_compare)


def _omega(args: argparse.Namespace) -> float:
    try:
        return float(args.omega)
    except ValueError:
        raise InputError(f"--omega: expected one number, got {args.omega!r}") from None


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {"steps": args.steps, "lr": args.lr, "gtol": args.gtol, "student": args.student,
            "init_scale": args.init_scale}


def run_simulate(args: argparse.Namespace) -> int:
    from attnphase.experiments.simulation import simulate

    setting = setting_from_args(args, omega=_omega(args))
    seeds = parse_int_spec(args.seeds, "--seeds") if args.seeds is not None else [args.seed or 0]
    from attnphase.progress import progress_bar

    records = []
    for seed in progress_bar(seeds, label=f"simulate d={args.d} alpha={args.alpha:g}", unit="run",
                             enabled=not args.no_progress):
        res = simulate(setting, args.d, args.alpha, init=args.init, optimizer=args.optimizer, seed=seed,
                       n_test=args.n_test, dtype=args.dtype, device=args.device, **_options(args))
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


def _mean_se(values: list[float]) -> tuple[float, float | None]:
    k = len(values)
    mean = sum(values) / k
    if k < 2:
        return mean, None
    var = sum((v - mean) ** 2 for v in values) / (k - 1)
    return mean, math.sqrt(var / k)


def run_compare(args: argparse.Namespace) -> int:
    from attnphase.experiments.simulation import simulate

    try:
        from attnphase.theory import linear_baseline, solve
    except ImportError as exc:
        raise InputError(f"the theory engine is not available ({exc})") from None
    setting = setting_from_args(args, omega=_omega(args))
    alphas = parse_spec(args.alpha, "--alpha")
    seeds = parse_int_spec(args.seeds, "--seeds")
    from attnphase.setting import check_alpha

    for a in alphas:
        try:
            check_alpha(a)
        except ValueError as exc:
            raise InputError(f"--alpha: {exc}") from None
    from attnphase.theory.cost import check_theory_size
    from attnphase.theory.state_evolution.precision import get_precision

    get_precision(args.precision)  # before the first simulation
    note = check_theory_size(setting.replace(student=args.student), 2 * len(alphas), args.precision, 1)
    if note and not args.quiet:
        print(f"attnphase compare: note: {note}", file=sys.stderr)
    te_lin_theory = float(linear_baseline(setting).test_error_linear)
    from attnphase.progress import progress_bar

    wide: list[dict[str, Any]] = []
    long: list[dict[str, Any]] = []
    bar = progress_bar(label=f"compare d={args.d} (simulations + theory)", total=2 * len(alphas), unit="point",
                       enabled=not args.no_progress)
    for alpha in alphas:
        for init in ("positional", "semantic"):
            runs = [simulate(setting, args.d, alpha, init=init, optimizer=args.optimizer, seed=s,
                             n_test=args.n_test, dtype=args.dtype, device=args.device, **_options(args))
                    for s in seeds]
            # The theory's setting names the student (the simulations take it as an option).
            fp = solve(setting.replace(student=args.student), alpha, branch=init, precision=args.precision)
            rec: dict[str, Any] = {"alpha": alpha, "omega": setting.omega, "init": init, "d": args.d,
                                   "n": runs[0].n, "seeds": len(runs), "optimizer": args.optimizer,
                                   "converged": sum(r.converged for r in runs)}
            for name in (*COMPARED, "test_error_linear"):
                mean, se = _mean_se([float(getattr(r, name)) for r in runs])
                if name == "test_error_linear":
                    theory = te_lin_theory
                elif name in ("q", "m", "V", "theta"):
                    theory = float(fp.summary()[name])  # the theory's scalar summary of a matrix overlap
                else:
                    theory = float(getattr(fp, name))
                if not fp.converged:
                    theory = None  # a collapsed or unconverged fixed point is never compared against
                rec[name], rec[f"{name}_se"], rec[f"{name}_theory"] = mean, se, theory
                long.append({"alpha": alpha, "init": init, "quantity": name, "simulated": mean, "stderr": se,
                             "theory": theory,
                             "z": (mean - theory) / se if (se and theory is not None) else None})
            rec["theory_status"] = str(fp.status)
            rec["theory_converged"] = bool(fp.converged)
            wide.append(rec)
            long.append({"alpha": alpha, "init": init, "quantity": "(theory status)", "simulated": None,
                         "stderr": None, "theory": str(fp.status), "z": None})
            bar.update(1)
    bar.close()
    if args.json or args.csv:
        emit(wide, args)
    else:
        emit(long, args, columns=("alpha", "init", "quantity", "simulated", "stderr", "theory", "z"))
    return 0
