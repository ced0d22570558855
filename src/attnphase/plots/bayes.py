"""The Bayes-optimal limit against the attention layer (issue 19): test error vs alpha, and the phase diagram in omega.

The functions draw records computed elsewhere (:mod:`attnphase.theory.bayes`, ``solve_curve`` / ``transition`` /
``phase_diagram``) and compute no physics.  Style and saving by :mod:`attnphase.plots.style` (PNG + PDF, survives
grey-scale printing: every curve differs by line style or marker as well as colour).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnphase.errors import InputError
from attnphase.plots import style
from attnphase.plots.figures import never_beats_linear
from attnphase.plots.global_line import INTERPOLATED_NOTE, global_path
from attnphase.plots.style import (
    ALPHA_C_STYLE,
    ALPHA_L_STYLE,
    ALPHA_LABEL,
    BRANCH_STYLE,
    GLOBAL_STYLE,
    LINEAR_STYLE,
    legend_below,
    new_figure,
    with_style,
)

__all__ = ["plot_bayes_comparison", "plot_bayes_phase_diagram"]

_BO_STYLE: dict[str, Any] = {"color": "black", "linestyle": "-", "linewidth": 1.8}
_AMP_SE_STYLE: dict[str, Any] = {"color": "#6a3d9a", "linestyle": (0, (3, 1.5)), "linewidth": 1.3}
_AMP_STYLE: dict[str, Any] = {"color": "#6a3d9a", "marker": "D", "markersize": 4.5, "mfc": "white", "linestyle": "none",
                              "capsize": 2.0, "elinewidth": 0.8}
_THRESH_STYLE: dict[str, dict[str, Any]] = {
    "alpha_weak": {"color": "#e08214", "linestyle": (0, (1, 1)), "linewidth": 1.1},
    "alpha_it": {"color": "#b35806", "linestyle": "-", "linewidth": 0.9},
    "alpha_alg": {"color": "#6a3d9a", "linestyle": (0, (5, 1, 1, 1)), "linewidth": 0.9},
}
_THRESH_LABEL = {"alpha_weak": r"$\alpha_{\rm weak}$ (Bayes)", "alpha_it": r"$\alpha_{\rm IT}$ (Bayes, perfect)",
                 "alpha_alg": r"$\alpha_{\rm alg}$ (GAMP)"}


def _finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _crit(thresholds: Any, name: str) -> Any:
    crit = getattr(thresholds, "critical", thresholds)
    return crit.get(name) if isinstance(crit, Mapping) else None


def _threshold_lines(ax: Any, thresholds: Any) -> None:
    drawn: list[float] = []
    for name in ("alpha_weak", "alpha_it", "alpha_alg"):
        c = _crit(thresholds, name)
        if c is None or not c.found:
            continue
        if name == "alpha_alg" and any(abs(c.value - v) < 1e-6 for v in drawn):
            continue  # equal to alpha_it: no hard phase, one line
        ax.axvline(c.value, **_THRESH_STYLE[name], label=_THRESH_LABEL[name], zorder=2)
        drawn.append(c.value)


@with_style
def plot_bayes_comparison(bayes_points: Sequence[Any], out: str | Path, *, thresholds: Any = None,
                          curves: Mapping[str, Sequence[Any]] | None = None, global_minimum: Sequence[Any] | None = None,
                          transition: Any = None, amp: Sequence[Mapping[str, Any]] | None = None,
                          test_error_linear: float | None = None, title: str | None = None) -> list[Path]:
    """Test error vs alpha: the Bayes-optimal error (and GAMP's state evolution from an uninformative start where
    it differs), the ERM branches and their global minimum, the linear baseline, GAMP at finite d (rows with alpha,
    test_error_mean, test_error_sem, d; drawn: test_error_calibrated_mean / _sem where present, i.e. the measured
    error over the baseline's predictor measured on the same test set, times the baseline's asymptotic value), alpha_c
    and alpha_l of the transition and the Bayes thresholds."""
    pts = sorted([p for p in bayes_points if _finite(p.test_error)], key=lambda p: p.alpha)
    if not pts:
        raise InputError("bayes comparison: no Bayes-optimal points to plot")
    fig, (ax,) = new_figure(width=5.6, height=4.6)
    x = np.array([p.alpha for p in pts])
    ax.plot(x, [p.test_error for p in pts], **_BO_STYLE, label="Bayes-optimal", zorder=5)
    te_amp = np.array([p.test_error_amp for p in pts])
    if np.any(np.abs(te_amp - np.array([p.test_error for p in pts])) > 1e-12):
        ax.plot(x, te_amp, **_AMP_SE_STYLE, label="GAMP (state evolution, uninformative start)", zorder=4)
    for branch, fps in (curves or {}).items():
        v = sorted([p for p in fps if getattr(p, "valid", True) and _finite(p.test_error)], key=lambda p: p.alpha)
        if v and branch in ("positional", "semantic"):
            st = BRANCH_STYLE[branch]
            ax.plot([p.alpha for p in v], [p.test_error for p in v], color=st["color"], linestyle=st["linestyle"],
                    marker=st["marker"], markersize=3, linewidth=1.2, label=f"ERM {branch}", zorder=3)
    if global_minimum:
        crit = transition.critical.get("alpha_c") if hasattr(transition, "critical") else None
        own = {b: [(p.alpha, p.test_error, p.train_loss) for p in fps
                   if getattr(p, "valid", True) and _finite(p.test_error) and _finite(p.train_loss)]
               for b, fps in (curves or {}).items()}
        path = global_path([(p.branch, p.alpha, p.test_error) for p in global_minimum], own,
                           crit.value if crit is not None and crit.found else None)
        note = f" ({INTERPOLATED_NOTE})" if path.switches and path.interpolated else ""
        ax.plot(path.x, path.y, **GLOBAL_STYLE, label="ERM global minimum" + note, zorder=2, gid="global-minimum")
    if test_error_linear is None:
        test_error_linear = pts[0].test_error_linear
    if _finite(test_error_linear):
        ax.axhline(test_error_linear, **LINEAR_STYLE, label="linear baseline", zorder=1)
    if amp:
        rows = sorted(amp, key=lambda r: r["alpha"])
        dd = sorted({r["d"] for r in rows})
        cal = all("test_error_calibrated_mean" in r for r in rows)
        key = "test_error_calibrated" if cal else "test_error"
        ax.errorbar([r["alpha"] for r in rows], [r[f"{key}_mean"] for r in rows],
                    yerr=[r.get(f"{key}_sem") or 0.0 for r in rows], **_AMP_STYLE,
                    label=f"GAMP, d = {', '.join(str(v) for v in dd)}" + (" (calibrated*)" if cal else ""), zorder=6)
    if transition is not None:
        for name, line_style, label in (("alpha_c", ALPHA_C_STYLE, r"$\alpha_c$ (ERM)"),
                                   ("alpha_l", ALPHA_L_STYLE, r"$\alpha_l$ (ERM beats linear)")):
            c = transition.critical.get(name) if hasattr(transition, "critical") else None
            if c is not None and c.found:
                ax.axvline(c.value, **line_style, label=label, zorder=2)
                ax.axvspan(c.lo, c.hi, color=line_style["color"], alpha=0.08, linewidth=0)
    if thresholds is not None:
        _threshold_lines(ax, thresholds)
    ax.set_xlabel(ALPHA_LABEL)
    ax.set_ylabel("test error")
    ax.set_ylim(bottom=-0.03 * ax.get_ylim()[1])  # zero errors (perfect recovery) drawn inside the frame
    ax.set_xlim(left=0.0)
    ax.set_title(title or rf"Bayes-optimal vs attention layer, $\omega = {pts[0].omega:g}$, $L = {pts[0].L}$")
    legend_below(fig, ax, ncols=3)
    return style.save_figure(fig, out)


@with_style
def plot_bayes_phase_diagram(thresholds: Sequence[Any], out: str | Path, *, transitions: Sequence[Any] = (),
                             alpha_max: float = 2.0) -> list[Path]:
    """(alpha, omega) plane: the Bayes thresholds per omega (records of attnphase.theory.bayes.thresholds) against
    the ERM transition alpha_c(omega) and alpha_l(omega) (records of phase_diagram)."""
    ths = sorted(thresholds, key=lambda t: t.omega)
    if not ths:
        raise InputError("bayes phase diagram: no thresholds to plot")
    fig, (ax,) = new_figure(width=5.4, height=4.8)
    om = np.array([t.omega for t in ths])
    for name in ("alpha_weak", "alpha_it", "alpha_alg"):
        vals = np.array([t.critical[name].value if t.critical[name].found else np.nan for t in ths])
        if name == "alpha_alg" and np.allclose(vals, [t.critical["alpha_it"].value if t.critical["alpha_it"].found
                                                      else np.nan for t in ths], equal_nan=True):
            continue
        ok = np.isfinite(vals)
        if ok.any():
            ax.plot(vals[ok], om[ok], marker="o", markersize=3, **_THRESH_STYLE[name], label=_THRESH_LABEL[name])
    wk = np.array([t.critical["alpha_weak"].value if t.critical["alpha_weak"].found else np.nan for t in ths])
    it = np.array([t.critical["alpha_it"].value if t.critical["alpha_it"].found else np.nan for t in ths])
    ok = np.isfinite(wk) & np.isfinite(it)
    if ok.any():
        ax.fill_betweenx(om[ok], wk[ok], it[ok], color="#fdb863", alpha=0.25, linewidth=0,
                         label="Bayes: partial recovery")
        ax.fill_betweenx(om[ok], it[ok], alpha_max, color="#fee0b6", alpha=0.35, linewidth=0,
                         label="Bayes: test error 0")
    trs = sorted([t for t in transitions if _finite(getattr(t, "omega", None))], key=lambda t: t.omega)
    for name, line_style, marker, label in (("alpha_c", {"color": "black", "linestyle": "-"}, "s", r"ERM $\alpha_c$"),
                                       ("alpha_l", {"color": ALPHA_L_STYLE["color"], "linestyle": "--"}, "^",
                                        r"ERM $\alpha_l$ (beats linear)")):
        rows = [(t.omega, t.critical[name]) for t in trs if name in t.critical and t.critical[name].found]
        if rows:
            y = np.array([r[0] for r in rows])
            xv = np.array([r[1].value for r in rows])
            xerr = np.clip(np.vstack([xv - [r[1].lo for r in rows], [r[1].hi for r in rows] - xv]), 0, None)
            ax.errorbar(xv, y, xerr=xerr, marker=marker, markersize=4, mfc="white", capsize=2, linewidth=1.3,
                        elinewidth=0.8, label=label, **line_style)
    # ERM values beyond the range: a marker at the right edge, inside the frame (as in figure (d))
    for name, color, label in (("alpha_c", "black", rf"ERM $\alpha_c > {alpha_max:g}$"),
                               ("alpha_l", ALPHA_L_STYLE["color"], rf"ERM $\alpha_l > {alpha_max:g}$")):
        if name == "alpha_c":
            far = [t.omega for t in trs if name in t.critical and t.critical[name].search == "above range"]
        else:
            far = [t.omega for t in trs if name in t.critical and not t.critical[name].found
                   and never_beats_linear(t)]
        if far:
            x = 0.988 if name == "alpha_c" else 0.962  # side by side where both are beyond the range
            ax.plot([x] * len(far), far, transform=ax.get_yaxis_transform(), marker=">", markersize=6,
                    color=color, mfc="white" if name == "alpha_l" else color, linestyle="none", label=label,
                    zorder=5)
    if any(t.omega == 1.0 for t in ths):
        ax.axhline(1.0, color="0.4", linewidth=0.8, linestyle=":", label=r"$\omega = 1$: nothing to learn")
    ax.set_xlim(0.0, alpha_max)
    lo, hi = min(om.min(), 0.0), max(om.max(), 0.5)
    ax.set_ylim(lo - 0.03 * (hi - lo), hi + 0.03 * (hi - lo))  # markers on omega = 0 inside the frame
    ax.set_xlabel(ALPHA_LABEL)
    ax.set_ylabel(r"positional weight $\omega$")
    ax.set_title(rf"Bayes-optimal thresholds vs ERM transition, $L = {ths[0].L}$")
    legend_below(fig, ax, ncols=2)
    return style.save_figure(fig, out)
