"""Results' status and warnings as records: a status enum, and a machine-readable code with a human message beside
it.  Callers branch on the status and the code, never on the text; the message is for people.  Theory, Bayes, GAMP
and the simulations share them (a neutral module: experiments read it without importing the theory)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    """Outcome of a solve or a training run.  Only ``ok`` is a result; the others keep their numbers for diagnosis."""

    ok = "ok"
    not_converged = "not_converged"
    collapsed = "collapsed"  # the iterate flowed to another (more symmetric) branch
    diverged = "diverged"  # the iterate ran off to infinity or to an unphysical point
    inadmissible = "inadmissible"  # the map cannot be evaluated (left the admissible set)


class NoteCode(StrEnum):
    diverged = "diverged"  # online SGD: some seed's weights became non-finite or ran away (learning rate too large)
    at_resolution = "at_resolution"  # a solver accepted its best iterate at the map's resolution (graininess)
    prox_tolerance = "prox_tolerance"  # some proximal points ended above the gradient tolerance
    multistart = "multistart"  # the result is the best of several starts (which ran: FixedPoint.starts)
    legacy = "legacy"  # read from a record written before notes had codes
    not_stationary = "not_stationary"  # an ODE trajectory was still moving at its last time
    integration = "integration"  # an ODE integration stopped early (solver failure, divergence, inadmissible)
    branch_end = "branch_end"  # a branch followed along alpha ends before the alpha asked (where: the message)
    # the iteration ended on a 2-cycle: the map sends the point to its mirror image (a student direction flipped),
    # which the rotation gauge's sign rule makes look fixed; not a fixed point (status not_converged)
    mirror_cycle = "mirror_cycle"
    # global: some branch gave no verdict (not converged, ran away, left the map's domain), so the minimum reported is
    # the lowest of the others only (which branch, and its last iterate's training loss: the message)
    unresolved = "unresolved"
    # the scramblings' order parameters point different ways: the size of their mean is low, its error includes that
    directions_differ = "directions_differ"
    # a positional point the map is unstable at along theta (its leading eigenvalue there above 1): a saddle
    unstable_theta = "unstable_theta"
    # Bayes-optimal theory and GAMP (attnphase.theory.bayes.results.WARNINGS says what each means)
    uninformative_channel = "uninformative_channel"
    near_threshold = "near_threshold"
    hard_phase = "hard_phase"
    quadrature_error = "quadrature_error"
    max_iterations = "max_iterations"
    readoff_residual = "readoff_residual"
    readoff_degenerate = "readoff_degenerate"
    # simulations (why a training run stopped short of the gradient tolerance)
    no_progress = "no_progress"  # L-BFGS: a chunk of iterations without decrease (round-off)


@dataclass(frozen=True)
class Note:
    """One warning: ``code`` (a :class:`NoteCode`) to branch on, ``message`` to read."""

    code: NoteCode
    message: str

    def __str__(self) -> str:
        return self.message


def as_notes(items: object) -> tuple[Note, ...]:
    """Notes from Notes, or from plain strings of old records (code ``legacy``)."""
    out = []
    for it in items or ():  # type: ignore[attr-defined]
        out.append(it if isinstance(it, Note) else Note(NoteCode.legacy, str(it)))
    return tuple(out)
