"""A positional fixed point's stability along theta: the direction its branch holds at zero.

theta = 0 is invariant under the map at a positional point (eta -> -eta), so the map restricted to theta is linear
to first order there, theta_new = J theta, and J is the block the transition linearises where the mixed branch leaves
the positional one (symmetric.order_jacobian, base "positional").  Its leading eigenvalue above 1 means a branch with
theta != 0 has left this point at a pitchfork below alpha: the point is a saddle, not a state training stays in (L =
3 simplex, omega 0.6: training from the positional start stays at alpha 1, leaves for the semantic minimum from 2.5;
docs/numerics.md, "Stability along theta").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from attnphase.errors import InputError
from attnphase.notes import Note, NoteCode
from attnphase.setting import Setting, check_alpha
from attnphase.theory.model.overlaps import Overlaps
from attnphase.theory.state_evolution.order import undecided, welch_count, zero_within
from attnphase.theory.state_evolution.results import FixedPoint
from attnphase.theory.state_evolution.symmetric import SCRAMBLINGS, mirrored_points, order_jacobian

RESOLVE_SCRAMBLINGS = 16  # the most scramblings of J's points (as solve.RESOLVE_REPLICAS for an order parameter)


@dataclass(frozen=True)
class ThetaStability:
    """The leading eigenvalue (largest real part) of theta's block of the map at a positional point: its mean over
    independent scramblings of Sobol points mirrored in eta and xi, one standard error, and each scrambling's value.
    ``unstable``: above 1 by more than the Student-t bound of its scramblings' count (order.zero_within); where the
    point's own integration error is taken (with_point_error: point_error, point_scramblings), by the bound of both
    errors together, with Welch's count (order.welch_count)."""

    eigenvalue: float
    error: float
    per_scrambling: tuple[float, ...]
    point_error: float = 0.0  # what the point's own integration error puts on it (with_point_error; 0: not taken)
    point_scramblings: int = 0  # the scramblings that error is from

    @property
    def total_error(self) -> float:
        return float(np.hypot(self.error, self.point_error))

    @property
    def unstable(self) -> bool:
        """Above 1 by the Student-t bound of both errors together (J's scramblings', the point's: order.welch_count)."""
        k = welch_count([(self.error, len(self.per_scrambling)), (self.point_error, self.point_scramblings)])
        return bool(self.eigenvalue - zero_within(k) * self.total_error > 1.0)

    @property
    def resolved(self) -> bool:
        """Whether 3 errors and the Student-t bound of k scramblings say the same of the eigenvalue against 1."""
        return not undecided(abs(self.eigenvalue - 1.0), self.error, len(self.per_scrambling))


def _stability(ev: list[float]) -> ThetaStability:
    return ThetaStability(float(np.mean(ev)), float(np.std(ev, ddof=1) / np.sqrt(len(ev))), tuple(ev))


def theta_stability(setting: Setting, alpha: float, point: Overlaps | FixedPoint, seed: int = 0,
                    at_least: int = SCRAMBLINGS, known: ThetaStability | None = None) -> ThetaStability:
    """The leading eigenvalue of theta's block at a positional point of a tied student (J by the score identity at the
    point itself, symmetric.order_jacobian, on SCRAMBLINGS sets of 2^15 points: 2^13 mirrored in eta and in xi; more,
    up to RESOLVE_SCRAMBLINGS, where 3 errors and the Student-t bound of their count disagree on which side of 1 it
    lies: L = 3 simplex, omega 0.6, alpha 1.645, fast, seed 1: 1.034 +- 0.003 from 3, 1.007 +- 0.006 from 12); at
    least at_least.  Scrambling k's points are the same at every alpha (and every call), so ``known``, this point's
    earlier estimate, is extended rather than recomputed.  The untied student's block is not checked against training
    and is refused."""
    alpha = check_alpha(alpha)
    o = point.overlaps if isinstance(point, FixedPoint) else point
    if setting.untied:
        raise InputError("theta_stability is for a tied student (the untied student's is not checked)")
    if not isinstance(o, Overlaps) or not np.all(np.isfinite(o.m)) or np.any(o.theta != 0):
        raise InputError("theta_stability needs a positional point: finite m and theta = 0")
    ev = list(known.per_scrambling) if known is not None else []
    while len(ev) < max(SCRAMBLINGS, at_least) or (len(ev) < RESOLVE_SCRAMBLINGS and not _stability(ev).resolved):
        ev.append(_leading(setting, alpha, _mirrored_twice(setting, len(ev), seed), o))
    return _stability(ev)


def _leading(setting: Setting, alpha: float, points: np.ndarray, o: Overlaps) -> float:
    """The largest real part among the eigenvalues of theta's block at the positional point o, on these points."""
    return float(np.max(np.linalg.eigvals(order_jacobian(setting, alpha, "semantic", points, o)).real))


def with_point_error(setting: Setting, fp: FixedPoint, st: ThetaStability, seed: int = 0) -> ThetaStability:
    """st (the eigenvalue at fp's overlaps) with the error that fp's own integration error puts on it: the eigenvalue
    at each scrambling's fixed point of fp (its ``hints.replicas``), all on J's points of scrambling 0, whose spread
    is then the points' alone, over the square root of their count.  Near where the positional branch merges back
    into the agnostic point the eigenvalue moves by about 7 per unit of m, and that error is the larger (study, omega
    0.2, alpha 1.645, fast: 0.008 from J's scramblings, 0.04 from the point's; docs/numerics.md, "Stability along
    theta").  st unchanged where fp has fewer than two scramblings' fixed points (a precision with one replica, a
    point read back)."""
    reps = fp.hints.replicas
    if len(reps) < 2:
        return st
    pts = _mirrored_twice(setting, 0, seed)
    ev = [_leading(setting, fp.alpha, pts, o) for o in reps]
    return dataclasses.replace(st, point_error=float(np.std(ev, ddof=1) / np.sqrt(len(ev))), point_scramblings=len(ev))


def _mirrored_twice(setting: Setting, rep: int, seed: int) -> np.ndarray:
    """The eta-mirrored points (theta's parity) with their xi-mirror images too (m -> -m, an exact symmetry of the
    equations): the estimate is then the same at m and -m, which an iteration reaches alike (L = 3, omega 0.6, alpha
    1.645: 0.980 +- 0.022 at one sign and 0.978 +- 0.009 at the other on the eta-mirrored points alone; 0.979 +- 0.007
    at both on these)."""
    z = mirrored_points(setting, "semantic", rep, seed)
    flipped = np.array(z)
    flipped[: setting.L * setting.field_rank] *= -1.0
    return np.hstack([z, flipped])


def with_stability(setting: Setting, fp: FixedPoint, seed: int = 0) -> FixedPoint:
    """fp with the warning ``unstable_theta`` where it is a valid positional point of a tied student that theta_stability
    finds unstable (anything else is returned as it is)."""
    if fp.branch != "positional" or not fp.valid or setting.untied:
        return fp
    st = theta_stability(setting, fp.alpha, fp.overlaps, seed)
    if st.unstable:
        # (only where J's scramblings alone say so: the point's own error can only undo the verdict)
        st = with_point_error(setting, fp, st, seed)
    if not st.unstable:
        return fp
    msg = (f"unstable along theta: the leading eigenvalue of the map's theta block at this point is "
           f"{st.eigenvalue:.4g} +- {st.total_error:.2g} > 1, so a branch with theta != 0 has left the positional one "
           f"below alpha = {fp.alpha:g} (a pitchfork); where measured, training started next to such a point leaves "
           f"it (docs/numerics.md, \"Stability along theta\")")
    return dataclasses.replace(fp, warnings=fp.warnings + (Note(NoteCode.unstable_theta, msg),))
