"""The study's test error (theory/model/observables.py: a tensor Gauss-Hermite rule over the compiled per-sample
loss) against the model's own loss (attnphase.problem) at the same nodes and against Monte Carlo samples of the
fields' joint Gaussian law."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase import Setting
from attnphase.problem import loss, student_attention, teacher_attention
from attnphase.theory.model.observables import test_error as population_loss
from attnphase.theory.model.observables import test_error_estimate as coarse_loss
from attnphase.theory.model.overlaps import Overlaps
from attnphase.theory.model.quadrature import gauss_hermite_grid

CASES = [
    (Setting(omega=0.3), Overlaps(q=[[0.08]], m=[[0.21], [-0.17]], V=[[1.0]], theta=[[0.0]])),
    (Setting(omega=0.3), Overlaps(q=[[0.09]], m=[[0.0], [0.0]], V=[[1.0]], theta=[[0.13]])),
    (Setting(omega=0.0, sigma=2.0), Overlaps(q=[[0.4]], m=[[0.3], [0.1]], V=[[1.0]], theta=[[0.2]])),
    (Setting(omega=0.7, A=[[0.8, 0.2], [0.4, 0.6]]), Overlaps(q=[[1.5]], m=[[-0.5], [0.9]], V=[[1.0]],
                                                              theta=[[-0.6]])),
]


def _fields(setting: Setting, o: Overlaps, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """h_l = m_l + sqrt(q) xi_l and h*_l = theta / sqrt(q) xi_l + sqrt(rho - theta^2 / q) eta_l, as (n, 2, 1)."""
    q, th = float(o.q[0, 0]), float(o.theta[0, 0])
    h = np.sqrt(q) * z[:2].T + o.m[:, 0]
    hs = th / np.sqrt(q) * z[:2].T + np.sqrt(setting.rho - th * th / q) * z[2:].T
    return h[:, :, None], hs[:, :, None]


def _model_loss(setting: Setting, o: Overlaps, z: np.ndarray) -> np.ndarray:
    h, hs = _fields(setting, o, z)
    return loss(student_attention(h), teacher_attention(hs, setting.omega, setting.A_array), setting.sigma**2)


@pytest.mark.parametrize("setting, o", CASES)
def test_study_test_error_is_the_models_loss_at_the_same_nodes(setting: Setting, o: Overlaps) -> None:
    """The fine rule's value and the coarse one's (the per-scrambling estimate) equal problem.loss summed with the
    rule's weights, to round-off."""
    value, _ = population_loss(setting, o)
    for n, got in ((20, value), (14, coarse_loss(setting, o))):
        z, w = gauss_hermite_grid(n, 4)
        assert got == pytest.approx(float(np.sum(w * _model_loss(setting, o, z))), rel=1e-12)


@pytest.mark.parametrize("setting, o", CASES)
def test_study_test_error_against_monte_carlo(setting: Setting, o: Overlaps) -> None:
    """Within 4 Monte Carlo standard errors plus twice the rule's own error estimate (the 20- against the 14-point
    rule: small at the study's overlaps, up to 1% where q and sigma are large)."""
    z = np.random.default_rng(7).standard_normal((4, 2**18))
    sample = _model_loss(setting, o, z)
    mean, sem = float(sample.mean()), float(sample.std(ddof=1) / np.sqrt(sample.size))
    value, err = population_loss(setting, o)
    assert abs(value - mean) < 4 * sem + 2 * err
