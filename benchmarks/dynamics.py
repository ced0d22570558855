"""Benchmark of the online-SGD ODE (attnphase.theory.dynamics): seconds for one trajectory and for a small
dynamical phase diagram, with what they found.

    python benchmarks/dynamics.py [--omega 0.3] [--lr 1] [--init-scale 0.1] [--d 1000] [--t-max 2000]
                                  [--omegas 0,0.15,0.3,0.5] [--scales 0.1,0.5,1,2] [--skip-diagram]

Target (issue 30): one trajectory in under 10 s on the development machine.  'load' is the 1-minute load average at
the end (on a shared machine the seconds scale with it).  The first call compiles the two-token kernel (numba,
cached on disk afterwards); a warm-up trajectory is not counted.
"""

from __future__ import annotations

import argparse
import os
import time

from attnphase import Setting
from attnphase.cli.common import format_table, parse_spec
from attnphase.theory.dynamics import dynamical_phase_diagram, integrate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--lr", type=float, default=1.0)
    ap.add_argument("--init-scale", type=float, default=0.1)
    ap.add_argument("--d", type=int, default=1000)
    ap.add_argument("--t-max", type=float, default=2000.0)
    ap.add_argument("--omegas", default="0,0.15,0.3,0.5")
    ap.add_argument("--scales", default="0.1,0.5,1,2")
    ap.add_argument("--skip-diagram", action="store_true")
    a = ap.parse_args(argv)
    setting = Setting(omega=a.omega)
    integrate(setting, lr=a.lr, init_scale=a.init_scale, d=a.d, t_max=10.0)  # warm-up (compilation)
    t0 = time.perf_counter()
    tr = integrate(setting, lr=a.lr, init_scale=a.init_scale, d=a.d, t_max=a.t_max)
    sec = time.perf_counter() - t0
    cols = ["run", "seconds", "evaluations", "mechanism", "t_escape m", "t_escape theta", "load"]
    row = ["trajectory", f"{sec:.2f}", f"{tr.nfev}", tr.mechanism().value, f"{tr.escape_time('m'):.1f}",
           f"{tr.escape_time('theta'):.1f}", f"{os.getloadavg()[0]:.1f}"]
    print(format_table([dict(zip(cols, row, strict=True))], cols))
    if a.skip_diagram:
        return 0
    omegas, scales = parse_spec(a.omegas), parse_spec(a.scales)
    t0 = time.perf_counter()
    D = dynamical_phase_diagram(setting, omegas, init_scales=scales, lrs=[a.lr], d=a.d, t_max=a.t_max)
    sec = time.perf_counter() - t0
    print(f"\ndynamical phase diagram: {len(D.cells)} trajectories in {sec:.1f} s (load {os.getloadavg()[0]:.1f})")
    cols = ["omega", "init scale", "mechanism", "t_escape m", "t_escape theta", "objective"]
    rows = [dict(zip(cols, [f"{c.omega:g}", f"{c.init_scale:g}", c.mechanism, f"{c.t_m:.1f}", f"{c.t_theta:.1f}",
                            f"{c.train_error:.6g}"], strict=True)) for c in D.cells]
    print(format_table(rows, cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
