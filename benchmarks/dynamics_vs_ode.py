"""Benchmark (issue 30): finite-d online SGD against the d -> infinity ODE at d = 500, 1000, 2000, 4000 (8 seeds each).

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/dynamics_vs_ode.py --store dyn.sqlite      # resumable
    python benchmarks/dynamics_vs_ode.py --store dyn.sqlite --ds 500,1000 --seeds 4         # smaller

Each seed: Q_ij iid N(0, s^2), one fresh sample per step at learning rate lr, overlaps recorded at n_points times
up to t_max; the ODE is integrated from that seed's own measured start (attnphase.experiments.online.compare).
Printed per d: the largest gap over t between the seeds' mean and the ODEs' mean for q, |m|, |theta| and the test
error (with the SGD mean's standard error at that time), the median escape times (positional / teacher fraction
of tr q past 5%) of SGD, of the ODE and of the ODE linearised at the typical start, the mechanisms at t_max, and
the time per seed.  Then the fitted rates: distance ~ d^slope and escape time = a + b log d.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from attnphase.cli.common import format_table, parse_int_spec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=None, help="results store to resume from (one row per seed)")
    ap.add_argument("--ds", default="500,1000,2000,4000")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--lam", type=float, default=0.01)
    ap.add_argument("--lr", type=float, default=5.0)
    ap.add_argument("--init-scale", type=float, default=0.1)
    ap.add_argument("--t-max", type=float, default=30.0)
    ap.add_argument("--n-points", type=int, default=61)
    ap.add_argument("--n-test", type=int, default=200)
    ap.add_argument("--tilt-m", type=float, default=0.0, help="informed start: m_1 + this (no escape phase)")
    ap.add_argument("--tilt-theta", type=float, default=0.0, help="informed start: theta + sigma^2 this")
    args = ap.parse_args(argv)
    import torch

    from attnphase.experiments.online import run_online
    from attnphase.experiments.online.compare import compare_with_ode
    from attnphase.setting import Setting
    from attnphase.theory.dynamics.linear import escape_times as linear_escape

    torch.set_num_threads(1)
    setting = Setting(omega=args.omega, lam=args.lam)
    rows, comps = [], []
    for d in parse_int_spec(args.ds, "--ds"):
        t0 = time.perf_counter()
        res = run_online(setting, d=d, lr=args.lr, init_scale=args.init_scale, t_max=args.t_max,
                         seeds=range(args.seeds), n_points=args.n_points, n_test=args.n_test, store=args.store,
                         progress=True, tilt=(args.tilt_m, args.tilt_theta))
        wall = time.perf_counter() - t0
        c = compare_with_ode(res)
        comps.append(c)
        row = c.row()
        row["sem_m"] = c.sem["m"]
        row["sec_per_seed"] = float(res.seconds.mean()) if res.reused < len(res.seeds) else None
        row["wall"] = wall
        row["ode_sec"] = c.ode_seconds / len(res.seeds)
        lin = linear_escape(setting, args.lr, args.init_scale, d)
        row["escape_m_linear"], row["escape_theta_linear"] = lin.t_m, lin.t_theta
        rows.append(row)
        print(f"d = {d}: {wall:.1f} s ({res.reused} seeds read back), status {res.status}", file=sys.stderr)
    cols = ["d", "seeds", "dist_q", "dist_m", "sem_m", "dist_theta", "dist_test_error", "escape_m_sgd",
            "escape_m_ode", "escape_m_linear", "escape_theta_sgd", "escape_theta_ode", "mechanisms_sgd", "mechanisms_ode",
            "sec_per_seed", "ode_sec"]
    print(f"omega {args.omega:g}, lambda {args.lam:g}, lr {args.lr:g}, init scale {args.init_scale:g}, "
          f"t_max {args.t_max:g}, {args.n_points} points, n_test {args.n_test}, tilt ({args.tilt_m:g}, "
          f"{args.tilt_theta:g})")
    print(format_table(rows, cols))
    ds = np.array([r["d"] for r in rows], dtype=float)
    if len(ds) >= 2:
        for k in ("q", "m", "theta", "test_error"):
            y = np.array([r[f"dist_{k}"] for r in rows])
            if np.all(y > 0):
                slope = np.polyfit(np.log(ds), np.log(y), 1)[0]
                print(f"distance {k}: ~ d^{slope:.2f}")
        for who in ("sgd", "ode", "linear"):
            e = np.array([r[f"escape_m_{who}"] for r in rows])
            if np.all(np.isfinite(e)):
                b, a = np.polyfit(np.log(ds), e, 1)
                print(f"escape time of m ({who}, median over seeds): {a:.2f} + {b:.2f} log d")
        # per-seed escape gaps: SGD minus its own ODE
        gaps = [np.nanmedian(c.escape_sgd["m"] - c.escape_ode["m"]) for c in comps]
        print("median escape gap SGD - ODE (m): " + ", ".join(f"d {int(d)}: {g:.2f}" for d, g in zip(ds, gaps,
                                                                                                 strict=True)))
    if not math.isfinite(rows[-1]["dist_m"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
