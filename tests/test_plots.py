"""Figures from synthetic inputs, tested on their matplotlib artists: what is drawn is exactly what the theory
returned (critical values, valid points only, the unstable branch dashed); plus the CLI wiring."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import LINEAR, OMEGA, synthetic_curves

from attnphase import plots
from attnphase.theory.state_evolution.results import global_minimum_curve
from attnphase.theory.transition.records import SEARCHES, Critical, TransitionResult


def synthetic_sim(ds: tuple[int, ...] = (100,), alphas: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0),
                  omegas: tuple[float, ...] = (OMEGA,),
                  optimizers: tuple[str, ...] = ("lbfgs",)) -> pd.DataFrame:
    """An aggregate()-shaped table."""
    rows = []
    for d in ds:
        for w in omegas:
            for a in alphas:
                for init in ("positional", "semantic"):
                    for opt in optimizers:
                        sem = init == "semantic"
                        tl = 0.003 - 0.0004 * a + (0.0006 * (1 - a) + 0.0003 * (w - 0.3) if sem else 0.0)
                        te = (LINEAR + 0.002 * (1.25 - a)) if sem else 0.0030 - 0.0002 * a
                        rec = {"d": d, "alpha": a, "omega": w, "init": init, "optimizer": opt, "n_seeds": 2}
                        vals = {"q": 0.3, "m": 0.0 if sem else 0.25, "theta": 0.2 if sem else 0.0,
                                "train_loss": tl, "test_error": te + 0.3 / d * 1e-2,
                                "test_error_linear": LINEAR}
                        for k, v in vals.items():
                            rec[f"{k}_mean"] = v
                            rec[f"{k}_sem"] = 0.02 * abs(v) + 1e-6
                        rows.append(rec)
    return pd.DataFrame(rows)


def _crit(name: str, value: float | None, half: float = 0.03, kind: str = "crossing") -> Critical:
    """kind: what a found value is; for a missing one, how its search ended when that is a search outcome
    ("above range"), else "not in range"."""
    if value is None:
        return Critical.missing(name, kind if kind in SEARCHES else "not in range", "synthetic")
    return Critical(name, value, value - half, value + half, kind, "synthetic")


def synthetic_transition(w: float, alpha_c: float | None, alpha_l: float | None, *, kind: str = "crossing",
                         sem: float | None = None, curves: dict | None = None,
                         unstable: dict | None = None) -> TransitionResult:
    crit = {"alpha_c": _crit("alpha_c", alpha_c, kind=kind), "alpha_l": _crit("alpha_l", alpha_l, 0.05),
            "alpha_sem_appears": _crit("alpha_sem_appears", sem, 0.01, "pitchfork"),
            "alpha_pos_vanishes": Critical.missing("alpha_pos_vanishes", "not in range", "synthetic")}
    return TransitionResult(omega=w, critical=crit, test_error_linear=LINEAR * (1 - w) ** 2, alpha_range=(0.05, 2.0),
                            curves=curves or {}, unstable=unstable or {})


def synthetic_transitions(omegas: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.4, 0.45)) -> list[TransitionResult]:
    out = []
    for w in omegas:
        ac = 0.2 + 2.5 * w
        al = ac + 0.3 if w < 0.4 else None  # never beats the baseline at the largest omegas
        out.append(synthetic_transition(w, ac, al, sem=0.6 * ac))
    return out


class Captured:
    """Figures passed to plots.save_figure (which still writes the files)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.figs: list = []
        original = plots.style.save_figure

        def save(fig, out):
            self.figs.append(fig)
            return original(fig, out)

        monkeypatch.setattr(plots.style, "save_figure", save)

    @property
    def ax(self):
        return self.figs[-1].axes[0]


def _vlines(ax, label: str) -> list[float]:
    """x of the vertical lines with this label (axvline: constant x data)."""
    return [float(line.get_xdata()[0]) for line in ax.get_lines() if line.get_label() == label]


def _line(ax, label: str):
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == label]
    return line


def _check(paths: list[Path]) -> None:
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert paths[0].stem == paths[1].stem
    for p in paths:
        assert p.is_file() and p.stat().st_size > 1000, p
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert paths[1].read_bytes()[:5] == b"%PDF-"


def test_global_minimum_underlay_is_the_theory_curve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cap = Captured(monkeypatch)
    curves = synthetic_curves()
    gm = global_minimum_curve(curves)
    # the theory's global minimum: positional where semantic does not exist or is higher, never a collapsed point
    by_alpha = {round(p.alpha, 6): p.branch for p in gm}
    assert by_alpha[round(0.1, 6)] == "positional" and by_alpha[2.0] == "semantic"
    assert all(p.valid for p in gm)
    plots.plot_test_error(curves, tmp_path / "te", global_minimum=gm[:5])
    # the underlay runs through exactly the points it is given (smoothly between them), and no further
    (line,) = [ln for ln in cap.ax.get_lines() if ln.get_label() == "global minimum"]
    xs, ys = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
    assert xs.min() == pytest.approx(gm[0].alpha) and xs.max() == pytest.approx(gm[4].alpha)
    for p in gm[:5]:
        i = np.flatnonzero(np.isclose(xs, p.alpha))
        assert len(i) == 1 and ys[i[0]] == pytest.approx(p.test_error)


def test_global_minimum_is_one_line_through_alpha_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 20: the underlay had a gap between the last positional and the first semantic grid point
    cap = Captured(monkeypatch)
    curves = synthetic_curves()
    gm = global_minimum_curve(curves)
    switch = next(i for i in range(1, len(gm)) if gm[i].branch != gm[i - 1].branch)
    a0, a1 = gm[switch - 1].alpha, gm[switch].alpha
    alpha_c = a0 + 0.3 * (a1 - a0)
    plots.plot_test_error(curves, tmp_path / "te", global_minimum=gm, alpha_c=alpha_c)
    lines = [ln for ln in cap.ax.get_lines() if ln.get_label() == "global minimum"]
    assert len(lines) == 1  # one line, no gap
    xs = np.asarray(lines[0].get_xdata(), dtype=float)
    assert np.all(np.diff(xs) >= 0)
    at_c = np.flatnonzero(np.isclose(xs, alpha_c))
    assert len(at_c) == 2  # each branch's segment continued to alpha_c, joined there by the jump
    ys = np.asarray(lines[0].get_ydata(), dtype=float)
    assert ys[at_c[0]] != ys[at_c[1]]


def test_save_figure_suffixes(tmp_path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure()
    fig.subplots().plot([0, 1], [0, 1])
    for name in ("a.png", "a.pdf", "a", "fig.omega0.3"):
        paths = plots.save_figure(fig, tmp_path / "sub" / name)
        _check(paths)
    assert (tmp_path / "sub" / "fig.omega0.3.png").is_file()


def test_test_error_figure_draws_given_values_and_valid_points(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cap = Captured(monkeypatch)
    curves = synthetic_curves()
    paths = plots.plot_test_error(curves, tmp_path / "test_error.png", test_error_linear=LINEAR,
                                  simulation=synthetic_sim(ds=(50, 100)), alpha_c=1.0123, alpha_l=1.2345,
                                  alpha_c_bracket=(0.95, 1.05), omega=OMEGA)
    _check(paths)
    ax = cap.ax
    assert _vlines(ax, r"$\alpha_c$") == [1.0123]
    assert _vlines(ax, r"$\alpha_l$") == [1.2345]
    assert float(_line(ax, "linear baseline").get_ydata()[0]) == LINEAR
    for branch, pts in curves.items():
        (points,) = [ln for ln in ax.get_lines() if ln.get_gid() == f"theory-points-{branch}"]
        valid = [p for p in pts if p.valid]
        assert np.allclose(points.get_xdata(), [p.alpha for p in valid])  # the collapsed point is not drawn
        assert np.allclose(points.get_ydata(), [p.test_error for p in valid])
        line = _line(ax, f"theory, {branch}")  # the line between them: through every computed point
        lx, ly = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
        assert lx.min() == pytest.approx(valid[0].alpha) and lx.max() == pytest.approx(valid[-1].alpha)
        assert np.allclose(np.interp([p.alpha for p in valid], lx, ly), [p.test_error for p in valid])
    # the alpha_c bracket is shaded
    spans = [p for p in ax.patches if p.get_x() == pytest.approx(0.95)]
    assert spans and spans[0].get_width() == pytest.approx(0.10)


def test_test_error_figure_without_critical_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cap = Captured(monkeypatch)
    _check(plots.plot_test_error(synthetic_curves(), tmp_path / "te"))
    assert _vlines(cap.ax, r"$\alpha_c$") == [] and _vlines(cap.ax, r"$\alpha_l$") == []


def test_loss_difference_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cap = Captured(monkeypatch)
    curves = synthetic_curves()
    sim = synthetic_sim(optimizers=("lbfgs", "gd"))
    _check(plots.plot_loss_difference(curves, tmp_path / "ld.pdf", simulation=sim, alpha_c=1.0, omega=OMEGA))
    line = _line(cap.ax, "theory")
    sem = {round(p.alpha, 9): p for p in curves["semantic"] if p.valid}
    pos = {round(p.alpha, 9): p for p in curves["positional"]}
    keys = sorted(set(sem) & set(pos))
    assert np.allclose(line.get_xdata(), keys)
    assert np.allclose(line.get_ydata(), [sem[k].train_loss - pos[k].train_loss for k in keys])
    assert _vlines(cap.ax, r"$\alpha_c$") == [1.0]


def test_overlaps_figure_draws_the_unstable_branch_dashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cap = Captured(monkeypatch)
    rows = [{"alpha": a, "q": 0.05, "V": 20.0, "theta": th, "m": 0.0} for a, th in ((0.5, 0.0), (0.45, 0.05),
                                                                                  (0.47, 0.1))]
    _check(plots.plot_overlaps(synthetic_curves(), tmp_path / "ov", simulation=synthetic_sim(), alpha_c=1.0,
                               omega=OMEGA, sigma=0.5, unstable={"semantic": rows}))
    ax_m, ax_theta = cap.figs[-1].axes[:2]
    (dashed,) = [ln for ln in ax_theta.get_lines() if ln.get_gid() == "unstable-semantic"]
    assert np.allclose(dashed.get_xdata(), [0.45, 0.47, 0.5])
    assert np.allclose(dashed.get_ydata(), [0.05 / 0.25, 0.1 / 0.25, 0.0])
    assert dashed.get_linestyle() == "--"
    assert _vlines(ax_m, r"$\alpha_c$") == [1.0] == _vlines(ax_theta, r"$\alpha_c$")


def test_phase_diagram_draws_the_transitions_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cap = Captured(monkeypatch)
    trs = synthetic_transitions()
    trs.append(synthetic_transition(0.5, None, None, kind="above range"))
    trs.append(synthetic_transition(0.01, 0.4, 0.6, kind="at spinodal", sem=0.4))
    _check(plots.plot_phase_diagram(trs, tmp_path / "pd", alpha_max=2.0))
    ax = cap.ax
    drawn = [c for c in ax.containers if c.get_label().startswith(r"$\alpha_c$")]
    x = drawn[0].lines[0].get_xdata()
    y = drawn[0].lines[0].get_ydata()
    want = sorted((t.omega, t.alpha_c) for t in trs if t.alpha_c is not None)
    assert np.allclose(y, [w for w, _ in want]) and np.allclose(x, [a for _, a in want])
    assert np.allclose(_line(ax, r"$\alpha_c > 2$").get_ydata(), [0.5])
    assert np.allclose(_line(ax, "switch at the semantic spinodal").get_xdata(), [0.4])


def test_phase_diagram_with_heatmap(tmp_path: Path) -> None:
    sim = synthetic_sim(omegas=(0.05, 0.1, 0.2, 0.3, 0.4, 0.45), alphas=tuple(np.linspace(0.1, 2.0, 8)))
    _check(plots.plot_phase_diagram(synthetic_transitions(), tmp_path / "pdh", alpha_max=2.0, simulation=sim))


def test_phase_diagram_needs_transitions(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        plots.plot_phase_diagram([], tmp_path / "x")


def test_finite_size_figure(tmp_path: Path) -> None:
    curves = synthetic_curves()
    theory = {b: next(p for p in pts if math.isclose(p.alpha, 1.5)) for b, pts in curves.items()}
    sim = synthetic_sim(ds=(50, 100, 200), alphas=(1.5,))
    _check(plots.plot_finite_size(sim, tmp_path / "fs", alpha=1.5, omega=OMEGA, theory=theory,
                                  test_error_linear=LINEAR))
    with pytest.raises(ValueError, match="alpha = 0.7"):
        plots.plot_finite_size(sim, tmp_path / "fs2", alpha=0.7)


# ------------------------------------------------------------------------------------------- the CLI


def _store(tmp_path: Path, ds: tuple[int, ...] = (8, 16), alphas: tuple[float, ...] = (1.0, 1.5)) -> Path:
    from test_sweep import fake_task

    from attnphase.experiments.sweep import Grid, run_sweep

    path = tmp_path / "s.sqlite"
    run_sweep(path, Grid(d=ds, alphas=alphas, omegas=(OMEGA,), seeds=(0, 1), optimizer="lbfgs", n_test=100),
              task=fake_task, progress=False)
    return path


@pytest.mark.parametrize("argv, match", [
    (["plot", "nope"], "invalid choice"),
    (["plot", "test-error"], "--out"),
    (["plot", "test-error", "--alphas", "0,1"], "alpha must be > 0"),
    (["plot", "test-error", "--alphas", "abc"], "--alphas"),
    (["plot", "test-error", "--omega", "2"], "omega"),
    (["plot", "test-error", "--alpha-max", "-1"], "alpha-max"),
    (["plot", "test-error", "--d", "0"], "--d"),
    (["plot", "phase-diagram", "--omegas", "0.1,1.5"], "omega"),
    (["plot", "finite-size"], "needs --store"),
    (["plot", "finite-size", "--store", "{missing}"], "no such store"),
    (["plot", "finite-size", "--store", "{store}", "--alphas", "1,1.5"], "single alpha"),
    (["plot", "finite-size", "--store", "{store}", "--alphas", "0.7"], "no simulations at alpha = 0.7"),
    (["plot", "test-error", "--store", "{store}", "--d", "999"], "not in the store"),
    (["plot", "test-error", "--precision", "sloppy"], "invalid choice"),
])
def test_cli_plot_bad_inputs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                    match: str) -> None:
    from attnphase.cli import main

    store = _store(tmp_path) if any("{store}" in a for a in argv) else None
    argv = [a.format(store=store, missing=tmp_path / "missing.sqlite") for a in argv]
    if "--out" not in argv and argv != ["plot", "test-error"]:
        argv += ["--out", str(tmp_path / "fig")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert match in err
    if not err.startswith("usage:"):  # argparse's own errors come with a usage block; ours are one line
        assert len(err.strip().splitlines()) == 1, err
    assert not list(tmp_path.glob("fig*"))


def test_cli_plot_phase_diagram_wiring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The phase-diagram path with the theory replaced by a stand-in (the real one is in the slow test)."""
    import importlib

    from attnphase.cli import main

    seen: dict[str, object] = {}

    def fake_phase_diagram(setting, omegas, alpha_max=2.0, precision="fast", progress=True):
        seen.update(omegas=list(omegas), alpha_max=alpha_max, precision=precision, sigma=setting.sigma)
        return synthetic_transitions(tuple(omegas))

    monkeypatch.setattr(importlib.import_module("attnphase.theory"), "phase_diagram", fake_phase_diagram,
                        raising=False)
    rc = main(["plot", "phase-diagram", "--omegas", "0.1:0.4:4", "--alpha-max", "1.8", "--precision", "fast",
               "--sigma", "0.5", "--no-progress", "--out", str(tmp_path / "pd.png")])
    assert rc == 0
    assert seen == {"omegas": pytest.approx([0.1, 0.2, 0.3, 0.4]), "alpha_max": 1.8, "precision": "fast",
                    "sigma": 0.5}
    printed = capsys.readouterr().out.split()
    assert printed == [str(tmp_path / "pd.png"), str(tmp_path / "pd.pdf")]
    _check([Path(p) for p in printed])


def test_cli_plot_test_error_draws_the_transition_values(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Real theory curves at precision fast on two alphas, simulation points from a store; the transition (its
    own test is in test_transition.py) replaced by a stand-in, to check that its values are what is drawn."""
    import importlib

    from attnphase.cli import main

    cap = Captured(monkeypatch)
    seen = {}

    def fake_transition(setting, precision="fast"):
        seen.update(omega=setting.omega, precision=precision)
        return synthetic_transition(setting.omega, 1.234, 1.5)

    monkeypatch.setattr(importlib.import_module("attnphase.theory"), "transition", fake_transition)
    store = _store(tmp_path)
    rc = main(["plot", "test-error", "--alphas", "1.0,1.5", "--precision", "fast", "--store", str(store),
               "--no-progress", "--out", str(tmp_path / "te")])
    assert rc == 0
    _check([Path(p) for p in capsys.readouterr().out.split()])
    assert seen == {"omega": 0.3, "precision": "fast"}
    assert _vlines(cap.ax, r"$\alpha_c$") == [1.234]
    assert _vlines(cap.ax, r"$\alpha_l$") == [1.5]
    # every plotted theory point is a converged one
    for branch in ("positional", "semantic"):
        lines = [ln for ln in cap.ax.get_lines() if ln.get_label() == f"theory, {branch}"]
        assert len(lines) <= 1


@pytest.mark.slow
def test_figure_and_cli_report_the_same_alpha_c(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The real thing: `attnphase plot test-error` draws alpha_c where `attnphase transition` prints it."""
    import json

    from attnphase.cli import main

    cap = Captured(monkeypatch)
    assert main(["transition", "--omega", "0.3", "--precision", "fast", "--json", "--workers", "1",
                 "--no-progress"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert rec["alpha_c"] is not None
    assert main(["plot", "test-error", "--alphas", "1.0,1.5", "--omega", "0.3", "--precision", "fast",
                 "--no-progress", "--out", str(tmp_path / "te")]) == 0
    assert _vlines(cap.ax, r"$\alpha_c$") == [pytest.approx(rec["alpha_c"], abs=1e-12)]
    assert _vlines(cap.ax, r"$\alpha_l$") == ([pytest.approx(rec["alpha_l"], abs=1e-12)] if rec["alpha_l"] else [])
    for line in cap.ax.get_lines():
        if line.get_label().startswith("theory, "):
            assert np.all(np.isfinite(line.get_ydata()))


def test_cli_plot_finite_size_real_theory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from attnphase.cli import main

    store = _store(tmp_path, ds=(4, 8, 16), alphas=(1.5,))
    rc = main(["plot", "finite-size", "--alphas", "1.5", "--precision", "fast", "--store", str(store),
               "--no-progress", "--out", str(tmp_path / "fs.pdf")])
    assert rc == 0
    _check([Path(p) for p in capsys.readouterr().out.split()])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["loss-difference", "overlaps", "phase-diagram"])
def test_cli_plot_other_kinds_real_theory(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          kind: str) -> None:
    from attnphase.cli import main

    rc = main(["plot", kind, "--alphas", "0.5,1.0,1.5,2.0", "--omegas", "0.3", "--precision", "fast",
               "--no-progress", "--out", str(tmp_path / kind)])
    assert rc == 0
    _check([Path(p) for p in capsys.readouterr().out.split()])


def test_basins_figures_share_the_branch_style_and_keep_legends_off_the_cells(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 20: figure (f)'s legend covered the cell counts; the basins figures had their own copy of the colours
    from attnphase.plots import basins as pb
    from attnphase.plots.style import BRANCH_STYLE

    assert pb.CLASS_STYLE["positional"]["color"] == BRANCH_STYLE["positional"]["color"]
    assert pb.CLASS_STYLE["semantic"]["color"] == BRANCH_STYLE["semantic"]["color"]
    saved = []
    monkeypatch.setattr(pb.style, "save_figure", lambda fig, out: saved.append(fig) or [])
    fr = pd.DataFrame([{"student": "tied", "init_scale": 1.0, "d": 50, "omega": w, "alpha": a, "n": 8,
                        "n_semantic": 4, "semantic_fraction": 0.5, "semantic_se": 0.1}
                       for w in (0.1, 0.3) for a in (0.5, 1.0, 1.5)])
    pb.plot_basin_heatmap(fr, tmp_path / "f", lines={"alpha_c": ([0.1, 0.3], [1.0, 1.2])})
    fig = saved[-1]
    assert fig.axes[0].get_legend() is None and fig.legends  # the legend lives outside the axes
