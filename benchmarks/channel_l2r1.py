"""The fused channel kernel (theory/_prox_kernel.channel_kernel) against the pointwise path it replaces, per evaluation.

    python benchmarks/channel_l2r1.py [--omega 0.3] [--alpha 1.5] [--reps 15] [--threads 1]

At the study's positional and semantic fixed points (fast precision), on one scrambling of the default precision's
points (2^15): CPU milliseconds per update_hatoverlaps call, the pointwise path (pointwise_f with the l2r1 prox,
numpy around the compiled Newton) and the fused one, each for a full evaluation (own starts) and a continued one
(Newton from the full evaluation's minima); the median over reps, the calls interleaved.  Also the largest
difference of the hat overlaps between the two paths (relative) and whether the minimisers agree bitwise.
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

from attnphase.setting import Setting
from attnphase.theory.model import channel
from attnphase.theory.state_evolution.precision import integration_points
from attnphase.theory.state_evolution.solve import solve

HATS = ("qhat", "mhat", "Vhat", "thetahat")


def _cpu_ms(fn, *args, **kwargs):
    c0 = time.process_time()
    out = fn(*args, **kwargs)
    return out, 1e3 * (time.process_time() - c0)


def _pointwise(s, alpha, o, pts, branch, minima=None):
    return channel._update_pointwise(s, alpha, o, pts, channel.as_branch(branch), kernel="l2r1", warm=None,
                                     minima=minima)


def _rel_diff(a, b) -> float:
    out = 0.0
    for k in HATS:
        x, y = getattr(a.hats, k), getattr(b.hats, k)
        out = max(out, float(np.max(np.abs(x - y) / np.maximum(np.abs(x), 1e-300), initial=0.0)))
    return max(out, abs(a.moreau - b.moreau) / abs(a.moreau))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--alpha", type=float, default=1.5)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1, help="numba threads (default 1: CPU per thread)")
    a = ap.parse_args()
    numba.set_num_threads(a.threads)
    s = Setting(omega=a.omega)
    pts = integration_points(s, "default", 0)
    print(f"omega {a.omega}, alpha {a.alpha}, {pts.shape[1]} points, numba threads {numba.get_num_threads()}, "
          f"median of {a.reps} (CPU ms per update_hatoverlaps)")
    print(f"{'branch':>10} {'kind':>9} {'pointwise':>9} {'fused':>7} {'ratio':>6} {'max rel diff':>12} {'same h':>6}")
    for branch in ("positional", "semantic"):
        o = solve(s, a.alpha, branch, "fast").overlaps
        anchor = channel.update_hatoverlaps(s, a.alpha, o, pts, branch)  # (also compiles)
        _pointwise(s, a.alpha, o, pts, branch)
        for kind, minima in (("full", None), ("continued", anchor.minima)):
            t_old, t_new = [], []
            for _ in range(a.reps):
                old, t = _cpu_ms(_pointwise, s, a.alpha, o, pts, branch, minima=minima)
                t_old.append(t)
                new, t = _cpu_ms(channel.update_hatoverlaps, s, a.alpha, o, pts, branch, minima=minima)
                t_new.append(t)
            mo, mn = float(np.median(t_old)), float(np.median(t_new))
            same = np.array_equal(old.h, new.h) and np.array_equal(old.minima.h, new.minima.h, equal_nan=True)
            print(f"{branch:>10} {kind:>9} {mo:>9.2f} {mn:>7.2f} {mo / mn:>6.2f} {_rel_diff(old, new):>12.1e} "
                  f"{str(same):>6}")


if __name__ == "__main__":
    main()
