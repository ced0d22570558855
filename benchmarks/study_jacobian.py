"""The study's Jacobian (two tokens, rank 1): how far each way of computing it lies from a reference, per scrambling.

    python benchmarks/study_jacobian.py [--log2n 15] [--reference-log2n 19]

Per point (solved at `fast`; rows next to the positional branch's ends at omega 0 and 0.1, and in the bulk) and per
scrambling of 2^log2n points: the distance (Frobenius, in the layout's scale, relative) from the reference, central
differences of the full map at 3e-3 on 2^reference-log2n points of another scrambling, and the eigenvalues of
- `score`: BranchMap.score_jacobian (likelihood-ratio columns along q, m, theta; basin-held along V);
- `held`: every column basin-held (the general kernel's BranchMap.jacobian on the same points);
- `solver`: BranchMap.jacobian, the chord's matrix (forward differences at 0.9 x CONTINUE_RADIUS, continued
  evaluations, on 2^15 points and more; at 1e-2 of the full map on fewer);
- `diff 1e-2`: forward differences of the full map at 1e-2 (own starts at every step).
A matrix with an eigenvalue near 1 makes the chord's (I - J)^-1 blow up.
"""

from __future__ import annotations

import argparse
import functools

import numpy as np

from attnphase.cli.common import format_table
from attnphase.setting import Setting
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.solvers.fixed_point import jacobian
from attnphase.theory.state_evolution.branch_map import branch_map
from attnphase.theory.state_evolution.solve import solve


def _apart(J: np.ndarray, ref: np.ndarray, scaled: np.ndarray) -> float:
    return float(np.linalg.norm((J - ref) * scaled) / np.linalg.norm(ref * scaled))


def _eig(J: np.ndarray) -> str:
    return " ".join(f"{v.real:.2f}" + (f"{v.imag:+.2f}i" if abs(v.imag) > 5e-3 else "")
                    for v in sorted(np.linalg.eigvals(J), key=lambda v: v.real))


POINTS = ((0.0, 0.8, "positional"), (0.1, 1.2, "positional"), (0.3, 0.8, "semantic"), (0.3, 1.5, "agnostic"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log2n", type=int, default=15)
    ap.add_argument("--reference-log2n", type=int, default=19)
    ap.add_argument("--scramblings", type=int, default=3)
    a = ap.parse_args()
    rows = []
    for omega, alpha, branch in POINTS:
        s = Setting(omega=omega)
        fp = solve(s, alpha, branch, "fast", stability=False)
        big = branch_map(s, alpha, branch, gaussian_sobol(a.reference_log2n, 4, 7))
        x = big.pack(fp.overlaps)
        S = big.layout.scale(x)
        ref, _ = jacobian(big.step, x, 3e-3, big.layout.scale, central=True)

        scaled = S[None, :] / S[:, None]
        apart = functools.partial(_apart, ref=ref, scaled=scaled)

        rows.append({"point": f"omega {omega} alpha {alpha} {branch}", "scrambling": "reference", "method": "-",
                     "apart": "-", "eigenvalues": _eig(ref)})
        for rep in range(a.scramblings):
            pts = gaussian_sobol(a.log2n, 4, rep)
            score = branch_map(s, alpha, branch, pts).score_jacobian(x)
            held, _ = branch_map(s, alpha, branch, pts, kernel="general").jacobian(x)
            near = branch_map(s, alpha, branch, pts)
            near.step(x)  # (as in solve: after an evaluation there, whose minima its steps continue)
            solver, _ = near.jacobian(x)
            wide = branch_map(s, alpha, branch, pts)
            d_wide, _ = jacobian(wide.step, x, 1e-2, wide.layout.scale)
            for name, J in (("score", score), ("held", held), ("solver", solver), ("diff 1e-2", d_wide)):
                rows.append({"point": "", "scrambling": rep, "method": name, "apart": f"{apart(J):.3f}",
                             "eigenvalues": _eig(J)})
    print(format_table(rows, list(rows[0])))


if __name__ == "__main__":
    main()
