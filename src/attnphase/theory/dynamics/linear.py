"""The ODE linearised around the uninformed start: m = theta = 0, q = q0 I_r (the typical random start).

On the agnostic manifold (m = theta = 0, invariant: the loss is even in h and in h*) the student's fields are
h_l = sqrt(q0) xi_l, independent of the teacher's.  To first order in m and theta the two directions decouple
(docs/dynamics.md), with Stein's lemma turning every second derivative into a Gaussian average of the loss itself:

    e_kj    = E[ lbar(sqrt(q0) xi) (xi_k . xi_j / r - delta_kj) ] / q0,   lbar(h) = (sigma^2 / 2) ||S(h) - Tbar||_F^2,
    Tbar    = E[T] = (1 - omega) E[softmax(h* h*^T)] + omega A,
    kappa   = -sigma^2 sum_{lk, ij} Ss_{lk,ij} Ts_{lk,ij},
    Ss_{lk,ij} = E[S_lk(sqrt(q0) xi) (xi_i . xi_j / r - delta_ij)] / q0,
    Ts_{lk,ij} = (1 - omega) E[softmax_lk(h* h*^T) (eta_i . eta_j / r* - delta_ij)] / sigma^2,  h* = sigma eta,

    d a / dt     = -lr [ C^T e C + sigma^2 tr(e) + lambda ] a        (m = C a, C C^T = G)
    d theta / dt = -lr [ sigma^2 tr(e) + sigma^4 kappa + lambda ] theta
    d q / dt     = -2 lr q [ sigma^2 tr(e) + lambda ] + lr^2 sigma^4 N(q),   N = sum_k E[g_k g_k^T] (per direction).

The fractions of q carried by m and theta (trajectory.fractions) then grow at
    d log f_m / dt     = -2 lr mu - lr^2 sigma^4 N / q0,   mu = smallest eigenvalue of C^T e C,
    d log f_theta / dt = -2 lr sigma^4 kappa - lr^2 sigma^4 N / q0:
lambda drops out, and which fraction grows faster (mu against sigma^4 kappa) depends on neither lr nor lambda.
As q0 -> 0: e -> -(sigma^2 / L)(Delta + Delta^T), Delta = Tbar - 1 1^T / L (the closed form the tests check).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import brentq
from scipy.special import digamma, polygamma

from attnphase.errors import InputError
from attnphase.problem import scores, softmax_rows, teacher_from_softmax
from attnphase.setting import Setting, check_int, check_number
from attnphase.theory.dynamics.drift import drift
from attnphase.theory.dynamics.start import gram_factor
from attnphase.theory.model.quadrature import gauss_hermite_grid, gaussian_sobol

# Points for the student-only and teacher-only averages (L r and L r* dimensions).
GH_LINEAR = {1: 80, 2: 48, 3: 16, 4: 10}
SOBOL_LINEAR = 16


@lru_cache(maxsize=16)
def _points(dim: int) -> tuple[np.ndarray, np.ndarray]:
    if dim in GH_LINEAR:
        return gauss_hermite_grid(GH_LINEAR[dim], dim)
    z = gaussian_sobol(SOBOL_LINEAR, dim, 977)
    return z, np.full(z.shape[1], 1.0 / z.shape[1])


def _second_moments(X: np.ndarray) -> np.ndarray:
    """xi_i . xi_j / r - delta_ij at every point: X (n, L, r) -> (n, L, L)."""
    return np.einsum("nia,nja->nij", X, X) / X.shape[2] - np.eye(X.shape[1])[None]


def _teacher(setting: Setting) -> tuple[np.ndarray, np.ndarray]:
    """Tbar (L x L) and Ts (L, L, L, L) [l, k, i, j]."""
    L, rs, sig = setting.L, setting.r_star, setting.sigma
    z, w = _points(L * rs)
    eta = z.T.reshape(-1, L, rs)
    Ssoft = softmax_rows(scores(sig * eta))
    Tbar = teacher_from_softmax(np.einsum("n,nlk->lk", w, Ssoft), setting.omega, setting.A_array)  # (T linear in S)
    Ts = (1.0 - setting.omega) * np.einsum("n,nlk,nij->lkij", w, Ssoft, _second_moments(eta)) / sig**2
    return Tbar, Ts


def _student(setting: Setting, q0: float, Tbar: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """e (L x L) and Ss (L, L, L, L) at q = q0 I_r."""
    L, r = setting.L, setting.r
    z, w = _points(L * r)
    xi = z.T.reshape(-1, L, r)
    S = softmax_rows(scores(np.sqrt(q0) * xi))
    M = _second_moments(xi)
    D = S - Tbar[None]
    lbar = 0.5 * setting.sigma**2 * np.einsum("nlk,nlk->n", D, D)
    e = np.einsum("n,n,nij->ij", w, lbar, M) / q0
    Ss = np.einsum("n,nlk,nij->lkij", w, S, M) / q0
    return 0.5 * (e + e.T), Ss


@dataclass(frozen=True)
class GrowthRates:
    """Linear rates at the uninformed start q = q0 I_r, m = theta = 0 (per unit of t = samples / d).

    m, theta: exponential rates of the amplitudes of m and theta; q_log: d log q / dt on the agnostic manifold;
    m_fraction, theta_fraction: d log f / dt of the parts of q they carry (independent of lambda); e, kappa, mu:
    the Gaussian constants of the module docstring; noise: lr^2 sigma^4 N / q0 (the lr^2 term's share)."""

    q0: float
    lr: float
    m: float
    theta: float
    q_log: float
    m_fraction: float
    theta_fraction: float
    mu: float
    kappa: float
    noise: float
    e: np.ndarray

    def as_dict(self) -> dict:
        out = {k: getattr(self, k) for k in ("q0", "lr", "m", "theta", "q_log", "m_fraction", "theta_fraction", "mu",
                                             "kappa", "noise")}
        out["e"] = self.e.tolist()
        return out


def _check_q0(q0: float) -> float:
    q0 = check_number("q0", q0)
    if not q0 > 0:
        raise InputError(f"q0 must be > 0, got {q0:g}")
    return q0


def growth_rates(setting: Setting, lr: float, q0: float) -> GrowthRates:
    """The linear growth rates of m and theta at m = theta = 0, q = q0 I_r (q0 = sigma^2 s^2 at init scale s)."""
    if setting.untied:
        raise InputError("the online-SGD ODE implements the tied student only; got student='untied'")
    lr = check_number("lr", lr)
    if lr <= 0:
        raise InputError(f"lr must be > 0, got {lr:g}")
    q0 = _check_q0(q0)
    s2, lam = setting.sigma**2, setting.lam
    Tbar, Ts = _teacher(setting)
    e, Ss = _student(setting, q0, Tbar)
    kappa = float(-s2 * np.sum(Ss * Ts))
    C = gram_factor(setting.gram)
    mu = float(np.linalg.eigvalsh(C.T @ e @ C).min())
    tr_e = float(np.trace(e))
    r = setting.r
    qm = q0 * np.eye(r)
    D = drift(setting, qm, np.zeros((setting.L, r)), np.zeros((r, setting.r_star)))
    noise = float(lr**2 * np.trace(D.dq2) / (r * q0))
    q_log = -2.0 * lr * (s2 * tr_e + lam) + noise
    return GrowthRates(q0=q0, lr=lr, m=-lr * (mu + s2 * tr_e + lam), theta=-lr * (s2 * tr_e + s2 * s2 * kappa + lam),
                       q_log=q_log, m_fraction=-2.0 * lr * mu - noise, theta_fraction=-2.0 * lr * s2 * s2 * kappa - noise,
                       mu=mu, kappa=kappa, noise=noise, e=e)


def small_q_limit(setting: Setting) -> np.ndarray:
    """e at q0 -> 0 in closed form: -(sigma^2 / L) (Delta + Delta^T), Delta = Tbar - 1 1^T / L."""
    Tbar, _ = _teacher(setting)
    Delta = Tbar - 1.0 / setting.L
    return -(setting.sigma**2 / setting.L) * (Delta + Delta.T)


def crossing_omega(setting: Setting, q0: float) -> float:
    """The omega in [0, 1] at which the fractions of m and theta grow equally fast at q = q0 I_r (mu = sigma^4
    kappa; independent of lr and lambda); NaN where one of them is faster for every omega."""
    q0 = _check_q0(q0)

    def gap(omega: float) -> float:
        g = growth_rates(setting.replace(omega=omega), 1.0, q0)
        return g.m_fraction - g.theta_fraction

    lo, hi = gap(0.0), gap(1.0)
    if not np.isfinite(lo) or not np.isfinite(hi) or lo * hi > 0:
        return float("nan")
    return float(brentq(gap, 0.0, 1.0, xtol=1e-10))


def agnostic_q(setting: Setting, lr: float, q_max: float = 50.0) -> float:
    """Where the uninformed norm settles: the q0 > 0 with d log q / dt = 0 on the agnostic manifold (stable:
    the rate changes sign from + to -), or 0.0 where the norm decays from every small q0 (weight decay wins); the
    largest q0 scanned is q_max (NaN if the rate is still positive there)."""
    qs = np.geomspace(1e-6, q_max, 40)
    rates = [growth_rates(setting, lr, float(q)).q_log for q in qs]
    if rates[0] < 0:
        return 0.0
    for i in range(1, len(qs)):
        if rates[i] < 0:
            return float(brentq(lambda q: growth_rates(setting, lr, q).q_log, qs[i - 1], qs[i], xtol=1e-12))
    return float("nan")


@dataclass(frozen=True)
class EscapeTimes:
    """Linearised escape times from the typical random start: the first t at which the fraction of q carried by m
    (t_m) or theta (t_theta) reaches `threshold`, with q following the agnostic manifold.

    The fractions start at f_m(0) = chi^2_{k r} / (d r) and f_theta(0) = chi^2_{r r*} / (d r) (k = rank G): the times
    are those from exp E[log f(0)] (the geometric mean over random starts), and t_m_spread, t_theta_spread the
    standard deviation over starts to first order, sd(log f(0)) / (the fraction's rate at the escape).  For the
    study (k = r = r* = 1) sd(log chi^2_1) = 2.22: escape times from single starts scatter widely.
    NaN: not reached by t_max.  q_end: q / r on the agnostic manifold at the earlier of the two times."""

    d: int
    init_scale: float
    lr: float
    threshold: float
    t_m: float
    t_theta: float
    q_end: float
    t_m_spread: float = float("nan")
    t_theta_spread: float = float("nan")

    @property
    def first(self) -> str:
        """'m', 'theta' or 'none' (the direction whose fraction reaches the threshold first)."""
        if np.isnan(self.t_m) and np.isnan(self.t_theta):
            return "none"
        if np.isnan(self.t_theta) or (not np.isnan(self.t_m) and self.t_m <= self.t_theta):
            return "m"
        return "theta"

    def as_dict(self) -> dict:
        return {"d": self.d, "init_scale": self.init_scale, "lr": self.lr, "threshold": self.threshold,
                "t_m": self.t_m, "t_theta": self.t_theta, "t_m_spread": self.t_m_spread,
                "t_theta_spread": self.t_theta_spread, "q_end": self.q_end, "first": self.first}


def _log_chi2_mean_sd(k: int) -> tuple[float, float]:
    """E and sd of log(chi^2_k / k)."""
    return float(digamma(k / 2.0) + np.log(2.0 / k)), float(np.sqrt(polygamma(1, k / 2.0)))


def escape_times(setting: Setting, lr: float, init_scale: float, d: int, *, threshold: float = 0.05,
                 t_max: float = 1e5) -> EscapeTimes:
    """Escape times predicted by the linearisation (module docstring), integrated along the agnostic q(t)."""
    init_scale = check_number("init_scale", init_scale)
    if init_scale <= 0:
        raise InputError(f"init_scale must be > 0, got {init_scale:g}")
    d = check_int("d", d, 2)
    threshold = check_number("threshold", threshold)
    if not 0 < threshold < 1:
        raise InputError(f"threshold must lie in (0, 1), got {threshold:g}")
    lr = check_number("lr", lr)
    k, r, rs = gram_factor(setting.gram).shape[1], setting.r, setting.r_star
    (mm, sm), (mt, st) = _log_chi2_mean_sd(k * r), _log_chi2_mean_sd(r * rs)
    # log f(0) = log(k / d) + log(chi^2_{kr} / (kr)) for m, log(r* / d) + log(chi^2_{r r*} / (r r*)) for theta
    targets = (np.log(threshold * d / k) - mm, np.log(threshold * d / rs) - mt)
    q0 = setting.sigma**2 * init_scale**2

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        g = growth_rates(setting, lr, float(np.exp(y[0])))
        return np.array([g.q_log, g.m_fraction, g.theta_fraction])

    def reach(i: int):
        def ev(_t: float, y: np.ndarray) -> float:
            return y[i] - targets[i - 1]
        ev.terminal = False  # type: ignore[attr-defined]
        ev.direction = 1  # type: ignore[attr-defined]
        return ev

    def both(_t: float, y: np.ndarray) -> float:
        return min(y[1] - targets[0], y[2] - targets[1])

    both.terminal = True  # type: ignore[attr-defined]
    sol = solve_ivp(rhs, (0.0, t_max), np.array([np.log(q0), 0.0, 0.0]), rtol=1e-6, atol=1e-9,
                    events=[reach(1), reach(2), both])
    times, spreads = [], []
    for i, sd in ((0, sm), (1, st)):
        if len(sol.t_events[i]):
            t, y = float(sol.t_events[i][0]), sol.y_events[i][0]
            rate = rhs(t, y)[1 + i]
            times.append(t)
            spreads.append(sd / rate if rate > 0 else float("nan"))
        else:
            times.append(float("nan"))
            spreads.append(float("nan"))
    t_m, t_th = times
    if np.isnan(t_m) and np.isnan(t_th):
        qe = float(np.exp(sol.y[0, -1]))
    else:
        i = 0 if np.isnan(t_th) or (not np.isnan(t_m) and t_m <= t_th) else 1
        qe = float(np.exp(sol.y_events[i][0][0]))
    return EscapeTimes(d=d, init_scale=init_scale, lr=lr, threshold=threshold, t_m=t_m, t_theta=t_th, q_end=qe,
                       t_m_spread=spreads[0], t_theta_spread=spreads[1])
