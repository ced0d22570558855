"""Training the counting transformer: several seeds (and variants) at once as one batched ensemble.

A member's result depends only on its own (variant, n_train, seed) and the schedule: its initial parameters,
its training subset and its data order come from generators seeded by its seed alone, the loss is a sum of
per-member losses and the optimisers act elementwise.  Batching changes the floating-point order of nothing a
member computes but the batched matrix products; tests check that a seed trained alone and in company agree to
float32 rounding (1e-5), see docs/histogram.md.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnphase.errors import InputError
from attnphase.experiments.histogram.data import CountingData, make_counting_data, train_subset
from attnphase.experiments.histogram.mechanism import N_MECHANISM_SEQUENCES, measure

# Bytes of working memory per (member, sequence in a batch) and per stored sequence: a generous bound used to
# refuse sizes that cannot fit before any work starts (activations ~ L * (3 D + L + H + C) floats, x4 with
# gradients and temporaries).
_MAX_BYTES = 8 * 2**30


@dataclass(frozen=True)
class Schedule:
    """Everything but the variant, the data size and the seed: the study's Section 2 defaults."""

    seq_len: int = 10
    alphabet: int = 15
    n_draws: int = 50_000
    train_fraction: float = 0.7
    data_seed: int = 0
    width: int = 64
    hidden: int = 128
    epochs: int = 200
    batch_size: int = 32
    lr: float = 1e-3
    optimizer: str = "adam"  # adam (betas, eps below) or sgd
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9

    def __post_init__(self) -> None:
        problems = []
        for name in ("seq_len", "alphabet", "n_draws", "width", "hidden", "epochs", "batch_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                problems.append(f"{name} must be an integer >= 1, got {v!r}")
        if isinstance(self.seq_len, int) and self.seq_len < 2:
            problems.append(f"seq_len must be >= 2, got {self.seq_len}")
        if isinstance(self.width, int) and self.width % 2:
            problems.append(f"width must be even (two halves for the restricted variants), got {self.width}")
        if not (isinstance(self.lr, int | float) and math.isfinite(self.lr) and self.lr > 0):
            problems.append(f"lr must be a finite number > 0, got {self.lr!r}")
        if self.optimizer not in ("adam", "sgd"):
            problems.append(f"optimizer must be adam or sgd, got {self.optimizer!r}")
        if not 0.0 < self.train_fraction < 1.0:
            problems.append(f"train_fraction must lie in (0, 1), got {self.train_fraction}")
        if problems:
            raise InputError(problems[0])

    @property
    def n_classes(self) -> int:
        return self.seq_len + 1

    def dims(self) -> dict[str, int]:
        return {"seq_len": self.seq_len, "alphabet": self.alphabet, "width": self.width, "hidden": self.hidden,
                "n_classes": self.n_classes}

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["betas"] = list(self.betas)
        return d


STUDY = Schedule()
"""The study's schedule (frozen: safe as a default argument)."""


def memory_estimate(schedule: Schedule, n_members: int, n_sequences: int) -> int:
    """Bytes an ensemble of ``n_members`` needs (training data, batch activations, evaluation chunks)."""
    s = schedule
    per_seq = s.seq_len * (4 * s.width + s.seq_len + s.hidden + s.n_classes + s.alphabet) * 4 * 4
    data = n_members * n_sequences * s.seq_len * 8
    # parameters, gradients and two Adam moments
    weights = n_members * 4 * 4 * (3 * s.width**2 + (s.alphabet + s.seq_len + 3) * s.width
                                   + (s.width + 1) * s.hidden + (s.hidden + 1) * s.n_classes)
    return int(data + weights + n_members * max(s.batch_size, _EVAL_CHUNK) * per_seq)


def check_size(schedule: Schedule, n_members: int, n_sequences: int) -> None:
    need = memory_estimate(schedule, n_members, n_sequences)
    if need > _MAX_BYTES:
        raise InputError(f"this run needs about {need / 2**30:.1f} GiB (> {_MAX_BYTES / 2**30:.0f} GiB): "
                         "fewer sequences, a smaller width or fewer models per batch")


_EVAL_CHUNK = 2048
_CURVE_SEQUENCES = 1000


@dataclass(frozen=True)
class Curves:
    """Per-member learning curves: epochs at which validation accuracy was read, and the values."""

    epochs: tuple[int, ...]
    train_loss: tuple[float, ...]  # mean training loss of each epoch (all epochs)
    val_accuracy: tuple[float, ...]  # on the first 1000 validation sequences, at `epochs`


@dataclass(frozen=True)
class HistogramRun:
    """One trained model: identity, validation accuracy, measured mechanism, curves, trained parameters."""

    variant: str
    n_train: int
    seed: int
    val_accuracy: float
    train_accuracy: float
    train_loss: float
    mechanism: str
    mechanism_score: float
    tok_dev: float
    pos_dev: float
    seconds: float
    device: str
    schedule: Schedule
    curves: Curves
    params: np.ndarray = field(repr=False)  # flat float32 vector (model.flat_params order)

    def to_dict(self, curves: bool = False) -> dict[str, Any]:
        d = {"variant": self.variant, "n_train": self.n_train, "seed": self.seed,
             "val_accuracy": self.val_accuracy, "train_accuracy": self.train_accuracy,
             "train_loss": self.train_loss, "mechanism": self.mechanism, "mechanism_score": self.mechanism_score,
             "tok_dev": self.tok_dev, "pos_dev": self.pos_dev, "seconds": self.seconds, "device": self.device,
             **{k: v for k, v in self.schedule.as_dict().items()}}
        if curves:
            d["curve_epochs"] = list(self.curves.epochs)
            d["curve_train_loss"] = list(self.curves.train_loss)
            d["curve_val_accuracy"] = list(self.curves.val_accuracy)
        return d


def _threads() -> None:
    import torch

    # The model is overhead-bound: one thread per process is as fast and leaves the other cores to others.
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def accuracy(params: dict, masks: dict, tokens: Any) -> Any:
    """(M,) token-level accuracy of each member on the same sequences (torch tensor (N, L))."""
    import torch

    from attnphase.experiments.histogram.model import count_labels_t, forward

    m = params["tok"].shape[0]
    correct = torch.zeros(m, dtype=torch.float64, device=tokens.device)
    with torch.no_grad():
        for i in range(0, tokens.shape[0], _EVAL_CHUNK):
            chunk = tokens[i:i + _EVAL_CHUNK]
            batch = chunk[None].expand(m, -1, -1)
            pred = forward(params, masks, batch).argmax(-1)
            correct += (pred == count_labels_t(batch)).double().sum(dim=(1, 2))
    return (correct / tokens.numel()).cpu().numpy()


def attention_fn(params: dict, masks: dict, device: Any) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """numpy ``(tokens, positions) (N, L) -> (M, N, L, L)`` attention maps of every member (the mechanism
    measure's callable)."""
    import torch

    from attnphase.experiments.histogram.model import forward

    def attn(tokens: np.ndarray, positions: np.ndarray) -> np.ndarray:
        t = torch.as_tensor(np.asarray(tokens), device=device)
        p = torch.as_tensor(np.ascontiguousarray(positions), device=device)
        m = params["tok"].shape[0]
        out = []
        with torch.no_grad():
            for i in range(0, t.shape[0], _EVAL_CHUNK):
                out.append(forward(params, masks, t[i:i + _EVAL_CHUNK][None].expand(m, -1, -1),
                                   p[i:i + _EVAL_CHUNK][None].expand(m, -1, -1), return_attention=True)[1].cpu().numpy())
        return np.concatenate(out, axis=1)

    return attn


@dataclass
class _Fit:
    params: dict
    masks: dict
    curves: list[Curves]
    train_loss: np.ndarray


def fit(members: Sequence[dict], variants: Sequence[str], train_sets: Sequence[np.ndarray], order_seeds: Sequence[int],
        schedule: Schedule, val: np.ndarray, device: Any, progress: bool = False, label: str = "histogram",
        curve_every: int | None = None, order_stream: int = 4) -> _Fit:
    """Train an ensemble from given initial parameters (one dict per member), each on its own sequences
    (all of the same length) in its own seeded order, with the schedule's optimiser.  The core of both the
    study's training and the stability test's retraining."""
    import torch

    from attnphase.experiments.histogram.model import count_labels_t, forward, member_losses, stack_params, variant_masks
    from attnphase.progress import progress_bar

    _threads()
    m = len(members)
    n = len(train_sets[0])
    if any(len(t) != n for t in train_sets):
        raise InputError("every member of an ensemble trains on the same number of sequences")
    params = stack_params(members, device)
    masks = {k: v.to(device) for k, v in variant_masks(variants, schedule.width).items()}
    data = torch.as_tensor(np.stack(train_sets), device=device)  # (M, n, L)
    val_t = torch.as_tensor(val[:_CURVE_SEQUENCES], device=device)
    if schedule.optimizer == "adam":
        opt = torch.optim.Adam(list(params.values()), lr=schedule.lr, betas=schedule.betas, eps=schedule.eps)
    else:
        opt = torch.optim.SGD(list(params.values()), lr=schedule.lr)
    rngs = [np.random.default_rng([s, order_stream]) for s in order_seeds]
    B, L = schedule.batch_size, schedule.seq_len
    every = curve_every or max(1, schedule.epochs // 20)
    curve_epochs: list[int] = []
    curve_acc: list[np.ndarray] = []
    losses: list[np.ndarray] = []
    bar = progress_bar(range(schedule.epochs), label=label, enabled=progress, unit="epoch")
    for epoch in bar:
        perm = torch.as_tensor(np.stack([r.permutation(n) for r in rngs]), device=device)
        total = torch.zeros(m, dtype=torch.float64, device=device)
        for start in range(0, n, B):
            idx = perm[:, start:start + B]
            batch = torch.gather(data, 1, idx[:, :, None].expand(-1, -1, L))
            loss = member_losses(forward(params, masks, batch), count_labels_t(batch))
            opt.zero_grad(set_to_none=True)
            loss.sum().backward()
            opt.step()
            total += loss.detach().double() * idx.shape[1]
        losses.append((total / n).cpu().numpy())
        if (epoch + 1) % every == 0 or epoch + 1 == schedule.epochs:
            curve_epochs.append(epoch + 1)
            curve_acc.append(accuracy(params, masks, val_t))
    loss_arr = np.array(losses)  # (epochs, M)
    acc_arr = np.array(curve_acc)
    curves = [Curves(tuple(curve_epochs), tuple(float(x) for x in loss_arr[:, i]),
                     tuple(float(x) for x in acc_arr[:, i])) for i in range(m)]
    return _Fit(params, masks, curves, loss_arr[-1])


def train_ensemble(specs: Sequence[tuple[str, int]], n_train: int | None = None, schedule: Schedule = STUDY,
                   device: str | None = "auto", progress: bool = False, data: CountingData | None = None,
                   n_mechanism: int = N_MECHANISM_SEQUENCES) -> list[HistogramRun]:
    """Train one ensemble: ``specs`` is a list of (variant, seed); all members use ``n_train`` sequences
    (None: the whole training split).  Returns one HistogramRun per spec, in order."""
    from attnphase.experiments.histogram.model import flat_params, init_params, resolve_device

    dev = resolve_device(device)
    data = data if data is not None else dataset(schedule)
    n = len(data.train) if n_train is None else int(n_train)
    check_size(schedule, len(specs), n)
    t0 = time.perf_counter()
    members = [init_params(seed, v, **schedule.dims()) for v, seed in specs]
    train_sets = [train_subset(data, n, seed) for _, seed in specs]
    f = fit(members, [v for v, _ in specs], train_sets, [s for _, s in specs], schedule, data.val, dev,
            progress=progress, label=f"histogram n_train={n}")
    import torch

    val_acc = accuracy(f.params, f.masks, torch.as_tensor(data.val, device=dev))
    train_acc = np.array([accuracy({k: v[i:i + 1] for k, v in f.params.items()},
                                   {k: v[i:i + 1] for k, v in f.masks.items()},
                                   torch.as_tensor(train_sets[i], device=dev))[0] for i in range(len(specs))])
    mech = measure(attention_fn(f.params, f.masks, dev), data.val[:n_mechanism], schedule.alphabet, seed=0)
    flat = flat_params(f.params).cpu().numpy().astype(np.float32)
    seconds = (time.perf_counter() - t0) / len(specs)  # each member's share of the ensemble's time
    return [HistogramRun(variant=v, n_train=n, seed=int(seed), val_accuracy=float(val_acc[i]),
                         train_accuracy=float(train_acc[i]), train_loss=float(f.train_loss[i]),
                         mechanism=mech[i].label, mechanism_score=mech[i].score, tok_dev=mech[i].tok_dev,
                         pos_dev=mech[i].pos_dev, seconds=float(seconds), device=str(dev), schedule=schedule,
                         curves=f.curves[i], params=flat[i]) for i, (v, seed) in enumerate(specs)]


_DATA_CACHE: dict[tuple, CountingData] = {}


def dataset(schedule: Schedule) -> CountingData:
    """The schedule's data (cached per process: 50 000 draws and their unique rows take ~0.1 s)."""
    key = (schedule.seq_len, schedule.alphabet, schedule.n_draws, schedule.train_fraction, schedule.data_seed)
    if key not in _DATA_CACHE:
        _DATA_CACHE[key] = make_counting_data(schedule.seq_len, schedule.alphabet, schedule.n_draws,
                                              schedule.train_fraction, schedule.data_seed)
    return _DATA_CACHE[key]
