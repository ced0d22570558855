"""The one progress helper: a tqdm bar on stderr with a label saying what runs, off under ``--quiet``.

Every long-running command and library loop takes ``progress: bool`` and calls :func:`progress_bar`, so that
bars look the same everywhere and ``--quiet`` (or ``progress=False`` from Python) silences all of them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["progress_bar"]


def progress_bar(iterable: Iterable[Any] | None = None, *, label: str, total: int | None = None,
                 enabled: bool = True, unit: str = "it", initial: int = 0, delay: float = 0.5) -> Any:
    """A tqdm bar on stderr, described by ``label`` (e.g. "phase diagram", "theory curves").

    ``enabled=False`` gives the same object with its output disabled, so callers never branch on it.  The bar
    appears only after ``delay`` seconds, so that a command that fails at once or finishes at once prints its
    one line and nothing else.
    """
    from tqdm import tqdm

    return tqdm(iterable, desc=label, total=total, unit=unit, initial=initial, file=sys.stderr,
                disable=not enabled, dynamic_ncols=True, delay=delay)
