"""`attnphase phase-diagram`: alpha_c(omega), alpha_l(omega) as CSV and figure."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attnphase.cli.common import (
    add_setting_args,
    check_input_store,
    check_not_input,
    check_output_dir,
    parse_spec,
)
from attnphase.cli.transition import OUTPUT_FILES, add_transition_options, check_transition_options, run_transitions


def _phase_diagram(args: argparse.Namespace) -> int:
    import pandas as pd

    omegas = parse_spec(args.omegas, "--omegas")
    check_transition_options(args, omegas, announce=False)  # the estimate is printed once all paths are checked
    # Every path before any work: the store must be one of ours (it used to be read only after the transition
    # was computed), the output directory creatable, and none of the files written into it the store.
    if args.store:
        check_input_store(args.store)
    check_output_dir(args.out, "--out")
    out = Path(args.out)
    for name in OUTPUT_FILES:
        check_not_input(out / name, "--out", [("--store", args.store)])
    if args.store:
        from attnphase.experiments.store import load_results

        load_results(args.store)  # readable as a store (schema, tables) before the work, not after
    out.mkdir(parents=True, exist_ok=True)
    results = run_transitions(args, omegas)
    df = pd.DataFrame([r.to_dict() for r in results])
    csv_path = out / "phase_diagram.csv"
    df.to_csv(csv_path, index=False)
    from attnphase.plots import plot_phase_diagram

    simulation = None
    if args.store:
        from attnphase.experiments.store import load_results

        simulation = load_results(args.store)
    paths = plot_phase_diagram(results, out / "phase_diagram.png", alpha_min=0.0, alpha_max=args.alpha_max,
                               simulation=simulation)
    bad = [r.omega for r in results if r.alpha_c is None]
    if bad:
        print(f"note: alpha_c not bracketed for omega = {', '.join(f'{w:g}' for w in bad)} (see 'note' in the CSV)",
              file=sys.stderr)
    print(f"wrote {csv_path}, " + ", ".join(str(p) for p in paths))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("phase-diagram", help="alpha_c(omega), alpha_l(omega): CSV and figure")
    add_setting_args(d, omega=False)
    d.add_argument("--omegas", default="0:0.45:10", help="SPEC of omegas (default 0:0.45:10)")
    d.add_argument("--store", default=None, help="sweep store for a heat map of simulated loss differences")
    d.add_argument("--out", required=True, help="output directory")
    add_transition_options(d, n_grid=10, xtol=0.02)
    d.set_defaults(func=_phase_diagram)
