"""The drawn path of a global-minimum curve: along the branch that is the global minimum at each computed alpha, and
where the minimum switches branch, a vertical jump at the switch -- never a slope from the last grid point of one
branch to the first of the other (a first-order transition is a jump in every reported quantity).

Where the switch happens is taken from the theory: its alpha_c when that lies between the two grid points around
the switch.  Without one, the root of the linearly interpolated train-loss difference of the two branches between
those grid points is used (the caller says so in the figure: ``GlobalPath.interpolated``); where one branch has
no point at one of them, the jump is put at the grid point where both are known.  The value of each branch at
the switch is its own curve linearly interpolated between computed points.  Nothing here solves anything.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["INTERPOLATED_NOTE", "GlobalPath", "densified", "global_path"]

# appended to a legend label when some switch is not the theory's alpha_c
INTERPOLATED_NOTE = "switch interpolated"

# (alpha, value, train_loss) of the valid computed points of one branch
BranchPoints = Sequence[tuple[float, float, float]]


@dataclass(frozen=True)
class GlobalPath:
    """x, y of the line to draw; ``switches``: the alphas where it jumps; ``interpolated``: some switch was placed
    at an interpolated train-loss crossing (or midway between grid points) rather than at the theory's alpha_c."""

    x: tuple[float, ...]
    y: tuple[float, ...]
    switches: tuple[float, ...]
    interpolated: bool
    branch: tuple[str, ...] = ()  # the branch each vertex lies on


def _finite(*v: float | None) -> bool:
    return all(x is not None and math.isfinite(x) for x in v)


def _at(pts: BranchPoints, a: float, k: int) -> float | None:
    """Component k of a branch linearly interpolated at alpha a; None outside the branch's computed range."""
    v = sorted((p[0], p[k]) for p in pts if _finite(p[0], p[k]))
    for (a0, y0), (a1, y1) in zip(v, v[1:], strict=False):
        if a0 <= a <= a1:
            return y0 if a1 == a0 else y0 + (y1 - y0) * (a - a0) / (a1 - a0)
    for a_end, y_end in v[:1] + v[-1:]:
        if math.isclose(a, a_end, rel_tol=1e-9, abs_tol=1e-12):
            return y_end
    return None


def _switch(b0: str, a0: float, b1: str, a1: float, branches: Mapping[str, BranchPoints],
            alpha_c: float | None) -> tuple[float, bool]:
    """(alpha of the switch between grid points a0 < a1, whether it was interpolated rather than alpha_c)."""
    if _finite(alpha_c) and a0 <= float(alpha_c) <= a1:  # type: ignore[arg-type]
        return float(alpha_c), False  # type: ignore[arg-type]
    l0 = [_at(branches.get(b0, ()), a, 2) for a in (a0, a1)]
    l1 = [_at(branches.get(b1, ()), a, 2) for a in (a0, a1)]
    if None not in l0 and None not in l1:
        d0, d1 = l0[0] - l1[0], l0[1] - l1[1]  # type: ignore[operator]
        if d0 != d1 and d0 * d1 <= 0:
            return a0 + (a1 - a0) * d0 / (d0 - d1), True
    # one branch lacks a point at an end (e.g. the new one appears in between): jump where both are known
    if _at(branches.get(b0, ()), a1, 1) is not None:
        return a1, True
    if _at(branches.get(b1, ()), a0, 1) is not None:
        return a0, True
    return 0.5 * (a0 + a1), True


def global_path(along: Sequence[tuple[str, float, float]], branches: Mapping[str, BranchPoints],
                alpha_c: float | None = None,
                interp: Mapping[str, Callable[[float], float | None]] | None = None) -> GlobalPath:
    """The path through ``along`` = [(branch, alpha, value)] (the global minimum as the theory chose it, one entry
    per computed alpha), jumping where the branch changes.  ``branches``: each branch's own valid points
    (alpha, value, train_loss), to continue a segment to the switch; ``alpha_c``: the theory's switch point;
    ``interp``: per branch, the value between its points as the figure draws it (default: linear)."""
    pts = sorted(((b, float(a), float(v)) for b, a, v in along if _finite(float(a), float(v))), key=lambda t: t[1])
    runs: list[list[tuple[str, float, float]]] = []
    for p in pts:
        if not runs or runs[-1][0][0] != p[0]:
            runs.append([])
        runs[-1].append(p)
    xs: list[float] = []
    ys: list[float] = []
    bs: list[str] = []
    switches: list[float] = []
    interpolated = False
    cuts: list[float] = []
    for prev, nxt in zip(runs, runs[1:], strict=False):
        a, guessed = _switch(prev[-1][0], prev[-1][1], nxt[0][0], nxt[0][1], branches, alpha_c)
        cuts.append(a)
        interpolated |= guessed
    for i, run in enumerate(runs):
        seg = [(a, v) for _, a, v in run]
        own = branches.get(run[0][0], ())
        f = (interp or {}).get(run[0][0])
        at = (lambda a, own=own, f=f: f(a) if f is not None else _at(own, a, 1))  # noqa: E731
        if i > 0 and not math.isclose(cuts[i - 1], seg[0][0]):  # enter at the switch on this run's branch
            y = at(cuts[i - 1])
            seg.insert(0, (cuts[i - 1], seg[0][1] if y is None else y))
        if i < len(runs) - 1:
            switches.append(cuts[i])
        if i < len(runs) - 1 and not math.isclose(cuts[i], seg[-1][0]):  # leave it there, still on this branch
            y = at(cuts[i])
            seg.append((cuts[i], seg[-1][1] if y is None else y))
        xs.extend(a for a, _ in seg)
        ys.extend(v for _, v in seg)
        bs.extend(run[0][0] for _ in seg)
    return GlobalPath(tuple(xs), tuple(ys), tuple(switches), interpolated, tuple(bs))


def densified(path: GlobalPath, interp: Mapping[str, Callable[[float], float | None]],
              per_gap: int = 12) -> tuple[list[float], list[float]]:
    """The path with each stretch between two vertices on the same branch sampled along that branch's
    interpolant (so the underlay follows a smooth theory line); jumps stay vertical."""
    if not path.x:
        return [], []
    xs, ys = [path.x[0]], [path.y[0]]
    for i in range(1, len(path.x)):
        a0, a1 = path.x[i - 1], path.x[i]
        f = interp.get(path.branch[i]) if path.branch and path.branch[i] == path.branch[i - 1] else None
        if f is not None and a1 > a0:
            for a in np.linspace(a0, a1, per_gap, endpoint=False)[1:]:
                v = f(float(a))
                if v is not None:
                    xs.append(float(a))
                    ys.append(v)
        xs.append(a1)
        ys.append(path.y[i])
    return xs, ys
