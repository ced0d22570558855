"""The d -> infinity dynamics of online (one-pass) SGD on the overlaps (q, m, theta) (docs/dynamics.md).

  local       the per-sample loss in the fields: gradient and diagonal Hessian blocks (any L, r)
  drift       the ODE's right-hand side: Gaussian averages over student and teacher fields
  start       the typical random start at finite d, or explicit overlaps
  trajectory  integrate(...) -> Trajectory (scipy's solve_ivp), mechanisms
"""

from attnphase.theory.dynamics.drift import Drift, drift, integration_rule
from attnphase.theory.dynamics.start import random_start
from attnphase.theory.dynamics.trajectory import DynamicsStatus, Mechanism, Trajectory, classify, integrate

__all__ = ["Drift", "DynamicsStatus", "Mechanism", "Trajectory", "classify", "drift", "integrate",
           "integration_rule", "random_start"]
