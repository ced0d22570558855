"""Mirror cycles against finite-d training (docs/numerics.md, "Mirror cycles").

r = 2, omega = 0: the mixed point and the semantic point at one alpha (the theory, default precision), with the
energy identity of a fixed point (free energy's training loss against data term + ridge term, on 2^14 fresh points),
and L-BFGS training at finite d from the positional, semantic and random starts.  A point that is a fixed point of the
equations satisfies the identity; training should end near the lowest such point.

    python benchmarks/mirror_cycles.py [--alpha 2.2] [--d 600] [--seeds 0,1,2,3] [--precision default]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attnphase.experiments.simulation.experiment import simulate
from attnphase.setting import Setting
from attnphase.theory.model.channel import points_dim, update_hatoverlaps
from attnphase.theory.model.overlaps import Branch
from attnphase.theory.model.prior import loss_terms, train_loss, update_overlaps
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.state_evolution.solve import solve


def identity(setting: Setting, alpha: float, fp) -> tuple[float, float, float]:
    """(free-energy training loss, data term + ridge term, m's image / m along the largest m direction) at fp."""
    o = fp.overlaps
    out = update_hatoverlaps(setting, alpha, o, gaussian_sobol(14, points_dim(setting), 7), Branch(fp.branch))
    h = out.hats
    formula = train_loss(setting, alpha, o, h, out.moreau)
    direct = loss_terms(setting, alpha, o, h, out.moreau)
    j = int(np.argmax(np.linalg.norm(o.m, axis=0)))
    new = update_overlaps(setting, h)
    ratio = float(new.m[0, j] / o.m[0, j]) if abs(o.m[0, j]) > 0 else float("nan")
    return float(formula), float(direct), ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alpha", type=float, default=2.2)
    ap.add_argument("--d", type=int, default=600)
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--precision", default="default")
    args = ap.parse_args()
    s = Setting(r=2, omega=0.0)
    print(f"r = 2, omega = 0, alpha = {args.alpha}, theory at {args.precision}")
    print("| branch | status | rms m | theta | train loss | test error | identity: formula / direct | m image / m | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for branch in ("mixed", "semantic"):
        t0 = time.perf_counter()
        fp = solve(s, args.alpha, branch, args.precision)
        sec = time.perf_counter() - t0
        sm = fp.summary()
        f, dterm, ratio = identity(s, args.alpha, fp) if np.all(np.isfinite(fp.overlaps.q)) else (np.nan,) * 3
        print(f"| {branch} | {fp.status.value} | {sm['m']:.4f} | {sm['theta']:.4f} | {fp.train_loss:.6f} | "
              f"{fp.test_error:.6f} | {f:.6f} / {dterm:.6f} | {ratio:+.3f} | {sec:.0f} |")
    print(f"\nL-BFGS, d = {args.d}")
    print("| start | seed | train loss | test error | rms m | theta |")
    print("|---|---|---|---|---|---|")
    for init in ("positional", "semantic", "random"):
        for seed in (int(x) for x in args.seeds.split(",")):
            r = simulate(s, args.d, args.alpha, init=init, optimizer="lbfgs", seed=seed).to_dict()
            print(f"| {init} | {seed} | {r['train_loss']:.6f} | {r['test_error']:.6f} | {r['m_norm']:.4f} | "
                  f"{max(r['theta_sv']):.4f} |")


if __name__ == "__main__":
    main()
