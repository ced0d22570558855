"""Theory-engine benchmark: seconds per fixed point, achieved error estimates, and the omega = 0.3 curve.

    python benchmarks/theory.py [--alpha 1.5] [--omega 0.3] [--skip-high] [--curve-points 20]
                                [--general-only | --skip-general] [--dims 2,1,1:3,1,1:2,2,1:2,1,2:4,1,1]

The general table: seconds per fixed point at default precision for (L, r, r*) (positions: antipodal at
L = 2, simplex otherwise; the default A), positional and semantic branches, after a warm-up solve per shape
(compilation of the kernels is not counted).  'iterations' counts full-resolution and coarse map evaluations
(fixed point: theory/state_evolution/solve.py); 'load' is the 1-minute load average at the end of the solve (on a shared
machine the seconds scale with it).

Prints a table.  Relative errors are one-standard-error estimates from the spread over independent
Sobol scramblings; 'vs high' is |default - high| / combined standard error (should be O(1)).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from attnphase import Setting
from attnphase.cli.common import format_table
from attnphase.theory import solve, solve_curve
from attnphase.theory.state_evolution.precision import PRECISIONS

KEYS = ("q", "m", "theta", "train_loss", "test_error")


def _value(fp, k: str) -> float:
    return fp.train_loss if k == "train_loss" else fp.test_error if k == "test_error" else fp.summary()[k]


def rel_errors(fp) -> dict[str, float]:
    out = {}
    for k in KEYS + ("V",):
        v = _value(fp, k)
        if v != 0 and np.isfinite(fp.errors.get(k, np.nan)):
            out[k] = fp.errors[k] / abs(v)
    return out


def general_table(dims: list[tuple[int, int, int]], alpha: float, omega: float) -> None:
    rows = []
    for L, r, rs in dims:
        s = Setting(L=L, r=r, r_star=rs, omega=omega)
        solve(s, alpha, "semantic", "fast")  # compiles (or loads) the kernels for this shape
        for branch in ("positional", "semantic"):
            fp = solve(s, alpha, branch, "default")
            rel = rel_errors(fp)
            rows.append({"L": L, "r": r, "r*": rs, "dim": L * (r + rs), "positions": s.positions_label,
                         "branch": branch, "seconds": round(fp.seconds, 2), "replicas": fp.n_replicas,
                         "iterations": fp.iterations, "max_rel_err": max(rel.values()) if rel else None,
                         "status": fp.status.value, "warnings": len(fp.warnings),
                         "load": round(os.getloadavg()[0], 1)})
            print(rows[-1], flush=True)
    print(f"\nSeconds per fixed point at default precision, alpha = {alpha}, omega = {omega}")
    print(format_table(rows, list(rows[0])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--alpha", type=float, default=1.5)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--skip-high", action="store_true")
    ap.add_argument("--curve-points", type=int, default=20)
    ap.add_argument("--dims", default="2,1,1:3,1,1:2,2,1:2,1,2:4,1,1", help="L,r,r* shapes, colon-separated")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--general-only", action="store_true")
    g.add_argument("--skip-general", action="store_true")
    args = ap.parse_args()
    if not args.skip_general:
        general_table([tuple(int(v) for v in d.split(",")) for d in args.dims.split(":")], args.alpha, args.omega)
        if args.general_only:
            return
    s = Setting(omega=args.omega)

    t = time.perf_counter()
    solve(s, 1.0, "semantic", "fast")  # compiles (or loads) the numba kernel
    print(f"warm-up (kernel compile/load + one fast fixed point): {time.perf_counter() - t:.1f} s\n")

    rows = []
    results: dict[tuple[str, str], object] = {}
    precisions = ["fast", "default"] + ([] if args.skip_high else ["high"])
    for branch in ("positional", "semantic", "agnostic"):
        for prec in precisions:
            fp = solve(s, args.alpha, branch, prec)
            results[(branch, prec)] = fp
            rel = rel_errors(fp)
            main_rel = max(v for k, v in rel.items() if k != "V")
            rows.append({
                "branch": branch, "precision": prec, "seconds": round(fp.seconds, 2),
                "points": f"{fp.n_replicas}x2^{PRECISIONS[prec].log2_points}",
                "iterations": fp.iterations, "max_rel_err": main_rel, "worst": max(
                    (k for k in rel if k != "V"), key=lambda k: rel[k]), "rel_err_V": rel["V"],
                "converged": fp.converged, "status": fp.status.value,
            })
    if not args.skip_high:
        for r in rows:
            if r["precision"] == "default":
                a, b = results[(r["branch"], "default")], results[(r["branch"], "high")]
                z = [abs(_value(a, k) - _value(b, k)) / np.hypot(a.errors[k], b.errors[k])
                     for k in KEYS + ("V",) if a.errors[k] > 0]
                r["vs_high_max_z"] = round(float(max(z)), 2)
    cols = ["branch", "precision", "seconds", "points", "iterations", "max_rel_err", "worst", "rel_err_V",
            "vs_high_max_z", "converged", "status"]
    print(f"Fixed points at alpha = {args.alpha}, omega = {args.omega} (study setting)")
    print(format_table(rows, cols))

    alphas = np.linspace(0.1, 2.0, args.curve_points)
    t = time.perf_counter()
    curves = {b: solve_curve(s, alphas, b, "default") for b in ("positional", "semantic")}
    dt = time.perf_counter() - t
    n_valid = {b: sum(p.valid for p in c) for b, c in curves.items()}
    iters = sum(p.iterations for c in curves.values() for p in c)
    worst = max(max(v for k, v in rel_errors(p).items() if k != "V") for c in curves.values() for p in c if p.valid)
    print(f"\nomega = {args.omega} curve: {args.curve_points} alphas in [0.1, 2], both branches, default precision, "
          f"warm-started: {dt:.1f} s total ({dt / (2 * args.curve_points):.2f} s per point), {iters} outer "
          f"iterations, valid points {n_valid}, worst relative error {worst:.1e}")


if __name__ == "__main__":
    main()
