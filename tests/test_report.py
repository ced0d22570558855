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
from attnphase.reproduce import theory_jobs
from attnphase.setting import Setting
from attnphase.store import ResultStore
from attnphase.theory.results import FixedPoint


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
    save = plots.save_figure

    def recording(fig: Any, out: Any) -> list[Path]:
        figures[Path(out).name.split(".")[0]] = fig
        return save(fig, out)

    monkeypatch.setattr(plots, "save_figure", recording)
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
        (line,) = _lines(fig_a, f"theory, {branch}")
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
    assert "## Phase diagram" in text and "## Simulations" in text
    for stem in report.FIGURES.values():
        for suffix in (".png", ".pdf"):
            assert (out / (stem + suffix)).is_file()
    # resume: a rerun reuses everything and is much faster
    t0 = time.perf_counter()
    assert main(["reproduce", "--out", str(out), "--quick", "--no-progress", "--workers", "2"]) == 0
    assert time.perf_counter() - t0 < max(30.0, 0.5 * first)
    assert "0 computed" in (out / "report.md").read_text()


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
