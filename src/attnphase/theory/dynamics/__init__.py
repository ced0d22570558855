"""The d -> infinity dynamics of online (one-pass) SGD on the overlaps (q, m, theta) (docs/dynamics.md).

  local       the per-sample loss in the fields: gradient and diagonal Hessian blocks (any L, r)
  drift       the ODE's right-hand side: Gaussian averages over student and teacher fields
  start       the typical random start at finite d, or explicit overlaps
  trajectory  integrate(...) -> Trajectory (scipy's solve_ivp), mechanisms
  linear      growth rates at the uninformed start, the crossing omega, linearised escape times
  stationary  direct minimisation of the population risk plus weight decay (the independent fixed points)
  diagram     dynamical_phase_diagram: the mechanism reached over omega and the init scale or lr
"""

from attnphase.theory.dynamics.diagram import DiagramCell, DynamicalDiagram, dynamical_phase_diagram
from attnphase.theory.dynamics.drift import Drift, drift, integration_rule
from attnphase.theory.dynamics.linear import (
    EscapeTimes,
    GrowthRates,
    agnostic_q,
    crossing_omega,
    escape_times,
    growth_rates,
)
from attnphase.theory.dynamics.start import random_start
from attnphase.theory.dynamics.stationary import Stationary, minimise
from attnphase.theory.dynamics.trajectory import DynamicsStatus, Mechanism, Trajectory, classify, integrate

__all__ = ["DiagramCell", "Drift", "DynamicalDiagram", "DynamicsStatus", "EscapeTimes", "GrowthRates", "Mechanism",
           "Stationary", "Trajectory", "agnostic_q", "classify", "crossing_omega", "drift", "dynamical_phase_diagram",
           "escape_times", "growth_rates", "integrate", "integration_rule", "minimise", "random_start"]
