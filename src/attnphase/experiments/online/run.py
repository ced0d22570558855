"""``run_online``: online SGD from random starts at finite d, several seeds at once, resumable through the store.

    from attnphase.experiments.online import run_online
    res = run_online(Setting(omega=0.3), d=1000, lr=5.0, init_scale=0.1, t_max=30, seeds=range(8))
    res.mean()["m"]          # mean |m| over the seeds at res.t

With ``store=PATH`` every finished batch of seeds is written to the results store (table ``theory``, kind
``online_sgd``, one row per seed keyed by the setting, d, lr, init scale, t_max, n_points and n_test) as soon as
it is done; a rerun reads those seeds back and runs only the others.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from attnphase.errors import InputError, InputTypeError
from attnphase.experiments.online.result import OnlineResult
from attnphase.notes import Note, NoteCode
from attnphase.setting import Setting, check_int, check_number, check_positive

KIND = "online_sgd"
# Steps of one seed (t_max * d): 10^8 is hours at d = 4000 on one core, far beyond any figure's need.
MAX_STEPS = 100_000_000
MAX_POINTS = 100_000
DEFAULT_INIT_SCALE = 0.1  # the package's random start (simulate's init="random")
DEFAULT_N_TEST = 1000
_BLOCK = 64  # fresh samples drawn per call of the generators (does not change the numbers)
USABLE_FRACTION = 0.5  # of the free memory a run may plan to use
# A seed whose q (trace) passes this ran away: with a rate far too large the weights grow until the softmax
# saturates and the gradient vanishes, so they rarely become non-finite (d = 20, lr 5000: q ~ 1e24 at t = 3).
RUNAWAY_Q = 1e6


def check_seeds(seeds: Any) -> tuple[int, ...]:
    if isinstance(seeds, int | np.integer) and not isinstance(seeds, bool):
        seeds = [seeds]
    if isinstance(seeds, str) or not isinstance(seeds, Iterable):
        raise InputTypeError(f"seeds must be an integer or a list of integers, got {seeds!r}")
    out = tuple(check_int("seed", s, 0) for s in seeds)
    if not out:
        raise InputError("seeds must name at least one seed")
    if len(set(out)) != len(out):
        raise InputError(f"seeds must be distinct, got {list(out)}")
    return out


def check_run(setting: Any, d: Any, lr: Any, init_scale: Any, t_max: Any, n_points: Any,
              n_test: Any) -> tuple[int, float, float, float, int, int]:
    """The run's parameters, validated (one-line ValueError / TypeError) before anything is drawn."""
    if not isinstance(setting, Setting):
        raise InputTypeError(f"setting must be an attnphase Setting, got {type(setting).__name__}")
    d = check_int("d", d, 2)
    lr = check_positive("lr", lr)
    init_scale = check_positive("init_scale", init_scale)
    t_max = check_positive("t_max", t_max)
    if t_max * d > MAX_STEPS:
        raise InputError(f"t_max * d = {t_max * d:.3g} SGD steps per seed, at most {MAX_STEPS:.0e} are accepted")
    n_points = check_int("n_points", n_points, 2)
    if n_points > MAX_POINTS:
        raise InputError(f"n_points must be at most {MAX_POINTS}, got {n_points}")
    n_test = check_int("n_test", n_test, 1)
    return d, lr, init_scale, t_max, n_points, n_test


def memory_bytes(setting: Setting, d: int, n_seeds: int, n_test: int) -> int:
    """Peak bytes of one batch: the test tokens twice (x + p and the float64 draws) and the blocks of samples."""
    L = setting.L
    return 8 * n_seeds * L * d * (2 * n_test + 6 * _BLOCK)


def _check_memory(setting: Setting, d: int, n_seeds: int, n_test: int) -> None:
    from attnphase.experiments.simulation.memory import available_host_memory

    need, avail = memory_bytes(setting, d, n_seeds, n_test), available_host_memory() * USABLE_FRACTION
    if need > avail:
        raise InputError(f"d = {d}, {n_seeds} seeds at once, n_test = {n_test}: about {need / 2**30:.3g} GiB, more "
                         f"than the {avail / 2**30:.3g} GiB usable here (fewer seeds per batch or a smaller n_test)")


def store_key(setting: Setting, d: int, lr: float, init_scale: float, t_max: float, n_points: int, n_test: int,
              seed: int, tilt: tuple[float, float] = (0.0, 0.0)) -> Any:
    from attnphase.experiments.store import TheoryKey

    params = {"d": d, "lr": lr, "init_scale": init_scale, "t_max": t_max, "n_points": n_points, "n_test": n_test}
    if any(tilt):  # only then: the keys of plain random starts stay what they were
        params["tilt"] = list(tilt)
    return TheoryKey(KIND, {**setting.to_dict(), "student": setting.student}, precision="float64", seed=seed,
                     params=params)


def time_grid(t_max: float, n_points: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Recorded times and the step counts they fall on (round(t d)); t is reported as steps / d exactly."""
    steps = np.unique(np.round(np.linspace(0.0, t_max, n_points) * d).astype(np.int64))
    return steps / d, steps


def _run_batch(setting: Setting, d: int, lr: float, init_scale: float, steps: np.ndarray, seeds: tuple[int, ...],
               n_test: int, device: Any, bar: Any, tilt: tuple[float, float]) -> dict[str, np.ndarray]:
    import torch

    from attnphase.experiments.online.sgd import OnlineSGD, draw_seed

    cols = setting.field_rank
    probs = [draw_seed(setting, d, s, init_scale, n_test, cols, tilt) for s in seeds]
    sgd = OnlineSGD(setting, d, probs, lr, untied=setting.untied, device=device, block=_BLOCK)
    n, S = len(steps), len(seeds)
    out = {"q": np.empty((S, n, cols, cols)), "m": np.empty((S, n, setting.L, cols)),
           "theta": np.empty((S, n, cols, setting.r_star)), "test_error": np.empty((S, n)),
           "train_error": np.full((S, n), np.nan)}
    t0 = time.perf_counter()
    done = 0
    with torch.no_grad():
        for j, target in enumerate(steps):
            if target > done:
                out["train_error"][:, j] = sgd.advance(int(target - done))
                bar.update(int(target - done) * S)
                done = int(target)
            out["q"][:, j], out["m"][:, j], out["theta"][:, j] = sgd.overlaps()
            out["test_error"][:, j] = sgd.test_error()
    out["seconds"] = np.full(S, (time.perf_counter() - t0) / S)
    return out


def run_online(setting: Setting, *, d: int, lr: float, init_scale: float = DEFAULT_INIT_SCALE, t_max: float,
               seeds: Any = (0,), n_points: int = 200, n_test: int = DEFAULT_N_TEST, device: str | None = "auto",
               store: str | None = None, batch: int | None = None, progress: bool = False,
               tilt: tuple[float, float] = (0.0, 0.0)) -> OnlineResult:
    """Online SGD (one fresh sample per step) from Q_ij iid N(0, init_scale^2), for each seed, to time t_max.

    Every seed has its own teacher, start, sample stream and held-out test set (n_test samples);
    ``batch`` seeds (default: all) advance together as one tensor.  The student is ``setting.student``.
    device: "auto" (CUDA when present), "cpu" or "cuda".  store: a results store to resume from and write to.
    tilt = (a, b): an informed start, the random one plus a along the positional direction and b Q* in the first
    column (m_1 + a, theta + sigma^2 b in the study; :func:`attnphase.experiments.online.sgd.draw_seed`).
    """
    from attnphase.experiments.simulation.sampling import resolve_device

    d, lr, init_scale, t_max, n_points, n_test = check_run(setting, d, lr, init_scale, t_max, n_points, n_test)
    seeds = check_seeds(seeds)
    tilt = (check_number("tilt", tilt[0]), check_number("tilt", tilt[1]))
    batch = len(seeds) if batch is None else check_int("batch", batch, 1)
    dev = resolve_device(None if device in (None, "auto") else device)
    _check_memory(setting, d, min(batch, len(seeds)), n_test)
    t, steps = time_grid(t_max, n_points, d)
    rows: dict[int, dict[str, np.ndarray]] = {}
    st = None
    if store is not None:
        from attnphase.experiments.store import ResultStore

        st = ResultStore(store)
        for s in seeds:
            v = st.get_theory(store_key(setting, d, lr, init_scale, t_max, n_points, n_test, s, tilt))
            if v is not None:
                rows[s] = {k: np.array(v[k], dtype=float) for k in
                           ("q", "m", "theta", "test_error", "train_error")}
                rows[s]["seconds"] = np.array(0.0)
    reused = len(rows)
    todo = [s for s in seeds if s not in rows]
    from attnphase.progress import progress_bar

    try:
        with progress_bar(label=f"online SGD d = {d}", total=int(steps[-1]) * len(todo), enabled=progress,
                          unit="step") as bar:
            for i in range(0, len(todo), batch):
                part = tuple(todo[i:i + batch])
                out = _run_batch(setting, d, lr, init_scale, steps, part, n_test, dev, bar, tilt)
                for k, s in enumerate(part):
                    rows[s] = {name: arr[k] for name, arr in out.items()}
                    if st is not None:
                        st.put_theory(store_key(setting, d, lr, init_scale, t_max, n_points, n_test, s, tilt),
                                      {name: np.where(np.isfinite(a), a, np.nan).tolist()
                                       for name, a in rows[s].items()} | {"device": str(dev)})
    finally:
        if st is not None:
            st.close()
    stack = {k: np.stack([np.asarray(rows[s][k], dtype=float) for s in seeds])
             for k in ("q", "m", "theta", "test_error", "train_error", "seconds")}
    trace = np.trace(stack["q"], axis1=-2, axis2=-1)
    bad = [s for i, s in enumerate(seeds) if not np.all(np.isfinite(trace[i]) & (trace[i] <= RUNAWAY_Q))]
    notes: list[Note] = []
    if bad:
        notes.append(Note(NoteCode.diverged, f"online SGD diverged (weights non-finite or tr q > {RUNAWAY_Q:g}) "
                                             f"for seed(s) {bad} at lr {lr:g}: take a smaller learning rate"))
    return OnlineResult(setting=setting, d=d, lr=lr, init_scale=init_scale, t_max=t_max, seeds=seeds, t=t,
                        q=stack["q"], m=stack["m"], theta=stack["theta"], test_error=stack["test_error"],
                        train_error=stack["train_error"], seconds=stack["seconds"], n_test=n_test, device=str(dev),
                        status="diverged" if bad else "ok", warnings=tuple(notes), reused=reused)

