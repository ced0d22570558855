"""Helpers shared by several test files.  Test files import them from here (``from conftest import ...``)
and never from each other.

The sweep tasks are module-level so that spawned worker processes, Dask workers and the CLI's hidden
--task option (``conftest:slow_task``, with tests/ on PYTHONPATH) can import them by name.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from attnphase.experiments.sweep import GridPoint
from attnphase.theory.model.overlaps import HatOverlaps, Overlaps
from attnphase.theory.state_evolution.results import FixedPoint

TESTS_DIR = Path(__file__).resolve().parent
OMEGA = 0.3
LINEAR = 0.00197  # the linear baseline's test error at omega = 0.3 (the synthetic curves' reference)


# -- sweep tasks -------------------------------------------------------------------------------------------

def fake_task(point: GridPoint) -> dict:
    """Shaped like simulate(...).to_dict(); values are simple functions of the point for checking."""
    return {
        "d": point.d, "n": round(point.alpha * point.d), "alpha": point.alpha, "omega": point.omega,
        "sigma": point.sigma, "lam": point.lam, "init": point.init, "optimizer": point.optimizer,
        "seed": point.seed, "q": point.alpha * 10 + point.seed, "m": point.omega, "theta": 0.0,
        "train_loss": 1.0 / point.d, "test_error": point.alpha + point.omega, "test_error_linear": 0.002,
        "converged": True, "seconds": 0.0, "grad_norm": 0.0, "steps": 1, "pid": os.getpid(),
    }


def slow_task(point: GridPoint) -> dict:
    piddir = os.environ.get("ATTNPHASE_TEST_PIDDIR")
    if piddir:  # lets a test find the worker processes of a sweep it is about to kill
        Path(piddir, str(os.getpid())).touch()
    time.sleep(float(os.environ.get("ATTNPHASE_TEST_SLEEP", "0.15")))
    return fake_task(point)


def flaky_task(point: GridPoint) -> dict:
    if point.init == "semantic" and point.alpha > 0.5:
        raise RuntimeError(f"diverged at alpha={point.alpha}")
    return fake_task(point)


# -- synthetic theory curves -------------------------------------------------------------------------------

def make_fixed_point(alpha: float, branch: str, *, train_loss: float, test_error: float, m: float,
                     theta: float, status: str = "ok", converged: bool = True, err: float = 2e-5) -> FixedPoint:
    return FixedPoint(
        alpha=alpha, omega=OMEGA, branch=branch,
        overlaps=Overlaps(q=0.1 + 0.2 * alpha, m=m, V=15.0, theta=theta),
        hats=HatOverlaps(qhat=0.0, mhat=0.0, Vhat=0.0, thetahat=0.0), train_loss=train_loss,
        test_error=test_error,
        errors={"train_loss": err, "test_error": err, "m": 1e-3, "theta": 1e-3}, converged=converged,
        iterations=10, residual=1e-8, status=status,
    )


def synthetic_curves(alphas: np.ndarray | None = None) -> dict[str, list[FixedPoint]]:
    """Two branches whose train losses cross at alpha = 1 and whose semantic test error falls below LINEAR
    at alpha = 1.25; the semantic branch has a spinodal at alpha = 0.35 and one collapsed point."""
    alphas = np.linspace(0.1, 2.0, 20) if alphas is None else alphas
    pos = [make_fixed_point(a, "positional", train_loss=0.003 - 0.0004 * a, test_error=0.0030 - 0.0002 * a,
                            m=0.2 + 0.05 * a, theta=0.0) for a in alphas]
    sem = [make_fixed_point(a, "semantic", train_loss=0.003 - 0.0004 * a + 0.0006 * (1 - a),
                            test_error=LINEAR + 0.002 * (1.25 - a), m=0.0, theta=0.1 + 0.1 * a)
           for a in alphas if a > 0.35]
    if len(sem) > 3:
        sem[3] = make_fixed_point(sem[3].alpha, "semantic", train_loss=0.0, test_error=0.0, m=0.0, theta=0.0,
                                  status="collapsed")
    return {"positional": pos, "semantic": sem}


# -- gradient checks of an empirical risk ---------------------------------------------------------------------

def assert_gradient_matches_autograd_and_finite_differences(risk, W) -> None:  # noqa: ANN001 - torch objects
    """The risk's hand-written value and gradient against autograd (to round-off) and central differences."""
    import pytest
    import torch

    R, g = risk.value_and_grad(W)
    R_auto, g_auto = risk.autograd_value_and_grad(W)
    assert R == pytest.approx(R_auto, rel=1e-13)
    np.testing.assert_allclose(g.numpy(), g_auto.numpy(), rtol=1e-10, atol=1e-13)
    fd = torch.zeros_like(W)
    eps = 1e-6
    with torch.no_grad():
        for idx in np.ndindex(*W.shape):
            e = torch.zeros_like(W)
            e[idx] = eps
            fd[idx] = (risk(W + e) - risk(W - e)) / (2 * eps)
    np.testing.assert_allclose(g.numpy(), fd.numpy(), rtol=1e-6, atol=1e-8)


def capture_figures(monkeypatch) -> list:  # noqa: ANN001 - pytest's MonkeyPatch
    """Every figure any plots module saves (through the one save rule, attnphase.plots.style.save_figure), appended
    to the returned list (the figure is still written)."""
    from attnphase.plots import style

    figs: list = []
    original = style.save_figure

    def save(fig, out):  # noqa: ANN001, ANN202
        figs.append(fig)
        return original(fig, out)

    monkeypatch.setattr(style, "save_figure", save)
    return figs
