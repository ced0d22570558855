"""Asymptotic theory (d -> infinity) of the attention model for L tokens, student rank r, teacher rank r*.

The public API.  Where each idea lives:
  model/            the physics, once: overlaps (arrays, branches, flat layout), prior (update_overlaps, closed form),
                    channel (update_hatoverlaps: Gaussian integrals of the proximal map), loss and attention,
                    observables (test error), baseline (the linear positional baseline), quadrature
  prox/             every proximal kernel behind one protocol: two_token (L = 2, r = 1), general, reference
  solvers/          no physics: fixed_point (anderson, chord, jacobian -> SolverResult, Status), continuation
  state_evolution/  precision, branch_map (the map of one branch), starts, solve, curves, landscape, results,
                    stability (a positional point's stability along theta)
  transition/       records (Critical, TransitionResult), driver (transition), ends (branch ends), roots, diagram
"""

from attnphase.theory.model.baseline import LinearBaseline, linear_baseline
from attnphase.theory.model.overlaps import Branch, HatOverlaps, Overlaps
from attnphase.theory.solvers.fixed_point import SolverResult, Status
from attnphase.theory.state_evolution.branch_map import BranchMap, branch_map
from attnphase.theory.state_evolution.curves import solve_curve, solve_curves
from attnphase.theory.state_evolution.precision import PRECISIONS, Precision, integration_points
from attnphase.theory.state_evolution.results import (
    BRANCHES,
    FixedPoint,
    StartRecord,
    branches_for,
    global_minimum,
    global_minimum_curve,
)
from attnphase.theory.state_evolution.solve import solve, solve_all, solve_screened
from attnphase.theory.state_evolution.stability import ThetaStability, theta_stability
from attnphase.theory.state_evolution.starts import default_start
from attnphase.theory.transition.diagram import phase_diagram
from attnphase.theory.transition.driver import transition
from attnphase.theory.transition.records import Critical, TransitionResult
from attnphase.theory.transition.roots import find_crossing

__all__ = [
    "BRANCHES", "Branch", "BranchMap", "Critical", "FixedPoint", "HatOverlaps", "LinearBaseline", "Overlaps",
    "PRECISIONS", "Precision", "SolverResult", "StartRecord", "Status", "ThetaStability", "TransitionResult", "branch_map",
    "branches_for", "default_start",
    "find_crossing", "global_minimum", "global_minimum_curve", "integration_points", "linear_baseline",
    "phase_diagram", "solve", "solve_all", "solve_screened", "solve_curve", "solve_curves", "theta_stability",
    "transition",
]
