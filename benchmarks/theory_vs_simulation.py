"""Theory against finite-d simulation for general shapes: prints a table (theory, simulation mean +- sem, ok).

    python benchmarks/theory_vs_simulation.py [--d 500] [--seeds 0,1,2,3] [--optimizer gd]

Shapes: (L, r, r*) = (3, 1, 1) simplex, (2, 2, 1), (2, 1, 2), (4, 1, 1) orthogonal, omega = 0.3, alpha = 1.5.  A row's
'ok' is |theory - sim| <= 3 sem + 5% (see tests/test_engine_vs_simulation.py, which asserts the same).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from attnphase import Setting
from attnphase.cli.common import format_table

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from test_engine_vs_simulation import CASES, compare  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--d", type=int, default=500)
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--optimizer", default="gd")
    args = ap.parse_args()
    seeds = tuple(int(s) for s in args.seeds.split(","))
    out = []
    for L, r, rs, pos, omega, alpha in CASES:
        s = Setting(L=L, r=r, r_star=rs, positions=pos, omega=omega)
        for branch in ("semantic", "positional"):
            fp, rows = compare(s, alpha, branch, d=args.d, seeds=seeds, optimizer=args.optimizer)
            if rows is None:
                out.append({"shape": f"L={L} r={r} r*={rs} {pos}", "branch": branch, "quantity": "-",
                            "theory": fp.status.value})
                continue
            for key, th, mean, sem, ok in rows:
                out.append({"shape": f"L={L} r={r} r*={rs} {pos}", "branch": branch, "quantity": key, "theory": th,
                            "sim": mean, "sem": sem, "ok": ok})
            print(format_table(out[-len(rows):], ["shape", "branch", "quantity", "theory", "sim", "sem", "ok"]),
                  flush=True)
    print(f"\nd = {args.d}, seeds {seeds}, optimizer {args.optimizer}, alpha = 1.5, omega = 0.3")
    print(format_table(out, ["shape", "branch", "quantity", "theory", "sim", "sem", "ok"]))


if __name__ == "__main__":
    main()
