"""`attnphase reproduce`: the one-command reproduction (figures and report)."""

from __future__ import annotations

import argparse
import os

from attnphase.cli.common import (
    CLIError,
    check_not_input,
    check_output_dir,
    check_store_path,
    positive_int,
)

# The kinds of file reproduce writes into DIR besides its store (report, run log, figures): an existing SQLite file
# of such a name would be replaced, the check every command applies to its outputs.
_OUTPUT_SUFFIXES = (".md", ".json", ".png", ".pdf", ".csv")


def check_reproduce_dir(out: str) -> None:
    """DIR before any work: creatable, its store usable (ours or new), no SQLite file where an output goes."""
    from attnphase.reproduce import REPORT_NAME, RUNS_NAME, STORE_NAME

    check_output_dir(out, "--out")
    if not os.path.isdir(out):
        return
    check_store_path(os.path.join(out, STORE_NAME), "--out")
    for name in (REPORT_NAME, RUNS_NAME):
        if os.path.isdir(os.path.join(out, name)):
            raise CLIError(f"--out {out}: {name} is a directory, where the command writes a file")
    for entry in sorted(os.listdir(out)):
        if entry != STORE_NAME and entry.endswith(_OUTPUT_SUFFIXES):
            check_not_input(os.path.join(out, entry), "--out")


def _reproduce(args: argparse.Namespace) -> int:
    from attnphase.reproduce import reproduce

    check_reproduce_dir(args.out)
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
