"""Error bars (spread over scramblings) cover the difference to a much finer solve, in L (r + r*) = 6 dimensions."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase import Setting
from attnphase.theory import solve


@pytest.mark.slow
def test_error_bars_cover_finer_solve_L3():
    s = Setting(L=3)
    fast = solve(s, 1.5, "semantic", "fast")  # 4 x 2^13 points
    fine = solve(s, 1.5, "semantic", "default", seed=7)  # >= 6 x 2^15 points, other scramblings
    assert fast.converged and fine.converged
    a = {"train_loss": fast.train_loss, "test_error": fast.test_error, **fast.summary()}
    b = {"train_loss": fine.train_loss, "test_error": fine.test_error, **fine.summary()}
    for key in ("q", "V", "theta", "train_loss", "test_error"):
        err = np.hypot(fast.errors[key], fine.errors[key])
        assert abs(a[key] - b[key]) <= 4 * err + 1e-12, (key, a[key], b[key], err)
