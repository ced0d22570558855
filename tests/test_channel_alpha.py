"""The channel side's dependence on alpha: every hat overlap is alpha times an expectation that does not depend on
alpha (model/channel.py), so one channel evaluation gives the map at every alpha (docs/numerics.md, the ladder's
walk as a pseudo-arclength path)."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.setting import Setting
from attnphase.theory.model.channel import update_hatoverlaps
from attnphase.theory.model.overlaps import Branch
from attnphase.theory.state_evolution.precision import integration_points
from attnphase.theory.state_evolution.starts import default_start


@pytest.mark.parametrize("setting", [Setting(), Setting(r=2), Setting(L=3), Setting(student="untied")],
                         ids=["study", "r2", "L3", "untied"])
def test_hat_overlaps_are_alpha_times_an_alpha_free_expectation(setting: Setting) -> None:
    """Two channel evaluations at alpha 0.7 and 2.1 (the same points, the same overlaps) differ by the factor 3 in
    every hat overlap, to round-off."""
    o = default_start(setting, "positional")
    pts = integration_points(setting, "fast", 0, 0)
    lo = update_hatoverlaps(setting, 0.7, o, pts, Branch.positional).hats
    hi = update_hatoverlaps(setting, 2.1, o, pts, Branch.positional).hats
    for name in ("qhat", "mhat", "Vhat", "thetahat"):
        a, b = getattr(lo, name), getattr(hi, name)
        np.testing.assert_allclose(b, 3.0 * a, rtol=1e-12, atol=1e-14 * max(1.0, float(np.abs(b).max())))
