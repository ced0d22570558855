"""Integration points for the Gaussian expectations of the channel.

The proximal map's global minimiser jumps between two mirror basins across a surface in (xi, eta)
space, so the channel integrands are discontinuous and tensor Gauss-Hermite rules converge slowly and
erratically.  We use randomised quasi-Monte Carlo instead: independent Owen
scramblings of a Sobol sequence mapped to Gaussians.  Each scrambling is an unbiased estimate, so the
spread over scramblings is an honest error estimate.  Smooth integrands (test error, baseline) use a
tensor Gauss-Hermite rule, whose error we estimate by comparing two orders.
"""

from __future__ import annotations

import os
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np

from attnphase.errors import InputError

# Scrambled Sobol points are drawn by scipy.stats.qmc, and importing scipy.stats takes about 2 s (more than a whole
# fixed point at fast precision), so each set drawn is also kept on disk, bitwise, and later processes read it back
# without importing scipy.stats.  The file name holds every input of the draw, scipy's and numpy's versions
# included (their generators define the points).  ATTNPHASE_CACHE_DIR overrides the place; an empty value turns
# the disk cache off.
CACHE_ENV = "ATTNPHASE_CACHE_DIR"


def cache_dir() -> Path | None:
    """Where drawn point sets are kept: $ATTNPHASE_CACHE_DIR, else $XDG_CACHE_HOME/attnphase or ~/.cache/attnphase
    (None: off)."""
    if CACHE_ENV in os.environ:
        return Path(os.environ[CACHE_ENV]) if os.environ[CACHE_ENV] else None
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "attnphase"


def _draw_gaussian_sobol(log2_n: int, dim: int, seed: int) -> np.ndarray:
    from scipy.special import ndtri
    from scipy.stats import qmc

    sampler = qmc.Sobol(d=dim, scramble=True, seed=np.random.default_rng(seed))
    u = sampler.random_base2(log2_n)
    # Owen scrambling never returns exact 0, but guard the tails against ndtri(0) = -inf anyway.
    u = np.clip(u, 1e-16, 1.0 - 1e-16)
    return ndtri(u)


def _cache_file(log2_n: int, dim: int, seed: int) -> Path | None:
    where = cache_dir()
    if where is None:
        return None
    import scipy  # the package only (cheap), for its version

    return where / f"sobol-gauss-{log2_n}-{dim}-{seed}-scipy{scipy.__version__}-numpy{np.__version__}.npy"


def _read(path: Path, shape: tuple[int, int]) -> np.ndarray | None:
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    ok = z.shape == shape and z.dtype == np.float64 and bool(np.all(np.isfinite(z)))
    return z if ok else None


def _write(path: Path, z: np.ndarray) -> None:
    """Atomically (a temporary file renamed), so that concurrent processes never read half a file; a cache that
    cannot be written is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, z, allow_pickle=False)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


@lru_cache(maxsize=64)
def _gaussian_sobol(log2_n: int, dim: int, seed: int) -> np.ndarray:
    path = _cache_file(log2_n, dim, seed)
    z = None if path is None else _read(path, (1 << log2_n, dim))
    if z is None:
        z = _draw_gaussian_sobol(log2_n, dim, seed)
        if path is not None:
            _write(path, z)
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
