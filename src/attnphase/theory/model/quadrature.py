"""Integration points for the Gaussian expectations of the channel.

The proximal map's global minimiser jumps between two mirror basins across a surface in (xi, eta)
space, so the channel integrands are discontinuous and tensor Gauss-Hermite rules converge slowly and
erratically.  We use randomised quasi-Monte Carlo instead: independent Owen
scramblings of a Sobol sequence mapped to Gaussians.  Each scrambling is an unbiased estimate, so the
spread over scramblings is an honest error estimate.  Smooth integrands (test error, baseline) use a
tensor Gauss-Hermite rule, whose error we estimate by comparing two orders.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import ndtri
from scipy.stats import qmc

from attnphase.errors import InputError


@lru_cache(maxsize=64)
def _gaussian_sobol(log2_n: int, dim: int, seed: int) -> np.ndarray:
    sampler = qmc.Sobol(d=dim, scramble=True, seed=np.random.default_rng(seed))
    u = sampler.random_base2(log2_n)
    # Owen scrambling never returns exact 0, but guard the tails against ndtri(0) = -inf anyway.
    u = np.clip(u, 1e-16, 1.0 - 1e-16)
    z = ndtri(u)
    z.setflags(write=False)
    return z


def gaussian_sobol(log2_n: int, dim: int, seed: int) -> np.ndarray:
    """2^log2_n scrambled-Sobol points in R^dim, standard Gaussian marginals, shape (dim, n). Cached."""
    if not 1 <= log2_n <= 24:
        raise InputError(f"log2_n must be in [1, 24], got {log2_n}")
    return _gaussian_sobol(int(log2_n), int(dim), int(seed)).T


@lru_cache(maxsize=16)
def gauss_hermite(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the n-point rule for E[g(Z)], Z ~ N(0, 1) (weights sum to 1)."""
    x, w = np.polynomial.hermite_e.hermegauss(n)
    return x, w / w.sum()


@lru_cache(maxsize=16)
def gauss_hermite_grid(n: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Tensor-product rule: points of shape (dim, n^dim) and weights (n^dim,). Cached, read-only."""
    x, w = gauss_hermite(n)
    grids = np.meshgrid(*([x] * dim), indexing="ij")
    wgrids = np.meshgrid(*([w] * dim), indexing="ij")
    pts = np.stack([g.ravel() for g in grids])
    wts = np.prod(np.stack([g.ravel() for g in wgrids]), axis=0)
    pts.setflags(write=False)
    wts.setflags(write=False)
    return pts, wts
