"""The agnostic (symmetric) fixed point on mirrored integration points and the linearised map of a branch's order
parameter there: the pitchfork condition's ingredients (transition.linearised) and the solver's contraction
certificate (state_evolution.contraction).  Also the positional fixed point on eta-mirrored points, where theta = 0
is exactly invariant too: the mixed branch (rank >= 2) leaves the positional one where theta's block turns unstable.

At the agnostic point the order parameter of a branch (theta for semantic, m in the range of the positional Gram
matrix for positional) is exactly zero, and the map restricted to the order parameter's block is linear to first
order: theta_new = J theta.  J is taken by a likelihood-ratio identity (see :func:`order_jacobian`) on integration
points made exactly symmetric under the branch's Z2 (eta -> -eta for theta, xi -> -xi for m), where the agnostic
point is an exact fixed point; with the raw map (no rotation gauge), so it holds for the untied student and any
ranks.
"""

from __future__ import annotations

import numpy as np

from attnphase.setting import Setting
from attnphase.theory.model.channel import points_dim, pointwise_f
from attnphase.theory.model.overlaps import Branch, HatOverlaps, Overlaps, range_frame
from attnphase.theory.model.prior import ridge_matrix
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.prox import LocalMinima
from attnphase.theory.solvers.fixed_point import Inadmissible, Status, anderson
from attnphase.theory.state_evolution.branch_map import BranchMap
from attnphase.theory.state_evolution.starts import default_start, named_starts

LOG2_POINTS = 13  # points per scrambling before mirroring (2^14 in all)
SCRAMBLINGS = 3


def mirrored_points(setting: Setting, branch: str, replica: int, seed: int, log2_n: int = LOG2_POINTS) -> np.ndarray:
    """Sobol points plus their mirror images under the branch's Z2: eta -> -eta (semantic), xi -> -xi (positional)."""
    z = gaussian_sobol(log2_n, points_dim(setting), 1000 * seed + 500 + replica)
    L, r = setting.L, setting.field_rank
    mirror = np.array(z)
    rows = slice(L * r, None) if branch == "semantic" else slice(0, L * r)
    mirror[rows] *= -1.0
    return np.hstack([z, mirror])


AGNOSTIC_ACCEPT = 1e-3  # residual accepted where the agnostic iteration stalls (anderson's accept)


def agnostic_point(setting: Setting, alpha: float, points: np.ndarray, start: Overlaps | None = None,
                   tol: float = 1e-7) -> Overlaps:
    """The agnostic fixed point on these points (damped + Anderson from ``start`` where given, then from solve's start
    set for the agnostic branch, the default start first) to the relative residual tol, or, where the iteration stalls
    at the points' graininess, its best iterate with a residual of at most AGNOSTIC_ACCEPT (r = 2, omega 0.3, alpha
    0.597: Anderson stalls at 5.5e-4 on one scrambling, 200 or 400 iterations alike; the leading eigenvalue moves by
    ~1e-3 per 1e-3 of alpha there)."""
    return base_point(setting, alpha, "agnostic", points, start, tol)[0]


def positional_point(setting: Setting, alpha: float, points: np.ndarray, start: Overlaps | None = None,
                     tol: float = 1e-7) -> Overlaps:
    """The positional fixed point (theta = 0) on these points, as :func:`agnostic_point` (its iteration, tolerance and
    acceptance); Inadmissible where it collapses onto the agnostic point or is not found.  On eta-mirrored points
    (``mirrored_points(setting, "semantic", ...)``) theta = 0 is exactly invariant under the free map there, so
    ``order_jacobian(setting, alpha, "semantic", points, point)`` is its theta block: where the mixed branch
    (tied, r >= 2) leaves the positional one."""
    return base_point(setting, alpha, "positional", points, start, tol)[0]


def base_point(setting: Setting, alpha: float, base: str, points: np.ndarray, start: Overlaps | None = None,
               tol: float = 1e-7) -> tuple[Overlaps, LocalMinima | None]:
    """:func:`agnostic_point` (base "agnostic") or :func:`positional_point` (base "positional"), with the local
    minimisers of the iteration's last full evaluation (its points' prox from every start, within the map's
    continuation radius of the point: BranchMap.step), for :func:`order_jacobian`'s integrand at the point."""
    b = Branch(base)
    bm = BranchMap(setting, alpha, b, points)
    d0 = default_start(setting, b)
    tries = ([start] if start is not None else []) + [d0]  # (the default start: inside the map's domain, see there)
    if b == Branch.agnostic:
        # Then the rest of solve's start set for the agnostic branch (one fixed point: no choice among several): at
        # r* = 2, alpha 2 the default start leaves the domain, the scaled one reaches the point (q 0.1826; solve 0.1828).
        tries += [o for _, o in named_starts(setting, "agnostic", alpha)]
    message = ""
    for o in tries:
        sol = anderson(bm.step, bm.pack(o), tol=tol, max_iter=200, admissible=bm.admissible,
                       collapsed=bm.collapsed, diverged=bm.diverged, scale=bm.layout.scale,
                       accept=max(tol, AGNOSTIC_ACCEPT), approx=bm.approximate)
        if sol.status == Status.ok and not bm.reversed_directions(sol.x, sol.aux):
            return bm.unpack(sol.x), bm.minima
        message = sol.message if sol.status != Status.ok else "a mirror cycle, not a fixed point (docs/numerics.md)"
    raise Inadmissible(f"{b.value} point not found at alpha = {alpha:g}: {message}")


def order_jacobian(setting: Setting, alpha: float, branch: str, points: np.ndarray, sym: Overlaps,
                   minima: LocalMinima | None = None) -> np.ndarray:
    """J = d(order parameter's image) / d(order parameter) at the symmetric point ``sym``, exactly for the given
    points, by the likelihood-ratio (score-function) identity: the order parameter only shifts the Gaussian law
    of the fields, so d/dt E[F] = E[F d log p / dt] with the integrand F at t = 0.  A finite difference of the map
    would see its graininess instead (points switching basin: measured 0.82 against 1.00 at the study's pitchfork
    on 2^14 points).  At the symmetric point q, V and K move only to second order.

    semantic (coordinates: theta's entries, r x r*): h*_l | xi ~ N(A xi_l, rho) with A = theta^T q^{-1/2} and
    thetahat = alpha E[sum_l f_l eta_l^T] / sqrt(rho), so
        d thetahat_ij / d A_ab = alpha / rho (E[sum_l f_li eta_lj sum_k eta_ka xi_kb] - delta_ja E[sum_l f_li xi_lb]),
    and theta_new = sigma^2 K thetahat rho.  positional (coordinates: m = U c with U the Gram matrix's range basis,
    c: p x r): omega_l ~ N(m_l, q), so d mhat_li / d m_kb = alpha E[f_li (q^{-1/2} xi_k)_b], and m_new = G mhat K.

    minima: the local minimisers of an evaluation next to sym on these points (base_point's): each point's prox
    continued from them (channel.pointwise_f) instead of run from every start, at a seventh of the CPU; the same J
    to 1e-7 at the agnostic point, to the points' graininess (1e-3) where minima nearly tie (docs/numerics.md)."""
    r, rs = setting.field_rank, setting.r_star
    f, _, mats = pointwise_f(setting, sym, points, minima=minima)
    xi, eta, qis = mats["xi"], mats["eta"], mats["qis"]
    n = f.shape[0]
    K = np.linalg.inv(ridge_matrix(setting, _hats_at(setting, alpha, f, xi, mats)))
    if branch == "semantic":
        rho = setting.rho
        s_eta_xi = np.einsum("nka,nkb->nab", eta, xi)  # sum_k eta_ka xi_kb, (n, r*, r)
        term = np.einsum("nli,nlj,nab->ijab", f, eta, s_eta_xi) / n
        fx = np.einsum("nli,nlb->ib", f, xi) / n
        D = alpha / rho * (term - np.einsum("ja,ib->ijab", np.eye(rs), fx))
        # dA_ab / dtheta_cd = delta_ad (q^{-1/2})_cb;  theta_new = sigma^2 rho K thetahat
        J = setting.sigma**2 * rho * np.einsum("xi,ijdb,cb->xjcd", K, D, qis)
        return J.reshape(r * rs, r * rs)
    U = range_frame(setting.gram)
    p = U.shape[1]
    M = alpha * np.einsum("nli,nkj->likj", f, np.einsum("nka,ab->nkb", xi, qis)) / n  # d mhat_li / d m_kj
    # c_new = U^T G mhat K with m = U c:  J[(a, i'), (b, j)] = sum U_la' G_l'l M_likj U_kb K_ii'
    J = np.einsum("xa,xl,likj,kb,iy->aybj", U, setting.gram, M, U, K)
    return J.reshape(p * r, p * r)


def _hats_at(setting: Setting, alpha: float, f: np.ndarray, xi: np.ndarray, mats: dict) -> HatOverlaps:
    """Vhat at the symmetric point from the same integrand (Stein: -alpha E[sum_l f_l xi_l^T] q^{-1/2}), the other hat
    overlaps zero: all that K = (lambda I + sigma^2 Vhat)^{-1} needs."""
    r, rs, L = setting.field_rank, setting.r_star, setting.L
    Vhat = -alpha * np.einsum("nla,nlb->ab", f, xi) / f.shape[0] @ mats["qis"]
    return HatOverlaps(qhat=np.zeros((r, r)), mhat=np.zeros((L, r)), Vhat=0.5 * (Vhat + Vhat.T),
                       thetahat=np.zeros((r, rs)))
