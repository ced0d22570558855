"""Where a single point's internal continuation (the ladder's path) ends, and what that costs: one row per point.

    python benchmarks/path_ends.py [--cases omega0-1.5,omega0-1,...]
    python benchmarks/path_ends.py --cases omega0.1-1.2,omega0.1-1.3   (next to an end: minutes)

Each case is a single point whose starts give no valid point, so solve() walks the branch from its base up to alpha
(docs/numerics.md, "A collapse on the path is its end").  Row: the case, status, the path's end (the branch_end
note: the step whose collapse ended it and the certificate's ||J|| there, or the squared order parameter's zero),
map evaluations and seconds (in process, after a warm-up solve).  Beside each end, the agnostic point's linearised
leading eigenvalue along the order parameter at alpha (an independent computation on mirrored points: below 1, no
point of the branch is born there).  The omega0.1 cases, not run by default, lie next to the positional branch's
end at 1.289 [1.255, 1.323], where a point costs a minute or more (docs/numerics.md, "Next to a branch's end").
"""

from __future__ import annotations

import argparse
import time

from attnphase import Setting
from attnphase.cli.common import format_table
from attnphase.notes import NoteCode

# name -> (setting, alpha, branch, precision)
CASES = {
    "omega0-1.5": (Setting(omega=0.0), 1.5, "positional", "default"),
    "omega0-1": (Setting(omega=0.0), 1.0, "positional", "default"),
    "omega0-1.5-fast": (Setting(omega=0.0), 1.5, "positional", "fast"),
    "r2-omega0-1.8-fast": (Setting(r=2, omega=0.0), 1.8, "positional", "fast"),
    "omega0.1-1.2": (Setting(omega=0.1), 1.2, "positional", "default"),
    "omega0.1-1.3": (Setting(omega=0.1), 1.3, "positional", "default"),
}
DEFAULT = ("omega0-1.5", "omega0-1", "omega0-1.5-fast", "r2-omega0-1.8-fast")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(DEFAULT), help=f"comma list of case names: {', '.join(CASES)}")
    args = ap.parse_args()
    names = [n for n in args.cases.split(",") if n]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    from attnphase.theory.state_evolution.solve import solve
    from attnphase.theory.state_evolution.symmetric import mirrored_points
    from attnphase.theory.transition.linearised import leading_eigenvalue

    solve(Setting(), 1.0, "semantic", "fast")  # (warm-up: the compiled kernels' cache)
    rows = []
    for name in names:
        s, alpha, branch, prec = CASES[name]
        t = time.perf_counter()
        fp = solve(s, alpha, branch, prec, stability=False)
        seconds = time.perf_counter() - t
        lam = leading_eigenvalue(s, alpha, branch, mirrored_points(s, branch, 0, 0))[0]
        ends = [w.message.split(": ", 1)[-1] for w in fp.warnings if w.code == NoteCode.branch_end]
        rows.append({"case": name, "status": fp.status.value, "evaluations": fp.iterations,
                     "seconds": round(seconds, 2), "lambda at alpha": round(lam, 3),
                     "path's end": ends[0] if ends else "-"})
    print(format_table(rows, list(rows[0])))


if __name__ == "__main__":
    main()
