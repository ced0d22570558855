"""Minimising the empirical risk R(Q): full-batch gradient descent (the study's), Adam, and L-BFGS.

Convergence is judged on the scale-free gradient g_rms = ||grad R||_F / sqrt(d r), the root-mean-square
gradient per entry of Q (O(1) at a generic point because R is a sum over n = alpha d samples).  Since the
Hessian of R is at least ~lambda away from flat directions, |Q - Q_min| per entry is at most about
g_rms / lambda, and the excess risk per dimension about g_rms^2 / (2 lambda); the defaults below are
chosen so that a converged run's overlaps are accurate to ~1e-3 (gd, adam) or to round-off (lbfgs).

* gd / adam run a fixed number of steps (as the study did); the status is ok when g_rms <= gtol at the end.
* lbfgs first takes `warmup` (default 50) plain gradient steps with the gd learning rate, then iterates
  L-BFGS (strong-Wolfe line search) until g_rms <= gtol (or `steps` iterations, or no further progress
  is possible).  Why the warm-up: from the positional start (m = 1, far from the minimum at m ~ 0.25)
  the first L-BFGS line searches can carry Q across into another local minimum than the one gradient
  descent (the study's dynamics) settles in; measured at d = 800, alpha = 1.5, omega = 0.3: one of three
  seeds ended at m = 0.10 instead of GD's 0.26 with a 20% higher training loss.  30 GD steps already
  sufficed there for L-BFGS to reach GD's minimum; 50 leave a margin at negligible cost.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch

from attnphase.errors import InputError
from attnphase.experiments.simulation.lbfgs import FlatLBFGS
from attnphase.experiments.simulation.model import EmpiricalRisk
from attnphase.notes import Note, NoteCode, Status

OPTIMIZERS = ("gd", "adam", "lbfgs")

DEFAULTS: dict[str, dict[str, Any]] = {
    # The study: full-batch GD, learning rate 0.15, 5000 steps; the weight decay is R's lambda term.
    "gd": {"lr": 0.15, "steps": 5000, "gtol": 1e-5},
    "adam": {"lr": 0.01, "steps": 2500, "gtol": 1e-5},
    "lbfgs": {"lr": 1.0, "steps": 5000, "gtol": 1e-9, "history": 50, "warmup": 50, "warmup_lr": 0.15},
}
# float32 cannot resolve gradients much below ~1e-5 of their generic size: never ask for more.
_GTOL_FLOOR = {torch.float64: 0.0, torch.float32: 1e-5}
_CURVE_POINTS = 500
# Below this many entries in x + p one step is a few hundred microseconds of small operations, and
# torch's intra-op threads only add synchronisation (5x slower on a busy 2-core machine): train such
# problems on one CPU thread (restored afterwards).
_SMALL_PROBLEM = 1 << 20


@contextmanager
def _threads_for(risk: EmpiricalRisk):
    old = torch.get_num_threads()
    if risk.z.device.type == "cpu" and risk.z.numel() < _SMALL_PROBLEM and old > 1:
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(old)
    else:
        yield


@dataclass
class TrainingLog:
    """What an optimisation run did.  loss_curve holds R(Q)/d (subsampled to ~500 points)."""

    optimizer: str
    lr: float
    steps: int
    evaluations: int
    grad_norm: float
    grad_rms: float
    gtol: float
    status: Status
    seconds: float
    stop_reason: str  # the message: why the run stopped (also when it is ok)
    loss_curve: list[float] = field(default_factory=list)
    trajectory: list[dict[str, Any]] = field(default_factory=list)
    warnings: tuple[Note, ...] = ()  # why a run that is not ok stopped short, as a code

    @property
    def converged(self) -> bool:
        return self.status == Status.ok


class _Stop(Enum):
    """Why a runner returned (None: gd / adam spent their steps)."""

    max_iter = "max_iter"  # L-BFGS spent its iterations
    gradient = "gradient below tolerance"
    diverged = "diverged (non-finite risk)"
    no_progress = "no further progress (round-off)"


class _Tracer:
    """Records (step, R/d, observe(Q)) every `every` gradient evaluations; a no-op when every = 0."""

    def __init__(self, every: int, observe: Callable[[torch.Tensor], dict[str, Any]] | None, d: int) -> None:
        self.every, self.observe, self.d = int(every), observe, d
        self.count = 0
        self.rows: list[dict[str, Any]] = []

    def __call__(self, Q: torch.Tensor, R: float, force: bool = False) -> None:
        if self.every and (force or self.count % self.every == 0):
            row = {"step": self.count, "train_loss": R / self.d}
            if self.observe is not None:
                row.update(self.observe(Q))
            self.rows.append(row)
        self.count += 1


MAX_STEPS = 10_000_000  # optimiser steps of one run: hours at d = 1000, far above any study's need


def optimizer_options(optimizer: str, options: dict[str, Any]) -> dict[str, Any]:
    """Defaults merged with the user's options; unknown names or bad values raise ValueError."""
    if optimizer not in OPTIMIZERS:
        raise InputError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    opts = dict(DEFAULTS[optimizer])
    for k, v in options.items():
        if v is None:
            continue
        if k not in opts:
            raise InputError(f"unknown option {k!r} for optimizer {optimizer!r} (known: {', '.join(opts)})")
        opts[k] = v
    if isinstance(opts["steps"], bool) or not isinstance(opts["steps"], int) or opts["steps"] < 1:
        raise InputError(f"steps must be a positive integer, got {opts['steps']!r}")
    if opts["steps"] > MAX_STEPS:  # 10^12 steps used to run in silence for days
        raise InputError(f"steps must be at most {MAX_STEPS:,} (the study uses 5000), got {opts['steps']:,}")
    for k in ("lr", "gtol"):
        try:
            x = float(opts[k])
        except (TypeError, ValueError):
            raise InputError(f"{k} must be a number, got {opts[k]!r}") from None
        bad = x <= 0 if k == "lr" else x < 0
        if not math.isfinite(x) or bad:
            raise InputError(f"{k} must be finite and {'> 0' if k == 'lr' else '>= 0'}, got {opts[k]!r}")
        opts[k] = x
    for k, low in (("history", 1), ("warmup", 0)):
        if k in opts and (isinstance(opts[k], bool) or not isinstance(opts[k], int) or opts[k] < low):
            raise InputError(f"{k} must be an integer >= {low}, got {opts[k]!r}")
    if "warmup_lr" in opts:
        x = opts["warmup_lr"]
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x <= 0:
            raise InputError(f"warmup_lr must be finite and > 0, got {x!r}")
    return opts


def _rms(g: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(g)) / math.sqrt(g.numel())


def train(risk: EmpiricalRisk, Q0: torch.Tensor, optimizer: str = "gd", record_every: int = 0,
          observe: Callable[[torch.Tensor], dict[str, Any]] | None = None,
          **options: Any) -> tuple[torch.Tensor, TrainingLog]:
    """Minimise risk(Q) from Q0; returns the final Q (detached) and a TrainingLog.

    record_every = k > 0 keeps a trajectory: every k-th gradient evaluation (gd/adam: every k steps; lbfgs:
    its warm-up steps, then every k-th evaluation that lowers the risk below all earlier ones, so that
    rejected line-search trials are left out) and the end point, each as {step, train_loss,
    **observe(Q)} in TrainingLog.trajectory.
    """
    opts = optimizer_options(optimizer, options)
    opts["gtol"] = max(opts["gtol"], _GTOL_FLOOR.get(Q0.dtype, 0.0))
    if isinstance(record_every, bool) or not isinstance(record_every, int) or record_every < 0:
        raise InputError(f"record_every must be an integer >= 0, got {record_every!r}")
    tracer = _Tracer(record_every, observe, risk.d)
    opts["_trace"] = tracer
    t0 = time.perf_counter()
    runner = {"gd": _gd, "adam": _adam, "lbfgs": _lbfgs}[optimizer]
    with _threads_for(risk):
        Q, steps, evals, curve, stop = runner(risk, Q0.detach().clone(), opts)
        R, g = risk.value_and_grad(Q)
        tracer(Q, R, force=True)
    rms = _rms(g)
    curve.append(R / risk.d)
    notes: tuple[Note, ...] = ()
    if not (math.isfinite(R) and math.isfinite(rms)):
        status, reason = Status.diverged, _Stop.diverged.value
    elif rms <= opts["gtol"]:
        status, reason = Status.ok, _Stop.gradient.value
    else:
        status = Status.not_converged
        if stop is _Stop.no_progress:
            notes = (Note(NoteCode.no_progress, stop.value),)
        elif stop is _Stop.max_iter:
            notes = (Note(NoteCode.max_iterations, f"max_iter = {opts['steps']} iterations reached"),)
        else:
            notes = (Note(NoteCode.max_iterations, f"{steps} steps done, gradient above tolerance"),)
        reason = notes[0].message
    return Q.detach(), TrainingLog(
        optimizer=optimizer,
        lr=opts["lr"],
        steps=steps,
        evaluations=evals + 1,
        grad_norm=float(torch.linalg.vector_norm(g)),
        grad_rms=rms,
        gtol=opts["gtol"],
        status=status,
        seconds=time.perf_counter() - t0,
        stop_reason=reason,
        loss_curve=curve,
        trajectory=tracer.rows,
        warnings=notes,
    )


def _every(steps: int) -> int:
    return max(1, steps // _CURVE_POINTS)


def _gd(risk: EmpiricalRisk, Q: torch.Tensor, opts: dict[str, Any]):
    lr, steps, every = opts["lr"], opts["steps"], _every(opts["steps"])
    trace = opts.get("_trace")
    curve: list[float] = []
    for t in range(steps):
        R, g = risk.value_and_grad(Q)
        if trace is not None:
            trace(Q, R)
        if t % every == 0:
            curve.append(R / risk.d)
            if not math.isfinite(R):
                return Q, t, t + 1, curve, _Stop.diverged
        Q = Q - lr * g
    return Q, steps, steps, curve, None


def _adam(risk: EmpiricalRisk, Q: torch.Tensor, opts: dict[str, Any]):
    steps, every = opts["steps"], _every(opts["steps"])
    opt = torch.optim.Adam([Q], lr=opts["lr"])
    trace = opts.get("_trace")
    curve: list[float] = []
    for t in range(steps):
        R, Q.grad = risk.value_and_grad(Q)
        if trace is not None:
            trace(Q.detach(), R)
        if t % every == 0:
            curve.append(R / risk.d)
            if not math.isfinite(R):
                return Q.detach(), t, t + 1, curve, _Stop.diverged
        opt.step()
    return Q.detach(), steps, steps, curve, None


def _lbfgs(risk: EmpiricalRisk, Q: torch.Tensor, opts: dict[str, Any]):
    max_iter, gtol = opts["steps"], opts["gtol"]
    warm_steps, warm_evals, warm_curve = 0, 0, []
    if opts["warmup"]:
        Q, warm_steps, warm_evals, warm_curve, stop = _gd(
            risk, Q, {"lr": opts["warmup_lr"], "steps": opts["warmup"], "_trace": opts.get("_trace")})
        if stop is not None:
            return Q, warm_steps, warm_evals, warm_curve, stop
    Qp = Q.clone()
    # torch stops on max|g| <= tolerance_grad, which implies our g_rms <= gtol; our own check between
    # short chunks catches the (usual) case where the rms criterion is met first.
    chunk = 25
    opt = FlatLBFGS(Qp, lr=opts["lr"], max_iter=chunk, max_eval=chunk * 2, tolerance_grad=gtol,
                    tolerance_change=0.0, history_size=opts["history"], line_search_fn="strong_wolfe")
    curve: list[float] = []
    trace = opts.get("_trace")
    best = [math.inf]
    last: list[Any] = [None, math.nan, None]  # the latest evaluation: point, R, gradient

    def closure() -> float:
        R, Qp.grad = risk.value_and_grad(Qp)
        curve.append(R / risk.d)
        last[0], last[1], last[2] = Qp.detach().clone(), R, Qp.grad
        # trajectories keep only evaluations that improve on the best so far: line-search trials that
        # overshoot are not points of the descent
        if trace is not None and R < best[0]:
            best[0] = R
            trace(Qp.detach(), R)
        return R

    stop = _Stop.max_iter
    state_iter, prev_R = 0, math.inf
    while state_iter < max_iter:
        opt.step(closure)
        state_iter = opt.state.get("n_iter", 0)
        if last[0] is not None and torch.equal(last[0], Qp):
            R, g = last[1], last[2]  # the line search ended on its last trial point: no need to re-evaluate
        else:
            R, g = risk.value_and_grad(Qp)
        if _rms(g) <= gtol:
            stop = _Stop.gradient
            break
        if not math.isfinite(R):
            stop = _Stop.diverged
            break
        if R >= prev_R:
            # a whole chunk of iterations without any decrease: the line search is at round-off
            stop = _Stop.no_progress
            break
        prev_R = R
    evals = len(curve)
    every = max(1, evals // _CURVE_POINTS)
    return Qp.detach(), warm_steps + state_iter, warm_evals + evals, warm_curve + curve[::every], stop
