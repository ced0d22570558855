"""One finite-d experiment: sample, train the attention layer, measure, fit the linear baseline."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attnphase.setting import Setting
from attnphase.simulation.measure import (
    fit_linear,
    generalization_error,
    linear_test_error,
    overlaps,
    scalar_or_list,
)
from attnphase.simulation.model import EmpiricalRisk
from attnphase.simulation.sampling import (
    Problem,
    check_size,
    generators,
    resolve_device,
    resolve_dtype,
    sample_dataset,
)
from attnphase.simulation.training import optimizer_options as _merged_options
from attnphase.simulation.training import train

INITS = ("positional", "semantic", "random", "positional_unit")

# Positional start: every entry of Q equal to 1, i.e. Q = sqrt(d) p_1, so that m = 1^T Q / d = 1 and
# q = sigma^2: the same O(1)-per-entry scale as the semantic start Q = Q*.  MODEL.md's "Q = 1/sqrt(d)"
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
    converged: bool
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
    loss_curve: list[float] = field(default_factory=list, repr=False)
    Q: np.ndarray | None = field(default=None, repr=False)
    B_linear: np.ndarray | None = field(default=None, repr=False)

    def to_dict(self, include_curve: bool = False) -> dict[str, Any]:
        """Plain JSON-serialisable values (non-finite floats become None); Q and B are left out."""
        out: dict[str, Any] = {}
        for name in SimulationResult.__dataclass_fields__:
            if name in ("Q", "B_linear") or (name == "loss_curve" and not include_curve):
                continue
            v = getattr(self, name)
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            out[name] = v
        return out


def initial_Q(init: str | np.ndarray | torch.Tensor, problem: Problem, seed: int) -> tuple[torch.Tensor, str]:
    """The starting Q (d, r) and the name recorded for it."""
    setting, d = problem.setting, problem.d
    dtype, device = problem.dtype, problem.device
    if not isinstance(init, str):
        Q = torch.as_tensor(np.asarray(init, dtype=np.float64) if not torch.is_tensor(init) else init)
        Q = Q.detach().to(dtype=torch.float64)
        if Q.ndim == 1:
            Q = Q[:, None]
        if tuple(Q.shape) != (d, setting.r):
            raise ValueError(
                f"Q0 must have shape ({d}, {setting.r}) (or ({d},) for r = 1), got {tuple(Q.shape)}")
        if not torch.all(torch.isfinite(Q)):
            raise ValueError("Q0 must contain only finite numbers")
        return Q.to(dtype=dtype, device=device), "custom"
    if init == "positional":
        Q = torch.full((d, setting.r), POSITIONAL_ENTRY, dtype=torch.float64)
    elif init == "positional_unit":
        Q = torch.full((d, setting.r), 1.0 / math.sqrt(d), dtype=torch.float64)
    elif init == "semantic":
        if setting.r != setting.r_star:
            raise ValueError(
                f"init 'semantic' (Q = Q*) needs r = r*, got r = {setting.r}, r* = {setting.r_star}")
        return problem.Q_star.clone(), init
    elif init == "random":
        g = generators(seed)["init"]
        Q = RANDOM_INIT_STD * torch.randn((d, setting.r), generator=g, dtype=torch.float64)
    else:
        raise ValueError(f"init must be one of {', '.join(INITS)} (or an array), got {init!r}")
    return Q.to(dtype=dtype, device=device), init


def simulate(setting: Setting, d: int, alpha: float, init: str | np.ndarray = "positional",
             optimizer: str = "gd", seed: int = 0, n_test: int = 10000, dtype: str = "float64",
             device: str | None = None, Q0: np.ndarray | torch.Tensor | None = None,
             **optimizer_options: Any) -> SimulationResult:
    """Train the attention layer on n = round(alpha d) samples and measure it (MODEL.md sections 1-2, 5).

    init: "positional" (every entry of Q equal to 1: m = 1), "semantic" (Q = Q*), "random"
    (iid N(0, 0.1^2)), "positional_unit" (every entry 1/sqrt(d)), or an array of shape (d, r); Q0, if
    given, overrides init (recorded as "custom").
    optimizer: "gd" (lr 0.15, 5000 steps), "adam" (lr 0.01, 2500 steps) or "lbfgs" (to g_rms <= 1e-9);
    options steps, lr, gtol (and history for lbfgs) override the defaults.  linear_ridge (default 0)
    sets the ridge of the closed-form linear baseline.
    """
    t0 = time.perf_counter()
    linear_ridge = optimizer_options.pop("linear_ridge", 0.0) or 0.0
    if not isinstance(linear_ridge, int | float) or not math.isfinite(linear_ridge) or linear_ridge < 0:
        raise ValueError(f"linear_ridge must be finite and >= 0, got {linear_ridge!r}")
    if not isinstance(setting, Setting):
        raise ValueError(f"setting must be an attnphase Setting, got {type(setting).__name__}")
    n = check_size(d, alpha)
    if isinstance(init, str) and init not in INITS and Q0 is None:
        raise ValueError(f"init must be one of {', '.join(INITS)} (or an array), got {init!r}")
    opts = _merged_options(optimizer, optimizer_options)
    tdtype, dev = resolve_dtype(dtype), resolve_device(device)

    problem = sample_dataset(setting, d, alpha, seed=seed, n_test=n_test, dtype=tdtype, device=dev)
    Qinit, init_name = initial_Q(Q0 if Q0 is not None else init, problem, seed)
    risk = EmpiricalRisk(problem.train, problem.p, setting.lam)
    Q, log = train(risk, Qinit, optimizer, **opts)

    ov = overlaps(Q, problem.Q_star, setting.sigma)
    with torch.no_grad():
        train_loss = float(risk(Q)) / d
    te = generalization_error(problem.test, problem.p, Q)
    B = fit_linear(problem.train, ridge=linear_ridge)
    te_lin = linear_test_error(problem.test, B)
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
        q=scalar_or_list(ov.q, absolute=False),
        m=scalar_or_list(ov.m, absolute=True),
        theta=scalar_or_list(ov.theta, absolute=True),
        train_loss=train_loss,
        test_error=te,
        test_error_linear=te_lin,
        converged=bool(log.converged),
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
        loss_curve=log.loss_curve,
        Q=Q.detach().cpu().numpy(),
        B_linear=B.cpu().numpy(),
    )
