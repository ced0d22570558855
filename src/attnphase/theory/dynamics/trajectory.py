"""Integrate the online-SGD ODE of the overlaps from a random or a given start: :func:`integrate` -> Trajectory.

The state is (q, m, theta) as arrays (r x r, L x r, r x r*); the drift is drift.drift at learning rate lr.  Time
t = samples seen / d.  Each trajectory also carries the population risk (test_error) and the per-step objective
train_error = test_error + lambda tr(q) / (2 sigma^2), i.e. E[l] + (lambda / (2d)) ||Q||_F^2: what an online learner
sees on its fresh samples, weight decay included.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
from scipy.integrate import solve_ivp

from attnphase.errors import InputError, InputTypeError
from attnphase.notes import Note, NoteCode
from attnphase.setting import Setting, check_int, check_number, check_positive
from attnphase.theory.dynamics.drift import GH_SCHEDULE, Rule, averages, drift, rule_for
from attnphase.theory.dynamics.start import explicit_start, gram_factor, random_start
from attnphase.theory.solvers.fixed_point import Inadmissible

METHODS = ("RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA")
# q beyond this (x sigma^2) is a run-off: the softmax saturates and the drifts vanish, nothing more to learn.
Q_MAX = 1e6
# The trajectory "has settled" when every overlap moved by less than this (relative) over the last 10% of time.
SETTLE_TOL = 1e-3
# Below this fraction of q the positional / teacher part counts as absent (mechanism()).
MECHANISM_FRACTION = 0.05


class DynamicsStatus(StrEnum):
    """How an integration ended.  Only ``ok`` reached t_max."""

    ok = "ok"
    diverged = "diverged"  # q ran past Q_MAX
    inadmissible = "inadmissible"  # the overlaps left the realisable set
    failed = "failed"  # the ODE solver gave up


class Mechanism(StrEnum):
    positional = "positional"
    semantic = "semantic"
    mixed = "mixed"
    agnostic = "agnostic"


def fractions(setting: Setting, q: np.ndarray, m: np.ndarray, theta: np.ndarray) -> tuple[float, float]:
    """The parts of tr(q) carried by the positional span and by the teacher's directions:
    f_m = sigma^2 tr(a^T a) / tr q (m = C a, C C^T = G) and f_theta = tr(theta theta^T) / (sigma^2 tr q), in [0, 1]."""
    tq = float(np.trace(q))
    if not tq > 1e-300:
        return 0.0, 0.0
    a = np.linalg.pinv(gram_factor(setting.gram)) @ m
    return float(setting.sigma**2 * np.sum(a * a) / tq), float(np.sum(theta * theta) / (setting.sigma**2 * tq))


def classify(setting: Setting, q: np.ndarray, m: np.ndarray, theta: np.ndarray,
             threshold: float = MECHANISM_FRACTION) -> Mechanism:
    """Which mechanism the overlaps show: a part (fractions()) above `threshold` is present."""
    fm, ft = fractions(setting, q, m, theta)
    if fm > threshold and ft > threshold:
        return Mechanism.mixed
    if fm > threshold:
        return Mechanism.positional
    if ft > threshold:
        return Mechanism.semantic
    return Mechanism.agnostic


@dataclass(frozen=True, eq=False)
class Trajectory:
    """One ODE trajectory.  Arrays: t (n,), q (n, r, r), m (n, L, r), theta (n, r, r*), test_error, train_error (n,).

    test_error is the population risk E[l]; train_error adds the weight decay, lambda tr(q) / (2 sigma^2).
    q_scalar, m_abs, theta_abs are the package's scalar summaries (tr q / r; the root mean square over tokens of
    |m_l|, = |m_1| in the study; the largest singular value of theta, = |theta| for r = r* = 1)."""

    setting: Setting
    lr: float
    t: np.ndarray
    q: np.ndarray
    m: np.ndarray
    theta: np.ndarray
    test_error: np.ndarray
    train_error: np.ndarray
    status: DynamicsStatus
    warnings: tuple[Note, ...]
    start: dict[str, Any]
    rule: str
    nfev: int
    seconds: float

    @property
    def q_scalar(self) -> np.ndarray:
        return np.trace(self.q, axis1=1, axis2=2) / self.q.shape[1]

    @property
    def m_abs(self) -> np.ndarray:
        return np.sqrt(np.sum(self.m**2, axis=(1, 2)) / self.m.shape[1])

    @property
    def theta_abs(self) -> np.ndarray:
        return np.array([np.linalg.svd(th, compute_uv=False).max() for th in self.theta])

    def fractions(self) -> tuple[np.ndarray, np.ndarray]:
        """f_m(t) and f_theta(t) (see :func:`fractions`)."""
        fr = np.array([fractions(self.setting, q, m, th) for q, m, th in zip(self.q, self.m, self.theta, strict=True)])
        return fr[:, 0], fr[:, 1]

    def mechanism(self, threshold: float = MECHANISM_FRACTION) -> Mechanism:
        """The mechanism at the last time point."""
        return classify(self.setting, self.q[-1], self.m[-1], self.theta[-1], threshold)

    def escape_time(self, which: str, threshold: float = MECHANISM_FRACTION) -> float:
        """First time at which f_m (which='m') or f_theta (which='theta') exceeds `threshold` (linear interpolation
        between time points); NaN if it never does (or starts above)."""
        if which not in ("m", "theta"):
            raise InputError(f"which must be 'm' or 'theta', got {which!r}")
        f = self.fractions()[0 if which == "m" else 1]
        above = np.nonzero(f > threshold)[0]
        if above.size == 0 or above[0] == 0:
            return float("nan")
        i = int(above[0])
        return float(np.interp(threshold, [f[i - 1], f[i]], [self.t[i - 1], self.t[i]]))

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: per time point t, q, m, theta (nested lists, arrays as elsewhere in the package), the scalar
        summaries, test_error and train_error; the setting, lr, start, status and warnings (code + message)."""
        return {
            "setting": self.setting.to_dict(), "lr": self.lr, "start": self.start, "rule": self.rule,
            "status": self.status.value, "warnings": [{"code": w.code.value, "message": w.message} for w in self.warnings],
            "mechanism": self.mechanism().value, "nfev": self.nfev, "seconds": self.seconds,
            "t": self.t.tolist(), "q": self.q.tolist(), "m": self.m.tolist(), "theta": self.theta.tolist(),
            "q_scalar": self.q_scalar.tolist(), "m_abs": self.m_abs.tolist(), "theta_abs": self.theta_abs.tolist(),
            "test_error": self.test_error.tolist(), "train_error": self.train_error.tolist(),
        }


def _pack(q: np.ndarray, m: np.ndarray, theta: np.ndarray) -> np.ndarray:
    return np.concatenate([q.ravel(), m.ravel(), theta.ravel()])


def _unpack(y: np.ndarray, L: int, r: int, rs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q = y[: r * r].reshape(r, r)
    m = y[r * r: r * r + L * r].reshape(L, r)
    theta = y[r * r + L * r:].reshape(r, rs)
    return 0.5 * (q + q.T), m, theta


def _check(setting: Any, lr: Any, t_max: Any, n_points: Any, method: Any, rtol: Any) -> tuple[float, float, int, float]:
    if not isinstance(setting, Setting):
        raise InputTypeError(f"setting must be a Setting, got {type(setting).__name__}")
    if setting.untied:
        raise InputError("the online-SGD ODE implements the tied student only; got student='untied'")
    lr = check_positive("lr", lr)
    t_max = check_positive("t_max", t_max)
    n_points = check_int("n_points", n_points, 2)
    if not isinstance(method, str) or method not in METHODS:
        raise InputError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    rtol = check_number("rtol", rtol)
    if not 1e-13 <= rtol <= 1e-2:
        raise InputError(f"rtol must lie in [1e-13, 1e-2], got {rtol:g}")
    return lr, t_max, n_points, rtol


def integrate(setting: Setting, *, lr: float, init_scale: float | None = None, init: Any = None, t_max: float,
              d: int | None = None, n_points: int = 200, seed: int = 0, method: str = "RK45",
              rtol: float = 1e-6, rule: Rule | None = None, lr2_term: bool = True) -> Trajectory:
    """The d -> infinity trajectory of online SGD (time t = samples / d) at learning rate lr.

    Start: either the typical random start of Q with iid N(0, init_scale^2) entries at dimension d (overlaps of
    order init_scale / sqrt(d), drawn with `seed`; requires d), or explicit overlaps `init` (a mapping or object with
    q, m, theta).  n_points time points, evenly spaced on [0, t_max].  rule: the integration points of the Gaussian
    averages (default: drift.rule_for, whose Gauss-Hermite order grows with q).  lr2_term=False drops the lr^2
    term of dq/dt: gradient flow on the population risk plus weight decay, in the time lr t (the small-lr limit).
    """
    lr, t_max, n_points, rtol = _check(setting, lr, t_max, n_points, method, rtol)
    if (init is None) == (init_scale is None):
        raise InputError("give exactly one of init_scale (a random start, with d) and init (explicit overlaps)")
    if init is None:
        if d is None:
            raise InputError("a random start (init_scale) needs the dimension d")
        q0, m0, th0 = random_start(setting, init_scale, d, seed)
        start = {"kind": "random", "init_scale": float(init_scale), "d": int(d), "seed": int(seed)}
    else:
        q0, m0, th0 = explicit_start(setting, init)
        start = {"kind": "explicit"}
    start.update({"q": q0.tolist(), "m": m0.tolist(), "theta": th0.tolist(), "lr2_term": bool(lr2_term)})
    fixed_rule = rule
    used: set[str] = set()
    L, r, rs = setting.L, setting.r, setting.r_star
    qmax = Q_MAX * setting.sigma**2
    problem: list[str] = []

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        q, m, th = _unpack(y, L, r, rs)
        try:
            rl = rule_for(setting, q) if fixed_rule is None else fixed_rule
            used.add(rl.name)
            dq, dm, dth = drift(setting, q, m, th, rl).full(lr, lr2_term)
        except (Inadmissible, np.linalg.LinAlgError) as exc:
            problem.append(str(exc))
            return np.full_like(y, np.nan)
        return _pack(dq, dm, dth)

    def runaway(_t: float, y: np.ndarray) -> float:
        return qmax - float(np.trace(_unpack(y, L, r, rs)[0]))

    runaway.terminal = True  # type: ignore[attr-defined]
    t_eval = np.linspace(0.0, t_max, n_points)
    # m and theta start at O(init_scale / sqrt(d)): an absolute tolerance far below them keeps their growth resolved.
    scale0 = max(float(np.abs(_pack(q0, m0, th0)).max()), 1e-30)
    atol = 1e-9 * rtol * max(scale0, 1e-6) + 1e-30
    t0 = time.perf_counter()
    sol = solve_ivp(rhs, (0.0, t_max), _pack(q0, m0, th0), method=method, t_eval=t_eval, rtol=rtol, atol=atol,
                    events=runaway)
    seconds = time.perf_counter() - t0
    warnings: list[Note] = []
    # A trial step outside the realisable set returns NaN and the solver shortens it: only a failed solve is a failure.
    if sol.status == -1 and problem:
        status = DynamicsStatus.inadmissible
        warnings.append(Note(NoteCode.integration, f"stopped at t = {sol.t[-1] if sol.t.size else 0:g}: {problem[-1]}"))
    elif sol.status == 1:
        status = DynamicsStatus.diverged
        warnings.append(Note(NoteCode.integration, f"q ran past {Q_MAX:g} sigma^2 at t = {sol.t_events[0][0]:g}"))
    elif sol.status != 0:
        status = DynamicsStatus.failed
        warnings.append(Note(NoteCode.integration, f"the ODE solver stopped: {sol.message}"))
    else:
        status = DynamicsStatus.ok
    ys = sol.y.T
    if ys.shape[0] == 0:
        ys = _pack(q0, m0, th0)[None]
        ts = np.zeros(1)
    else:
        ts = sol.t
    qs, ms, ths = zip(*(_unpack(y, L, r, rs) for y in ys), strict=True)
    q_arr, m_arr, th_arr = np.array(qs), np.array(ms), np.array(ths)
    te = np.array([averages(setting, q, m, th, rule_for(setting, q) if fixed_rule is None else fixed_rule).test_error
                   for q, m, th in zip(qs, ms, ths, strict=True)])
    tr = te + setting.lam * np.trace(q_arr, axis1=1, axis2=2) / (2.0 * setting.sigma**2)
    top = GH_SCHEDULE[-1][0] * setting.sigma**2
    if fixed_rule is None and setting.L * (r + rs) <= 4 and np.max(np.trace(q_arr, axis1=1, axis2=2) / r) > top:
        warnings.append(Note(NoteCode.integration, f"q exceeded {top:g} (q / sigma^2 = {GH_SCHEDULE[-1][0]:g}): "
                             "there the Gaussian averages are accurate to ~1e-2 only"))
    if status == DynamicsStatus.ok and len(ts) >= 10:
        k = max(1, len(ts) // 10)
        y_end, y_prev = ys[-1], ys[-1 - k]
        move = np.abs(y_end - y_prev).max() / max(np.abs(y_end).max(), 1e-12)
        if move > SETTLE_TOL:
            warnings.append(Note(NoteCode.not_stationary,
                                 f"the overlaps still moved by {move:.2g} (relative) over the last 10% of t_max"))
    return Trajectory(setting=setting, lr=lr, t=ts, q=q_arr, m=m_arr, theta=th_arr, test_error=te, train_error=tr,
                      status=status, warnings=tuple(warnings), start=start, rule=", ".join(sorted(used)),
                      nfev=int(sol.nfev),
                      seconds=seconds)
