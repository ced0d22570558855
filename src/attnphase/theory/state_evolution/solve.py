"""solve(): the fixed point of one branch at one alpha, solved independently for R scramblings of the Sobol points
(the first by damped + Anderson iteration, or along a curve from its own fixed point at the previous alpha; the
others by a frozen-Jacobian Newton from near the first one's solution, see _replica_start); every reported number
is the mean over the R solutions and its error estimate the standard error of that mean.  solve_all: every branch
at one alpha (their lowest: results.global_minimum).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable

import numpy as np

from attnphase.errors import InputError, InputTypeError
from attnphase.notes import Note, NoteCode
from attnphase.setting import Setting, check_alpha
from attnphase.theory.model.channel import points_dim
from attnphase.theory.model.observables import test_error as _test_error
from attnphase.theory.model.observables import test_error_estimate
from attnphase.theory.model.overlaps import (
    ORDER_NAME,
    Branch,
    HatOverlaps,
    Layout,
    Overlaps,
    aligning_signs,
    as_branch,
    canonical_gauge,
    gauge_rotation,
    order_threshold,
    rotate,
    rotate_hats,
)
from attnphase.theory.model.patterns import (
    Pattern,
    equivariant,
    exchangeable,
    pattern_subspace,
    stabiliser,
    token_patterns,
)
from attnphase.theory.model.prior import train_loss
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.solvers.fixed_point import (
    FAR,
    FAR_STEPS,
    Inadmissible,
    SolverResult,
    Status,
    anderson,
    chord,
    newton_matrix,
)
from attnphase.theory.state_evolution.branch_map import BranchMap
from attnphase.theory.state_evolution.contraction import CONTRACTION_MAX, NEAR_AGNOSTIC, OrderContraction
from attnphase.theory.state_evolution.order import INTERCEPT_ERRORS, squared_zero, undecided, zero_within
from attnphase.theory.state_evolution.precision import PRECISIONS, Precision, get_precision, integration_points
from attnphase.theory.state_evolution.results import (
    ALL_BRANCHES,
    MIXED,
    FixedPoint,
    SolverHints,
    StartRecord,
    branches_for,
    check_branch,
    check_theory_setting,
    global_minimum,
    still_to_solve,
    summaries,
)
from attnphase.theory.state_evolution.stability import with_stability
from attnphase.theory.state_evolution.starts import default_start, mixed_start_from, named_starts

SECANT_MIN = 1e-2  # chord steps at least this large (scaled) update its matrix (see fixed_point.chord)
_RESEED_LEVEL = 5.0  # order parameter / collapse threshold where a full solve restarts after a coarse collapse
_COARSE_STREAM = 999  # scrambling index of the coarse points (replicas use 0 .. max_replicas - 1)
FRESH_RETRY_MAX = 0.2  # a failed chord's relative residual above which no fresh-Jacobian retry is made
RESOLVE_REPLICAS = 16  # scramblings added (at most this many in all) where 3 errors and zero_within(k) disagree


def _target_met(summ: list[dict], energies: list[float], target: float, branch: Branch) -> bool:
    """Relative standard errors of q, m, theta (where non-zero) and train_loss all <= target."""
    k = len(summ)
    if target <= 0 or k < 2:
        return True
    rel = []
    for key in ("q", "m", "theta"):
        vals = np.array([s[key] for s in summ])
        mean = abs(vals.mean())
        if mean > 0:
            rel.append(vals.std(ddof=1) / np.sqrt(k) / mean)
    E = np.array(energies)
    rel.append(E.std(ddof=1) / np.sqrt(k) / abs(E.mean()))
    return max(rel) <= target


def _nan_overlaps(setting: Setting) -> tuple[Overlaps, HatOverlaps]:
    L, r, rs = setting.L, setting.field_rank, setting.r_star
    nan = np.nan
    return (Overlaps(q=np.full((r, r), nan), m=np.full((L, r), nan), V=np.full((r, r), nan),
                     theta=np.full((r, rs), nan)),
            HatOverlaps(qhat=np.full((r, r), nan), mhat=np.full((L, r), nan), Vhat=np.full((r, r), nan),
                        thetahat=np.full((r, rs), nan)))


def _start(setting: Setting, b: Branch, init: Overlaps | FixedPoint | None) -> Overlaps:
    d0 = default_start(setting, b)
    if init is None:
        return d0
    o = init.overlaps if isinstance(init, FixedPoint) else init
    if o.dims != (setting.L, setting.field_rank, setting.r_star):
        want = (setting.L, setting.field_rank, setting.r_star)
        raise InputError(f"init has shapes (L, r, r*) = {o.dims}, the setting {want}"
                         + (" (untied: r is the field rank 2r; overlaps.lift_to_untied lifts a tied point)"
                            if setting.untied else ""))
    if setting.untied:
        o = o.as_untied()
    if not all(np.all(np.isfinite(getattr(o, k))) for k in ("q", "m", "V", "theta")):
        return d0
    o = Layout.for_setting(setting, b).project(canonical_gauge(o))
    # A start with the branch's order parameter at exactly 0 stays there: give it the default's.
    m = o.m if (not b.has_m or np.any(o.m != 0)) else d0.m
    theta = o.theta if (not b.has_theta or np.any(o.theta != 0)) else d0.theta
    return Overlaps(q=o.q, m=m, V=o.V, theta=theta)


def _coarse_tol(prec: Precision) -> float:
    """The coarse pre-solve's tolerance: its graininess is 2^((log2_points - coarse_log2) / 2) times the full map's."""
    return 2.0 ** ((prec.log2_points - prec.coarse_log2) / 2) * prec.tol


def _coarse_start(setting: Setting, alpha: float, b: Branch, prec: Precision, x: np.ndarray, seed: int,
                  kernel: str, pattern: Pattern | None = None) -> tuple[np.ndarray, np.ndarray | None, int, bool]:
    """Coarse-to-fine: the fixed point and Jacobian on 2^coarse_log2 points of their own scrambling, where the
    damped / Anderson phase (tens of map evaluations) and the finite differences cost 2^(log2_points -
    coarse_log2) times less; every scrambling at full resolution then starts from there with chord steps.
    Returns (start, Newton matrix or None, map evaluations, reseeded); the given start and None where the coarse
    solve fails (the full-resolution path then decides from the original start, as without it), except after a
    collapse (reseeded: see below)."""
    pts = gaussian_sobol(prec.coarse_log2, points_dim(setting), 1000 * seed + _COARSE_STREAM)
    bm = BranchMap(setting, alpha, b, pts, kernel=kernel, pattern=pattern)
    sol = anderson(bm.step, x, tol=_coarse_tol(prec), max_iter=prec.max_iter, admissible=bm.admissible,
                   collapsed=bm.collapsed, diverged=bm.diverged, accept=prec.accept, scale=bm.layout.scale,
                   approx=bm.approximate, keeps=bm.keeps_signs)
    if sol.status == Status.collapsed:
        # The coarse and full iterations take the same path to the agnostic point; the full one restarts from the
        # coarse end with the order parameter back at 5x the collapse threshold, so the verdict is the full map's.
        reseeded = bm.with_order(sol.x, _RESEED_LEVEL)
        if reseeded is not None:
            return reseeded, None, sol.nit, True
    if sol.status != Status.ok:
        return x, None, sol.nit, False
    nm, n_eval = _fresh_newton_matrix(bm, sol.x)
    if not n_eval:
        return x, None, sol.nit, False
    return sol.x.copy(), nm, sol.nit + n_eval, False


# Where no start finds a point, the branch is followed up in alpha (the ladder) from where its start set finds it,
# in steps of at most LADDER_RATIO: continuation reaches points no iteration from a start does (docs/numerics.md,
# "Measured cases behind solve.py": ladder).
LADDER_FROM = 0.5
LADDER_RATIO = 1.5
LADDER_HALVINGS = 8  # failed steps retried over half their length, per ladder (r = 2, fast, alpha 10: 5 needed)
LADDER_BASE = {"positional": LADDER_FROM, "mixed": 1.0, "agnostic": LADDER_FROM}
_SETTLING = 0.1  # relative residual below which a not-converged mixed iterate is settling, not running away


def solve(setting: Setting, alpha: float, branch: str = "positional", precision: str | Precision = "default",
          init: Overlaps | FixedPoint | None = None, seed: int = 0, *, kernel: str = "auto",
          multistart: bool | None = None, ladder: bool = True, stability: bool = True,
          pattern: str | None = None) -> FixedPoint:
    """Fixed point of the self-consistent equations on one branch: "positional", "semantic", "agnostic", "mixed"
    (r >= 2, tied: one student direction positional, another semantic; m and theta both free, from the mixed
    start, and a point without either is not mixed: collapsed), "free" (no constraint, from its default or a given
    start) or "global" (results.global_minimum over every branch the setting has, results.branches_for, of those
    that can be the minimum: solve_screened).

    Without init the answer does not depend on the caller knowing about starts (multistart None, the default): the
    branch is solved from a small set of starts (the default one, scaled_start, and where the shape needs them the
    structured starts of the L > 2 ring, the mixed start; starts.named_starts) and the first valid one is kept (one
    fixed point per branch measured), the lowest training loss where several were measured (_first_valid).  Where
    no start gives a valid point, the positional branch at L = 2 and on a token pattern, and the agnostic one at
    every L, are continued internally from alpha = LADDER_FROM (the mixed branch at L = 2 from 1: LADDER_BASE), or
    from the first of that base times LADDER_RATIO**k below alpha where the start set gives the branch (not on a
    token pattern).  A path ends where a step from it collapses onto an agnostic point that contracts along the
    order parameter, or its squared order parameter extrapolates to zero before the step (_walk).  Which starts ran
    and what each gave: FixedPoint.starts
    (empty where the first one sufficed).  The positional branch of a setting every token permutation leaves
    unchanged (model.patterns) is solved so in each token pattern's subspace, start names prefixed with the pattern
    ("1:2 default"), the lowest kept, and so is the mixed branch (every column of m in one pattern's subspace) beside
    its free solve; at rank L - 1 the positional branch also on the equivariant pattern and the mixed one on the
    stabiliser pattern; with init in a pattern's subspace, in that subspace.
    multistart=False: the default start only (the cheaper, older behaviour).  ladder=False: no internal
    continuation (for callers that are themselves continuing the branch, e.g. a curve past the branch's end).
    stability: a valid positional point of a tied student carries the warning `unstable_theta` where the map is
    unstable along theta there (stability.with_stability); False skips that check (callers that only read where
    branches exist, e.g. the transition).
    pattern: the positional branch of an exchangeable setting on one token pattern only (its name, e.g. "1+1-":
    model.patterns.token_patterns), solved and continued as its own branch; None: every pattern, the lowest kept.

    Never raises for a numerical failure: the returned FixedPoint carries the status (bad input is a
    ValueError/TypeError, checked before any work)."""
    check_theory_setting(setting)
    alpha = check_alpha(alpha)
    check_branch(branch, ALL_BRANCHES + ("free", "global"))
    if branch == MIXED and MIXED not in branches_for(setting):
        raise InputError("the mixed fixed point needs a tied student of rank r >= 2 (one column per mechanism); "
                         f"this setting has r = {setting.r}, student {setting.student}")
    prec = get_precision(precision)
    if multistart is not None and not isinstance(multistart, bool):
        raise InputTypeError(f"multistart must be a bool or None, got {type(multistart).__name__}")
    many = multistart is not False
    only = check_pattern(setting, branch, pattern)
    if branch == "global":
        return global_minimum(solve_screened(setting, alpha, prec, seed, kernel=kernel, multistart=multistart,
                                             stability=stability))
    if init is not None:
        o = init.overlaps if isinstance(init, FixedPoint) else init
        if not isinstance(o, Overlaps):
            raise InputTypeError("init must be Overlaps or a FixedPoint")
        fp = _solve(setting, alpha, as_branch(branch), prec, init, seed, kernel,
                    pattern=only or _pattern_at(setting, branch, o))
    else:
        fp = _solve_starts(setting, alpha, branch, prec, seed, kernel, many, ladder=many and bool(ladder), only=only)
    return with_stability(setting, fp, seed) if stability else fp


def _mixed_verdict(setting: Setting, s: dict[str, float], status: Status, message: str,
                   residual: float) -> tuple[Status, str]:
    """The mixed branch's points have both order parameters: a solve from the mixed start that reached a point
    without one of them (or is on its way there) found no mixed fixed point."""
    theta_small = s["theta"] < order_threshold(np.sqrt(s["q"] * setting.rho))
    if status == Status.not_converged and theta_small and residual <= _SETTLING:
        # Next to where the mixed point merges into the positional one theta decays too slowly to converge: no
        # mixed point, not a failed solve (not an iterate still moving far: docs/numerics.md, mixed verdict).
        return Status.collapsed, ("theta vanishing from the mixed start (not converged on the way): no mixed fixed "
                                  "point here")
    if status == Status.ok and theta_small:
        return Status.collapsed, ("theta vanished from the mixed start: no mixed fixed point here (the free "
                                  "iteration reached a positional or agnostic point)")
    if status == Status.ok and s["m"] < order_threshold(np.sqrt(s["q"])):
        return Status.collapsed, ("m vanished from the mixed start: no mixed fixed point here (the free iteration "
                                  "reached a semantic or agnostic point)")
    return status, message


def _candidates(setting: Setting, alpha: float, branch: str, prec: Precision, seed: int, kernel: str,
                many: bool) -> list[tuple[str, object]]:
    """(name, start) in the order tried; a start may be a callable (built only when reached) returning Overlaps or
    None (could not be built).  The default start is None."""
    if branch == MIXED:
        return [("mixed", lambda: mixed_start(setting, alpha, prec, seed))]
    if not many:
        return [("default", None)]
    return [("default", None)] + named_starts(setting, branch, alpha)


def _first_valid(setting: Setting, branch: str) -> bool:
    """Keep the first valid start rather than the lowest of all where one fixed point per branch was measured:
    everywhere but the mixed branch and the tied student's positional branch at L > 2 without token patterns (a ring
    of minima: docs/numerics.md, rules table).  (The far points of r* >= 2 and r >= 2 were mirror cycles, not fixed
    points: docs/numerics.md, "Mirror cycles".)"""
    if branch == MIXED:
        return False
    if branch == "positional" and not setting.untied and setting.L > 2:
        # (with token patterns each pattern is one branch, followed as its own path, not a ring: its first valid
        # start, as at L = 2)
        return exchangeable(setting)
    return True


def _token_pattern_of(setting: Setting, branch: str, o: Overlaps) -> Pattern | None:
    """The token pattern whose subspace a start's m lies in (model.patterns.pattern_subspace): on the positional branch
    of an exchangeable setting, and on the mixed branch where every column of m is along one vector; None elsewhere."""
    basis, v = None, o.m[:, 0]
    if branch == "positional":
        basis = pattern_subspace(setting, o.m)
    elif branch == MIXED and not setting.untied and np.all(np.isfinite(o.m)):
        u, sv, _ = np.linalg.svd(o.m, full_matrices=False)
        v = u[:, 0] * sv[0]
        if sv[0] > 0 and sv[1:].max(initial=0.0) <= 1e-9 * sv[0]:
            basis = pattern_subspace(setting.replace(r=1), v[:, None])
    return Pattern("", basis, v / np.linalg.norm(v)) if basis is not None else None


def _pattern_at(setting: Setting, branch: str, o: Overlaps) -> Pattern | None:
    """The pattern whose branch a start on its subspace (a curve's or a path's previous point) continues."""
    return next((own for own in reversed(_own_patterns(setting, branch)) if own.holds(o)),
                _token_pattern_of(setting, branch, o))


def _own_patterns(setting: Setting, branch: str) -> list[Pattern]:
    """The patterns of the student's directions a branch is solved on beside the free solve: the equivariant one
    (positional), the stabiliser one (mixed); empty where the setting has none (model.patterns)."""
    own = equivariant(setting) if branch == "positional" else stabiliser(setting) if branch == MIXED else None
    return [own] if own is not None else []


def check_pattern(setting: Setting, branch: str, pattern: str | None) -> Pattern | None:
    """The token pattern solve(pattern=...) names, checked: the positional branch of an exchangeable setting only."""
    if pattern is None:
        return None
    if not isinstance(pattern, str):
        raise InputTypeError(f"pattern must be a token pattern's name (str) or None, got {type(pattern).__name__}")
    tokens = token_patterns(setting) if branch == "positional" else []
    if not tokens:
        raise InputError("pattern is for the positional branch of a setting whose tokens are exchangeable (L > 2, a "
                         "tied rank-1 student, the simplex or orthogonal code, A = c I + e 1 1^T); "
                         f"this is the {branch} branch" + ("" if branch != "positional" else " of another setting"))
    named = {p.name: p for p in tokens}
    if pattern not in named:
        raise InputError(f"pattern must be one of {', '.join(named)} for this setting; got {pattern!r}")
    return named[pattern]


def _solve_starts(setting: Setting, alpha: float, branch: str, prec: Precision, seed: int, kernel: str, many: bool,
                  ladder: bool, only: Pattern | None = None) -> FixedPoint:
    tried: list[tuple[str, FixedPoint | None]] = []
    first = _first_valid(setting, branch)
    # An exchangeable setting's positional branch: one branch per token pattern, in its subspace, each with its own
    # path (the lowest kept: docs/numerics.md, "Each pattern its own path"); its mixed branch on each pattern too,
    # beside the free solve (docs/rank2.md).
    tokens = ([only] if only is not None else token_patterns(setting)) if branch == "positional" else []
    patterns: list[Pattern | None] = list(tokens) or [None]
    if branch == MIXED:
        patterns += token_patterns(setting.replace(r=1))
    # (rank L - 1: also the patterns of the student's directions, after the free solve, whose status stands where
    # none gives a point: docs/rank2.md)
    patterns += _own_patterns(setting, branch)
    # (a start that is built by solving, e.g. the mixed one from two rank-1 solves, built once for every pattern)
    starts = [(name, functools.cache(start) if callable(start) else start)
              for name, start in _candidates(setting, alpha, branch, prec, seed, kernel, many)]
    certificates: dict = {}  # (the agnostic point's contraction at this alpha: the same for every start and pattern)
    found: list[Pattern | None] = []  # the patterns (None: free) a start gave a valid point on
    for pattern in patterns:
        for base_name, start in starts:
            name = f"{pattern.name} {base_name}" if pattern is not None else base_name
            o = start() if callable(start) else start
            if o is None and base_name != "default":  # (a start that could not be built; the default one is None)
                tried.append((name, None))
                continue
            fp = _solve(setting, alpha, as_branch(branch), prec, o, seed, kernel, certificates, pattern=pattern)
            tried.append((name, fp))
            if fp.valid:
                found.append(pattern)
                if first:
                    break
    # The ladder where no start gives a valid point: L = 2, the agnostic branch at every L (it has no order
    # parameter, so no ring of positional minima to drift along: docs/numerics.md, "The agnostic branch at L > 2"),
    # and the positional branch walked on its token pattern (no ring there either: "A pattern's path").
    a0 = LADDER_BASE.get(branch)
    if ladder and a0 is not None and alpha > a0 * LADDER_RATIO:
        if setting.L > 2 and tokens:
            # Each token pattern's own path where none of its starts gives a point (on a pattern the path starts at
            # a0 only: a search for its base there costs more start sets than the rest of the point where the branch
            # is absent, e.g. L = 4, 20.8 -> 49.8 s: "A pattern's path").
            for p in tokens:
                if not any(p is q for q in found):
                    tried.append((f"{p.name} ladder", _ladder(setting, alpha, prec, seed, kernel, branch=branch,
                                                              a0=a0, search=False, only=p)))
        elif (setting.L == 2 or branch == "agnostic") and not found:
            tried.append(("ladder", _ladder(setting, alpha, prec, seed, kernel, branch=branch, a0=a0)))
    return lowest_of(tried)


def lowest_of(tried: list[tuple[str, FixedPoint | None]], kind: str = "start") -> FixedPoint:
    """The answer of one branch from several solves of it (starts, or token patterns' paths: kind), each named: the
    lowest valid point (_best_of); where none is valid and a path ended before alpha, collapsed with that end's note."""
    best = _best_of(tried, kind)
    ends = [n for _, p in tried if p is not None for n in p.warnings if n.code == NoteCode.branch_end]
    if ends and not best.valid:
        # The branch's own path ends before alpha: a verdict where the starts gave none (they ran out of iterations
        # next to the end), and beside a start's collapse.
        if best.status != Status.collapsed:
            best = dataclasses.replace(best, status=Status.collapsed, message=ends[0].message)
        if ends[0] not in best.warnings:  # (the ladder's own record, chosen where every start left the domain, has it)
            best = dataclasses.replace(best, warnings=best.warnings + (ends[0],))
    return best


def _ladder(setting: Setting, alpha: float, prec: Precision, seed: int, kernel: str, branch: str = "positional",
            a0: float = LADDER_FROM, search: bool = True, only: Pattern | None = None) -> FixedPoint:
    """The branch continued to alpha (_walk): the path walked at the fast precision where prec is finer, its point at
    alpha then solved at prec from the path's; where the fast walk stood on a base but gives neither a point at alpha
    nor an end of the path before it, or the point at prec fails from there, the path walked again at prec; where the
    fast path ends before alpha, or has no base, its record (the fast precision's) says so.  The path's points only
    carry the continuation, so their precision is the walk's (docs/numerics.md, "A path walked fast").  only: the
    path of one token pattern, from its own base."""
    walk = _walk_precision(prec)
    if walk is prec:
        return _walk(setting, alpha, prec, seed, kernel, branch, a0, search, only)[0]
    rough, stood = _walk(setting, alpha, walk, seed, kernel, branch, a0, search, only)
    spent = (rough.seconds, rough.iterations)
    if rough.valid:
        fp = _solve(setting, alpha, as_branch(branch), prec, _polish_start(rough), seed, kernel,
                    pattern=only or _pattern_at(setting, branch, rough.overlaps))
        spent = (spent[0] + fp.seconds, spent[1] + fp.iterations)
        if fp.valid:
            return dataclasses.replace(fp, seconds=spent[0], iterations=spent[1])
    elif not stood or any(n.code == NoteCode.branch_end for n in rough.warnings):
        # (no base: the start sets below alpha, again at prec, would repeat the fast ones: "A path's base")
        return rough
    fp = _walk(setting, alpha, prec, seed, kernel, branch, a0, search, only)[0]
    return dataclasses.replace(fp, seconds=spent[0] + fp.seconds, iterations=spent[1] + fp.iterations)


def _walk_precision(prec: Precision) -> Precision:
    """The precision a ladder's path is walked at: fast, or prec where that is no finer (a custom Precision with
    fewer points than fast keeps its own)."""
    fast = PRECISIONS["fast"]
    if prec.log2_points <= fast.log2_points:
        return prec
    return dataclasses.replace(fast, certificate=prec.certificate)


def _polish_start(rough: FixedPoint) -> FixedPoint:
    """The fast path's point at alpha as the start of the solve at full precision: its first scrambling's fixed point
    and Newton matrix (the other scramblings' offsets are the fast points' integration errors, not the full ones')."""
    h = rough.hints
    return dataclasses.replace(rough, hints=dataclasses.replace(h, replica_x=h.replica_x[:1], predecessor=None))


@functools.lru_cache(maxsize=32)
def _base_candidate(setting: Setting, at: float, branch: str, prec: Precision, seed: int, kernel: str,
                    only: str | None = None) -> FixedPoint:
    """The start set's point at one alpha of a path's base search (on one token pattern: only, its name), kept: a
    curve's points search the same alphas."""
    return _solve_starts(setting, at, branch, prec, seed, kernel, True, ladder=False,
                         only=check_pattern(setting, branch, only))


def _walk(setting: Setting, alpha: float, prec: Precision, seed: int, kernel: str, branch: str, a0: float,
          search: bool = True, only: Pattern | None = None) -> tuple[FixedPoint, bool]:
    """The branch continued to alpha in geometric steps of at most LADDER_RATIO (each from the previous valid point,
    its Jacobian and scramblings' fixed points: the path of a curve; a failed step is halved, LADDER_HALVINGS times in
    all), from the path's base: the first of a0, a0 * LADDER_RATIO, a0 * LADDER_RATIO**2, ... below alpha where the
    branch's start set gives a valid point (the mixed branch at r = 2, omega 0.6 is born above alpha 1:
    docs/numerics.md, "A path's base"; the alphas do not depend on alpha, so that the points of a curve share them;
    search=False: a0 only).  The path ends inside a step that collapses onto an agnostic point that contracts along
    the order parameter (_collapse_end), or one beyond its squared order parameter's zero (_path_end); a collapse
    elsewhere is the iteration's, not the map's: the step is halved, and where the halvings run out the path's record
    is not_converged.  Also whether the path had a base."""
    seconds, iters = 0.0, 0
    k = 0
    base: FixedPoint | None = None
    while base is None or not base.valid:
        at = a0 * LADDER_RATIO**k
        if base is not None and (at >= alpha or (k and not search)):
            where = f"{a0:g}" if base.alpha == a0 else f"{a0:g} .. {base.alpha:g}"
            # (no verdict at alpha: the start sets' collapse below it says nothing of the branch there)
            msg = f"the {branch} branch has no point from its starts at alpha = {where} to continue from"
            o_nan, h_nan = _nan_overlaps(setting)
            return dataclasses.replace(base, alpha=alpha, overlaps=o_nan, hats=h_nan, train_loss=np.nan,
                                       test_error=np.nan, errors={}, status=Status.not_converged, message=msg,
                                       seconds=seconds, iterations=iters, n_points=0, n_replicas=0,
                                       hints=SolverHints()), False
        hits = _base_candidate.cache_info().hits
        base = _base_candidate(setting, at, branch, prec, seed, kernel, only.name if only is not None else None)
        if _base_candidate.cache_info().hits == hits:  # (a kept base cost nothing now)
            seconds, iters = seconds + base.seconds, iters + base.iterations
        k += 1
    a0 = base.alpha
    n = max(1, int(np.ceil(abs(np.log(alpha / a0)) / np.log(LADDER_RATIO))))
    grid = a0 * (alpha / a0) ** (np.arange(n + 1) / n)
    grid[-1] = alpha
    pending = [float(a) for a in grid[1:]]
    prev = base
    halvings = 0
    path = [prev]  # the valid points the ladder stood on, in order
    while pending and prev.valid:
        # The path's end is read from its own points before the step, whatever the step would give: a "valid" step
        # past the order parameter's zero is the points' imperfection (docs/numerics.md, "A step past the end that
        # the points call valid"), so a step there is not solved.
        end = _path_end(path, pending[0])
        if end is None:
            nxt = _solve(setting, pending[0], as_branch(branch), prec, prev, seed, kernel,
                         pattern=only or _pattern_at(setting, branch, prev.overlaps))
            seconds, iters = seconds + nxt.seconds, iters + nxt.iterations
            if nxt.status == Status.collapsed:
                end = _collapse_end(setting, pending[0], seed, branch, prev, nxt)
            if nxt.valid and end is None:
                prev = nxt
                path.append(nxt)
                pending.pop(0)
                continue
        if end is not None:
            # The path ends inside this step: no shorter step crosses it.
            msg = f"the {branch} branch continued from alpha = {a0:g} ends before alpha = {alpha:g}: {end}"
            return dataclasses.replace(prev, alpha=alpha, status=Status.collapsed, message=msg, seconds=seconds,
                                       iterations=iters,
                                       warnings=prev.warnings + (Note(NoteCode.branch_end, msg),)), True
        if halvings < LADDER_HALVINGS:
            # A step where the map is rough: once more over half the step (geometric mean), at most LADDER_HALVINGS
            # times (docs/numerics.md, "Measured cases": ladder).
            pending.insert(0, float(np.sqrt(prev.alpha * pending[0])))
            halvings += 1
        else:
            prev = nxt
    if not prev.valid or prev.alpha != alpha:
        msg = (f"the {branch} branch continued from alpha = {a0:g} ends at alpha = {prev.alpha:g} "
               f"({prev.status.value})")
        st = prev.status if prev.status != Status.ok else Status.not_converged
        if st == Status.collapsed and branch in ORDER_NAME:
            st = Status.not_converged  # (a collapse _collapse_end did not take: the iteration's, no verdict)
        return dataclasses.replace(prev, alpha=alpha, status=st, message=msg, seconds=seconds, iterations=iters), True
    return dataclasses.replace(prev, seconds=seconds, iterations=iters), True


def _collapse_end(setting: Setting, step: float, seed: int, branch: str, prev: FixedPoint,
                  nxt: FixedPoint) -> str | None:
    """Why a step of the path that collapsed ends it, or None (the step is then halved): the agnostic point it
    collapsed onto contracts along the branch's order parameter there (contraction.OrderContraction, ||J|| below
    CONTRACTION_MAX), so no point of the branch is born there and the path left the branch inside the step.  Where
    the agnostic point is not stable so, the collapse is the iteration's, not the map's (a long step next to a
    pitchfork: measured on a semantic path, the study at omega 0.6, fast, from 2.58 to 1.75, where a curve is valid),
    and halvings continue the path (docs/numerics.md, "A collapse on the path is its end").  The branches born at the
    agnostic point only, those with one order parameter (ORDER_NAME; the mixed one leaves the positional point)."""
    if branch not in ORDER_NAME:
        return None
    cert = OrderContraction.at(setting, step, seed, nxt.overlaps, branch)
    if cert is None or cert.norm >= CONTRACTION_MAX:
        return None
    return (f"its step from alpha = {prev.alpha:.4g} to {step:.4g} collapsed onto the agnostic point, which contracts "
            f"along {ORDER_NAME[branch]} there (||J|| {cert.norm:.3f}): it ends between them")


def _path_end(path: list[FixedPoint], step: float) -> str | None:
    """Why the path ends before the step's alpha, or None: the square of its order parameter (m on the positional
    branch, theta on the semantic one, m or theta on the mixed one), linear in alpha through the path's last two
    points, reaches zero by INTERCEPT_ERRORS of its standard errors (the transition's margin,
    linearised.intercept_at) short of step (read before the step is solved, whatever it would give).  Next to a
    supercritical pitchfork, where the branch merges into another fixed point, order^2 ~ |alpha - alpha_p|; a step
    that fails otherwise (not a collapse: _walk) is halved."""
    if len(path) < 2:
        return None
    p1, p2 = path[-2:]
    ahead = 1.0 if step > p2.alpha else -1.0
    for name in as_branch(p2.branch).order_parameters:
        pts = [(p.alpha, p.summary()[name], p.errors.get(name, float("nan"))) for p in (p1, p2)]
        ic = squared_zero(*pts) if all(np.isfinite(e) for _, _, e in pts) else None  # (no margin without errors)
        if ic is None:
            continue
        x0, err = ic
        hi = x0 + ahead * INTERCEPT_ERRORS * err
        if 0 < ahead * (x0 - p2.alpha) and ahead * (hi - step) < 0:
            return (f"its squared {name} falls linearly to zero at alpha = {x0:.4g} +- {err:.2g} (through its points "
                    f"at {p1.alpha:.4g} and {p2.alpha:.4g}): it merges there into another fixed point")
    return None


def _best_of(tried: list[tuple[str, FixedPoint | None]], kind: str = "start") -> FixedPoint:
    """The valid point with the lowest training loss (if none is valid, the first solved one that collapsed, else the
    first that ran out of iterations, else the first solved one).  Where more than one was tried (starts, or token
    patterns' paths: kind): a new record with every one's outcome in `starts` (and a note), seconds and iterations
    summed over all."""
    solved = [(n, p) for n, p in tried if p is not None]
    ok = [(n, p) for n, p in solved if p.valid]
    if ok:
        name, best = min(ok, key=lambda t: t[1].train_loss)
    else:
        # None valid: a start that left the map's domain or ran away says nothing of the branch, one that collapsed
        # or ran out of iterations does, a collapse more (a verdict): the first collapsed one, else the first that ran
        # out (so that choosing among token patterns' answers gives the status choosing among all their starts gives).
        informative = ([(n, p) for n, p in solved if p.status == Status.collapsed]
                       or [(n, p) for n, p in solved if p.status == Status.not_converged])
        name, best = (informative or solved)[0]
    if len(tried) == 1:
        return best
    records = tuple(StartRecord(n, p.status if p is not None else Status.inadmissible,
                                p.train_loss if p is not None and p.valid else float("nan")) for n, p in tried)
    # (the internal continuation's message where it is not valid: where its path ended, which no status says)
    why = {n: p.message for n, p in solved if n.endswith("ladder") and not p.valid and p.message}
    others = "; ".join(f"{r.name}: {r.status.value}" + (f", train loss {r.train_loss:.6g}" if r.status == Status.ok
                                                        else f" ({why[r.name]})" if r.name in why else "")
                       for r in records if r.name != name)
    how = "lowest train loss" if ok else "none valid"
    note = Note(NoteCode.multistart, f"{kind} {name} chosen of {len(tried)} ({how}); {others}")
    if not ok and not best.message:
        best = dataclasses.replace(best, message=f"no valid point from {', '.join(r.name for r in records)}")
    return dataclasses.replace(best, warnings=best.warnings + (note,), starts=records,
                               seconds=sum(p.seconds for _, p in solved), iterations=sum(p.iterations for _, p in solved))


def _certificate(certificates: dict, setting: Setting, alpha: float, seed: int, near: Overlaps,
                 branch: str) -> OrderContraction | None:
    """The contraction certificate at alpha (contraction.py), computed once per alpha for every start and token
    pattern of one start set: it is the agnostic point's, the same for all of them."""
    key = (alpha, seed, branch)
    if key not in certificates:
        certificates[key] = OrderContraction.at(setting, alpha, seed, near, branch)
    return certificates[key]


def _collapsing(setting: Setting, alpha: float, b: Branch, seed: int, bm: BranchMap, certificates: dict,
                prec: Precision) -> Callable[[np.ndarray, np.ndarray], str | None] | None:
    """anderson's collapse certificate for the positional branch of a tied student without rotation gauge at L > 2
    (contraction.py): asked where only the order parameter is still moving (every other overlap within
    NEAR_AGNOSTIC) and shrinking.  Not at L = 2, whose collapses are quick and whose numbers stay those measured; not
    on the semantic branch (no faster there, and it calls the imperfection's points below the pitchfork collapsed:
    docs/numerics.md, "Measured cases behind solve.py").  None with prec.certificate off."""
    if (not prec.certificate or b != Branch.positional or setting.L <= 2 or setting.untied or bm.gauge
            or setting.field_rank > 1):
        return None

    def test(x: np.ndarray, gx: np.ndarray) -> str | None:
        if not bm.only_order_far(x, gx - x, near=NEAR_AGNOSTIC, far=0.0):
            return None
        o, image = bm.unpack(x), bm.unpack(gx)
        if not summaries(image)["m"] < summaries(o)["m"]:
            return None
        # (its agnostic point solved from this iterate's q and V)
        cert = _certificate(certificates, setting, alpha, seed, o, b.value)
        return cert.verdict(o, image) if cert is not None else None

    return test


def _solve(setting: Setting, alpha: float, b: Branch, prec: Precision, init: Overlaps | FixedPoint | None, seed: int,
           kernel: str, certificates: dict | None = None, pattern: Pattern | None = None) -> FixedPoint:
    """One branch from one start; with a token pattern, m (each of its columns) held in the pattern's subspace; with
    a pattern of the student's directions (equivariant, stabiliser), every overlap on its linear subspace."""
    branch = b.value
    t0 = time.perf_counter()
    layout = Layout.for_setting(setting, b)
    o_start = _start(setting, b, init)
    subspace = pattern.basis if pattern is not None and pattern.linear is None else None
    if pattern is not None and pattern.linear is not None:
        # (a pattern of the student's directions too: a start off it placed on it, Pattern.place)
        layout = layout.linear(*pattern.linear)
        if not pattern.holds(o_start):
            o_start = pattern.place(o_start)
    if subspace is not None:
        layout = layout.on_subspace(subspace)
        m = o_start.m
        if np.linalg.norm(m - subspace @ (subspace.T @ m)) > 1e-9 * np.linalg.norm(m):
            # a start outside the subspace: each column of m turned to the pattern's direction, its size kept
            signs = np.where(pattern.direction @ m >= 0, 1.0, -1.0)
            o_start = dataclasses.replace(o_start, m=np.outer(pattern.direction, signs * np.linalg.norm(m, axis=0)))
    x = layout.pack(o_start)
    overlaps_reps: list[Overlaps] = []
    raw_reps: list[Overlaps] = []  # each scrambling's fixed point with the signs the iteration found
    hats_reps: list[HatOverlaps] = []
    energies: list[float] = []
    summ: list[dict] = []
    iters = 0
    residual = 0.0
    failures = 0
    status = Status.ok
    message = ""
    warnings: list[Note] = []
    # Continuation: the previous alpha's Jacobian is close enough for chord steps here too.
    hint = init.hints if isinstance(init, FixedPoint) and init.branch == branch else SolverHints()
    nm = hint.newton_matrix
    if nm is not None and nm.shape != (layout.size, layout.size):
        nm = None
    xs: list[np.ndarray] = []  # this solve's fixed point per scrambling
    first_ok = False
    reseeded = False
    coarse_nm = False  # nm is the coarse pre-solve's (not a neighbour's along a curve)
    if nm is None and prec.coarse_log2 and prec.replicas > 1:
        x, nm, n_coarse, reseeded = _coarse_start(setting, alpha, b, prec, x, seed, kernel, pattern)
        iters += n_coarse
        coarse_nm = nm is not None
    certificates = certificates if certificates is not None else {}
    rep = -1
    while True:
        rep += 1
        if rep >= prec.replicas:
            # Enough scramblings for the errors (default, high: their target) and for the verdict (zero_within).
            enough = rep >= max(prec.replicas, prec.max_replicas) or _target_met(summ, energies, prec.target, b)
            decided = (rep >= max(prec.max_replicas, RESOLVE_REPLICAS)
                       or not _unresolved(setting, b, overlaps_reps, raw_reps, summ))
            if enough and decided:
                break
        bm = BranchMap(setting, alpha, b, integration_points(setting, prec, rep, seed), kernel=kernel,
                       pattern=pattern)
        x = _replica_start(rep, x, xs, hint if nm is not None else SolverHints(), alpha, bm)
        sol: SolverResult | None = None  # the chord's result where it converged
        if nm is not None:
            from_coarse = rep == 0 and coarse_nm
            tried = chord(bm.step, x, tol=prec.tol, matrix=nm, admissible=bm.admissible, scale=bm.layout.scale,
                          accept=prec.accept, cheap=bm.cheap if bm.warmable else None, secant_min=SECANT_MIN,
                          give_up=functools.partial(bm.only_order_far, near=FAR, far=FRESH_RETRY_MAX) if from_coarse
                          else None)
            if tried.extra.get("gave_up"):
                # The coarse point's order parameter is the coarse points' graininess (the full map moves only it, by
                # more than FRESH_RETRY_MAX): as from a reseeded start, undamped from that image.
                x, reseeded = tried.x.copy(), True
                iters += 1
            elif not tried.converged and tried.residual <= FRESH_RETRY_MAX:
                # The frozen Jacobian was too far off (near a branch end): once more with a fresh one here, not where
                # the chord ended far from any fixed point (docs/numerics.md, rules table: fresh-Jacobian retry).
                retried, fresh, n_eval = _fresh_chord(bm, x, prec)
                iters += n_eval
                if retried is not None:
                    tried = retried
                    if tried.converged:
                        nm = fresh
            # (A failed chord's evaluations are not added to iters: kept as the recorded curves count them.)
            sol = tried if tried.converged else None
        by_chord = sol is not None
        if sol is None:
            # From a reseeded start only the order parameter is far (relative to its own small size); the damped
            # far-phase steps would slow its decay (or growth) to 0.3 of the map's.
            sol = anderson(bm.step, x, tol=prec.tol, max_iter=prec.max_iter, admissible=bm.admissible,
                           collapsed=bm.collapsed, diverged=bm.diverged, accept=prec.accept, scale=bm.layout.scale,
                           far_steps=0 if reseeded and rep == 0 else FAR_STEPS,
                           collapsing=_collapsing(setting, alpha, b, seed, bm, certificates,
                                                  prec), approx=bm.approximate, keeps=bm.keeps_signs)
            if sol.status == Status.not_converged and sol.residual <= FRESH_RETRY_MAX:
                # The iteration creeps along a slow direction (a free solve on the L = 3 ring): Newton from its last
                # iterate, with the Jacobian there (rules table).
                tried, fresh, n_eval = _fresh_chord(bm, sol.x, prec, secant_min=SECANT_MIN)
                iters += n_eval
                if tried is not None and tried.converged:
                    iters += sol.nit  # (the iteration's; the chord's are added below)
                    sol, nm, by_chord = tried, fresh, True
        iters += sol.nit
        warnings.extend(w for w in sol.warnings if w not in warnings)
        if rep == 0 and prec.replicas > 1 and sol.status == Status.ok and not by_chord:
            # The other scramblings' fixed points lie within the integration error of this one: a
            # frozen-Jacobian Newton (chord) method reaches them in 2-3 evaluations.
            nm, n_eval = _fresh_newton_matrix(bm, sol.x)
            iters += n_eval
        residual = max(residual, sol.residual)
        if rep == 0:
            first_ok = sol.status == Status.ok
        if sol.status != Status.ok:
            status = sol.status
            message = sol.message
        if sol.aux is None or not np.all(np.isfinite(sol.x)):
            break
        failures += sol.aux.prox_failures
        x = sol.x.copy()
        xs.append(x)
        o = bm.unpack(sol.x)
        try:
            energy = train_loss(setting, alpha, o, sol.aux.hats, sol.aux.moreau)
        except Inadmissible as exc:
            status, message = Status.inadmissible, str(exc)
            break
        flipped = bm.reversed_directions(sol.x, sol.aux) if sol.status == Status.ok else []
        if flipped:
            # A mirror cycle (G(x) = S x): no fixed point here, however small the gauged residual (docs/numerics.md).
            status = Status.not_converged
            message = (f"the map sends this point to its mirror image (student direction(s) {flipped} flipped): a "
                       "2-cycle of the iteration, not a fixed point")
            warnings.append(Note(NoteCode.mirror_cycle, message))
            first_ok = first_ok and rep > 0
        # Each scrambling's representative pointing the first one's way (their mean is then that of one solution),
        # its conjugates rotated alike; not on a linear pattern, whose points fix the rotation already.
        R, Rs = gauge_rotation(o) if bm.layout.lin is None else (np.eye(o.q.shape[0]), np.eye(o.theta.shape[1]))
        if overlaps_reps:
            R = R * aligning_signs(rotate(o, R, Rs), overlaps_reps[0])
        overlaps_reps.append(rotate(o, R, Rs))
        raw_reps.append(o)
        hats_reps.append(rotate_hats(sol.aux.hats, R, Rs))
        energies.append(energy)
        summ.append(summaries(overlaps_reps[-1]))
        if status != Status.ok:
            # Already not a valid point: more scramblings would cost iterations and change nothing.
            break
    seconds = lambda: time.perf_counter() - t0  # noqa: E731
    if not overlaps_reps:
        o_nan, h_nan = _nan_overlaps(setting)
        return FixedPoint(alpha, setting.omega, branch, o_nan, h_nan, np.nan, np.nan, {}, iterations=iters,
                          residual=float(residual), status=status if status != Status.ok else Status.not_converged,
                          warnings=tuple(warnings), message=message, n_points=0, n_replicas=0, seconds=seconds(),
                          precision=prec.name, setting=setting.to_dict())
    k = len(overlaps_reps)

    def sem(a: np.ndarray) -> np.ndarray:
        return np.std(a, axis=0, ddof=1) / np.sqrt(k) if k > 1 else np.full(np.shape(a)[1:], np.nan)

    mean = _mean_overlaps(overlaps_reps)
    hmean = HatOverlaps(**{f: np.mean([getattr(h, f) for h in hats_reps], axis=0)
                           for f in ("qhat", "mhat", "Vhat", "thetahat")})
    E = np.array(energies)
    te, te_quad = _test_error(setting, mean)
    te_reps = [test_error_estimate(setting, o) for o in overlaps_reps] if k > 1 else [te]
    te_err = float(np.sqrt((np.std(te_reps, ddof=1) / np.sqrt(k)) ** 2 + te_quad**2)) if k > 1 else float("nan")
    errors = {key: float(sem(np.array([s[key] for s in summ]))) for key in ("q", "m", "V", "theta")}
    errors.update({"train_loss": float(sem(E[:, None])[0]), "test_error": te_err})
    s_mean = summaries(mean)
    order = _order_size(setting, b, overlaps_reps, raw_reps, summ)
    if status == Status.ok and order is not None and order.size < order.threshold(zero_within(k)):
        status, message = Status.collapsed, (f"{order.name} is zero within its error"
                                             f"{_as_found(order.name, order.size, order.aligned, order.error)}: "
                                             f"no distinct {branch} fixed point")
    if status == Status.ok and (not np.isfinite(E.mean()) or E.mean() < 0):
        # The training loss is a sum of squares plus a ridge term: a negative value is an iterate that ran away.
        status, message = Status.diverged, f"negative training loss {E.mean():.3g}"
    if status == Status.ok and k > 1:
        warnings.extend(_directions_differ(summ, s_mean, errors, te - float(np.mean(te_reps))))
    if failures:
        warnings.append(Note(NoteCode.prox_tolerance, f"{failures} proximal points above gradient tolerance"))
    hints = SolverHints(first_scrambling_ok=first_ok, replicas=tuple(overlaps_reps))
    if nm is not None and status == Status.ok:
        # For continuation: the Jacobian, and each scrambling's fixed point (the same points at the next alpha give
        # a fixed point displaced from their mean in nearly the same way).
        hints = SolverHints(first_scrambling_ok=first_ok, newton_matrix=nm, replica_x=tuple(xs), alpha=alpha,
                            predecessor=(hint.alpha, hint.replica_x[0]) if hint.replica_x else None,
                            replicas=tuple(overlaps_reps))
    if b == Branch.mixed:  # (after the hints: a continuation may start from the free solve's Newton matrix)
        status, message = _mixed_verdict(setting, s_mean, status, message, float(residual))
    fp = FixedPoint(
        alpha=alpha, omega=setting.omega, branch=branch, overlaps=mean, hats=hmean, train_loss=float(E.mean()),
        test_error=te, errors=errors, iterations=iters, residual=float(residual), status=status,
        warnings=tuple(warnings), message=message, n_points=2**prec.log2_points * k, n_replicas=k, seconds=seconds(),
        precision=prec.name, setting=setting.to_dict(), hints=hints,
    )
    return fp


def _directions_differ(summ: list[dict], s_mean: dict, errors: dict, te_shift: float) -> list[Note]:
    """Where the scramblings' order parameters, pointed one way (signs and the exact rotations), still point different
    ways, their mean is shorter than each of them and the size reported from it is low: in a free solve near the L = 3
    positional branch's birth (a setting without token patterns, or a start off them) they lie on a ring of near-fixed
    points whose angle each scrambling's own points pin (docs/numerics.md, "the angle along the L = 3 ring"; default
    precision, omega 0.6, alpha 0.4045, before token patterns: the mean's rms m 0.1359 +- 0.0001, each scrambling's
    0.1404-0.1414).  Where the shortfall exceeds 3 standard errors of the
    scramblings' own sizes, the errors of that size and of the test error (taken at the mean) include it (updated in
    place) and a warning says so."""
    out = []
    for key in ("m", "theta"):
        own = float(np.mean([x[key] for x in summ]))
        short = own - s_mean[key]
        if not short > max(3 * errors[key], 1e-9 * own):  # (1e-9: above round-off, far below any integration error)
            continue
        out.append(Note(NoteCode.directions_differ,
                        f"the scramblings' {key} point different ways: the size of their mean, {s_mean[key]:.4g}, is "
                        f"below their own sizes' {own:.4g} +- {errors[key]:.2g}; its error includes the difference"))
        errors[key] += short
    if out:
        errors["test_error"] += abs(te_shift)
    return out


def _as_found(name: str, size: float, aligned: float, err: float) -> str:
    """For the collapse message: where the scramblings' fixed points as found point opposite ways (their mean is
    smaller than that of the aligned ones, which the point reports: beyond round-off), both numbers."""
    if not size < (1 - 1e-6) * aligned:
        return ""
    return (f" (the scramblings' fixed points point opposite ways: {name} {size:.2g} +- {err:.2g} as found, "
            f"{aligned:.2g} pointed one way)")


@dataclasses.dataclass(frozen=True)
class _OrderSize:
    """The branch's order parameter over the scramblings' fixed points: its size (the smaller of the mean pointed
    one way and the mean as found), the size pointed one way, its standard error and its collapse scale (1%)."""

    name: str
    size: float
    aligned: float
    error: float
    scale: float

    def threshold(self, errors: float) -> float:
        """The size below which the order parameter is zero: 1% of its scale, or ``errors`` standard errors."""
        return max(self.scale, errors * self.error if np.isfinite(self.error) else 0.0)


def _mean_overlaps(reps: list[Overlaps]) -> Overlaps:
    """The scramblings' mean, the untied student's marked as such: its summaries are the ones each scrambling's are
    (before, the verdict took the tied student's size of an untied mean against the untied sizes' error)."""
    return Overlaps(**{f: np.mean([getattr(o, f) for o in reps], axis=0) for f in ("q", "m", "V", "theta")},
                    untied=reps[0].untied)


def _order_size(setting: Setting, b: Branch, reps: list[Overlaps], raw_reps: list[Overlaps],
                summ: list[dict]) -> _OrderSize | None:
    """The positional branch's m or the semantic branch's theta (None for the others) over the k scramblings so far:
    also as a vector with the signs the iteration found, where a small order parameter that the points' graininess
    sustains points another way in each scrambling, and cancels (docs/numerics.md, "Measured cases behind
    solve.py": collapse as a vector)."""
    if b not in (Branch.positional, Branch.semantic):
        return None
    k = len(reps)
    name = "m" if b == Branch.positional else "theta"
    s_mean = summaries(_mean_overlaps(reps))
    err = float(np.std([s[name] for s in summ], ddof=1) / np.sqrt(k)) if k > 1 else float("nan")
    size = s_mean[name]
    if k > 1 and not setting.untied:
        size = min(size, summaries(_mean_overlaps(raw_reps))[name])
        err = max(err, _vector_sem([getattr(o, name) for o in raw_reps]) / (np.sqrt(setting.L) if name == "m" else 1.0))
    rho = 1.0 if name == "m" else setting.rho
    return _OrderSize(name, size, s_mean[name], err, order_threshold(np.sqrt(s_mean["q"] * rho)))


def _unresolved(setting: Setting, b: Branch, reps: list[Overlaps], raw_reps: list[Overlaps], summ: list[dict]) -> bool:
    """Whether the branch's order parameter is above 3 errors but within zero_within(k): more scramblings decide."""
    order = _order_size(setting, b, reps, raw_reps, summ)
    return order is not None and undecided(order.size, order.error, len(reps), order.scale)


def _vector_sem(arrays: list[np.ndarray]) -> float:
    """Standard error of the mean of a matrix over scramblings, as a Frobenius norm of the entries' errors."""
    A = np.array(arrays, dtype=float)
    return float(np.sqrt(np.sum(np.std(A, axis=0, ddof=1) ** 2) / A.shape[0]))


def _fresh_newton_matrix(bm: BranchMap, x: np.ndarray) -> tuple[np.ndarray | None, int]:
    """(I - J)^{-1} at x from the map's Jacobian (BranchMap.jacobian; None where singular) and the exact map
    evaluations spent; (None, 0) where x or both steps of a coordinate lie outside the admissible set."""
    try:
        J, n_eval = bm.jacobian(x)
    except Inadmissible:
        return None, 0
    return newton_matrix(J), n_eval


def _fresh_chord(bm: BranchMap, x: np.ndarray, prec: Precision,
                 secant_min: float = 0.0) -> tuple[SolverResult | None, np.ndarray | None, int]:
    """Chord steps from x with the Newton matrix at x (_fresh_newton_matrix): (their result, or None where there is
    no such matrix; the matrix; the map evaluations its Jacobian spent)."""
    fresh, n_eval = _fresh_newton_matrix(bm, x)
    if fresh is None:
        return None, None, n_eval
    return chord(bm.step, x, tol=prec.tol, matrix=fresh, admissible=bm.admissible, scale=bm.layout.scale,
                 accept=prec.accept, cheap=bm.cheap if bm.warmable else None, secant_min=secant_min), fresh, n_eval


def _replica_start(rep: int, x: np.ndarray, xs: list[np.ndarray], hint: SolverHints, alpha: float,
                   bm: BranchMap) -> np.ndarray:
    """Where scrambling `rep` starts.  The fixed points of different scramblings differ by the integration error
    (1e-3 relative), those of one scrambling at neighbouring alphas by the branch's smooth change (the points are
    the same), so: scrambling 0 from its own fixed point at the previous alpha, extrapolated linearly through the
    one before (at most twice their spacing ahead); scrambling k from scrambling 0's fixed point here plus k's
    offset from 0 at the previous alpha; without a previous alpha, from the mean of the scramblings solved so
    far.  The start only matters for speed: within CONTINUE_RADIUS of it BranchMap's evaluations are cheap."""
    prev_xs = hint.replica_x or None
    if prev_xs is not None and (prev_xs[0].shape != x.shape or hint.newton_matrix is None):
        prev_xs = None
    if prev_xs is not None and rep == 0:
        x_p, a_p = prev_xs[0], hint.alpha
        if hint.predecessor is not None:
            a_pp, x_pp = hint.predecessor
            step = (alpha - a_p) / (a_p - a_pp) if a_p != a_pp else np.inf
            cand = x_p + step * (x_p - x_pp)
            if 0 < abs(step) <= 2 and bm.admissible(cand) and not bm.collapsed(cand):
                return cand
        return x_p.copy()
    if prev_xs is not None and rep < len(prev_xs) and xs:
        cand = xs[0] + (prev_xs[rep] - prev_xs[0])
        if bm.admissible(cand):
            return cand
    if xs:
        return np.mean(xs, axis=0)
    return x



def solve_all(setting: Setting, alpha: float, precision: str | Precision = "default", seed: int = 0,
              inits: dict | None = None, *, kernel: str = "auto", multistart: bool | None = None,
              stability: bool = True) -> dict[str, FixedPoint]:
    """Every branch the setting has (results.branches_for: with "mixed" for r >= 2) at one alpha."""
    inits = inits or {}
    return {b: solve(setting, alpha, b, precision, init=inits.get(b), seed=seed, kernel=kernel,
                     multistart=multistart, stability=stability) for b in branches_for(setting)}


def solve_screened(setting: Setting, alpha: float, precision: str | Precision = "default", seed: int = 0, *,
                   kernel: str = "auto", multistart: bool | None = None, stability: bool = True) -> dict[str, FixedPoint]:
    """The branches that can be the global minimum at alpha, solved at precision (their results.global_minimum is
    that of solve_all): every branch solved at the fast precision first, then at precision one by one, lowest first,
    those whose fast point is not valid or lies within SCREEN_MARGIN of the lowest point so far
    (results.still_to_solve); a branch whose fast point is valid and lies clearly above is left out.  Each point
    solved is solve()'s own, so the minimum is the number solve_all gives.  At the fast precision or coarser:
    solve_all.  (r = 2, alpha 1.5: the mixed point only, 12.3 -> 7.7 s.)"""
    prec = get_precision(precision)
    rough_prec = _walk_precision(prec)
    if rough_prec is prec:
        return solve_all(setting, alpha, prec, seed, kernel=kernel, multistart=multistart, stability=stability)
    # (the rough points rank the branches only: their stability is not read)
    rough = solve_all(setting, alpha, rough_prec, seed, kernel=kernel, multistart=multistart, stability=False)
    fine: dict[str, FixedPoint] = {}
    while todo := still_to_solve(rough, fine):
        fine[todo[0]] = solve(setting, alpha, todo[0], prec, seed=seed, kernel=kernel, multistart=multistart,
                              stability=stability)
    return {b: fine[b] for b in rough if b in fine}


def solve_retrying(setting: Setting, alpha: float, branch: str, precision: str, seed: int,
                   init: Overlaps | FixedPoint | None, nearest: FixedPoint | None = None) -> tuple[FixedPoint, int]:
    """solve() from init; where that fails, from the nearest solved point of the branch, then from the default
    start (a neighbour next to a branch end, where the order parameter is small, can lead the iteration onto the
    agnostic point).  A start that is init is not tried twice.  No internal continuation (ladder=False): the caller
    (the transition's branch ends) is continuing the branch itself.  (last fixed point, solves)."""
    p = solve(setting, alpha, branch, precision, init=init, seed=seed, ladder=False, stability=False)
    n = 1
    for retry in ([nearest] if nearest is not None else []) + [None]:
        if p.valid or retry is init:
            continue
        p = solve(setting, alpha, branch, precision, init=retry, seed=seed, ladder=False, stability=False)
        n += 1
    return p, n


def mixed_start(setting: Setting, alpha: float, precision: str | Precision = "fast", seed: int = 0) -> Overlaps:
    """The mixed start for a tied student of rank r >= 2, from the rank-1 student's semantic and positional fixed
    points at the same alpha (two rank-1 solves, every start they need)."""
    if setting.r < 2 or setting.untied:
        raise InputError(f"the mixed start is built for a tied student of rank r >= 2; got r = {setting.r}, "
                         f"student {setting.student}")
    one = setting.replace(r=1)
    return mixed_start_from(solve(one, alpha, "semantic", precision, seed=seed, stability=False),
                            solve(one, alpha, "positional", precision, seed=seed, stability=False), setting)

