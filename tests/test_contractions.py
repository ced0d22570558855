"""theory/model/contractions.py: the channel's compiled contractions over the points against numpy's einsum (the
definition), on the strided views the channel passes them and on contiguous arrays; bad shapes refused."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.theory.model.channel import split_points
from attnphase.theory.model.contractions import outer_sum, right_matmul


@pytest.mark.parametrize("L,r,rs", [(2, 2, 1), (3, 2, 2), (2, 4, 1), (4, 1, 3)])
def test_contractions_equal_einsum(L: int, r: int, rs: int) -> None:
    rng = np.random.default_rng(10 * L + r)
    z = rng.normal(size=(L * (r + rs), 1000))
    xi, eta = split_points(z, L, r, rs)  # strided views, as in the channel
    M = rng.normal(size=(r, rs))
    f = rng.normal(size=(1000, L, r))  # contiguous
    np.testing.assert_allclose(right_matmul(xi, M), np.einsum("nla,ab->nlb", xi, M), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(right_matmul(f, M), np.einsum("nla,ab->nlb", f, M), rtol=1e-13, atol=1e-13)
    for a, b in ((f, xi), (f, eta), (f, f), (eta, xi)):
        np.testing.assert_allclose(outer_sum(a, b), np.einsum("nla,nlb->ab", a, b), rtol=1e-12, atol=1e-10)


def test_contractions_refuse_mismatched_shapes() -> None:
    x = np.zeros((5, 2, 3))
    with pytest.raises(ValueError, match="do not match"):
        right_matmul(x, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="do not match"):
        outer_sum(x, np.zeros((4, 2, 3)))
    with pytest.raises(ValueError, match="do not match"):
        right_matmul(np.zeros((5, 3)), np.zeros((3, 3)))
