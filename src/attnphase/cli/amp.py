"""`attnphase amp`: GAMP at finite d on sampled data (the Bayes-optimal algorithm)."""

from __future__ import annotations

import argparse
import json
import sys

from attnphase.cli.bayes import AMP_COLUMNS, add_model_options, bayes_setting, open_unit, unit_interval
from attnphase.cli.common import (
    add_output_args,
    emit,
    nonnegative_int,
    positive_int,
)


def _amp(args: argparse.Namespace) -> int:
    from attnphase.theory.bayes.amp import check_amp_args, run_amp

    setting = bayes_setting(args, args.omega)
    check_amp_args(setting, args.d, args.alpha, args.seed, args.delta, args.n_test, args.max_iter, args.init, args.q0)
    r = run_amp(setting, args.d, args.alpha, seed=args.seed, delta=args.delta, n_test=args.n_test,
                max_iter=args.max_iter, init=args.init, q0=args.q0)
    rec = r.to_dict(history=args.history)
    if args.json:
        sys.stdout.write(json.dumps(rec, indent=2) + "\n")
    else:
        rec.pop("history", None)
        rec["warnings"] = ",".join(rec.pop("warning_codes"))
        emit([rec], args, AMP_COLUMNS if not args.csv else None)
    if not r.converged:
        print(f"warning: GAMP status {r.status.value} after {r.iterations} iterations", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser("amp", help="GAMP at finite d on sampled data (Bayes-optimal algorithm)",
                       description="GAMP for the block sign-retrieval channel on the package's sampled data, after "
                                   "reading the teacher's fields off (x, y) (docs/bayes.md).")
    a.add_argument("--d", type=positive_int, required=True, help="dimension d")
    a.add_argument("--alpha", type=float, required=True, help="sample complexity alpha = n/d")
    a.add_argument("--omega", type=unit_interval, default=0.3, help="positional weight omega in [0, 1) (default 0.3)")
    a.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the sampled problem (default 0)")
    a.add_argument("--n-test", type=positive_int, default=1000, help="test sequences (default 1000)")
    a.add_argument("--max-iter", type=positive_int, default=500, help="GAMP iteration limit (default 500)")
    a.add_argument("--init", choices=["random", "informative"], default="random",
                   help="start: random (small, uninformative; default) or informative (overlap --q0)")
    a.add_argument("--q0", type=open_unit, default=0.1, help="overlap of the informative start (default 0.1)")
    a.add_argument("--history", action="store_true", help="include the per-iteration history in the JSON")
    add_model_options(a)
    add_output_args(a)
    a.set_defaults(func=_amp)
