"""`attnphase export`: a store's rows as CSV."""

from __future__ import annotations

import argparse
import sys

from attnphase.cli.common import (
    check_input_store,
    check_output_file,
)


def _export(args: argparse.Namespace) -> int:
    from attnphase.experiments.store import aggregate, load_results

    check_input_store(args.store)
    # Never the store itself (or a link to it), never another store: `--csv ok.sqlite` used to replace the store.
    check_output_file(args.csv, "--csv", inputs=[("--store", args.store)])
    df = load_results(args.store)
    if args.aggregate:
        df = aggregate(df)
    if args.csv == "-":
        df.to_csv(sys.stdout, index=False)
    else:
        df.to_csv(args.csv, index=False)
        if not args.quiet:
            print(f"attnphase export: {len(df)} rows -> {args.csv}", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    e = subparsers.add_parser(
        "export",
        help="write a results store as CSV",
        description="Write every stored result as CSV, one row per grid point, with the documented column "
        "names (see the docs' page on reported quantities).",
    )
    e.add_argument("--store", required=True, help="SQLite results file written by `attnphase sweep`")
    e.add_argument("--csv", required=True, metavar="OUT", help="output CSV file ('-' for standard output)")
    e.add_argument("--aggregate", action="store_true",
                   help="one row per (d, alpha, omega, init, ...) with mean and standard error over seeds")
    e.set_defaults(func=_export)
