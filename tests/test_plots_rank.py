"""The rank-2 figure from synthetic records: artists at exactly the records' values, and the CLI wiring."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnphase.cli import main
from attnphase.plots import rank as plots_rank

ALPHAS = (0.5, 1.0, 1.5)


def synthetic_records() -> dict:
    theory, sims = [], []
    for rank in (1, 2):
        for a in ALPHAS:
            pos = {"rank": rank, "branch": "positional", "alpha": a, "status": "ok", "test_error": 0.004 - 0.001 * a,
                   "train_loss": 0.003}
            sem = {"rank": rank, "branch": "semantic", "alpha": a, "status": "ok" if a > 0.7 else "collapsed",
                   "test_error": 0.005 - 0.002 * a, "train_loss": 0.003 - 0.001 * a}
            theory += [pos, sem]
            best = min((p for p in (pos, sem) if p["status"] == "ok"), key=lambda p: p["train_loss"])
            theory.append({**best, "branch": "global", "of": best["branch"]})
            for seed in (0, 1):
                # Per seed the positional run has the lower training loss at alpha 0.5 only.
                for init, tl, te in (("positional", 0.0025 if a == 0.5 else 0.004, 0.01 * rank + seed * 1e-3),
                                     ("semantic", 0.003, 0.02 * rank + seed * 2e-3)):
                    sims.append({"rank": rank, "alpha": a, "init": init, "seed": seed, "d": 100,
                                 "train_loss": tl, "test_error": te})
    return {"setting": {"omega": 0.3}, "d": 100, "theory": theory, "simulation": sims, "test_error_linear": 0.002}


def test_artists_sit_at_the_records_values(tmp_path, monkeypatch):
    from conftest import capture_figures

    figs = capture_figures(monkeypatch)
    rec = synthetic_records()
    paths = plots_rank.plot_rank_test_error(rec, tmp_path / "rank2", omega=0.3, d=100, test_error_linear=0.002)
    assert [p.suffix for p in paths] == [".png", ".pdf"] and all(p.stat().st_size > 0 for p in paths)
    ax = figs[0].axes[0]
    lines = {ln.get_gid(): ln for ln in ax.get_lines() if ln.get_gid()}
    # The semantic curve skips the collapsed point; the global minimum follows the records' own choice.
    np.testing.assert_allclose(lines["semantic-r1"].get_xdata(), [1.0, 1.5])
    np.testing.assert_allclose(lines["semantic-r2"].get_ydata(), [0.005 - 0.002, 0.005 - 0.003])
    # the semantic branch has no point at 0.5: the switch is a vertical jump at its first point, 1.0
    np.testing.assert_allclose(lines["global-r1"].get_xdata(), [0.5, 1.0, 1.0, 1.5])
    np.testing.assert_allclose(lines["global-r1"].get_ydata(), [0.0035, 0.003, 0.003, 0.002])
    assert lines["linear"].get_ydata()[0] == pytest.approx(0.002)
    # Simulation: per seed the lower-training-loss start, then mean and sem over the two seeds.
    for rank in (1, 2):
        cont = next(c for c in ax.containers if c.get_label() == f"rank {rank} simulation")
        x, y = cont.lines[0].get_xdata(), cont.lines[0].get_ydata()
        np.testing.assert_allclose(x, ALPHAS)
        pos, sem = 0.01 * rank + 0.5e-3, 0.02 * rank + 1e-3
        np.testing.assert_allclose(y, [pos, sem, sem])
        seg = cont.lines[2][0].get_segments()
        np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in seg], [1e-3, 2e-3, 2e-3])  # 2 sem = std*sqrt(2)
    assert "$\\omega = 0.3$" in ax.get_title()


def test_empty_records_are_refused(tmp_path):
    with pytest.raises(ValueError, match="neither theory nor simulation"):
        plots_rank.plot_rank_test_error({"theory": [], "simulation": []}, tmp_path / "x")


def test_cli_plot_rank2(tmp_path, capsys):
    f = tmp_path / "rank2.json"
    f.write_text(json.dumps(synthetic_records()))
    assert main(["plot", "rank2", "--records", str(f), "--out", str(tmp_path / "fig")]) == 0
    assert (tmp_path / "fig.png").exists() and "fig.pdf" in capsys.readouterr().out
    assert main(["plot", "rank2", "--out", str(tmp_path / "fig2")]) == 2
    assert "needs --records" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["plot", "rank2", "--records", str(bad), "--out", str(tmp_path / "fig3")]) == 2
    assert "not JSON" in capsys.readouterr().err
