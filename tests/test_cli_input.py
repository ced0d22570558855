"""Bad input and bad paths on the command line: one line on stderr, exit status 2, nothing computed first;
--quiet everywhere; every option documented."""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TESTS_DIR

from attnphase.cli import build_parser, main
from attnphase.experiments.store import ResultStore

ROOT = TESTS_DIR.parent
SWEEP = ["sweep", "--d", "8", "--alphas", "1", "--omegas", "0.3", "--no-progress"]


def _one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str], match: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert match in err[0], err[0]
    return err[0]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- numeric options: one rule per kind, the same in every command ----------------------------------------

def test_transition_negative_xtol_is_refused_at_once(capsys):
    # used to hang: the bracket refinement never reached a negative tolerance
    _one_line_exit_2(["transition", "--xtol", "-1", "--omega", "0.3"], capsys, "--xtol")


@pytest.mark.parametrize("argv", [
    ["transition", "--omega", "0.3"],
    ["phase-diagram", "--out", "{tmp}/pd"],
    ["reproduce", "--out", "{tmp}/r", "--quick"],
    [*SWEEP, "--store", "{tmp}/s.sqlite", "--task", "conftest:fake_task"],
])
def test_workers_zero_is_refused_by_every_command(argv, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv] + ["--workers", "0"]
    _one_line_exit_2(argv, capsys, "--workers")
    assert list(tmp_path.iterdir()) == []  # nothing created


@pytest.mark.parametrize("argv, match", [
    (["transition", "--n-grid", "1"], "--n-grid"),
    (["transition", "--alpha-min", "2", "--alpha-max", "1"], "--alpha-min"),
    (["transition", "--alpha-max", "nan"], "--alpha-max"),
    (["plot", "test-error", "--alpha-max", "-1", "--out", "x.png"], "--alpha-max"),
    (["plot", "test-error", "--d", "0", "--out", "x.png"], "--d"),
])
def test_numeric_ranges(argv, match, capsys):
    _one_line_exit_2(argv, capsys, match)


# -- the sweep's grid: refused before the first point ------------------------------------------------------

@pytest.mark.parametrize("extra, match", [
    (["--inits", "foo"], "--inits"),
    (["--opt", "bogus=1"], "bogus"),
    (["--opt", "steps=-1"], "steps"),
    (["--opt", "lr=0"], "lr"),
    (["--opt", "dtype=float16"], "dtype"),
    (["--n-test", "0"], "--n-test"),
])
def test_sweep_grid_checked_before_any_point(extra, match, tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    _one_line_exit_2([*SWEEP, "--store", str(store), *extra], capsys, match)
    assert not store.exists()  # not one point ran into the failures table


def test_sweep_cuda_without_cuda_is_refused(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():  # pragma: no cover - the check is for machines without CUDA
        pytest.skip("this machine has CUDA")
    store = tmp_path / "s.sqlite"
    _one_line_exit_2([*SWEEP, "--store", str(store), "--device", "cuda"], capsys, "CUDA")
    assert not store.exists()


# -- paths -------------------------------------------------------------------------------------------------

def test_sweep_store_is_a_directory(tmp_path, capsys):
    _one_line_exit_2([*SWEEP, "--store", str(tmp_path), "--task", "conftest:fake_task"], capsys, "directory")


def test_sweep_store_in_unwritable_or_missing_place(tmp_path, capsys):
    _one_line_exit_2([*SWEEP, "--store", str(tmp_path / "no" / "s.sqlite"), "--task", "conftest:fake_task"],
                     capsys, "does not exist")
    # /sys refuses new files even to root, for whom permission bits are no obstacle
    _one_line_exit_2([*SWEEP, "--store", "/sys/attnphase-test.sqlite", "--task", "conftest:fake_task"],
                     capsys, "not writable")


def _store_with_rows(path: Path) -> None:
    assert main([*SWEEP, "--store", str(path), "--task", "conftest:fake_task", "--quiet"]) == 0


def test_export_csv_paths(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    _store_with_rows(store)
    capsys.readouterr()
    _one_line_exit_2(["export", "--store", str(store), "--csv", str(tmp_path)], capsys, "is a directory")
    _one_line_exit_2(["export", "--store", str(store), "--csv", "/missing/dir/x.csv"], capsys, "does not exist")
    _one_line_exit_2(["export", "--store", str(tmp_path), "--csv", str(tmp_path / "o.csv")], capsys,
                     "is a directory")


def test_plot_out_unwritable_is_refused_before_theory(monkeypatch, capsys):
    import attnphase.theory as theory

    def boom(*a, **k):
        raise AssertionError("theory computed before the output path was checked")

    for name in ("solve_curve", "solve", "phase_diagram", "linear_baseline"):
        monkeypatch.setattr(theory, name, boom)
    _one_line_exit_2(["plot", "test-error", "--out", "/sys/attnphase-test/fig.png"], capsys, "not writable")
    _one_line_exit_2(["plot", "phase-diagram", "--out", "/sys/fig.png"], capsys, "not writable")


# -- stores that are not ours, damaged or newer -------------------------------------------------------------

def test_sweep_refuses_a_foreign_sqlite_file_unchanged(tmp_path, capsys):
    other = tmp_path / "app.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE notes (x TEXT)")
    con.execute("INSERT INTO notes VALUES ('keep me')")
    con.commit()
    con.close()
    before = _sha(other)
    _one_line_exit_2([*SWEEP, "--store", str(other), "--task", "conftest:fake_task"], capsys,
                     "not an attnphase results store")
    _one_line_exit_2(["export", "--store", str(other), "--csv", "-"], capsys, "not an attnphase results store")
    assert _sha(other) == before


def test_sweep_on_a_damaged_store_never_reports_points_as_done(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    with ResultStore(store) as s:
        for seed in range(300):
            s.add({"d": 8, "alpha": 1.0, "omega": 0.3, "sigma": 0.5, "lam": 0.01, "init": "positional",
                   "optimizer": "gd", "seed": seed, "note": "x" * 200})
    con = sqlite3.connect(store)
    page = con.execute("PRAGMA page_size").fetchone()[0]
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    n_pages = store.stat().st_size // page
    with open(store, "r+b") as fh:
        fh.seek((n_pages // 2) * page)
        fh.write(bytes((i * 37 + 11) % 256 for i in range(page)))
    line = _one_line_exit_2([*SWEEP, "--seeds", "0:299", "--store", str(store), "--task", "conftest:fake_task"],
                            capsys, "damaged")
    assert "skipped" not in line
    _one_line_exit_2(["export", "--store", str(store), "--csv", "-"], capsys, "damaged")
    _one_line_exit_2(["plot", "finite-size", "--store", str(store), "--out", str(tmp_path / "f.png")], capsys,
                     "damaged")


# -- quiet, help texts, descriptions --------------------------------------------------------------------------

def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for listed in action._choices_actions:  # the one-line help of each command in `attnphase --help`
                assert listed.help and "MODEL.md" not in listed.help, listed.dest
            return dict(action.choices)
    return {}


def test_every_command_accepts_quiet_and_documents_every_option():
    parser = build_parser()
    commands = _subparsers(parser)
    assert {"theory", "simulate", "sweep", "export", "transition", "phase-diagram", "plot", "reproduce"} <= set(commands)
    for name, sub in commands.items():
        assert sub.description and sub.description.strip(), f"{name}: no description"
        opts = {s for a in sub._actions for s in a.option_strings}
        assert "--quiet" in opts, f"{name}: no --quiet"
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            what = f"{name} {'/'.join(action.option_strings) or action.dest}"
            assert action.help, f"{what}: no help text"
            if action.help == argparse.SUPPRESS:
                continue
            assert "MODEL.md" not in action.help and "../shared" not in action.help, what
            if action.choices and action.metavar is not None:
                # argparse shows {a,b,c} unless a metavar hides them: then the help must list them
                assert all(str(c) in action.help for c in action.choices), f"{what}: choices not listed"
        assert "MODEL.md" not in (sub.description or ""), name


def test_quiet_silences_progress_and_notes(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "attnphase", *SWEEP[:-1], "--store", str(tmp_path / "s.sqlite"),
         "--task", "conftest:fake_task", "--quiet"],
        capture_output=True, text=True, env={"PYTHONPATH": f"{ROOT / 'src'}:{TESTS_DIR}", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    loud = subprocess.run(
        [sys.executable, "-m", "attnphase", *SWEEP[:-1], "--store", str(tmp_path / "t.sqlite"),
         "--task", "conftest:fake_task"],
        capture_output=True, text=True, env={"PYTHONPATH": f"{ROOT / 'src'}:{TESTS_DIR}", "PATH": "/usr/bin:/bin"},
    )
    assert loud.returncode == 0 and "sweep" in loud.stderr  # the bar's label and the summary


def test_theory_shows_a_labelled_progress_bar_unless_quiet(monkeypatch, capsys):
    from conftest import synthetic_curves

    import attnphase.theory as theory

    def fake_curve(setting, alphas, branch, precision="default", seed=0, **kwargs):
        time.sleep(0.7)  # the bar shows only for work that takes more than half a second
        pts = synthetic_curves([1.0])
        return pts.get(branch, pts["positional"])

    monkeypatch.setattr(theory, "solve_curve", fake_curve)
    assert main(["theory", "--alpha", "1", "--branch", "positional", "--json"]) == 0
    assert "theory (fixed points)" in capsys.readouterr().err
    assert main(["theory", "--alpha", "1", "--branch", "positional", "--json", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_theory_passes_the_free_branch_and_multistart_to_the_solver(monkeypatch, capsys):
    from conftest import synthetic_curves

    import attnphase.theory as theory

    seen = []

    def fake_curve(setting, alphas, branch, precision="default", seed=0, multistart=None, on_point=None, pattern=None):
        seen.append((setting.r, branch, multistart))
        return synthetic_curves([1.0])["positional"]

    monkeypatch.setattr(theory, "solve_curve", fake_curve)
    assert main(["theory", "--alpha", "1", "--rank", "2", "--branch", "free", "--multistart", "--json", "--quiet"]) == 0
    assert main(["theory", "--alpha", "1", "--branch", "positional", "--json", "--quiet"]) == 0
    assert main(["theory", "--alpha", "1", "--branch", "positional", "--single-start", "--json", "--quiet"]) == 0
    # Every branch's set of starts is the default (issue 21); --single-start opts out; --multistart is kept.
    assert seen == [(2, "free", None), (1, "positional", None), (1, "positional", False)]


@pytest.mark.parametrize("alphas", ["1", "1,2"])
def test_theory_global_says_on_stderr_which_branch_gave_no_verdict(monkeypatch, capsys, alphas):
    """`--branch global` where one branch ran out of iterations below the point reported: the row is the lowest
    converged branch, and stderr names the unresolved branch (its code in the JSON: test_engine_contract); for one
    alpha (the screened solve: every branch at the fast precision, then the ones that can be the minimum) and for a
    curve."""
    from conftest import make_fixed_point

    import attnphase.theory as theory
    from attnphase.theory.state_evolution import solve as solve_module

    def point(alpha, branch):
        if branch == "positional":
            return make_fixed_point(alpha, branch, train_loss=0.001, test_error=0.002, m=0.2, theta=0.0,
                                    status="not_converged", converged=False)
        return make_fixed_point(alpha, branch, train_loss=0.003, test_error=0.002, m=0.0, theta=0.1)

    def fake_curve(setting, alphas, branch, precision="default", seed=0, multistart=None, on_point=None, pattern=None):
        return [point(a, branch) for a in alphas]

    def fake_solve(setting, alpha, branch, precision="default", init=None, seed=0, *, kernel="auto",
                   multistart=None, ladder=True, stability=True):
        return point(alpha, branch)

    monkeypatch.setattr(theory, "solve_curve", fake_curve)
    monkeypatch.setattr(solve_module, "solve", fake_solve)
    assert main(["theory", "--alpha", alphas, "--branch", "global", "--workers", "1", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert out.count("global (semantic)") + out.count("global (agnostic)") == len(alphas.split(","))
    assert err.count("positional branch gave no verdict (not_converged)") == len(alphas.split(",")) and "below" in err


def test_theory_in_worker_processes_gives_the_in_process_numbers(capsys):
    """Several curves, --quiet (no bar, so no ticks' queue) in two worker processes against one process: the same
    rows, every number but the seconds (the workers run one numba/BLAS thread each, the in-process run more)."""
    import json

    argv = ["theory", "--alpha", "0.5:1:2", "--branch", "positional,agnostic", "--precision", "fast", "--json",
            "--quiet"]
    rows = []
    for workers in ("2", "1"):
        assert main(argv + ["--workers", workers]) == 0
        rows.append(json.loads(capsys.readouterr().out))
    strip = [[{k: v for k, v in r.items() if "seconds" not in k} for r in rs] for rs in rows]
    assert len(strip[0]) == 4 and strip[0] == strip[1]


# -- issue 20: the adversarial pass ---------------------------------------------------------------------------

def _no_theory(monkeypatch) -> None:
    """Any theory computation fails the test: the command had to refuse before work."""
    import attnphase.theory as theory

    def boom(*a, **k):
        raise AssertionError("work started before the input was checked")

    for name in ("solve_curve", "solve", "phase_diagram", "transition", "linear_baseline"):
        monkeypatch.setattr(theory, name, boom)


def _foreign_db(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (x TEXT)")
    con.commit()
    con.close()
    return path


def test_export_never_writes_over_its_own_store(tmp_path, capsys):
    store = tmp_path / "ok.sqlite"
    _store_with_rows(store)
    other = tmp_path / "other.sqlite"
    _store_with_rows(other)
    link = tmp_path / "link.csv"
    link.symlink_to(store)
    before, before_other = _sha(store), _sha(other)
    capsys.readouterr()
    _one_line_exit_2(["export", "--store", str(store), "--csv", str(store)], capsys, "same file as --store")
    _one_line_exit_2(["export", "--store", str(store), "--csv", str(link)], capsys, "same file as --store")
    _one_line_exit_2(["export", "--store", str(store), "--csv", str(other)], capsys, "SQLite")  # another store
    assert _sha(store) == before and _sha(other) == before_other
    assert main(["export", "--store", str(store), "--csv", str(tmp_path / "ok.csv"), "--quiet"]) == 0


def test_plot_never_writes_its_figure_over_its_inputs(tmp_path, monkeypatch, capsys):
    _no_theory(monkeypatch)
    store = tmp_path / "s.sqlite"
    _store_with_rows(store)
    png = tmp_path / "fig.png"
    _store_with_rows(png)  # a store that happens to be named like the figure
    before = _sha(png)
    capsys.readouterr()
    _one_line_exit_2(["plot", "test-error", "--store", str(png), "--out", str(tmp_path / "fig")], capsys,
                     "same file as --store")
    _one_line_exit_2(["plot", "test-error", "--store", str(store), "--out", str(tmp_path / "fig.pdf")], capsys,
                     "SQLite")
    records = tmp_path / "r.pdf"
    records.write_text("{}")
    _one_line_exit_2(["plot", "rank2", "--records", str(records), "--out", str(tmp_path / "r")], capsys,
                     "same file as --records")
    assert _sha(png) == before and records.read_text() == "{}"


@pytest.mark.parametrize("make", ["foreign", "text"])
def test_phase_diagram_checks_its_store_before_any_work(make, tmp_path, monkeypatch, capsys):
    _no_theory(monkeypatch)
    bad = tmp_path / "foreign.sqlite"
    if make == "foreign":
        _foreign_db(bad)
    else:
        bad.write_text("not a database\n")
    _one_line_exit_2(["phase-diagram", "--omegas", "0.3", "--out", str(tmp_path / "pd3"), "--n-grid", "4",
                      "--store", str(bad)], capsys, "not an attnphase results store")
    assert not (tmp_path / "pd3").exists()


def test_phase_diagram_out_that_is_a_file_is_refused_before_work(tmp_path, monkeypatch, capsys):
    _no_theory(monkeypatch)
    f = tmp_path / "pd"
    f.write_text("x")
    _one_line_exit_2(["phase-diagram", "--omegas", "0.3", "--out", str(f)], capsys, "is a file")


def test_basins_checks_store_and_sizes_before_any_start(tmp_path, capsys):
    foreign = _foreign_db(tmp_path / "foreign.sqlite")
    before = _sha(foreign)
    basins = ["basins", "--d", "8", "--alphas", "1", "--omegas", "0.3", "--no-progress"]
    _one_line_exit_2([*basins, "--store", str(foreign)], capsys, "not an attnphase results store")
    assert _sha(foreign) == before
    store = tmp_path / "b.sqlite"
    t0 = time.perf_counter()
    _one_line_exit_2([*basins, "--store", str(store), "--inits-per-point", "1000000000"], capsys, "starts")
    assert time.perf_counter() - t0 < 5  # refused from the sizes, not after materialising 10^9 seeds
    _one_line_exit_2(["basins", "--d", "1", "--alphas", "1", "--omegas", "0.3", "--store", str(store)], capsys,
                     "--d must be >= 2")
    _one_line_exit_2([*basins, "--store", str(store), "--rank", "2"], capsys, "--rank")
    assert not store.exists()


def test_sizes_a_user_can_type_are_bounded(tmp_path, monkeypatch, capsys):
    _no_theory(monkeypatch)
    store = tmp_path / "s.sqlite"
    _one_line_exit_2([*SWEEP, "--store", str(store), "--task", "conftest:fake_task", "--seeds", "0:1000000000"],
                     capsys, "at most")
    _one_line_exit_2(["theory", "--alpha", "1:2:100000", "--branch", "semantic"], capsys, "at most")
    _one_line_exit_2(["transition", "--n-grid", "100000"], capsys, "--n-grid")
    assert not store.exists()


def test_theory_refuses_what_does_not_fit_in_memory(monkeypatch, capsys):
    _no_theory(monkeypatch)
    _one_line_exit_2(["theory", "--L", "1000", "--branch", "semantic"], capsys, "GiB")


def test_theory_announces_long_work(monkeypatch, capsys):
    from conftest import synthetic_curves

    import attnphase.theory as theory

    monkeypatch.setattr(theory, "solve_curve",
                        lambda s, alphas, b, *a, **k: [synthetic_curves([1.0])["positional"][0]] * len(alphas))
    assert main(["theory", "--L", "20", "--alpha", "1.5", "--branch", "semantic", "--json", "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "note:" in err and "roughly" in err


def test_theory_progress_counts_points(monkeypatch, capsys):
    from conftest import synthetic_curves

    import attnphase.theory as theory

    def fake_curve(setting, alphas, branch, precision="default", seed=0, multistart=False, on_point=None,
                   pattern=None):
        out = []
        for _ in alphas:
            time.sleep(0.2)
            out.append(synthetic_curves([1.0])["positional"][0])
            on_point(out[-1])
        return out

    monkeypatch.setattr(theory, "solve_curve", fake_curve)
    assert main(["theory", "--alpha", "1:2:4", "--branch", "positional", "--json", "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "/4 [" in err and "point" in err


def test_collapsed_fixed_point_is_a_status_not_a_crash():
    # sigma = 1e-4: q underflows to 0; the test error used to divide theta^2 by it (ZeroDivisionError).
    import numpy as np

    from attnphase.setting import Setting
    from attnphase.theory.model.observables import test_error
    from attnphase.theory.model.overlaps import Overlaps

    te, err = test_error(Setting(sigma=1e-4), Overlaps(q=0.0, m=np.zeros((2, 1)), V=1e-6, theta=0.0))
    assert np.isfinite(te) and np.isfinite(err)
    te, _ = test_error(Setting(sigma=1e-4, L=3), Overlaps(q=0.0, m=np.zeros((3, 1)), V=1e-6, theta=0.0))
    assert np.isnan(te)  # the general path: no number rather than a crash


def test_A_given_for_another_L_is_refused_however_it_is_written(monkeypatch, capsys):
    _no_theory(monkeypatch)
    for text in ("0.6,0.4;0.4,0.6", "0.60,0.40;0.40,0.60"):
        _one_line_exit_2(["theory", "--L", "3", "--A", text], capsys, "L = 3")


def test_A_to_six_digits_is_renormalised_once_at_the_door():
    import numpy as np

    from attnphase.setting import Setting

    s = Setting(A="0.333333,0.666667;0.5,0.5")  # rows sum to 1 within 1e-6
    assert np.allclose(s.A_array.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="within 1e-06"):
        Setting(A="0.33,0.66;0.5,0.5")


def test_A_from_a_file_like_positions(tmp_path, monkeypatch):
    import numpy as np

    from attnphase.cli.common import setting_from_args

    f = tmp_path / "A.csv"
    f.write_text("0.5,0.3,0.2\n0.2,0.6,0.2\n0.1,0.1,0.8\n")
    args = build_parser().parse_args(["theory", "--A", str(f)])
    s = setting_from_args(args)
    assert s.L == 3 and np.allclose(s.A_array[2], [0.1, 0.1, 0.8])


def test_no_abbreviated_options_anywhere(capsys):
    # `--opt steps=500` used to be read as `--optimizer steps=500` by simulate
    line = _one_line_exit_2(["simulate", "--d", "8", "--alpha", "1", "--opt", "steps=500"], capsys,
                            "unrecognized arguments")
    assert "attnphase simulate --help" in line
    line = _one_line_exit_2(["transition", "--omeg", "0.3"], capsys, "unrecognized arguments")
    assert "attnphase transition --help" in line
    line = _one_line_exit_2(["phase-diagram", "--out", "x", "--bogus"], capsys, "unrecognized")
    assert "attnphase phase-diagram --help" in line


def test_phase_diagram_n_grid_rule_is_the_transitions(monkeypatch, capsys):
    _no_theory(monkeypatch)
    _one_line_exit_2(["phase-diagram", "--out", "x", "--n-grid", "2"], capsys, "--n-grid must be an integer >= 3")


@pytest.mark.parametrize("content, match", [
    ("complex", "real numbers"),
    ("empty", "empty"),
    ("huge", "at most"),
    ("ragged", "cannot read"),
])
def test_bad_matrix_files_are_one_line_without_warnings(content, match, tmp_path, capsys):
    import warnings

    import numpy as np

    if content == "complex":
        f = tmp_path / "G.npy"
        np.save(f, np.eye(2) + 1j * np.eye(2))
    else:
        f = tmp_path / "G.csv"
        f.write_text({"empty": "", "huge": "1e308,0\n0,1e308\n", "ragged": "1,0\n0\n"}[content])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        err = _one_line_exit_2(["theory", "--positions", str(f)], capsys, match)
    assert "Warning" not in err


def test_branch_takes_a_comma_list(monkeypatch, capsys):
    from conftest import synthetic_curves

    import attnphase.theory as theory

    seen = []

    def fake_curve(setting, alphas, branch, precision="default", seed=0, multistart=False, on_point=None,
                   pattern=None):
        seen.append(branch)
        return [synthetic_curves([1.0])["positional"][0]] * len(alphas)

    monkeypatch.setattr(theory, "solve_curve", fake_curve)
    assert main(["theory", "--alpha", "1", "--branch", "positional,semantic", "--json", "--quiet", "--workers", "1"]) == 0
    assert seen == ["positional", "semantic"]
    _one_line_exit_2(["theory", "--branch", "positional,bogus"], capsys, "bogus")


def test_unreachable_dask_scheduler_is_refused_quickly(tmp_path, capsys):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    t0 = time.perf_counter()
    _one_line_exit_2([*SWEEP, "--store", str(tmp_path / "s.sqlite"), "--scheduler", f"tcp://127.0.0.1:{port}"],
                     capsys, "nothing answers")
    assert time.perf_counter() - t0 < 10


def test_simulate_table_prints_matrix_overlaps_as_summaries():
    # issue 20: for L > 2 the table printed m as a nested list
    from attnphase.cli.simulate import _scalar_row

    row = _scalar_row({"q": [[0.2]], "m": [[0.3], [0.4], [0.0]], "theta": [[0.5]], "train_loss": 1.0})
    assert row["q"] == pytest.approx(0.2) and row["theta"] == pytest.approx(0.5)
    assert row["m"] == pytest.approx((0.25 / 3) ** 0.5)  # rms over tokens of |m_l|, as the theory table
    assert _scalar_row({"q": 0.1, "m": 0.2, "theta": 0.3}) == {"q": 0.1, "m": 0.2, "theta": 0.3}


def test_transition_refuses_what_does_not_fit(monkeypatch, capsys):
    _no_theory(monkeypatch)
    _one_line_exit_2(["transition", "--L", "1000", "--omega", "0.3"], capsys, "GiB")


def test_basins_prints_fractions_and_quiet_hides_the_summary(tmp_path, monkeypatch, capsys):
    import attnphase.experiments.simulation.basins as basins

    monkeypatch.setattr(basins, "basins_task", _fake_basins_task)
    store = tmp_path / "b.sqlite"
    argv = ["basins", "--d", "8", "--alphas", "1,1.5", "--omegas", "0.3", "--inits-per-point", "4",
            "--init-scale", "1", "--store", str(store), "--no-progress", "--steps", "5"]
    assert main(argv) == 0
    cap = capsys.readouterr()
    assert "semantic_fraction" in cap.out and "attnphase basins:" in cap.err
    assert main([*argv, "--quiet"]) == 0
    cap = capsys.readouterr()
    assert cap.err == "" and "semantic_fraction" in cap.out


def _fake_basins_task(point):
    return {"basin": "semantic" if point.seed % 2 else "positional", "converged": True, "train_loss": 0.1,
            "test_error": 0.1, "m": 0.0, "theta": 0.1, "q": 0.1}


def test_plot_test_error_reads_the_theory_a_store_holds(tmp_path, monkeypatch, capsys):
    # issue 20: `plot test-error --store` recomputed its theory (106 s) although `reproduce` had stored it
    from conftest import synthetic_curves

    from attnphase.experiments.store import ResultStore
    from attnphase.reproduce.records import TransitionRecord
    from attnphase.reproduce.theory_jobs import TheoryCache
    from attnphase.setting import Setting

    store = tmp_path / "results.sqlite"
    curves = synthetic_curves()
    alphas = [p.alpha for p in curves["semantic"]]
    curves = {b: [p for p in pts if p.alpha in alphas] for b, pts in curves.items()}
    tr = TransitionRecord(omega=0.3, alpha_c=1.2, alpha_c_bracket=(1.1, 1.3), alpha_l=1.5, alpha_l_bracket=(1.4, 1.6),
                          test_error_linear=0.002, alpha_sem_appears=None, alpha_pos_vanishes=None, reasons={},
                          curves={})
    with ResultStore(store) as s:
        cache = TheoryCache(s)
        for b in ("positional", "semantic"):
            cache.put_curve(Setting(), alphas, b, "fast", curves[b])
        cache.put_transition(Setting(), "fast", tr, alpha_min=0.1, alpha_max=2.0, n_grid=6, xtol=0.05)
    _no_theory(monkeypatch)  # nothing may be computed
    assert main(["plot", "test-error", "--store", str(store), "--precision", "fast", "--out", str(tmp_path / "te")]) == 0
    err = capsys.readouterr().err
    assert "theory from" in err and "curves, transition" in err
    assert (tmp_path / "te.png").is_file()


def test_extreme_values_are_refused_or_answered_never_a_traceback(monkeypatch, capsys):
    # found by the same adversarial pass: sigma = 1e300 crashed theory, baseline and simulate; 10^12 steps ran in
    # silence; lambda or alpha near overflow printed RuntimeWarnings
    from attnphase.setting import Setting

    for kw in ({"sigma": 1e300}, {"lam": 1e300}):
        with pytest.raises(ValueError, match="at most"):
            Setting(**kw)
    _one_line_exit_2(["baseline", "--sigma", "1e300"], capsys, "sigma must be at most")
    _one_line_exit_2(["theory", "--alpha", "1e300"], capsys, "alpha must be at most")
    _one_line_exit_2(["simulate", "--d", "8", "--alpha", "1", "--steps", "1000000000000"], capsys, "steps must be at most")


def test_numerical_warnings_are_one_summary_line(monkeypatch, capsys):
    import warnings

    from conftest import synthetic_curves

    import attnphase.theory as theory

    def noisy(setting, alphas, branch, precision="default", seed=0, multistart=False, on_point=None, pattern=None):
        for _ in range(5):
            warnings.warn("overflow encountered in matmul", RuntimeWarning, stacklevel=1)
        return [synthetic_curves([1.0])["positional"][0]] * len(alphas)

    monkeypatch.setattr(theory, "solve_curve", noisy)
    assert main(["theory", "--alpha", "1", "--branch", "positional", "--json", "--quiet", "--workers", "1"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "5 numerical warning(s)" in err[0] and "overflow" in err[0]


# -- issue 31: bad input -------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["theory", "--L", "1000000"],
    ["transition", "--L", "1000000"],
    ["simulate", "--L", "1000000", "--d", "10", "--alpha", "1"],
    ["baseline", "--L", "1000000"],
    ["bayes", "--L", "1000000"],
])
def test_a_huge_L_is_refused_before_any_L_x_L_array(argv, monkeypatch, capsys):
    # used to allocate 7 TiB in mixing_A (a traceback, "internal error")
    _no_theory(monkeypatch)
    _one_line_exit_2(argv, capsys, "L must be at most 1000")


def test_setting_bounds_L_and_the_ranks():
    from attnphase.setting import L_MAX, RANK_MAX, Setting, mixing_A

    for bad in ({"L": L_MAX + 1}, {"r": RANK_MAX + 1}, {"r_star": RANK_MAX + 1}):
        with pytest.raises(ValueError, match="at most"):
            Setting(**bad)
    with pytest.raises(ValueError, match="at most"):
        mixing_A(10**6)
    assert Setting(L=3).L == 3 and Setting(r=2).r == 2


@pytest.mark.parametrize("kind", ["rank2", "untied"])
def test_plot_records_that_are_binary_are_one_line(kind, tmp_path, capsys):
    import numpy as np

    npy = tmp_path / "m.npy"
    np.save(npy, np.eye(2))
    _one_line_exit_2(["plot", kind, "--records", str(npy), "--out", str(tmp_path / "f")], capsys, "not JSON")
    assert not list(tmp_path.glob("f*"))


@pytest.mark.parametrize("device", ["cuda:abc", "cuda:", "gpu", "cpu:0:1"])
def test_histogram_device_is_checked_up_front(device, tmp_path, capsys):
    pytest.importorskip("torch")
    store = tmp_path / "h.sqlite"
    _one_line_exit_2(["histogram", "--device", device, "--store", str(store)], capsys, "--device")
    assert not store.exists()


def test_resolve_device_refuses_a_malformed_string():
    pytest.importorskip("torch")
    from attnphase.experiments.histogram.model import resolve_device

    with pytest.raises(ValueError, match="device"):
        resolve_device("cuda:abc")


def test_theory_refuses_an_estimate_beyond_a_day_unless_allowed(monkeypatch, capsys):
    _no_theory(monkeypatch)
    _one_line_exit_2(["theory", "--rank", "1000"], capsys, "--allow-long")
    from attnphase.setting import Setting
    from attnphase.theory.cost import REFUSE_SECONDS, check_theory_size, fixed_point_seconds

    s = Setting(r=1000)
    assert fixed_point_seconds(s) * 4 / 2 > REFUSE_SECONDS  # the case above is long by the estimate itself
    with pytest.raises(ValueError, match="allow"):
        check_theory_size(s, 4, "default", 2, available=2**50)
    note = check_theory_size(s, 4, "default", 2, available=2**50, allow_long=True)
    assert note and "roughly" in note
    assert check_theory_size(Setting(), 4, "default", 2, available=2**50) is None  # the study's: no note


@pytest.mark.parametrize("argv", [
    ["transition", "--rank", "1000", "--omega", "0.3"],
    ["plot", "test-error", "--rank", "1000", "--out", "{tmp}/f"],
    ["phase-diagram", "--rank", "1000", "--out", "{tmp}/pd"],
])
def test_every_theory_command_refuses_a_months_long_job(argv, tmp_path, monkeypatch, capsys):
    _no_theory(monkeypatch)
    _one_line_exit_2([a.replace("{tmp}", str(tmp_path)) for a in argv], capsys, "--allow-long")
    assert list(tmp_path.iterdir()) == []


def test_memory_refusal_never_suggests_what_was_passed(monkeypatch, capsys):
    _no_theory(monkeypatch)
    line = _one_line_exit_2(["theory", "--L", "900", "--precision", "fast"], capsys, "GiB")
    assert "'fast'" not in line
    line = _one_line_exit_2(["theory", "--L", "900"], capsys, "GiB")
    assert "precision 'fast'" in line


@pytest.mark.parametrize("make, match", [
    ("out_file", "is a file"),
    ("out_proc", "not writable"),
    ("store_text", "not an SQLite file"),
    ("store_foreign", "not an attnphase results store"),
    ("store_missing", "no such store"),
])
def test_phase_diagram_validates_before_it_estimates(make, match, tmp_path, monkeypatch, capsys):
    # the default ten omegas are long enough for the time note: it used to be printed before the error
    _no_theory(monkeypatch)
    out, store = tmp_path / "pd", tmp_path / "s.sqlite"
    if make == "out_file":
        out.write_text("x")
    elif make == "out_proc":
        out = Path("/proc/attnphase-pd")
    elif make == "store_text":
        store.write_text("not a database\n")
    elif make == "store_foreign":
        _foreign_db(store)
    argv = ["phase-diagram", "--out", str(out)] + (["--store", str(store)] if make.startswith("store") else [])
    _one_line_exit_2(argv, capsys, match)
    assert not (tmp_path / "pd").is_dir()


def test_phase_diagram_note_comes_once_after_the_checks(monkeypatch, capsys):
    from attnphase.cli.transition import check_transition_options

    args = build_parser().parse_args(["phase-diagram", "--out", "x"])
    omegas = [0.02 * i for i in range(50)]  # (about 2 minutes of transitions at the study's geometry)
    check_transition_options(args, omegas, announce=False)
    assert capsys.readouterr().err == ""
    check_transition_options(args, omegas)
    assert "note:" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["bayes", "--A", "0.6,0.4;0.4,0.6", "--L", "3", "--alpha", "0.5"],
    ["amp", "--d", "20", "--alpha", "1", "--L", "3", "--A", "0.6,0.4;0.4,0.6"],
    ["theory", "--A", "0.6,0.4;0.4,0.6", "--L", "3"],
])
def test_an_A_that_disagrees_with_L_is_refused_by_every_command(argv, monkeypatch, capsys):
    # bayes and amp used to replace the study's A by the L = 3 default silently
    _no_theory(monkeypatch)
    _one_line_exit_2(argv, capsys, "A is 2 x 2 but L = 3")


def test_bayes_setting_follows_the_theory_rule():
    from attnphase.cli.common import setting_from_args
    from attnphase.setting import mixing_A

    parser = build_parser()
    for extra in ([], ["--L", "3"], ["--A", "0.3,0.7;0.8,0.2"]):
        b = parser.parse_args(["bayes", *extra])
        t = parser.parse_args(["theory", *extra])
        from attnphase.cli.bayes import bayes_setting

        assert bayes_setting(b, 0.3).A == setting_from_args(t, omega=0.3).A
    assert bayes_setting(parser.parse_args(["bayes", "--L", "3"]), 0.3).A == mixing_A(3)


def test_reproduce_refuses_a_store_where_its_report_goes(tmp_path, capsys):
    out = tmp_path / "r"
    out.mkdir()
    _store_with_rows(out / "report.md")
    before = _sha(out / "report.md")
    capsys.readouterr()
    _one_line_exit_2(["reproduce", "--out", str(out), "--quick"], capsys, "report.md")
    assert _sha(out / "report.md") == before
    assert sorted(p.name for p in out.iterdir()) == ["report.md"]  # no store created either
    other = tmp_path / "r2"
    other.mkdir()
    (other / "results.sqlite").write_text("not a database\n")
    _one_line_exit_2(["reproduce", "--out", str(other), "--quick"], capsys, "results.sqlite")


def test_read_only_checks_leave_nothing_beside_the_store(tmp_path, capsys):
    from attnphase.experiments.store import check_store_file, load_results

    store = tmp_path / "s.sqlite"
    _store_with_rows(store)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.sqlite"]
    before, mtime = _sha(store), store.stat().st_mtime_ns
    check_store_file(str(store))
    assert len(load_results(store)) > 0
    assert main(["export", "--store", str(store), "--csv", str(tmp_path / "o.csv"), "--quiet"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.csv", "s.sqlite"]
    assert _sha(store) == before and store.stat().st_mtime_ns == mtime
    with ResultStore(str(store)):  # a writer is using it: a reader joins and leaves its files alone
        check_store_file(str(store))
        assert len(load_results(store)) > 0
        assert (tmp_path / "s.sqlite-wal").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.csv", "s.sqlite"]  # the writer's own, removed by it


def test_a_foreign_wal_database_is_read_without_a_trace(tmp_path, capsys):
    other = tmp_path / "app.db"
    con = sqlite3.connect(other)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE notes (x TEXT)")
    con.commit()
    con.close()
    before = _sha(other)
    _one_line_exit_2(["export", "--store", str(other), "--csv", str(tmp_path / "o.csv")], capsys,
                     "not an attnphase results store")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"] and _sha(other) == before


@pytest.mark.parametrize("command, store, expected", [
    (["theory"], None, "nothing was saved"),
    (["transition"], None, "nothing was saved"),
    ([*SWEEP, "--store", "{tmp}/s.sqlite"], "{tmp}/s.sqlite", "kept in --store"),
])
def test_ctrl_c_says_what_is_kept(command, store, expected, tmp_path):
    from attnphase.cli import interrupted_message

    argv = [a.replace("{tmp}", str(tmp_path)) for a in command]
    line = interrupted_message(build_parser().parse_args(argv))
    assert expected in line
    if store:
        assert store.replace("{tmp}", str(tmp_path)) in line


def test_a_store_path_ending_in_a_separator_is_refused(tmp_path, capsys):
    # sweep used to create "s.sqlite" from "s.sqlite/" and run
    _one_line_exit_2([*SWEEP, "--store", f"{tmp_path}/s.sqlite/", "--task", "conftest:fake_task"], capsys,
                     "path separator")
    assert list(tmp_path.iterdir()) == []


def test_theory_warns_about_invalid_points_by_status(monkeypatch, capsys):
    """A collapsed point is a verdict (no fixed point of that branch there), not a failure: the warning counts the
    invalid rows by their status and names neither as 'not converged'."""
    import dataclasses

    from conftest import synthetic_curves

    import attnphase.theory as theory
    from attnphase.notes import Status

    def fake_curve(setting, alphas, branch, precision="default", seed=0, multistart=None, on_point=None, pattern=None):
        p = synthetic_curves([1.0])["positional"][0]
        return [dataclasses.replace(p, status=Status.collapsed if branch == "semantic" else Status.not_converged)]

    monkeypatch.setattr(theory, "solve_curve", fake_curve)
    assert main(["theory", "--alpha", "1", "--branch", "semantic,positional", "--json", "--quiet",
                 "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "2 fixed point(s) are not valid" in err
    assert "1 collapsed (no distinct fixed point of the branch there)" in err and "1 not_converged" in err


@pytest.mark.parametrize("argv,match", [
    (["--L", "3", "--positions", "simplex", "--branch", "positional", "--pattern", "2:1"], "one of 1:2, 1+1-"),
    (["--L", "3", "--positions", "simplex", "--branch", "all", "--pattern", "1:2"], "--branch positional"),
    (["--branch", "positional", "--pattern", "1:2"], "exchangeable"),
    (["--L", "3", "--positions", "simplex", "--omega", "0.3,0.6", "--branch", "positional", "--pattern", "x"], "--pattern"),
])
def test_theory_pattern_is_checked_before_any_work(argv, match, capsys, monkeypatch):
    import attnphase.theory as theory

    def no_work(*args, **kwargs):
        raise AssertionError("solved before the input was checked")

    monkeypatch.setattr(theory, "solve_curve", no_work)
    _one_line_exit_2(["theory", "--alpha", "1", "--quiet", *argv], capsys, match)
