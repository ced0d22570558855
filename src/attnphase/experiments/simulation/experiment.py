"""One finite-d experiment: sample, train the attention layer, measure, fit the linear baseline."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attnphase.errors import InputError
from attnphase.experiments.simulation.measure import (
    fit_linear,
    generalization_error,
    linear_test_error,
    overlaps,
    scalar_or_list,
)
from attnphase.experiments.simulation.memory import check_memory
from attnphase.experiments.simulation.model import EmpiricalRisk, check_student, split_weights
from attnphase.experiments.simulation.sampling import (
    SampledProblem,
    check_size,
    generators,
    gram_factor,
    position_basis,
    resolve_device,
    resolve_dtype,
    sample_dataset,
)
from attnphase.experiments.simulation.training import optimizer_options as _merged_options
from attnphase.experiments.simulation.training import train
from attnphase.notes import Note, Status
from attnphase.setting import Setting

INITS = ("positional", "semantic", "random", "positional_unit")

# Positional start: every entry of Q equal to 1, i.e. Q = sqrt(d) p_1, so that m = 1^T Q / d = 1 and
# q = sigma^2: the same O(1)-per-entry scale as the semantic start Q = Q*.  docs/model.md's "Q = 1/sqrt(d)"
# can also be read entrywise (Q = p_1, unit norm, m = 1/sqrt(d)); that start sits next to the saddle
# Q = 0 and is kept as init "positional_unit".  Both were checked to end in the positional basin
# (d = 200-500, alpha = 0.5-2, omega = 0.3, gd and lbfgs); from entries 1, 5000 GD steps get closer
# to the minimum (smaller final gradient), so that is the default.
POSITIONAL_ENTRY = 1.0
RANDOM_INIT_STD = 0.1


@dataclass
class SimulationResult:
    """Outcome of :func:`simulate`.  Overlaps are floats for r = r* = 1 (|m|, |theta|), else nested lists."""

    d: int
    n: int
    alpha: float
    omega: float
    sigma: float
    lam: float
    init: str
    optimizer: str
    seed: int
    q: Any
    m: Any
    theta: Any
    train_loss: float
    test_error: float
    test_error_linear: float
    status: Status  # ok: the gradient reached its tolerance (converged); why not otherwise: warnings
    seconds: float
    grad_norm: float
    steps: int
    n_test: int = 0
    dtype: str = "float64"
    device: str = "cpu"
    lr: float = 0.0
    grad_rms: float = 0.0
    evaluations: int = 0
    train_seconds: float = 0.0
    stop_reason: str = ""
    student: str = "tied"
    init_scale: float | None = None
    # Measurements beyond the study's keys: the untied student's per-factor overlaps (m_Q, m_K, theta_Q,
    # theta_K, q_K, q_QK) and, for general settings, the summaries m_norm and theta_sv.
    extra: dict[str, Any] = field(default_factory=dict)
    loss_curve: list[float] = field(default_factory=list, repr=False)
    trajectory: list[dict[str, Any]] = field(default_factory=list, repr=False)
    Q: np.ndarray | None = field(default=None, repr=False)
    B_linear: np.ndarray | None = field(default=None, repr=False)
    warnings: tuple[Note, ...] = ()

    @property
    def converged(self) -> bool:
        return self.status == Status.ok

    def summary(self) -> dict[str, float]:
        """q, m, theta as scalars with the theory's definitions (FixedPoint.summary: q = tr q / r, m = root mean
        square over tokens of |m_l|, theta = largest singular value; untied: the theory's untied summaries of the
        factors' overlaps), so that a run and a fixed point compare quantity by quantity.  The study's geometry
        records them as scalars already."""
        if all(isinstance(v, float | int) for v in (self.q, self.m, self.theta)):
            return {"q": float(self.q), "m": float(self.m), "theta": float(self.theta)}
        from attnphase.theory.model.overlaps import Overlaps
        from attnphase.theory.state_evolution.results import summaries

        e = self.extra
        if self.student == "untied":
            qQ, qK, qQK = (np.atleast_2d(np.asarray(e[k], dtype=float)) for k in ("q_Q", "q_K", "q_QK"))
            L = len(np.atleast_1d(np.asarray(e["m_Q"], dtype=float)))
            mQ, mK = (np.asarray(e[k], dtype=float).reshape(L, -1) for k in ("m_Q", "m_K"))
            r = mQ.shape[1]
            tQ, tK = (np.asarray(e[k], dtype=float).reshape(r, -1) for k in ("theta_Q", "theta_K"))
            o = Overlaps(q=np.block([[qQ, qQK], [qQK.T, qK]]), m=np.hstack([mQ, mK]), V=np.eye(2 * r),
                         theta=np.vstack([tQ, tK]), untied=True)
        else:
            q = np.atleast_2d(np.asarray(self.q, dtype=float))
            r = q.shape[0]
            m = np.asarray(self.m, dtype=float).reshape(-1, r)
            o = Overlaps(q=q, m=m, V=np.eye(r), theta=np.asarray(self.theta, dtype=float).reshape(r, -1))
        s = summaries(o)
        return {k: s[k] for k in ("q", "m", "theta")}

    def to_dict(self, include_curve: bool = False, include_trajectory: bool = False) -> dict[str, Any]:
        """Plain JSON-serialisable values (non-finite floats become None); Q and B are left out, the
        entries of `extra` become top-level keys, init_scale appears for random starts only."""
        out: dict[str, Any] = {}
        for name in SimulationResult.__dataclass_fields__:
            if name in ("Q", "B_linear", "extra", "warnings") or (name == "loss_curve" and not include_curve) \
                    or (name == "trajectory" and not include_trajectory):
                continue
            if name == "status":
                out["converged"] = self.converged  # the records' key since the first version
                out["status"] = self.status.value
                continue
            if name == "init_scale" and self.init_scale is None:
                continue
            v = getattr(self, name)
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            out[name] = v
        out["warning_codes"] = [n.code.value for n in self.warnings]
        out.update(self.extra)
        return out


def _check_scale(init_scale: Any) -> float:
    if isinstance(init_scale, bool) or not isinstance(init_scale, int | float) or not math.isfinite(init_scale) \
            or init_scale <= 0:
        raise InputError(f"init_scale must be a finite number > 0, got {init_scale!r}")
    return float(init_scale)


def _positional_start(problem: SampledProblem, r: int, seed: int = 0, scale: float = RANDOM_INIT_STD) -> torch.Tensor:
    """Q in the span of the positional codes: column j = sqrt(d) e_j for j < k, e the orthonormal basis of
    that span (e_1 = 1/sqrt(d)), k its dimension.  For the study's positions this is every entry 1 (m = 1).

    Columns j >= k (student rank above the span's dimension, e.g. r = 2 with antipodal codes) are small random
    columns of scale init_scale, as in the semantic start with r > r*: repeating a positional column instead
    gives a Q whose equal columns stay equal under every optimiser (the gradient is M Q), i.e. a rank-1 student
    that can never reach the rank-r minimum (measured: L = 2, r = 2, alpha 1.5 ended with q's entries all equal)."""
    setting, d = problem.setting, problem.d
    if setting.is_study_geometry or np.array_equal(setting.gram, [[1.0, -1.0], [-1.0, 1.0]]):
        k = 1
        base = torch.full((d, 1), POSITIONAL_ENTRY, dtype=torch.float64)
    else:
        k = gram_factor(setting.gram).shape[1]
        E = position_basis(d, k)
        base = POSITIONAL_ENTRY * math.sqrt(d) * E[: min(r, k)].T.contiguous()
    if r <= k:
        return base[:, :r].contiguous()
    g = generators(seed)["init"]
    pad = scale * torch.randn((d, r - k), generator=g, dtype=torch.float64)
    return torch.cat([base, pad], dim=1)


def initial_Q(init: str | np.ndarray | torch.Tensor, problem: SampledProblem, seed: int, student: str = "tied",
              init_scale: float | None = None) -> tuple[torch.Tensor, str]:
    """The starting weights and the name recorded for them: Q (d, r) for the tied student, W = [Q | K]
    (d, 2r) for the untied one (structured starts put K = Q; random starts draw K independently).

    init_scale: standard deviation of the entries of a random start (default 0.1).  Semantic start with
    r != r*: Q*'s first r columns if r < r*; if r > r*, Q* padded with random columns of scale
    init_scale (columns of exact zeros would stay zero under gradient descent: Q = 0 is a critical point).
    Positional start with r above the dimension k of the positional span: the k positional columns padded
    the same way (equal columns would stay equal).
    """
    setting, d = problem.setting, problem.d
    dtype, device = problem.dtype, problem.device
    untied = check_student(student) == "untied"
    scale = RANDOM_INIT_STD if init_scale is None else _check_scale(init_scale)
    cols = setting.r * (2 if untied else 1)
    if not isinstance(init, str):
        Q = torch.as_tensor(np.asarray(init, dtype=np.float64) if not torch.is_tensor(init) else init)
        Q = Q.detach().to(dtype=torch.float64)
        if Q.ndim == 1:
            Q = Q[:, None]
        if tuple(Q.shape) != (d, cols):
            raise InputError(
                f"Q0 must have shape ({d}, {cols}){' (Q and K side by side)' if untied else ''}"
                f"{' (or (' + str(d) + ',) for r = 1)' if cols == 1 else ''}, got {tuple(Q.shape)}")
        if not torch.all(torch.isfinite(Q)):
            raise InputError("Q0 must contain only finite numbers")
        return Q.to(dtype=dtype, device=device), "custom"
    if init == "positional":
        Q = _positional_start(problem, setting.r, seed, scale)
    elif init == "positional_unit":
        Q = _positional_start(problem, setting.r, seed, scale) / math.sqrt(d)
        if setting.is_study_geometry:
            Q = torch.full((d, setting.r), 1.0 / math.sqrt(d), dtype=torch.float64)
    elif init == "semantic":
        Qs = problem.Q_star.detach().to(device="cpu", dtype=torch.float64)
        if setting.r <= setting.r_star:
            Q = Qs[:, : setting.r].clone()
        else:
            g = generators(seed)["init"]
            pad = scale * torch.randn((d, setting.r - setting.r_star), generator=g, dtype=torch.float64)
            Q = torch.cat([Qs, pad], dim=1)
        if setting.r == setting.r_star and not untied:
            return problem.Q_star.clone(), init
    elif init == "random":
        g = generators(seed)["init"]
        Q = scale * torch.randn((d, cols), generator=g, dtype=torch.float64)
        return Q.to(dtype=dtype, device=device), init
    else:
        raise InputError(f"init must be one of {', '.join(INITS)} (or an array), got {init!r}")
    if untied:
        Q = torch.cat([Q, Q], dim=1)
    return Q.to(dtype=dtype, device=device), init


def measure(W: torch.Tensor, problem: SampledProblem, student: str = "tied") -> dict[str, Any]:
    """The recorded overlaps of weights W: q, m, theta as in docs/model.md (r = r* = 1: |m|, |theta|);
    general settings add m_norm and theta_sv; the untied student adds each factor's overlaps.

    Untied student, r = r* = 1: m = sqrt(|m_Q m_K|) and theta = sqrt(|theta_Q theta_K|) (geometric means:
    at Q = K they are the tied student's |m| and |theta|, and they are invariant under the symmetry
    (Q, K) -> (c Q, K / c) of the scores); q = sigma^2 Q^T K / d (the score's bilinear form).  For r > 1
    the untied record's q, m, theta are those of Q.
    """
    setting = problem.setting
    sigma = setting.sigma
    Q, K = split_weights(W, student)
    p = None if setting.is_study_geometry else problem.p
    ov = overlaps(Q, problem.Q_star, sigma, p)
    out: dict[str, Any] = {"q": scalar_or_list(ov.q, absolute=False), "m": scalar_or_list(ov.m, absolute=True),
                           "theta": scalar_or_list(ov.theta, absolute=True)}
    if not setting.is_study_geometry:
        out["m_norm"] = ov.m_norm
        out["theta_sv"] = ov.theta_sv
    if student == "untied":
        ok = overlaps(K, problem.Q_star, sigma, p)
        Qd, Kd = Q.detach().to(torch.float64), K.detach().to(torch.float64)
        qqk = (sigma**2 * Qd.T @ Kd / problem.d).cpu().numpy()
        out.update({"m_Q": scalar_or_list(ov.m, False), "m_K": scalar_or_list(ok.m, False),
                    "theta_Q": scalar_or_list(ov.theta, False), "theta_K": scalar_or_list(ok.theta, False),
                    "q_Q": scalar_or_list(ov.q, False), "q_K": scalar_or_list(ok.q, False),
                    "q_QK": scalar_or_list(qqk, False)})
        if ov.m.size == 1 and ov.theta.size == 1:
            out["m"] = math.sqrt(abs(float(ov.m.reshape(())) * float(ok.m.reshape(()))))
            out["theta"] = math.sqrt(abs(float(ov.theta.reshape(())) * float(ok.theta.reshape(()))))
            out["q"] = float(qqk.reshape(()))
    return out


def simulate(setting: Setting, d: int, alpha: float, init: str | np.ndarray = "positional",
             optimizer: str = "gd", seed: int = 0, n_test: int = 10000, dtype: str = "float64",
             device: str | None = None, Q0: np.ndarray | torch.Tensor | None = None, student: str = "tied",
             init_scale: float | None = None, record_every: int = 0,
             **optimizer_options: Any) -> SimulationResult:
    """Train the attention layer on n = round(alpha d) samples and measure it (docs/model.md).

    init: "positional" (Q in the span of the positional codes; study: every entry 1, m = 1), "semantic"
    (Q = Q*), "random" (iid N(0, init_scale^2), default scale 0.1), "positional_unit" (the positional
    start divided by sqrt(d)), or an array of shape (d, r) ((d, 2r) = [Q | K] untied); Q0, if given,
    overrides init (recorded as "custom").
    optimizer: "gd" (lr 0.15, 5000 steps), "adam" (lr 0.01, 2500 steps) or "lbfgs" (to g_rms <= 1e-9);
    options steps, lr, gtol (and history for lbfgs) override the defaults.  linear_ridge (default 0)
    sets the ridge of the closed-form linear baseline.
    student: "tied" (Q = K, the study's) or "untied" (separate Q and K, each with the l2 penalty).
    record_every: keep a trajectory (step, train_loss, q, m, theta, ...) every that many steps.
    The run's memory is estimated first; a run that cannot fit is refused with a ValueError.
    """
    t0 = time.perf_counter()
    linear_ridge = optimizer_options.pop("linear_ridge", 0.0) or 0.0
    if not isinstance(linear_ridge, int | float) or not math.isfinite(linear_ridge) or linear_ridge < 0:
        raise InputError(f"linear_ridge must be finite and >= 0, got {linear_ridge!r}")
    if not isinstance(setting, Setting):
        raise InputError(f"setting must be an attnphase Setting, got {type(setting).__name__}")
    n = check_size(d, alpha)
    if isinstance(init, str) and init not in INITS and Q0 is None:
        raise InputError(f"init must be one of {', '.join(INITS)} (or an array), got {init!r}")
    check_student(student)
    if init_scale is not None:
        init_scale = _check_scale(init_scale)
    if isinstance(n_test, bool) or not isinstance(n_test, int | np.integer) or n_test < 1:
        raise InputError(f"n_test must be a positive integer, got {n_test!r}")
    opts = _merged_options(optimizer, optimizer_options)
    tdtype, dev = resolve_dtype(dtype), resolve_device(device)
    check_memory(setting, d, alpha, int(n_test), optimizer, student, str(tdtype).removeprefix("torch."), str(dev))

    problem = sample_dataset(setting, d, alpha, seed=seed, n_test=n_test, dtype=tdtype, device=dev)
    Qinit, init_name = initial_Q(Q0 if Q0 is not None else init, problem, seed, student, init_scale)
    risk = EmpiricalRisk(problem.train, problem.p, setting.lam, student)
    observe = (lambda W: measure(W, problem, student)) if record_every else None
    Q, log = train(risk, Qinit, optimizer, record_every=record_every, observe=observe, **opts)

    ov = measure(Q, problem, student)
    with torch.no_grad():
        train_loss = float(risk(Q)) / d
    Qm, Km = split_weights(Q, student)
    te = generalization_error(problem.test, problem.p, Qm, None if student == "tied" else Km)
    B = fit_linear(problem.train, ridge=linear_ridge)
    te_lin = linear_test_error(problem.test, B)
    extra = {k: v for k, v in ov.items() if k not in ("q", "m", "theta")}
    return SimulationResult(
        d=int(d),
        n=n,
        alpha=float(alpha),
        omega=setting.omega,
        sigma=setting.sigma,
        lam=setting.lam,
        init=init_name,
        optimizer=optimizer,
        seed=int(seed),
        q=ov["q"],
        m=ov["m"],
        theta=ov["theta"],
        train_loss=train_loss,
        test_error=te,
        test_error_linear=te_lin,
        status=log.status,
        seconds=time.perf_counter() - t0,
        grad_norm=log.grad_norm,
        steps=int(log.steps),
        n_test=int(n_test),
        dtype=str(tdtype).removeprefix("torch."),
        device=str(dev),
        lr=log.lr,
        grad_rms=log.grad_rms,
        evaluations=int(log.evaluations),
        train_seconds=log.seconds,
        stop_reason=log.stop_reason,
        student=student,
        init_scale=(init_scale if init_scale is not None else RANDOM_INIT_STD) if init_name == "random" else None,
        extra=extra,
        loss_curve=log.loss_curve,
        trajectory=log.trajectory,
        Q=Q.detach().cpu().numpy(),
        B_linear=B.cpu().numpy(),
        warnings=log.warnings,
    )
