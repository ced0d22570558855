"""Memory guard: estimate what one simulation allocates before it allocates anything, and refuse what does not fit.

A run holds the d-dimensional tokens three times over at its peak: the training tokens x (n L d), the risk's
copy z = x + p (n L d), and the test tokens (n_test L d); everything else (teacher, Gram matrices of the tokens,
the model, the optimiser's state, evaluation chunks) is O(d r) or O(chunk L d).  Tokens are always drawn in
float64 on the CPU (for reproducibility across devices and dtypes), so with float32 or on CUDA the host also
holds the float64 draws while the cast copies are made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attnphase.errors import InputError
from attnphase.resources import USABLE_FRACTION, available_host_memory
from attnphase.setting import Setting

# Rows of x + p processed at a time by the test-error and linear-baseline evaluations (model.sample_errors).
EVAL_CHUNK = 2048
_BYTES = {"float64": 8, "float32": 4}
_OPT_COPIES = {"gd": 3, "adam": 5}  # parameter-sized tensors alive at once (Q, grad, step / Adam moments)


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a run needs on the host and on the accelerator (0 on CPU), with the largest parts named."""

    host: int
    device: int
    parts: dict[str, int]

    @property
    def total(self) -> int:
        return self.host + self.device


def _count(setting: Setting, d: int, alpha: float, n_test: int) -> tuple[int, int, int]:
    d = int(d)
    n = max(1, round(float(alpha) * d))
    return d, n, int(n_test)


def memory_parts(setting: Setting, d: int, alpha: float, n_test: int = 10000, optimizer: str = "gd",
                 student: str = "tied", dtype: str = "float64", device: str = "cpu") -> MemoryEstimate:
    """Itemised estimate of a simulation's peak memory (see the module docstring)."""
    d, n, n_test = _count(setting, d, alpha, n_test)
    L, r = setting.L, setting.r
    b = _BYTES.get(str(dtype).removeprefix("torch."), 8)
    cols = r * (2 if student == "untied" else 1)
    tokens_train, tokens_test = n * L * d, n_test * L * d
    chunk = min(EVAL_CHUNK, max(n, n_test)) * L * d
    if optimizer == "lbfgs":
        copies = 2 * 50 + 6  # default history 50: two d x r vectors per stored pair, plus working vectors
    else:
        copies = _OPT_COPIES.get(optimizer, 5)
    params = copies * d * cols * b
    small = (n + n_test) * L * L * 8 * 4 + d * setting.r_star * 8
    parts = {
        "training tokens x": tokens_train * b,
        "x + p": tokens_train * b,
        "test tokens": tokens_test * b,
        "evaluation chunks": 4 * chunk * b,
        "model and optimiser": params,
        "teacher and Gram matrices": small,
    }
    on_device = sum(parts.values())
    draws = 8 * (tokens_train + tokens_test)
    cast = b != 8 or str(device).startswith("cuda")
    if str(device).startswith("cuda"):
        return MemoryEstimate(host=draws + small, device=on_device, parts={**parts, "float64 draws (host)": draws})
    host = on_device + (draws if cast else 0)
    if cast:
        parts["float64 draws"] = draws
    return MemoryEstimate(host=host, device=0, parts=parts)


def estimate_memory(setting: Setting, d: int, alpha: float, n_test: int = 10000, optimizer: str = "gd",
                    student: str = "tied", dtype: str = "float64", device: str = "cpu") -> int:
    """Peak bytes one simulation needs (host plus accelerator), computed from the sizes alone."""
    return memory_parts(setting, d, alpha, n_test, optimizer, student, dtype, device).total


def available_device_memory(device: str) -> int:
    import torch

    free, _total = torch.cuda.mem_get_info(torch.device(device))
    return int(free)


def _gib(x: float) -> str:
    return f"{x / 2**30:.3g} GiB"


def check_memory(setting: Setting, d: int, alpha: float, n_test: int = 10000, optimizer: str = "gd",
                 student: str = "tied", dtype: str = "float64", device: str = "cpu", runs: int = 1) -> MemoryEstimate:
    """Raise a one-line ValueError if `runs` simultaneous simulations of this size do not fit.

    Meant to be called before anything is allocated (simulate does; a sweep calls it for its largest point
    with runs = number of workers).
    """
    est = memory_parts(setting, d, alpha, n_test, optimizer, student, dtype, device)
    biggest = max(est.parts, key=est.parts.get)
    host_avail = available_host_memory() * USABLE_FRACTION
    if runs * est.host > host_avail:
        raise InputError(
            f"d = {d}, alpha = {alpha:g}, n_test = {n_test}: a run needs about {_gib(runs * est.host)} of RAM"
            f"{f' ({runs} at once)' if runs > 1 else ''} (largest part: {biggest}, {_gib(est.parts[biggest])}), "
            f"more than the {_gib(host_avail)} usable here")
    if est.device and str(device).startswith("cuda"):
        dev_avail = available_device_memory(device) * USABLE_FRACTION
        if runs * est.device > dev_avail:
            raise InputError(
                f"d = {d}, alpha = {alpha:g}, n_test = {n_test}: a run needs about {_gib(runs * est.device)} of "
                f"GPU memory, more than the {_gib(dev_avail)} free on {device}")
    if not math.isfinite(est.total):  # pragma: no cover - sizes are integers
        raise InputError("memory estimate is not finite")
    return est
