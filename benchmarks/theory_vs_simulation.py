"""Theory against finite-d simulation for general shapes: prints a table (theory, simulation mean +- sem, ok).

    python benchmarks/theory_vs_simulation.py [--d 500] [--seeds 0,1,2,3] [--precision fast]

Shapes and pairs (theory branch, simulation start) as in tests/test_engine_vs_simulation.py, which asserts the
same: (L, r, r*) = (3, 1, 1) simplex, (2, 2, 1), (2, 1, 2), (4, 1, 1) orthogonal, omega = 0.3, alpha = 1.5, lbfgs
(--d), the positional branch of (3, 1, 1) simplex at omega = 0.6, alpha = 0.5, d = 1000, and the semantic branch
of (2, 1, 2) at alpha = 4, d = 500 with a whitened teacher (Q*^T Q* / d = I; see the test's whitened_problem).
train_loss and test_error are the simulation's without the positional part of the output (an O(1/d) term the
theory's limit drops; see the test's docstring); the *_raw rows are the simulation's own numbers.  A row's 'ok' is
|theory - sim| <= 3 sem + 5% (for the order parameter the branch sets to zero: sim <= 1/sqrt(d)).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

from attnphase.cli.common import format_table

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from test_engine_vs_simulation import (  # noqa: E402
    ALPHA,
    CASES,
    L3_POSITIONAL,
    OMEGA,
    R2_SEMANTIC,
    compare,
    setting_of,
    sim_record,
    theory_point,
)

COLUMNS = ["shape", "branch", "start", "quantity", "theory", "sim", "sem", "ok"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", type=int, default=500)
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--precision", default="fast")
    args = ap.parse_args()
    seeds = tuple(int(s) for s in args.seeds.split(","))
    out = []
    jobs = [(shape, OMEGA, ALPHA, args.d, pairs, False) for shape, pairs in CASES.items()]
    c = L3_POSITIONAL
    jobs.append((c["shape"], c["omega"], c["alpha"], c["d"], [("positional", "positional")], False))
    c = R2_SEMANTIC
    jobs.append((c["shape"], OMEGA, c["alpha"], c["d"], [("semantic", "semantic")], True))
    for shape, omega, alpha, d, pairs, whiten in jobs:
        setting = setting_of(shape, omega)
        label = "L={} r={} r*={} {}".format(*shape) + f" w={omega:g} a={alpha:g} d={d}" + (" whitened" if whiten else "")
        for branch, init in pairs:
            fp = theory_point(setting, alpha, branch, args.precision)
            if not fp.valid:
                out.append({"shape": label, "branch": branch, "start": init, "quantity": "-",
                            "theory": fp.status.value})
                continue
            sims = [sim_record(setting, init, s, d=d, alpha=alpha, whiten=whiten) for s in seeds]
            rows = [{"shape": label, "branch": branch, "start": init, "quantity": key, "theory": th, "sim": mean,
                     "sem": sem, "ok": ok} for key, th, mean, sem, ok in compare(fp, sims, d=d)]
            for key, th in (("train_loss_raw", fp.train_loss), ("test_error_raw", fp.test_error)):
                v = np.array([x[key] for x in sims])
                rows.append({"shape": label, "branch": branch, "start": init, "quantity": key, "theory": th,
                             "sim": float(v.mean()), "sem": float(v.std(ddof=1) / np.sqrt(len(v))), "ok": "-"})
            out += rows
            print(format_table(rows, COLUMNS), flush=True)
    print(f"\nseeds {seeds}, lbfgs, theory precision {args.precision}")
    print(format_table(out, COLUMNS))


if __name__ == "__main__":
    main()
