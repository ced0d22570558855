"""Online (one-pass) SGD at finite d: the simulations the d -> infinity dynamics (attnphase.theory.dynamics) is
held against.  ``run_online`` runs seeds from random starts and records q, m, theta and the errors;
``compare.compare_with_ode`` holds them against the ODE, ``diagram.dynamical_diagram`` maps the mechanism reached.

PyTorch is imported only when a run starts (the light install can still import this package).
"""

from attnphase.experiments.online.result import OnlineResult, summaries
from attnphase.experiments.online.run import run_online, time_grid

__all__ = ["OnlineResult", "run_online", "summaries", "time_grid"]
