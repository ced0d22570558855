"""Starting overlaps: the typical random start at finite d, or overlaps given by the caller.

Q_ij iid N(0, s^2) at dimension d.  With e_1..e_k an orthonormal basis of the positional span (p_l = sum_j C_lj e_j,
C C^T = G) and u = Q* / sqrt(d) (orthonormal as d -> infinity, and orthogonal to the e_j up to O(1/sqrt(d))):
    a = e^T Q / sqrt(d) (k x r), b = u^T Q / sqrt(d) (r* x r): iid N(0, s^2 / d) entries,
    m = C a,   theta = sigma^2 b^T,   q = sigma^2 (a^T a + b^T b + (s^2 / d) W),
W ~ Wishart(d - k - r*, I_r) the rest of Q^T Q.  So m and theta are of order s / sqrt(d) and q = sigma^2 s^2 I_r up to
O(s^2 / sqrt(d)).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.stats import wishart

from attnphase.errors import InputError
from attnphase.setting import Setting, check_int, check_number


def gram_factor(G: np.ndarray, tol: float = 1e-12) -> np.ndarray:
    """C (L x k) with C C^T = G, k = rank(G) (eigenvectors scaled by the square roots of their eigenvalues)."""
    w, U = np.linalg.eigh(np.asarray(G, dtype=float))
    keep = w > tol * max(1.0, float(np.abs(w).max()))
    return U[:, keep] * np.sqrt(w[keep])[None, :]


def random_start(setting: Setting, init_scale: float, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, m, theta) of Q with iid N(0, init_scale^2) entries at dimension d, drawn with `seed`."""
    s = check_number("init_scale", init_scale)
    if s <= 0:
        raise InputError(f"init_scale must be > 0, got {s:g}")
    d = check_int("d", d, 2)
    seed = check_int("seed", seed, 0)
    C = gram_factor(setting.gram)
    k, r, rs = C.shape[1], setting.r, setting.r_star
    if d <= k + rs + r:
        raise InputError(f"d must exceed rank(G) + r* + r = {k + rs + r}, got {d}")
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, r)) * s / np.sqrt(d)
    b = rng.standard_normal((rs, r)) * s / np.sqrt(d)
    W = np.atleast_2d(wishart(df=d - k - rs, scale=np.eye(r)).rvs(random_state=rng))
    s2 = setting.sigma**2
    q = s2 * (a.T @ a + b.T @ b + (s * s / d) * W)
    return 0.5 * (q + q.T), C @ a, s2 * b.T


def explicit_start(setting: Setting, init: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, m, theta) from a mapping with keys q, m, theta (arrays of shapes r x r, L x r, r x r*) or an object with
    those attributes (e.g. an Overlaps).  Scalars are read as the study's shapes (m a scalar means m_1 = -m_2 = m)."""
    if isinstance(init, Mapping):
        get = init.__getitem__
        missing = [k for k in ("q", "m", "theta") if k not in init]
    else:
        get = lambda k: getattr(init, k)  # noqa: E731
        missing = [k for k in ("q", "m", "theta") if not hasattr(init, k)]
    if missing:
        raise InputError(f"init must give q, m and theta; missing {', '.join(missing)}")
    L, r, rs = setting.L, setting.r, setting.r_star
    out = []
    for name, shape in (("q", (r, r)), ("m", (L, r)), ("theta", (r, rs))):
        try:
            arr = np.asarray(get(name), dtype=float)
        except (TypeError, ValueError):
            raise InputError(f"init {name} must be numbers, got {get(name)!r}") from None
        if arr.ndim == 0:
            v = float(arr)
            if name == "m" and (L, r) == (2, 1):
                arr = np.array([[v], [-v]])
            elif shape == (1, 1):
                arr = np.array([[v]])
        if arr.shape != shape:
            raise InputError(f"init {name} must have shape {shape}, got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise InputError(f"init {name} must be finite")
        out.append(arr.copy())
    q, m, theta = out
    if not np.allclose(q, q.T, atol=1e-12 * max(1.0, float(np.abs(q).max()))):
        raise InputError("init q must be symmetric")
    q = 0.5 * (q + q.T)
    if np.linalg.eigvalsh(q - theta @ theta.T / setting.sigma**2).min() < -1e-10 * max(1.0, float(np.abs(q).max())):
        raise InputError("init overlaps are not realisable: q - theta theta^T / sigma^2 must be positive semi-definite")
    # m must lie in the range of G (m = p^T Q / sqrt(d)); q must dominate its part too.
    C = gram_factor(setting.gram)
    proj = C @ np.linalg.pinv(C)
    if np.abs(m - proj @ m).max() > 1e-10 * max(1.0, float(np.abs(m).max())):
        raise InputError("init m must lie in the range of the positional Gram matrix G (m = p^T Q / sqrt(d))")
    a = np.linalg.pinv(C) @ m
    if np.linalg.eigvalsh(q - setting.sigma**2 * (a.T @ a) - theta @ theta.T / setting.sigma**2).min() < \
            -1e-10 * max(1.0, float(np.abs(q).max())):
        raise InputError("init overlaps are not realisable: q is smaller than its positional and teacher parts")
    return q, m, theta
