"""`attnphase theory` and `attnphase baseline`."""

from __future__ import annotations

import argparse
import sys

from attnphase.cli.common import add_output_args, add_setting_args, emit, parse_spec, setting_from_args
from attnphase.cli.simulate import STUDENTS
from attnphase.errors import InputError

THEORY_COLUMNS = ["alpha", "omega", "branch", "q", "m", "theta", "V", "train_loss", "train_loss_err", "test_error",
                  "test_error_err", "converged", "iterations", "status", "warnings"]


def _table_row(fp) -> dict:
    """Scalars for the table: for L = 2, r = r* = 1 today's q, |m|, |theta|, V; in general tr(q)/r, the root mean
    square over tokens of |m_l|, the largest singular value of theta, tr(V)/r (the JSON has the matrices)."""
    d = fp.to_dict()
    d.update(fp.summary())
    d["warnings"] = len(fp.warnings)
    return d


def _flat_row(d: dict) -> dict:
    """CSV: nested quantities as JSON strings, the setting and full arrays left to --json."""
    import json

    out = {k: v for k, v in d.items() if k not in ("setting", "overlaps", "hats")}
    for k, v in out.items():
        if isinstance(v, list | dict):
            out[k] = json.dumps(v)
    return out


def _curve(task: tuple) -> list:
    """One branch's curve (module level: picklable for the process pool)."""
    from attnphase import theory

    setting, alphas, branch, precision, seed, multistart = task
    return theory.solve_curve(setting, alphas, branch, precision, seed=seed, multistart=multistart)


def _theory(args: argparse.Namespace) -> int:
    from attnphase.theory import global_minimum
    from attnphase.theory.state_evolution.curves import curve_pieces
    from attnphase.theory.state_evolution.precision import get_precision
    from attnphase.theory.state_evolution.results import branches_for, check_theory_setting

    get_precision(args.precision)
    alphas = parse_spec(args.alpha, "--alpha")
    omegas = parse_spec(args.omega, "--omega")
    for a in alphas:
        if not a > 0:
            raise InputError(f"--alpha: values must be > 0, got {a:g}")
    settings = [check_theory_setting(setting_from_args(args, omega=w).replace(student=args.student))
                for w in omegas]  # all checked before work
    table = not (args.json or args.csv)
    branches = list(branches_for(settings[0])) if args.branch in ("all", "global") else [args.branch]
    if args.branch == "mixed" and "mixed" not in branches_for(settings[0]):
        raise InputError("--branch mixed needs a tied student of rank r >= 2 (--rank 2)")
    multistart = False if args.single_start else None
    from attnphase.parallel import check_workers, map_tasks

    check_workers(args.workers)
    # One continuation per (omega, branch, piece of the alpha grid: theory.curve_pieces), one process each (the
    # package's pool).
    pieces = {b: curve_pieces(alphas, b) for b in branches}
    tasks = [(setting, piece, b, args.precision, args.seed, multistart) for setting in settings for b in branches
             for piece in pieces[b]]
    done = iter(map_tasks(_curve, tasks, workers=args.workers, progress=not args.no_progress,
                          desc="theory (fixed points)", unit="curve"))
    records = []
    for _ in settings:
        curves = {b: [fp for _ in pieces[b] for fp in next(done)] for b in branches}
        for i in range(len(alphas)):
            if args.branch == "global":
                pts = {b: curves[b][i] for b in branches}
                try:
                    fp = global_minimum(pts)
                except ValueError as exc:
                    # No valid branch here: still one row, marked not converged, from the first branch tried.
                    fp = pts[branches[0]]
                    print(f"warning: alpha={fp.alpha:g}: {exc}", file=sys.stderr)
                d = _table_row(fp) if table else fp.to_dict()
                d["branch"] = f"global ({fp.branch})" if table else fp.branch
                d["global"] = True
                records.append(d)
            else:
                records.extend(_table_row(curves[b][i]) if table else curves[b][i].to_dict() for b in branches)
    if args.csv:
        records = [_flat_row(r) for r in records]
    emit(records, args, THEORY_COLUMNS if table else None)
    bad = [r for r in records if not r["converged"]]
    if bad:
        print(f"warning: {len(bad)} fixed point(s) are not converged results (see 'converged' and 'status')",
              file=sys.stderr)
    return 0


def _baseline(args: argparse.Namespace) -> int:
    from attnphase.theory import linear_baseline

    records = []
    for w in parse_spec(args.omega, "--omega"):
        b = linear_baseline(setting_from_args(args, omega=w))
        records.append(b.to_dict())
    emit(records, args, ["omega", "test_error_linear", "test_error_linear_err"] if not args.json else None)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("theory", help="fixed points of the asymptotic equations (any L, ranks r and r*, positions)",
                       description="Solve the self-consistent equations; SPEC = number, comma list or start:stop:num. "
                                   "Table columns q, m, theta, V are scalar summaries (tr(q)/r, rms over tokens of "
                                   "|m_l|, largest singular value of theta, tr(V)/r; for L = 2, r = r* = 1 the "
                                   "study's q, |m|, |theta|, V); --json gives the matrices.")
    add_setting_args(p)
    p.add_argument("--alpha", default="1.5", help="sample complexity alpha = n/d: SPEC (default 1.5)")
    p.add_argument("--branch", default="all",
                   choices=["positional", "semantic", "agnostic", "mixed", "free", "global", "all"],
                   help="which fixed point(s); all: every branch the setting has (positional, semantic, agnostic, and "
                        "for --rank >= 2 mixed: one student direction positional, another semantic); global: the one "
                        "with the lowest train_loss among them; free: m and theta both free from the default start "
                        "(default all)")
    p.add_argument("--multistart", action="store_true",
                   help="kept for old scripts: the set of starts each branch needs is now always tried (see "
                        "--single-start)")
    p.add_argument("--single-start", action="store_true",
                   help="cheaper: solve each branch from its default start only (no structured starts, no internal "
                        "continuation); may miss fixed points the full set finds")
    p.add_argument("--precision", default="default", help="fast | default | high (integration points, tolerance)")
    p.add_argument("--seed", type=int, default=0, help="seed of the Sobol scramblings")
    p.add_argument("--workers", type=int, default=2,
                   help="processes over the curves (one per omega and branch; default 2, 1: in-process)")
    p.add_argument("--student", default="tied", choices=STUDENTS,
                   help="tied Q = K (default) or untied Q, K: the equations at field rank 2r with the bilinear scores; "
                        "q, m, theta are then the query-key overlaps (docs/untied.md)")
    add_output_args(p)
    p.set_defaults(func=_theory)

    b = sub.add_parser("baseline", help="asymptotic test error of the linear positional baseline")
    add_setting_args(b)
    add_output_args(b)
    b.set_defaults(func=_baseline)
