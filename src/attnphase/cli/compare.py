"""`attnphase compare`: simulations from both inits next to the theory's branches."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from attnphase.cli.common import (
    add_allow_long,
    add_output_args,
    add_setting_args,
    emit,
    parse_int_spec,
    parse_spec,
    setting_from_args,
)
from attnphase.cli.simulate import COMPARED, add_training_options, omega_of, training_options
from attnphase.errors import InputError


def run_compare(args: argparse.Namespace) -> int:
    from attnphase.experiments.simulation import simulate

    try:
        from attnphase.theory import linear_baseline, solve
    except ImportError as exc:
        raise InputError(f"the theory engine is not available ({exc})") from None
    setting = setting_from_args(args, omega=omega_of(args))
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
    note = check_theory_size(setting.replace(student=args.student), 2 * len(alphas), args.precision, 1,
                             allow_long=args.allow_long)
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
                             n_test=args.n_test, dtype=args.dtype, device=args.device, **training_options(args))
                    for s in seeds]
            # The theory's setting names the student (the simulations take it as an option).
            fp = solve(setting.replace(student=args.student), alpha, branch=init, precision=args.precision)
            rec: dict[str, Any] = {"alpha": alpha, "omega": setting.omega, "init": init, "d": args.d,
                                   "n": runs[0].n, "seeds": len(runs), "optimizer": args.optimizer,
                                   "converged": sum(r.converged for r in runs)}
            summ = [r.summary() for r in runs]  # (q, m, theta with the theory's definitions)
            for name in (*COMPARED, "test_error_linear"):
                mean, se = _mean_se([s[name] if name in s else float(getattr(r, name))
                                     for r, s in zip(runs, summ, strict=True)])
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


def _mean_se(values: list[float]) -> tuple[float, float | None]:
    k = len(values)
    mean = sum(values) / k
    if k < 2:
        return mean, None
    var = sum((v - mean) ** 2 for v in values) / (k - 1)
    return mean, math.sqrt(var / k)


def register(subparsers: argparse._SubParsersAction) -> None:
    c = subparsers.add_parser("compare", help="simulations from both inits next to the theory's branches",
                              description="For each alpha and seed, train from the positional and the "
                                          "semantic start; print mean +- standard error next to the "
                                          "fixed point of the matching theory branch.")
    add_training_options(c, "gd")
    c.add_argument("--alpha", type=str, required=True, help="alphas: 1.5, 0.5,1,2 or 0.5:2:4")
    add_setting_args(c)
    c.add_argument("--seeds", type=str, default="0:2", help="seeds (default 0:2)")
    c.add_argument("--precision", type=str, default="default", help="theory precision (default 'default')")
    add_allow_long(c)
    add_output_args(c)
    c.set_defaults(func=run_compare)
