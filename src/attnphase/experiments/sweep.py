"""Resumable, parallel sweeps of finite-d simulations over a grid (d x alpha x omega x init x seed).

The parent process is the store's only writer: tasks run in-process, in local worker processes
(``workers > 1``) or on a Dask cluster (``scheduler``), and return plain dicts to the parent, which
commits each one as it arrives.  Points already in the store are skipped, so rerunning the same command
after a crash or Ctrl-C resumes where it stopped.  A task that raises is logged (stderr and the store's
``failures`` table) and retried on the next run; it never stops the sweep.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import json
import multiprocessing
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from attnphase.errors import InputError
from attnphase.experiments.store import KEY_FIELDS, Key, ResultStore, canon_float, canon_options, canonical_key
from attnphase.experiments.store import _canon_int as _int
from attnphase.setting import STUDY_A, Setting

Task = Callable[["GridPoint"], Mapping[str, Any]]


@dataclass(frozen=True)
class GridPoint:
    """One experiment: everything `simulate` needs.  Floats are canonical (see attnphase.experiments.store)."""

    d: int
    alpha: float
    omega: float
    init: str
    seed: int
    optimizer: str = "gd"
    n_test: int = 10000
    sigma: float = 0.5
    lam: float = 0.01
    A: tuple[tuple[float, ...], ...] = STUDY_A
    options: str = "{}"  # canonical JSON of the optimizer options (hashable, part of the key)
    device: str | None = field(default=None, compare=False)  # where to run; not part of the identity

    def setting(self) -> Setting:
        return Setting(omega=self.omega, sigma=self.sigma, lam=self.lam, A=self.A)

    def identity(self) -> dict[str, Any]:
        """The key fields as plain values (options decoded), e.g. to merge into a result record."""
        out = {k: getattr(self, k) for k in KEY_FIELDS}
        out["A"] = [list(r) for r in self.A]
        out["options"] = json.loads(self.options)
        return out

    def key(self) -> Key:
        return canonical_key({k: getattr(self, k) for k in KEY_FIELDS})

    def label(self) -> str:
        return f"d={self.d} alpha={self.alpha:g} omega={self.omega:g} init={self.init} seed={self.seed}"


def _as_tuple(values: Any, name: str) -> tuple[Any, ...]:
    if isinstance(values, str | int | float):
        values = (values,)
    out = tuple(values)
    if not out:
        raise InputError(f"{name}: need at least one value")
    return out


def _dedupe(values: Iterable[Any]) -> tuple[Any, ...]:
    # A SPEC like "0.1,0.1" must not make a point count twice toward the total.
    return tuple(dict.fromkeys(values))


@dataclass(frozen=True)
class Grid:
    """A Cartesian grid of experiments.  Values are validated and canonicalised on construction.

    `options` are extra keyword arguments for `simulate` (optimizer options such as steps or lr, or
    dtype); they are part of every point's identity, so changing them starts new points.
    """

    d: tuple[int, ...]
    alphas: tuple[float, ...]
    omegas: tuple[float, ...]
    inits: tuple[str, ...] = ("positional", "semantic")
    seeds: tuple[int, ...] = (0,)
    optimizer: str = "gd"
    n_test: int = 10000
    sigma: float = 0.5
    lam: float = 0.01
    A: tuple[tuple[float, ...], ...] = STUDY_A
    options: Mapping[str, Any] = field(default_factory=dict)
    device: str | None = None

    def __post_init__(self) -> None:
        ds = _dedupe(_int(v, "d") for v in _as_tuple(self.d, "d"))
        if any(v < 2 for v in ds):  # simulate's own rule (sampling.check_size), checked before the first point
            raise InputError(f"d must be >= 2, got {list(ds)}")
        alphas = _dedupe(canon_float(v, "alpha") for v in _as_tuple(self.alphas, "alphas"))
        if any(a <= 0 for a in alphas):
            raise InputError(f"alpha must be > 0, got {list(alphas)}")
        omegas = _dedupe(canon_float(v, "omega") for v in _as_tuple(self.omegas, "omegas"))
        inits = _dedupe(str(v).strip() for v in _as_tuple(self.inits, "inits"))
        if any(not v for v in inits):
            raise InputError("inits: empty name")
        seeds = _dedupe(_int(v, "seed") for v in _as_tuple(self.seeds, "seeds"))
        n_test = _int(self.n_test, "n_test")
        if n_test < 1:
            raise InputError(f"n_test must be >= 1, got {n_test}")
        if not str(self.optimizer).strip():
            raise InputError("optimizer: empty name")
        # Setting validates omega range, sigma, lam and A; canonicalise after validation.
        base = Setting(sigma=self.sigma, lam=self.lam, A=self.A)
        for om in omegas:
            base.replace(omega=om)
        A = tuple(tuple(canon_float(v, "A") for v in row) for row in base.A)
        canon_options(self.options)  # fail early on options that cannot be part of a key
        for name, value in (
            ("d", ds), ("alphas", alphas), ("omegas", omegas), ("inits", inits), ("seeds", seeds),
            ("n_test", n_test), ("optimizer", str(self.optimizer).strip()),
            ("sigma", canon_float(base.sigma, "sigma")), ("lam", canon_float(base.lam, "lam")), ("A", A),
            ("options", dict(self.options)),
        ):
            object.__setattr__(self, name, value)
        if len(self) > MAX_GRID_POINTS:
            raise InputError(f"the grid has {len(self):,} points (d x alphas x omegas x inits x seeds), more than "
                             f"the {MAX_GRID_POINTS:,} one store is meant to hold; split it into several sweeps")

    def __len__(self) -> int:
        return len(self.d) * len(self.alphas) * len(self.omegas) * len(self.inits) * len(self.seeds)

    def points(self) -> Iterator[GridPoint]:
        """All points.  Seeds are the outer loop so that an interrupted sweep has covered the whole
        phase diagram with the first seeds rather than every seed of a corner; small d come first."""
        opts = canon_options(self.options)
        for seed in self.seeds:
            for d in sorted(self.d):
                for omega in self.omegas:
                    for init in self.inits:
                        for alpha in self.alphas:
                            yield GridPoint(
                                d=d, alpha=alpha, omega=omega, init=init, seed=seed,
                                optimizer=self.optimizer, n_test=self.n_test, sigma=self.sigma,
                                lam=self.lam, A=self.A, options=opts, device=self.device,
                            )


# A bound on one grid (points of one sweep or one basins study): far above any study (the full one has ~10^4),
# far below what a typo like --seeds 0:1000000000 would materialise.
MAX_GRID_POINTS = 1_000_000


def check_scheduler(address: str, timeout: float = 3.0) -> None:
    """Refuse, within `timeout` seconds, a Dask scheduler address nothing answers at (instead of the 30 s
    connection timeout of dask.distributed, spent in silence).  Only tcp:// (or scheme-less host:port) addresses
    are probed; others are left to Dask."""
    import socket
    from urllib.parse import urlsplit

    text = str(address).strip()
    if not text:
        raise InputError("--scheduler: empty address")
    parts = urlsplit(text if "://" in text else f"tcp://{text}")
    if parts.scheme not in ("tcp", "tls"):
        return
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise InputError(f"--scheduler: cannot read a port in {address!r}") from None
    if not host or port is None:
        raise InputError(f"--scheduler: expected an address like tcp://host:8786, got {address!r}")
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise InputError(f"--scheduler: nothing answers at {address!r} within {timeout:g} s ({exc})") from None


@dataclass
class SweepSummary:
    """Counts of one run: total grid points, skipped (already stored), ran (stored now), failed."""

    total: int
    skipped: int
    ran: int
    failed: int

    def line(self) -> str:
        return (
            f"{self.total} grid points: {self.ran} ran, {self.skipped} skipped (already in store), "
            f"{self.failed} failed"
        )


def simulation_task(point: GridPoint) -> dict[str, Any]:
    """The default task: one finite-d simulation (attnphase.experiments.simulation.simulate)."""
    from attnphase.experiments.simulation import simulate

    res = simulate(
        point.setting(), point.d, point.alpha, init=point.init, optimizer=point.optimizer, seed=point.seed,
        n_test=point.n_test, device=point.device, **point.identity()["options"],
    )
    return res.to_dict()


def load_task(spec: str) -> Task:
    """Resolve "package.module:function" (used by the CLI's hidden --task option, e.g. for tests)."""
    mod_name, sep, func_name = str(spec).partition(":")
    if not sep or not mod_name or not func_name:
        raise InputError(f"--task must look like 'module:function', got {spec!r}")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise InputError(f"--task: cannot import {mod_name!r} ({exc})") from None
    func = getattr(mod, func_name, None)
    if not callable(func):
        raise InputError(f"--task: {mod_name!r} has no function {func_name!r}")
    return func


def _run_point(task: Task, point: GridPoint) -> tuple[bool, Any]:
    """Run one task where it is scheduled; exceptions come back as text so nothing unpicklable travels."""
    try:
        return True, dict(task(point))
    except Exception as exc:  # noqa: BLE001 - any failure of one point is reported, never fatal
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" [{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}]" if tb else ""
        msg = str(exc).splitlines()[0] if str(exc) else ""
        return False, f"{type(exc).__name__}: {msg}{where}"


def _exit_with_parent(parent: int, poll_s: float = 1.0) -> None:
    # A pool worker blocks forever on its task queue if the parent is SIGKILLed (it holds both ends of
    # the pipe, so it never sees EOF); once the parent is gone nobody can store its results anyway.
    while True:
        time.sleep(poll_s)
        if os.getppid() != parent:
            os._exit(1)


def _init_worker(n_threads: int, parent: int) -> None:
    # N workers each using every core would oversubscribe the CPU (torch/BLAS default to all cores).
    # Must run before torch is imported, hence environment variables.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, str(n_threads))
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True, name="parent-watch").start()


Outcome = tuple[GridPoint, bool, Any]  # (point, succeeded, record dict or error text)


def _results_local(task: Task, points: list[GridPoint], workers: int) -> Iterator[Outcome]:
    if workers == 1:
        for p in points:
            yield (p, *_run_point(task, p))
        return
    threads = max(1, (os.cpu_count() or 1) // workers)
    # spawn, not fork: forking a parent that has imported torch (or holds an SQLite handle) is unsafe.
    ctx = multiprocessing.get_context("spawn")
    ex = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                                initargs=(threads, os.getpid()))
    try:
        futures = {ex.submit(_run_point, task, p): p for p in points}
        for fut in cf.as_completed(futures):
            p = futures[fut]
            try:
                yield (p, *fut.result())
            except Exception as exc:  # noqa: BLE001 - e.g. a worker killed by the OS (BrokenProcessPool)
                yield p, False, f"{type(exc).__name__}: {exc}"
    except BaseException:
        # Ctrl-C or an error in the parent: do not wait for running points, their results would be lost
        # anyway (nobody is left to store them).
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    else:
        ex.shutdown(wait=True)


def _results_dask(task: Task, points: list[GridPoint], address: str) -> Iterator[Outcome]:
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise InputError(
            "--scheduler needs dask.distributed; install it with: pip install 'attnphase[dask]'"
        ) from None
    check_scheduler(address)
    print(f"sweep: connecting to the Dask scheduler at {address} (up to 30 s)", file=sys.stderr)
    try:
        client = Client(address, timeout=30)
    except (OSError, TimeoutError) as exc:
        raise InputError(f"cannot connect to the Dask scheduler at {address!r}: {exc}") from None
    futures = []
    try:
        # pure=False: two points must never be merged by Dask's key hashing.
        futures = [client.submit(_run_point, task, p, pure=False) for p in points]
        owner = {f.key: p for f, p in zip(futures, points, strict=True)}
        for fut in as_completed(futures):
            p = owner[fut.key]
            try:
                yield (p, *fut.result())
            except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker
                yield p, False, f"{type(exc).__name__}: {exc}"
    finally:
        for f in futures:
            if not f.done():
                f.cancel()
        client.close()


def run_sweep(
    store_path: str | os.PathLike[str],
    grid: Grid,
    workers: int = 1,
    scheduler: str | None = None,
    task: Task | None = None,
    progress: bool = True,
    label: str = "sweep (simulations)",
) -> SweepSummary:
    """Run every grid point not yet in the store; each result is committed as soon as it arrives.

    workers: local processes (1 = in this process).  scheduler: address of an existing Dask scheduler
    (takes the place of `workers`).  task: function GridPoint -> record dict, default
    :func:`simulation_task`; it must be importable by name (module-level) for workers > 1 or Dask.
    Progress (tqdm) and one line per failed point go to stderr.
    """
    if scheduler is not None and workers != 1:
        raise InputError("use either workers or scheduler, not both")
    workers = int(workers)
    if workers < 1:
        raise InputError(f"workers must be >= 1, got {workers}")
    task = simulation_task if task is None else task
    from attnphase.progress import progress_bar

    with ResultStore(store_path) as store:
        done = store.done_keys()
        all_points = list(grid.points())
        todo = [p for p in all_points if p.key() not in done]
        summary = SweepSummary(total=len(all_points), skipped=len(all_points) - len(todo), ran=0, failed=0)
        # no delay: the bar's first line says how many points the store already holds
        bar = progress_bar(label=label, total=summary.total, initial=summary.skipped, unit="pt",
                           enabled=progress, delay=0.0)
        try:
            if not todo:
                return summary
            results = (_results_dask(task, todo, scheduler) if scheduler is not None
                       else _results_local(task, todo, workers))
            for point, ok, payload in results:
                key = point.key()
                if ok:
                    # The grid's canonical identity overrides the task's echo of the same fields.
                    record = {**payload, **point.identity()}
                    if store.add(record, key=key):
                        summary.ran += 1
                    else:  # another sweep on the same store got there first
                        summary.skipped += 1
                else:
                    summary.failed += 1
                    store.add_failure(key, payload)
                    bar.write(f"sweep: failed {point.label()}: {payload}", file=sys.stderr)
                bar.update(1)
                bar.set_postfix(failed=summary.failed, refresh=False)
        finally:
            bar.close()
    return summary
