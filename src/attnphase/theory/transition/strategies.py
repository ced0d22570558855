"""Branch-end strategies of the one transition driver: where each branch exists, and the records of its ends.

- :class:`AdapterEnds` (the study's geometry, L = 2, r = r* = 1, antipodal): the ends as properties of the
  equations, pitchfork or fold (:mod:`attnphase.theory.transition.ends`: branch_end, merge_end).
- :class:`SolverEnds` (any setting): the pitchfork conditions of the linearised map, and the ends where the solver
  stops finding each branch (:func:`attnphase.theory.transition.ends.validity_ends`), held against them.

Both answer the same questions for :func:`attnphase.theory.transition.driver.transition`: ``exists(branch, a)``,
a start for a solve (``path_start``), the semantic end, the fixed points already solved, a second look once the
driver has solved the branches (``revisit``), and the records (``records``).
"""

from __future__ import annotations

import math
from concurrent.futures import Executor
from typing import Protocol

import numpy as np

from attnphase.setting import Setting
from attnphase.theory.model.overlaps import ORDER_NAME, Overlaps
from attnphase.theory.state_evolution.results import FixedPoint
from attnphase.theory.transition.ends import (
    EndResult,
    branch_end,
    confirm_fold,
    merge_end,
    path_as_overlaps,
    validity_ends,
)
from attnphase.theory.transition.linearised import (
    Instability,
    classify_end,
    instability,
    stable_on_grid,
    theta_points,
)
from attnphase.theory.transition.records import Critical, Search


class BranchEnds(Protocol):
    """What the driver asks a branch-end strategy."""

    evaluations: int
    unstable: dict[str, list[dict[str, float]]]

    def exists(self, branch: str, a: float) -> bool: ...

    def path_start(self, branch: str, a: float) -> Overlaps | None: ...

    def semantic_end(self) -> Critical: ...

    def semantic_from_min(self) -> bool: ...

    def seed_points(self) -> list[FixedPoint]: ...

    def revisit(self, positional: list[FixedPoint]) -> bool: ...

    def records(self) -> dict[str, Critical]: ...


def _positional_ends(setting: Setting, alpha_min: float, alpha_max: float, precision: str,
                     seed: int) -> tuple[EndResult, EndResult | None]:
    """The positional branch's pitchfork (where it appears) and, where the agnostic point is stable again in m at
    alpha_max (omega <= 0.2), where it merges back into it: (pitchfork end, merge end or None)."""
    # Whether the positional branch vanishes (at a fold) in range is only followed by continuation when its curve
    # says it may (a point that is not valid above the pitchfork): following it to alpha_max costs more than the
    # rest of the transition.
    pos_end = branch_end(setting, "positional", alpha_min, alpha_max, precision, seed, follow=False)
    merge = None
    if pos_end.pitchfork.found:
        merge = merge_end(setting, "positional", max(pos_end.pitchfork.hi, alpha_min), alpha_max, precision, seed)
    return pos_end, merge


class AdapterEnds:
    """The study's geometry: the branch ends located as pitchfork / fold conditions of the L = 2 equations.  With an
    executor, the positional branch's ends are computed in a second process while this one does the semantic's."""

    def __init__(self, setting: Setting, alpha_min: float, alpha_max: float, precision: str, seed: int,
                 ex: Executor | None) -> None:
        self.setting, self.alpha_min, self.alpha_max = setting, alpha_min, alpha_max
        self.precision, self.seed = precision, seed
        pos_future = ex.submit(_positional_ends, setting, alpha_min, alpha_max, precision, seed) if ex else None
        self.sem = branch_end(setting, "semantic", alpha_min, alpha_max, precision, seed)
        self.pos, self.merge = (pos_future.result() if pos_future is not None
                                else _positional_ends(setting, alpha_min, alpha_max, precision, seed))
        self.pos_followed = False
        if self.merge is not None and self.merge.critical.found:
            m = self.merge
            self.pos = EndResult("positional", m.critical, self.pos.pitchfork, per_scrambling=m.per_scrambling,
                                 evaluations=self.pos.evaluations + m.evaluations, order_name=m.order_name)
            self.pos_followed = True

    @property
    def evaluations(self) -> int:
        return self.sem.evaluations + self.pos.evaluations

    def no_pitchfork(self) -> bool:
        """Whether the adapter's Newton failed to locate either branch's pitchfork (no end it can read)."""
        return Search.failed in (self.sem.pitchfork.search, self.pos.pitchfork.search)

    @property
    def unstable(self) -> dict[str, list[dict[str, float]]]:
        return {b: path_as_overlaps(e) for b, e in (("semantic", self.sem), ("positional", self.pos))
                if len(e.unstable)}

    def exists(self, branch: str, a: float) -> bool:
        end = self.sem if branch == "semantic" else self.pos
        c = end.critical
        if branch == "semantic":
            lo = c.hi if c.found else (end.pitchfork.hi if end.pitchfork.found else self.alpha_min)
            return a > lo if (c.found or end.pitchfork.found) else True
        if c.found and c.name == "alpha_pos_vanishes" and a >= c.lo:  # (not the pitchfork where it appears)
            return False
        return not (end.pitchfork.found and a <= end.pitchfork.hi)

    def path_start(self, branch: str, a: float) -> Overlaps | None:
        """Overlaps on the branch's continuation path at alpha (where the path is a graph over alpha)."""
        end = self.sem if branch == "semantic" else self.pos
        P = end.path
        if len(P) < 2:
            return None
        k = end.unstable.shape[0] - 1 if len(end.unstable) else 0
        P = P[max(k, 0):]
        al = P[:, 3]
        if not (np.all(np.diff(al) > 0) and al[0] <= a <= al[-1]):
            return None
        q, V, t = (float(np.interp(a, al, P[:, i])) for i in range(3))
        return Overlaps(q, 0.0, V, t) if end.branch == "semantic" else Overlaps(q, t, V, 0.0)

    def semantic_end(self) -> Critical:
        return self.sem.critical

    def semantic_from_min(self) -> bool:
        return False  # the adapter locates the semantic end, or says why it has none

    def seed_points(self) -> list[FixedPoint]:
        return []

    def revisit(self, positional: list[FixedPoint]) -> bool:
        """A positional point that is not valid above the pitchfork: follow the branch to its end after all.  True
        where the ends changed (the driver then drops the points outside the new range)."""
        if positional and not all(p.valid for p in positional) and not self.pos_followed:
            self.pos = branch_end(self.setting, "positional", self.alpha_min, self.alpha_max, self.precision,
                                  self.seed)
            self.pos_followed = True
            return True
        return False

    def records(self) -> dict[str, Critical]:
        out: dict[str, Critical] = {}
        if self.pos_followed or not self.pos.pitchfork.found:
            out["alpha_pos_vanishes"] = self.pos.critical
        else:
            out["alpha_pos_vanishes"] = Critical.missing(
                "alpha_pos_vanishes", "not in range",
                f"the positional branch appears at a pitchfork at alpha = {self.pos.pitchfork.value:.4g}, is a valid "
                f"fixed point at every alpha solved up to {self.alpha_max:g}, and the agnostic point is unstable in m "
                f"there", "continuation along the alpha grid")
        m = self.merge
        if out["alpha_pos_vanishes"].search == Search.not_in_range and m is not None and not m.critical.found \
                and m.critical.search == Search.failed:
            out["alpha_pos_vanishes"] = m.critical
        out["alpha_sem_appears"] = self.sem.critical
        out["semantic_pitchfork"] = self.sem.pitchfork
        out["positional_pitchfork"] = self.pos.pitchfork
        return out


class SolverEnds:
    """Any setting: the linearised map first (transition.linearised): whether the agnostic point turns unstable in m
    on the grid, where the semantic branch (and the positional one, where it is born in the range) bifurcates from
    it.  Then each end where the solver stops finding the branch, asked at those pitchforks' intervals first and
    bisected on its validity where that does not settle it, each appearance classified against its pitchfork, and
    the positional branch's disappearance against the pitchfork where it merges back into the agnostic point."""

    unstable: dict[str, list[dict[str, float]]] = {}

    def __init__(self, setting: Setting, grid: list[float], precision: str, seed: int, xtol: float) -> None:
        # Where the agnostic point is stable in m on the whole grid no positional branch is born in the range (a
        # branch born outside reaches in through its ends): L = 3 simplex, omega 0.3, eigenvalue at most 0.83.
        scan = stable_on_grid(setting, "positional", grid, seed=seed)
        largest, first = scan.largest, scan.first
        # Each branch's appearance held against its pitchfork condition at the agnostic point (the linearised map,
        # any setting): the solver is asked at the condition's interval first, and bisected only where that does
        # not settle the end.  The positional one is located where the scan saw the eigenvalue reach 1.
        kw = dict(seed=seed, xtol=min(xtol, 0.005))
        pitch = {"semantic": instability(setting, "semantic", grid, **kw)}
        born = largest is None and first < 1.0  # (unstable from alpha_min on: born below the range)
        if born:
            pitch["positional"] = instability(setting, "positional", grid, scan=scan, **kw)
        merges: list[Instability] = []

        def merge(lo: float) -> Critical | None:
            # Where the solver loses the positional branch in range: the highest alpha above lo (its lowest point)
            # where m's block at the agnostic point falls back through 1, the branch merging back (docs/transition.md).
            above = [a for a in grid if a >= lo]
            if len(above) < 2:
                return None
            merges.append(instability(setting, "positional", above, name="positional_merge", descending=True, **kw))
            return merges[-1].critical

        # (where the agnostic point is stable in m on the whole grid it has no pitchfork there)
        self.ve = validity_ends(setting, grid, precision, seed, xtol=max(2 * xtol, 0.02),
                                stable={} if largest is None else {"positional": largest},
                                pitchforks={b: i.critical for b, i in pitch.items()},
                                merge=merge if largest is None else None)
        self.sem_pitchfork = pitch["semantic"].critical
        if born:
            self.pos_pitchfork = pitch["positional"].critical
        elif largest is not None:
            self.pos_pitchfork = Critical.missing("positional_pitchfork", "not in range", f"the agnostic point is "
                                                  f"stable in m at every alpha of the grid (leading eigenvalue of m's "
                                                  f"block at most {largest:.3g})")
        elif math.isnan(first):  # no agnostic point at alpha_min (the positional branch is solved as before)
            self.pos_pitchfork = Critical.missing("positional_pitchfork", "failed", f"the agnostic point was not "
                                                  f"found at alpha = {grid[0]:g} on the mirrored points")
        else:
            self.pos_pitchfork = Critical.missing("positional_pitchfork", "not in range", f"the agnostic point is "
                                                  f"unstable in m from alpha = {grid[0]:g} on (leading eigenvalue of "
                                                  f"m's block {first:.3g} there): born below the range")
        self.evaluations = scan.evaluations + sum(i.evaluations for i in (*pitch.values(), *merges))
        for branch, end_name, pf, side in (("semantic", "alpha_sem_appears", self.sem_pitchfork, "lower"),
                                           ("positional", "alpha_pos_appears", self.pos_pitchfork, "lower"),
                                           ("positional", "alpha_pos_vanishes", self.ve.merge, "upper")):
            end = self.ve.ends[end_name]
            if pf is None or not end.found:
                continue
            if end.kind != "pitchfork":
                order = theta_points([p for p in self.ve.points if p.branch == branch], ORDER_NAME[branch])
                end = confirm_fold(setting, branch, classify_end(end, pf, side, order), pf, side, precision, seed,
                                   self.ve.points)
            self.ve.ends[end_name] = end
            lo, hi = self.ve.range[branch]
            # (the solver's points beyond a supercritical pitchfork are its imperfection, not the branch)
            if end.kind == "pitchfork" and side == "lower" and lo < end.value:
                self.ve.range[branch] = (end.value, hi)
            if end.kind == "pitchfork" and side == "upper" and end.value < hi:
                self.ve.range[branch] = (lo, end.value)

    def exists(self, branch: str, a: float) -> bool:
        lo, hi = self.ve.range[branch]
        return lo < a < hi

    def path_start(self, branch: str, a: float) -> Overlaps | None:
        return None

    def semantic_end(self) -> Critical:
        return self.ve.ends["alpha_sem_appears"]

    def semantic_from_min(self) -> bool:
        return self.ve.range["semantic"][0] == -math.inf

    def seed_points(self) -> list[FixedPoint]:
        return list(self.ve.points)

    def revisit(self, positional: list[FixedPoint]) -> bool:
        return False

    def records(self) -> dict[str, Critical]:
        out = dict(self.ve.ends)
        out["semantic_pitchfork"] = self.sem_pitchfork
        out["positional_pitchfork"] = self.pos_pitchfork
        return out
