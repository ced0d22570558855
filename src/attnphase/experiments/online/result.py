"""What an online-SGD run returns: every seed's overlaps and errors at the recorded times, with a status."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnphase.notes import Note
from attnphase.setting import Setting

STATUSES = ("ok", "diverged")


def summaries(q: np.ndarray, m: np.ndarray, theta: np.ndarray, study: bool) -> dict[str, np.ndarray]:
    """Sign- and rotation-free summaries of overlaps with leading axes (..., c, c), (..., L, c), (..., c, r*).

    r = r* = 1 (one field column): q, |m_1| (the study's m; ||m|| for other positional codes) and |theta|, each
    with the leading shape (Q -> -Q is a symmetry).  More columns: the eigenvalues of q and the singular values
    of m and theta, largest first, as a last axis (invariant under Q -> Q O).
    """
    if q.shape[-1] == 1 and theta.shape[-1] == 1:
        mm = np.abs(m[..., 0, 0]) if study else np.linalg.norm(m[..., :, 0], axis=-1)
        return {"q": q[..., 0, 0], "m": mm, "theta": np.abs(theta[..., 0, 0])}
    return {"q": np.linalg.eigvalsh(q)[..., ::-1],
            "m": np.linalg.svd(m, compute_uv=False),
            "theta": np.linalg.svd(theta, compute_uv=False)}


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
        """Per seed and time: q, m, theta as in :func:`summaries` (r = r* = 1: q, |m|, |theta|, shape (S, n))."""
        return summaries(self.q, self.m, self.theta, self.setting.is_study_geometry and not self.setting.untied)

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
