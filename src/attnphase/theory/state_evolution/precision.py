"""Precision presets: Sobol points per scrambling, scramblings, tolerances; the integration points of a scrambling."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.errors import InputError
from attnphase.setting import Setting
from attnphase.theory.model.channel import points_dim
from attnphase.theory.model.quadrature import gaussian_sobol


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
    # The positional collapse certificate at L > 2 (state_evolution/contraction.py).  Off, the plain iteration takes
    # 2.5-5.5x more map evaluations to the same collapse, or runs out of iterations on the way (L = 3 simplex, fast:
    # benchmarks/certificate.py); off is the reference the certificate is tested against.
    certificate: bool = True


PRECISIONS = {
    "fast": Precision("fast", 13, 4, 3e-4, max_iter=80, accept=3e-3),
    "default": Precision("default", 15, 6, 3e-5, max_iter=100, accept=1e-3, target=1e-3, max_replicas=12,
                         coarse_log2=12),
    "high": Precision("high", 19, 8, 1e-5, max_iter=100, accept=3e-4, target=1e-4, max_replicas=32, coarse_log2=15),
}

def get_precision(precision: str | Precision) -> Precision:
    if isinstance(precision, Precision):
        return precision
    try:
        return PRECISIONS[precision]
    except KeyError:
        raise InputError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}") from None



def integration_points(setting: Setting, precision: str | Precision = "default", replica: int = 0,
                       seed: int = 0) -> np.ndarray:
    """The Sobol points solve() uses for one scrambling, shape (L (r + r*), 2^log2_points)."""
    prec = get_precision(precision)
    return gaussian_sobol(prec.log2_points, points_dim(setting), 1000 * seed + replica)

