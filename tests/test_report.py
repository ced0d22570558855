"""The one-command reproduction: serialisation of stored theory, resume from the store, report contents, the
figures' artists, CLI, and the real quick run end to end (slow)."""

from __future__ import annotations

import importlib
import json
import math
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import LINEAR, fake_task, synthetic_curves

from attnphase import plots
from attnphase import reproduce as report
from attnphase.cli import main
from attnphase.experiments.store import ResultStore
from attnphase.reproduce import theory_jobs
from attnphase.setting import Setting
from attnphase.theory.state_evolution.results import FixedPoint


def _tiny_plan() -> report.Plan:
    return report.Plan(
        name="tiny", setting=Setting(omega=0.3), precision="fast", curve_alphas=(0.5, 1.0, 1.5, 2.0),
        pd_omegas=(0.1, 0.3), pd_alpha_min=0.1, pd_alpha_max=2.0, pd_n_grid=4, pd_precision="fast",
        pd_xtol=0.05,
        sim_d=8, sim_alphas=(0.5, 1.0), sim_seeds=(0, 1), optimizer="lbfgs", n_test=100, fs_ds=(4, 8),
        fs_alpha=1.0,
    )


class FakeTheory:
    """Stands in for attnphase.theory (tested on its own) so that the pipeline runs in a second; counts
    calls so that caching can be checked."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _curve(self, alphas: Any, branch: str) -> list[FixedPoint]:
        pts = synthetic_curves(np.asarray(alphas, dtype=float))[branch]
        return [p for p in pts if p.alpha in set(float(a) for a in alphas)] or pts

    def solve_curve(self, setting: Setting, alphas: Any, branch: str, precision: str = "default") -> list:
        self._count("solve_curve")
        return self._curve(alphas, branch)

    def solve(self, setting: Setting, alpha: float, branch: str = "positional",
              precision: str = "default") -> FixedPoint:
        self._count("solve")
        return self._curve([1.0, alpha], branch)[-1]

    def transition(self, setting: Setting, alpha_min: float = 0.05, alpha_max: float = 2.0, n_grid: int = 20,
                   precision: str = "fast", xtol: float = 0.01) -> SimpleNamespace:
        self._count("transition")
        w = setting.omega
        ac = 0.2 + 2.5 * w
        return SimpleNamespace(
            omega=w, alpha_c=ac, alpha_c_bracket=(ac - 0.05, ac + 0.05), alpha_l=None, alpha_l_bracket=None,
            test_error_linear=LINEAR, alpha_sem_appears=0.4, alpha_pos_vanishes=None,
            reasons={"alpha_l": "test error of the global minimum stays above the linear baseline"},
            curves={b: self._curve(np.linspace(alpha_min, alpha_max, n_grid), b)
                    for b in ("positional", "semantic")},
        )

    def linear_baseline(self, setting: Setting) -> SimpleNamespace:
        self._count("linear_baseline")
        return SimpleNamespace(test_error_linear=LINEAR, mean_attention=np.full((2, 2), 0.5))


def _install(monkeypatch: pytest.MonkeyPatch, fake: Any) -> None:
    theory = importlib.import_module("attnphase.theory")
    for name in ("solve", "solve_curve", "transition", "linear_baseline"):
        monkeypatch.setattr(theory, name, getattr(fake, name), raising=False)


def test_fixed_point_json_round_trip() -> None:
    p = synthetic_curves()["semantic"][3]  # a collapsed point: status must survive
    p.errors["q"] = float("nan")
    back = report.fixed_point_from_json(json.loads(json.dumps(report.fixed_point_to_json(p))))
    assert back.status == p.status and back.valid == p.valid
    assert (back.alpha, back.train_loss) == (p.alpha, p.train_loss)
    assert np.array_equal(back.m, p.m) and np.array_equal(back.theta, p.theta)
    assert math.isnan(back.errors["q"]) and back.errors["test_error"] == p.errors["test_error"]


def test_transition_record_round_trip() -> None:
    fake = FakeTheory()
    tr = fake.transition(Setting(omega=0.2), n_grid=5)
    rec = report.TransitionRecord.from_result(tr)
    back = report.TransitionRecord.from_json(json.loads(json.dumps(rec.to_json())))
    assert back.alpha_c == pytest.approx(0.7) and back.alpha_c_bracket == pytest.approx((0.65, 0.75))
    assert back.alpha_l is None and back.alpha_l_bracket is None
    assert set(back.curves) == {"positional", "semantic"}
    assert [p.alpha for p in back.curves["positional"]] == [p.alpha for p in tr.curves["positional"]]
    row = back.to_dict()
    assert row["alpha_c_lo"] == pytest.approx(0.65) and row["alpha_l"] is None
    assert "alpha_l" in row["note"]


def _capture_figures(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Record every figure the plotting module saves, by file stem, to inspect what was drawn."""
    figures: dict[str, Any] = {}
    save = plots.style.save_figure

    def recording(fig: Any, out: Any) -> list[Path]:
        figures[Path(out).name.split(".")[0]] = fig
        return save(fig, out)

    monkeypatch.setattr(plots.style, "save_figure", recording)
    return figures


def _lines(fig: Any, label: str) -> list[Any]:
    return [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_label() == label]


def test_reproduce_pipeline_and_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeTheory()
    _install(monkeypatch, fake)
    figures = _capture_figures(monkeypatch)
    out = tmp_path / "rep"
    plan = _tiny_plan()
    path = report.reproduce(out, plan=plan, task=fake_task, progress=False)
    assert path == out / "report.md"
    text = path.read_text()
    assert set(figures) == set(report.FIGURES.values())
    for stem in report.FIGURES.values():
        assert (out / f"{stem}.png").is_file() and (out / f"{stem}.pdf").is_file()
        assert f"]({stem}.png)" in text  # embedded in the report

    # Figure (a): the alpha_c line sits at the computed transition, and every theory point drawn is a valid
    # point of its branch (the collapsed semantic point is left out) with its own test error.
    fig_a = figures[report.FIGURES["test_error"]]
    (vline,) = _lines(fig_a, r"$\alpha_c$")
    assert np.allclose(vline.get_xdata(), 0.2 + 2.5 * 0.3)
    curves = synthetic_curves(np.asarray(plan.curve_alphas))
    for branch in ("positional", "semantic"):
        # the computed points exactly (the line between them is a monotone cubic through them)
        (line,) = [ln for ln in fig_a.axes[0].get_lines() if ln.get_gid() == f"theory-points-{branch}"]
        valid = [p for p in curves[branch] if p.valid and p.alpha in plan.curve_alphas]
        assert np.allclose(line.get_xdata(), [p.alpha for p in valid])
        assert np.allclose(line.get_ydata(), [p.test_error for p in valid])
    # Figure (b): alpha_c again, at the same place.
    (vline_b,) = _lines(figures[report.FIGURES["loss_difference"]], r"$\alpha_c$")
    assert np.allclose(vline_b.get_xdata(), vline.get_xdata())

    for needle in ("## Setting", "## Phase diagram", "| 0.1 |", "| 0.3 |", "## Simulations", "alpha scan",
                   "finite size", "lbfgs", "## Theory points flagged", "semantic: ", "## Timing",
                   "test error of the global minimum stays above the linear baseline"):
        assert needle in text, needle
    # alpha_c at omega = 0.3 with its bracket
    assert "0.95 [0.9, 1]" in text
    assert "MODEL.md" not in text and "../shared" not in text
    # One store: the theory went into results.sqlite, no JSON cache beside it.
    assert (out / "results.sqlite").is_file() and not (out / "theory_cache.json").exists()
    with ResultStore(out / "results.sqlite", readonly=True) as store:
        assert store.theory_count() > 0
    first = dict(fake.calls)
    assert first == {"solve_curve": 2, "transition": 2, "solve": 2, "linear_baseline": 1}

    # Rerun: nothing is recomputed or re-simulated.
    def boom(*a: Any, **k: Any) -> None:
        raise AssertionError("recomputed a stored result")

    fake2 = FakeTheory()
    for name in ("solve", "solve_curve", "transition", "linear_baseline"):
        setattr(fake2, name, boom)
    _install(monkeypatch, fake2)
    text2 = report.reproduce(out, plan=_tiny_plan(), task=boom, progress=False).read_text()
    assert "0 computed" in text2
    assert "| alpha scan | 8 | 0.5, 1 | 8 | 0 | 8 | 0 |" in text2
    assert "produced by 2 runs" in text2
    runs = json.loads((out / report.RUNS_NAME).read_text())
    assert [r["simulations_ran"] for r in runs] == [12, 0] and runs[1]["theory_computed"] == 0


def test_reproduce_refuses_a_foreign_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    fake = FakeTheory()
    _install(monkeypatch, fake)
    out = tmp_path / "rep"
    out.mkdir()
    con = sqlite3.connect(out / "results.sqlite")
    con.execute("CREATE TABLE mine (x)")
    con.commit()
    con.close()
    with pytest.raises(ValueError, match="not an attnphase results store"):
        report.reproduce(out, plan=_tiny_plan(), task=fake_task, progress=False)
    assert fake.calls == {}  # refused before anything was computed


def test_reproduce_changed_plan_recomputes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeTheory()
    _install(monkeypatch, fake)
    out = tmp_path / "rep"
    report.reproduce(out, plan=_tiny_plan(), task=fake_task, progress=False)
    plan = _tiny_plan()
    plan2 = report.Plan(**{**plan.__dict__, "pd_omegas": (0.1, 0.2, 0.3)})
    report.reproduce(out, plan=plan2, task=fake_task, progress=False)
    assert fake.calls["transition"] == 3  # only omega = 0.2 is new


def test_reproduce_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "file"
    afile.write_text("x")
    assert main(["reproduce", "--out", str(afile), "--quick", "--no-progress"]) == 2
    assert "directory" in capsys.readouterr().err
    assert main(["reproduce", "--out", str(tmp_path / "d"), "--workers", "0"]) == 2
    assert "workers" in capsys.readouterr().err
    assert main(["reproduce"]) == 2  # --out is required


@pytest.mark.slow
def test_reproduce_quick_end_to_end(tmp_path: Path) -> None:
    """The real quick reproduction (theory at precision fast, lbfgs simulations at d = 100); two workers,
    as on the 2-core CI machine."""
    out = tmp_path / "quick"
    t0 = time.perf_counter()
    assert main(["reproduce", "--out", str(out), "--quick", "--no-progress", "--workers", "2"]) == 0
    first = time.perf_counter() - t0
    text = (out / "report.md").read_text()
    assert "## Phase diagram" in text and "## Simulations" in text and "## Basins of attraction" in text
    assert "not produced" not in text
    bp = report.plan_for(True).basins
    n_starts = bp.starts * len(bp.heat_alphas) * (len(bp.heat_omegas) + len(bp.fraction_ds) - 1)
    assert f"This run: {n_starts} starts, {n_starts} trained now" in text
    for stem in [*report.FIGURES.values(), *report.FIGURES_BASINS.values()]:
        for suffix in (".png", ".pdf"):
            assert (out / (stem + suffix)).is_file()
    # resume: a rerun reuses everything and is much faster
    t0 = time.perf_counter()
    assert main(["reproduce", "--out", str(out), "--quick", "--no-progress", "--workers", "2"]) == 0
    assert time.perf_counter() - t0 < max(30.0, 0.5 * first)
    text2 = (out / "report.md").read_text()
    assert "0 computed" in text2 and f"{n_starts} found in the store" in text2


def test_theory_jobs_in_parallel_processes_are_stored(tmp_path: Path) -> None:
    store: dict[str, float] = {}

    def job(i: int) -> theory_jobs.Job:
        return theory_jobs.Job(f"k{i}", f"job {i}", math.sqrt, (float(i),), lambda c, i=i: store.get(f"k{i}"),
                               lambda c, v, i=i: store.__setitem__(f"k{i}", v), cost=i)

    jobs = [job(i) for i in range(4)]
    with ResultStore(tmp_path / "s.sqlite") as rs:
        cache = theory_jobs.TheoryCache(rs)
        res = theory_jobs.run_jobs(jobs, cache, workers=2, progress=False)
        assert res == {f"k{i}": math.sqrt(i) for i in range(4)} and store == res
        again = theory_jobs.TheoryCache(rs)
        assert theory_jobs.run_jobs(jobs, again, workers=2, progress=False) == res
        assert (again.hits, again.misses) == (4, 0)


def test_fixed_points_and_transitions_round_trip_through_the_store(tmp_path: Path) -> None:
    s = Setting(omega=0.3)
    curve = synthetic_curves(np.array([0.5, 1.0, 1.5]))["positional"]
    tr = report.TransitionRecord.from_result(FakeTheory().transition(s, n_grid=4))
    with ResultStore(tmp_path / "s.sqlite") as rs:
        cache = theory_jobs.TheoryCache(rs)
        assert cache.get_curve(s, (0.5, 1.0, 1.5), "positional", "fast") is None
        cache.put_curve(s, (0.5, 1.0, 1.5), "positional", "fast", curve)
        cache.put_transition(s, "fast", tr, n_grid=4)
    with ResultStore(tmp_path / "s.sqlite") as rs:
        cache = theory_jobs.TheoryCache(rs)
        back = cache.get_curve(s, (0.5, 1.0, 1.5), "positional", "fast")
        assert all(np.array_equal(a.m, b.m) for a, b in zip(back, curve, strict=True))
        assert [p.status for p in back] == [p.status for p in curve]
        assert cache.get_curve(s, (0.5, 1.0), "positional", "fast") is None  # another continuation path
        assert cache.get_curve(s, (0.5, 1.0, 1.5), "positional", "default") is None
        assert cache.get_curve(s.replace(omega=0.2), (0.5, 1.0, 1.5), "positional", "fast") is None
        assert cache.get_transition(s, "fast", n_grid=4).alpha_c == pytest.approx(tr.alpha_c)
        assert cache.get_transition(s, "fast", n_grid=5) is None


def test_a_transition_stored_by_an_earlier_revision_is_not_read_back(tmp_path: Path) -> None:
    """A store filled before transition() changed how it computes its records (the bracketed root search of issue
    31: alpha_l 1.546 on a 6-point grid, now 1.490) must not hand the old record back."""
    from attnphase.experiments.store import TheoryKey

    s = Setting(omega=0.3)
    tr = report.TransitionRecord.from_result(FakeTheory().transition(s, n_grid=4))
    with ResultStore(tmp_path / "s.sqlite") as rs:
        cache = theory_jobs.TheoryCache(rs)
        rs.put_theory(TheoryKey("transition", s.to_dict(), precision="fast", seed=theory_jobs.SEED,
                                params={"n_grid": 4}), tr.to_json())  # the key before revisions
        assert cache.get_transition(s, "fast", n_grid=4) is None
        cache.put_transition(s, "fast", tr, n_grid=4)
        assert cache.get_transition(s, "fast", n_grid=4) is not None


# -- the basins part ------------------------------------------------------------------------------------------

def _basin_of(alpha: float, seed: int) -> str:
    """The fake start's end point: semantic for large alpha, one 'other' start at alpha = 0.5."""
    if alpha >= 1.5 or (alpha == 1.0 and seed == 0):
        return "semantic"
    return "other" if (alpha == 0.5 and seed == 2) else "positional"


_FAKE_LOSS = {"positional": 0.002, "semantic": 0.001, "other": 0.005}


def fake_basins_task(point: Any) -> dict:
    """Shaped like basins_task(point): a simulation record plus the classification columns and a trajectory."""
    c = _basin_of(point.alpha, point.seed)
    rec = fake_task(point)
    rec.update(init_scale=json.loads(point.options)["init_scale"], student="tied", basin=c,
               train_loss=_FAKE_LOSS[c] * (1 + 0.1 * point.seed),
               trajectory=[{"step": s, "m": 0.1, "theta": 0.01 * s, "train_loss": 0.01 / (s + 1), "q": 0.2}
                           for s in range(0, 50, 10)])
    for b, m, th, loss in (("positional", 0.3, 0.0, 0.0021), ("semantic", 0.0, 0.25, 0.0011)):
        rec.update({f"theory_{b}_status": "ok", f"theory_{b}_m": m, f"theory_{b}_theta": th,
                    f"theory_{b}_train_loss": loss, f"basin_distance_{b}": 0.1})
    return rec


def _tiny_basins_plan() -> report.Plan:
    from attnphase.experiments.basins_study import QuickPlan

    bp = QuickPlan(heat_d=8, heat_alphas=(0.5, 1.0, 1.5), heat_omegas=(0.1, 0.3), fraction_ds=(4, 8),
                   fraction_omega=0.3, starts=3, init_scale=1.0, n_test=100, trajectory_d=8, trajectory_alpha=1.5,
                   record_every=10)
    return report.Plan(**{**_tiny_plan().__dict__, "basins": bp})


def test_reproduce_basins_section_and_figures_from_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from attnphase.experiments.basins_study import basins_summary
    from attnphase.plots import basins as plots_basins
    from attnphase.reproduce import pipeline
    from attnphase.reproduce.basins import FIGURES_BASINS
    from attnphase.reproduce.markdown import fraction_text
    from attnphase.reproduce.simulations import sim_frame

    _install(monkeypatch, FakeTheory())
    monkeypatch.setattr(pipeline, "make_figures", lambda *a: ({}, []))  # (a)-(e) are tested above; seconds each
    drawn: dict[str, Any] = {}
    save = plots_basins.style.save_figure
    monkeypatch.setattr(plots_basins.style, "save_figure",
                        lambda fig, out: (drawn.__setitem__(Path(out).name, fig), save(fig, out))[1])
    out = tmp_path / "rep"
    plan = _tiny_basins_plan()
    text = report.reproduce(out, plan=plan, task=fake_task, basins_task=fake_basins_task, progress=False).read_text()
    store = out / "results.sqlite"

    # One store: 3 starts at each of (d = 8: 2 omegas x 3 alphas) + (d = 4: 3 alphas at omega 0.3).
    summ = basins_summary(store)
    assert summ["total_starts"] == 3 * (6 + 3)
    assert "## Basins of attraction" in text and summ["rule"] in text
    assert "This run: 27 starts, 27 trained now, 0 found in the store, 0 failed" in text
    assert "27 starts in this grid, 27 converged" in text and "**Note:**" not in text
    for p in summ["points"]:
        # the expected counts from the fake rule itself, independently of the summary code
        k = sum(_basin_of(p["alpha"], s) == "semantic" for s in range(3))
        assert p["n"] == 3 and p["n_semantic"] == k
        f = k / 3
        se = max(math.sqrt(f * (1 - f) / 3), 1 / 8)
        side = "below" if p["alpha"] < 0.2 + 2.5 * p["omega"] else "above"
        row = (f"| {p['d']} | {p['omega']:g} | {p['alpha']:g} | {side} | 3 | {f:.2f} ± {se:.2f} | "
               f"{fraction_text(p['positional_fraction'], p['positional_se'])} | ")
        assert row in text, row
    # mean train loss per class at d = 8, omega = 0.3, alpha = 1: seed 0 semantic, seeds 1, 2 positional
    assert "| 8 | 0.3 | 1 | above | 3 | 0.33 ± 0.27 | 0.67 ± 0.27 | 0.00 ± 0.12 | 3 | 0.0023 / 0.001 / - |" in text
    # alpha_c(0.3) = 0.95: below it only alpha = 0.5 (0 of 3 semantic), above 1 and 1.5 (1 + 3 of 6)
    assert "- d = 8, omega = 0.3, alpha_c = 0.95: below alpha_c: 0/3 = 0.00 ± 0.12; above alpha_c: 4/6 = 0.67 ± 0.19" in text
    assert "first alpha with a semantic majority: 1.5" in text

    for stem in FIGURES_BASINS.values():
        assert (out / f"{stem}.png").is_file() and (out / f"{stem}.pdf").is_file()
        assert f"]({stem}.png)" in text
    # Heat map: one cell per (alpha, omega) of d = 8 with its stored count; alpha_c from the reproduction's
    # transitions (the fake's 0.2 + 2.5 omega at the phase diagram's omegas).
    heat = drawn[FIGURES_BASINS["basins_heatmap"]]
    cells = sorted(t.get_text() for t in heat.axes[0].texts)
    assert cells == sorted(f"{sum(_basin_of(a, s) == 'semantic' for s in range(3))}/3"
                           for a in (0.5, 1.0, 1.5) for _ in (0.1, 0.3))
    (ac_line,) = [ln for ln in heat.axes[0].get_lines() if ln.get_label() == r"$\alpha_c$"]  # mathtext
    assert np.allclose(ac_line.get_xdata(), [0.2 + 2.5 * w for w in (0.1, 0.3)])
    # Fraction figure: one curve per d; alpha_c at 0.95.
    frac = drawn[FIGURES_BASINS["basins_fraction"]]
    assert np.allclose([ln.get_xdata()[0] for ln in frac.axes[0].get_lines() if "alpha_c" in ln.get_label()], 0.95)
    # Trajectories: the stored ones at d = 8, alpha = 1.5 (all 3 semantic), with the stored theory values.
    traj = drawn[FIGURES_BASINS["basins_trajectories"]]
    # overlaps over sigma^2, as in figure (c)
    s2 = plan.setting.sigma ** 2
    thetas = [ln for ln in traj.axes[1].get_lines() if len(ln.get_xdata()) == 5]
    assert len(thetas) == 3 and np.allclose(thetas[0].get_ydata(), np.array([0.0, 0.1, 0.2, 0.3, 0.4]) / s2)
    assert any(np.allclose(ln.get_ydata(), 0.25 / s2) for ln in traj.axes[1].get_lines()
               if len(ln.get_xdata()) == 2)

    # The plain simulations' frame leaves the random starts out (figures (a)-(e) never see them).
    sims = sim_frame(plan, store)
    assert set(sims["init"]) == {"positional", "semantic"} and len(sims) == 12

    # Rerun: no start is trained again and the numbers are the same.
    def boom(*a: Any, **k: Any) -> None:
        raise AssertionError("retrained a stored start")

    text2 = report.reproduce(out, plan=plan, task=boom, basins_task=boom, progress=False).read_text()
    assert "This run: 27 starts, 0 trained now, 27 found in the store, 0 failed" in text2
    assert "above alpha_c: 4/6 = 0.67 ± 0.19" in text2


def test_reproduce_bayes_section_reports_the_thresholds(tmp_path: Path) -> None:
    """The quick plan's Bayes-optimal section (state evolution, thresholds, GAMP rows, figures) with no ERM results
    to draw: the report block names the thresholds the theory gives (1/6 and 1/2 at L = 2) and its figures exist."""
    from types import SimpleNamespace

    from attnphase.reproduce.bayes import run_bayes
    from attnphase.reproduce.plan import plan_for

    plan = plan_for(True)
    assert plan.bayes == "quick"
    run = run_bayes(tmp_path, plan, SimpleNamespace(transition=None, diagram=None, curves=None))
    text = run.markdown()
    assert not run.notes
    assert "alpha_weak = 0.1667" in text and "alpha_it = 0.5" in text
    assert any(p.name == "bayes_comparison.png" and p.is_file() for p in run.figures)
    assert sum(r["kind"] == "amp" for r in run.records) == 3
