"""The package's one process pool: worker-count validation, one BLAS/OpenMP/numba thread per worker, spawn.

Spawn, not fork: numba's OpenMP thread pool does not survive fork().  Each worker limits its native thread
pools (threadpoolctl) and numba to one thread, so that n workers use n cores instead of n x cores threads.
map_tasks with n workers runs n - 1 spawned processes and takes tasks in the calling process too (run_shared).

No worker outlives its parent: each watches its parent's pid and exits when the parent is gone (killed with
SIGKILL or SIGTERM, the parent runs no cleanup), and an exception in the parent (Ctrl-C) terminates the workers
instead of waiting for their running tasks.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
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


# How often a worker looks for its parent (seconds): a worker left behind exits within this.
PARENT_POLL_SECONDS = 0.5


def _exit_with_parent(parent: int) -> None:
    while True:
        time.sleep(PARENT_POLL_SECONDS)
        if os.getppid() != parent:  # re-parented: the process that started us is gone
            os._exit(1)


def watch_parent(parent: int) -> None:
    """In a child process: exit at once when process `parent` (its parent's pid, taken in the parent) is gone.
    A daemon thread polls os.getppid(); a running task is abandoned (nobody is left to receive its result)."""
    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True, name="attnphase-parent-watch").start()


def single_threaded(parent: int | None = None) -> None:
    """Worker initializer: one thread for BLAS/OpenMP (threadpoolctl) and for numba; with `parent`, exit when
    that process is gone (watch_parent)."""
    if parent is not None:
        watch_parent(parent)
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
    bar = progress_bar(label=desc, total=len(tasks), unit=unit, enabled=progress)
    try:
        return run_shared(func, tasks, min(workers, len(tasks)), lambda: bar.update(1))
    finally:
        bar.close()


def run_shared(func: Callable[[T], R], tasks: Sequence[T], workers: int,
               done: Callable[[], None] | None = None) -> list[R]:
    """[func(t) for t in tasks] on `workers` cores: this process is one of them (one thread while the others run)
    and workers - 1 spawned processes the others, each taking the next task as it is free.  Saves a worker's start-up
    (imports, the compiled kernels' cache: about 0.75 s of CPU) and keeps this process's core busy.  done() after each
    task."""
    import queue
    from concurrent.futures import FIRST_COMPLETED, wait

    todo: queue.SimpleQueue = queue.SimpleQueue()
    for i in range(len(tasks)):
        todo.put(i)
    results: list = [None] * len(tasks)
    failed: list[BaseException] = []

    def next_index() -> int | None:
        try:
            return None if failed else todo.get_nowait()
        except queue.Empty:
            return None

    with pool(workers - 1) as ex:
        def feed() -> None:
            running: dict = {}
            try:
                while True:
                    while len(running) < workers - 1 and (i := next_index()) is not None:
                        running[ex.submit(func, tasks[i])] = i
                    if not running:
                        return
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for f in finished:
                        results[running.pop(f)] = f.result()
                        if done is not None:
                            done()
            except BaseException as exc:  # (raised in the caller's thread below)
                failed.append(exc)

        feeder = threading.Thread(target=feed, daemon=True, name="attnphase-feeder")
        feeder.start()
        with _one_thread():
            while (i := next_index()) is not None:
                results[i] = func(tasks[i])
                if done is not None:
                    done()
        feeder.join()
        if failed:
            raise failed[0]
    return results


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """This process's numba and BLAS / OpenMP pools at one thread inside the block (restored after)."""
    import numba
    from threadpoolctl import threadpool_limits

    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        numba.set_num_threads(before)


def terminate(executor: ProcessPoolExecutor) -> None:
    """Stop a pool now: cancel what has not started and terminate the workers (their running tasks are lost)."""
    procs = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)


class Pool(ProcessPoolExecutor):
    """ProcessPoolExecutor whose context manager terminates the workers when the block raises (Ctrl-C, an
    error): the default would wait for every running task first."""

    def __exit__(self, exc_type, exc, tb):  # noqa: ANN001, ANN204
        if exc_type is not None:
            terminate(self)
            return False
        return super().__exit__(exc_type, exc, tb)


def pool(workers: int) -> Pool:
    """A pool of ``workers`` spawned single-threaded processes, for code that submits tasks as it goes (use as a
    context manager).  The same spawn context and initializer as map_tasks; workers exit with the parent."""
    workers = check_workers(workers)
    ctx = multiprocessing.get_context("spawn")
    return Pool(max_workers=workers, mp_context=ctx, initializer=single_threaded, initargs=(os.getpid(),))


def manager():  # noqa: ANN201 - a started multiprocessing SyncManager
    """A started multiprocessing manager (spawned) whose server process exits with the parent (use as a context
    manager), e.g. for a progress queue shared with pool workers."""
    from multiprocessing.managers import SyncManager

    m = SyncManager(ctx=multiprocessing.get_context("spawn"))
    m.start(watch_parent, (os.getpid(),))
    return m
