"""Benchmark (issue 10): fraction of random starts that end semantic at omega = 0.3, alpha in {0.5, 1, 1.5, 2},
d in {200, 500}, 16 starts per point, with binomial error bars.  Resumable: rerun with the same --store.

    python benchmarks/basins.py --store basins.sqlite --workers 2            # the issue's grid, both scales
    python benchmarks/basins.py --store basins.sqlite --summary-only          # print the table of a store

Each start: Q with i.i.d. N(0, S^2) entries (S = 0.01, the small-initialisation limit, and S = 1), 1000 plain
gradient-descent steps then L-BFGS to convergence, classified by attnphase.experiments.simulation.basins' rule.
"""

from __future__ import annotations

import argparse
import sys
import time

from attnphase.cli.common import format_table, parse_int_spec, parse_spec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--d", default="200,500")
    ap.add_argument("--alphas", default="0.5,1,1.5,2")
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--starts", type=int, default=16)
    ap.add_argument("--scales", default="0.01,1")
    ap.add_argument("--student", default="tied", choices=("tied", "untied"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args(argv)
    from attnphase.experiments.basins_study import basins_summary
    from attnphase.experiments.simulation.basins import basins_grids, run_basins

    if not args.summary_only:
        grids = basins_grids(d=tuple(parse_int_spec(args.d)), alphas=tuple(parse_spec(args.alphas)),
                             omegas=args.omega, inits_per_point=args.starts,
                             init_scales=tuple(parse_spec(args.scales)), student=args.student)
        t0 = time.perf_counter()
        s = run_basins(args.store, grids, workers=args.workers, progress=True, student=args.student)
        print(f"{s.line()} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    summary = basins_summary(args.store, omega=args.omega)
    cols = ("student", "init_scale", "d", "alpha", "n", "n_converged", "n_positional", "n_semantic", "n_other",
            "semantic_fraction", "semantic_se", "positional_fraction", "positional_se",
            "positional_train_loss_mean", "semantic_train_loss_mean", "theory_positional_train_loss",
            "theory_semantic_train_loss")
    print(f"omega = {args.omega}; rule: {summary['rule']}; {summary['total_starts']} starts, "
          f"{summary['converged_fraction']:.3f} converged")
    print(format_table(summary["points"], cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
