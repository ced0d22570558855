"""The reproduction's Bayes-optimal section: the best any estimator can do, beside the attention layer's minima.

Draws what :func:`attnphase.reproduce.bayes_section.bayes_section` computed (state evolution, thresholds, GAMP at
finite d) against the ERM curves, transition and phase diagram the reproduction already has; no ERM physics is
recomputed here.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attnphase.reproduce.plan import Plan


@dataclass(frozen=True)
class BayesRun:
    records: list[dict[str, Any]]
    figures: list[Path]
    seconds: float
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        th = next((r for r in self.records if r.get("kind") == "bayes_thresholds"), {})
        pts = [r for r in self.records if r.get("kind") == "bayes"]
        amp = [r for r in self.records if r.get("kind") == "amp"]
        lines = ["## The Bayes-optimal limit", "",
                 "What any estimator that knows omega, A, sigma and the Gaussian prior can reach (docs/bayes.md): the "
                 "labels reveal the teacher's fields up to a global sign, whatever omega < 1 is.", ""]

        def val(name: str) -> str:
            v = th.get(name)
            return "—" if v is None else f"{v:.4g} ({th.get(f'{name}_kind', '')})"

        lines += [f"- weak recovery alpha_weak = {val('alpha_weak')}; perfect recovery alpha_it = {val('alpha_it')}; "
                  f"algorithmic threshold alpha_alg = {val('alpha_alg')}.", ""]
        if pts:
            lines += ["| alpha | overlap | Bayes test error | linear baseline |", "|---|---|---|---|"]
            for r in pts[:: max(1, len(pts) // 8)]:
                lines.append(f"| {r['alpha']:.3g} | {r['overlap']:.4g} | {r['test_error']:.4g} | "
                             f"{r['test_error_linear']:.4g} |")
            lines.append("")
        if amp:
            lines += ["GAMP at finite d (mean ± standard error over seeds) against the state evolution:", "",
                      "| d | alpha | GAMP overlap | converged runs |", "|---|---|---|---|"]
            for r in amp:
                sem = r.get("overlap_sem")
                pm = "" if sem is None or not math.isfinite(sem) else f" ± {sem:.3g}"
                lines.append(f"| {r['d']} | {r['alpha']:.3g} | {r['overlap_mean']:.4g}{pm} | "
                             f"{r['converged']} of {len(r['seeds'])} |")
            lines.append("")
        lines += ["Figures: " + ", ".join(f"`{p.name}`" for p in self.figures if p.suffix == ".png"), ""]
        lines += [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def run_bayes(out: Path, plan: Plan, theory: Any) -> BayesRun:
    """The section for the plan's setting, drawn against the reproduction's own ERM results."""
    from attnphase.reproduce.bayes_section import bayes_section

    t0 = time.perf_counter()
    alphas = [float(a) for a in np.linspace(0.02, max(2.0, max(plan.curve_alphas)), 100)]
    notes: list[str] = []
    try:
        records, paths = bayes_section(plan.setting, alphas, out, quick=plan.bayes == "quick",
                                       transition_result=theory.transition, diagram=theory.diagram,
                                       curves=theory.curves)
    except (ValueError, ArithmeticError) as exc:  # a failure is one note, never a lost report
        records, paths = [], []
        notes.append(f"Bayes-optimal section not produced: {exc}")
    return BayesRun(records, paths, time.perf_counter() - t0, notes)
