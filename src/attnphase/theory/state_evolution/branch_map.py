"""BranchMap: the raw fixed-point map of one branch (channel then prior side) on its flat free coordinates, for fixed
integration points; the meeting point of the physics and the generic solvers."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attnphase.errors import InputError
from attnphase.setting import Setting, check_alpha
from attnphase.theory.model.channel import (
    ChannelOutput,
    points_dim,
    pointwise_f,
    reweighted_hats,
    update_hatoverlaps,
)
from attnphase.theory.model.overlaps import (
    COLLAPSE,
    ORDER_NAME,
    Branch,
    Layout,
    Overlaps,
    align_signs,
    aligning_signs,
    as_branch,
    canonical_gauge,
    order_threshold,
)
from attnphase.theory.model.patterns import Pattern
from attnphase.theory.model.prior import update_overlaps
from attnphase.theory.prox import LocalMinima, choose_kernel
from attnphase.theory.solvers.fixed_point import jacobian
from attnphase.theory.state_evolution.results import check_theory_setting, summaries

JACOBIAN_STEP = 1e-2  # relative to the layout's coordinate scale (see fixed_point.jacobian)
# Central differences of the basin-held map (see BranchMap.jacobian), relative to the layout's scale: the inner
# Newton stops at |grad| < 1e-9 (minimisers to ~3e-8), so steps of 1e-5 start to show it (measured: the rank-2
# mixed point's chord no longer converged from 1e-5 columns), while 1e-3 and 1e-4 give the same chords.
DERIVATIVE_STEP = 1e-4
DIVERGENCE = 1e6  # |overlap| beyond which the iterate is declared diverged

# Largest move (max over coordinates of |x - anchor| / scale) at which BranchMap continues the local minimisers of
# its last full evaluation instead of running the prox's own starts: one point in 1.6 million differs there
# (docs/numerics.md, "Continued evaluations"; benchmarks/continued_evaluations.py).
CONTINUE_RADIUS = 3e-3


class BranchMap:
    """The raw fixed-point map of one branch on its flat free coordinates, for fixed integration points.

        bm = branch_map(setting, alpha, "semantic", points)
        x = bm.pack(overlaps); x_new = bm(x); bm.unpack(x_new) -> Overlaps

    ``bm.step(x)`` also returns the channel output (hat overlaps, Moreau envelope, prox diagnostics).  For
    r > 1 or r* > 1 the image is put in the canonical rotation gauge (overlaps.canonical_gauge), which removes
    the neutral directions of the exact rotation symmetry.  Raises fixed_point.Inadmissible where the map
    cannot be evaluated.  Coordinate names: ``bm.layout.names()``.  Near its last full evaluation the map
    continues that evaluation's local minimisers (see :meth:`step`); ``bm.evaluations`` counts both kinds.
    ``pattern`` (a pattern of model.patterns): for a token pattern (positional branch) m held in its subspace, the
    image projected onto it; for a pattern of the student's directions too (equivariant, stabiliser) every overlap
    held on its linear subspace (Layout.linear), without the rotation gauge (the pattern fixes the student's
    rotation itself: m = kappa U).
    """

    def __init__(self, setting: Setting, alpha: float, branch: str | Branch, points: np.ndarray, *,
                 kernel: str = "auto", pattern: Pattern | None = None) -> None:
        self.setting = setting
        self.alpha = float(alpha)
        self.branch = as_branch(branch)
        self.points = points
        self.kernel = kernel
        self.layout = Layout.for_setting(setting, self.branch)
        if pattern is not None:
            self.layout = (self.layout.linear(*pattern.linear) if pattern.linear is not None
                           else self.layout.on_subspace(pattern.basis))
        # Not on a tied student's agnostic branch: its fixed point is isotropic (nothing neutral to remove), and
        # diagonalising a near-isotropic q rotates V at random from step to step (docs/numerics.md, "No rotation
        # gauge on a tied student's agnostic branch").
        self.gauge = (setting.field_rank > 1 or setting.r_star > 1) and not (
            self.branch == Branch.agnostic and not setting.untied) and self.layout.lin is None
        # cheap() reuses the last exact step's minimisers as warm starts; not for the two-token kernel, whose cheap
        # steps misled the chord at far points (docs/numerics.md, "Cheap steps").
        self.warmable = choose_kernel(setting.L, setting.field_rank, kernel, setting.untied) == "general"
        self._warm: np.ndarray | None = None
        # The last full (own-starts) evaluation's point and the local minimisers it found, for continuation.
        self._anchor: np.ndarray | None = None
        self._minima = None
        self.evaluations = {"full": 0, "continued": 0}
        if points.shape[0] != points_dim(setting):
            raise InputError(f"points must have {points_dim(setting)} rows (L (r + r*)), got {points.shape[0]}")

    def pack(self, o: Overlaps) -> np.ndarray:
        return self.layout.pack(o)

    @property
    def minima(self) -> LocalMinima | None:
        """The local minimisers of the last full evaluation (kernels that record them; None before one)."""
        return self._minima

    def unpack(self, x: np.ndarray) -> Overlaps:
        return self.layout.unpack(x)

    def step(self, x: np.ndarray) -> tuple[np.ndarray, ChannelOutput]:
        """The image of x and the channel output.  Within CONTINUE_RADIUS of the last full evaluation (kernels that
        record their local minima: the two-token one), each point's prox continues the minimisers that evaluation
        found (prox's minima path, 4x less CPU) instead of running its own starts.  Both kinds count as exact
        evaluations: they differ at a rate far below one point per evaluation (see CONTINUE_RADIUS).  Reproducible:
        which kind runs depends only on the sequence of x this map was given."""
        x = np.asarray(x, dtype=float)
        if self._near_anchor(x):
            out = self._continue(x)
        else:
            out = update_hatoverlaps(self.setting, self.alpha, self.layout.unpack(x), self.points, self.branch,
                                     kernel=self.kernel)
            self.evaluations["full"] += 1
            if out.minima is not None:
                self._anchor, self._minima = x.copy(), out.minima
        if self.warmable:
            self._warm = out.h
        return self.image(out, x), out

    def jacobian(self, x: np.ndarray) -> tuple[np.ndarray, int]:
        """The map's Jacobian at x and the exact evaluations spent (1 for the general kernel).

        General kernel: the derivative with every point's minimiser held in its basin, i.e. the implicit derivative
        of the proximal map, point by point: one exact evaluation at x, then central differences of cheap() (Newton
        from those minimisers) at DERIVATIVE_STEP.  It is smooth (no point switches basin), so the step is set by
        the inner Newton's tolerance, not by the points' graininess, and each column costs two warm evaluations
        (a fifth of a full one).  As a chord's matrix it converges in as few steps or fewer than the forward
        difference of the full map at 1e-2 (docs/numerics.md, "The Jacobian of a basin-held map").  A step that
        leaves the map's domain is taken one-sided.  Two-token kernel (no warm path): forward differences of the
        map itself at jacobian_step (fixed_point.jacobian).  Raises Inadmissible where x, or both sides of a
        coordinate, lie outside."""
        x = np.asarray(x, dtype=float)
        if not self.warmable:
            return jacobian(self.step, x, self.jacobian_step, self.layout.scale)
        self.step(x)  # (the minimisers the differences continue)
        J, _ = jacobian(lambda xs: (self.cheap(xs), None), x, DERIVATIVE_STEP, self.layout.scale, central=True)
        return J, 1

    @property
    def jacobian_step(self) -> float:
        """Finite-difference step (scaled) for the two-token kernel's Jacobian (see :meth:`jacobian`).
        JACOBIAN_STEP's 1e-2 keeps the difference quotient above the map's graininess on 2^12 points; on 2^15
        points or more, CONTINUE_RADIUS's 3e-3 has less graininess noise (it scales as (n step)^(-1/2)) and makes
        the steps continued evaluations where the kernel records its minima."""
        if self._anchor is not None and self.points.shape[1] >= 2**15:  # (an anchor: the kernel records minima)
            return 0.9 * CONTINUE_RADIUS  # (inside the radius despite rounding)
        return JACOBIAN_STEP

    def score_jacobian(self, x: np.ndarray) -> np.ndarray:
        """The map's Jacobian at x with the points that switch basin counted (two-token kernel only): along q, m and
        theta, which only move the fields' Gaussian law, every point's fields held and reweighted by their law
        (channel.reweighted_hats, the likelihood-ratio derivative, no prox solved); along V, every point's minimiser
        held in its basin (Newton from it: the prox's warm path, as cheap() for the general kernel).  Central
        differences at DERIVATIVE_STEP.  A diagnostic, not the solver's matrix (jacobian): next to a branch's end,
        on 2^15 points, it lies within 8% of central differences on 2^19 points, where jacobian's lies 14-69% off and
        a basin-held one, which misses the switching, 72-87%; but as the chord's matrix it made the study's curves
        slower (docs/numerics.md, "The Jacobian of the map"; benchmarks/study_jacobian.py).  Raises Inadmissible
        where x, or both sides of a coordinate, lie outside."""
        if self.warmable:
            raise InputError("score_jacobian is the two-token kernel's (L = 2, r = r* = 1, tied)")
        x = np.asarray(x, dtype=float)
        _, out = self.step(x)
        o = self.layout.unpack(x)
        f = pointwise_f(self.setting, o, self.points, kernel=self.kernel, warm=out.h)[0]

        def smooth(xs: np.ndarray) -> tuple[np.ndarray, None]:
            os_ = self.layout.unpack(xs)
            if np.array_equal(os_.V, o.V):
                hats = reweighted_hats(self.setting, self.alpha, o, self.points, self.branch, f, os_)
                return self.image(ChannelOutput(hats=hats, moreau=np.nan, prox_failures=0, n_points=f.shape[0]),
                                  xs), None
            held = update_hatoverlaps(self.setting, self.alpha, os_, self.points, self.branch, kernel=self.kernel,
                                      warm=out.h)
            return self.image(held, xs), None

        return jacobian(smooth, x, DERIVATIVE_STEP, self.layout.scale, central=True)[0]

    @property
    def approximate(self) -> Callable[[np.ndarray], tuple[np.ndarray, ChannelOutput]] | None:
        """anderson's steering map (its ``approx``) where the kernel is the general one, else None: see
        :meth:`continued`.  (Not the two-token kernel: the study's iterations, and so its numbers, stay as measured.)"""
        return self.continued if self.warmable else None

    def continued(self, x: np.ndarray) -> tuple[np.ndarray, ChannelOutput]:
        """An approximate step: each point's prox continues the local minimisers of the last full evaluation, however
        far x is from it (5-7x less CPU than the own starts for the general kernel).  Exact where no basin appears
        that no start reached there (for moves up to 3e-2 on every branch measured at L = 3, and for 1e-2 at r = 2
        all but a few points in 8192; benchmarks/continued_evaluations.py); for a solver's steering, never for a
        reported number.  A full step where there is no full evaluation yet."""
        if self._minima is None:
            return self.step(x)
        out = self._continue(np.asarray(x, dtype=float))
        return self.image(out, x), out

    def _continue(self, x: np.ndarray) -> ChannelOutput:
        """The channel output with every point's prox continuing the last full evaluation's minimisers."""
        out = update_hatoverlaps(self.setting, self.alpha, self.layout.unpack(x), self.points, self.branch,
                                 kernel=self.kernel, minima=self._minima)
        self.evaluations["continued"] += 1
        return out

    def _near_anchor(self, x: np.ndarray) -> bool:
        if self._anchor is None or self._anchor.shape != x.shape:
            return False
        move = np.abs(x - self._anchor) / self.move_scale(self._anchor)
        return bool(np.max(move, initial=0.0) <= CONTINUE_RADIUS)

    def move_scale(self, x: np.ndarray) -> np.ndarray:
        """Per-coordinate size in which CONTINUE_RADIUS is measured: the layout's scale, except that an entry of m
        or theta counts against at least the size its column can have in the fields, sqrt(q_aa) (m) and
        sqrt(q_aa rho_bb) (theta), as q's off-diagonal entries count against sqrt(q_aa q_bb).  A small entry (the
        positional column's theta at a mixed point, 1e-3 of that) moves every point's problem by its absolute
        change, not by its change relative to itself.  The general kernel's only: the two-token kernel keeps the radius
        in the layout's scale, where its exactness was measured, and the study's numbers as they were (with the
        wider measure its semantic verdicts within 0.05 of the branch's end, where the map is critically slow and
        grainy, came out otherwise: default precision, alpha 0.76 collapsed instead of ok)."""
        out = self.layout.scale(x)
        if not self.warmable:
            return out
        o = self.layout.unpack(x)
        qd = np.sqrt(np.maximum(np.diag(o.q), 0.0))
        sm, st = self.layout.block("m"), self.layout.block("theta")
        rho = np.sqrt(np.diag(self.setting.rho_matrix))
        if self.layout.lin is not None:
            # (a linear pattern's coordinate: against the sizes of the entries its matrix spans, weighted by them)
            for sl, f, size in ((sm, self.layout.lin[1], np.tile(qd, (self.setting.L, 1))),
                                (st, self.layout.lin[3], np.outer(qd, rho))):
                out[sl] = np.maximum(out[sl], [float(np.sum(np.abs(B) * size) / np.sum(np.abs(B))) for B in f])
            return out
        if sm.stop > sm.start:
            out[sm] = np.maximum(out[sm], np.tile(qd, self.layout.basis.shape[1]))
        if st.stop > st.start:
            out[st] = np.maximum(out[st], np.outer(qd, rho).reshape(-1))
        return out

    def image(self, out: ChannelOutput, x: np.ndarray | None = None) -> np.ndarray:
        """The packed overlaps the prior side gives for a channel output (the map's second half); in the rotation gauge
        where the map has one, each student direction's sign kept from the input x where given (see below)."""
        new = update_overlaps(self.setting, out.hats)
        if self.gauge:
            new = canonical_gauge(new, untied=self.setting.untied)
            if x is not None:
                # The canonical sign rule jumps where two entries of opposite sign nearly tie, and Anderson mixed the
                # two signs into a false collapse (rules table); flipping a direction is exact: the input's signs kept.
                new = align_signs(new, self.layout.unpack(x))
        return self.layout.pack(new)

    def reversed_directions(self, gx: np.ndarray, out: ChannelOutput) -> list[int]:
        """The student directions that the map itself (before the gauge) points the opposite way to its image gx in
        the gauge, for a channel output `out` at a point x with gx = image(out, x) ~ x: there the map sends x to its
        mirror image (G(x) = S x, S the flip of those directions, a symmetry), a 2-cycle of the iteration that the
        gauge's sign rule makes look fixed, not a fixed point of the equations (its energy is not the training loss:
        docs/numerics.md, "Mirror cycles").  Empty without the gauge (nothing is flipped there)."""
        if not self.gauge:
            return []
        raw = update_overlaps(self.setting, out.hats).as_untied(self.setting.untied)
        return [int(j) for j in np.flatnonzero(aligning_signs(raw, self.layout.unpack(gx)) < 0)]

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
        return self.image(out, x)

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
        """(name, size, scale) of the branch's order parameter (None: the branch has none); its collapse threshold
        is order_threshold(scale)."""
        name = ORDER_NAME.get(self.branch)
        if name is None:
            return None
        qmax = max(float(np.linalg.eigvalsh(o.q).max()), 0.0)
        scale = np.sqrt(qmax * self.setting.rho) if name == "theta" else np.sqrt(qmax)
        return name, summaries(o)[name], float(scale)

    def only_order_far(self, x: np.ndarray, r: np.ndarray, near: float, far: float) -> bool:
        """The residual r = G(x) - x (relative, layout scale) exceeds `far` in the branch's order parameter (m on the
        positional branch, theta on the semantic one) and is at most `near` in every other coordinate; False for a
        branch without one."""
        name = ORDER_NAME.get(self.branch)
        if name is None:
            return False
        rel = np.abs(r) / self.layout.scale(x)
        mask = np.zeros(x.size, dtype=bool)
        mask[self.layout.block(name)] = True
        return bool(np.max(rel[~mask], initial=0.0) <= near and np.max(rel[mask], initial=0.0) > far)

    def keeps_signs(self, x: np.ndarray, cand: np.ndarray) -> bool:
        """cand points every student direction's order parameter the way x does, whatever its size in cand
        (overlaps.aligning_signs): anderson's `keeps`.  Flipping a direction is a symmetry, so the map's own steps
        keep each sign (in the gauge the image takes the input's); Anderson's extrapolation across it reached the
        mirror point or the agnostic one (docs/numerics.md, "An extrapolation across a symmetry").  The semantic and
        positional branches only: on the mixed one it made `transition --rank 2`'s fast points valid below the
        birth, where default precision agrees with the unguarded ones (same section)."""
        if self.branch not in ORDER_NAME:
            return True
        return bool(np.all(aligning_signs(self.layout.unpack(cand), self.layout.unpack(x), any_size=True) > 0))

    def collapsed(self, x: np.ndarray) -> bool:
        """The branch's order parameter has decayed to ~0 (flowing to the agnostic point)."""
        order = self._order(self.layout.unpack(x))
        return order is not None and order[1] < order_threshold(order[2])

    def with_order(self, x: np.ndarray, level: float) -> np.ndarray | None:
        """x with the order parameter rescaled (same direction) to ``level`` times 1% of its scale (the collapse
        threshold without its floor, so that a student shrunk to zero is not given an order parameter its q cannot
        carry); None where it is zero or not finite, or the branch has none.  (Its summary is homogeneous of degree
        one.)"""
        o = self.layout.unpack(x)
        order = self._order(o)
        if order is None or not (np.isfinite(order[1]) and order[1] > 0):
            return None
        name, size, scale = order
        threshold = COLLAPSE * scale  # (in this order: the old threshold's rounding)
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

