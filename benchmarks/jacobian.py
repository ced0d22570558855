"""The fixed-point map's Jacobian for the general kernel: the basin-held map's (BranchMap.jacobian, what solve uses)
against the forward difference of the full map at 1e-2 (fixed_point.jacobian, the reference it replaced).

    python benchmarks/jacobian.py [--omega 0.3] [--log2n 13] [--steps 1e-3,1e-4,1e-5]

Per fixed point (solved at `fast` precision; the mixed one on the free layout): how far apart the two matrices are
(Frobenius, relative), the map's leading eigenvalue moduli from each, the CPU seconds of each (one thread), and,
used as the chord's frozen matrix on three other scramblings (start 1 % off the fixed point, tolerance 3e-5, at most
12 steps), the exact evaluations each chord took (negative: not converged).  The basin-held difference is also
shown at other steps (the inner Newton's tolerance sets how small the step can be).
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

from attnphase.setting import Setting
from attnphase.theory.model.channel import points_dim
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.solvers.fixed_point import chord, jacobian, newton_matrix
from attnphase.theory.state_evolution import branch_map as bm_module
from attnphase.theory.state_evolution.branch_map import JACOBIAN_STEP, branch_map
from attnphase.theory.state_evolution.solve import solve

# (Setting keywords, branch, alpha): the general kernel's shapes.
POINTS = (({"L": 3, "positions": "simplex"}, "semantic", 1.5), ({"L": 3, "positions": "simplex"}, "agnostic", 1.5),
          ({"r": 2}, "positional", 0.8), ({"r": 2}, "positional", 1.5), ({"r": 2}, "semantic", 1.5),
          ({"r": 2}, "mixed", 1.5), ({"student": "untied"}, "semantic", 3.0))


def _chords(s: Setting, branch: str, alpha: float, x: np.ndarray, J: np.ndarray, log2n: int) -> list[int]:
    M = newton_matrix(J)
    out = []
    for rep in (1, 2, 3):
        bm = branch_map(s, alpha, branch, gaussian_sobol(log2n, points_dim(s), rep))
        start = x * (1 + 0.01 * np.random.default_rng(rep).standard_normal(x.size))
        res = chord(bm.step, start, tol=3e-5, matrix=M, admissible=bm.admissible, scale=bm.layout.scale, max_iter=12)
        out.append(res.nit if res.converged else -res.nit)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--log2n", type=int, default=13)
    ap.add_argument("--steps", default="1e-3,1e-4,1e-5", help="basin-held difference steps (scaled) to compare")
    a = ap.parse_args()
    numba.set_num_threads(1)
    steps = [float(v) for v in a.steps.split(",")]
    default_step = bm_module.DERIVATIVE_STEP
    print(f"omega {a.omega}, 2^{a.log2n} points, chord steps on scramblings 1, 2, 3 (negative: not converged)")
    print(f"{'setting':>22} {'branch':>10} {'alpha':>5} {'apart':>6} {'|eig| full':>12} {'|eig| held':>12} "
          f"{'CPU full/held':>13} {'chord full':>12} " + " ".join(f"{'held ' + format(h, 'g'):>12}" for h in steps))
    for kw, branch, alpha in POINTS:
        s = Setting(omega=a.omega, **kw)
        fp = solve(s, alpha, branch, "fast")
        layout_branch = "free" if branch == "mixed" else branch
        if not fp.valid:
            print(f"{str(kw):>22} {branch:>10} {alpha:>5} (no valid fixed point: {fp.status.value})")
            continue
        pts = gaussian_sobol(a.log2n, points_dim(s), 0)
        x = branch_map(s, alpha, layout_branch, pts).pack(fp.overlaps)
        full_map = branch_map(s, alpha, layout_branch, pts)
        c0 = time.process_time()
        J_full, _ = jacobian(full_map.step, x, JACOBIAN_STEP, full_map.layout.scale)
        c1 = time.process_time()
        J_held, _ = branch_map(s, alpha, layout_branch, pts).jacobian(x)
        c2 = time.process_time()
        eig = [np.sort(np.abs(np.linalg.eigvals(J)))[::-1][:2] for J in (J_full, J_held)]
        apart = np.linalg.norm(J_held - J_full) / np.linalg.norm(J_full)
        held = []
        for h in steps:
            bm_module.DERIVATIVE_STEP = h
            try:
                J_h, _ = branch_map(s, alpha, layout_branch, pts).jacobian(x)
            finally:
                bm_module.DERIVATIVE_STEP = default_step
            held.append(_chords(s, layout_branch, alpha, x, J_h, a.log2n))
        print(f"{str(kw):>22} {branch:>10} {alpha:>5} {apart:>6.3f} {str(np.round(eig[0], 2)):>12} "
              f"{str(np.round(eig[1], 2)):>12} {c1 - c0:>6.2f}/{c2 - c1:<6.2f} "
              f"{str(_chords(s, layout_branch, alpha, x, J_full, a.log2n)):>12} "
              + " ".join(f"{str(c):>12}" for c in held))


if __name__ == "__main__":
    main()
