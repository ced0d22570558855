"""Finite-d data of docs/model.md: Gaussian tokens, a random softmax teacher, labels y = T(x) x.

All randomness comes from one integer seed.  It is split with numpy's SeedSequence into independent
streams (teacher, training set, test set, student initialisation) so that, e.g., changing n_test or the
initialisation never changes the training set.  Numbers are always drawn in float64 on the CPU and only
then cast and moved: the same seed gives the same data on every device and for both dtypes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attnphase.errors import InputError
from attnphase.problem import fields
from attnphase.problem import teacher_attention as _teacher
from attnphase.setting import Setting

DTYPES = {"float64": torch.float64, "float32": torch.float32}

# Order of the child streams spawned from the seed; appending new ones keeps old results reproducible.
_STREAMS = ("teacher", "train", "test", "init")


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        if dtype not in DTYPES.values():
            raise InputError(f"dtype must be float64 or float32, got {dtype}")
        return dtype
    if dtype not in DTYPES:
        raise InputError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    return DTYPES[dtype]


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise InputError(f"device must be 'cpu' or 'cuda', got {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError("device 'cuda' requested but CUDA is not available")
    if dev.type not in ("cpu", "cuda"):
        raise InputError(f"device must be 'cpu' or 'cuda', got {device!r}")
    return dev


def generators(seed: int) -> dict[str, torch.Generator]:
    """One independent CPU torch.Generator per stream, all derived from `seed`."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    children = np.random.SeedSequence(int(seed)).spawn(len(_STREAMS))
    out = {}
    for name, child in zip(_STREAMS, children, strict=True):
        g = torch.Generator(device="cpu")
        g.manual_seed(int(child.generate_state(1, np.uint64)[0] >> np.uint64(1)))
        out[name] = g
    return out


# Fixed seed of the extra orthonormal directions used for non-antipodal positional codes (part of the
# model's definition, not of an experiment's randomness: every seed sees the same positions).
_POSITIONS_SEED = 20240207


def position_basis(d: int, k: int, dtype: torch.dtype = torch.float64,
                   device: torch.device | str = "cpu") -> torch.Tensor:
    """k orthonormal vectors e_1..e_k in R^d (rows), e_1 = (1, ..., 1)/sqrt(d).

    The others are a fixed pseudo-random draw (seed _POSITIONS_SEED) orthonormalised against e_1 and each
    other by QR: deterministic, and generic (no alignment with the coordinate axes or with the teacher).
    """
    if k > d:
        raise InputError(f"positional codes of rank {k} need d >= {k}, got d = {d}")
    e1 = torch.full((d,), 1.0 / math.sqrt(d), dtype=torch.float64)
    if k == 1:
        return e1[None, :].to(dtype=dtype, device=device)
    g = torch.Generator(device="cpu")
    g.manual_seed(_POSITIONS_SEED)
    M = torch.cat([e1[:, None], torch.randn((d, k - 1), generator=g, dtype=torch.float64)], dim=1)
    U, R = torch.linalg.qr(M)
    U = U * torch.sign(torch.diagonal(R))[None, :]  # QR's sign convention: make e_1 come out as +1/sqrt(d)
    U[:, 0] = e1
    return U.T.contiguous().to(dtype=dtype, device=device)


def gram_factor(G: np.ndarray, tol: float = 1e-12) -> np.ndarray:
    """C (L x k) with C C^T = G, k = rank(G): eigenvectors of the k largest eigenvalues, scaled by their
    square roots, each column's sign fixed so that its first non-zero entry is positive."""
    G = np.asarray(G, dtype=np.float64)
    w, U = np.linalg.eigh(G)
    order = np.argsort(w)[::-1]
    w, U = w[order], U[:, order]
    keep = w > tol * max(1.0, float(np.abs(w).max()))
    w, U = w[keep], U[:, keep]
    for j in range(U.shape[1]):
        nz = np.flatnonzero(np.abs(U[:, j]) > 1e-12)
        if nz.size and U[nz[0], j] < 0:
            U[:, j] = -U[:, j]
    return U * np.sqrt(w)[None, :]


def positional_encodings(d: int, L: int = 2, dtype: torch.dtype = torch.float64,
                         device: torch.device | str = "cpu", gram: np.ndarray | None = None) -> torch.Tensor:
    """Positional encodings p_1..p_L (rows, shape (L, d)) with p_l . p_k = G_lk.

    G = C C^T (see gram_factor), p_l = sum_j C_lj e_j with the orthonormal e_j of position_basis.  The
    study's antipodal G (the default for L = 2) gives exactly p_1 = -p_2 = (1, ..., 1)/sqrt(d), built
    directly so that its numbers (and every result derived from them) stay bit for bit what they were.
    """
    if gram is None:
        if L != 2:
            raise InputError(f"positional encodings need a Gram matrix for L = {L} (the antipodal default is L = 2)")
        gram = np.array([[1.0, -1.0], [-1.0, 1.0]])
    G = np.asarray(gram, dtype=np.float64)
    if G.shape != (L, L):
        raise InputError(f"Gram matrix must be {L} x {L}, got shape {G.shape}")
    if L == 2 and np.array_equal(G, np.array([[1.0, -1.0], [-1.0, 1.0]])):
        p1 = torch.full((d,), 1.0 / math.sqrt(d), dtype=dtype, device=device)
        return torch.stack([p1, -p1])
    C = gram_factor(G)
    E = position_basis(d, C.shape[1])
    P = torch.as_tensor(C, dtype=torch.float64) @ E
    return P.to(dtype=dtype, device=device)


def teacher_attention(setting: Setting, x: torch.Tensor, Q_star: torch.Tensor) -> torch.Tensor:
    """The teacher's attention (attnphase.problem.teacher_attention) at h*_l = Q*^T x_l / sqrt(d); (n, L, L)."""
    return _teacher(fields(x, Q_star), setting.omega, setting.A_array)


@dataclass
class Dataset:
    """n sequences: tokens x (n, L, d) and the teacher's attention T (n, L, L); labels y = T x."""

    x: torch.Tensor
    T: torch.Tensor

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    @property
    def y(self) -> torch.Tensor:
        # Recomputed on demand: storing y would double the memory of a 10^4 x 2 x 10^3 test set.
        return self.T @ self.x

    def to(self, dtype: torch.dtype, device: torch.device) -> Dataset:
        return Dataset(self.x.to(dtype=dtype, device=device), self.T.to(dtype=dtype, device=device))


@dataclass
class SampledProblem:
    """A teacher with its training and test sets (docs/model.md)."""

    setting: Setting
    d: int
    seed: int
    Q_star: torch.Tensor  # (d, r*)
    p: torch.Tensor  # (L, d)
    train: Dataset
    test: Dataset

    @property
    def n(self) -> int:
        return self.train.n

    @property
    def dtype(self) -> torch.dtype:
        return self.Q_star.dtype

    @property
    def device(self) -> torch.device:
        return self.Q_star.device


def _sequences(setting: Setting, Q_star: torch.Tensor, n: int, d: int, gen: torch.Generator) -> Dataset:
    x = setting.sigma * torch.randn((n, setting.L, d), generator=gen, dtype=torch.float64)
    return Dataset(x, teacher_attention(setting, x, Q_star))


def check_size(d: int, alpha: float) -> int:
    """Validate d and alpha; return n = round(alpha d)."""
    if isinstance(d, bool) or not isinstance(d, int | np.integer):
        raise InputError(f"d must be an integer, got {d!r}")
    if d < 2:
        raise InputError(f"d must be >= 2, got {d}")
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise InputError(f"alpha must be a number, got {alpha!r}") from None
    if not math.isfinite(a) or a <= 0:
        raise InputError(f"alpha must be finite and > 0, got {alpha!r}")
    n = round(a * int(d))
    if n < 1:
        raise InputError(f"alpha * d must round to at least one sample, got alpha = {a:g}, d = {d} (n = {n})")
    return n


def sample_dataset(setting: Setting, d: int, alpha: float, seed: int = 0, n_test: int = 10000,
                   dtype: str | torch.dtype = "float64", device: str | torch.device | None = None) -> SampledProblem:
    """Draw a teacher Q* (iid N(0, 1)), n = round(alpha d) training and n_test independent test sequences."""
    n = check_size(d, alpha)
    if isinstance(n_test, bool) or not isinstance(n_test, int | np.integer) or n_test < 1:
        raise InputError(f"n_test must be a positive integer, got {n_test!r}")
    tdtype, dev = resolve_dtype(dtype), resolve_device(device)
    gens = generators(seed)
    d = int(d)
    Q_star = torch.randn((d, setting.r_star), generator=gens["teacher"], dtype=torch.float64)
    train = _sequences(setting, Q_star, n, d, gens["train"])
    test = _sequences(setting, Q_star, int(n_test), d, gens["test"])
    return SampledProblem(
        setting=setting,
        d=d,
        seed=int(seed),
        Q_star=Q_star.to(dtype=tdtype, device=dev),
        p=positional_encodings(d, setting.L, tdtype, dev, gram=setting.gram),
        train=train.to(tdtype, dev),
        test=test.to(tdtype, dev),
    )
