"""The package's one process pool: worker validation, order of results, one thread per worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from attnphase.parallel import check_workers, map_tasks


def _square(x: int) -> int:
    return x * x


def _threads(_: int) -> tuple[int, int]:
    import numba
    from threadpoolctl import threadpool_info

    blas = max((p["num_threads"] for p in threadpool_info()), default=1)
    return blas, numba.get_num_threads()


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError),
                                      ("2", TypeError)])
def test_check_workers_refuses(bad, exc) -> None:
    with pytest.raises(exc):
        check_workers(bad)
    with pytest.raises(exc):
        map_tasks(_square, [1, 2], workers=bad)


def test_map_tasks_keeps_order_serial_and_pooled() -> None:
    assert map_tasks(_square, range(5)) == [0, 1, 4, 9, 16]
    assert map_tasks(_square, range(5), workers=2) == [0, 1, 4, 9, 16]
    assert map_tasks(_square, []) == []


def test_workers_are_single_threaded() -> None:
    import numba

    before = numba.get_num_threads()
    for blas, nb in map_tasks(_threads, range(2), workers=2):
        assert blas == 1 and nb == 1
    assert numba.get_num_threads() == before  # (the calling process, one of the workers, restored)


def _pid_after(x: int) -> tuple[int, int]:
    time.sleep(0.3)
    return x, os.getpid()


def test_the_calling_process_takes_tasks_beside_the_workers() -> None:
    """workers = 2: this process and one spawned worker share the tasks, each taking the next as it is free (how many
    the worker gets depends on how fast it starts: none where this process finishes first); the results stay in the
    tasks' order."""
    out = map_tasks(_pid_after, range(6), workers=2)
    assert [x for x, _ in out] == list(range(6))
    pids = {pid for _, pid in out}
    assert os.getpid() in pids and len(pids) <= 2


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError("task three")
    return x


def test_a_task_that_raises_raises_in_the_caller() -> None:
    with pytest.raises(ValueError, match="task three"):
        map_tasks(_fail_on_three, range(6), workers=2)


# A parent that starts a pool of two sleeping workers (and a manager), prints their pids, then sleeps.
# Ctrl-C raises KeyboardInterrupt even where the test runs with SIGINT ignored (a background job of a
# non-interactive shell: the child inherits SIG_IGN and Python then installs no handler, so it slept on).
_ORPHAN_SCRIPT = """
import os, signal, sys, time
from attnphase.parallel import manager, pool

signal.signal(signal.SIGINT, signal.default_int_handler)

def nap(path):
    open(path, "w").write(str(os.getpid()))
    time.sleep(120)

if __name__ == "__main__":
    out = sys.argv[1]
    with manager() as m, pool(2) as ex:
        futures = [ex.submit(nap, os.path.join(out, f"w{i}")) for i in range(2)]
        while not all(os.path.exists(os.path.join(out, f"w{i}")) for i in range(2)):
            time.sleep(0.05)
        time.sleep(0.2)  # the pid files are complete
        pids = [int(open(os.path.join(out, f"w{i}")).read()) for i in range(2)] + [m._process.pid]
        print(" ".join(map(str, pids)), flush=True)
        time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """Running (a zombie nobody has reaped yet counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_no_worker_outlives_its_parent(sig, tmp_path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(_ORPHAN_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 3 and all(_alive(p) for p in pids)
        parent.send_signal(sig)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in pids if _alive(p)]
        assert not left, f"still running after the parent got {sig.name}: {left}"
    finally:
        parent.kill()
        for p in locals().get("pids", []):
            if _alive(p):
                os.kill(p, signal.SIGKILL)
