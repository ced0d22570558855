"""Prior side: hat overlaps -> overlaps for the ridge penalty and Gaussian tokens (MODEL.md section 3)."""

from __future__ import annotations

from attnphase.theory.results import HatOverlaps, Overlaps


def prior(h: HatOverlaps, sigma2: float, lam: float, rho: float) -> Overlaps:
    denom = lam + sigma2 * h.Vhat
    if not denom > 0:
        raise ValueError(f"lambda + sigma^2 Vhat = {denom:.3g} <= 0: the iteration left the admissible set")
    K = 1.0 / denom
    V = sigma2 * K
    q = sigma2 * K * K * (sigma2 * h.qhat + h.mhat**2 + sigma2 * rho * h.thetahat**2)
    m = K * h.mhat
    theta = sigma2 * rho * K * h.thetahat
    return Overlaps(q=q, m=m, V=V, theta=theta)


def prior_energy(o: Overlaps, h: HatOverlaps, sigma2: float, lam: float, rho: float) -> float:
    """The alpha-independent part of Phi (everything but -alpha E[Moreau envelope])."""
    K = 1.0 / (lam + sigma2 * h.Vhat)
    return (0.5 * (h.Vhat * o.q - h.qhat * o.V) - o.m * h.mhat - o.theta * h.thetahat
            + 0.5 * K * (sigma2 * h.qhat + h.mhat**2 + sigma2 * rho * h.thetahat**2))
