"""What the checks beside a fixed point cost: the stability along theta (theory.theta_stability) per positional point,
and the study's test error (the 20- and 14-point Gauss-Hermite rules), in this process.

    python benchmarks/stability.py [--repeat 3]

Each positional point is solved first at `fast` (not timed); the table gives the eigenvalue with its error and the
fastest of `--repeat` runs of the check, then the test error's two rules.  docs/numerics.md ("Stability along
theta", "What a fixed point costs") quotes these numbers.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attnphase import Setting
from attnphase.cli.common import format_table
from attnphase.theory import solve, theta_stability
from attnphase.theory.model.observables import test_error as population_loss
from attnphase.theory.model.observables import test_error_estimate as coarse_loss
from attnphase.theory.model.overlaps import Overlaps

CASES = [
    ("study", Setting(), (1.0, 3.0)),
    ("L = 3 simplex, omega 0.6", Setting(L=3, positions="simplex", omega=0.6), (1.0, 2.5)),
    ("r = 2", Setting(r=2), (0.5, 1.0)),
]


def _best(fn, repeat: int) -> tuple[float, object]:
    out, times = None, []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    rows = []
    for name, setting, alphas in CASES:
        for a in alphas:
            fp = solve(setting, a, "positional", precision="fast", stability=False)
            theta_stability(setting, a, fp)  # (compiles and caches the points once)
            sec, st = _best(lambda: theta_stability(setting, a, fp), args.repeat)  # noqa: B023
            rows.append({"setting": name, "alpha": a, "eigenvalue": f"{st.eigenvalue:.4f} +- {st.error:.3f}",
                         "seconds": round(sec, 3)})
    print(format_table(rows, ["setting", "alpha", "eigenvalue", "seconds"]))
    st, o = Setting(), Overlaps(q=[[0.1]], m=[[0.2], [-0.1]], V=[[1.0]], theta=[[0.1]])
    population_loss(st, o)
    fine, _ = _best(lambda: population_loss(st, o), 5 * args.repeat)
    coarse, _ = _best(lambda: coarse_loss(st, o), 5 * args.repeat)
    print(f"\nthe study's test error: {1e3 * fine:.2f} ms (20- and 14-point rules), {1e3 * coarse:.2f} ms (14-point "
          f"rule, once per scrambling); numpy {np.__version__}")


if __name__ == "__main__":
    main()
