"""Where the agnostic point turns unstable towards a branch, for any setting: the pitchfork condition in general.

At the symmetric (agnostic) fixed point the order parameter of a branch (theta for semantic, m in the range of the
positional Gram matrix for positional) is exactly zero, and the map restricted to the order parameter's block is
linear to first order: theta_new = J theta.  A branch bifurcates from the agnostic point where the largest
eigenvalue of J crosses 1; for L = 2, r = r* = 1 this is the study's condition d theta_new / d theta = 1
(:mod:`attnphase.theory.transition.adapter_map`).

J is taken by a likelihood-ratio identity (see :func:`order_jacobian`) on integration points made exactly symmetric
under the branch's Z2 (eta -> -eta for theta, xi -> -xi for m), where the agnostic point is an exact fixed point;
with the raw map (no rotation gauge), so it holds for the untied student and any ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from attnphase.setting import Setting
from attnphase.theory.model.channel import points_dim, pointwise_f
from attnphase.theory.model.overlaps import Branch, HatOverlaps, Layout, Overlaps
from attnphase.theory.model.prior import ridge_matrix
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.solvers.fixed_point import Inadmissible, Status, anderson
from attnphase.theory.state_evolution.branch_map import BranchMap
from attnphase.theory.state_evolution.starts import default_start
from attnphase.theory.transition.records import Critical, spread_halfwidth

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


def agnostic_point(setting: Setting, alpha: float, points: np.ndarray, start: Overlaps | None = None) -> Overlaps:
    """The agnostic fixed point on these points (damped + Anderson from the default start or ``start``)."""
    bm = BranchMap(setting, alpha, Branch.agnostic, points)
    d0 = default_start(setting, Branch.agnostic)
    # From the given start, the default one, and the default with V doubled (|Vhat| falls with V: at large alpha
    # the default V can leave lambda + sigma^2 Vhat <= 0 at the first step, as in solve()).
    tries = ([start] if start is not None else []) + [d0, Overlaps(q=d0.q, m=d0.m, V=2.0 * d0.V, theta=d0.theta)]
    message = ""
    for o in tries:
        sol = anderson(bm.step, bm.pack(o), tol=1e-7, max_iter=200, admissible=bm.admissible,
                       diverged=bm.diverged, scale=bm.layout.scale)
        if sol.status == Status.ok:
            return bm.unpack(sol.x)
        message = sol.message
    raise Inadmissible(f"agnostic point not found at alpha = {alpha:g}: {message}")


def order_jacobian(setting: Setting, alpha: float, branch: str, points: np.ndarray, sym: Overlaps) -> np.ndarray:
    """J = d(order parameter's image) / d(order parameter) at the symmetric point ``sym``, exactly for the given
    points, by the likelihood-ratio (score-function) identity: the order parameter only shifts the Gaussian law
    of the fields, so d/dt E[F] = E[F d log p / dt] with the integrand F at t = 0.  A finite difference of the map
    would see its graininess instead (points switching basin: measured 0.82 against 1.00 at the study's pitchfork
    on 2^14 points).  At the symmetric point q, V and K move only to second order.

    semantic (coordinates: theta's entries, r x r*): h*_l | xi ~ N(A xi_l, rho) with A = theta^T q^{-1/2} and
    thetahat = alpha E[sum_l f_l eta_l^T] / sqrt(rho), so
        d thetahat_ij / d A_ab = alpha / rho (E[sum_l f_li eta_lj sum_k eta_ka xi_kb] - delta_ja E[sum_l f_li xi_lb]),
    and theta_new = sigma^2 K thetahat rho.  positional (coordinates: m = U c with U the Gram matrix's range basis,
    c: p x r): omega_l ~ N(m_l, q), so d mhat_li / d m_kb = alpha E[f_li (q^{-1/2} xi_k)_b], and m_new = G mhat K."""
    r, rs = setting.field_rank, setting.r_star
    f, _, mats = pointwise_f(setting, sym, points)
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
    U = np.linalg.qr(Layout.for_setting(setting, Branch.positional).basis)[0]  # range(G), orthonormal (L, p)
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


def leading_eigenvalue(setting: Setting, alpha: float, branch: str, points: np.ndarray,
                       start: Overlaps | None = None) -> tuple[float, Overlaps]:
    """The largest real part among J's eigenvalues at alpha, and the agnostic point it was taken at."""
    sym = agnostic_point(setting, alpha, points, start)
    return float(np.max(np.linalg.eigvals(order_jacobian(setting, alpha, branch, points, sym)).real)), sym


@dataclass(frozen=True)
class Instability:
    """The alpha at which the agnostic point turns unstable towards a branch: a record, plus per scrambling."""

    critical: Critical
    per_scrambling: tuple[float, ...]
    evaluations: int


def instability(setting: Setting, branch: str, grid: list[float], seed: int = 0, xtol: float = 1e-3,
                name: str | None = None) -> Instability:
    """The pitchfork condition (leading eigenvalue of J = 1) on the alpha grid, per scrambling: the first scrambling
    scans the grid upward to the first sign change and refines it by brentq; the others are bracketed near its
    root (they differ by the integration error).  value: the mean, interval: a 99% Student-t half-width of the
    spread plus xtol; 'not in range' where the eigenvalue does not cross 1 on the grid."""
    name = name or f"{branch}_pitchfork"
    method = (f"leading eigenvalue of the order parameter's block of the linearised map at the agnostic point = 1 "
              f"(likelihood-ratio identity, mirrored Sobol points, {SCRAMBLINGS} x 2^{LOG2_POINTS + 1}), brentq to "
              f"{xtol:g}")
    grid = sorted(grid)
    lo, hi = grid[0], grid[-1]
    roots: list[float] = []
    n_eval = 0
    warm: dict[str, Overlaps] = {}
    for rep in range(SCRAMBLINGS):
        pts = mirrored_points(setting, branch, rep, seed)

        def f(a: float, pts=pts) -> float:
            nonlocal n_eval
            lam, sym = leading_eigenvalue(setting, a, branch, pts, warm.get("sym"))
            warm["sym"] = sym
            n_eval += 1
            return lam - 1.0

        try:
            if not roots:
                a0, f0 = grid[0], f(grid[0])
                a1, f1 = a0, f0
                for a in grid[1:]:
                    a1, f1 = a, f(a)
                    if f0 * f1 <= 0:
                        break
                    a0, f0 = a1, f1
            else:
                w = 4 * xtol + 0.01
                a0, a1 = max(lo, roots[0] - w), min(hi, roots[0] + w)
                f0, f1 = f(a0), f(a1)
                while f0 * f1 > 0 and (a0 > lo or a1 < hi):
                    a0, a1 = max(lo, a0 - (a1 - a0)), min(hi, a1 + (a1 - a0))
                    f0, f1 = f(a0), f(a1)
        except Inadmissible as exc:
            return Instability(Critical.missing(name, "failed", str(exc), method), tuple(roots), n_eval)
        if f0 * f1 > 0:
            return Instability(Critical.missing(name, "not in range", f"the leading eigenvalue stays "
                                                f"{'below' if f1 < 0 else 'above'} 1 on [{lo:g}, {hi:g}] (scrambling "
                                                f"{rep})", method), tuple(roots), n_eval)
        try:
            roots.append(float(brentq(f, a0, a1, xtol=xtol)))
        except (ValueError, Inadmissible) as exc:
            return Instability(Critical.missing(name, "failed", f"root finding failed: {exc}", method),
                               tuple(roots), n_eval)
    v = float(np.mean(roots))
    half = spread_halfwidth(roots) + xtol
    return Instability(Critical(name, v, v - half, v + half, "pitchfork", method), tuple(roots), n_eval)


def theta_points(points: list) -> list[tuple[float, float, float]]:
    """(alpha, theta, its standard error) of the valid fixed points among points: order_squared_intercept's input."""
    return [(p.alpha, p.summary()["theta"], p.errors.get("theta", float("nan"))) for p in points if p.valid]


def order_squared_intercept(points: list[tuple[float, float, float]], above: float) -> tuple[float, float] | None:
    """Where the squared order parameter, extrapolated linearly in alpha from the two lowest valid points above
    ``above``, reaches zero, and that intercept's standard error (from the points' standard errors).  points:
    (alpha, order parameter, its standard error).  None with fewer than two such points or no positive slope.
    A supercritical pitchfork has order^2 ~ (alpha - alpha_p) next to alpha_p; a subcritical branch keeps a
    finite order parameter there, so its intercept lies well below the pitchfork."""
    pts = sorted(p for p in points if p[0] > above and np.isfinite(p[1]) and p[1] > 0)[:2]
    if len(pts) < 2:
        return None
    (a1, t1, e1), (a2, t2, e2) = pts
    y1, y2 = t1 * t1, t2 * t2
    slope = (y2 - y1) / (a2 - a1)
    if not slope > 0:
        return None
    x0 = a1 - y1 / slope
    # d x0 / d y1 = -(a2 - x0) / (y2 - y1), d x0 / d y2 = (a1 - x0) / (y2 - y1); s.e. of y = 2 t s.e. of t
    g1, g2 = -(a2 - x0) / (y2 - y1), (a1 - x0) / (y2 - y1)
    err = float(np.hypot(g1 * 2 * t1 * (e1 if np.isfinite(e1) else 0.0), g2 * 2 * t2 * (e2 if np.isfinite(e2) else 0.0)))
    return float(x0), err


def classify_end(end: Critical, pitch: Critical, side: str,
                 order: list[tuple[float, float, float]] | None = None) -> Critical:
    """The kind of a branch end found where the solver stops finding the branch (``end``, kind unknown), held
    against the pitchfork condition (``pitch``).  side 'lower': the branch exists above its end (semantic).
    - both found and overlapping: the branch ends at the pitchfork (supercritical): the pitchfork's value, the
      interval covering both;
    - the branch found below the pitchfork: subcritical, the end is a fold; its location is the solver's bracket
      -- unless the squared order parameter of the valid points above the pitchfork (``order``: alpha, value,
      standard error) extrapolates to zero inside the pitchfork's interval (widened by 3 standard errors of the
      extrapolation): then the branch is supercritical and the valid points below the pitchfork are the finite
      point set's imperfect bifurcation (its Z2 symmetry is broken at O(n^-1/2), which sustains a small order
      parameter below alpha_p; measured at L = 3 simplex, omega 0.3, fast: theta ~ 0.01 down to 0.18 below a
      pitchfork at 0.248, while at default precision theta^2 falls linearly to zero near 0.24);
    - the solver loses the branch above the pitchfork: 'pitchfork' where the same extrapolation lands inside the
      pitchfork's interval (the interval then reaches up to the solver's bracket), else 'unknown', with the
      pitchfork named in the reason."""
    if not end.found or not pitch.found:
        why = pitch.reason if not pitch.found else "the solver did not locate the end"
        return Critical(end.name, end.value, end.lo, end.hi, end.kind, end.method,
                        (end.reason + "; " if end.reason else "") + f"pitchfork condition: {why}") \
            if end.found else end
    if end.overlaps(pitch):
        return Critical(end.name, pitch.value, min(pitch.lo, end.lo), max(pitch.hi, end.hi), "pitchfork",
                        f"{pitch.method}; confirmed by the solver's validity bracket [{end.lo:.4g}, {end.hi:.4g}]")
    below = end.hi < pitch.lo if side == "lower" else end.lo > pitch.hi
    # Where theta^2 of the solver's points above the pitchfork extrapolates to zero (None: no extrapolation, or
    # not inside the pitchfork's interval widened by 3 of its standard errors)
    ic = order_squared_intercept(order, pitch.lo) if side == "lower" and order else None
    if ic is not None and not pitch.lo - 3 * ic[1] <= ic[0] <= pitch.hi + 3 * ic[1]:
        ic = None
    if ic is not None and below:
        return Critical(end.name, pitch.value, pitch.lo, pitch.hi, "pitchfork",
                        f"{pitch.method}; the squared order parameter of the solver's points above it "
                        f"extrapolates to zero at alpha = {ic[0]:.4g} +- {ic[1]:.2g}",
                        f"supercritical: valid points down to alpha = {end.hi:.4g}, below the pitchfork, are the "
                        f"finite point set's imperfect bifurcation (a small order parameter its broken symmetry "
                        f"sustains), not a subcritical branch")
    if ic is not None:
        # Lost above the pitchfork, but its order parameter heads to zero there: the solver's collapse test gives
        # up on a small theta first (theta within 3 standard errors of 0).  Both in the interval.
        return Critical(end.name, pitch.value, pitch.lo, max(pitch.hi, end.hi), "pitchfork",
                        f"{pitch.method}; the squared order parameter of the solver's points extrapolates to "
                        f"zero at alpha = {ic[0]:.4g} +- {ic[1]:.2g}; the solver's validity bracket "
                        f"[{end.lo:.4g}, {end.hi:.4g}] lies above it",
                        "supercritical: the solver stops resolving the small order parameter just above the "
                        "pitchfork; the interval covers both")
    if below:
        return Critical(end.name, end.value, end.lo, end.hi, "fold", end.method,
                        f"subcritical: the branch exists beyond the pitchfork at alpha = {pitch.value:.4g} "
                        f"[{pitch.lo:.4g}, {pitch.hi:.4g}], so it ends at a fold, located where the solver stops "
                        f"finding it (the lower bound is the solver's verdict)")
    return Critical(end.name, end.value, end.lo, end.hi, "unknown", end.method,
                    f"the solver loses the branch before the pitchfork condition at alpha = {pitch.value:.4g} "
                    f"[{pitch.lo:.4g}, {pitch.hi:.4g}]: not classified")
