"""`attnphase reproduce`: the one-command reproduction (figures and report)."""

from __future__ import annotations

import argparse

from attnphase.cli.common import (
    check_output_dir,
    positive_int,
)


def _reproduce(args: argparse.Namespace) -> int:
    from attnphase.reproduce import reproduce

    check_output_dir(args.out, "--out")
    path = reproduce(args.out, quick=args.quick, workers=args.workers, progress=not args.no_progress)
    print(path)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    r = subparsers.add_parser(
        "reproduce",
        help="theory, simulations, all figures and a markdown report in one directory (resumable)",
        description="Compute the omega = 0.3 curves, the transition and the phase diagram, run a set of "
        "simulations into DIR/results.sqlite, draw figures (a)-(h) (incl. basins of attraction from random "
        "starts) and write DIR/report.md. Rerunning "
        "reuses the theory results and skips the simulations stored in DIR/results.sqlite. --quick: a few "
        "minutes on a laptop.",
    )
    r.add_argument("--out", required=True, metavar="DIR", help="output directory (created if missing)")
    r.add_argument("--quick", action="store_true", help="small grids, fast precision, d = 100")
    r.add_argument("--workers", type=positive_int, default=1,
                   help="parallel processes for the theory jobs and the simulations (default 1; --quick "
                   "takes about 3 minutes with 2)")
    r.add_argument("--no-progress", action="store_true", help="no progress bars (see also --quiet)")
    r.set_defaults(func=_reproduce)
