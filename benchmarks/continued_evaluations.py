"""Continued evaluations of the fixed-point map: how far from a full evaluation they stay exact, and what they save.

    python benchmarks/continued_evaluations.py [--log2n 15] [--omega 0.3] [--setting study|rank2|L3|L4|rstar2|untied]
        per fixed point of the setting (positional, semantic, ... at several alphas) and per move of the overlaps: the points
        whose continued prox (Newton from every local minimiser of the full evaluation at the anchor) differs from
        the full one (own starts) at the moved overlaps, the largest relative difference of the map's image, and
        the prox times (CPU seconds, one thread);
    python benchmarks/continued_evaluations.py --steering [--setting rank2|L3|L4|untied]
        anderson from the default start with full evaluations only, and steered by continued evaluations (exact
        evaluations every few steps and for every verdict, as solve runs it for the general kernel): the
        evaluations of each kind, CPU seconds, and the distance between the two fixed points in tolerances;
    python benchmarks/continued_evaluations.py --curve
        the omega curve of `attnphase theory --alpha 0.1:2:20 --branch all` solved in this process: per branch
        the seconds, full and continued evaluations at full resolution, and the scramblings;
    python benchmarks/continued_evaluations.py --point 1.5 [--setting rank2]
        every branch of the setting at one alpha, as `attnphase theory --branch global` solves them (default
        precision, one thread): per branch the seconds, the full and continued evaluations at full resolution and
        the seconds spent in the full ones, the warm (basin-held) evaluations, and the scramblings.

Prints tables.  The moves are in the coordinates the continuation radius is measured in (|dx_j| / scale_j,
BranchMap.move_scale: an entry of m or theta against at least sqrt(q_aa), sqrt(q_aa rho_bb)), random signs per
coordinate.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator

import numba
import numpy as np

from attnphase.setting import Setting
from attnphase.theory.model.channel import points_dim, update_hatoverlaps
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.solvers.fixed_point import anderson
from attnphase.theory.state_evolution.branch_map import BranchMap, branch_map
from attnphase.theory.state_evolution.curves import solve_curve
from attnphase.theory.state_evolution.precision import PRECISIONS, Precision, integration_points
from attnphase.theory.state_evolution.results import branches_for
from attnphase.theory.state_evolution.solve import solve
from attnphase.theory.state_evolution.starts import default_start

MOVES = (1e-4, 1e-3, 3e-3, 1e-2, 3e-2)
POINTS = (("positional", 0.5), ("positional", 1.5), ("semantic", 0.9), ("semantic", 1.8))
# The general kernel's shapes (the settings of tests/test_branches.py): Setting keywords and (branch, alpha) points.
SETTINGS = {
    "study": ({}, POINTS),
    "rank2": ({"r": 2}, (("positional", 1.5), ("semantic", 1.5), ("mixed", 1.5))),
    "L3": ({"L": 3, "positions": "simplex"}, (("positional", 0.5), ("positional", 1.5), ("semantic", 1.5))),
    "L4": ({"L": 4, "positions": "orthogonal"}, (("positional", 1.0), ("semantic", 1.5))),
    "rstar2": ({"r_star": 2}, (("positional", 1.5),)),
    "untied": ({"student": "untied"}, (("positional", 3.0), ("semantic", 3.0))),
}


def _cpu(fn, *args, **kwargs):
    c0 = time.process_time()
    out = fn(*args, **kwargs)
    return out, time.process_time() - c0


def exactness(omega: float, log2n: int, draws: int, setting: str = "study") -> None:
    kw, points = SETTINGS[setting]
    s = Setting(omega=omega, **kw)
    prec = Precision("bench", log2n, 1, 3e-5)
    print(f"{setting}: omega {omega}, 2^{log2n} points, {draws} random directions per move")
    print(f"{'branch':>10} {'alpha':>5} {'move':>7} {'differ':>7} {'max rel diff':>12} {'full s':>7} {'cont s':>7}")
    for branch, alpha in points:
        fp = solve(s, alpha, branch, "fast")
        if not fp.valid:
            print(f"{branch:>10} {alpha:>5} (no valid fixed point: {fp.status.value})")
            continue
        pts = integration_points(s, prec, 0)
        branch = "free" if branch == "mixed" else branch  # (the mixed point lives on the free layout)
        anchor_map = branch_map(s, alpha, branch, pts)
        x0 = anchor_map.pack(fp.overlaps)
        minima = anchor_map.step(x0)[1].minima  # a full evaluation records the local minima
        rng = np.random.default_rng(0)
        for move in MOVES:
            differ, worst, t_full, t_cont = 0, 0.0, 0.0, 0.0
            for _ in range(draws):
                x = x0 + move * rng.choice([-1.0, 1.0], x0.size) * anchor_map.move_scale(x0)
                o = anchor_map.unpack(x)
                cont, tc = _cpu(update_hatoverlaps, s, alpha, o, pts, branch, minima=minima)
                full, tf = _cpu(update_hatoverlaps, s, alpha, o, pts, branch)
                differ += int(np.sum(np.abs(cont.h - full.h).max(axis=(1, 2)) > 1e-6))
                gc, gf = anchor_map.image(cont), anchor_map.image(full)
                worst = max(worst, float(np.max(np.abs(gc - gf) / anchor_map.layout.scale(gf))))
                t_full += tf
                t_cont += tc
            print(f"{branch:>10} {alpha:>5} {move:>7.0e} {differ:>7d} {worst:>12.1e} {t_full / draws:>7.3f} "
                  f"{t_cont / draws:>7.3f}")


@contextlib.contextmanager
def _counted_evaluations() -> Iterator[dict]:
    """BranchMap's evaluations at full resolution (default precision's points) while the block runs, by kind: full,
    continued, the seconds in full ones, and warm (cheap) ones.  Reset a kind by setting it to 0."""
    full_res = 2 ** PRECISIONS["default"].log2_points
    counts = {"full": 0, "continued": 0, "full_s": 0.0, "warm": 0}
    step, cheap = BranchMap.step, BranchMap.cheap

    def counted(self, x):
        before = dict(self.evaluations)
        t0 = time.perf_counter()
        out = step(self, x)
        if self.points.shape[1] == full_res:
            for k in ("full", "continued"):
                counts[k] += self.evaluations[k] - before[k]
            if self.evaluations["full"] > before["full"]:
                counts["full_s"] += time.perf_counter() - t0
        return out

    def counted_cheap(self, x):
        counts["warm"] += self.points.shape[1] == full_res
        return cheap(self, x)

    BranchMap.step, BranchMap.cheap = counted, counted_cheap
    try:
        yield counts
    finally:
        BranchMap.step, BranchMap.cheap = step, cheap


def curve(omega: float) -> None:
    s = Setting(omega=omega)
    with _counted_evaluations() as counts:
        solve_curve(s, [1.0], "positional", "fast")  # compile outside the timings
        alphas = np.linspace(0.1, 2.0, 20)
        print(f"omega {omega}, alphas 0.1:2:20, default precision, one process, numba threads "
              f"{numba.get_num_threads()}")
        print(f"{'branch':>10} {'seconds':>8} {'full':>5} {'continued':>9} {'scramblings':>11} {'valid':>5}")
        for branch in ("positional", "semantic", "agnostic"):
            for k in counts:
                counts[k] = 0
            t0 = time.perf_counter()
            pts = solve_curve(s, alphas, branch, "default")
            dt = time.perf_counter() - t0
            print(f"{branch:>10} {dt:>8.1f} {counts['full']:>5d} {counts['continued']:>9d} "
                  f"{sum(p.n_replicas for p in pts):>11d} {sum(p.valid for p in pts):>5d}")


def point(omega: float, alpha: float, name: str) -> None:
    """Where one alpha's branches spend their time: a full evaluation (own starts) is needed at least once per
    scrambling (its points are new), and costs several continued ones."""
    s = Setting(omega=omega, **SETTINGS[name][0])
    with _counted_evaluations() as counts:
        solve(s, alpha, "semantic", "fast")  # compile outside the timings
        print(f"setting {name}, omega {omega}, alpha {alpha}, default precision, one process, numba threads "
              f"{numba.get_num_threads()}")
        print(f"{'branch':>10} {'seconds':>8} {'full':>5} {'in full s':>9} {'continued':>9} {'warm':>5} "
              f"{'scramblings':>11} {'status':>13}")
        total = 0.0
        for branch in branches_for(s):
            for k in counts:
                counts[k] = 0
            t0 = time.perf_counter()
            fp = solve(s, alpha, branch, "default")
            dt = time.perf_counter() - t0
            total += dt
            print(f"{branch:>10} {dt:>8.2f} {counts['full']:>5d} {counts['full_s']:>9.2f} {counts['continued']:>9d} "
                  f"{counts['warm']:>5d} {fp.n_replicas:>11d} {fp.status.value:>13}")
        print(f"{'all':>10} {total:>8.2f}")


def steering(omega: float, log2n: int, names: list[str]) -> None:
    """anderson from the default start, plain (full evaluations only) and steered by the continued map (its approx,
    as solve runs it for the general kernel): evaluations of each kind, CPU seconds, and how far apart the two
    fixed points are (max over coordinates of |difference| / scale, in units of the tolerance)."""
    tol = 1e-5
    print(f"omega {omega}, 2^{log2n} points, tol {tol:g}, from the default start")
    print(f"{'setting':>8} {'branch':>10} {'alpha':>5} {'plain':>14} {'steered':>22} {'CPU s':>11} {'apart/tol':>9}")
    for name in names:
        kw, points = SETTINGS[name]
        s = Setting(omega=omega, **kw)
        pts = gaussian_sobol(log2n, points_dim(s), 11)
        for branch, alpha in points:
            branch = "free" if branch == "mixed" else branch
            runs = []
            for steer in (False, True):
                bm = branch_map(s, alpha, branch, pts)
                x0 = bm.pack(default_start(s, branch))
                sol, cpu = _cpu(anderson, bm.step, x0, tol=tol, max_iter=200, admissible=bm.admissible,
                                scale=bm.layout.scale, collapsed=bm.collapsed, approx=bm.continued if steer else None)
                runs.append((sol, cpu, dict(bm.evaluations), bm.layout.scale(sol.x)))
            (p, tp, ep, sc), (q, tq, eq, _) = runs
            apart = float(np.max(np.abs(p.x - q.x) / sc)) / tol if p.converged and q.converged else float("nan")
            print(f"{name:>8} {branch:>10} {alpha:>5} {p.status.value:>9} {ep['full']:>4d} "
                  f"{q.status.value:>9} {eq['full']:>4d}+{eq['continued']:<4d}c {tp:>5.1f}/{tq:<5.1f} {apart:>9.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--log2n", type=int, default=15)
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--curve", action="store_true")
    ap.add_argument("--point", type=float, default=None, metavar="ALPHA",
                    help="every branch of --setting at this alpha (what --branch global solves)")
    ap.add_argument("--setting", default="study", choices=sorted(SETTINGS))
    ap.add_argument("--steering", action="store_true",
                    help="anderson plain against steered by continued evaluations (general-kernel settings)")
    ap.add_argument("--threads", type=int, default=1, help="numba threads (default 1: CPU seconds per thread)")
    a = ap.parse_args()
    numba.set_num_threads(a.threads)
    if a.steering:
        steering(a.omega, a.log2n, [a.setting] if a.setting != "study" else ["rank2", "L3", "L4", "untied"])
    elif a.point is not None:
        point(a.omega, a.point, a.setting)
    elif a.curve:
        curve(a.omega)
    else:
        exactness(a.omega, a.log2n, a.draws, a.setting)


if __name__ == "__main__":
    main()
