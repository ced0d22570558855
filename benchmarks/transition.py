"""Transition benchmark: seconds for alpha_c and alpha_l at one omega, and for the default phase diagram.

    python benchmarks/transition.py [--omega 0.3] [--n-omegas 10] [--workers 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attnphase import Setting
from attnphase.cli.common import format_table
from attnphase.theory import phase_diagram, solve, transition


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--n-omegas", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--precision", default="fast")
    args = ap.parse_args()
    solve(Setting(), 1.0, "semantic", "fast")  # compile / load the kernel outside the timings

    t = time.perf_counter()
    r = transition(Setting(omega=args.omega), precision=args.precision)
    dt = time.perf_counter() - t
    print(f"transition at omega = {args.omega} ({args.precision}): {dt:.1f} s")
    print(format_table([r.to_dict()], ["omega", "alpha_c", "alpha_c_lo", "alpha_c_hi", "alpha_l", "alpha_l_lo",
                                       "alpha_l_hi", "alpha_sem_appears", "alpha_pos_vanishes"]))

    omegas = [float(f"{w:.12g}") for w in np.linspace(0.0, 0.45, args.n_omegas)]
    t = time.perf_counter()
    # The defaults of `attnphase phase-diagram`: 10 grid alphas, crossings to +-0.02.
    rows = [x.to_dict() for x in phase_diagram(Setting(), omegas, precision=args.precision, workers=args.workers,
                                                progress=False, n_grid=10, xtol=0.02)]
    dt = time.perf_counter() - t
    print(f"\nphase diagram, {args.n_omegas} omegas in [0, 0.45], workers = {args.workers}: {dt:.1f} s")
    print(format_table(rows, ["omega", "alpha_c", "alpha_l", "test_error_linear", "alpha_sem_appears",
                              "alpha_pos_vanishes", "note"]))


if __name__ == "__main__":
    main()
