"""What the positional collapse certificate buys (L > 2; Precision.certificate, state_evolution/contraction.py):
the same solves with and without it, their verdicts, map evaluations and seconds.

    python benchmarks/certificate.py [--precision fast] [--alphas 0.2,0.4045,0.6,1.5] [--omega 0.3]

Each row: alpha, the verdict (status, and the starts' statuses) with and without the certificate, their map
evaluations (FixedPoint.iterations, summed over the starts) and seconds, and the ratio of evaluations.  Where the
plain iteration reaches a verdict it is the certified one (elsewhere it runs out of iterations: not_converged); the
evaluations are what the certificate exists for.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from attnphase import Setting
from attnphase.cli.common import format_table
from attnphase.theory.state_evolution.precision import get_precision
from attnphase.theory.state_evolution.solve import solve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--precision", default="fast")
    ap.add_argument("--alphas", default="0.2,0.4045,0.6,1.5")
    ap.add_argument("--omega", type=float, default=0.3)
    args = ap.parse_args()
    s = Setting(L=3, positions="simplex", omega=args.omega)
    on = get_precision(args.precision)
    off = dataclasses.replace(on, name=on.name + "-uncertified", certificate=False)
    solve(s, 0.3, "positional", on)  # (compile / warm the caches outside the timings)
    rows = []
    for a in (float(x) for x in args.alphas.split(",")):
        out = {}
        for key, prec in (("cert", on), ("plain", off)):
            t = time.perf_counter()
            fp = solve(s, a, "positional", prec)
            out[key] = (fp, time.perf_counter() - t)
        (fc, tc), (fpl, tp) = out["cert"], out["plain"]
        starts = lambda fp: ",".join(r.status.value for r in fp.starts) or fp.status.value  # noqa: E731
        rows.append({"alpha": a, "status": fc.status.value, "status uncertified": fpl.status.value,
                     "starts": starts(fc), "starts uncertified": starts(fpl),
                     "evaluations": fc.iterations, "evaluations uncertified": fpl.iterations,
                     "ratio": round(fpl.iterations / max(fc.iterations, 1), 2),
                     "seconds": round(tc, 2), "seconds uncertified": round(tp, 2)})
    print(format_table(rows, list(rows[0])))


if __name__ == "__main__":
    main()
