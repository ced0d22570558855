"""The sweep engine and its CLI: resume, crash safety (SIGKILL), failures, local processes, Dask, export.
The tasks (fake, slow, flaky) live in conftest.py, importable by name from worker processes."""

from __future__ import annotations

import csv
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TESTS_DIR, fake_task, flaky_task

from attnphase.cli import main
from attnphase.experiments.store import KEY_FIELDS, ResultStore, load_results
from attnphase.experiments.sweep import Grid, SweepSummary, run_sweep


def small_grid(**over) -> Grid:
    kw = dict(d=(8,), alphas=(0.25, 0.5, 1.0), omegas=(0.3,), inits=("positional", "semantic"), seeds=(0,),
              n_test=100)
    kw.update(over)
    return Grid(**kw)


def count_rows(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    finally:
        con.close()


# -- the grid --------------------------------------------------------------------------------------------

def test_grid_points_canonical_and_deduplicated():
    g = Grid(d=(16, 8), alphas=(0.1 + 0.2, 0.3, 1), omegas=(0.3,), inits=("positional", "semantic"),
             seeds=(0, 1))
    assert g.alphas == (0.3, 1.0) and g.d == (16, 8)
    pts = list(g.points())
    assert len(pts) == len(g) == 2 * 2 * 1 * 2 * 2
    assert len({p.key() for p in pts}) == len(pts)
    # Seeds outermost, then small d first: the first half is seed 0 over the whole diagram.
    assert [p.seed for p in pts[:8]] == [0] * 8 and pts[0].d == 8
    assert pts[0].setting().omega == 0.3


@pytest.mark.parametrize("kw, match", [
    (dict(alphas=(0.0,)), "alpha must be > 0"),
    (dict(omegas=(1.5,)), "omega"),
    (dict(d=(1,)), "d must be >= 2"),  # simulate's rule, up front (issue 20)
    (dict(d=(8.5,)), "d must be an integer"),
    (dict(seeds=()), "at least one"),
    (dict(sigma=-1.0), "sigma"),
    (dict(A=((0.5, 0.6), (0.4, 0.6))), "row-stochastic"),
    (dict(options={"x": object()}), "option values"),
])
def test_grid_validation(kw, match):
    with pytest.raises(ValueError, match=match):
        small_grid(**kw)


# -- in-process sweeps -------------------------------------------------------------------------------------

def test_sweep_resume_skips_done_points(tmp_path, capsys):
    path = tmp_path / "s.sqlite"
    s1 = run_sweep(path, small_grid(alphas=(0.25, 0.5)), task=fake_task)
    assert s1 == SweepSummary(total=4, skipped=0, ran=4, failed=0)
    # A bigger grid containing the first: only the new points run; the bar starts at the done count.
    s2 = run_sweep(path, small_grid(), task=fake_task)
    assert s2 == SweepSummary(total=6, skipped=4, ran=2, failed=0)
    err = capsys.readouterr().err
    assert "4/6" in err and "6/6" in err
    s3 = run_sweep(path, small_grid(), task=fake_task, progress=False)
    assert s3 == SweepSummary(total=6, skipped=6, ran=0, failed=0)
    df = load_results(path)
    assert len(df) == 6 and not df.duplicated(list(KEY_FIELDS)).any()
    row = df[(df["alpha"] == 1.0) & (df["init"] == "semantic")].iloc[0]
    assert row["q"] == 10.0 and row["test_error"] == pytest.approx(1.3) and row["n_test"] == 100
    assert row["pid"] == os.getpid()  # workers=1 runs in-process


def test_failed_points_are_reported_and_retried(tmp_path, capsys):
    path = tmp_path / "s.sqlite"
    s = run_sweep(path, small_grid(), task=flaky_task, progress=False)
    assert s == SweepSummary(total=6, skipped=0, ran=5, failed=1)
    err = capsys.readouterr().err
    assert "failed d=8 alpha=1 omega=0.3 init=semantic seed=0: RuntimeError: diverged at alpha=1.0" in err
    with ResultStore(path) as store:
        assert len(store) == 5
        f = store.failures()
        assert len(f) == 1 and f["error"][0].startswith("RuntimeError: diverged")
    s = run_sweep(path, small_grid(), task=fake_task, progress=False)
    assert s == SweepSummary(total=6, skipped=5, ran=1, failed=0)
    assert count_rows(path) == 6


def test_workers_two_processes(tmp_path):
    path = tmp_path / "s.sqlite"
    s = run_sweep(path, small_grid(), workers=2, task=fake_task, progress=False)
    assert s == SweepSummary(total=6, skipped=0, ran=6, failed=0)
    df = load_results(path)
    assert len(df) == 6
    assert os.getpid() not in set(df["pid"])  # really ran in the worker processes
    assert sorted(df["q"]) == sorted(a * 10 for a in (0.25, 0.5, 1.0) for _ in range(2))


def test_workers_and_scheduler_are_exclusive(tmp_path):
    with pytest.raises(ValueError, match="either"):
        run_sweep(tmp_path / "s.sqlite", small_grid(), workers=2, scheduler="tcp://127.0.0.1:1",
                  task=fake_task)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        run_sweep(tmp_path / "s.sqlite", small_grid(), workers=0, task=fake_task)


def test_dask_local_cluster(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    path = tmp_path / "s.sqlite"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        s = run_sweep(path, small_grid(), scheduler=address, task=flaky_task, progress=False)
        assert s == SweepSummary(total=6, skipped=0, ran=5, failed=1)
        s = run_sweep(path, small_grid(), scheduler=address, task=fake_task, progress=False)
        assert s == SweepSummary(total=6, skipped=5, ran=1, failed=0)
    df = load_results(path)
    assert len(df) == 6 and not df.duplicated(list(KEY_FIELDS)).any()


# -- crash safety ------------------------------------------------------------------------------------------

def test_sigkill_mid_sweep_then_resume(tmp_path):
    path = tmp_path / "s.sqlite"
    argv = ["sweep", "--store", str(path), "--d", "8,16", "--alphas", "0.1:1:6", "--omegas", "0.3",
            "--inits", "positional,semantic", "--seeds", "0", "--n-test", "50", "--no-progress",
            "--task", "conftest:slow_task"]
    total = 2 * 6 * 2
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]),
               ATTNPHASE_TEST_SLEEP="0.05")
    proc = subprocess.Popen([sys.executable, "-m", "attnphase", *argv], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if path.exists():
                try:
                    if count_rows(path) >= 4:
                        break
                except sqlite3.OperationalError:  # schema not created yet
                    pass
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.02)
        else:
            pytest.fail("the sweep wrote no rows in 60 s")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        n_killed = con.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    finally:
        con.close()
    assert 4 <= n_killed < total
    # Resume through the CLI in-process; the fast task is fine, identity is the grid point.
    rc = main([*argv[:-2], "--task", "conftest:fake_task"])
    assert rc == 0
    con = sqlite3.connect(path)
    try:
        assert con.execute("SELECT COUNT(*) FROM results").fetchone()[0] == total
        per_key = con.execute(
            f"SELECT COUNT(*) FROM results GROUP BY {', '.join(KEY_FIELDS)}"
        ).fetchall()
        assert len(per_key) == total and {c for (c,) in per_key} == {1}
    finally:
        con.close()
    # The rows written before the kill came from the killed process and were kept, not redone.
    df = load_results(path)
    assert (df["pid"] != os.getpid()).sum() == n_killed


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc to inspect processes")
def test_sigkill_with_worker_processes_leaves_no_orphans(tmp_path):
    path = tmp_path / "s.sqlite"
    piddir = tmp_path / "pids"
    piddir.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]),
               ATTNPHASE_TEST_SLEEP="0.2", ATTNPHASE_TEST_PIDDIR=str(piddir))
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnphase", "sweep", "--store", str(path), "--d", "8", "--alphas", "0.1:1:20",
         "--omegas", "0.3", "--workers", "2", "--no-progress", "--task", "conftest:slow_task"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (path.exists() and _rows_or_zero(path) >= 2):
            assert proc.poll() is None
            time.sleep(0.05)
        assert _rows_or_zero(path) >= 2, "the sweep wrote no rows in 60 s"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    workers = [int(f.name) for f in piddir.iterdir()]
    assert workers and proc.pid not in workers
    try:
        # Workers notice the parent's death within about a second and exit instead of idling forever.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers)
    finally:
        for w in workers:  # never leave this test's own processes behind, even when it fails
            if _alive(w):
                os.kill(w, signal.SIGKILL)
    assert 2 <= count_rows(path) < 40


def _rows_or_zero(path: Path) -> int:
    try:
        return count_rows(path)
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0


# -- CLI ---------------------------------------------------------------------------------------------------

def test_cli_sweep_and_export(tmp_path, capsys):
    path = tmp_path / "s.sqlite"
    out = tmp_path / "out.csv"
    rc = main(["sweep", "--store", str(path), "--d", "8", "--alphas", "0.5,1", "--omegas", "0.2:0.3:2",
               "--inits", "positional,semantic", "--seeds", "0:1", "--opt", "steps=3", "--opt", "lr=0.1",
               "--task", "conftest:fake_task", "--no-progress"])
    assert rc == 0
    err = capsys.readouterr().err
    assert "16 grid points: 16 ran, 0 skipped (already in store), 0 failed" in err
    assert main(["export", "--store", str(path), "--csv", str(out)]) == 0
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 16
    header = list(rows[0].keys())
    # docs/model.md names (V is theory-only) plus the grid identity.
    for name in ("alpha", "omega", "q", "m", "theta", "train_loss", "test_error", "test_error_linear",
                 "d", "n", "seed", "init", "optimizer", "converged", "seconds", "sigma", "lam", "A",
                 "n_test"):
        assert name in header
    assert {r["options"] for r in rows} == {'{"lr":0.1,"steps":3}'}
    assert {float(r["omega"]) for r in rows} == {0.2, 0.3}
    agg_out = tmp_path / "agg.csv"
    assert main(["export", "--store", str(path), "--csv", str(agg_out), "--aggregate"]) == 0
    with open(agg_out, newline="") as fh:
        agg = list(csv.DictReader(fh))
    assert len(agg) == 8 and {r["n_seeds"] for r in agg} == {"2"}
    # q = 10 alpha + seed: mean over seeds 0, 1 is 10 alpha + 0.5
    assert {(float(r["alpha"]), float(r["q_mean"])) for r in agg} == {(0.5, 5.5), (1.0, 10.5)}


def test_cli_failures_give_status_1(tmp_path, capsys):
    rc = main(["sweep", "--store", str(tmp_path / "s.sqlite"), "--d", "8", "--alphas", "0.25,1",
               "--omegas", "0.3", "--task", "conftest:flaky_task", "--no-progress"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "4 grid points: 3 ran, 0 skipped (already in store), 1 failed" in err


@pytest.mark.parametrize("argv, match", [
    (["export", "--store", "{tmp}/missing.sqlite", "--csv", "{tmp}/o.csv"], "no such store"),
    (["sweep", "--store", "{tmp}/s.sqlite", "--d", "8", "--alphas", "0.1:1", "--omegas", "0.3"], "--alphas"),
    (["sweep", "--store", "{tmp}/s.sqlite", "--d", "8,x", "--alphas", "1", "--omegas", "0.3"], "--d"),
    (["sweep", "--store", "{tmp}/s.sqlite", "--d", "8", "--alphas", "1", "--omegas", "2"], "omega"),
    (["sweep", "--store", "{tmp}/s.sqlite", "--d", "8", "--alphas", "1", "--omegas", "0.3",
      "--opt", "nokey"], "KEY=VALUE"),
    (["sweep", "--store", "{tmp}/s.sqlite", "--d", "8", "--alphas", "1", "--omegas", "0.3",
      "--task", "no_such_module_xyz:f"], "cannot import"),
    (["sweep", "--store", "{tmp}/s.sqlite", "--d", "8", "--alphas", "1", "--omegas", "0.3",
      "--workers", "0"], "workers"),
])
def test_cli_bad_input_exit_2(tmp_path, capsys, argv, match):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0]
    assert not (tmp_path / "missing.sqlite").exists()


def test_cli_workers_and_scheduler_exclusive(tmp_path, capsys):
    rc = main(["sweep", "--store", str(tmp_path / "s.sqlite"), "--d", "8", "--alphas", "1", "--omegas", "0.3",
               "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"])
    assert rc == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_cli_help_hides_task_option(capsys):
    assert main(["sweep", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--scheduler" in out and "--task" not in out


# -- the real experiment, tiny ---------------------------------------------------------------------------

def test_real_simulation_tiny(tmp_path):
    """The default task is the real simulation (no guard: if simulate went missing this must fail)."""
    path = tmp_path / "s.sqlite"
    grid = Grid(d=(8,), alphas=(1.0,), omegas=(0.3,), inits=("positional", "semantic"), seeds=(0,),
                optimizer="gd", n_test=200, options={"steps": 20})
    s = run_sweep(path, grid, progress=False)
    assert s == SweepSummary(total=2, skipped=0, ran=2, failed=0)
    df = load_results(path)
    assert len(df) == 2 and set(df["init"]) == {"positional", "semantic"}
    for col in ("q", "m", "theta", "train_loss", "test_error", "test_error_linear"):
        assert df[col].notna().all() and (df[col] >= 0).all(), col
    assert (df["n"] == 8).all() and (df["d"] == 8).all()
    assert run_sweep(path, grid, progress=False) == SweepSummary(total=2, skipped=2, ran=0, failed=0)
