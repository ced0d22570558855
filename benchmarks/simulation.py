"""Benchmark: full-batch gradient descent (the study's 5000 steps) vs L-BFGS on the same problem.

    python benchmarks/simulation.py                    # d = 1000, alpha = 2, omega = 0.3, both inits
    python benchmarks/simulation.py --d 200 --steps 1000

Prints, per initialisation, the optimisation wall time of each optimiser (sampling and the test set are
identical for both and left out), the final rms gradient, the training loss and overlaps, and the
differences between the two end points.  Target: L-BFGS >= 10x faster while reaching the same minimum.
"""

from __future__ import annotations

import argparse
import sys
import warnings

import torch

from attnphase import Setting
from attnphase.cli.common import format_table
from attnphase.simulation import simulate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=1000)
    ap.add_argument("--alpha", type=float, default=2.0)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--steps", type=int, default=5000, help="gradient-descent steps (default 5000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-test", type=int, default=2000)
    ap.add_argument("--inits", default="positional,semantic")
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    if args.threads:
        torch.set_num_threads(args.threads)
    setting = Setting(omega=args.omega)
    # one-time costs (torch.optim's lazy imports) must not be billed to the first timed run
    simulate(setting, 8, 1.0, optimizer="lbfgs", n_test=1, device=args.device)

    rows, diffs = [], []
    for init in args.inits.split(","):
        res = {}
        for opt, extra in (("gd", {"steps": args.steps}), ("lbfgs", {})):
            r = simulate(setting, args.d, args.alpha, init=init, optimizer=opt, seed=args.seed,
                         n_test=args.n_test, device=args.device, **extra)
            res[opt] = r
            rows.append({"init": init, "optimizer": opt, "seconds": r.train_seconds, "steps": r.steps,
                         "evals": r.evaluations, "grad_rms": r.grad_rms, "converged": r.converged,
                         "train_loss": r.train_loss, "q": r.q, "m": r.m, "theta": r.theta,
                         "test_error": r.test_error})
            print(f"  done {init} {opt}: {r.train_seconds:.2f} s", file=sys.stderr, flush=True)
        gd, lb = res["gd"], res["lbfgs"]
        diffs.append({"init": init, "speedup": gd.train_seconds / lb.train_seconds,
                      "d_train_loss_rel": (gd.train_loss - lb.train_loss) / lb.train_loss,
                      "d_q": gd.q - lb.q, "d_m": gd.m - lb.m, "d_theta": gd.theta - lb.theta,
                      "d_test_error": gd.test_error - lb.test_error})
    print(f"d = {args.d}, alpha = {args.alpha}, omega = {args.omega}, seed = {args.seed}, "
          f"device = {rows[0] and res['gd'].device}, torch threads = {torch.get_num_threads()}")
    print(format_table(rows, list(rows[0])))
    print()
    print("gd - lbfgs (speedup = gd seconds / lbfgs seconds)")
    print(format_table(diffs, list(diffs[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
