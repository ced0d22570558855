"""Transition benchmark: per omega, the seconds, the number of fixed-point solves and map evaluations, and the
critical values with the widths of their intervals; then the whole phase diagram through the process pool.

    python benchmarks/transition.py [--omegas 0:0.45:10] [--workers 2] [--precision fast] [--n-grid 10]
                                    [--transition-workers 1]

The machine's core count and load are printed first: timings on a shared machine mean little without them.
"""

from __future__ import annotations

import argparse
import os
import time

from attnphase import Setting
from attnphase.cli.common import format_table, parse_spec
from attnphase.theory import phase_diagram, solve
from attnphase.theory.transition.driver import transition
from attnphase.theory.transition.records import NAMES


def _row(r, seconds: float | None = None) -> dict:
    row = {"omega": r.omega, "seconds": round(seconds if seconds is not None else r.seconds, 2),
           "cpu s": round(r.cpu_seconds, 2), "solves": r.solves, "map evals": r.map_evaluations}
    for name in NAMES:
        c = r.critical[name]
        short = name.replace("alpha_", "")
        row[short] = None if c.value is None else round(c.value, 4)
        row[f"{short} width"] = None if c.width is None else round(c.width, 4)
        row[f"{short} kind"] = c.kind if c.found else c.search
    return row


def main() -> None:  # (spawned workers re-import this file: keep the work under __main__)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--omegas", default="0:0.45:10")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--precision", default="fast")
    ap.add_argument("--n-grid", type=int, default=10)
    ap.add_argument("--xtol", type=float, default=0.02)
    ap.add_argument("--transition-workers", type=int, default=1,
                    help="processes inside each serial transition (2: the positional branch in a second one)")
    ap.add_argument("--skip-serial", action="store_true", help="only the pooled phase diagram")
    ap.add_argument("--skip-pool", action="store_true", help="only the serial transitions")
    args = ap.parse_args()
    omegas = parse_spec(args.omegas, "--omegas")
    print(f"cores: {os.cpu_count()}, load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    solve(Setting(), 1.0, "semantic", "fast")  # compile / load the kernel outside the timings

    if not args.skip_serial:
        rows = []
        for w in omegas:
            t = time.perf_counter()
            r = transition(Setting(omega=w), precision=args.precision, n_grid=args.n_grid, xtol=args.xtol,
                           workers=args.transition_workers)
            rows.append(_row(r, time.perf_counter() - t))
        print(f"\none transition per omega, one after the other ({args.precision}, n_grid = {args.n_grid}, xtol = "
              f"{args.xtol}, {args.transition_workers} process(es) each; 'cpu s' is the main process's):")
        print(format_table(rows, list(rows[0])))

    if args.skip_pool:
        return
    t = time.perf_counter()
    res = phase_diagram(Setting(), omegas, precision=args.precision, workers=args.workers, progress=False,
                        n_grid=args.n_grid, xtol=args.xtol)
    dt = time.perf_counter() - t
    print(f"\nphase diagram, {len(omegas)} omegas, workers = {args.workers}: {dt:.1f} s "
          f"(load average now {os.getloadavg()[0]:.2f})")
    print(format_table([_row(r) for r in res], list(_row(res[0]))))


if __name__ == "__main__":
    main()
