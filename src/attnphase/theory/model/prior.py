"""Prior side: hat overlaps -> overlaps, closed form for the ridge penalty (attnphase.problem.regulariser) and
Gaussian tokens.

With K = (lambda I_r + sigma^2 Vhat)^{-1} (r x r), rho = sigma^2 I_{r*} and G the positional Gram matrix:
    V = sigma^2 K,   theta = sigma^2 K thetahat rho,   m = G mhat K,
    q = sigma^2 K (sigma^2 qhat + sigma^2 thetahat rho thetahat^T + mhat^T G mhat) K.
These are the stationarity conditions of the prior part of the free energy (:func:`prior_energy`) with respect to
the hat overlaps; docs/equations.md derives them.
"""

from __future__ import annotations

import numpy as np

from attnphase.setting import Setting
from attnphase.theory.model.overlaps import HatOverlaps, Overlaps
from attnphase.theory.solvers.fixed_point import Inadmissible


def ridge_matrix(setting: Setting, h: HatOverlaps) -> np.ndarray:
    """lambda I + sigma^2 Vhat (symmetrised): K^{-1}."""
    return setting.lam * np.eye(h.Vhat.shape[0]) + setting.sigma**2 * 0.5 * (h.Vhat + h.Vhat.T)


def _K(setting: Setting, h: HatOverlaps) -> np.ndarray:
    M = ridge_matrix(setting, h)
    if M.shape == (1, 1):
        if not M[0, 0] > 0:
            raise Inadmissible(f"lambda + sigma^2 Vhat = {M[0, 0]:.3g} <= 0: the iteration left the admissible set")
        return 1.0 / M
    ev = np.linalg.eigvalsh(M)
    if not ev.min() > 0:
        raise Inadmissible(f"lambda I + sigma^2 Vhat has eigenvalue {ev.min():.3g} <= 0: the iteration left the "
                           "admissible set")
    return np.linalg.inv(M)


def _source(setting: Setting, h: HatOverlaps) -> np.ndarray:
    """sigma^2 qhat + sigma^2 thetahat rho thetahat^T + mhat^T G mhat (r x r)."""
    s2 = setting.sigma**2
    return (s2 * h.qhat + s2 * h.thetahat @ setting.rho_matrix @ h.thetahat.T + h.mhat.T @ setting.gram @ h.mhat)


def update_overlaps(setting: Setting, hats: HatOverlaps) -> Overlaps:
    """The prior side's closed form (see the module docstring)."""
    s2 = setting.sigma**2
    K = _K(setting, hats)
    q = s2 * K @ _source(setting, hats) @ K
    return Overlaps(q=0.5 * (q + q.T), m=setting.gram @ hats.mhat @ K, V=s2 * K,
                    theta=s2 * K @ hats.thetahat @ setting.rho_matrix)


def thetahat_for(setting: Setting, hats: HatOverlaps, theta: np.ndarray) -> np.ndarray:
    """The thetahat for which the closed form gives this theta (the Lagrange multiplier of a constraint on theta):
    theta = sigma^2 K thetahat rho  <=>  thetahat = K^{-1} theta rho^{-1} / sigma^2."""
    return ridge_matrix(setting, hats) @ theta @ np.linalg.inv(setting.rho_matrix) / setting.sigma**2


def prior_energy(setting: Setting, o: Overlaps, h: HatOverlaps) -> float:
    """The alpha-independent part of the free energy Phi (everything but -alpha E[Moreau envelope]):
    (1/2) tr(Vhat q - qhat V) - tr(m^T mhat) - tr(theta^T thetahat) + (1/2) tr[K (source)]."""
    K = _K(setting, h)
    return float(0.5 * np.trace(h.Vhat @ o.q - h.qhat @ o.V) - np.sum(o.m * h.mhat) - np.sum(o.theta * h.thetahat)
                 + 0.5 * np.trace(K @ _source(setting, h)))


def train_loss(setting: Setting, alpha: float, o: Overlaps, h: HatOverlaps, moreau: float) -> float:
    """The training loss (energy per dimension) at a fixed point: -Phi = -(prior_energy - alpha E[Moreau envelope]),
    with ``moreau`` the channel's E[min_h ...] (channel.update_hatoverlaps returns it)."""
    return -(prior_energy(setting, o, h) - alpha * moreau)


def loss_terms(setting: Setting, alpha: float, o: Overlaps, h: HatOverlaps, moreau: float) -> float:
    """The training loss as its two terms, data + ridge: alpha E[loss at the prox] = alpha E[Moreau] - tr(V qhat) / 2
    (qhat = alpha E[f f^T], f = V^-1 (h - omega)) plus lambda tr q / (2 sigma^2).  Equal to train_loss at a fixed
    point of the equations, not elsewhere: an independent check of a reported point (docs/numerics.md, "Mirror
    cycles")."""
    return float(alpha * moreau - 0.5 * np.trace(o.V @ h.qhat) + setting.lam * np.trace(o.q) / (2 * setting.sigma**2))
