"""Worked example (README): how alpha_c and alpha_l move with the number of tokens L at omega = 0.3.

A = mixing_A(L) = (1 - a) I + (a / L) 1 1^T with a = 0.8 (the study's A at L = 2), positions 'simplex' (the regular
simplex: antipodal at L = 2), r = r* = 1, sigma = 0.5, lambda = 0.01.  Every number comes from
attnphase.theory.transition.driver.  L = 2 is computed twice: with the branch ends as properties of the equations (the
L = 2 adapter: pitchfork / fold) and with the general method every L uses (ends where the solver stops finding the
branch), so the two methods can be compared where both apply.

    python benchmarks/worked_example.py [--precision fast] [--n-grid 8] [--alpha-min 0.3] [--alpha-max 2]
                                        [--L 2,3,4] [--json out.json]

Prints a markdown table (the README's) and, per row, the seconds and the number of fixed-point solves.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from attnphase import Setting
from attnphase.setting import mixing_A


def _fmt(c) -> str:
    if c.value is None:
        return f"— ({c.search})"
    return f"{c.value:.3f} [{c.lo:.3f}, {c.hi:.3f}] ({c.kind})"


def _task(args: tuple) -> dict:
    from attnphase.theory.transition.driver import transition

    L, ends, kw = args
    s = Setting(omega=0.3, L=L, A=mixing_A(L), positions="simplex")
    t = time.perf_counter()
    r = transition(s, ends=ends, **kw)
    row = {"L": L, "ends": ends, "seconds": round(time.perf_counter() - t, 1), "solves": r.solves,
           "test_error_linear": r.test_error_linear}
    for name in ("alpha_sem_appears", "alpha_c", "alpha_l", "alpha_pos_vanishes"):
        c = r.critical[name]
        row[name] = {"value": c.value, "lo": c.lo, "hi": c.hi, "kind": c.kind, "search": c.search, "reason": c.reason}
        row[name + "_text"] = _fmt(c)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--precision", default="fast")
    ap.add_argument("--n-grid", type=int, default=8)
    ap.add_argument("--alpha-min", type=float, default=0.3)
    ap.add_argument("--alpha-max", type=float, default=2.0)
    ap.add_argument("--xtol", type=float, default=0.02)
    ap.add_argument("--L", default="2,3,4")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args()
    from attnphase.parallel import map_tasks

    kw = dict(alpha_min=args.alpha_min, alpha_max=args.alpha_max, n_grid=args.n_grid, precision=args.precision,
              xtol=args.xtol)
    Ls = [int(x) for x in args.L.split(",")]
    tasks = [(L, "solves", kw) for L in Ls]
    if 2 in Ls:
        tasks.insert(0, (2, "adapter", kw))
    print(f"cores: {os.cpu_count()}, load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rows = []
    for row in map_tasks(_task, tasks, workers=args.workers):
        rows.append(row)
    print(f"\nomega = 0.3, A = mixing_A(L), positions simplex, precision {args.precision}, alpha grid "
          f"[{args.alpha_min:g}, {args.alpha_max:g}] x {args.n_grid}, xtol {args.xtol:g}\n")
    print("| L | branch ends | semantic branch appears | alpha_c | alpha_l | positional vanishes | linear test error |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['L']} | {r['ends']} | {r['alpha_sem_appears_text']} | {r['alpha_c_text']} | {r['alpha_l_text']} | "
              f"{r['alpha_pos_vanishes_text']} | {r['test_error_linear']:.4g} |")
    print()
    for r in rows:
        notes = "; ".join(f"{k}: {r[k]['reason']}" for k in ("alpha_c", "alpha_l", "alpha_pos_vanishes")
                          if r[k]["reason"])
        print(f"L = {r['L']} ({r['ends']}): {r['seconds']} s, {r['solves']} solves. {notes}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
