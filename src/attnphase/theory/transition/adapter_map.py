"""The one place where the transition code touches the fixed-point engine's internals.

Everything the branch-end and crossing code needs from the engine goes through the names below:

- ``ORDER_PARAMETER[branch]``: the symmetry-breaking coordinate of a branch (theta for semantic, m for
  positional) and ``SPECTATORS``: the coordinates that stay free on the symmetric (agnostic) point.
- ``symmetric_points(log2_n, replica, seed, branch)``: integration points made exactly symmetric under the
  branch's Z2 (eta -> -eta for theta, xi -> -xi for m), so that the map is exactly odd in the order
  parameter and exactly even in the others; the symmetric point is then an exact fixed point.
- ``branch_map(setting, alpha, branch, points, y, t)``: the raw map on (spectators y, order parameter t),
  returning the spectators' images and the order parameter's image.
- ``train_loss_at(...)``: energy of a fixed point.

Re-pointing at a new engine means rewriting this file only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.setting import Setting
from attnphase.theory.model.channel import pointwise_f, update_hatoverlaps
from attnphase.theory.model.overlaps import Branch, Overlaps
from attnphase.theory.model.prior import train_loss, update_overlaps
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.solvers.fixed_point import Inadmissible

# Full coordinate vector of today's engine: (q, m, V, theta).
ORDER_PARAMETER = {"semantic": 3, "positional": 1}
SPECTATORS = (0, 2)  # q, V


def symmetric_points(log2_n: int, replica: int, seed: int, branch: str) -> np.ndarray:
    """Scrambled Sobol points (one scrambling per replica) plus their mirror images under the branch's Z2."""
    z = gaussian_sobol(log2_n, 4, 1000 * seed + replica)
    mirror = np.array(z)
    rows = (2, 3) if branch == "semantic" else (0, 1)
    mirror[list(rows)] *= -1.0
    out = np.hstack([z, mirror])
    out.setflags(write=False)
    return out


def full_vector(y: np.ndarray, t: float, branch: str) -> np.ndarray:
    x = np.zeros(4)
    x[list(SPECTATORS)] = y
    x[ORDER_PARAMETER[branch]] = t
    return x


@dataclass
class MapValue:
    gy: np.ndarray  # image of the spectators (q, V)
    gt: float  # image of the order parameter
    train_loss: float


def branch_map(setting: Setting, alpha: float, branch: str, points: np.ndarray, y: np.ndarray, t: float,
               energy: bool = False) -> MapValue:
    """One application of the fixed-point map at (y, t) on ``branch``.  Raises ValueError outside the admissible
    set (q <= 0, V <= 0, theta^2 >= q rho, lambda + sigma^2 Vhat <= 0)."""
    x = full_vector(np.asarray(y, float), float(t), branch)
    if x[0] <= 0 or x[2] <= 0:
        raise Inadmissible("overlaps left the admissible set: q or V <= 0")
    # The engine's own channel and prior sides (study geometry: m_1 = m, m_2 = -m; scalars are 1 x 1).
    o = Overlaps(q=x[0], m=x[1], V=x[2], theta=x[3])
    out = update_hatoverlaps(setting, alpha, o, points, Branch(branch))
    new = update_overlaps(setting, out.hats)
    gx = np.array([float(new.q[0, 0]), float(new.m[0, 0]), float(new.V[0, 0]), float(new.theta[0, 0])])
    loss = float("nan")
    if energy:
        loss = train_loss(setting, alpha, new, out.hats, out.moreau)
    return MapValue(gy=gx[list(SPECTATORS)], gt=float(gx[ORDER_PARAMETER[branch]]), train_loss=loss)


@dataclass
class SymmetricValue:
    gy: np.ndarray  # image of the spectators (q, V) at the symmetric point (order parameter 0)
    slope: float  # d G_t / d t at t = 0, for the branch's order parameter t


def symmetric_map(setting: Setting, alpha: float, branch: str, points: np.ndarray, y: np.ndarray) -> SymmetricValue:
    """The map at the symmetric (agnostic) point (t = 0) and the exact derivative of the order parameter's image
    with respect to the order parameter there.

    The derivative is taken by the likelihood-ratio (score-function) identity: t only shifts the Gaussian law of
    the fields (the teacher fields' mean for theta, the student fields' mean for m), so
    d/dt E[F] = E[F * d log p / dt] with F evaluated at t = 0.  Unlike a finite difference of the map, this needs
    no step and does not see the map's graininess (points switching basin), and it is unbiased for every
    scrambling."""

    q, V = (float(v) for v in y)
    if q <= 0 or V <= 0:
        raise Inadmissible("overlaps left the admissible set: q or V <= 0")
    z = points
    sigma2, rho = setting.sigma**2, setting.rho
    sq = np.sqrt(q)
    # The engine's own integrand at theta = m = 0, where the teacher fields are independent of the student's:
    # h*_l = sqrt(rho) eta_l.
    c = float(np.sqrt(rho))
    f, _, _ = pointwise_f(setting, Overlaps(q=q, m=0.0, V=V, theta=0.0), z)
    f1, f2 = f[:, 0, 0], f[:, 1, 0]
    qhat = alpha * float(np.mean(f1 * f1 + f2 * f2))
    Vhat = -alpha * float(np.mean(f1 * z[0] + f2 * z[1])) / sq
    denom = setting.lam + sigma2 * Vhat
    if not denom > 0:
        raise Inadmissible(f"lambda + sigma^2 Vhat = {denom:.3g} <= 0: the iteration left the admissible set")
    K = 1.0 / denom
    # Prior side at the symmetric point (mhat = thetahat = 0): V = sigma^2 K, q = sigma^4 K^2 qhat.
    new_q, new_V = sigma2 * K * K * sigma2 * qhat, sigma2 * K
    if branch == "semantic":
        # thetahat = alpha E[sum_l f_l (h*_l - theta xi_l / sqrt q)] / c^2 with h*_l | xi ~ N(theta xi_l / sqrt q, c^2)
        # (dc/dtheta = 0 at theta = 0): the explicit theta in the integrand, and the score
        # sum_k eta_k xi_k / (sqrt(q) c) of the law times the integrand c sum_l f_l eta_l.
        fe = f1 * z[2] + f2 * z[3]
        d_hat = alpha * (-float(np.mean(f1 * z[0] + f2 * z[1]))
                         + float(np.mean(fe * (z[2] * z[0] + z[3] * z[1])))) / (sq * c * c)
        slope = sigma2 * rho * K * d_hat
    else:
        # mhat = alpha E[f_1 - f_2] with omega_l ~ N(+-m, q): score (xi_1 - xi_2) / sqrt(q).
        d_hat = alpha * float(np.mean((f1 - f2) * (z[0] - z[1]))) / sq
        slope = K * d_hat
    return SymmetricValue(gy=np.array([new_q, new_V]), slope=float(slope))
