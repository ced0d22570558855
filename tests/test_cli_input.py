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

    def fake_curve(setting, alphas, branch, precision="default", seed=0, multistart=None):
        seen.append((setting.r, branch, multistart))
        return synthetic_curves([1.0])["positional"]

    monkeypatch.setattr(theory, "solve_curve", fake_curve)
    assert main(["theory", "--alpha", "1", "--rank", "2", "--branch", "free", "--multistart", "--json", "--quiet"]) == 0
    assert main(["theory", "--alpha", "1", "--branch", "positional", "--json", "--quiet"]) == 0
    assert main(["theory", "--alpha", "1", "--branch", "positional", "--single-start", "--json", "--quiet"]) == 0
    # Every branch's set of starts is the default (issue 21); --single-start opts out; --multistart is kept.
    assert seen == [(2, "free", None), (1, "positional", None), (1, "positional", False)]
