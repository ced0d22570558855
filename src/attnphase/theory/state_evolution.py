"""Fixed points of the self-consistent equations: overlaps -> (channel) hat overlaps -> (prior) overlaps.

The physics (prior.update_overlaps, channel.update_hatoverlaps) meets the generic solver
(fixed_point.anderson / chord) through :class:`BranchMap`, the raw map of one branch on its flat free
coordinates.  Integration error is measured, not assumed: the fixed point is solved independently for R
scramblings of the Sobol points (the first by damped + Anderson iteration, or along a curve from its own fixed
point at the previous alpha; the others by a frozen-Jacobian Newton from near the first one's solution, see
_replica_start); every reported number is the mean over the R solutions and its error estimate the standard
error of that mean.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from attnphase.setting import Setting, check_alpha
from attnphase.theory.channel import ChannelOutput, points_dim, update_hatoverlaps
from attnphase.theory.fixed_point import (
    FAR_STEPS,
    Inadmissible,
    SolverResult,
    Status,
    anderson,
    chord,
    jacobian,
    newton_matrix,
)
from attnphase.theory.observables import test_error as _test_error
from attnphase.theory.observables import test_error_estimate
from attnphase.theory.overlaps import Branch, HatOverlaps, Layout, Overlaps, as_branch, canonical_gauge, lift_to_untied
from attnphase.theory.prior import prior_energy, update_overlaps
from attnphase.theory.prox import choose_kernel
from attnphase.theory.quadrature import gaussian_sobol
from attnphase.theory.results import BRANCHES, FixedPoint, summaries


@dataclass(frozen=True)
class Precision:
    """Integration and iteration accuracy.  log2_points: Sobol points per scrambling.

    tol is the relative fixed-point residual.  It sits a few times below the integration error and above
    the map's graininess: with n points the map jumps by ~1/n whenever a point's global minimiser switches
    basin, so a tighter tol only makes the iteration wander (measured: fast with tol 1e-4 stalled at
    3e-4 at omega = 0.05, alpha = 0.69).  The same levels serve every dimension L (r + r*): randomised QMC's
    error does not grow with the dimension the way a tensor rule's does, and the reported error bars (spread
    over scramblings) say what was reached."""

    name: str
    log2_points: int
    replicas: int
    tol: float
    max_iter: int = 200
    accept: float = 0.0  # residual accepted when the iteration stagnates at the map's resolution
    target: float = 0.0  # add scramblings (up to max_replicas) until the relative errors reach this
    max_replicas: int = 0
    coarse_log2: int = 0  # Sobol points of the coarse pre-solve (0: none); see solve()


PRECISIONS = {
    "fast": Precision("fast", 13, 4, 3e-4, max_iter=80, accept=3e-3),
    "default": Precision("default", 15, 6, 3e-5, max_iter=100, accept=1e-3, target=1e-3, max_replicas=12,
                         coarse_log2=12),
    "high": Precision("high", 19, 8, 1e-5, max_iter=100, accept=3e-4, target=1e-4, max_replicas=32, coarse_log2=15),
}

JACOBIAN_STEP = 1e-2  # relative to the layout's coordinate scale (see fixed_point.jacobian)
SECANT_MIN = 1e-2  # chord steps at least this large (scaled) update its matrix (see fixed_point.chord)
_RESEED_LEVEL = 5.0  # order parameter / collapse threshold where a full solve restarts after a coarse collapse
_COARSE_STREAM = 999  # scrambling index of the coarse points (replicas use 0 .. max_replicas - 1)

DIVERGENCE = 1e6  # |overlap| beyond which the iterate is declared diverged

# Largest move (max over coordinates of |x - anchor| / scale) at which BranchMap continues the local minimisers
# of its last full evaluation instead of running the prox's own starts.  Measured on the study's map
# (benchmarks/continued_evaluations.py, 4 fixed points x 12 random moves x 2^15 points): at moves of 1e-3 no
# point's minimiser differed from the full evaluation's; at 3e-3 one point in 1.6 million (a basin that appeared
# near w between the two parameters), which moved the image by 4e-5 relative, one point's jump (the map's own
# resolution, 1/n = 3e-5) and 25x below the error target; at 1e-2, 8 points and up to 2e-4.
CONTINUE_RADIUS = 3e-3


def get_precision(precision: str | Precision) -> Precision:
    if isinstance(precision, Precision):
        return precision
    try:
        return PRECISIONS[precision]
    except KeyError:
        raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}") from None


def check_branch(branch: str, allowed=BRANCHES) -> str:
    if branch not in allowed:
        raise ValueError(f"branch must be one of {', '.join(allowed)}; got {branch!r}")
    return branch


def check_theory_setting(setting: Setting) -> Setting:
    if not isinstance(setting, Setting):
        raise TypeError("setting must be an attnphase.Setting")
    if setting.lam <= 0:
        raise ValueError("the asymptotic theory needs lambda > 0 (at lambda = 0 the ridge limit is not implemented)")
    return setting


def default_start(setting: Setting, branch: str | Branch) -> Overlaps:
    """Starting overlaps.  Study (L = 2, r = r* = 1): positional (q, m, V, theta) = (0.02, 0.2, 15, 0), semantic
    (0.9, 0, 15, 0.35), agnostic (0.05, 0, 15, 0).  In general: V = 15 (sigma^2 / lambda) / 25 times I; positional m
    along the leading direction of the positional Gram matrix in the first rank direction; semantic theta = 0.35
    on the first min(r, r*) diagonal entries with q = 0.9 there and 0.05 in the other student directions; free:
    both, with m in the first direction theta leaves free when r > min(r, r*) (the mixed start).  Untied
    student: the tied start lifted (overlaps.lift_to_untied: m = [m, m], theta = [theta; theta], q's blocks 0.9
    correlated)."""
    b = as_branch(branch)
    if setting.untied:
        # The tied default start lifted to the untied field rank (Q = K up to a slightly decorrelated q).
        return lift_to_untied(default_start(setting.replace(student="tied"), b))
    L, r, rs = setting.L, setting.r, setting.r_star
    V = 15.0 * (setting.sigma**2 / setting.lam) / 25.0 * np.eye(r)
    m = np.zeros((L, r))
    theta = np.zeros((r, rs))
    q = (0.05 if b == Branch.agnostic else 0.02) * np.eye(r)
    if b.has_m:
        U = Layout.for_setting(setting, b).basis
        # Free branch with r > min(r, r*): m in the first rank direction theta leaves free (the mixed start).
        col = min(r, rs) if (b == Branch.free and r > min(r, rs)) else 0
        if U.shape[1]:
            m[:, col] = 0.2 * U[:, 0]
    if b.has_theta:
        k = min(r, rs)
        theta[:k, :k] = 0.35 * np.eye(k)
        q = np.diag([0.9] * k + [0.05] * (r - k))
    return Overlaps(q=q, m=m, V=V, theta=theta)


class BranchMap:
    """The raw fixed-point map of one branch on its flat free coordinates, for fixed integration points.

        bm = branch_map(setting, alpha, "semantic", points)
        x = bm.pack(overlaps); x_new = bm(x); bm.unpack(x_new) -> Overlaps

    ``bm.step(x)`` also returns the channel output (hat overlaps, Moreau envelope, prox diagnostics).  For
    r > 1 or r* > 1 the image is put in the canonical rotation gauge (overlaps.canonical_gauge), which removes
    the neutral directions of the exact rotation symmetry.  Raises fixed_point.Inadmissible where the map
    cannot be evaluated.  Coordinate names: ``bm.layout.names()``.  Near its last full evaluation the map
    continues that evaluation's local minimisers (see :meth:`step`); ``bm.evaluations`` counts both kinds.
    """

    def __init__(self, setting: Setting, alpha: float, branch: str | Branch, points: np.ndarray, *,
                 kernel: str = "auto") -> None:
        self.setting = setting
        self.alpha = float(alpha)
        self.branch = as_branch(branch)
        self.points = points
        self.kernel = kernel
        self.layout = Layout.for_setting(setting, self.branch)
        self.gauge = setting.field_rank > 1 or setting.r_star > 1
        # cheap() reuses the last exact step's minimisers as warm starts.  Not for the two-token kernel, although
        # it takes them (prox's warm path): on the omega = 0.3 curve its cheap steps saved 8% of the evaluations,
        # but at the far positional point of (L, r, r*) = (2, 1, 2) (m 2.8, many basin switches) their Broyden
        # updates misled the chord: 232 exact evaluations for 12 scramblings against 82 without.
        self.warmable = choose_kernel(setting.L, setting.field_rank, kernel, setting.untied) == "general"
        self._warm: np.ndarray | None = None
        # The last full (own-starts) evaluation's point and the local minimisers it found, for continuation.
        self._anchor: np.ndarray | None = None
        self._minima = None
        self.evaluations = {"full": 0, "continued": 0}
        if points.shape[0] != points_dim(setting):
            raise ValueError(f"points must have {points_dim(setting)} rows (L (r + r*)), got {points.shape[0]}")

    def pack(self, o: Overlaps) -> np.ndarray:
        return self.layout.pack(o)

    def unpack(self, x: np.ndarray) -> Overlaps:
        return self.layout.unpack(x)

    def step(self, x: np.ndarray) -> tuple[np.ndarray, ChannelOutput]:
        """The image of x and the channel output.  Within CONTINUE_RADIUS of the last full evaluation (kernels that
        record their local minima: the two-token one), each point's prox continues the minimisers that evaluation
        found (prox's minima path, 4x less CPU) instead of running its own starts.  Both kinds count as exact
        evaluations: they differ at a rate far below one point per evaluation (see CONTINUE_RADIUS).  Reproducible:
        which kind runs depends only on the sequence of x this map was given."""
        x = np.asarray(x, dtype=float)
        o = self.layout.unpack(x)
        if self._near_anchor(x):
            out = update_hatoverlaps(self.setting, self.alpha, o, self.points, self.branch, kernel=self.kernel,
                                     minima=self._minima)
            self.evaluations["continued"] += 1
        else:
            out = update_hatoverlaps(self.setting, self.alpha, o, self.points, self.branch, kernel=self.kernel)
            self.evaluations["full"] += 1
            if out.minima is not None:
                self._anchor, self._minima = x.copy(), out.minima
        if self.warmable:
            self._warm = out.h
        return self.image(out), out

    @property
    def jacobian_step(self) -> float:
        """Finite-difference step (scaled) for this map's Jacobian.  JACOBIAN_STEP's 1e-2 keeps the difference
        quotient above the map's graininess on 2^12 points; on 2^15 points or more, CONTINUE_RADIUS's 3e-3 has less
        graininess noise (it scales as (n step)^(-1/2)) and makes the steps continued evaluations where the kernel
        records its minima."""
        if self._anchor is not None and self.points.shape[1] >= 2**15:  # (an anchor: the kernel records minima)
            return 0.9 * CONTINUE_RADIUS  # (inside the radius despite rounding)
        return JACOBIAN_STEP

    def _near_anchor(self, x: np.ndarray) -> bool:
        if self._anchor is None or self._anchor.shape != x.shape:
            return False
        move = np.abs(x - self._anchor) / self.layout.scale(self._anchor)
        return bool(np.max(move, initial=0.0) <= CONTINUE_RADIUS)

    def image(self, out: ChannelOutput) -> np.ndarray:
        """The packed overlaps the prior side gives for a channel output (the map's second half)."""
        new = update_overlaps(self.setting, out.hats)
        if self.gauge:
            new = canonical_gauge(new, untied=self.setting.untied)
        return self.layout.pack(new)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.step(x)[0]

    def cheap(self, x: np.ndarray) -> np.ndarray:
        """An approximate image: each point's prox by Newton from the last step()'s minimiser only (no own
        starts; ~10x cheaper, misses basin switches).  For a solver's speculative steps, which step() then
        checks (fixed_point.chord).  The exact image where no warm starts are available."""
        if self._warm is None:
            return self(x)
        out = update_hatoverlaps(self.setting, self.alpha, self.layout.unpack(x), self.points, self.branch,
                                 kernel=self.kernel, warm=self._warm)
        return self.image(out)

    # -- predicates for the generic solver
    def admissible(self, x: np.ndarray) -> bool:
        o = self.layout.unpack(x)
        try:
            ev_q = np.linalg.eigvalsh(o.q)
            ev_V = np.linalg.eigvalsh(o.V)
            if ev_q.min() <= 0 or ev_V.min() <= 0:
                return False
            if self.branch.has_theta:
                resid = self.setting.rho_matrix - o.theta.T @ np.linalg.solve(o.q, o.theta)
                return bool(np.linalg.eigvalsh(resid).min() > 0)
        except np.linalg.LinAlgError:
            return False
        return True

    def _order(self, o: Overlaps) -> tuple[str, float, float] | None:
        """(name, size, collapse threshold) of the branch's order parameter (None: the branch has none)."""
        name = {Branch.semantic: "theta", Branch.positional: "m"}.get(self.branch)
        if name is None:
            return None
        qmax = max(float(np.linalg.eigvalsh(o.q).max()), 0.0)
        scale = np.sqrt(qmax * self.setting.rho) if name == "theta" else np.sqrt(qmax)
        return name, summaries(o)[name], 1e-2 * scale

    def collapsed(self, x: np.ndarray) -> bool:
        """The branch's order parameter has decayed to ~0 (flowing to the agnostic point)."""
        order = self._order(self.layout.unpack(x))
        return order is not None and order[1] < order[2]

    def with_order(self, x: np.ndarray, level: float) -> np.ndarray | None:
        """x with the order parameter rescaled (same direction) to ``level`` times the collapse threshold; None
        where it is zero or not finite, or the branch has none.  (Its summary is homogeneous of degree one.)"""
        o = self.layout.unpack(x)
        order = self._order(o)
        if order is None or not (np.isfinite(order[1]) and order[1] > 0):
            return None
        name, size, threshold = order
        c = level * threshold / size
        o = Overlaps(q=o.q, m=c * o.m if name == "m" else o.m, V=o.V, theta=c * o.theta if name == "theta" else o.theta,
                     untied=o.untied)
        return self.layout.pack(o)

    def diverged(self, x: np.ndarray) -> bool:
        return bool(np.max(np.abs(x), initial=0.0) > DIVERGENCE)


def branch_map(setting: Setting, alpha: float, branch: str | Branch, points: np.ndarray, *,
               kernel: str = "auto") -> BranchMap:
    """The raw map of one branch on its flat free coordinates (see :class:`BranchMap`).  Stable API for
    continuation and bifurcation analysis (e.g. d theta_new / d theta at theta = 0 on the agnostic point)."""
    return BranchMap(check_theory_setting(setting), check_alpha(alpha), branch, points, kernel=kernel)


def integration_points(setting: Setting, precision: str | Precision = "default", replica: int = 0,
                       seed: int = 0) -> np.ndarray:
    """The Sobol points solve() uses for one scrambling, shape (L (r + r*), 2^log2_points)."""
    prec = get_precision(precision)
    return gaussian_sobol(prec.log2_points, points_dim(setting), 1000 * seed + replica)


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
    if not isinstance(o, Overlaps):
        raise TypeError("init must be Overlaps or a FixedPoint")
    if o.dims != (setting.L, setting.field_rank, setting.r_star):
        want = (setting.L, setting.field_rank, setting.r_star)
        raise ValueError(f"init has shapes (L, r, r*) = {o.dims}, the setting {want}"
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


def _coarse_start(setting: Setting, alpha: float, b: Branch, prec: Precision, x: np.ndarray, seed: int,
                  kernel: str) -> tuple[np.ndarray, np.ndarray | None, int, bool]:
    """Coarse-to-fine: the fixed point and Jacobian on 2^coarse_log2 points of their own scrambling, where the
    damped / Anderson phase (tens of map evaluations) and the finite differences cost 2^(log2_points -
    coarse_log2) times less; every scrambling at full resolution then starts from there with chord steps.
    Returns (start, Newton matrix or None, map evaluations, reseeded); the given start and None where the coarse
    solve fails (the full-resolution path then decides from the original start, as without it), except after a
    collapse (reseeded: see below)."""
    pts = gaussian_sobol(prec.coarse_log2, points_dim(setting), 1000 * seed + _COARSE_STREAM)
    bm = BranchMap(setting, alpha, b, pts, kernel=kernel)
    # Its graininess is 2^((log2_points - coarse_log2) / 2) times the full map's: a looser tolerance.
    scale = 2.0 ** ((prec.log2_points - prec.coarse_log2) / 2)
    sol = anderson(bm.step, x, tol=scale * prec.tol, max_iter=prec.max_iter, admissible=bm.admissible,
                   collapsed=bm.collapsed, diverged=bm.diverged, accept=prec.accept, scale=bm.layout.scale)
    if sol.status == Status.collapsed:
        # Far below a branch's end the coarse and the full iteration take the same path to the agnostic point
        # (measured on the semantic branch at alpha 0.3: 16 evaluations each, iterates equal to 3 digits).  The
        # full one starts where the coarse one arrived, with the order parameter put back to 5x the collapse
        # threshold: it still carries it to zero (or away) by itself, so the verdict is the full map's.
        reseeded = bm.with_order(sol.x, _RESEED_LEVEL)
        if reseeded is not None:
            return reseeded, None, sol.nit, True
    if sol.status != Status.ok:
        return x, None, sol.nit, False
    nm, n_eval = _fresh_newton_matrix(bm, sol.x)
    if not n_eval:
        return x, None, sol.nit, False
    return sol.x.copy(), nm, sol.nit + n_eval, False


def solve(setting: Setting, alpha: float, branch: str = "positional", precision: str | Precision = "default",
          init: Overlaps | FixedPoint | None = None, seed: int = 0, *, kernel: str = "auto",
          multistart: bool = False) -> FixedPoint:
    """Fixed point of the self-consistent equations on one branch (or "global": the lowest train_loss of
    positional, semantic, agnostic).  "free" imposes no constraint (m and theta both free): for r >= 2 its default
    start puts theta in the first rank directions and m in the next, but it is not robust (measured at L = 2,
    r = 2, alpha = 1.5: the iteration runs off to a far positional point, m ~ 3, not converged); pass a mixed
    start as init (benchmarks/rank2.py builds one from the rank-1 semantic and positional solutions).

    multistart: without init, also solve from starts.extra_starts (fixed points the default start was measured
    to miss: for r* = 2 / L > 2 positional, the r = 2 mixed minimum) and return the valid one with the lowest
    training loss; the others are listed in its warnings.  The study's setting has no extra starts.

    Never raises for a numerical failure: the returned FixedPoint carries the status (bad input is a
    ValueError/TypeError, checked before any work)."""
    check_theory_setting(setting)
    alpha = check_alpha(alpha)
    # "free" (no constraint) is the branch of the mixed minimum of a student with rank r >= 2: one direction
    # positional, another semantic (measured: L = 2, r = 2, r* = 1, alpha = 1.5 lands there in simulation).
    check_branch(branch, BRANCHES + ("free", "global"))
    prec = get_precision(precision)
    if not isinstance(multistart, bool):
        raise TypeError(f"multistart must be a bool, got {type(multistart).__name__}")
    if branch == "global":
        return global_minimum(solve_all(setting, alpha, precision=prec, seed=seed, kernel=kernel,
                                        multistart=multistart))
    fp = _solve_one(setting, alpha, branch, prec, init, seed, kernel)
    if multistart and init is None:
        from attnphase.theory.starts import extra_starts

        extra = extra_starts(setting, alpha, branch, prec.name if prec.name in PRECISIONS else "fast", seed)
        if extra:
            fp = _best_of([fp] + [_solve_one(setting, alpha, branch, prec, o, seed, kernel) for o in extra])
    return fp


def _best_of(points: list[FixedPoint]) -> FixedPoint:
    """The valid point with the lowest training loss (the first if none is valid), its warnings saying what the
    other starts gave, its seconds and iterations the sums over all."""
    ok = [i for i, p in enumerate(points) if p.valid]
    k = min(ok, key=lambda i: points[i].train_loss) if ok else 0
    best = points[k]
    others = "; ".join(f"start {i}: {p.status.value}" + (f", train loss {p.train_loss:.6g}" if p.valid else "")
                       for i, p in enumerate(points) if i != k)
    best.warnings = best.warnings + (f"multistart: start {k} of {len(points)} chosen (lowest train loss); {others}",)
    best.seconds = sum(p.seconds for p in points)
    best.iterations = sum(p.iterations for p in points)
    return best


def _solve_one(setting: Setting, alpha: float, branch: str, prec: Precision, init: Overlaps | FixedPoint | None,
               seed: int, kernel: str) -> FixedPoint:
    fp = _solve(setting, alpha, as_branch(branch), prec, init, seed, kernel)
    if init is None and fp.status == Status.inadmissible and fp.iterations <= 1:
        # The default start lies outside the map's domain (lambda + sigma^2 Vhat <= 0 at the first evaluation;
        # measured for r* = 2, agnostic, alpha = 1.5: Vhat is too negative at V = 15, the fixed point has V = 23).
        # |Vhat| falls with V: once more from the same start with V doubled.
        o = default_start(setting, branch)
        again = _solve(setting, alpha, as_branch(branch), prec, Overlaps(q=o.q, m=o.m, V=2.0 * o.V, theta=o.theta,
                                                                          untied=o.untied), seed, kernel)
        again.seconds += fp.seconds
        again.iterations += fp.iterations
        return again
    return fp


def _solve(setting: Setting, alpha: float, b: Branch, prec: Precision, init: Overlaps | FixedPoint | None, seed: int,
           kernel: str) -> FixedPoint:
    branch = b.value
    t0 = time.perf_counter()
    layout = Layout.for_setting(setting, b)
    x = layout.pack(_start(setting, b, init))
    overlaps_reps: list[Overlaps] = []
    hats_reps: list[HatOverlaps] = []
    energies: list[float] = []
    summ: list[dict] = []
    iters = 0
    residual = 0.0
    failures = 0
    status = Status.ok
    message = ""
    warnings: list[str] = []
    # Continuation: the previous alpha's Jacobian is close enough for chord steps here too.
    hint = init._extra if isinstance(init, FixedPoint) and init.branch == branch else {}
    nm = hint.get("newton_matrix")
    if nm is not None and nm.shape != (layout.size, layout.size):
        nm = None
    xs: list[np.ndarray] = []  # this solve's fixed point per scrambling
    first_ok = False
    reseeded = False
    if nm is None and prec.coarse_log2 and prec.replicas > 1:
        x, nm, n_coarse, reseeded = _coarse_start(setting, alpha, b, prec, x, seed, kernel)
        iters += n_coarse
    rep = -1
    while True:
        rep += 1
        if rep >= max(prec.replicas, prec.max_replicas) or (
                rep >= prec.replicas and _target_met(summ, energies, prec.target, b)):
            break
        bm = BranchMap(setting, alpha, b, integration_points(setting, prec, rep, seed), kernel=kernel)
        x = _replica_start(rep, x, xs, hint if nm is not None else {}, alpha, bm)
        sol: SolverResult | None = None
        if nm is not None:
            sol = chord(bm.step, x, tol=prec.tol, matrix=nm, admissible=bm.admissible, scale=bm.layout.scale,
                        accept=prec.accept, cheap=bm.cheap if bm.warmable else None, secant_min=SECANT_MIN)
            if sol is None:
                # The frozen Jacobian was too far off (near a branch end the map's slowest eigenvalue approaches
                # 1 and moves fast with alpha and the scrambling): once more with a fresh one here, which costs
                # size + 1 evaluations where the damped / Anderson fallback took 15-60 near the semantic end.
                fresh, n_eval = _fresh_newton_matrix(bm, x)
                iters += n_eval
                if fresh is not None:
                    sol = chord(bm.step, x, tol=prec.tol, matrix=fresh, admissible=bm.admissible,
                                scale=bm.layout.scale, accept=prec.accept, cheap=bm.cheap if bm.warmable else None)
                    if sol is not None:
                        nm = fresh
        by_chord = sol is not None
        if sol is None:
            # From a reseeded start only the order parameter is far (relative to its own small size); the damped
            # far-phase steps would slow its decay (or growth) to 0.3 of the map's.
            sol = anderson(bm.step, x, tol=prec.tol, max_iter=prec.max_iter, admissible=bm.admissible,
                           collapsed=bm.collapsed, diverged=bm.diverged, accept=prec.accept, scale=bm.layout.scale,
                           far_steps=0 if reseeded and rep == 0 else FAR_STEPS)
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
            energy = -(prior_energy(setting, o, sol.aux.hats) - alpha * sol.aux.moreau)
        except Inadmissible as exc:
            status, message = Status.inadmissible, str(exc)
            break
        overlaps_reps.append(canonical_gauge(o))
        hats_reps.append(sol.aux.hats)
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

    mean = Overlaps(**{f: np.mean([getattr(o, f) for o in overlaps_reps], axis=0) for f in ("q", "m", "V", "theta")})
    hmean = HatOverlaps(**{f: np.mean([getattr(h, f) for h in hats_reps], axis=0)
                           for f in ("qhat", "mhat", "Vhat", "thetahat")})
    E = np.array(energies)
    te, te_quad = _test_error(setting, mean)
    te_reps = [test_error_estimate(setting, o) for o in overlaps_reps] if k > 1 else [te]
    te_err = float(np.sqrt((np.std(te_reps, ddof=1) / np.sqrt(k)) ** 2 + te_quad**2)) if k > 1 else float("nan")
    errors = {key: float(sem(np.array([s[key] for s in summ]))) for key in ("q", "m", "V", "theta")}
    errors.update({"train_loss": float(sem(E[:, None])[0]), "test_error": te_err})
    s_mean = summaries(mean)
    if status == Status.ok and b == Branch.positional and s_mean["m"] < max(1e-2 * np.sqrt(s_mean["q"]),
                                                                           3 * errors["m"] if k > 1 else 0.0):
        status, message = Status.collapsed, "m is zero within its error: no distinct positional fixed point"
    if status == Status.ok and b == Branch.semantic and s_mean["theta"] < max(
            1e-2 * np.sqrt(s_mean["q"] * setting.rho), 3 * errors["theta"] if k > 1 else 0.0):
        status, message = Status.collapsed, "theta is zero within its error: no distinct semantic fixed point"
    if status == Status.ok and (not np.isfinite(E.mean()) or E.mean() < 0):
        # The training loss is a sum of squares plus a ridge term: a negative value is an iterate that ran away.
        status, message = Status.diverged, f"negative training loss {E.mean():.3g}"
    if failures:
        warnings.append(f"{failures} proximal points above gradient tolerance")
    fp = FixedPoint(
        alpha=alpha, omega=setting.omega, branch=branch, overlaps=mean, hats=hmean, train_loss=float(E.mean()),
        test_error=te, errors=errors, iterations=iters, residual=float(residual), status=status,
        warnings=tuple(warnings), message=message, n_points=2**prec.log2_points * k, n_replicas=k, seconds=seconds(),
        precision=prec.name, setting=setting.to_dict(),
    )
    fp._extra["first_scrambling_ok"] = first_ok
    if nm is not None and status == Status.ok:
        # Not serialised: solver hints for continuation (the Jacobian, and each scrambling's fixed point: the
        # same points at the next alpha give a fixed point displaced from their mean in nearly the same way).
        fp._extra.update(newton_matrix=nm, replica_x=xs, alpha=alpha,
                         predecessor=(hint["alpha"], hint["replica_x"][0]) if "replica_x" in hint else None)
    return fp


def _fresh_newton_matrix(bm: BranchMap, x: np.ndarray) -> tuple[np.ndarray | None, int]:
    """(I - J)^{-1} at x by finite differences with the map's step (None where singular) and the map evaluations
    spent; (None, 0) where a step leaves the admissible set."""
    try:
        J, n_eval = jacobian(bm.step, x, bm.jacobian_step, bm.layout.scale)
    except Inadmissible:
        return None, 0
    return newton_matrix(J), n_eval


def _replica_start(rep: int, x: np.ndarray, xs: list[np.ndarray], hint: dict, alpha: float,
                   bm: BranchMap) -> np.ndarray:
    """Where scrambling `rep` starts.  The fixed points of different scramblings differ by the integration error
    (1e-3 relative), those of one scrambling at neighbouring alphas by the branch's smooth change (the points are
    the same), so: scrambling 0 from its own fixed point at the previous alpha, extrapolated linearly through the
    one before (at most twice their spacing ahead); scrambling k from scrambling 0's fixed point here plus k's
    offset from 0 at the previous alpha; without a previous alpha, from the mean of the scramblings solved so
    far.  The start only matters for speed: within CONTINUE_RADIUS of it BranchMap's evaluations are cheap."""
    prev_xs = hint.get("replica_x")
    if prev_xs is not None and (prev_xs[0].shape != x.shape or hint.get("newton_matrix") is None):
        prev_xs = None
    if prev_xs is not None and rep == 0:
        x_p, a_p = prev_xs[0], hint["alpha"]
        if hint.get("predecessor") is not None:
            a_pp, x_pp = hint["predecessor"]
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
              inits: dict | None = None, *, kernel: str = "auto", multistart: bool = False) -> dict[str, FixedPoint]:
    inits = inits or {}
    return {b: solve(setting, alpha, b, precision, init=inits.get(b), seed=seed, kernel=kernel,
                     multistart=multistart) for b in BRANCHES}


def global_minimum(points: dict[str, FixedPoint]) -> FixedPoint:
    """The valid branch with the lowest training loss (agnostic only if nothing else is valid)."""
    cands = [p for b, p in points.items() if b != "agnostic" and p.valid]
    if not cands:
        cands = [p for p in points.values() if p.valid]
    if not cands:
        raise ValueError("no branch converged to a valid fixed point")
    return min(cands, key=lambda p: p.train_loss)


def solve_curve(setting: Setting, alphas, branch: str, precision: str | Precision = "default",
                seed: int = 0, *, kernel: str = "auto", multistart: bool = False) -> list[FixedPoint]:
    """Follow one branch along alpha by continuation: each solve starts from the previous alpha's solution
    if that one is valid, else from the default start.

    Returned in ascending alpha.  The semantic branch is followed downward from the largest alpha (it
    exists at large alpha and ends at a spinodal), the others upward.  A failure at one alpha is that
    alpha's FixedPoint (with its status); it never stops the curve.  A point that fails from its neighbour's
    solution is solved again from the default start, unless its first scrambling converged from there.
    multistart: every solve without a neighbour (the first alpha, retries) tries solve's extra starts too."""
    check_branch(branch, BRANCHES + ("free",))
    alphas = sorted(check_alpha(a) for a in alphas)
    out: list[FixedPoint] = []
    prev: FixedPoint | None = None
    order = alphas[::-1] if branch == "semantic" else alphas
    for a in order:
        init = prev if (prev is not None and prev.valid) else None
        fp = solve(setting, a, branch, precision, init=init, seed=seed, kernel=kernel, multistart=multistart)
        if not fp.valid and init is not None and not fp._extra.get("first_scrambling_ok"):
            # Continuation can fail where the previous point was far; retry from the default start.  Not where
            # the first scrambling did converge from the neighbour's point and a later one, or the scramblings'
            # spread, made the point invalid: the retry solves that same scrambling's map again (measured at the
            # semantic end, omega = 0.3, alpha = 0.7: 8 s for the same verdict).
            retry = solve(setting, a, branch, precision, init=None, seed=seed, kernel=kernel, multistart=multistart)
            if retry.valid:
                fp = retry
        out.append(fp)
        prev = fp
    return out[::-1] if branch == "semantic" else out
