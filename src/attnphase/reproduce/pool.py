"""The process pool of the reproduction's theory jobs (one place, to be replaced by the project's shared
parallel module): spawned workers, one BLAS / numba thread each, results yielded as they finish."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any


@contextlib.contextmanager
def _single_threaded_children() -> Iterator[None]:
    """Spawned theory workers inherit the environment; BLAS reads these variables when numpy is imported,
    which happens while the child unpickles its first job, too early for an initializer to help.  Without
    them N workers would each start a thread per core."""
    names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")
    saved = {n: os.environ.get(n) for n in names}
    for n in names:
        os.environ.setdefault(n, "1")
    try:
        yield
    finally:
        for n, v in saved.items():
            if v is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = v


def run_in_pool(calls: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]], workers: int
                ) -> Iterator[tuple[int, Any]]:
    """Run func(*args) for each call in `workers` spawned processes; yield (index, result) as each finishes.

    An error or Ctrl-C in the parent cancels what has not started and does not wait for running calls
    (whatever the caller stored from earlier results is kept)."""
    # spawn, not fork: the parent may hold torch / BLAS thread pools that do not survive a fork
    from attnphase.parallel import terminate, watch_parent

    ctx = multiprocessing.get_context("spawn")
    with _single_threaded_children():
        ex = cf.ProcessPoolExecutor(max_workers=min(workers, len(calls)), mp_context=ctx, initializer=watch_parent,
                                    initargs=(os.getpid(),))  # no worker outlives a killed parent
    try:
        futures = {ex.submit(func, *args): i for i, (func, args) in enumerate(calls)}
        for fut in cf.as_completed(futures):
            yield futures[fut], fut.result()
    except BaseException:
        terminate(ex)
        raise
    ex.shutdown(wait=True)
