"""The study's stability test: is a restricted solution also a minimum of the unrestricted model?

Each trained restricted model is embedded into the unrestricted one (its masked entries are zeros there),
perturbed as the study does (Gaussian noise of scale 1e-3 on the two embeddings and on W_Q, W_K, masked entries
included) and retrained (SGD, lr 1e-3, 100 epochs). How far training moves says whether it stays near the
restricted solution (a distance of the order of the noise) or leaves it; reported both as one Euclidean
distance over all parameters and as the study's notebook measures it (a sum of per-tensor norms).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from attnphase.errors import InputError
from attnphase.experiments.histogram.data import train_subset
from attnphase.experiments.histogram.mechanism import N_MECHANISM_SEQUENCES, measure
from attnphase.experiments.histogram.train import HistogramRun, accuracy, attention_fn, dataset, fit

NOISE = 1e-3
SGD_EPOCHS = 100
SGD_LR = 1e-3
PERTURBED = ("tok", "pos", "wq", "wk")
"""The tensors the study perturbs (its ``reparameterize``); the rest start exactly at the trained values."""


def tensor_distance(a: dict[str, np.ndarray], b: dict[str, np.ndarray], where: dict[str, np.ndarray] | None = None,
                    ) -> float:
    """The study's distance between two models: the sum over parameter tensors of the Euclidean norm of their
    difference (over the entries where ``where`` is true, when given)."""
    total = 0.0
    for k in a:
        d = np.asarray(a[k], np.float64) - np.asarray(b[k], np.float64)
        total += float(np.linalg.norm(d[where[k]] if where is not None else d))
    return total


@dataclass(frozen=True)
class StabilityRun:
    """One restricted model, embedded, perturbed and retrained unrestricted."""

    variant: str
    n_train: int
    seed: int
    noise: float
    epochs: int
    lr: float
    noise_distance: float  # |perturbation|: the distance the test starts at
    distance: float  # |retrained - embedded|
    relative_distance: float  # distance / |embedded|
    val_accuracy_before: float
    val_accuracy_after: float
    mechanism_after: str
    mechanism_score_after: float
    seconds: float
    # The study's notebook: sums of per-tensor norms, the retrained embeddings' masked halves set to zero first
    study_distance: float = float("nan")  # retrained -> embedded
    study_distance_zeros: float = float("nan")  # the same over the entries that are zero in the embedded model
    init_distance: float = float("nan")  # initial -> trained restricted model (the scale of training itself)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def stability_test(runs: Sequence[HistogramRun], noise: float = NOISE, epochs: int = SGD_EPOCHS, lr: float = SGD_LR,
                   device: str | None = "auto", progress: bool = False) -> list[StabilityRun]:
    """Retrain every run (all with the same n_train and schedule) as one unrestricted ensemble."""
    import torch

    from attnphase.experiments.histogram.model import (
        PARAM_NAMES,
        flat_params,
        init_params,
        param_shapes,
        resolve_device,
        unflat_params,
        variant_masks,
    )

    if not runs:
        return []
    if len({(r.n_train, r.schedule) for r in runs}) != 1:
        raise InputError("stability_test: the runs of one call share n_train and schedule")
    if not (noise >= 0 and lr > 0 and epochs >= 1):
        raise InputError(f"need noise >= 0, lr > 0, epochs >= 1; got {noise}, {lr}, {epochs}")
    dev = resolve_device(device)
    sched = replace(runs[0].schedule, optimizer="sgd", lr=float(lr), epochs=int(epochs))
    data = dataset(sched)
    t0 = time.perf_counter()
    embedded = [r.params.astype(np.float32) for r in runs]
    dims = sched.dims()
    shapes = param_shapes(**dims)
    # 1 on the entries the study perturbs, 0 elsewhere, in flat_params order
    where = np.concatenate([np.full(int(np.prod(shapes[k])), k in PERTURBED, np.float64) for k in PARAM_NAMES])
    members = []
    for r, theta in zip(runs, embedded, strict=True):
        rng = np.random.default_rng([r.seed, 6])
        kick = (noise * rng.standard_normal(theta.shape) * where).astype(np.float32)
        members.append(unflat_params(theta + kick, **dims))
    noise_dist = [float(np.linalg.norm(flat_params({k: v[None] for k, v in m.items()}).numpy()[0] - th))
                  for m, th in zip(members, embedded, strict=True)]
    train_sets = [train_subset(data, r.n_train, r.seed) for r in runs]
    f = fit(members, ["both"] * len(runs), train_sets, [r.seed for r in runs], sched, data.val, dev,
            progress=progress, label="stability (SGD, unrestricted)", order_stream=7)
    after = flat_params(f.params).cpu().numpy()
    val_acc = accuracy(f.params, f.masks, torch.as_tensor(data.val, device=dev))
    mech = measure(attention_fn(f.params, f.masks, dev), data.val[:N_MECHANISM_SEQUENCES], sched.alphabet, seed=0)
    seconds = (time.perf_counter() - t0) / len(runs)
    out = []
    for i, r in enumerate(runs):
        dist = float(np.linalg.norm(after[i] - embedded[i]))
        e = {k: v.numpy() for k, v in unflat_params(embedded[i], **dims).items()}
        a = {k: v.numpy() for k, v in unflat_params(after[i], **dims).items()}
        masks = variant_masks([r.variant], sched.width)
        for k in ("tok", "pos"):  # the notebook zeroes these halves again before it measures
            a[k] = a[k] * masks[k][0].numpy()
        start = {k: v.numpy() for k, v in init_params(r.seed, r.variant, **dims).items()}
        out.append(StabilityRun(variant=r.variant, n_train=r.n_train, seed=r.seed, noise=float(noise),
                                epochs=int(epochs), lr=float(lr), noise_distance=noise_dist[i], distance=dist,
                                relative_distance=dist / float(np.linalg.norm(embedded[i])),
                                study_distance=tensor_distance(a, e),
                                study_distance_zeros=tensor_distance(a, e, {k: v == 0 for k, v in e.items()}),
                                init_distance=tensor_distance(e, start),
                                val_accuracy_before=r.val_accuracy, val_accuracy_after=float(val_acc[i]),
                                mechanism_after=mech[i].label, mechanism_score_after=mech[i].score,
                                seconds=float(seconds)))
    return out
