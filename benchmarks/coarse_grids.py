"""Coarse grids against the default one (docs/transition.md, "How a crossing's interval is made"): alpha_c and
alpha_l of one omega on the default grid (12 points, xtol 0.01) and on coarse grids and tolerances, each row saying
whether its interval holds the default grid's value; then the global minimum's excess test error by plain solves at
the default alpha_l's interval ends (the sign change the intervals must hold).

    python benchmarks/coarse_grids.py [--omega 0.3] [--grids 4,6,8] [--xtols 0.02,0.05,0.1] [--precision fast]
"""

from __future__ import annotations

import argparse
import os
import time

from attnphase import Setting
from attnphase.cli.common import format_table
from attnphase.theory import linear_baseline, solve
from attnphase.theory.transition.driver import transition

NAMES = ("alpha_c", "alpha_l")


def _fmt(c) -> str:
    return "—" if c.value is None else f"{c.value:.4f} [{c.lo:.4f}, {c.hi:.4f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--grids", default="4,6,8")
    ap.add_argument("--xtols", default="0.02,0.05,0.1")
    ap.add_argument("--precision", default="fast")
    args = ap.parse_args()
    s = Setting(omega=args.omega)
    print(f"cores: {os.cpu_count()}, load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    solve(s, 1.0, "semantic", "fast")  # compile / load the kernel outside the timings
    t = time.perf_counter()
    ref = transition(s, precision=args.precision)
    rows = [{"n_grid": 12, "xtol": 0.01, "seconds": round(time.perf_counter() - t, 1), "solves": ref.solves}
            | {n: _fmt(ref.critical[n]) for n in NAMES}]
    for n_grid in (int(x) for x in args.grids.split(",")):
        for xtol in (float(x) for x in args.xtols.split(",")):
            t = time.perf_counter()
            r = transition(s, precision=args.precision, n_grid=n_grid, xtol=xtol)
            row = {"n_grid": n_grid, "xtol": xtol, "seconds": round(time.perf_counter() - t, 1), "solves": r.solves}
            for n in NAMES:
                c, v = r.critical[n], ref.critical[n].value
                row[n] = _fmt(c)
                row[f"{n} holds default"] = None if c.value is None or v is None else bool(c.lo <= v <= c.hi)
            rows.append(row)
    print(format_table(rows, list(rows[-1])))
    c = ref.critical["alpha_l"]
    if c.found:
        lin = linear_baseline(s).test_error_linear
        for a in (c.lo, c.hi):
            gm = solve(s, a, "global", args.precision)
            print(f"plain solve at alpha = {a:.4f}: test_error(global minimum) - baseline = "
                  f"{gm.test_error - lin:+.3e} +- {gm.errors.get('test_error', float('nan')):.1e} ({gm.branch})")


if __name__ == "__main__":
    main()
