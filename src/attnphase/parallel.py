"""The package's one process pool: worker-count validation, one BLAS/OpenMP/numba thread per worker, spawn.

Spawn, not fork: numba's OpenMP thread pool does not survive fork().  Each worker limits its native thread
pools (threadpoolctl) and numba to one thread, so that n workers use n cores instead of n x cores threads.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from attnphase.errors import InputError, InputTypeError

T = TypeVar("T")
R = TypeVar("R")


def check_workers(workers: Any) -> int:
    """workers must be a positive int (bools refused)."""
    if isinstance(workers, bool) or not isinstance(workers, int):
        raise InputTypeError(f"workers must be an int, got {type(workers).__name__}")
    if workers < 1:
        raise InputError(f"workers must be >= 1, got {workers}")
    return workers


def single_threaded() -> None:
    """Worker initializer: one thread for BLAS/OpenMP (threadpoolctl) and for numba."""
    # Environment first (read by libraries loaded later), then the pools already loaded (numpy's BLAS is
    # imported here so that it is among them).
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[var] = "1"
    import numpy  # noqa: F401
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    try:
        import numba

        numba.set_num_threads(1)
    except ImportError:  # pragma: no cover - numba is a dependency
        pass


def map_tasks(func: Callable[[T], R], tasks: Sequence[T] | Iterable[T], workers: int = 1, progress: bool = False,
              desc: str = "", unit: str = "task") -> list[R]:
    """[func(t) for t in tasks], in order; in ``workers`` spawned processes when workers > 1 and there is more
    than one task.  func and the tasks must be picklable (module-level functions, plain data)."""
    from attnphase.progress import progress_bar

    workers = check_workers(workers)
    tasks = list(tasks)
    if workers == 1 or len(tasks) <= 1:
        return [func(t) for t in progress_bar(tasks, label=desc, unit=unit, enabled=progress)]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=ctx, initializer=single_threaded) as pool:
        return list(progress_bar(pool.map(func, tasks), label=desc, total=len(tasks), unit=unit, enabled=progress))


def pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned single-threaded processes, for code that submits tasks as it goes (use as a
    context manager).  The same spawn context and initializer as map_tasks."""
    workers = check_workers(workers)
    ctx = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=single_threaded)
