"""Where the mixed branch (tied, r >= 2) leaves the positional one: the linearised condition against the solver.

    python benchmarks/mixed_birth.py [--rank 2] [--omega 0.3] [--alphas 0.45,0.5,0.55,0.58,0.6,0.62,0.65,0.68,0.7]

Per alpha: the leading eigenvalue of theta's block of the linearised map at the positional fixed point (score
identity on eta-mirrored points, each scrambling of transition.linearised) -- the mixed branch is born where it
crosses 1 -- and the mixed fixed point the solver finds there (fast precision: its status and theta with its
standard error).  Below the table: theta^2 of the solver's two lowest valid mixed points extrapolated to zero, and
the root of the condition (linearised.instability, the record transition reports as mixed_pitchfork).
"""

from __future__ import annotations

import argparse

import numpy as np

from attnphase import Setting
from attnphase.cli.common import format_table
from attnphase.theory.state_evolution.solve import solve
from attnphase.theory.transition import linearised as lin


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rank", type=int, default=2)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--alphas", default="0.45,0.5,0.55,0.58,0.6,0.62,0.65,0.68,0.7")
    args = ap.parse_args()
    s = Setting(r=args.rank, omega=args.omega)
    alphas = sorted(float(a) for a in args.alphas.split(","))
    rows, mixed, known = [], [], []
    for a in alphas:
        pos = solve(s, a, "positional", "fast")
        known.append((a, pos.overlaps))
        lams = [lin.leading_eigenvalue(s, a, "semantic", lin.mirrored_points(s, "semantic", rep, 0), pos.overlaps,
                                       base="positional")[0] for rep in range(lin.SCRAMBLINGS)]
        mp = solve(s, a, "mixed", "fast")
        mixed.append(mp)
        rows.append({"alpha": a, "positional": pos.status.value,
                     "eigenvalue (mean)": round(float(np.mean(lams)), 4),
                     "per scrambling": " ".join(f"{v:.4f}" for v in lams),
                     "mixed": mp.status.value,
                     "theta": round(mp.summary()["theta"], 5) if mp.valid else "-",
                     "theta s.e.": f"{mp.errors['theta']:.1e}" if mp.valid else "-"})
    print(format_table(rows, list(rows[0])))
    ic = lin.order_squared_intercept(lin.theta_points(mixed), 0.0)
    print("\ntheta^2 of the solver's two lowest valid mixed points extrapolates to zero at "
          + (f"{ic[0]:.4f} +- {ic[1]:.4f}" if ic else "- (fewer than two valid points)"))
    inst = lin.instability(s, "semantic", alphas, xtol=0.005, name="mixed_pitchfork", base="positional",
                           known=known)
    c = inst.critical
    print(f"linearised condition: {c.value:.4f} [{c.lo:.4f}, {c.hi:.4f}], roots per scrambling "
          + ", ".join(f"{r:.4f}" for r in inst.per_scrambling) if c.found else f"linearised condition: {c.reason}")


if __name__ == "__main__":
    main()
