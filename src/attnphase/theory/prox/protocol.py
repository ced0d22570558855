"""The proximal map's protocol: what every kernel takes and returns, the local-minima record, the input checks and
the choice of kernel (the dispatcher is :func:`attnphase.theory.prox.prox`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from attnphase.errors import InputError

KERNELS = ("auto", "l2r1", "general", "reference")


@runtime_checkable
class ProxOutput(Protocol):
    h: np.ndarray
    value: np.ndarray
    converged: np.ndarray
    grad_norm: np.ndarray


@dataclass(frozen=True)
class LocalMinima:
    """The distinct local minimisers a kernel's Newton runs ended at, per point: h (n, K, L, r), the first
    count[i] of row i valid (NaN after).  Kernels that record them return them as ``minima``; ``prox(...,
    minima=)`` continues them at nearby parameters."""

    h: np.ndarray
    count: np.ndarray


def check_inputs(w: np.ndarray, T: np.ndarray, Vinv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    w = np.ascontiguousarray(w, dtype=float)
    T = np.ascontiguousarray(T, dtype=float)
    Vinv = np.ascontiguousarray(np.atleast_2d(Vinv), dtype=float)
    if w.ndim != 3 or T.shape != (w.shape[0], w.shape[1], w.shape[1]) or Vinv.shape != (w.shape[2], w.shape[2]):
        raise InputError(f"prox: shapes w {w.shape}, T {T.shape}, Vinv {Vinv.shape} do not fit (n, L, r), "
                         "(n, L, L), (r, r)")
    return w, T, Vinv


def check_minima(minima: LocalMinima, w_shape: tuple[int, ...]) -> np.ndarray:
    """minima.h as a float array after checking it fits points w of shape (n, L, r) (ValueError otherwise)."""
    mh = np.asarray(minima.h, dtype=float)
    n = w_shape[0]
    if mh.ndim != 4 or mh.shape[0] != n or mh.shape[2:] != tuple(w_shape[1:]) or np.shape(minima.count) != (n,):
        raise InputError(f"prox: minima.h has shape {mh.shape} and count {np.shape(minima.count)}, w {w_shape}")
    if n and not (np.min(minima.count) >= 1 and np.max(minima.count) <= mh.shape[1]):
        raise InputError(f"prox: minima.count must lie in [1, {mh.shape[1]}] at every point")
    return mh


def choose_kernel(L: int, r: int, kernel: str = "auto", untied: bool = False) -> str:
    if kernel not in KERNELS:
        raise InputError(f"prox kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    if untied and kernel == "l2r1":
        raise InputError("the l2r1 prox kernel implements the tied scores only; use 'general' for the untied student")
    if kernel == "auto":
        return "l2r1" if (L == 2 and r == 1 and not untied) else "general"
    if kernel == "l2r1" and not (L == 2 and r == 1):
        raise InputError(f"the l2r1 prox kernel needs L = 2, r = 1, got L = {L}, r = {r}")
    return kernel
