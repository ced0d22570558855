"""Benchmark: the time of one online-SGD run per d (8 seeds batched, and one seed alone) and of one ODE trajectory.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/dynamics_timing.py
    python benchmarks/dynamics_timing.py --ds 500,1000 --t 1

Online SGD costs t d steps of O(L d) work (plus the L d Gaussian numbers of each fresh sample), so a run to time t
costs ~ t d^2: the table gives the seconds per unit of t per seed, and the extrapolation to t = 30.
"""

from __future__ import annotations

import argparse
import sys
import time

from attnphase.cli.common import format_table, parse_int_spec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ds", default="500,1000,2000,4000")
    ap.add_argument("--t", type=float, default=1.0, help="simulated time per run (samples / d)")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5.0)
    args = ap.parse_args(argv)
    import torch

    from attnphase.experiments.online import run_online
    from attnphase.setting import Setting
    from attnphase.theory.dynamics import integrate

    torch.set_num_threads(1)
    st = Setting(omega=0.3)
    rows = []
    for d in parse_int_spec(args.ds, "--ds"):
        row = {"d": d}
        for label, seeds in (("batched", range(args.seeds)), ("alone", [0])):
            t0 = time.perf_counter()
            run_online(st, d=d, lr=args.lr, init_scale=0.1, t_max=args.t, seeds=seeds, n_points=3, n_test=200)
            per = (time.perf_counter() - t0) / (len(seeds) * args.t)
            row[f"s_per_t_seed_{label}"] = per
            row[f"t30_{label}"] = 30 * per
        rows.append(row)
    print(f"online SGD, lr {args.lr:g}, {args.seeds} seeds batched vs one seed; seconds per unit t per seed, and "
          "for one seed to t = 30")
    print(format_table(rows, list(rows[0])))
    t0 = time.perf_counter()
    tr = integrate(st, lr=args.lr, init_scale=0.1, d=1000, t_max=30.0, n_points=200)
    print(f"one ODE trajectory (t_max 30, 200 points): {time.perf_counter() - t0:.2f} s, {tr.nfev} drift "
          f"evaluations, status {tr.status.value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
