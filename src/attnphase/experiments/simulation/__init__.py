"""Finite-d experiments: sample data from the teacher, train the attention layer, measure overlaps and errors.

    from attnphase.experiments.simulation import simulate
    res = simulate(Setting(omega=0.3), d=500, alpha=1.5, init="semantic", optimizer="lbfgs", seed=0)
    res.to_dict()
"""

import importlib
from typing import Any

# Names resolved on first use (PEP 562): importing a torch-free submodule (basins classification, memory
# estimate) must not import PyTorch, so that the light install (no 'experiments' extra) keeps working.
_WHERE = {
    "experiment": ("INITS", "SimulationResult", "initial_Q", "measure", "simulate"),
    "measure": ("fit_linear", "generalization_error", "linear_test_error", "overlaps"),
    "memory": ("check_memory", "estimate_memory"),
    "model": ("STUDENTS", "EmpiricalRisk", "attention_matrix", "attention_output", "sample_errors"),
    "sampling": ("Dataset", "SampledProblem", "positional_encodings", "sample_dataset"),
    "training": ("DEFAULTS", "OPTIMIZERS", "TrainingLog", "train"),
}
_MODULE_OF = {name: mod for mod, names in _WHERE.items() for name in names}


def __getattr__(name: str) -> Any:
    mod = _MODULE_OF.get(name)
    if mod is None:
        raise AttributeError(f"module 'attnphase.experiments.simulation' has no attribute {name!r}")
    return getattr(importlib.import_module(f"attnphase.experiments.simulation.{mod}"), name)


__all__ = [
    "simulate",
    "SimulationResult",
    "sample_dataset",
    "SampledProblem",
    "Dataset",
    "positional_encodings",
    "EmpiricalRisk",
    "attention_matrix",
    "attention_output",
    "sample_errors",
    "train",
    "TrainingLog",
    "OPTIMIZERS",
    "DEFAULTS",
    "INITS",
    "initial_Q",
    "overlaps",
    "generalization_error",
    "fit_linear",
    "linear_test_error",
    "measure",
    "estimate_memory",
    "check_memory",
    "STUDENTS",
]
