"""Online SGD at finite d against the d -> infinity ODE (attnphase.theory.dynamics).

Each seed's trajectory is held against the ODE started from that seed's own measured overlaps at t = 0 (a random
start's m and theta are of order init_scale / sqrt(d) and differ from seed to seed by O(1) relative amounts, which
shifts the escape by O(1) times: the ODE from one typical start would not describe the mean of the seeds).  The
summaries are the theory's (Trajectory.q_scalar, m_abs, theta_abs: tr q / r, the root mean square of |m_l| and the
largest singular value of theta; r = r* = 1: q, |m|, |theta|), escape times the theory's (the first time the
positional or the teacher part of tr q passes 5%, theory.dynamics.trajectory.fractions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnphase.experiments.online.result import OnlineResult, summaries

SUMMARIES = ("q", "m", "theta")


def escape_times(setting: Any, t: np.ndarray, q: np.ndarray, m: np.ndarray, theta: np.ndarray,
                 threshold: float | None = None) -> dict[str, float]:
    """First times the positional (``m``) and the teacher (``theta``) fractions of tr q pass `threshold` (the
    theory's MECHANISM_FRACTION by default), linearly interpolated; NaN if never (or already at t = 0)."""
    from attnphase.theory.dynamics.trajectory import MECHANISM_FRACTION, fractions

    thr = MECHANISM_FRACTION if threshold is None else float(threshold)
    fr = np.array([fractions(setting, a, b, c) for a, b, c in zip(q, m, theta, strict=True)])
    out = {}
    for k, name in enumerate(("m", "theta")):
        f = fr[:, k]
        above = np.nonzero(f > thr)[0]
        if above.size == 0 or above[0] == 0:
            out[name] = math.nan
        else:
            i = int(above[0])
            out[name] = float(np.interp(thr, [f[i - 1], f[i]], [t[i - 1], t[i]]))
    return out


@dataclass(frozen=True)
class Comparison:
    """SGD (mean over seeds) against the ODE from each seed's own start (mean over seeds), on the SGD's times.

    distance[name]: max over t of |mean SGD - mean ODE| for q, m, theta (and test_error); sem[name]: the SGD mean's
    standard error at that time.  escape_sgd / escape_ode: per seed, the escape times of m and theta.
    mechanisms_sgd / mechanisms_ode: the mechanism at t_max per seed (theory.dynamics.classify).
    """

    d: int
    t: np.ndarray
    sgd: dict[str, np.ndarray]
    ode: dict[str, np.ndarray]
    distance: dict[str, float]
    sem: dict[str, float]
    escape_sgd: dict[str, np.ndarray]
    escape_ode: dict[str, np.ndarray]
    mechanisms_sgd: tuple[str, ...]
    mechanisms_ode: tuple[str, ...]
    ode_status: tuple[str, ...]
    ode_seconds: float
    notes: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """A flat summary (benchmark table, report)."""
        def med(a: np.ndarray) -> float:
            a = a[np.isfinite(a)]
            return float(np.median(a)) if a.size else math.nan

        out: dict[str, Any] = {"d": self.d, "seeds": len(self.mechanisms_sgd)}
        for k in (*SUMMARIES, "test_error"):
            out[f"dist_{k}"] = self.distance[k]
        for k in ("m", "theta"):
            out[f"escape_{k}_sgd"] = med(self.escape_sgd[k])
            out[f"escape_{k}_ode"] = med(self.escape_ode[k])
        out["mechanisms_sgd"] = ",".join(f"{m}:{self.mechanisms_sgd.count(m)}" for m in sorted(set(self.mechanisms_sgd)))
        out["mechanisms_ode"] = ",".join(f"{m}:{self.mechanisms_ode.count(m)}" for m in sorted(set(self.mechanisms_ode)))
        return out


def compare_with_ode(res: OnlineResult, rtol: float = 1e-6) -> Comparison:
    """Integrate the ODE from each seed's measured start and compare (see :class:`Comparison`)."""
    import time

    from attnphase.theory.dynamics import classify, integrate

    setting = res.setting
    ode_runs = []
    t0 = time.perf_counter()
    for i in range(len(res.seeds)):
        init = {"q": res.q[i, 0], "m": res.m[i, 0], "theta": res.theta[i, 0]}
        ode_runs.append(integrate(setting, lr=res.lr, init=init, t_max=res.t_max, n_points=len(res.t), rtol=rtol))
    secs = time.perf_counter() - t0
    notes = [f"seed {res.seeds[i]}: ODE {tr.status.value}" for i, tr in enumerate(ode_runs) if tr.status.value != "ok"]
    # the ODE on the SGD's own times (t = round(t d) / d differs from the even grid by < 1/d)
    ode_arr: dict[str, np.ndarray] = {}
    for name, get in (("q", lambda tr: tr.q), ("m", lambda tr: tr.m), ("theta", lambda tr: tr.theta)):
        ode_arr[name] = np.stack([_interp(res.t, tr.t, get(tr)) for tr in ode_runs])
    ode_te = np.stack([_interp(res.t, tr.t, tr.test_error) for tr in ode_runs])
    sgd_s = summaries(res.q, res.m, res.theta)
    ode_s = summaries(ode_arr["q"], ode_arr["m"], ode_arr["theta"])
    sgd_s["test_error"], ode_s["test_error"] = res.test_error, ode_te
    S = len(res.seeds)
    distance, sem = {}, {}
    sgd_mean, ode_mean = {}, {}
    for k in sgd_s:
        mu_s, mu_o = np.nanmean(sgd_s[k], axis=0), np.nanmean(ode_s[k], axis=0)
        sgd_mean[k], ode_mean[k] = mu_s, mu_o
        gap = np.abs(mu_s - mu_o)
        j = int(np.nanargmax(gap)) if np.any(np.isfinite(gap)) else 0
        distance[k] = float(gap[j])
        sem[k] = float(np.std(sgd_s[k][:, j], ddof=1) / math.sqrt(S)) if S > 1 else math.nan
    esc_s = [escape_times(setting, res.t, res.q[i], res.m[i], res.theta[i]) for i in range(S)]
    esc_o = [escape_times(setting, res.t, ode_arr["q"][i], ode_arr["m"][i], ode_arr["theta"][i]) for i in range(S)]
    mech_s = tuple(classify(setting, res.q[i, -1], res.m[i, -1], res.theta[i, -1]).value for i in range(S))
    mech_o = tuple(tr.mechanism().value for tr in ode_runs)
    return Comparison(d=res.d, t=res.t, sgd=sgd_mean, ode=ode_mean, distance=distance, sem=sem,
                      escape_sgd={k: np.array([e[k] for e in esc_s]) for k in ("m", "theta")},
                      escape_ode={k: np.array([e[k] for e in esc_o]) for k in ("m", "theta")},
                      mechanisms_sgd=mech_s, mechanisms_ode=mech_o,
                      ode_status=tuple(tr.status.value for tr in ode_runs), ode_seconds=secs, notes=notes)


def _interp(t_new: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Linear interpolation along the first axis of y (NaN beyond the ODE's last time, e.g. a stopped run)."""
    flat = y.reshape(len(t), -1)
    out = np.stack([np.interp(t_new, t, flat[:, k], right=np.nan) for k in range(flat.shape[1])], axis=1)
    return out.reshape((len(t_new),) + y.shape[1:])
