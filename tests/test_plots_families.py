"""Every figure family rendered from small synthetic inputs, checked as a reader would look at it (issue 31): the
global minimum jumps at alpha_c instead of sloping across it, markers sit inside the frame, labels sit off the
lines, legends keep off the data and write alpha_c in mathtext, interpolated curves say so."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import LINEAR, OMEGA, capture_figures, synthetic_curves
from matplotlib.lines import Line2D
from test_plots import synthetic_sim, synthetic_transition

from attnphase import plots
from attnphase.plots.bayes import plot_bayes_comparison, plot_bayes_phase_diagram
from attnphase.plots.global_line import INTERPOLATED_NOTE, global_path
from attnphase.plots.rank import plot_rank_test_error
from attnphase.plots.smooth import NOTE as SMOOTH_NOTE
from attnphase.theory.state_evolution.results import global_minimum_curve
from attnphase.theory.transition.records import TransitionResult


def _written(paths: list[Path]) -> None:
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert all(p.is_file() and p.stat().st_size > 1000 for p in paths)


def _jump_at(line: Line2D, a: float) -> float:
    """The size of the vertical step the line makes at alpha = a (fails unless the line has exactly two vertices
    there)."""
    x = np.asarray(line.get_xdata(), dtype=float)
    y = np.asarray(line.get_ydata(), dtype=float)
    at = np.flatnonzero(np.isclose(x, a))
    assert len(at) == 2, (a, x)
    assert np.all(np.diff(x) >= 0)
    return abs(float(y[at[1]] - y[at[0]]))


def _labels(fig) -> list[str]:  # noqa: ANN001 - a matplotlib Figure
    out = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    for ax in fig.axes:
        if ax.get_legend() is not None:
            out += [t.get_text() for t in ax.get_legend().get_texts()]
    return out


def _no_plain_alpha(fig) -> None:  # noqa: ANN001
    for label in _labels(fig):
        assert "alpha" not in label.replace(r"\alpha", ""), label


# ------------------------------------------------------------------------------------------ the global minimum


def test_global_path_jumps_at_alpha_c_between_grid_points() -> None:
    branches = {"positional": [(1.0, 3.0, 0.5), (1.5, 3.2, 0.7)], "semantic": [(1.0, 2.0, 0.6), (1.5, 1.5, 0.6)]}
    along = [("positional", 1.0, 3.0), ("semantic", 1.5, 1.5)]
    p = global_path(along, branches, alpha_c=1.3)
    assert p.x == pytest.approx((1.0, 1.3, 1.3, 1.5)) and p.switches == (1.3,) and not p.interpolated
    # each branch continued along its own (linear) curve to alpha_c: 3.0 + 0.6 * 0.2, 2.0 - 0.6 * 0.5
    assert p.y == pytest.approx((3.0, 3.12, 1.7, 1.5))
    # without alpha_c: the root of the interpolated train-loss difference (0.5 + 0.2 t = 0.6 -> t = 0.5)
    q = global_path(along, branches)
    assert q.switches == pytest.approx((1.25,)) and q.interpolated
    # alpha_c outside the switch's grid interval is not used
    assert global_path(along, branches, alpha_c=1.7).switches == pytest.approx((1.25,))


def test_rank2_global_minimum_jumps_at_alpha_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 31: the rank-1 global minimum was a slope from 1.25 to 1.5 across alpha_c
    theory = []
    for a in (1.0, 1.25, 1.5, 1.75):
        pos = {"rank": 1, "branch": "positional", "alpha": a, "status": "ok", "test_error": 0.0034,
               "train_loss": 0.0027 + 0.002 * (a - 1.25)}
        sem = {"rank": 1, "branch": "semantic", "alpha": a, "status": "ok", "test_error": 0.0023 - 0.001 * (a - 1.25),
               "train_loss": 0.0027 + 0.001 * (a - 1.25)}
        best = min((pos, sem), key=lambda r: r["train_loss"])
        theory += [pos, sem, {**best, "branch": "global", "of": best["branch"]}]
    records = {"theory": theory, "simulation": []}
    figs = capture_figures(monkeypatch)
    _written(plot_rank_test_error(records, tmp_path / "r", alpha_c={1: 1.3}))
    (line,) = [ln for ln in figs[-1].axes[0].get_lines() if ln.get_gid() == "global-r1"]
    assert _jump_at(line, 1.3) > 0.001  # from the positional 0.0034 down to the semantic ~0.00225
    assert INTERPOLATED_NOTE not in line.get_label()
    # alpha_c read from the records (JSON keys are strings); without it the legend says the switch is interpolated
    plot_rank_test_error({**records, "alpha_c": {"1": 1.3}}, tmp_path / "r2")
    (line,) = [ln for ln in figs[-1].axes[0].get_lines() if ln.get_gid() == "global-r1"]
    assert _jump_at(line, 1.3) > 0.001
    plot_rank_test_error(records, tmp_path / "r3")
    (line,) = [ln for ln in figs[-1].axes[0].get_lines() if ln.get_gid() == "global-r1"]
    assert INTERPOLATED_NOTE in line.get_label()
    assert _jump_at(line, 1.25) > 0.001  # train losses equal at 1.25 exactly: the crossing is the grid point


def test_bayes_comparison_global_minimum_jumps_at_alpha_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from attnphase.theory.transition.records import Critical

    curves = synthetic_curves(np.linspace(0.1, 2.0, 11))
    gm = global_minimum_curve(curves)
    i = next(k for k in range(1, len(gm)) if gm[k].branch != gm[k - 1].branch)
    alpha_c = gm[i - 1].alpha + 0.4 * (gm[i].alpha - gm[i - 1].alpha)
    tr = SimpleNamespace(critical={"alpha_c": Critical("alpha_c", alpha_c, alpha_c - 0.01, alpha_c + 0.01,
                                                       "crossing", "synthetic")})
    pts = [SimpleNamespace(alpha=a, test_error=max(LINEAR * (1 - a), 0.0), test_error_amp=max(LINEAR * (1 - a), 0.0),
                           test_error_linear=LINEAR, omega=OMEGA, L=2) for a in np.linspace(0.1, 2.0, 20)]
    figs = capture_figures(monkeypatch)
    _written(plot_bayes_comparison(pts, tmp_path / "b", curves=curves, global_minimum=gm, transition=tr))
    ax = figs[-1].axes[0]
    (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == "global-minimum"]
    assert _jump_at(line, alpha_c) > 1e-4
    assert ax.get_ylim()[0] < 0  # a zero Bayes error is drawn inside the frame, not on it
    _no_plain_alpha(figs[-1])


def test_test_error_and_overlaps_jump_at_alpha_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    curves = synthetic_curves()
    gm = global_minimum_curve(curves)
    figs = capture_figures(monkeypatch)
    plots.plot_overlaps(curves, tmp_path / "ov", alpha_c=1.01, sigma=0.5, global_minimum=gm)
    for ax in figs[-1].axes[:2]:
        (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == "global-minimum"]
        assert _jump_at(line, 1.01) > 0.1
        # theory lines: smooth between the computed points (more vertices than points), which are marked
        for branch in ("positional", "semantic"):
            (pts,) = [ln for ln in ax.get_lines() if ln.get_gid() == f"theory-points-{branch}"]
            (smooth,) = [ln for ln in ax.get_lines() if ln.get_gid() == f"theory-{branch}"]
            assert len(smooth.get_xdata()) > 5 * len(pts.get_xdata())
    assert SMOOTH_NOTE in _labels(figs[-1])
    _no_plain_alpha(figs[-1])


# ------------------------------------------------------------------------------------------- phase diagram


def _inside(ax, line: Line2D) -> None:  # noqa: ANN001
    """Every vertex of a marker line lies inside the frame, with room for half the marker."""
    xy = line.get_transform().transform(np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float))
    box = ax.get_window_extent()
    r = line.get_markersize() / 72 * ax.figure.dpi / 2
    assert np.all(xy[:, 0] - r >= box.x0 - 0.5) and np.all(xy[:, 0] + r <= box.x1 + 0.5), line.get_label()
    assert np.all(xy[:, 1] - r >= box.y0 - 0.5) and np.all(xy[:, 1] + r <= box.y1 + 0.5), line.get_label()


def _diagram() -> list[TransitionResult]:
    """alpha_l leaves the range between omega 0.3 and 0.4 (the global minimum stays above the baseline there);
    alpha_c above the range at 0.45; a positional spinodal line through the semantic region."""
    curves = synthetic_curves()
    out = []
    for w in (0.05, 0.1, 0.2, 0.3, 0.4, 0.45):
        ac = 0.6 + 2.5 * w if w < 0.45 else None
        al = 0.8 + 2.5 * w if w <= 0.3 else None
        t = synthetic_transition(w, ac, al, kind="crossing" if ac else "above range", sem=0.5 + 0.5 * w,
                                 curves=curves)
        if al is None:  # the record's own curves say the global minimum is above its baseline at alpha = 2
            t = TransitionResult(omega=w, critical=dict(t.critical), test_error_linear=0.0, alpha_range=(0.05, 2.0),
                                 curves=curves)
        pos = {"alpha_pos_vanishes": 1.6 + 0.5 * w} if w <= 0.2 else {}
        if pos:
            from test_plots import _crit

            t.critical["alpha_pos_vanishes"] = _crit("alpha_pos_vanishes", pos["alpha_pos_vanishes"], 0.01, "fold")
        out.append(t)
    return out


def test_phase_diagram_reads_as_drawn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figs = capture_figures(monkeypatch)
    _written(plots.plot_phase_diagram(_diagram(), tmp_path / "pd", alpha_max=2.0))
    fig = figs[-1]
    ax = fig.axes[0]
    fig.canvas.draw()
    markers = [ln for ln in ax.get_lines() if ln.get_marker() not in (None, "None", "") and len(ln.get_xdata())]
    assert {r"$\alpha_c > 2$", r"$\alpha_l > 2$"} <= {ln.get_label() for ln in markers}
    (far_l,) = [ln for ln in markers if ln.get_label() == r"$\alpha_l > 2$"]
    assert list(far_l.get_ydata()) == [0.4, 0.45]
    for ln in markers:
        _inside(ax, ln)
    # the hatched region runs on to the edge at omega 0.4 instead of stopping flat at 0.3
    (hatch,) = [c for c in ax.collections if c.get_label() == "attention beats linear baseline"]
    verts = np.concatenate([p.vertices for p in hatch.get_paths()])
    assert np.any(np.isclose(verts[:, 1], 0.4) & np.isclose(verts[:, 0], 2.0))
    assert verts[:, 1].max() == pytest.approx(0.4)
    # region labels keep off every drawn line (alpha_c, alpha_l, spinodals): at least 3 % of the axis width
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 1]
    for text in ax.texts:
        if text.get_text() not in ("positional", "semantic"):
            continue
        tx, ty = text.get_position()
        for ln in lines:
            x = np.asarray(ln.get_xdata(), float)
            y = np.asarray(ln.get_ydata(), float)
            if ln.get_transform() != ax.transData or not (y.min() <= ty <= y.max()):
                continue
            order = np.argsort(y)
            assert abs(tx - np.interp(ty, y[order], x[order])) > 0.03 * 2.0, (text.get_text(), ln.get_label())
    _no_plain_alpha(fig)


# -------------------------------------------------------------------------------------------- finite size


def test_finite_size_legend_off_the_data_and_lines_off_the_frame(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    curves = synthetic_curves()
    theory = {b: next(p for p in pts if math.isclose(p.alpha, 1.5)) for b, pts in curves.items()}
    sim = synthetic_sim(ds=(50, 100, 200), alphas=(1.5,))
    figs = capture_figures(monkeypatch)
    baseline = theory["semantic"].test_error + 1e-6  # nearly coincident, as at alpha_l
    _written(plots.plot_finite_size(sim, tmp_path / "fs", alpha=1.5, omega=OMEGA, theory=theory,
                                    test_error_linear=baseline))
    fig = figs[-1]
    ax = fig.axes[0]
    assert ax.get_legend() is None and fig.legends  # below the axes, not over the d = 200 whisker
    lo, hi = ax.get_ylim()
    for ln in ax.get_lines():
        y = np.asarray(ln.get_ydata(), float)
        if len(y) == 2 and y[0] == y[1]:  # the horizontal lines
            assert lo + 0.02 * (hi - lo) < y[0] < hi - 0.02 * (hi - lo), ln.get_label()
    labels = _labels(fig)
    assert any(f"{theory['semantic'].test_error:.4g}" in s for s in labels)
    assert any(f"{baseline:.4g}" in s for s in labels)


# ------------------------------------------------------------------------------------------------ basins


def _fractions() -> pd.DataFrame:
    return pd.DataFrame([{"student": "tied", "init_scale": 1.0, "d": 50, "omega": w, "alpha": a, "n": 8,
                          "n_semantic": 4, "semantic_fraction": 0.5, "semantic_se": 0.1}
                         for w in (0.1, 0.2, 0.3, 0.4) for a in (0.5, 1.0, 1.5)])


def test_basin_heatmap_lines_smooth_through_the_theory_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from attnphase.plots import basins as pb

    om = [0.05, 0.1, 0.2, 0.3, 0.4, 0.45]
    ac = [0.67, 0.75, 0.94, 1.25, 1.77, None]
    figs = capture_figures(monkeypatch)
    _written(pb.plot_basin_heatmap(_fractions(), tmp_path / "h", lines={"alpha_c": (om, ac),
                                                                        "semantic spinodal": (om[:2], [0.53, 0.56])}))
    fig = figs[-1]
    ax = fig.axes[0]
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == r"$\alpha_c$"]
    x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
    assert len(x) > 5 * 5  # interpolated between the five computed points
    for w, a in zip(om[:5], ac[:5], strict=True):  # through every computed point
        assert np.interp(w, y, x) == pytest.approx(a, abs=1e-12)
    assert np.all(np.diff(x) > 0)  # monotone data stays monotone (no overshoot)
    labels = _labels(fig)
    assert any("interpolat" in s or "monotone cubic" in s for s in labels)
    _no_plain_alpha(fig)
    # two points: drawn as given, nothing claimed
    (spin,) = [ln for ln in ax.get_lines() if ln.get_label() == "semantic spinodal"]
    assert list(spin.get_xdata()) == [0.53, 0.56]


def test_trajectories_over_sigma2_with_a_readable_lbfgs_phase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from attnphase.plots import basins as pb

    rows = [{"step": s, "m": 0.1, "theta": 0.02, "train_loss": 0.01 / (1 + s)} for s in range(0, 1000, 10)]
    rows += [{"step": s, "m": 0.2, "theta": 0.02, "train_loss": 0.001} for s in range(1000, 1050, 10)]
    figs = capture_figures(monkeypatch)
    _written(pb.plot_trajectories([{"basin": "positional", "rows": rows}], tmp_path / "t", sigma=0.5, warmup=1000,
                                  fixed_points={"positional": {"m": 0.25, "theta": 0.0, "train_loss": 0.003}}))
    fig = figs[-1]
    ax_m = fig.axes[0]
    traj = next(ln for ln in ax_m.get_lines() if ln.get_label() == "ends positional")
    assert np.asarray(traj.get_ydata(), float)[-1] == pytest.approx(0.2 / 0.25)  # over sigma^2, as in figure (c)
    theory = next(ln for ln in ax_m.get_lines() if ln.get_label() == "theory positional")
    assert theory.get_ydata()[0] == pytest.approx(0.25 / 0.25)
    assert "sigma" in ax_m.get_ylabel()
    # the 50 L-BFGS evaluations after 1000 GD steps take a visible share of the axis, not a vertical spike
    fig.canvas.draw()
    to_px = ax_m.transData.transform
    gd = to_px((1000.0, 0))[0] - to_px((1.0, 0))[0]
    lb = to_px((1050.0, 0))[0] - to_px((1000.0, 0))[0]
    assert lb > 0.3 * gd
    with pytest.raises(ValueError, match="warmup"):
        pb.plot_trajectories([{"basin": "positional", "rows": rows}], tmp_path / "t2", warmup=0)


def test_basin_fraction_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from attnphase.plots import basins as pb

    figs = capture_figures(monkeypatch)
    _written(pb.plot_fraction_vs_alpha(_fractions(), tmp_path / "g", omega=0.3, alpha_c=1.25,
                                       spinodals={"semantic spinodal": 0.72}))
    _no_plain_alpha(figs[-1])


# ------------------------------------------------------------------------------------- the other families


def test_untied_and_histogram_families_render(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from attnphase.experiments.histogram.sweep import LABELS, SweepRow
    from attnphase.plots import histogram as ph
    from attnphase.plots import untied as pu

    theory = [{"student": s, "branch": b, "alpha": a, "status": "ok", "test_error": 0.003, "m": 0.2, "theta": 0.1}
              for s in ("tied", "untied") for b in ("positional", "semantic") for a in (0.5, 1.0, 1.5)]
    runs = [{"student": "tied", "init": "positional", "alpha": a, "seed": k, "test_error": 0.003, "m": 0.2,
             "theta": 0.1} for a in (0.5, 1.0) for k in (0, 1)]
    _written(pu.plot_untied({"theory": theory, "runs": runs}, tmp_path / "u", omega=OMEGA, d=100))
    rows = [SweepRow(n_train=n, runs=4, counts={lab: 1 for lab in LABELS}, fractions={lab: 0.25 for lab in LABELS},
                     intervals={lab: (0.05, 0.7) for lab in LABELS}, mean_accuracy=0.9, sem_accuracy=0.01,
                     mean_accuracy_by={lab: 0.9 for lab in LABELS}, mean_score=0.0) for n in (250, 1000, 2000)]
    _written(ph.plot_sweep(rows, tmp_path / "s"))
    run = SimpleNamespace(variant="positional", curves=SimpleNamespace(train_loss=[1.0, 0.5, 0.2], epochs=[1, 3],
                                                                       val_accuracy=[0.5, 0.8]))
    _written(ph.plot_curves([run], tmp_path / "c"))



def test_bayes_phase_diagram_marks_erm_values_beyond_the_range(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    crit = lambda v: SimpleNamespace(found=True, value=v, lo=v, hi=v)  # noqa: E731
    ths = [SimpleNamespace(omega=w, L=2, critical={"alpha_weak": crit(0.17), "alpha_it": crit(0.5),
                                                   "alpha_alg": crit(0.5)}) for w in (0.0, 0.1, 0.2, 0.3, 0.4, 0.45)]
    figs = capture_figures(monkeypatch)
    _written(plot_bayes_phase_diagram(ths, tmp_path / "bpd", transitions=_diagram()))
    ax = figs[-1].axes[0]
    figs[-1].canvas.draw()
    far = {ln.get_label(): ln for ln in ax.get_lines() if "> 2" in ln.get_label()}
    assert set(far) == {r"ERM $\alpha_c > 2$", r"ERM $\alpha_l > 2$"}
    assert list(far[r"ERM $\alpha_c > 2$"].get_ydata()) == [0.45]
    assert list(far[r"ERM $\alpha_l > 2$"].get_ydata()) == [0.4, 0.45]
    for ln in far.values():
        _inside(ax, ln)
    for ln in ax.get_lines():  # the Bayes thresholds' markers at omega = 0 too
        if ln.get_marker() not in (None, "None", "") and len(ln.get_xdata()):
            _inside(ax, ln)
