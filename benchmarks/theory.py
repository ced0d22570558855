"""Theory-engine benchmark: seconds per fixed point, achieved error estimates, and the omega = 0.3 curve.

    python benchmarks/theory.py [--alpha 1.5] [--omega 0.3] [--skip-high] [--curve-points 20]

Prints a table.  Relative errors are one-standard-error estimates from the spread over independent
Sobol scramblings; 'vs high' is |default - high| / combined standard error (should be O(1)).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attnphase import Setting
from attnphase.cli.common import format_table
from attnphase.theory import solve, solve_curve
from attnphase.theory.state_evolution import PRECISIONS

KEYS = ("q", "m", "theta", "train_loss", "test_error")


def rel_errors(fp) -> dict[str, float]:
    out = {}
    for k in KEYS + ("V",):
        v = getattr(fp, k)
        if v != 0:
            out[k] = fp.errors[k] / abs(v)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--alpha", type=float, default=1.5)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--skip-high", action="store_true")
    ap.add_argument("--curve-points", type=int, default=20)
    args = ap.parse_args()
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
                "converged": fp.converged, "status": fp.status,
            })
    if not args.skip_high:
        for r in rows:
            if r["precision"] == "default":
                a, b = results[(r["branch"], "default")], results[(r["branch"], "high")]
                z = [abs(getattr(a, k) - getattr(b, k)) / np.hypot(a.errors[k], b.errors[k])
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
