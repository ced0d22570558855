"""The tied-vs-untied figure from synthetic records: artists at exactly the records' values, bad records refused,
and the CLI wiring."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnphase.cli import main
from attnphase.plots import untied as plots_untied

ALPHAS = (0.5, 1.0, 1.5)


def _theory_value(student: str, branch: str, q: str, a: float) -> float:
    base = {"test_error": 0.004, "m": 0.8, "theta": 0.6}[q]
    return base + 0.01 * a * (1 if branch == "positional" else -1) + (0.001 if student == "untied" else 0.0)


def _run_value(student: str, init: str, q: str, a: float, seed: int) -> float:
    return _theory_value(student, "semantic" if init == "semantic" else "positional", q, a) + 0.002 * seed


def synthetic_records() -> dict:
    theory, runs = [], []
    for a in ALPHAS:
        for student in ("tied", "untied"):
            for branch in ("positional", "semantic"):
                # The tied semantic branch is absent at the smallest alpha: no line point there.
                status = "collapsed" if (student, branch, a) == ("tied", "semantic", 0.5) else "ok"
                theory.append({"student": student, "branch": branch, "alpha": a, "status": status,
                               **{q: _theory_value(student, branch, q, a) for q in plots_untied.QUANTITIES}})
            for init in ("positional", "semantic", "random"):
                for seed in (0, 1, 2):
                    runs.append({"student": student, "init": init, "alpha": a, "seed": seed, "d": 100,
                                 **{q: _run_value(student, init, q, a, seed) for q in plots_untied.QUANTITIES}})
    return {"setting": {"omega": 0.3}, "d": 100, "theory": theory, "runs": runs}


def test_artists_sit_at_the_records_values(tmp_path, monkeypatch):
    from conftest import capture_figures

    figs = capture_figures(monkeypatch)
    paths = plots_untied.plot_untied(synthetic_records(), tmp_path / "untied", omega=0.3, d=100)
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    axes = figs[0].axes
    assert len(axes) == 3
    for ax, q in zip(axes, plots_untied.QUANTITIES, strict=True):
        lines = {ln.get_gid(): ln for ln in ax.get_lines() if ln.get_gid()}
        for student in ("tied", "untied"):
            assert lines[f"theory-{student}-positional-{q}"].get_linestyle() == ("-" if student == "tied" else "--")
            for branch in ("positional", "semantic"):
                ln = lines[f"theory-{student}-{branch}-{q}"]
                alphas = [a for a in ALPHAS if (student, branch, a) != ("tied", "semantic", 0.5)]
                np.testing.assert_allclose(ln.get_xdata(), alphas)
                np.testing.assert_allclose(ln.get_ydata(), [_theory_value(student, branch, q, a) for a in alphas])
            for init in ("positional", "semantic", "random"):
                cont = next(c for c in ax.containers if c.get_label() == f"{student} sim., {init} start")
                x, y = cont.lines[0].get_xdata(), cont.lines[0].get_ydata()
                np.testing.assert_allclose(x, np.array(ALPHAS) + plots_untied.dodge(student, init))
                # Seeds add 0, 0.002, 0.004: mean +0.002, sem = 0.002 (std 0.002 / sqrt 3 * sqrt 3).
                np.testing.assert_allclose(y, [_run_value(student, init, q, a, 0) + 0.002 for a in ALPHAS])
                seg = cont.lines[2][0].get_segments()
                np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in seg], [2 * 0.002 / np.sqrt(3)] * 3)
    assert "$\\omega = 0.3$" in figs[0].get_suptitle()
    # The dodge separates all six series.
    offsets = {plots_untied.dodge(s, i) for s in ("tied", "untied") for i in ("positional", "semantic", "random")}
    assert len(offsets) == 6 and max(abs(o) for o in offsets) < 0.1


@pytest.mark.parametrize("records, match", [
    ({"theory": [], "runs": []}, "neither theory rows nor simulation runs"),
    ([1, 2], "must be a mapping"),
    ({"theory": [{"student": "shared", "branch": "positional", "alpha": 1.0}]}, "theory row 0"),
    ({"theory": [{"student": "tied", "branch": "free", "alpha": 1.0}]}, "theory row 0"),
    ({"runs": [{"student": "tied", "init": "random", "alpha": None}]}, "run 0"),
])
def test_bad_records_are_refused(tmp_path, records, match):
    with pytest.raises(ValueError, match=match):
        plots_untied.plot_untied(records, tmp_path / "x")
    assert not (tmp_path / "x.png").exists()


def test_cli_plot_untied(tmp_path, capsys):
    f = tmp_path / "untied.json"
    f.write_text(json.dumps(synthetic_records()))
    assert main(["plot", "untied", "--records", str(f), "--out", str(tmp_path / "fig")]) == 0
    assert (tmp_path / "fig.png").stat().st_size > 0
    assert main(["plot", "untied", "--out", str(tmp_path / "fig2")]) != 0
    assert "untied needs --records" in capsys.readouterr().err
