"""What the reproduction calls: the Bayes-optimal curve, its thresholds, GAMP at finite d and the figures (it draws,
so it lives with the reproduction, above the physics in theory/bayes/).

:func:`bayes_section` is cheap in quick mode (measured: 10-13 s on one shared core for 100 alphas) because it
computes only the Bayes-optimal side (state evolution, thresholds, a few small GAMP runs) and draws the ERM side
from what the caller already has (``transition_result`` from ``transition``, whose curves hold both branches, and
``diagram`` from ``phase_diagram``).  Without them and with quick=False it solves them itself (precision 'fast';
minutes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnphase.setting import Setting, check_alpha
from attnphase.theory.bayes.solve import bayes_curve, check_bayes_setting
from attnphase.theory.bayes.thresholds import thresholds

QUICK_AMP = {"d": 800, "seeds": (0, 1), "alphas": (0.12, 0.3, 0.8)}
FULL_AMP = {"d": 3000, "seeds": (0, 1, 2, 3), "alphas": (0.12, 0.3, 0.4, 0.8)}


def _sem(v: np.ndarray) -> float | None:
    return float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else None


def amp_rows(setting: Setting, d: int, alphas: Sequence[float], seeds: Sequence[int], delta: float = 0.0,
             n_test: int = 1000, init: str = "random") -> list[dict[str, Any]]:
    """Mean and standard error over seeds of GAMP's overlap and test error per alpha."""
    from attnphase.theory.bayes.amp import run_amp

    rows = []
    for a in alphas:
        runs = [run_amp(setting, d, a, seed=s, delta=delta, n_test=n_test, init=init) for s in seeds]
        m = np.array([r.overlap for r in runs])
        te = np.array([r.test_error for r in runs])
        # Calibrated: the measured error over the baseline's predictor measured on the same test set, times the
        # baseline's asymptotic value (removes the test set's sampling noise and the teacher norm's O(1/sqrt d)).
        cal = np.array([r.test_error / r.test_error_linear_measured * r.test_error_linear for r in runs])
        rows.append({"kind": "amp", "alpha": float(a), "d": int(d), "L": setting.L, "omega": setting.omega,
                     "delta": delta, "init": init, "seeds": list(seeds), "overlap_mean": float(m.mean()),
                     "overlap_sem": _sem(m), "test_error_mean": float(te.mean()), "test_error_sem": _sem(te),
                     "test_error_calibrated_mean": float(cal.mean()), "test_error_calibrated_sem": _sem(cal),
                     "converged": int(sum(r.converged for r in runs)), "iterations": [r.iterations for r in runs]})
    return rows


def bayes_section(setting: Setting, alphas: Sequence[float], out_dir: str | Path, *, quick: bool = True,
                  delta: float = 0.0, transition_result: Any = None, diagram: Sequence[Any] | None = None,
                  curves: Any = None,
                  amp: bool = True, amp_d: int | None = None, amp_seeds: Sequence[int] | None = None,
                  amp_alphas: Sequence[float] | None = None) -> tuple[list[dict[str, Any]], list[Path]]:
    """Records (rows of kind 'bayes', one 'bayes_thresholds', rows of kind 'amp') and the figure paths
    (bayes_comparison.png/.pdf, and bayes_phase_diagram.png/.pdf when ``diagram`` is given or quick is False).

    ``curves``: ERM branch curves ({branch: [FixedPoint]}) to draw; default: the transition's own curves (which
    cover the alphas around alpha_c only)."""
    from attnphase.plots.bayes import plot_bayes_comparison, plot_bayes_phase_diagram

    setting = check_bayes_setting(setting)
    alphas = [check_alpha(a) for a in alphas]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pts = bayes_curve(setting, alphas, delta)
    th = thresholds(setting.L, setting.omega, delta)
    records: list[dict[str, Any]] = [{"kind": "bayes", **p.to_dict()} for p in pts]
    records.append({"kind": "bayes_thresholds", **th.to_dict()})
    if transition_result is None and not quick:
        from attnphase.theory.transition.driver import transition

        transition_result = transition(setting, alpha_max=max(2.0, max(alphas)), precision="fast")
    rows: list[dict[str, Any]] = []
    if amp and setting.omega < 1.0:
        spec = QUICK_AMP if quick else FULL_AMP
        rows = amp_rows(setting, amp_d or spec["d"], amp_alphas or spec["alphas"], amp_seeds or spec["seeds"],
                        delta)
        records.extend(rows)
    curves = curves or getattr(transition_result, "curves", None) or None
    glob = None
    if curves:
        from attnphase.theory.state_evolution.results import global_minimum_curve

        glob = global_minimum_curve(curves)
    paths = plot_bayes_comparison(pts, out / "bayes_comparison", thresholds=th, curves=curves, global_minimum=glob,
                                  transition=transition_result, amp=rows)
    if diagram is None and not quick:
        from attnphase.theory.transition.diagram import phase_diagram

        diagram = phase_diagram(setting, [0.0, 0.1, 0.2, 0.3, 0.4], precision="fast", progress=False)
    if diagram is not None:
        ths = [thresholds(setting.L, t.omega, delta) for t in diagram]
        paths += plot_bayes_phase_diagram(ths, out / "bayes_phase_diagram", transitions=diagram)
    return records, paths
