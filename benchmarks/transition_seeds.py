"""Transition intervals held against another scrambling: each critical value of `transition` computed with two
seeds (independent Sobol scramblings of every integration point set), and whether their intervals overlap.  An
interval that does not hold its value under another draw of the points is a confident wrong answer (e.g. a finite
point set's imperfect bifurcation read as a fold in one draw and not in the other).

    python benchmarks/transition_seeds.py [--settings study,L3,L3w06,r2,rstar2,untied|all] [--seeds 0,1]
                                          [--precision fast]

Prints one row per setting and critical value: each seed's value, interval and kind, and "yes"/"NO" for overlap.
"""

from __future__ import annotations

import argparse
import os
import time

from attnphase import Setting
from attnphase.cli.common import format_table
from attnphase.theory.transition.driver import transition
from attnphase.theory.transition.records import EXTRA_NAMES, NAMES

SETTINGS = {
    "study": Setting(omega=0.3),
    "L3": Setting(L=3, positions="simplex", omega=0.3),
    "L3w06": Setting(L=3, positions="simplex", omega=0.6),
    "r2": Setting(r=2, omega=0.3),
    "rstar2": Setting(r_star=2, omega=0.3),
    "untied": Setting(omega=0.3, student="untied"),
    "study_w0": Setting(omega=0.0),
    "study_w01": Setting(omega=0.1),
    "study_w06": Setting(omega=0.6),
    "L3w0": Setting(L=3, positions="simplex", omega=0.0),
    "r2w0": Setting(r=2, omega=0.0),
    "r2w06": Setting(r=2, omega=0.6),
    "rstar2w06": Setting(r_star=2, omega=0.6),
    "untiedw0": Setting(omega=0.0, student="untied"),
    "L3tr2": Setting(L=3, positions="simplex", omega=0.6, r_star=2),
}
DEFAULT = "study,L3,L3w06,r2,rstar2,untied"  # (the rest: more omegas and shapes, minutes each)


def _cell(c) -> str:
    if not c.found:
        return c.search
    return f"{c.value:.4g} [{c.lo:.4g}, {c.hi:.4g}] {c.kind}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--settings", default=DEFAULT, help=f"comma list of {', '.join(SETTINGS)}, or all")
    ap.add_argument("--seeds", default="0,1", help="two seeds, comma-separated")
    ap.add_argument("--precision", default="fast")
    args = ap.parse_args()
    names = list(SETTINGS) if args.settings == "all" else [s.strip() for s in args.settings.split(",") if s.strip()]
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        ap.error(f"--settings: unknown {', '.join(unknown)} (choose from {', '.join(SETTINGS)})")
    seeds = [int(s) for s in args.seeds.split(",")]
    if len(seeds) != 2:
        ap.error("--seeds takes two seeds")
    print(f"cores: {os.cpu_count()}, load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows, disjoint = [], 0
    for name in names:
        res, secs = [], []
        for seed in seeds:
            t = time.perf_counter()
            res.append(transition(SETTINGS[name], precision=args.precision, seed=seed))
            secs.append(time.perf_counter() - t)
        for crit in NAMES + EXTRA_NAMES:
            a, b = res[0].critical.get(crit), res[1].critical.get(crit)
            if a is None or b is None or not (a.found or b.found):
                continue
            both = a.found and b.found
            held = a.overlaps(b) if both else None
            disjoint += held is False
            rows.append({"setting": name, "critical": crit, f"seed {seeds[0]}": _cell(a), f"seed {seeds[1]}": _cell(b),
                         "overlap": "-" if held is None else ("yes" if held else "NO"),
                         "seconds": f"{secs[0]:.0f} / {secs[1]:.0f}"})
    print(format_table(rows, list(rows[0])))
    print(f"\n{disjoint} critical value(s) whose two intervals do not overlap")


if __name__ == "__main__":
    main()
