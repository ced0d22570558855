"""Benchmark (issue 21): every branch of a setting, whole CLI process, wall and CPU seconds, and what each branch
gave.

    python benchmarks/branches.py                       # the five cases below at default precision
    python benchmarks/branches.py --precision fast --cases rank2_global,L3_all
    python benchmarks/branches.py --cases none --transitions L3   # only `attnphase transition --L 3` (target 60 s)

Each case runs `attnphase theory ... --json` in a fresh process (the numba cache is warm after the first run in a
worktree; run once before measuring) and prints one table row per record: case, branch, status, train loss, rms m,
theta, the starts tried (name:status), and the case's wall and CPU (user + sys of the process and its workers)
seconds.  Timings on a shared machine are noisy: quote both.  --transitions: whole `attnphase transition` processes
(their default, precision fast), one row each with alpha_c and alpha_l and their intervals.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

CASES = {
    "rank2_global": "--alpha 1.5 --rank 2 --branch global",
    "L3_all": "--alpha 1.5 --L 3 --positions simplex --branch all",
    "untied_all": "--alpha 3 --student untied --branch all",
    "rstar2_all": "--alpha 1.5 --teacher-rank 2 --branch all",
    "study_curve": "--omega 0.3 --alpha 0.1:2:20 --branch all",
}
TRANSITIONS = {
    "L3": "--L 3 --positions simplex",
    "rank2": "--rank 2",
    "study": "--omega 0.3",
}


def _timed(*argv: str) -> tuple[object, float, float]:
    """`python -m attnphase ARGV`'s JSON output, wall and CPU (user + sys of the process and its workers) seconds."""
    cmd = [sys.executable, "-m", "attnphase", *argv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=os.environ.copy())
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out.stdout), wall, cpu


def run_transition(args: str) -> tuple[dict, float, float]:
    out, wall, cpu = _timed("transition", *args.split(), "--json")
    return out[0], wall, cpu


def run(args: str, precision: str) -> tuple[list[dict], float, float]:
    return _timed("theory", *args.split(), "--json", "--precision", precision)


def _interval(r: dict, k: str) -> str:
    return "none" if r[k] is None else f"{r[k]:.4f} [{r[k + '_lo']:.4f}, {r[k + '_hi']:.4f}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--precision", default="default")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma list of {', '.join(CASES)}, or none")
    ap.add_argument("--transitions", default="L3", help=f"comma list of {', '.join(TRANSITIONS)}, or none")
    a = ap.parse_args()
    cases = [] if a.cases == "none" else a.cases.split(",")
    transitions = [] if a.transitions == "none" else a.transitions.split(",")
    for name in cases + transitions:
        if name not in CASES and name not in TRANSITIONS:
            ap.error(f"unknown case {name!r}")
    if cases:
        print(f"{'case':14} {'wall s':>7} {'cpu s':>7}  {'alpha':>5} {'branch':10} {'status':13} {'train_loss':>10} "
              f"{'m':>7} {'theta':>7}  starts")
    for name in cases:
        recs, wall, cpu = run(CASES[name], a.precision)
        show = recs if name != "study_curve" else [r for r in recs if r["alpha"] in (0.1, 1.0, 2.0)]
        for i, r in enumerate(show):
            m = r.get("m_norm", r.get("m"))
            th = r.get("theta_sv", r.get("theta"))
            if isinstance(th, list):
                th = max((t for t in th if isinstance(t, float | int)), default=None)
            starts = " ".join(f"{s['name']}:{s['status']}" for s in r.get("starts", []))
            tl = r["train_loss"]
            print(f"{name if i == 0 else '':14} {wall if i == 0 else '':>7.6} {cpu if i == 0 else '':>7.6}  "
                  f"{r['alpha']:5.3g} {r['branch']:10} {r['status']:13} {tl if tl is not None else float('nan'):10.6g} "
                  f"{m if m is not None else float('nan'):7.4f} {th if th is not None else float('nan'):7.4f}  {starts}")
    if transitions:
        print(f"\n{'transition':14} {'wall s':>7} {'cpu s':>7}  {'alpha_c [lo, hi]':28} {'kind':12} alpha_l [lo, hi]")
    for name in transitions:
        r, wall, cpu = run_transition(TRANSITIONS[name])
        print(f"{name:14} {wall:7.1f} {cpu:7.1f}  {_interval(r, 'alpha_c'):28} {r['alpha_c_kind']:12} "
              f"{_interval(r, 'alpha_l')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
