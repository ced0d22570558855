"""`attnphase theory` and `attnphase baseline`."""

from __future__ import annotations

import argparse
import sys

from attnphase.cli.common import add_output_args, add_setting_args, emit, parse_spec, setting_from_args

THEORY_COLUMNS = ["alpha", "omega", "branch", "q", "m", "theta", "V", "train_loss", "train_loss_err", "test_error",
                  "test_error_err", "converged", "iterations", "status"]


def _theory(args: argparse.Namespace) -> int:
    from attnphase.theory import BRANCHES, global_minimum, solve_curve
    from attnphase.theory.state_evolution import get_precision

    get_precision(args.precision)
    alphas = parse_spec(args.alpha, "--alpha")
    omegas = parse_spec(args.omega, "--omega")
    branches = list(BRANCHES) if args.branch in ("all", "global") else [args.branch]
    from attnphase.progress import progress_bar
    from attnphase.setting import check_alpha

    records = []
    settings = []
    for a in alphas:  # every input checked before the first fixed point is computed
        check_alpha(a)
    for w in omegas:
        settings.append(setting_from_args(args, omega=w))
        settings[-1].require_study_geometry()
    bar = progress_bar(label="theory (fixed points)", total=len(omegas) * len(branches), unit="curve",
                       enabled=not args.no_progress)
    for setting in settings:
        curves = {}
        for b in branches:
            try:
                curves[b] = solve_curve(setting, alphas, b, args.precision, seed=args.seed)
            except BaseException:
                bar.close()
                raise
            bar.update(1)
        for i in range(len(alphas)):
            if args.branch == "global":
                try:
                    fp = global_minimum({b: curves[b][i] for b in branches})
                except ValueError as exc:
                    print(f"warning: alpha={curves[branches[0]][i].alpha:g}: {exc}", file=sys.stderr)
                    continue
                d = fp.to_dict()
                d["branch"] = f"global ({fp.branch})" if not (args.json or args.csv) else fp.branch
                d["global"] = True
                records.append(d)
            else:
                records.extend(curves[b][i].to_dict() for b in branches)
    bar.close()
    emit(records, args, THEORY_COLUMNS if not (args.json or args.csv) else None)
    bad = [r for r in records if not r["converged"]]
    if bad:
        print(f"warning: {len(bad)} fixed point(s) did not converge (see 'converged' and 'status')", file=sys.stderr)
    return 0


def _baseline(args: argparse.Namespace) -> int:
    from attnphase.theory import linear_baseline

    records = []
    for w in parse_spec(args.omega, "--omega"):
        b = linear_baseline(setting_from_args(args, omega=w))
        records.append({"omega": b.omega, "test_error_linear": b.test_error_linear,
                        "test_error_linear_err": b.error, "mean_attention": b.mean_attention.tolist()})
    emit(records, args, ["omega", "test_error_linear", "test_error_linear_err"] if not args.json else None)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("theory", help="fixed points of the asymptotic equations",
                       description="Solve the self-consistent equations; SPEC = number, comma list or start:stop:num.")
    add_setting_args(p)
    p.add_argument("--alpha", default="1.5", help="sample complexity alpha = n/d: SPEC (default 1.5)")
    p.add_argument("--branch", default="all", choices=["positional", "semantic", "agnostic", "global", "all"],
                   help="which fixed point(s); global: the branch with the lower train_loss (default all)")
    p.add_argument("--precision", default="default", help="fast | default | high (integration points, tolerance)")
    p.add_argument("--seed", type=int, default=0, help="seed of the Sobol scramblings")
    add_output_args(p)
    p.set_defaults(func=_theory)

    b = sub.add_parser("baseline", help="asymptotic test error of the linear positional baseline")
    add_setting_args(b)
    add_output_args(b)
    b.set_defaults(func=_baseline)
