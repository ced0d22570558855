"""L = 3 simplex, tied rank-2 student (or any L, rank L - 1): the positional point where every student direction
carries the positions.

    python benchmarks/l3_rank2_equivariant.py [--L 3] [--omega 0.6] [--alpha 0.8] [--simulate 1000] [--seeds 3]

Where the token permutations act on the student's two directions by rotations, the d -> infinity map leaves the
subspace m = kappa U (U an orthonormal basis of range(G)), q = q0 I, V = v0 I (theta = 0) invariant.  This script
solves the map restricted to it (three unknowns, scipy's hybr on the map of `fast` points, two scramblings), prints
what solve() reports for every branch at the same point, and with --simulate the L-BFGS runs at that d (overlaps in
the theory's normalisation, content training loss).  The runs end at this point, which the free solve does not
reach; solve() finds it on the equivariant pattern (docs/rank2.md), so its positional row and the root agree.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import root

from attnphase import Setting
from attnphase.theory import solve_all
from attnphase.theory.model.overlaps import Branch, Overlaps, range_frame
from attnphase.theory.model.prior import train_loss
from attnphase.theory.state_evolution.branch_map import BranchMap
from attnphase.theory.state_evolution.precision import integration_points


def equivariant_point(s: Setting, alpha: float, rep: int) -> tuple[np.ndarray, float, float]:
    """(kappa, q0, v0), its train loss and the relative residual of the restricted map on scrambling rep's points."""
    U = range_frame(s.gram)
    r = s.r
    bm = BranchMap(s, alpha, Branch.positional, integration_points(s, "fast", rep, 0))

    def overlaps(z: np.ndarray) -> Overlaps:
        return Overlaps(q=z[1] * np.eye(r), m=z[0] * U, V=z[2] * np.eye(r), theta=np.zeros((r, 1)))

    def image(z: np.ndarray):  # noqa: ANN202
        gx, out = bm.step(bm.pack(overlaps(z)))
        g = bm.unpack(gx)  # (kappa, q0, v0 are rotation invariants: the gauge does not move them)
        return np.array([np.linalg.norm(g.m) / np.sqrt(r), np.trace(g.q) / r, np.trace(g.V) / r]), out

    sol = root(lambda z: image(z)[0] - z, np.array([0.3, 0.035, 25.0]), method="hybr")
    gz, out = image(sol.x)
    return sol.x, train_loss(s, alpha, overlaps(sol.x), out.hats, out.moreau), float(np.max(np.abs(gz - sol.x) / sol.x))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--L", type=int, default=3, help="tokens (the student's rank is L - 1)")
    ap.add_argument("--omega", type=float, default=0.6)
    ap.add_argument("--alpha", type=float, default=0.8)
    ap.add_argument("--simulate", type=int, default=0, help="d of the L-BFGS runs (0: none)")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    s = Setting(L=args.L, r=args.L - 1, omega=args.omega)
    print(f"L = {s.L} simplex, r = {s.r}, omega {args.omega}, alpha {args.alpha}")
    print("restricted map (fast points):")
    for rep in range(2):
        z, tl, res = equivariant_point(s, args.alpha, rep)
        print(f"  scrambling {rep}: kappa {z[0]:.5f}  q0 {z[1]:.5f}  v0 {z[2]:.4f}  train loss {tl:.6f}  residual {res:.1e}")
    print("solve() per branch (fast):")
    for name, p in solve_all(s, args.alpha, "fast").items():
        sv = np.linalg.svd(p.overlaps.m, compute_uv=False) if p.overlaps.m.size else np.zeros(0)
        print(f"  {name:10s} {p.status.value:14s} train loss {p.train_loss:.6f}  m singular values {np.round(sv, 4)}")
    if args.simulate:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        import torch
        from test_engine_vs_simulation import content_losses

        from attnphase.experiments.simulation import sample_dataset, simulate
        from attnphase.experiments.simulation.measure import overlaps as measured

        print(f"L-BFGS at d = {args.simulate} (positional start):")
        for seed in range(args.seeds):
            r = simulate(s, args.simulate, args.alpha, init="positional", optimizer="lbfgs", seed=seed, n_test=2000)
            pb = sample_dataset(s, args.simulate, args.alpha, seed=seed)
            Q = np.asarray(r.Q, dtype=float)
            ov = measured(torch.as_tensor(Q), pb.Q_star, s.sigma, pb.p)
            sv = np.linalg.svd(np.asarray(ov.m), compute_uv=False)
            th = np.linalg.svd(np.asarray(ov.theta), compute_uv=False)
            tl = content_losses(s, args.simulate, args.alpha, seed, Q)[0]
            print(f"  seed {seed}: m singular values {np.round(sv, 4)}  theta {np.round(th, 4)}  q diag "
                  f"{np.round(np.diag(np.asarray(ov.q)), 4)}  train loss {tl:.6f}")


if __name__ == "__main__":
    main()
