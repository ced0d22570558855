"""`attnphase bayes`: the Bayes-optimal state evolution and its thresholds; options shared with `attnphase amp`.

Both check every option before any work (one line, exit code 2): omega in [0, 1], alpha > 0, L >= 2, r* = 1,
delta >= 0, and for amp the memory a run needs (GAMP holds the n L d training tokens twice and the test tokens).
"""

from __future__ import annotations

import argparse
import json
import sys

from attnphase.cli.common import (
    CLIError,
    add_output_args,
    emit,
    nonnegative_float,
    parse_spec,
    positive_int,
)

BAYES_COLUMNS = ["alpha", "omega", "L", "delta", "overlap", "test_error", "overlap_amp", "test_error_amp",
                 "test_error_linear", "free_entropy", "phase", "status", "converged", "warnings"]
AMP_COLUMNS = ["d", "n", "alpha", "omega", "L", "seed", "init", "overlap", "self_overlap", "test_error",
               "test_error_linear_measured",
               "test_error_linear", "iterations", "status", "converged", "seconds"]


def unit_interval(text: str) -> float:
    from attnphase.cli.common import _number

    v = float(_number(text, float))
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"must lie in [0, 1], got {text!r}")
    return v


def open_unit(text: str) -> float:
    v = unit_interval(text)
    if not 0.0 < v < 1.0:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1), got {text!r}")
    return v


def _block(text: str) -> int:
    v = positive_int(text)
    if v < 2:
        raise argparse.ArgumentTypeError(f"must be an integer >= 2 (tokens per sequence), got {text!r}")
    return v


def bayes_setting(args: argparse.Namespace, omega: float):
    """The Setting of bayes / amp: --A read and checked against --L by the rule of every command (read_A, then
    Setting: a given A must agree with --L; none given is the default for L)."""
    from attnphase.cli.common import read_A
    from attnphase.setting import Setting

    return Setting(omega=omega, sigma=args.sigma, A=read_A(args), L=args.L)


def _bayes(args: argparse.Namespace) -> int:
    from attnphase.theory.bayes import bayes_curve, thresholds
    from attnphase.theory.bayes.solve import check_bayes_setting

    omegas = parse_spec(args.omega, "--omega")
    settings = [check_bayes_setting(bayes_setting(args, w)) for w in omegas]
    if args.thresholds:
        if args.alpha is not None:
            raise CLIError("--thresholds takes no --alpha (the thresholds are searched over all alpha)")
        results = [thresholds(s.L, s.omega, args.delta) for s in settings]
        out = [r.to_dict() for r in results]
        if args.json:
            sys.stdout.write(json.dumps(out[0] if len(out) == 1 else out, indent=2) + "\n")
        elif args.csv:
            emit(out, args)
        else:  # one row per threshold
            rows = [{"omega": r.omega, "L": r.L, "delta": r.delta, "name": c.name, "value": c.value, "lo": c.lo,
                     "hi": c.hi, "kind": c.kind, "search": c.search, "reason": c.reason}
                    for r in results for c in r.critical.values()]
            emit(rows, args)
        return 0
    alphas = parse_spec(args.alpha if args.alpha is not None else "0.05:1:20", "--alpha")
    records = [p.to_dict() for s in settings for p in bayes_curve(s, alphas, args.delta)]
    table = not (args.json or args.csv)
    if not args.json:
        for r in records:
            r["warnings"] = ",".join(r.pop("warning_codes"))
    emit(records, args, BAYES_COLUMNS if table else None)
    return 0




def add_model_options(p: argparse.ArgumentParser) -> None:
    from attnphase.cli.common import DEFAULT_A_TEXT

    p.add_argument("--sigma", type=float, default=0.5, help="token standard deviation (default 0.5)")
    p.add_argument("--A", type=str, default=None,
                   help='positional attention matrix "a11,a12;a21,a22" or FILE, as for `attnphase theory` (default: '
                        f"the study's {DEFAULT_A_TEXT} for L = 2, (1 - a) I + (a/L) 1 1^T with a = 0.8 for L > 2)")
    p.add_argument("--L", type=_block, default=None, help="tokens per sequence (default 2, or the size of --A)")
    p.add_argument("--delta", type=nonnegative_float, default=0.0,
                   help="noisy variant: noise variance on the teacher's fields relative to their variance sigma^2 "
                        "(default 0: the noiseless model)")


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bayes", help="Bayes-optimal overlap, test error and thresholds (state evolution)",
                       description="Bayes-optimal limit of the study's teacher (rank 1, omega, A, sigma known; "
                                   "docs/bayes.md): one row per alpha, or with --thresholds the weak-recovery, "
                                   "information-theoretic and algorithmic thresholds.  overlap is the normalised "
                                   "q = E[Q_post . Q*] / d in [0, 1].")
    b.add_argument("--omega", type=str, default="0.3", help="positional weight omega in [0, 1]: SPEC (default 0.3)")
    b.add_argument("--alpha", type=str, default=None, help="sample complexity alpha = n/d: SPEC (default 0.05:1:20)")
    b.add_argument("--thresholds", action="store_true", help="print the thresholds instead of a curve")
    add_model_options(b)
    add_output_args(b)
    b.set_defaults(func=_bayes)
