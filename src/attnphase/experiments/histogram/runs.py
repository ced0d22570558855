"""Resumable runs: train what the store lacks, in ensembles, and store every run as its ensemble finishes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnphase.errors import InputError
from attnphase.experiments.histogram.mechanism import N_MECHANISM_SEQUENCES
from attnphase.experiments.histogram.store import HistogramStore, run_key
from attnphase.experiments.histogram.train import (
    STUDY,
    Curves,
    HistogramRun,
    Schedule,
    check_size,
    dataset,
    train_ensemble,
)

BATCH_MODELS = 10
"""Members per ensemble by default: on one CPU thread a step costs ~1.3 ms per member beyond ~10 members,
so larger ensembles gain little and only delay the moment their results are stored."""


def run_from_record(rec: dict[str, Any], params: np.ndarray | None) -> HistogramRun:
    sched = Schedule(**{k: (tuple(rec[k]) if k == "betas" else rec[k]) for k in Schedule.__dataclass_fields__})
    curves = Curves(tuple(rec.get("curve_epochs", ())), tuple(rec.get("curve_train_loss", ())),
                    tuple(rec.get("curve_val_accuracy", ())))
    return HistogramRun(variant=rec["variant"], n_train=int(rec["n_train"]), seed=int(rec["seed"]),
                        val_accuracy=float(rec["val_accuracy"]), train_accuracy=float(rec["train_accuracy"]),
                        train_loss=float(rec["train_loss"]), mechanism=rec["mechanism"],
                        mechanism_score=float(rec["mechanism_score"]), tok_dev=float(rec["tok_dev"]),
                        pos_dev=float(rec["pos_dev"]), seconds=float(rec["seconds"]), device=rec["device"],
                        schedule=sched, curves=curves,
                        params=np.zeros(0, np.float32) if params is None else params)


def _specs(variants: Sequence[str], seeds: Sequence[int]) -> list[tuple[str, int]]:
    from attnphase.experiments.histogram.model import VARIANTS

    specs = []
    for v in variants:
        if v not in VARIANTS:
            raise InputError(f"variant must be one of {', '.join(VARIANTS)}, got {v!r}")
        for s in seeds:
            if isinstance(s, bool) or int(s) != s or s < 0:
                raise InputError(f"seeds must be integers >= 0, got {s!r}")
            if (v, int(s)) not in specs:
                specs.append((v, int(s)))
    if not specs:
        raise InputError("nothing to run: no variant or no seed")
    return specs


@dataclass(frozen=True)
class RunSummary:
    ran: int
    reused: int


def train_histogram(variants: str | Sequence[str] = "positional", n_train: int | None = None,
                    seeds: Sequence[int] = (0,), schedule: Schedule = STUDY,
                    store: str | os.PathLike[str] | None = None, device: str | None = "auto",
                    batch_models: int = BATCH_MODELS, progress: bool = False,
                    n_mechanism: int | None = None) -> list[HistogramRun]:
    """Train the counting transformer for every (variant, seed) at one data size; return the runs in order.

    With ``store`` every run already there (same variant, n_train, seed, schedule) is read back instead of
    trained, and every new run is stored as soon as its ensemble (``batch_models`` members) finishes: kill the
    process and call again, nothing finished is lost or trained twice.  ``n_train`` None: the whole split.
    """
    runs, _ = train_histogram_summary(variants, n_train, seeds, schedule, store, device, batch_models, progress,
                                      n_mechanism)
    return runs


def train_histogram_summary(variants: str | Sequence[str], n_train: int | None, seeds: Sequence[int],
                            schedule: Schedule, store: str | os.PathLike[str] | None, device: str | None,
                            batch_models: int, progress: bool,
                            n_mechanism: int | None = None) -> tuple[list[HistogramRun], RunSummary]:
    variants = [variants] if isinstance(variants, str) else list(variants)
    specs = _specs(variants, seeds)
    if batch_models < 1:
        raise InputError(f"batch_models must be >= 1, got {batch_models}")
    data = dataset(schedule)
    n = len(data.train) if n_train is None else int(n_train)
    if not 1 <= n <= len(data.train):
        raise InputError(f"n_train must lie in 1..{len(data.train)} (the training split), got {n_train}")
    # The default (1000 held-out sequences, fewer if the split is smaller) is a function of the schedule, so
    # only an explicit choice enters the key.
    extra = {} if n_mechanism is None else {"n_mechanism": int(n_mechanism)}
    n_mechanism = min(N_MECHANISM_SEQUENCES, len(data.val)) if n_mechanism is None else int(n_mechanism)
    if not 1 <= n_mechanism <= len(data.val):
        raise InputError(f"n_mechanism must lie in 1..{len(data.val)}, got {n_mechanism}")
    check_size(schedule, min(batch_models, len(specs)), n)
    keys = {sp: run_key(sp[0], n, sp[1], schedule, **extra) for sp in specs}
    done: dict[tuple[str, int], HistogramRun] = {}
    hs = HistogramStore(store) if store is not None else None
    try:
        todo = []
        for sp in specs:
            got = hs.get("train", keys[sp]) if hs is not None else None
            if got is None:
                todo.append(sp)
            else:
                done[sp] = run_from_record(*got)
        reused = len(done)
        for i in range(0, len(todo), batch_models):
            chunk = todo[i:i + batch_models]
            for sp, run in zip(chunk, train_ensemble(chunk, n, schedule, device, progress, data, n_mechanism),
                               strict=True):
                if hs is not None:
                    hs.put("train", keys[sp], run.to_dict(curves=True), run.params)
                done[sp] = run
    finally:
        if hs is not None:
            hs.close()
    return [done[sp] for sp in specs], RunSummary(ran=len(specs) - reused, reused=reused)


def stability_histogram(runs: Sequence[HistogramRun], store: str | os.PathLike[str] | None = None,
                        noise: float | None = None, epochs: int | None = None, lr: float | None = None,
                        device: str | None = "auto", progress: bool = False) -> list[Any]:
    """The stability test of every run (grouped by n_train and schedule), resumable like train_histogram."""
    from attnphase.experiments.histogram import stability as st

    noise = st.NOISE if noise is None else float(noise)
    epochs = st.SGD_EPOCHS if epochs is None else int(epochs)
    lr = st.SGD_LR if lr is None else float(lr)
    hs = HistogramStore(store) if store is not None else None
    out: dict[int, st.StabilityRun] = {}
    try:
        # the perturbed tensors enter the key: rows of the former test (noise on every parameter) are not reused
        keys = [run_key(r.variant, r.n_train, r.seed, r.schedule, noise=noise, sgd_epochs=epochs, sgd_lr=lr,
                        perturbed=",".join(st.PERTURBED)) for r in runs]
        todo: dict[tuple, list[int]] = {}
        for i, (r, k) in enumerate(zip(runs, keys, strict=True)):
            got = hs.get("stability", k) if hs is not None else None
            if got is not None:
                out[i] = st.StabilityRun(**got[0])
            else:
                todo.setdefault((r.n_train, r.schedule), []).append(i)
        for idx in todo.values():
            for i, res in zip(idx, st.stability_test([runs[i] for i in idx], noise, epochs, lr, device, progress),
                              strict=True):
                if hs is not None:
                    hs.put("stability", keys[i], res.to_dict())
                out[i] = res
    finally:
        if hs is not None:
            hs.close()
    return [out[i] for i in range(len(runs))]


__all__ = ["BATCH_MODELS", "RunSummary", "check_size", "run_from_record", "stability_histogram", "train_histogram"]
