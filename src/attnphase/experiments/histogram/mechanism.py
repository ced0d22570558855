"""How positional or semantic an attention map is, measured on held-out sequences (no assumption on the model).

A slot of a sequence carries two labels, its token and its position.  Redraw one kind of label and see how
much the attention map moves, slot by slot:

* ``tok_dev``: the tokens replaced by fresh uniform draws, positions held -- zero for a map that depends on the
  positions only (a positional mechanism);
* ``pos_dev``: the positions replaced by fresh uniform draws (with repetitions), tokens held -- zero for a map
  that depends on the tokens only (a semantic mechanism).

Each is the mean over sequences and query rows of the total-variation distance between the new and the old
row (half their L1 distance, in [0, 1]).  The score ``(tok_dev - pos_dev) / (tok_dev + pos_dev)`` lies in
[-1, 1]: -1 purely positional, +1 purely semantic.  Label: ``positional`` for score <= -0.5, ``semantic`` for
>= +0.5 (one deviation at least three times the other), else ``mixed``; a map that neither redraw moves
(tok_dev + pos_dev < 0.02, e.g. uniform attention) carries no mechanism to tell apart: score 0, ``mixed``.

Why positions are redrawn with repetitions rather than permuted: a permutation cannot see the positional
solution of the counting task (attend to oneself, spread the rest evenly), since that map is the same in every
order; two slots that share a position can no longer tell each other apart, and the map moves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

THRESHOLD = 0.5
DEGENERATE = 0.02
N_MECHANISM_SEQUENCES = 1000

AttentionFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``attention(tokens (N, L), positions (N, L)) -> (..., N, L, L)`` row-stochastic maps."""


@dataclass(frozen=True)
class Mechanism:
    tok_dev: float
    pos_dev: float
    score: float
    label: str


def label_for(score: float) -> str:
    if score <= -THRESHOLD:
        return "positional"
    if score >= THRESHOLD:
        return "semantic"
    return "mixed"


def mechanism_from_devs(tok_dev: float, pos_dev: float) -> Mechanism:
    total = tok_dev + pos_dev
    score = 0.0 if total < DEGENERATE else (tok_dev - pos_dev) / total
    return Mechanism(float(tok_dev), float(pos_dev), float(score), label_for(score))


def deviations(attention: AttentionFn, tokens: np.ndarray, alphabet: int,
               seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(tok_dev, pos_dev) of ``attention`` on held-out ``tokens`` (N, L) with positions 0..L-1; the redraws
    are seeded.  Leading axes of the map's output (members of an ensemble) are kept in the results."""
    tokens = np.asarray(tokens)
    n, L = tokens.shape
    rng = np.random.default_rng([seed, 5])
    new_tokens = rng.integers(0, alphabet, size=(n, L))
    new_positions = rng.integers(0, L, size=(n, L))
    positions = np.broadcast_to(np.arange(L), (n, L))
    a = np.asarray(attention(tokens, positions), dtype=np.float64)

    def tv(b: np.ndarray) -> np.ndarray:
        return 0.5 * np.abs(np.asarray(b, dtype=np.float64) - a).sum(-1).mean(axis=(-2, -1))

    return tv(attention(new_tokens, positions)), tv(attention(tokens, new_positions))


def measure(attention: AttentionFn, tokens: np.ndarray, alphabet: int, seed: int = 0) -> list[Mechanism]:
    """The mechanism of each map ``attention`` returns (one per leading index; a list of one for one map)."""
    tok_dev, pos_dev = (np.atleast_1d(x).ravel() for x in deviations(attention, tokens, alphabet, seed))
    return [mechanism_from_devs(t, p) for t, p in zip(tok_dev, pos_dev, strict=True)]
