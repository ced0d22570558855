"""Critical sample complexities of one setting: branch ends, alpha_c, alpha_l (docs/model.md).

- The semantic branch's end (where it appears) and the positional branch's end (where it vanishes, if it does
  in range) are located as what they are, pitchfork or fold (:mod:`attnphase.theory.branch_ends`); no fixed
  point of a branch is solved where that branch does not exist.
- alpha_c: train_loss(semantic) = train_loss(positional); alpha_l: the smallest alpha above which the test
  error of the global minimum stays below the linear baseline's.  Both are roots of differences of fixed-point
  quantities (:func:`attnphase.theory.curves.crossing`-style records).
Every value is a :class:`~attnphase.theory.curves.Critical` record: value, interval, kind, method, reason.

Small omega: the two training losses cross at a shallow angle there, so a small bias in the losses moves alpha_c
a lot.  The study's published table (computed with a 12-point cubature, about 1% bias in the loss) gives
alpha_c(0) = 0.548; this package finds 0.616 (interval [0.601, 0.632] at precision fast), about 10% higher,
while its semantic branch end (a supercritical pitchfork at alpha = 0.513) agrees with an independent
high-precision solve.  Do not compare with the published alpha_c at small omega.

This module holds the result record, the option checks and transition(), which dispatches to one of two paths:
:mod:`attnphase.theory.transition_study` (the study's geometry: ends from the L = 2 adapter) and
:mod:`attnphase.theory.transition_general` (any setting: ends from the solver's validity).  Both find alpha_c and
alpha_l with :mod:`attnphase.theory.transition_roots`; the phase diagram over omega is
:mod:`attnphase.theory.diagram`.  Their public names are re-exported here, where they were defined before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnphase.setting import Setting, check_alpha, check_int, check_number
from attnphase.theory.baseline import linear_baseline
from attnphase.theory.branch_ends import positional_slope
from attnphase.theory.curves import Critical, global_minimum_curve
from attnphase.theory.results import FixedPoint
from attnphase.theory.state_evolution import get_precision
from attnphase.theory.transition_roots import find_crossing

NAMES = ("alpha_c", "alpha_l", "alpha_sem_appears", "alpha_pos_vanishes")


@dataclass
class TransitionResult:
    """The critical values of one setting (records in ``critical``, keyed by NAMES plus the pitchforks
    ``semantic_pitchfork`` and ``positional_pitchfork``), the branch curves solved on the way, and the
    unstable parts of the branches (rows alpha, q, V, m, theta) for dashed curves."""

    omega: float
    critical: dict[str, Critical]
    test_error_linear: float
    alpha_range: tuple[float, float]
    curves: dict[str, list[FixedPoint]] = field(default_factory=dict)
    unstable: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    solves: int = 0  # fixed points solved (each: all scramblings)
    map_evaluations: int = 0  # evaluations of the map spent on the branch ends
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # this process's CPU time: comparable across loads of a shared machine

    # The flat attributes of the first version (figures and the report read these).
    def _value(self, name: str) -> float | None:
        return self.critical[name].value

    def _interval(self, name: str) -> tuple[float, float] | None:
        return self.critical[name].interval

    alpha_c = property(lambda self: self._value("alpha_c"))
    alpha_l = property(lambda self: self._value("alpha_l"))
    alpha_sem_appears = property(lambda self: self._value("alpha_sem_appears"))
    alpha_pos_vanishes = property(lambda self: self._value("alpha_pos_vanishes"))
    alpha_c_bracket = property(lambda self: self._interval("alpha_c"))
    alpha_l_bracket = property(lambda self: self._interval("alpha_l"))
    alpha_sem_appears_bracket = property(lambda self: self._interval("alpha_sem_appears"))
    alpha_pos_vanishes_bracket = property(lambda self: self._interval("alpha_pos_vanishes"))

    @property
    def reasons(self) -> dict[str, str]:
        return {k: c.reason for k, c in self.critical.items() if k in NAMES and c.reason}

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"omega": self.omega}
        for name in NAMES:
            d.update(self.critical[name].to_dict(name))
        d["test_error_linear"] = self.test_error_linear
        d["note"] = "; ".join(f"{k}: {v}" for k, v in self.reasons.items())
        return d


def check_transition_args(alpha_min: Any, alpha_max: Any, n_grid: Any, precision: Any, xtol: Any,
                          seed: Any) -> tuple[float, float, int, float, int]:
    """Validate transition()'s options (before any work)."""
    alpha_min, alpha_max = check_alpha(alpha_min), check_alpha(alpha_max)
    if alpha_max <= alpha_min:
        raise ValueError(f"alpha range is empty: alpha_max ({alpha_max:g}) must exceed alpha_min ({alpha_min:g})")
    n_grid = check_int("n_grid", n_grid, minimum=3)
    get_precision(precision)
    xtol = check_number("xtol", xtol)
    if xtol <= 0:
        raise ValueError(f"xtol must be > 0, got {xtol:g}")
    if xtol >= alpha_max - alpha_min:
        raise ValueError(f"xtol ({xtol:g}) must be smaller than the alpha range ({alpha_max - alpha_min:g})")
    seed = check_int("seed", seed, minimum=0)
    return alpha_min, alpha_max, n_grid, xtol, seed


def transition(setting: Setting, alpha_min: float = 0.05, alpha_max: float = 2.0, n_grid: int = 12,
               precision: str = "fast", xtol: float = 0.01, seed: int = 0, z: float = 3.0,
               ends: str = "auto", workers: int = 1) -> TransitionResult:
    """alpha_c, alpha_l and the branch ends of one setting, searched in [alpha_min, alpha_max].

    ends: "adapter" locates the branch ends as properties of the equations (pitchfork / fold, the L = 2,
    r = r* = 1, antipodal adapter); "solves" locates them where the solver stops finding each branch (any
    setting; kind "unknown"); "auto": the adapter where it applies.  workers > 1 (adapter path): the positional
    branch's end and its fixed points are computed in a second process while this one does the semantic branch's
    (same numbers; it pays only where the proximal kernel's own threads leave cores idle, e.g. many cores, or
    NUMBA_NUM_THREADS=1).

    The branch ends come first (they say where each branch exists).  Both branches are then solved on an n_grid
    alpha grid where they exist (the semantic one from its continuation path's overlaps as the start), and the
    crossings refined by regula falsi to xtol.  Intervals: z standard errors (spread over scramblings) of the
    difference, divided by its slope, plus the tolerance; for the ends see branch_ends."""
    if not isinstance(setting, Setting):
        raise TypeError("setting must be an attnphase.Setting")
    alpha_min, alpha_max, n_grid, xtol, seed = check_transition_args(alpha_min, alpha_max, n_grid, precision,
                                                                     xtol, seed)
    if ends not in ("auto", "adapter", "solves"):
        raise ValueError(f"ends must be 'auto', 'adapter' or 'solves', got {ends!r}")
    from attnphase.parallel import check_workers, pool

    # The two paths build this module's TransitionResult: imported here, not at the top (a cycle).
    from attnphase.theory.transition_general import transition_general
    from attnphase.theory.transition_study import transition_study

    check_workers(workers)
    if setting.untied:
        # The branch-end adapter is the tied student's, and the general path has not been validated for the
        # untied one (solve() and compare() handle it): refuse rather than return unchecked critical values.
        raise ValueError("transition implements the tied student only; got student='untied' "
                         "(use solve / attnphase theory --student untied for its fixed points)")
    if ends == "adapter":
        setting.require_study_geometry()
    general = ends == "solves" or (ends == "auto" and not setting.is_study_geometry)
    t0, c0 = time.perf_counter(), time.process_time()
    te_lin = float(linear_baseline(setting).test_error_linear)
    grid = [float(a) for a in np.linspace(alpha_min, alpha_max, n_grid)]
    if general:
        return transition_general(setting, grid, precision, xtol, seed, z, te_lin, t0, c0)
    if workers > 1:
        with pool(1) as ex:
            return transition_study(setting, alpha_min, alpha_max, n_grid, precision, xtol, seed, z, te_lin, t0,
                                    c0, ex)
    return transition_study(setting, alpha_min, alpha_max, n_grid, precision, xtol, seed, z, te_lin, t0, c0, None)


def global_minimum_curve_of(result: TransitionResult) -> list[FixedPoint]:
    """The global minimum along the transition's own curves."""
    return global_minimum_curve(result.curves)


# Defined on top of transition() (they import it): imported last, once it exists.
from attnphase.theory.diagram import phase_diagram, positional_limit  # noqa: E402

__all__ = ["NAMES", "TransitionResult", "check_transition_args", "find_crossing", "global_minimum_curve_of",
           "phase_diagram", "positional_limit", "positional_slope", "transition"]
