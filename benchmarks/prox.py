"""General proximal kernel: speed and start measurements.

    python benchmarks/prox.py [--log2n 15] [--reps 3]          points/second per (L, r), and today's L = 2 kernel
    python benchmarks/prox.py --starts [--settings 40] [--log2n 11]
        which starts win: every candidate start is run alone on channel-like problems (random q, m, V, teacher
        correlation per setting) and compared with the best of all candidates plus 32 random starts.
    python benchmarks/prox.py --untied [--starts]
        the same for the untied student's loss (scores h^Q h^K^T, field rank 2r; shapes are (L, r) per factor).

Prints tables.  Timings include the start construction and the numba dispatch, not compilation (one warm-up).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attnphase.theory.prox._general_draws import draw_problem
from attnphase.theory.prox.general import own_starts, prox_general

SHAPES = ((2, 1), (3, 1), (2, 2), (4, 1))
UNTIED_SHAPES = ((2, 1), (3, 1), (2, 2))  # (L, r) per factor: field rank 2r
UNTIED_OWN = ["w", "tied zero", "tied mirror", "svd zero", "svd mirror", "(w+svd)/2", "(w+tied)/2"]


def _timed(fn, reps: int):
    """Best wall time and the CPU time of that run (all threads): on a shared machine the CPU time is the
    steadier measure of the work."""
    best = (np.inf, np.inf, None)
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        t, c = time.perf_counter() - t0, time.process_time() - c0
        if t < best[0]:
            best = (t, c, out)
    return best


def speed(log2n: int, reps: int, untied: bool = False) -> None:
    from attnphase.theory.prox.two_token import solve_prox

    n = 2**log2n
    print(f"{'L':>2} {'r':>2} {'kernel':>8} {'points/s':>10} {'pts/CPU-s':>10} {'s / 2^15':>9} {'starts':>6} "
          f"{'iters/pt':>8} {'converged':>9}" + ("   (untied: r per factor)" if untied else ""))
    for L, r in (UNTIED_SHAPES if untied else SHAPES):
        rf = 2 * r if untied else r
        p = draw_problem(L, rf, n, seed=100 + 10 * L + r, q=0.3, m=0.25, V=15.0, corr=0.5)
        prox_general(p.w[:64], p.T[:64], p.Vinv, p.sigma2, untied=untied)  # compile / load cache
        t, c, res = _timed(lambda p=p: prox_general(p.w, p.T, p.Vinv, p.sigma2, untied=untied), reps)
        n_st = own_starts(p.w[:1], p.T[:1], p.Vinv, untied=untied).shape[1]
        print(f"{L:>2} {r:>2} {'untied' if untied else 'general':>8} {n / t:>10.0f} {n / c:>10.0f} "
              f"{t * 2**15 / n:>9.3f} {n_st:>6} {res.iterations.mean():>8.1f} {res.converged.mean():>9.4f}")
        if (L, r) == (2, 1) and not untied:
            args = (p.w[:, 0, 0], p.w[:, 1, 0], p.T[:, 0, 0], p.T[:, 1, 1], p.V, p.sigma2)
            solve_prox(*(a[:64] if isinstance(a, np.ndarray) else a for a in args))
            t2, c2, old = _timed(lambda args=args: solve_prox(*args), reps)
            print(f"{L:>2} {r:>2} {'l2r1':>8} {n / t2:>10.0f} {n / c2:>10.0f} {t2 * 2**15 / n:>9.3f} {3:>6} {'':>8} "
                  f"{old.converged.mean():>9.4f}")
            print(f"      max |value(general) - value(l2r1)| = {np.abs(res.value - old.value).max():.2e}")


def candidate_starts(w: np.ndarray, T: np.ndarray, Vinv: np.ndarray,
                     untied: bool = False) -> tuple[list[str], int, np.ndarray]:
    """The own starts followed by the candidates that were considered and dropped; returns (names, number of own
    starts, starts (n, S, L, r))."""
    n, L, r = w.shape
    if untied:
        own = own_starts(w, T, Vinv, untied=True)
        w0, zt, zs = own[:, 0], own[:, 1], own[:, 3]
        extra_names = ["-w", "2 svd", "svd/2", "2 tied", "(w+svd mirror)/2", "(w+tied mirror)/2"]
        extra = [-w0, 2.0 * zs, 0.5 * zs, 2.0 * zt, 0.5 * (w0 + own[:, 4]), 0.5 * (w0 + own[:, 2])]
        return UNTIED_OWN + extra_names, own.shape[1], np.concatenate([own, np.stack(extra, axis=1)], axis=1)
    own = own_starts(w, T, Vinv)
    n_own = own.shape[1]
    names = ["w", "zero", "mirror", "(w+zero)/2", "2 zero"][:n_own - L] + [f"mid, {l} at w" for l in range(L)]
    w0, za = own[:, 0], own[:, 1]
    extra_names = ["-w", "zero/2", "(w+mirror)/2"] + (["2 zero"] if r == 1 else [])
    extra = [-w0, 0.5 * za, 0.5 * (w0 + own[:, 2])] + ([2.0 * za] if r == 1 else [])
    for l in range(L):
        # Token l flipped: other attention patterns (for r = 1 the sign patterns of the projections).
        f = np.ones((1, L, 1))
        f[0, l, 0] = -1.0
        extra_names += [f"zero flip {l}", f"w flip {l}"]
        extra += [za * f, w0 * f]
    return names + extra_names, n_own, np.concatenate([own, np.stack(extra, axis=1)], axis=1)


def starts_study(n_settings: int, log2n: int, n_random: int = 32, untied: bool = False) -> None:
    n = 2**log2n
    tol = 1e-9
    for L, r in (UNTIED_SHAPES if untied else SHAPES):
        vals_all, ref_all = [], []
        r_field = 2 * r if untied else r
        for s in range(n_settings):
            p = draw_problem(L, r_field, n, seed=1000 * L + 100 * r + s)
            names, n_own, C = candidate_starts(p.w, p.T, p.Vinv, untied)
            vals_all.append(np.stack([prox_general(p.w, p.T, p.Vinv, p.sigma2, C[:, k:k + 1], own=False,
                                                   untied=untied).value for k in range(C.shape[1])], axis=1))
            rng = np.random.default_rng(s)
            scale = np.maximum(np.abs(C[:, 1]).max(axis=(1, 2)), np.abs(p.w).max(axis=(1, 2)))
            R = (rng.normal(size=(n, n_random, L, r_field)) * scale[:, None, None, None]
                 * rng.uniform(0.3, 2.0, (1, n_random, 1, 1)))
            ref_all.append(prox_general(p.w, p.T, p.Vinv, p.sigma2, np.concatenate([C, R], axis=1), own=False,
                                        untied=untied).value)
        vals = np.concatenate(vals_all)
        vals = np.where(np.isnan(vals), np.inf, vals)  # a skipped (NaN) start reached nothing
        ref = np.concatenate(ref_all)
        own_best = vals[:, :n_own].min(axis=1)
        gap = own_best - ref
        print(f"\n{'untied ' if untied else ''}(L, r) = ({L}, {r}): {n_settings} settings x {n} points = {len(ref)}")
        print(f"  own starts miss the best of all candidates + {n_random} random starts (by > 1e-9) at "
              f"{int((gap > tol).sum())} points; largest gap {gap.max():.2e}")
        print(f"  {'start':>14} {'reaches own best':>17} {'only one to':>12} {'beats own set':>14}   (own starts first)")
        for k, nm in enumerate(names):
            reach = vals[:, k] <= own_best + tol
            if k < n_own:
                others = np.delete(vals[:, :n_own], k, axis=1).min(axis=1)
                only = int((vals[:, k] < others - tol).sum())
                print(f"  {nm:>14} {int(reach.sum()):>17} {only:>12} {'':>14}")
            else:
                print(f"  {nm:>14} {int(reach.sum()):>17} {'':>12} {int((vals[:, k] < own_best - tol).sum()):>14}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log2n", type=int, default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--starts", action="store_true")
    ap.add_argument("--settings", type=int, default=40)
    ap.add_argument("--untied", action="store_true", help="the untied student's loss (scores h^Q h^K^T)")
    args = ap.parse_args()
    if args.starts:
        starts_study(args.settings, args.log2n or 11, untied=args.untied)
    else:
        speed(args.log2n or 15, args.reps, untied=args.untied)


if __name__ == "__main__":
    main()
