"""Curves along alpha: solve_curve follows one branch by continuation; solve_curves runs several branches (in pieces,
in parallel processes)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from attnphase.errors import InputError
from attnphase.notes import Note, NoteCode
from attnphase.setting import Setting, check_alpha
from attnphase.theory.model.patterns import token_patterns
from attnphase.theory.solvers.fixed_point import Status
from attnphase.theory.state_evolution.precision import Precision, get_precision
from attnphase.theory.state_evolution.results import ALL_BRANCHES, MIXED, FixedPoint, branches_for, check_branch
from attnphase.theory.state_evolution.solve import (
    LADDER_BASE,
    LADDER_RATIO,
    _path_end,
    check_pattern,
    lowest_of,
    solve,
)
from attnphase.theory.state_evolution.stability import with_stability


def solve_curve(setting: Setting, alphas, branch: str, precision: str | Precision = "default",
                seed: int = 0, *, kernel: str = "auto", multistart: bool | None = None,
                on_point: Callable[[FixedPoint], Any] | None = None, stability: bool = True,
                pattern: str | None = None) -> list[FixedPoint]:
    """Follow one branch along alpha by continuation: each solve starts from the previous alpha's solution
    if that one is valid, else from the default start.

    Returned in ascending alpha.  The semantic branch is followed downward from the largest alpha (it
    exists at large alpha and ends at a spinodal), the others upward.  A failure at one alpha is that
    alpha's FixedPoint (with its status); it never stops the curve.  A point that fails from its neighbour's
    solution is solved again as a single point (solve without init), unless its first scrambling converged from there
    in a step no longer than the single point's own path takes (LADDER_RATIO, on the branches it continues), and that
    answer is kept where it is valid, or collapsed where the continuation's is another failure.
    multistart: as in solve (None: every solve without a neighbour, the first alpha and retries, tries solve's set
    of starts; False: the default start only).  A retry is the single-point answer (solve without init).
    on_point: called with each fixed point as soon as it is solved (progress per point).  stability: as in solve (each
    point the curve returns checked once, whichever solve gave it).  The positional branch of an exchangeable setting
    (model.patterns): each token pattern followed as its own path, the lowest valid point at each alpha kept, as
    solve does (pattern: one pattern's path only)."""
    check_branch(branch, ALL_BRANCHES + ("free",))
    if branch == MIXED and MIXED not in branches_for(setting):
        raise InputError("the mixed fixed point needs a tied student of rank r >= 2")
    prec = get_precision(precision)
    alphas = sorted(check_alpha(a) for a in alphas)
    names: list = [pattern]
    if pattern is None and branch == "positional":
        names = [p.name for p in token_patterns(setting)] or [None]
    paths = [_Path(setting, branch, prec, seed, kernel, multistart, name) for name in names]  # (pattern checked)
    out: list[FixedPoint] = []
    for a in (alphas[::-1] if branch == "semantic" else alphas):
        points = [path.advance(a) for path in paths]
        fp = points[0] if len(paths) == 1 else lowest_of(list(zip(names, points, strict=True)), "token pattern")
        if stability:
            fp = with_stability(setting, fp, seed)
        out.append(fp)
        if on_point is not None:
            on_point(fp)
    return out[::-1] if branch == "semantic" else out


class _Path:
    """One branch (one token pattern's, where given) followed along alpha: advance(a) solves it at the next alpha from
    the previous valid point, with the retries solve_curve's docstring describes."""

    def __init__(self, setting: Setting, branch: str, prec: Precision, seed: int, kernel: str,
                 multistart: bool | None, pattern: str | None) -> None:
        self.setting, self.branch, self.prec, self.seed, self.kernel = setting, branch, prec, seed, kernel
        self.multistart, self.pattern = multistart, pattern
        check_pattern(setting, branch, pattern)  # (bad input before any work)
        self.prev: FixedPoint | None = None
        self.valid: list[FixedPoint] = []  # the path's valid points, in order
        self.ended = False  # the curve left the branch after a valid point: past its end, no internal continuation

    def _solve(self, a: float, init: FixedPoint | None) -> FixedPoint:
        return solve(self.setting, a, self.branch, self.prec, init=init, seed=self.seed, kernel=self.kernel,
                     multistart=self.multistart, ladder=not self.ended, stability=False, pattern=self.pattern)

    def advance(self, a: float) -> FixedPoint:
        prev, branch = self.prev, self.branch
        init = prev if (prev is not None and prev.valid) else None
        fp = self._solve(a, init)
        retry: FixedPoint | None = None
        long_step = (init is not None and branch in LADDER_BASE
                     and abs(math.log(a / init.alpha)) > math.log(LADDER_RATIO))
        if not fp.valid and init is not None and (not fp.hints.first_scrambling_ok or long_step
                                                  or fp.status in (Status.not_converged, Status.inadmissible)):
            # Continuation can fail where the previous point was far: retry as the single point (its start set, and
            # its path in steps of at most LADDER_RATIO where it has one), not where the first scrambling converged
            # from a neighbour within one such step and a later one's verdict stands (a collapse; running out of
            # iterations or leaving the domain is none: docs/numerics.md, "Measured cases behind solve.py": curves).
            retry = self._solve(a, None)
        if retry is not None and (retry.valid or (retry.status == Status.collapsed and fp.status != Status.collapsed)):
            # The retry is the single point's answer: taken where it is a verdict (a point, or none of the branch
            # there) and the continuation's is not, so that a curve's point is the single point's.
            fp = retry
        if not fp.valid and fp.status != Status.collapsed and branch in LADDER_BASE:
            # (the branches a single point continues internally, whose end it reads so: not the semantic one)
            fp = _past_the_end(fp, self.valid[-2:])
        self.ended = self.ended or (not fp.valid and bool(self.valid))
        if fp.valid:
            self.valid.append(fp)
        self.prev = fp
        return fp


def _past_the_end(fp: FixedPoint, path: list[FixedPoint]) -> FixedPoint:
    """A point the curve found no verdict for (not converged, out of the domain) beyond where its last two valid
    points put the branch's end (solve._path_end, the rule a single point's internal continuation reads its end by):
    collapsed there, as the single point is (docs/numerics.md, "Measured cases behind solve.py": curves)."""
    end = _path_end(path, fp.alpha) if len(path) == 2 else None
    if end is None:
        return fp
    msg = f"the {fp.branch} branch's curve ends before alpha = {fp.alpha:g}: {end}"
    return dataclasses.replace(fp, status=Status.collapsed, message=msg,
                               warnings=fp.warnings + (Note(NoteCode.branch_end, msg),))


# Alphas per piece of an agnostic curve: with no order parameter to follow its points cost about the same cold as
# continued, so its pieces fill the workers the other branches' continuations leave idle ("Measured cases": curves).
AGNOSTIC_PIECE = 4


def curve_pieces(alphas: Sequence[float], branch: str) -> list[list[float]]:
    """The ascending alphas of one branch's curve, split into the pieces solve_curve follows separately.  Fixed
    by the grid and the branch alone (not by the number of workers), so the numbers do not depend on it."""
    a = sorted(alphas)
    if branch != "agnostic" or len(a) <= AGNOSTIC_PIECE:
        return [a]
    k = math.ceil(len(a) / AGNOSTIC_PIECE)
    return [list(p) for p in np.array_split(np.array(a, dtype=float), k)]


def _curve_task(args: tuple) -> list[FixedPoint]:
    setting, alphas, branch, precision, seed = args
    return solve_curve(setting, alphas, branch, precision, seed=seed)


def solve_curves(setting: Setting, alphas: Sequence[float], branches: Sequence[str] | None = None,
                 precision: str = "default", seed: int = 0, workers: int = 1) -> dict[str, list[FixedPoint]]:
    """solve_curve for several branches, each curve's pieces (:func:`curve_pieces`) in their own process with
    workers > 1 (default branches: every branch the setting has, results.branches_for)."""
    from attnphase.parallel import map_tasks

    alphas = [check_alpha(a) for a in alphas]
    branches = branches_for(setting) if branches is None else tuple(branches)
    for b in branches:
        if b not in branches_for(setting):
            raise InputError(f"branch must be one of {', '.join(branches_for(setting))}; got {b!r}")
    pieces = [(b, piece) for b in branches for piece in curve_pieces(alphas, b)]
    results = map_tasks(_curve_task, [(setting, piece, b, precision, seed) for b, piece in pieces], workers=workers,
                        progress=False)
    out: dict[str, list[FixedPoint]] = {b: [] for b in branches}
    for (b, _), pts in zip(pieces, results, strict=True):
        out[b].extend(pts)
    return out
