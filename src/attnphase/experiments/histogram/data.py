"""The counting task of the study's Section 2: label each token by how often it occurs in its sequence.

Pure numpy (no torch), so the data and its split can be inspected and tested on the light install.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.errors import InputError

SEQ_LEN = 10
ALPHABET = 15
N_DRAWS = 50_000
TRAIN_FRACTION = 0.7
DATA_SEED = 0


@dataclass(frozen=True)
class CountingData:
    """Unique sequences of a counting task and their seeded train/validation split (token ids, int64)."""

    train: np.ndarray  # (n_train_full, seq_len)
    val: np.ndarray  # (n_val, seq_len)
    seq_len: int
    alphabet: int
    n_draws: int
    seed: int

    @property
    def n_classes(self) -> int:
        return self.seq_len + 1  # counts 0..L (0 never occurs, kept for the study's 11 classes at L = 10)


def count_labels(tokens: np.ndarray) -> np.ndarray:
    """Label of every token: how many times it occurs in its own sequence (same shape as ``tokens``)."""
    tokens = np.asarray(tokens)
    return (tokens[..., :, None] == tokens[..., None, :]).sum(-1)


def make_counting_data(seq_len: int = SEQ_LEN, alphabet: int = ALPHABET, n_draws: int = N_DRAWS,
                       train_fraction: float = TRAIN_FRACTION, seed: int = DATA_SEED) -> CountingData:
    """Draw ``n_draws`` sequences uniformly, drop duplicates, shuffle and split ``train_fraction`` / rest.

    One seed governs both the draws and the split, so the same arguments always give the same two sets.
    """
    if seq_len < 2 or alphabet < 2 or n_draws < 2:
        raise InputError(f"need seq_len >= 2, alphabet >= 2, n_draws >= 2; got {seq_len}, {alphabet}, {n_draws}")
    if not 0.0 < train_fraction < 1.0:
        raise InputError(f"train_fraction must lie in (0, 1), got {train_fraction}")
    rng = np.random.default_rng([seed, 0])
    draws = rng.integers(0, alphabet, size=(n_draws, seq_len), dtype=np.int64)
    unique = np.unique(draws, axis=0)  # sorted: the shuffle below makes the split independent of that order
    unique = unique[np.random.default_rng([seed, 1]).permutation(len(unique))]
    n_train = int(round(train_fraction * len(unique)))
    if n_train < 1 or n_train >= len(unique):
        raise InputError(f"{len(unique)} unique sequences cannot be split {train_fraction:g} / rest")
    return CountingData(train=unique[:n_train], val=unique[n_train:], seq_len=seq_len, alphabet=alphabet,
                        n_draws=n_draws, seed=seed)


def train_subset(data: CountingData, n_train: int, seed: int) -> np.ndarray:
    """The ``n_train`` training sequences a run with ``seed`` uses: a seeded subset of the training split
    (all of it when ``n_train`` is the split's size), so the data-size sweep also varies the draw of data."""
    full = len(data.train)
    if not 1 <= n_train <= full:
        raise InputError(f"n_train must lie in 1..{full} (the training split), got {n_train}")
    if n_train == full:
        return data.train
    idx = np.random.default_rng([seed, 2]).choice(full, size=n_train, replace=False)
    return data.train[np.sort(idx)]
