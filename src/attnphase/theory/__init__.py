"""Asymptotic theory (d -> infinity) of the attention model for L tokens, student rank r, teacher rank r*.

Layout: overlaps (arrays, branches, flat packing), prior (closed form), channel (proximal map averaged over
integration points), prox (the proximal-map protocol and its kernels), fixed_point (generic Anderson solver),
state_evolution (solve, solve_curve, branch_map), baseline, observables, starts (solves from fallback starts),
branch_ends, transition (result record and dispatcher) with transition_study / transition_general (its two paths)
and transition_roots (alpha_c, alpha_l), diagram (transition over omega).
"""

from attnphase.theory.baseline import LinearBaseline, linear_baseline
from attnphase.theory.fixed_point import SolverResult, Status
from attnphase.theory.overlaps import Branch, HatOverlaps, Overlaps
from attnphase.theory.results import BRANCHES, FixedPoint
from attnphase.theory.state_evolution import (
    PRECISIONS,
    BranchMap,
    Precision,
    branch_map,
    default_start,
    global_minimum,
    integration_points,
    solve,
    solve_all,
    solve_curve,
)
from attnphase.theory.transition import TransitionResult, find_crossing, phase_diagram, transition

__all__ = [
    "BRANCHES", "Branch", "BranchMap", "FixedPoint", "HatOverlaps", "LinearBaseline", "Overlaps", "PRECISIONS",
    "Precision", "SolverResult", "Status", "TransitionResult", "branch_map", "default_start", "find_crossing",
    "global_minimum", "integration_points", "linear_baseline", "phase_diagram", "solve", "solve_all", "solve_curve",
    "transition",
]
