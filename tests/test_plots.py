"""Figures from synthetic inputs: each writes a non-empty PNG and PDF; the curve helpers find crossings."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from attnphase import plots
from attnphase.theory.results import FixedPoint, HatOverlaps, Overlaps

OMEGA = 0.3
LINEAR = 0.00197


def _fp(alpha: float, branch: str, *, train_loss: float, test_error: float, m: float, theta: float,
        status: str = "ok", converged: bool = True, err: float = 2e-5) -> FixedPoint:
    return FixedPoint(
        alpha=alpha, omega=OMEGA, branch=branch,
        overlaps=Overlaps(q=0.1 + 0.2 * alpha, m=m, V=15.0, theta=theta),
        hats=HatOverlaps(qhat=0.0, mhat=0.0, Vhat=0.0, thetahat=0.0), train_loss=train_loss,
        test_error=test_error,
        errors={"train_loss": err, "test_error": err, "m": 1e-3, "theta": 1e-3}, converged=converged,
        iterations=10, residual=1e-8, status=status,
    )


def synthetic_curves(alphas: np.ndarray | None = None) -> dict[str, list[FixedPoint]]:
    """Two branches whose train losses cross at alpha = 1 and whose semantic test error falls below LINEAR
    at alpha = 1.25; the semantic branch has a spinodal at alpha = 0.35 and one collapsed point."""
    alphas = np.linspace(0.1, 2.0, 20) if alphas is None else alphas
    pos = [_fp(a, "positional", train_loss=0.003 - 0.0004 * a, test_error=0.0030 - 0.0002 * a,
               m=0.2 + 0.05 * a, theta=0.0) for a in alphas]
    sem = [_fp(a, "semantic", train_loss=0.003 - 0.0004 * a + 0.0006 * (1 - a),
               test_error=LINEAR + 0.002 * (1.25 - a), m=0.0, theta=0.1 + 0.1 * a)
           for a in alphas if a > 0.35]
    if len(sem) > 3:
        sem[3] = _fp(sem[3].alpha, "semantic", train_loss=0.0, test_error=0.0, m=0.0, theta=0.0,
                     status="collapsed to positional")
    return {"positional": pos, "semantic": sem}


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


def synthetic_transitions(
        omegas: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.4, 0.45)) -> list[SimpleNamespace]:
    out = []
    for w in omegas:
        ac = 0.2 + 2.5 * w
        al = ac + 0.3 if w < 0.4 else None  # never beats the baseline at the largest omegas
        out.append(SimpleNamespace(
            omega=w, alpha_c=ac, alpha_c_bracket=(ac - 0.03, ac + 0.03), alpha_l=al,
            alpha_l_bracket=None if al is None else (al - 0.05, al + 0.05),
            test_error_linear=LINEAR * (1 - w) ** 2,
            alpha_sem_appears=0.6 * ac, alpha_pos_vanishes=None, reasons={}, curves={},
        ))
    return out


def _check(paths: list[Path]) -> None:
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert paths[0].stem == paths[1].stem
    for p in paths:
        assert p.is_file() and p.stat().st_size > 1000, p
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert paths[1].read_bytes()[:5] == b"%PDF-"


def test_global_minimum_picks_lower_train_loss() -> None:
    gm = plots.global_minimum(synthetic_curves())
    branches = {round(p.alpha, 6): b for b, p in gm}
    assert branches[round(0.1, 6)] == "positional"  # semantic does not exist there
    assert branches[0.5] == "positional"
    assert branches[2.0] == "semantic"
    # the collapsed semantic point is never chosen
    assert all(p.status == "ok" for _, p in gm)


def test_crossings_interpolate_curves() -> None:
    alpha_c, alpha_l = plots.crossings(synthetic_curves(), LINEAR)
    assert alpha_c == pytest.approx(1.0, abs=1e-9)
    assert alpha_l == pytest.approx(1.25, abs=1e-9)
    assert plots.crossings({"positional": synthetic_curves()["positional"]}, LINEAR) == (None, None)


def test_save_figure_suffixes(tmp_path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure()
    fig.subplots().plot([0, 1], [0, 1])
    for name in ("a.png", "a.pdf", "a", "fig.omega0.3"):
        paths = plots.save_figure(fig, tmp_path / "sub" / name)
        _check(paths)
    assert (tmp_path / "sub" / "fig.omega0.3.png").is_file()


def test_test_error_figure(tmp_path: Path) -> None:
    paths = plots.plot_test_error(synthetic_curves(), tmp_path / "test_error.png", test_error_linear=LINEAR,
                                  simulation=synthetic_sim(ds=(50, 100)), alpha_c=1.0, alpha_l=1.25,
                                  alpha_c_bracket=(0.95, 1.05), omega=OMEGA)
    _check(paths)


def test_test_error_figure_theory_only(tmp_path: Path) -> None:
    _check(plots.plot_test_error(synthetic_curves(), tmp_path / "te"))


def test_loss_difference_figure(tmp_path: Path) -> None:
    sim = synthetic_sim(optimizers=("lbfgs", "gd"))
    _check(plots.plot_loss_difference(synthetic_curves(), tmp_path / "ld.pdf", simulation=sim, alpha_c=1.0,
                                      omega=OMEGA))


def test_overlaps_figure(tmp_path: Path) -> None:
    _check(plots.plot_overlaps(synthetic_curves(), tmp_path / "ov", simulation=synthetic_sim(), alpha_c=1.0,
                               omega=OMEGA, sigma=0.5))


def test_phase_diagram_figure(tmp_path: Path) -> None:
    _check(plots.plot_phase_diagram(synthetic_transitions(), tmp_path / "pd", alpha_max=2.0))


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

    from attnphase.sweep import Grid, run_sweep

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


def test_cli_plot_test_error_real_theory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Real theory at precision fast on two alphas, with simulation points from a store."""
    from attnphase.cli import main

    store = _store(tmp_path)
    rc = main(["plot", "test-error", "--alphas", "1.0,1.5", "--precision", "fast", "--store", str(store),
               "--no-progress", "--out", str(tmp_path / "te")])
    assert rc == 0
    _check([Path(p) for p in capsys.readouterr().out.split()])


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


def test_phase_boundary_falls_back_to_the_semantic_spinodal(tmp_path: Path) -> None:
    """Semantic lower wherever both branches exist: no crossing, the switch is at the spinodal."""
    alphas = np.linspace(0.1, 2.0, 8)
    pos = [_fp(a, "positional", train_loss=0.01, test_error=0.003, m=0.2, theta=0.0) for a in alphas]
    sem = [_fp(a, "semantic", train_loss=0.005, test_error=0.002, m=0.0, theta=0.2)
           for a in alphas if a > 0.6]
    tr = SimpleNamespace(omega=0.05, alpha_c=None, alpha_c_bracket=None, alpha_l=0.8, alpha_l_bracket=None,
                         alpha_sem_appears=0.6, alpha_sem_appears_bracket=(0.58, 0.62),
                         alpha_pos_vanishes=None, curves={"positional": pos, "semantic": sem})
    assert plots.phase_boundary(tr) == (0.6, (0.58, 0.62), "spinodal")
    crossing = synthetic_transitions((0.3,))[0]
    assert plots.phase_boundary(crossing) == (crossing.alpha_c, crossing.alpha_c_bracket, "crossing")
    tr_none = SimpleNamespace(**{**tr.__dict__, "alpha_sem_appears": None})
    assert plots.phase_boundary(tr_none) == (None, None, "")
    _check(plots.plot_phase_diagram([tr, *synthetic_transitions((0.1, 0.3))], tmp_path / "pd"))
