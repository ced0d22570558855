"""The one-layer, one-head transformer of the study's Section 2 as a batched ensemble of M models (torch).

Every parameter carries a leading model axis, so M independent models train in one set of batched matrix
products (torch.bmm / einsum): the model is tiny and overhead-bound, and one step for M members costs little
more than one step for one.  The members never interact: the loss is a sum of per-member losses, and Adam and
SGD act elementwise, so each member follows exactly the trajectory it would follow alone.

Variants are per-member masks (``positional``, ``semantic``, ``both``), so one ensemble may mix them:
restricted members keep their token embedding on the first half of the width and their positional embedding
on the second half, and their query and key read only the positional (resp. token) half.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from attnphase.errors import InputError

VARIANTS = ("positional", "semantic", "both")
PARAM_NAMES = ("tok", "pos", "wq", "wk", "wv", "ln_w", "ln_b", "w1", "b1", "w2", "b2")


def resolve_device(device: str | None = "auto") -> torch.device:
    """``auto``: CUDA when present, else CPU; an explicit ``cuda`` without a GPU is an error (one line)."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise InputError(f"device must be auto, cpu, cuda or cuda:N, got {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r} requested but CUDA is not available")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise InputError(f"device {device!r}: there are {torch.cuda.device_count()} CUDA device(s)")
    return dev


def variant_masks(variants: Sequence[str], width: int) -> dict[str, torch.Tensor]:
    """0/1 masks, leading axis one per member: embeddings' columns and the rows (inputs) of Wq and Wk."""
    for v in variants:
        if v not in VARIANTS:
            raise InputError(f"variant must be one of {', '.join(VARIANTS)}, got {v!r}")
    half = width // 2
    first = torch.zeros(width)
    first[:half] = 1.0
    second = 1.0 - first
    ones = torch.ones(width)
    tok = torch.stack([ones if v == "both" else first for v in variants])
    pos = torch.stack([ones if v == "both" else second for v in variants])
    qk = torch.stack([ones if v == "both" else (second if v == "positional" else first) for v in variants])
    return {"tok": tok[:, None, :], "pos": pos[:, None, :], "qk": qk[:, :, None]}


def init_params(seed: int, variant: str, *, seq_len: int, alphabet: int, width: int, hidden: int,
                n_classes: int) -> dict[str, torch.Tensor]:
    """One member's initial parameters from its own seed (CPU, float32), torch's default initialisations:
    embeddings N(0, 1), linear maps uniform in +-1/sqrt(fan-in), LayerNorm 1, 0.

    The fan-in of W_Q and W_K is the whole width, also in a restricted variant whose query and key read only
    half of it: the study draws them as full 64 x 64 maps and masks their input.  Drawing them over the half
    they read (bound 1/sqrt(32)) doubles the initial scores' bilinear form, and the semantic variant then
    stalls on a plateau near 0.98 in every seed (docs/histogram.md).
    Drawn on a private generator, so a member's start never depends on which other members share the batch.
    """
    g = torch.Generator().manual_seed(int(np.random.SeedSequence([seed, 3]).generate_state(1)[0]))
    masks = {k: m[0] for k, m in variant_masks([variant], width).items()}

    def uniform(shape: tuple[int, ...], fan_in: int) -> torch.Tensor:
        bound = 1.0 / math.sqrt(fan_in)
        return (torch.rand(shape, generator=g) * 2.0 - 1.0) * bound

    p = {
        "tok": torch.randn(alphabet, width, generator=g) * masks["tok"],
        "pos": torch.randn(seq_len, width, generator=g) * masks["pos"],
        "wq": uniform((width, width), width) * masks["qk"],
        "wk": uniform((width, width), width) * masks["qk"],
        "wv": uniform((width, width), width),
        "ln_w": torch.ones(width),
        "ln_b": torch.zeros(width),
        "w1": uniform((width, hidden), width),
        "b1": uniform((hidden,), width),
        "w2": uniform((hidden, n_classes), hidden),
        "b2": uniform((n_classes,), hidden),
    }
    return p


def stack_params(members: Sequence[dict[str, torch.Tensor]], device: torch.device) -> dict[str, torch.Tensor]:
    """Stack per-member parameters along a new leading axis, as leaf tensors that require gradients."""
    return {k: torch.stack([m[k] for m in members]).to(device).requires_grad_(True) for k in PARAM_NAMES}


def flat_params(params: dict[str, torch.Tensor]) -> torch.Tensor:
    """(M, n_params) view of an ensemble's parameters, in ``PARAM_NAMES`` order (distances, storage)."""
    m = params["tok"].shape[0]
    return torch.cat([params[k].detach().reshape(m, -1) for k in PARAM_NAMES], dim=1)


def unflat_params(flat: np.ndarray, *, seq_len: int, alphabet: int, width: int, hidden: int,
                  n_classes: int) -> dict[str, torch.Tensor]:
    """One member's parameters back from its flat vector (inverse of one row of :func:`flat_params`)."""
    shapes = param_shapes(seq_len=seq_len, alphabet=alphabet, width=width, hidden=hidden, n_classes=n_classes)
    out, i = {}, 0
    vec = torch.as_tensor(np.asarray(flat, dtype=np.float32))
    for k in PARAM_NAMES:
        n = int(np.prod(shapes[k]))
        out[k] = vec[i:i + n].reshape(shapes[k]).clone()
        i += n
    if i != vec.numel():
        raise InputError(f"parameter vector has {vec.numel()} entries, the model needs {i}")
    return out


def param_shapes(*, seq_len: int, alphabet: int, width: int, hidden: int, n_classes: int) -> dict[str, tuple]:
    return {"tok": (alphabet, width), "pos": (seq_len, width), "wq": (width, width), "wk": (width, width),
            "wv": (width, width), "ln_w": (width,), "ln_b": (width,), "w1": (width, hidden), "b1": (hidden,),
            "w2": (hidden, n_classes), "b2": (n_classes,)}


def embed(params: dict[str, torch.Tensor], masks: dict[str, torch.Tensor], tokens: torch.Tensor,
          positions: torch.Tensor | None = None) -> torch.Tensor:
    """(M, B, L, D) input: token embedding + positional embedding (positions default to 0..L-1)."""
    m, b, L = tokens.shape
    tok = params["tok"] * masks["tok"]
    pos = params["pos"] * masks["pos"]
    x = torch.bmm(torch.nn.functional.one_hot(tokens, tok.shape[1]).to(tok.dtype).reshape(m, b * L, -1), tok)
    x = x.reshape(m, b, L, -1)
    if positions is None:
        return x + pos[:, None, :L, :]
    onehot = torch.nn.functional.one_hot(positions, pos.shape[1]).to(pos.dtype).reshape(m, b * L, -1)
    return x + torch.bmm(onehot, pos).reshape(m, b, L, -1)


def scores(params: dict[str, torch.Tensor], masks: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """(M, B, L, L) pre-softmax attention scores q_i . k_j / sqrt(D)."""
    m, b, L, d = x.shape
    flat = x.reshape(m, b * L, d)
    q = torch.bmm(flat, params["wq"] * masks["qk"]).reshape(m * b, L, d)
    k = torch.bmm(flat, params["wk"] * masks["qk"]).reshape(m * b, L, d)
    return (torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d)).reshape(m, b, L, L)


def forward(params: dict[str, torch.Tensor], masks: dict[str, torch.Tensor], tokens: torch.Tensor,
            positions: torch.Tensor | None = None, return_attention: bool = False) -> Any:
    """Logits (M, B, L, C) of every token (and the attention maps (M, B, L, L) with ``return_attention``).

    No residual connection: the MLP sees only the attention output, as in the study.
    """
    x = embed(params, masks, tokens, positions)
    m, b, L, d = x.shape
    attn = torch.softmax(scores(params, masks, x), dim=-1)
    v = torch.bmm(x.reshape(m, b * L, d), params["wv"]).reshape(m * b, L, d)
    h = torch.bmm(attn.reshape(m * b, L, L), v).reshape(m, b, L, d)
    h = torch.nn.functional.layer_norm(h, (d,)) * params["ln_w"][:, None, None, :] + params["ln_b"][:, None, None, :]
    h = torch.relu(torch.bmm(h.reshape(m, b * L, d), params["w1"]) + params["b1"][:, None, :])
    logits = (torch.bmm(h, params["w2"]) + params["b2"][:, None, :]).reshape(m, b, L, -1)
    return (logits, attn) if return_attention else logits


def member_losses(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(M,) mean cross-entropy over every token of each member's batch."""
    m = logits.shape[0]
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                           reduction="none")
    return ce.reshape(m, -1).mean(dim=1)


def count_labels_t(tokens: torch.Tensor) -> torch.Tensor:
    """Torch twin of :func:`attnphase.experiments.histogram.data.count_labels`."""
    return (tokens[..., :, None] == tokens[..., None, :]).sum(-1)
