"""Result records of the Bayes-optimal theory and of GAMP (frozen; status: attnphase.theory.fixed_point.Status).

Warnings are attnphase.notes.Note records: a code to branch on (WARNINGS says what each means), a message to read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnphase.notes import Note, NoteCode
from attnphase.theory.solvers.fixed_point import Status

WARNINGS = {
    NoteCode.uninformative_channel: "omega = 1: the labels reveal nothing about the teacher",
    NoteCode.near_threshold: "alpha within 1% of a threshold: the fixed point is marginal and iterations slow down",
    NoteCode.hard_phase: "the Bayes-optimal overlap is not reached from an uninformative start "
                         "(alpha_it < alpha < alpha_alg)",
    NoteCode.max_iterations: "GAMP stopped at its iteration limit before its change fell below the tolerance",
    NoteCode.readoff_residual: "the read-off of the teacher's fields left a residual above 1e-8 for some sample",
    NoteCode.readoff_degenerate: "some sample's fields are (nearly) all equal: the read-off is ill-conditioned there",
    NoteCode.quadrature_error: "the integration error estimate exceeds 1e-6 relative",
}


def bayes_note(code: NoteCode) -> Note:
    """The Note of one of the Bayes / GAMP warning codes, with its message."""
    return Note(code, WARNINGS[code])


def _notes_dict(notes: tuple[Note, ...]) -> dict[str, list[str]]:
    # As FixedPoint.to_dict: messages to read, codes to branch on.
    return {"warnings": [n.message for n in notes], "warning_codes": [n.code.value for n in notes]}


def _clean(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v


@dataclass(frozen=True)
class BayesPoint:
    """The Bayes-optimal (and uninformative-start GAMP) prediction at one alpha.

    overlap: q in [0, 1], the Bayes-optimal normalised overlap E[Q^_post . Q*] / d (= 1 - MMSE per coordinate;
    the package's theta would be sigma^2 q); overlap_amp: where state evolution from q -> 0+ ends; test_error(_amp):
    at those overlaps, in the contract's units; free_entropy: phi at the Bayes-optimal overlap (normalised units);
    phase: 'uninformative' (q = 0), 'partial' (0 < q < 1) or 'perfect' (q = 1)."""

    alpha: float
    L: int
    omega: float
    delta: float
    overlap: float
    overlap_amp: float
    test_error: float
    test_error_amp: float
    test_error_linear: float
    free_entropy: float
    phase: str
    status: Status
    warnings: tuple[Note, ...] = ()
    residual: float = 0.0
    errors: dict[str, float] = field(default_factory=dict)

    @property
    def converged(self) -> bool:
        return self.status == Status.ok

    def to_dict(self) -> dict[str, Any]:
        d = {k: _clean(getattr(self, k)) for k in ("alpha", "L", "omega", "delta", "overlap", "test_error",
                                                    "overlap_amp", "test_error_amp", "test_error_linear",
                                                    "free_entropy", "phase", "residual")}
        d["status"] = self.status.value
        d["converged"] = self.converged
        d.update(_notes_dict(self.warnings))
        d["test_error_err"] = self.errors.get("test_error", 0.0)
        return d


@dataclass(frozen=True)
class AmpResult:
    """One GAMP run at finite d on the package's sampled data.

    overlap: |a . Q*| / |Q*|^2 (a: GAMP's estimate; = q in the state evolution); self_overlap: |a|^2 / |Q*|^2
    (equal to the overlap on the Nishimori line); test_error: measured on the run's test set, ||y - E[T | GAMP] x||^2 / (2d)
    averaged over test samples; test_error_linear: the baseline's asymptotic value; test_error_linear_measured: the
    baseline's predictor E[T] measured on the same test set (same sampling noise as test_error); history: per
    iteration (0 = the start) the overlap and self-overlap; the test error at the iterations
    history_test_iterations."""

    d: int
    n: int
    alpha: float
    L: int
    omega: float
    delta: float
    seed: int
    init: str
    overlap: float
    self_overlap: float
    test_error: float
    test_error_linear: float
    test_error_linear_measured: float
    iterations: int
    status: Status
    warnings: tuple[Note, ...]
    history_overlap: tuple[float, ...]
    history_self_overlap: tuple[float, ...]
    history_test_error: tuple[float, ...]
    history_test_iterations: tuple[int, ...]
    seconds: float
    readoff_residual: float

    @property
    def converged(self) -> bool:
        return self.status == Status.ok

    def to_dict(self, history: bool = False) -> dict[str, Any]:
        d = {k: _clean(getattr(self, k)) for k in ("d", "n", "alpha", "L", "omega", "delta", "seed", "init",
                                                    "overlap", "self_overlap", "test_error", "test_error_linear",
                                                    "test_error_linear_measured", "iterations", "seconds",
                                                    "readoff_residual")}
        d["status"] = self.status.value
        d["converged"] = self.converged
        d.update(_notes_dict(self.warnings))
        if history:
            d["history"] = {"overlap": list(self.history_overlap), "self_overlap": list(self.history_self_overlap),
                            "test_error": list(self.history_test_error),
                            "test_error_iterations": list(self.history_test_iterations)}
        return d
