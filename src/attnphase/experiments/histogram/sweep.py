"""The data-size sweep of the unrestricted model: which mechanism it learns, as a function of n_train."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnphase.experiments.histogram.train import HistogramRun

LABELS = ("positional", "semantic", "mixed")


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval (95 % by default) of a binomial proportion k / n; (0, 1) when n = 0."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    # the ends are exact at k = 0 and k = n (rounding would leave 0.9999999999999999)
    return (0.0 if k == 0 else max(0.0, centre - half)), (1.0 if k == n else min(1.0, centre + half))


@dataclass(frozen=True)
class SweepRow:
    """One data size: runs, the fraction of each mechanism with its Wilson interval, accuracies."""

    n_train: int
    runs: int
    counts: dict[str, int]
    fractions: dict[str, float]
    intervals: dict[str, tuple[float, float]]
    mean_accuracy: float
    sem_accuracy: float
    mean_accuracy_by: dict[str, float]
    mean_score: float

    def to_dict(self) -> dict[str, float | int]:
        d: dict[str, float | int] = {"n_train": self.n_train, "runs": self.runs}
        for lab in LABELS:
            d[f"frac_{lab}"] = self.fractions[lab]
            d[f"{lab}_lo"], d[f"{lab}_hi"] = self.intervals[lab]
        d["mean_accuracy"] = self.mean_accuracy
        d["sem_accuracy"] = self.sem_accuracy
        for lab in LABELS:
            d[f"accuracy_{lab}"] = self.mean_accuracy_by[lab]
        d["mean_score"] = self.mean_score
        return d


def sweep_table(runs: Sequence[HistogramRun]) -> list[SweepRow]:
    """Group runs by n_train (ascending) and summarise them."""
    out = []
    for n in sorted({r.n_train for r in runs}):
        sub = [r for r in runs if r.n_train == n]
        acc = np.array([r.val_accuracy for r in sub])
        counts = {lab: sum(r.mechanism == lab for r in sub) for lab in LABELS}
        by = {lab: float(np.mean([r.val_accuracy for r in sub if r.mechanism == lab])) if counts[lab] else
              float("nan") for lab in LABELS}
        out.append(SweepRow(
            n_train=n, runs=len(sub), counts=counts, fractions={lab: counts[lab] / len(sub) for lab in LABELS},
            intervals={lab: wilson(counts[lab], len(sub)) for lab in LABELS},
            mean_accuracy=float(acc.mean()),
            sem_accuracy=float(acc.std(ddof=1) / math.sqrt(len(acc))) if len(acc) > 1 else float("nan"),
            mean_accuracy_by=by, mean_score=float(np.mean([r.mechanism_score for r in sub]))))
    return out
