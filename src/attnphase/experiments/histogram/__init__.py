"""The study's Section 2 transformer on the counting ("histogram") task, and its data-size sweep.

``train_histogram`` trains the positional, semantic or unrestricted (``both``) one-layer model, resumably in
a results store; ``mechanism`` measures how positional or semantic a trained model's attention is;
``stability_histogram`` is the study's stability test; ``sweep_table`` summarises a data-size sweep.  Only
the data module is free of PyTorch; the rest is imported lazily, so ``import attnphase`` never needs it.
Its figures are attnphase.plots.histogram, its reproduction section
attnphase.reproduce.histogram_section.  See docs/histogram.md.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "train_histogram": "runs", "stability_histogram": "runs", "Schedule": "train", "HistogramRun": "train",
    "train_ensemble": "train", "stability_test": "stability", "StabilityRun": "stability",
    "sweep_table": "sweep", "wilson": "sweep", "measure": "mechanism", "Mechanism": "mechanism",
    "make_counting_data": "data", "count_labels": "data", "HistogramStore": "store",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"attnphase.experiments.histogram.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
