"""Starting points of the iteration, built without solving anything: the default start of each branch, the
structured starts the default one was measured to miss, and the rank-2 mixed start from rank-1 fixed points.

The mixed start of the free branch for a rank-2 student (r = 2, r* = 1): direction 1 is the rank-1 student's
semantic solution, direction 2 its positional one.  The free branch's default start runs off to a far positional
point at L = 2, alpha = 1.5 (m ~ 3, not converged), while from this start it converges to the mixed minimum that
simulations reach (one direction semantic, one positional; docs/rank2.md).
"""

from __future__ import annotations

import numpy as np

from attnphase.setting import Setting
from attnphase.theory.model.overlaps import Branch, Layout, Overlaps, as_branch, lift_to_untied
from attnphase.theory.model.patterns import exchangeable
from attnphase.theory.state_evolution.results import FixedPoint

START_V = 0.6  # the default start's V in units of sigma^2 / lambda
AGNOSTIC_V = 1.2  # the agnostic branch's (see default_start)
SCALED_FROM = 1.5  # semantic / agnostic: alpha above which the scaled start is tried (see named_starts)


def default_start(setting: Setting, branch: str | Branch) -> Overlaps:
    """Starting overlaps.  Study (L = 2, r = r* = 1): positional (q, m, V, theta) = (0.02, 0.2, 15, 0), semantic
    (0.9, 0, 15, 0.35), agnostic (0.05, 0, 30, 0).  In general: V = 0.6 (sigma^2 / lambda) times I (agnostic:
    AGNOSTIC_V (sigma^2 / lambda), inside the map's domain wherever 0.6 is and in more places); positional m
    along the leading direction of the positional Gram matrix in the first rank direction; semantic theta = 0.35
    on the first min(r, r*) diagonal entries with q = 0.9 there and 0.05 in the other student directions; free:
    both, with m in the first direction theta leaves free when r > min(r, r*) (the mixed start).  Untied
    student: the tied start lifted (overlaps.lift_to_untied: m = [m, m], theta = [theta; theta], q's blocks 0.9
    correlated)."""
    b = as_branch(branch)
    if setting.untied:
        # The tied default start lifted to the untied field rank (Q = K up to a slightly decorrelated q).
        return lift_to_untied(default_start(setting.replace(student="tied"), b))
    r, rs = setting.r, setting.r_star
    # Agnostic: the map's domain (lambda + sigma^2 Vhat > 0 after one step) grows with the start's V (measured on
    # 9 settings, alpha 0.05-10), and 0.6 sigma^2 / lambda leaves it where 1.2 does not (r* = 2, alpha 1.5; the
    # fixed point's V is 0.94 there): the start the former retry "V doubled" used, so no retry is needed.
    V = (AGNOSTIC_V if b == Branch.agnostic else START_V) * (setting.sigma**2 / setting.lam) * np.eye(r)
    q = (0.05 if b == Branch.agnostic else 0.02) * np.eye(r)
    m, theta = _order_parameters(setting, b, 0.2, 0.35)
    if b.has_theta:
        k = min(r, rs)
        q = np.diag([0.9] * k + [0.05] * (r - k))
    return Overlaps(q=q, m=m, V=V, theta=theta)


def _order_parameters(setting: Setting, b: Branch, m_size: float, theta_size: float) -> tuple[np.ndarray, np.ndarray]:
    """(m, theta) of a start: m = m_size times the leading direction of the positional Gram matrix (max-abs entry 1)
    in the first rank direction (free branch with r > min(r, r*): the first direction theta leaves free, the mixed
    start), theta = theta_size on the first min(r, r*) diagonal entries; zero where the branch fixes them."""
    L, r, rs = setting.L, setting.r, setting.r_star
    m = np.zeros((L, r))
    theta = np.zeros((r, rs))
    if b.has_m:
        U = Layout.for_setting(setting, b).basis
        col = min(r, rs) if (b.unconstrained and r > min(r, rs)) else 0
        if U.shape[1]:
            m[:, col] = m_size * U[:, 0]
    if b.has_theta:
        k = min(r, rs)
        theta[:k, :k] = theta_size * np.eye(k)
    return m, theta


def mixed_start_from(semantic: FixedPoint | None, positional: FixedPoint | None, setting: Setting | int) -> Overlaps:
    """Rank-r (r >= 2) overlaps from rank-1 fixed points: student direction 1 the semantic solution, direction 2
    the positional one, the others (r > 2) small (q 0.02, the default V, nothing learnt).  Invalid or missing ones
    are replaced by the default start's values: q 0.05 / 0.02, the default V, theta 0.1 on the teacher's first
    direction, m 0.2 along the first token's sign pattern of the positional code.  setting: the rank-r setting
    (an int is read as L, with r = 2, r* = 1)."""
    if not isinstance(setting, Setting):
        setting = Setting(L=int(setting), r=2)
    L, r, rs = setting.L, max(setting.r, 2), setting.r_star
    V0 = START_V * setting.sigma**2 / setting.lam
    s = semantic if semantic is not None and semantic.valid else None
    p = positional if positional is not None and positional.valid else None
    qs, Vs = (float(s.q[0, 0]), float(s.V[0, 0])) if s else (0.05, V0)
    ts = np.asarray(s.theta[0], dtype=float) if s else np.eye(1, rs)[0] * 0.1
    qp, Vp = (float(p.q[0, 0]), float(p.V[0, 0])) if p else (0.02, V0)
    if p is not None:
        mp = np.asarray(p.m[:, 0], dtype=float)
    else:
        mp = np.zeros(L)
        mp[0], mp[1:] = 0.2, -0.2 / (L - 1)
    m = np.zeros((L, r))
    m[:, 1] = mp
    theta = np.zeros((r, rs))
    theta[0] = ts
    return Overlaps(q=np.diag([qs, qp] + [0.02] * (r - 2)), m=m, V=np.diag([Vs, Vp] + [V0] * (r - 2)), theta=theta)


def scaled_start(setting: Setting, alpha: float, branch: str | Branch) -> Overlaps:
    """A start that follows the measured structure of each branch's fixed point with alpha, sigma, lambda and the
    positions, for where the fixed default start (V = 0.6 sigma^2 / lambda) is too far (study setting, fast: the
    default positional start collapses at alpha >= 3, the agnostic one is inadmissible at alpha >= 5).

    Measured (study, omega = 0.3, fast, by continuation): positional V = 20.6, 13.6, 8.03, 4.83, 2.35, 0.453 at
    alpha = 0.5, 1.5, 3, 5, 10, 50, i.e. close to (sigma^2 / lambda) / (1 + alpha) (the ridge limit sigma^2 /
    lambda at alpha -> 0, ~ 23 / alpha at large alpha), with rms m 0.22-0.29 and q 0.02-0.05 at every alpha;
    with the positional Gram matrix scaled by 4 (positions "2,-2;-2,2") rms m 0.29-0.32, q 0.014-0.033, V 17.9 to
    0.34: m is a score-level quantity (the scores see m_l m_k), nearly independent of |p|.  Semantic: V close to
    the same (sigma^2 / lambda) / (1 + alpha), theta 0.13-0.23, q 0.09-0.21 rho.  Agnostic: q 0.09-0.13, V = 26,
    19, 14, 9.3, 4.0 at alpha = 1.5, 3, 5, 10, 50 (~ 1.2 (sigma^2 / lambda) / (1 + sqrt(alpha))).

    m: 0.27 along the leading direction of the positional Gram matrix (scaled to max-abs entry 1); semantic theta
    0.2 sqrt(rho) on the first min(r, r*) diagonal entries.  Untied: the tied start lifted."""
    b = as_branch(branch)
    if setting.untied:
        return lift_to_untied(scaled_start(setting.replace(student="tied"), alpha, b))
    r, rs = setting.r, setting.r_star
    ridge = setting.sigma**2 / setting.lam
    V = ridge / (1.0 + alpha) * np.eye(r)
    q = 0.04 * np.eye(r)
    if b == Branch.agnostic:
        V = 1.2 * ridge / (1.0 + np.sqrt(alpha)) * np.eye(r)
        q = 0.12 * np.eye(r)
    m, theta = _order_parameters(setting, b, 0.27, 0.2 * np.sqrt(setting.rho))
    if b.has_theta:
        k = min(r, rs)
        q = np.diag([0.15 * setting.rho] * k + [0.04] * (r - k))
    return Overlaps(q=q, m=m, V=V, theta=theta)


def named_starts(setting: Setting, branch: str, alpha: float | None = None) -> list[tuple[str, Overlaps]]:
    """(name, overlaps) of the starts besides the default one that need no solve: "scaled" (scaled_start; only
    with alpha, for the semantic and agnostic branches only above SCALED_FROM), and for the positional branch at
    L > 2 without token patterns (model.patterns: with them the branch is solved in each pattern's subspace, where
    no ring is left) "wide_m" (q 0.08, twice the default m) and "pattern" (one token against the others through G,
    rms 0.2): with nearly permutation-symmetric A and G the positional minima form a shallow ring, the default start
    drifts along it, and the lowest of the starts' points is kept (docs/numerics.md, "wide_m").  (For r* >= 2,
    wide_m was there for a far point that was a mirror cycle.)"""
    b = as_branch(branch)
    out: list[tuple[str, Overlaps]] = []
    # Semantic and agnostic: only where the scaled start is not the default one within a factor 1.5 in V
    # (0.6 (1 + alpha) > 1.5): below that it adds nothing measured (the study's semantic points below its end at
    # 0.72 collapse from both), and the study's curves stay exactly as they were.
    if alpha is not None and not b.unconstrained and (b == Branch.positional or alpha > SCALED_FROM):
        out.append(("scaled", scaled_start(setting, alpha, b)))
    if setting.untied:
        return out
    d0 = default_start(setting, b)
    # (at L > 2 only without token patterns: their subspaces replace the ring's starts)
    ring = setting.L > 2 and not exchangeable(setting)
    if b == Branch.positional and ring:
        out.append(("wide_m", Overlaps(q=0.08 * np.eye(setting.r), m=2.0 * d0.m, V=d0.V, theta=d0.theta)))
        e = np.zeros(setting.L)
        e[0] = 1.0
        pattern = setting.gram @ (e - e.mean())
        if np.any(pattern != 0):
            m = np.zeros((setting.L, setting.r))
            m[:, 0] = 0.2 * pattern / np.sqrt(np.mean(pattern**2))
            out.append(("pattern", Overlaps(q=d0.q, m=m, V=d0.V, theta=d0.theta)))
    return out
