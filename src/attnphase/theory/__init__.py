"""Asymptotic theory (d -> infinity) of the attention model, MODEL.md sections 3, 4 and 7."""

from attnphase.theory.baseline import LinearBaseline, linear_baseline
from attnphase.theory.results import BRANCHES, FixedPoint, HatOverlaps, Overlaps
from attnphase.theory.state_evolution import (
    PRECISIONS,
    Precision,
    global_minimum,
    solve,
    solve_all,
    solve_curve,
)
from attnphase.theory.transition import TransitionResult, find_crossing, phase_diagram, transition

__all__ = [
    "BRANCHES", "FixedPoint", "HatOverlaps", "LinearBaseline", "Overlaps", "PRECISIONS", "Precision",
    "TransitionResult", "find_crossing", "global_minimum", "linear_baseline", "phase_diagram", "solve",
    "solve_all", "solve_curve", "transition",
]
