"""What an online-SGD run returns: every seed's overlaps and errors at the recorded times, with a status."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnphase.notes import Note
from attnphase.setting import Setting

STATUSES = ("ok", "diverged")


def summaries(q: np.ndarray, m: np.ndarray, theta: np.ndarray) -> dict[str, np.ndarray]:
    """Scalar summaries of overlaps with any leading axes, (..., c, c), (..., L, c), (..., c, r*): those of
    attnphase.theory.dynamics.Trajectory (q_scalar, m_abs, theta_abs): tr q / c, the root mean square over tokens
    of |m_l| and the largest singular value of theta.  r = r* = 1 in the study's geometry: q, |m_1| = |m| and
    |theta| of docs/model.md (sign-free: Q -> -Q is a symmetry)."""
    return {"q": np.trace(q, axis1=-2, axis2=-1) / q.shape[-1],
            "m": np.sqrt(np.sum(m ** 2, axis=(-2, -1)) / m.shape[-2]),
            "theta": np.linalg.svd(theta, compute_uv=False).max(axis=-1)}


def _list(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return [_list(x) for x in v] if v.ndim else _list(v.item())
    if isinstance(v, float | np.floating):
        return float(v) if math.isfinite(v) else None
    return v


@dataclass(frozen=True)
class OnlineResult:
    """Online SGD at finite d, one row of arrays per seed.

    t (n_points,): recorded times (samples seen / d).  q (S, n_points, c, c), m (S, n_points, L, c),
    theta (S, n_points, c, r*): overlaps of docs/model.md for W = Q (c = r) or W = [Q | K] (untied, c = 2r).
    test_error (S, n_points): mean of ||y - yhat||_F^2 / (2d) over each seed's held-out set (n_test samples);
    train_error (S, n_points): mean per-sample loss on the fresh samples of the interval before each time (the
    online training error; NaN at t = 0).  seconds: time per seed (the batch's time divided among its seeds,
    0 for seeds read back from a store).  status "ok" or "diverged" (weights non-finite or run away:
    a rate too large; ``warnings`` names the seeds).
    """

    setting: Setting
    d: int
    lr: float
    init_scale: float
    t_max: float
    seeds: tuple[int, ...]
    t: np.ndarray
    q: np.ndarray
    m: np.ndarray
    theta: np.ndarray
    test_error: np.ndarray
    train_error: np.ndarray
    seconds: np.ndarray
    n_test: int
    device: str
    status: str = "ok"
    warnings: tuple[Note, ...] = field(default_factory=tuple)
    reused: int = 0

    @property
    def summary(self) -> dict[str, np.ndarray]:
        """Per seed and time, shape (S, n): q, m, theta as in :func:`summaries` (study: q, |m|, |theta|)."""
        return summaries(self.q, self.m, self.theta)

    def mean(self) -> dict[str, np.ndarray]:
        """The mean trajectory over seeds and its standard error (``<name>_sem``; NaN for one seed): t, q, m,
        theta, test_error, train_error."""
        out: dict[str, np.ndarray] = {"t": self.t}
        vals = {**self.summary, "test_error": self.test_error, "train_error": self.train_error}
        S = len(self.seeds)
        for k, v in vals.items():
            out[k] = v.mean(axis=0)
            out[f"{k}_sem"] = v.std(axis=0, ddof=1) / math.sqrt(S) if S > 1 else np.full_like(out[k], np.nan)
        return out

    def records(self, per_seed: bool = False) -> list[dict[str, Any]]:
        """One record per time point: the seeds' mean (source 'sgd', with standard errors), or with `per_seed`
        one per (seed, time) (source 'sgd_seed')."""
        if per_seed:
            s = self.summary
            return [{"source": "sgd_seed", "d": self.d, "seed": seed, "t": float(self.t[j]),
                     **{k: _list(s[k][i, j]) for k in ("q", "m", "theta")},
                     "test_error": _list(self.test_error[i, j]), "train_error": _list(self.train_error[i, j])}
                    for i, seed in enumerate(self.seeds) for j in range(len(self.t))]
        mu = self.mean()
        names = ("q", "m", "theta", "test_error", "train_error")
        return [{"source": "sgd", "d": self.d, "n_seeds": len(self.seeds), "t": float(self.t[j]),
                 **{k: _list(mu[k][j]) for k in names}, **{f"{k}_sem": _list(mu[f"{k}_sem"][j]) for k in names}}
                for j in range(len(self.t))]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the parameters, the arrays (nested lists, NaN as None), status and warnings."""
        return {"setting": self.setting.to_dict(), "d": self.d, "lr": self.lr, "init_scale": self.init_scale,
                "t_max": self.t_max, "seeds": list(self.seeds), "n_test": self.n_test, "device": self.device,
                "t": _list(self.t), "q": _list(self.q), "m": _list(self.m), "theta": _list(self.theta),
                "test_error": _list(self.test_error), "train_error": _list(self.train_error),
                "seconds": _list(self.seconds), "status": self.status,
                "warnings": [{"code": str(w.code), "message": w.message} for w in self.warnings],
                "reused": self.reused}
