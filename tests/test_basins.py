"""Basins of attraction (issue 10): the classification rule, the basins task through the sweep store, the CLI."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch

from attnphase import Setting
from attnphase.cli import main
from attnphase.experiments.simulation import sample_dataset, simulate
from attnphase.experiments.simulation.basins import (
    BranchPoint,
    basin_distances,
    basins_grids,
    classify,
    run_basins,
    theory_points,
)
from attnphase.experiments.store import load_results

# Hand-made fixed points with the study's orders of magnitude (alpha = 1.5, omega = 0.3).
POINTS = {
    "positional": BranchPoint("positional", 0.255, 0.0, 0.0033, 0.0035, "ok"),
    "semantic": BranchPoint("semantic", 0.0, 0.135, 0.0031, 0.0020, "ok"),
}


@pytest.mark.parametrize(
    ("m", "theta", "expected"),
    [
        (0.255, 0.0, "positional"),
        (0.0, 0.135, "semantic"),
        (-0.255, 0.0, "positional"),  # Q -> -Q: the sign of an overlap carries no information
        (0.30, 0.02, "positional"),  # finite-d positional minimum (m a bit larger, theta ~ 1/sqrt(d))
        (0.03, 0.12, "semantic"),
        (0.0, 0.0, "other"),  # the agnostic point is at relative distance 1 from both
        (0.12, 0.07, "other"),  # halfway: in neither ball
        (0.6, 0.0, "other"),  # far beyond the positional point
        (math.nan, 0.1, "other"),
    ],
)
def test_classify_synthetic_end_points(m, theta, expected):
    assert classify(m, theta, POINTS) == expected


def test_distances_are_relative_to_the_branch_norm():
    d = basin_distances(0.255 * 1.2, 0.0, POINTS)
    assert d["positional"] == pytest.approx(0.2)
    assert d["semantic"] == pytest.approx(math.hypot(0.306, 0.135) / 0.135)


def test_a_branch_that_does_not_exist_never_wins():
    gone = {**POINTS, "semantic": BranchPoint("semantic", 0.0, 0.0004, 0.0, 0.0, "collapsed")}
    assert math.isnan(basin_distances(0.0, 0.135, gone)["semantic"])
    assert classify(0.0, 0.135, gone) == "other"
    assert classify(0.25, 0.0, gone) == "positional"


def _start_at(problem, q: float, m: float, theta: float, sigma: float) -> torch.Tensor:
    """Q (d, 1) with exactly the overlaps q, m = 1^T Q / d, theta = sigma^2 Q^T Q* / d."""
    d = problem.d
    ones = torch.ones(d, dtype=torch.float64)
    qs = problem.Q_star[:, 0].to(torch.float64)
    u = qs - ones * (qs.sum() / d)
    u = u / torch.linalg.vector_norm(u)
    w = torch.randn(d, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    for v in (ones / math.sqrt(d), u):
        w = w - v * (v @ w)
    w = w / torch.linalg.vector_norm(w)
    a = m
    b = (theta * d / sigma**2 - a * float(qs.sum())) / float(u @ qs)
    c2 = q * d / sigma**2 - a * a * d - b * b
    assert c2 > 0
    return a * ones + b * u + math.sqrt(c2) * w


@pytest.mark.parametrize("branch", ["positional", "semantic"])
def test_runs_started_at_a_theory_fixed_point_are_classified_as_that_branch(branch):
    from attnphase.theory import solve

    setting, alpha, d, seed = Setting(omega=0.3), 1.5, 400, 2
    fp = solve(setting, alpha, branch=branch, precision="fast")
    assert fp.status == "ok"
    points = theory_points(setting, alpha)
    s = fp.summary()  # the study's scalars: q, |m_1|, |theta|
    assert classify(s["m"], s["theta"], points) == branch
    pb = sample_dataset(setting, d, alpha, seed=seed, n_test=10, device="cpu")
    Q0 = _start_at(pb, s["q"], s["m"], s["theta"], setting.sigma)
    start = simulate(setting, d, alpha, Q0=Q0, optimizer="gd", steps=1, lr=1e-12, seed=seed, n_test=10, device="cpu")
    assert start.m == pytest.approx(s["m"], rel=1e-6) and start.theta == pytest.approx(s["theta"], rel=1e-6)
    # trained from there (the basins default: GD steps, then L-BFGS to convergence) it stays in that basin
    res = simulate(setting, d, alpha, Q0=Q0, optimizer="lbfgs", warmup=200, seed=seed, n_test=200, device="cpu")
    assert res.converged
    assert classify(res.m, res.theta, points) == branch


def test_basins_with_structured_starts_reproduce_simulate(tmp_path):
    store = tmp_path / "b.sqlite"
    d, alpha, seeds = 500, 1.5, (0, 1)
    grids = basins_grids(d=d, alphas=alpha, omegas=0.3, inits_per_point=2, seeds=seeds, optimizer="gd",
                         inits=("positional", "semantic"), n_test=300, options={"steps": 60})
    summary = run_basins(store, grids, progress=False)
    assert summary.ran == 4 and summary.failed == 0
    df = load_results(store)
    for _, row in df.iterrows():
        ref = simulate(Setting(omega=0.3), d, alpha, init=row["init"], optimizer="gd", seed=int(row["seed"]),
                       n_test=300, device="cpu", steps=60)
        for k in ("q", "m", "theta", "train_loss", "test_error", "test_error_linear"):
            assert row[k] == getattr(ref, k), k  # the same path: identical numbers
        assert row["basin"] in ("positional", "semantic", "other")
    # rerunning resumes: nothing is recomputed
    again = run_basins(store, grids, progress=False)
    assert again.ran == 0 and again.skipped == 4


def test_cli_basins_store_export_and_resume(tmp_path, capsys):
    store, csv = tmp_path / "b.sqlite", tmp_path / "b.csv"
    argv = ["basins", "--store", str(store), "--d", "30", "--alphas", "1,2", "--omegas", "0.3", "--inits-per-point",
            "2", "--init-scale", "0.1", "--n-test", "50", "--warmup", "20", "--no-progress", "--device", "cpu"]
    assert main(argv) == 0
    assert "4 starts: 4 ran" in capsys.readouterr().err
    assert main(argv) == 0
    assert "0 ran, 4 skipped" in capsys.readouterr().err
    assert main(["export", "--store", str(store), "--csv", str(csv)]) == 0
    import pandas as pd

    df = pd.read_csv(csv)
    assert len(df) == 4 and set(df["basin"]) <= {"positional", "semantic", "other"}
    assert {"basin_distance_positional", "basin_distance_semantic", "init_scale", "converged", "steps",
            "train_loss", "test_error", "m", "theta"} <= set(df.columns)
    assert (df["init"] == "random").all() and (df["init_scale"] == 0.1).all()


@pytest.mark.parametrize(
    ("extra", "word"),
    [
        (["--inits-per-point", "0"], "inits-per-point"),
        (["--init-scale", "-1"], "init-scale"),
        (["--init-scale", "nan"], "init-scale"),
        (["--omegas", "1.5"], "omega"),
        (["--alphas", "0"], "alpha"),
        (["--seeds", "0:5"], "seeds"),
        (["--inits", "sideways"], "inits"),
        (["--warmup", "-3"], "warmup"),
        (["--d", "1000000000"], "GiB"),
        (["--device", "tpu"], "device"),
    ],
)
def test_cli_basins_bad_options_refused_before_any_work(tmp_path, capsys, extra, word):
    store = tmp_path / "never.sqlite"
    argv = ["basins", "--store", str(store), "--d", "30", "--alphas", "1", "--omegas", "0.3", "--inits-per-point", "2"]
    # later options override earlier ones in argparse
    t0 = time.perf_counter()
    assert main(argv + extra) == 2
    assert time.perf_counter() - t0 < 10
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and word in err[0]
    assert not store.exists()


def test_memory_guard_refuses_instantly():
    from attnphase.experiments.simulation.memory import estimate_memory, memory_parts

    for d, alpha in ((1_000_000_000, 1.0), (100_000, 1000.0)):
        t0 = time.perf_counter()
        with pytest.raises(ValueError, match="GiB") as exc:
            simulate(Setting(), d, alpha, device="cpu")
        assert time.perf_counter() - t0 < 2 and "\n" not in str(exc.value)
    # the tokens x, x + p (n L d each) and the test set (n_test L d), 8 bytes each, plus evaluation chunks
    est = estimate_memory(Setting(), 1000, 2.0, n_test=10000, optimizer="gd")
    tokens = (2 * 2000 + 10000) * 2 * 1000 * 8
    assert tokens < est < tokens + 5 * 2048 * 2 * 1000 * 8
    assert estimate_memory(Setting(), 1000, 2.0, 10000, "gd", "untied") > est
    # float32 halves what lives on the accelerator; the host still holds the float64 draws
    f64 = memory_parts(Setting(), 1000, 2.0, 10000, "gd", device="cuda")
    f32 = memory_parts(Setting(), 1000, 2.0, 10000, "gd", dtype="float32", device="cuda")
    assert f32.device < 0.6 * f64.device and f32.host == f64.host


def test_trajectory_is_recorded_every_k_steps():
    res = simulate(Setting(), 20, 1.0, init="random", optimizer="gd", steps=50, record_every=10, n_test=10,
                   device="cpu")
    steps = [row["step"] for row in res.trajectory]
    assert steps[:5] == [0, 10, 20, 30, 40] and len(steps) == 6  # plus the end point
    assert res.trajectory[-1]["m"] == pytest.approx(res.m) and res.trajectory[-1]["train_loss"] == pytest.approx(
        res.train_loss)
    assert all(np.isfinite([row["theta"] for row in res.trajectory]))


def _synthetic_frame():
    import pandas as pd

    rows = []
    for d in (50, 100):
        for omega in (0.1, 0.3):
            for alpha in (0.5, 1.0, 2.0):
                for seed in range(4):
                    basin = "semantic" if alpha * (1 + seed) > 3 * (omega + 0.2) * 2 else "positional"
                    rows.append({"d": d, "omega": omega, "alpha": alpha, "seed": seed, "basin": basin,
                                 "student": "tied", "init_scale": 1.0, "converged": True, "train_loss": 0.003,
                                 "test_error": 0.003})
    return pd.DataFrame(rows)


def test_fractions_with_binomial_errors():
    from attnphase.experiments.simulation.basins import basin_fractions

    fr = basin_fractions(_synthetic_frame())
    assert len(fr) == 2 * 2 * 3 and (fr["n"] == 4).all()
    assert np.allclose(fr["positional_fraction"] + fr["semantic_fraction"] + fr["other_fraction"], 1.0)
    row = fr[(fr["d"] == 50) & (fr["omega"] == 0.1) & (fr["alpha"] == 1.0)].iloc[0]
    k = int(row["n_semantic"])
    f = k / 4
    assert row["semantic_fraction"] == f
    assert row["semantic_se"] == pytest.approx(max(math.sqrt(f * (1 - f) / 4), 1 / 10))


def test_basins_figures_from_given_data(tmp_path):
    from attnphase.experiments.basins_study import transition_lines
    from attnphase.experiments.simulation.basins import basin_fractions
    from attnphase.plots.basins import plot_basin_heatmap, plot_fraction_vs_alpha, plot_trajectories

    fr = basin_fractions(_synthetic_frame())
    lines = transition_lines([{"omega": 0.1, "alpha_c": 0.8, "alpha_sem_appears": 0.55, "alpha_pos_vanishes": None},
                              {"omega": 0.3, "alpha_c": 1.3, "alpha_sem_appears": 0.7, "alpha_pos_vanishes": None}])
    assert set(lines) == {"alpha_c", "semantic spinodal"}
    paths = plot_basin_heatmap(fr, tmp_path / "h", lines=lines)
    paths += plot_fraction_vs_alpha(fr, tmp_path / "f", omega=0.3, alpha_c=1.3, spinodals={"semantic spinodal": 0.7})
    rows = [{"step": s, "m": 0.2 * s / 10, "theta": 0.01, "train_loss": 0.01 / (s + 1)} for s in range(0, 11)]
    paths += plot_trajectories([{"basin": "positional", "rows": rows}], tmp_path / "t",
                               fixed_points={"positional": {"m": 0.25, "theta": 0.0, "train_loss": 0.003}})
    assert all(p.exists() and p.stat().st_size > 1000 for p in paths) and len(paths) == 6
    with pytest.raises(ValueError, match="omega"):
        plot_fraction_vs_alpha(fr, tmp_path / "g", omega=0.9)


@pytest.mark.slow
def test_basins_figures_quick_end_to_end(tmp_path):
    from attnphase.experiments.basins_study import QuickPlan, basins_summary
    from attnphase.reproduce.basins import basins_figures_quick

    plan = QuickPlan(heat_d=30, heat_alphas=(1.0, 2.0), heat_omegas=(0.1, 0.3), fraction_ds=(20, 30), starts=2,
                     n_test=100, trajectory_d=30, trajectory_tries=2)
    paths = basins_figures_quick(tmp_path, tmp_path / "b.sqlite", plan=plan)
    assert len(paths) == 6 and all(p.exists() for p in paths)
    summary = basins_summary(tmp_path / "b.sqlite", omega=0.3)
    assert summary["total_starts"] == 2 * 2 + 2 * 2  # omega = 0.3: d = 20 and d = 30 (shared by both grids)
    for p in summary["points"]:
        assert p["n_positional"] + p["n_semantic"] + p["n_other"] == p["n"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
@pytest.mark.parametrize("command", ["sweep", "basins"])
def test_cuda_without_cuda_refused_up_front(tmp_path, capsys, command):
    store = tmp_path / "s.sqlite"
    assert main([command, "--store", str(store), "--d", "10", "--alphas", "1", "--omegas", "0.3", "--device",
                 "cuda"]) == 2
    assert "CUDA" in capsys.readouterr().err and not store.exists()


def test_sweep_untied_student(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    argv = ["sweep", "--store", str(store), "--d", "12", "--alphas", "1", "--omegas", "0.3", "--inits", "positional",
            "--opt", "steps=5", "--n-test", "10", "--no-progress", "--device", "cpu"]
    assert main([*argv, "--student", "untied"]) == 0
    assert main(argv) == 0  # the tied run is another point, not a duplicate
    df = load_results(store)
    assert sorted(df["student"]) == ["tied", "untied"]
    assert len(df) == 2
