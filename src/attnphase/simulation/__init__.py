"""Finite-d experiments: sample data from the teacher, train the attention layer, measure overlaps and errors.

    from attnphase.simulation import simulate
    res = simulate(Setting(omega=0.3), d=500, alpha=1.5, init="semantic", optimizer="lbfgs", seed=0)
    res.to_dict()
"""

from attnphase.simulation.experiment import INITS, SimulationResult, initial_Q, measure, simulate
from attnphase.simulation.measure import fit_linear, generalization_error, linear_test_error, overlaps
from attnphase.simulation.memory import check_memory, estimate_memory
from attnphase.simulation.model import STUDENTS, EmpiricalRisk, attention_matrix, attention_output, sample_errors
from attnphase.simulation.sampling import Dataset, Problem, positional_encodings, sample_dataset
from attnphase.simulation.training import DEFAULTS, OPTIMIZERS, TrainingLog, train

__all__ = [
    "simulate",
    "SimulationResult",
    "sample_dataset",
    "Problem",
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
