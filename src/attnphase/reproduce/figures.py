"""Figures (a)-(e) of a reproduction."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnphase import plots
from attnphase.reproduce.plan import Plan
from attnphase.reproduce.theory_jobs import TheoryResults

FIGURES = {
    "test_error": "fig_a_test_error",
    "loss_difference": "fig_b_loss_difference",
    "overlaps": "fig_c_overlaps",
    "phase_diagram": "fig_d_phase_diagram",
    "finite_size": "fig_e_finite_size",
}


def make_figures(out_dir: Path, plan: Plan, theory: TheoryResults,
                 sim_df: Any) -> tuple[dict[str, list[Path]], list[str]]:
    """Figures (a)-(e); a figure that cannot be drawn is reported, never fatal to the whole report."""
    from attnphase.experiments.store import aggregate
    from attnphase.theory.state_evolution.results import global_minimum_curve

    s, tr = plan.setting, theory.transition
    gm = global_minimum_curve(theory.curves)
    unstable = getattr(tr, "unstable", None) or None
    agg = aggregate(sim_df) if sim_df is not None and len(sim_df) else None
    main = agg[agg["d"] == plan.sim_d] if agg is not None else None
    figs: dict[str, list[Path]] = {}
    notes: list[str] = []

    def attempt(name: str, func: Callable[[], list[Path]]) -> None:
        try:
            figs[name] = func()
        except (ValueError, KeyError) as exc:
            notes.append(f"figure {name} not produced: {exc}")

    out = out_dir / FIGURES["test_error"]
    attempt("test_error", lambda: plots.plot_test_error(
        theory.curves, out, test_error_linear=theory.test_error_linear, simulation=main, alpha_c=tr.alpha_c,
        alpha_l=tr.alpha_l, alpha_c_bracket=tr.alpha_c_bracket, alpha_l_bracket=tr.alpha_l_bracket,
        omega=s.omega, d=plan.sim_d, global_minimum=gm))
    attempt("loss_difference", lambda: plots.plot_loss_difference(
        theory.curves, out_dir / FIGURES["loss_difference"], simulation=main, alpha_c=tr.alpha_c,
        alpha_c_bracket=tr.alpha_c_bracket, omega=s.omega, d=plan.sim_d))
    attempt("overlaps", lambda: plots.plot_overlaps(
        theory.curves, out_dir / FIGURES["overlaps"], simulation=main, alpha_c=tr.alpha_c, omega=s.omega,
        d=plan.sim_d, sigma=s.sigma, global_minimum=gm, unstable=unstable))
    attempt("phase_diagram", lambda: plots.plot_phase_diagram(
        theory.diagram, out_dir / FIGURES["phase_diagram"], alpha_max=plan.pd_alpha_max, simulation=agg))
    attempt("finite_size", lambda: plots.plot_finite_size(
        agg, out_dir / FIGURES["finite_size"], alpha=plan.fs_alpha, omega=s.omega, theory=theory.finite_size,
        test_error_linear=theory.test_error_linear))
    return figs, notes


