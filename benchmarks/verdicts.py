"""The solver's verdicts held against the agnostic point's linear stability, setting by setting.

    python benchmarks/verdicts.py [--precision fast] [--alphas 0.5,1,1.5,2] [--omega 0.3] [--settings study,L3,...]

A branch whose order parameter (m: positional, theta: semantic) the agnostic point's linearised map amplifies (leading
eigenvalue lambda > 1, `transition.linearised.leading_eigenvalue` on mirrored points: an independent computation, no
iteration) cannot collapse onto that point: no iterate flows to a fixed point that repels it.  Each row: setting,
branch, alpha, lambda, the solve's status (and its starts'), rms m or theta, evaluations, seconds, and CONTRADICTION
where the verdict is `collapsed` while lambda > 1 + MARGIN (0.03: about three times lambda's integration error on
2^14 points).
A `collapsed` verdict with lambda < 1 and an `ok` one with lambda > 1 are consistent; an `ok` point with lambda < 1 is
a subcritical branch or the finite point set's imperfect bifurcation next to a pitchfork (not flagged by lambda).
Column `signs`: for a point with several scramblings, whether their fixed points as the iteration found them (before
they are pointed one way for the mean) point the first one's way in every student direction carrying an order
parameter; SIGNS where an `ok` point's do not (on a branch every scrambling keeps its start's sign; opposite signs
are the points' asymmetry forcing a small order parameter beyond a branch's end, docs/numerics.md).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attnphase import Setting
from attnphase.cli.common import format_table
from attnphase.theory.model.overlaps import Layout, aligning_signs, as_branch
from attnphase.theory.solvers.fixed_point import Inadmissible, Status
from attnphase.theory.state_evolution.results import FixedPoint
from attnphase.theory.state_evolution.solve import solve
from attnphase.theory.state_evolution.symmetric import mirrored_points
from attnphase.theory.transition.linearised import leading_eigenvalue

MARGIN = 0.03
SETTINGS = {
    "study": {},
    "L3": dict(L=3, positions="simplex"),
    "L4orth": dict(L=4, positions="orthogonal"),
    "r2": dict(r=2),
    "rstar2": dict(r_star=2),
    "untied": dict(student="untied"),
    "L3r2": dict(L=3, positions="simplex", r=2),
}
ORDER = {"positional": "m", "semantic": "theta"}


def signs_agree(s: Setting, fp: FixedPoint) -> bool | None:
    """Whether the scramblings' fixed points (as found: FixedPoint.hints.replica_x) point the first one's way in every
    student direction that carries an order parameter in both (overlaps.aligning_signs flips none); None with fewer
    than two or on a token pattern's subspace (the free layout does not unpack its coordinates)."""
    xs = fp.hints.replica_x
    layout = Layout.for_setting(s, as_branch(fp.branch))
    if len(xs) < 2 or len(xs[0]) != layout.size:
        # (a point solved on a token pattern's subspace has that subspace's coordinates: not compared, '-')
        return None
    first = layout.unpack(np.asarray(xs[0]))
    return all(bool(np.all(aligning_signs(layout.unpack(np.asarray(x)), first) > 0)) for x in xs[1:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--precision", default="fast")
    ap.add_argument("--alphas", default="0.5,1,1.5,2")
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    args = ap.parse_args()
    rows = []
    for name in args.settings.split(","):
        s = Setting(omega=args.omega, **SETTINGS[name])
        for branch in ("positional", "semantic"):
            pts = mirrored_points(s, branch, 0, 0)
            for a in (float(x) for x in args.alphas.split(",")):
                try:
                    lam = leading_eigenvalue(s, a, branch, pts)[0]
                except (Inadmissible, ArithmeticError):  # (no agnostic point found there: no reference)
                    lam = float("nan")
                t = time.perf_counter()
                fp = solve(s, a, branch, args.precision)
                sec = time.perf_counter() - t
                bad = fp.status == Status.collapsed and lam > 1 + MARGIN
                agree = signs_agree(s, fp)
                flipped = fp.status == Status.ok and agree is False
                rows.append({"setting": name, "branch": branch, "alpha": a, "lambda": round(lam, 3),
                             "status": fp.status.value,
                             "starts": ",".join(r.status.value for r in fp.starts) or "-",
                             "order": f"{fp.summary()[ORDER[branch]]:.4g}", "evaluations": fp.iterations,
                             "seconds": round(sec, 1), "signs": "-" if agree is None else ("agree" if agree else "differ"),
                             "check": "CONTRADICTION" if bad else ("SIGNS" if flipped else "")})
                print(rows[-1], flush=True)
    print(format_table(rows, list(rows[0])))


if __name__ == "__main__":
    main()
