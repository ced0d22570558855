"""The reproduction's report, DIR/report.md: setting, transition, phase diagram, simulations, flagged theory
points and timings, with the figures embedded."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attnphase.reproduce.basins import BasinsRun, at_omega, plan_rows, pooled, summary_points
from attnphase.reproduce.plan import Plan
from attnphase.reproduce.records import _opt_float
from attnphase.reproduce.simulations import SimSet
from attnphase.reproduce.theory_jobs import TheoryCache, TheoryResults
from attnphase.theory.solvers.fixed_point import Status
from attnphase.theory.state_evolution.results import FixedPoint, as_status

STORE_NAME = "results.sqlite"
REPORT_NAME = "report.md"
RUNS_NAME = "runs.json"


def _f(v: Any, digits: int = 4) -> str:
    f = _opt_float(v)
    if f is None:
        return "-"
    if f != 0 and (abs(f) < 1e-3 or abs(f) >= 1e4):
        return f"{f:.{digits - 1}e}"
    return f"{f:.{digits}g}"


def _bracket_text(v: Any, b: tuple[float, float] | None) -> str:
    if _opt_float(v) is None:
        return "-"
    return f"{_f(v)} [{_f(b[0])}, {_f(b[1])}]" if b else _f(v)


def _flagged(curves: Iterable[tuple[float, str, FixedPoint]]) -> tuple[list[str], dict[str, int]]:
    """Non-converged points (a real problem: listed) and branch collapses (the expected sign of a
    spinodal: counted)."""
    problems: list[str] = []
    collapsed: dict[str, int] = {}
    for omega, branch, p in curves:
        status = as_status(p.status)
        if status == Status.collapsed:
            collapsed[branch] = collapsed.get(branch, 0) + 1
        elif not p.converged:
            problems.append(f"omega = {omega:g}, {branch}, alpha = {p.alpha:.4g}: {status} "
                            f"(residual {_f(p.residual, 2)}, {p.iterations} iterations)")
    return problems, collapsed


def _all_points(theory: TheoryResults) -> list[tuple[float, str, FixedPoint]]:
    out = [(theory.transition.omega, b, p) for b, pts in theory.curves.items() for p in pts]
    for tr in [theory.transition, *[t for t in theory.diagram if t is not theory.transition]]:
        out += [(tr.omega, b, p) for b, pts in tr.curves.items() for p in pts]
    out += [(theory.transition.omega, b, p) for b, p in theory.finite_size.items()]
    return out


def _img(paths: Mapping[str, list[Path]], name: str, caption: str) -> str:
    if name not in paths:
        return f"*({caption}: not produced, see the note at the top)*\n"
    png, pdf = paths[name]
    return f"![{name.replace('_', ' ')}]({png.name})\n\n*{caption}* ([PDF]({pdf.name}))\n"


def fraction_text(f: Any, se: Any) -> str:
    """A fraction with its binomial standard error, as the basins table writes it."""
    return "-" if _opt_float(f) is None else f"{float(f):.2f} ± {float(se):.2f}"


def _side(alpha: float, ac: float | None) -> str:
    if ac is None:
        return "-"
    return "below" if alpha < ac - 1e-12 else ("above" if alpha > ac + 1e-12 else "at")


def basins_section(plan: Plan, run: BasinsRun | None, fields: Sequence[Mapping[str, float | None]],
                   store: Path, figures: Mapping[str, list[Path]]) -> list[str]:
    """The report's basins section: grid, rule, fractions with binomial errors per alpha, mean losses per
    class, and the fractions below / above alpha_c, all from the store (``basins_summary``)."""
    bp = plan.basins
    if bp is None:
        return []
    from attnphase.experiments.store import load_results

    summ = summary_points(bp, store)
    pts = summ["points"]
    rows = plan_rows(bp, plan.setting, load_results(store)) if store.is_file() else None
    run_rows = 0 if rows is None else len(rows)
    out = ["## Basins of attraction: which minimum training reaches from a random start\n"]
    out.append(f"Random starts: initial Q with i.i.d. N(0, {bp.init_scale:g}^2) entries; seed k (k = 0..{bp.starts - 1}) "
               "draws its own teacher, data set and initial Q; training: 1000 plain gradient-descent steps at the "
               "study's learning rate (they choose the basin), then L-BFGS inside it; n_test = "
               f"{bp.n_test}. Grid: d = {bp.heat_d} over omega in {{{', '.join(f'{w:g}' for w in bp.heat_omegas)}}}, "
               f"d in {{{', '.join(str(d) for d in bp.fraction_ds)}}} at omega = {bp.fraction_omega:g}, alpha in "
               f"{{{', '.join(f'{a:g}' for a in bp.heat_alphas)}}}, {bp.starts} starts per point. One row per start "
               f"in `{STORE_NAME}` (rerunning skips finished starts).\n")
    if run is not None:
        out.append(f"This run: {run.total} starts, {run.ran} trained now, {run.skipped} found in the store, "
                   f"{run.failed} failed ({run.seconds:.1f} s).\n")
    out.append(f"**Classification rule.** D_B = ||(m, theta) - (m_B, theta_B)|| / ||(m_B, theta_B)|| for each "
               "branch B whose theory fixed point exists at that (alpha, omega) (state evolution, precision fast); "
               f"the end point belongs to the {summ['rule']}.\n")
    if not pts:
        out.append("*No basins results in the store.*\n")
        return out
    n_all = sum(int(p["n"]) for p in pts)
    n_conv = sum(int(p["n_converged"]) for p in pts)
    if n_all != run_rows:
        out.append(f"> **Note:** the store holds {n_all} basins starts at this grid's points but {run_rows} of this "
                   "plan's setting and test-set size; the table below counts them all.\n")
    out.append(f"{n_all} starts in this grid, {n_conv} converged by the optimizer's criterion. "
               "Fractions: count / starts ± binomial standard error sqrt(f (1 - f) / n) (at least 1 / (2 (n + 1))). "
               "Mean train losses per class of end point; theory: the train loss of each branch's fixed point "
               "('-': the branch does not exist there).\n")
    out.append("| d | omega | alpha | vs alpha_c | starts | semantic | positional | other | converged | "
               "mean train loss pos / sem / other | theory train loss pos / sem |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|")
    for p in sorted(pts, key=lambda p: (p["d"], p["omega"], p["alpha"])):
        ac = at_omega(fields, float(p["omega"]))["alpha_c"]
        losses = " / ".join(_f(p.get(f"{c}_train_loss_mean")) for c in ("positional", "semantic", "other"))
        theory = " / ".join(_f(p.get(f"theory_{b}_train_loss")) for b in ("positional", "semantic"))
        out.append(f"| {int(p['d'])} | {float(p['omega']):g} | {float(p['alpha']):g} | "
                   f"{_side(float(p['alpha']), ac)} | {int(p['n'])} | "
                   f"{fraction_text(p['semantic_fraction'], p['semantic_se'])} | "
                   f"{fraction_text(p['positional_fraction'], p['positional_se'])} | "
                   f"{fraction_text(p['other_fraction'], p['other_se'])} | {int(p['n_converged'])} | "
                   f"{losses} | {theory} |")
    out.append("")
    out.append("**Against alpha_c** (semantic end points pooled over the grid's alphas on each side of the "
               "theory's alpha_c(omega); the first alpha where at least half the starts end semantic):\n")
    groups: dict[tuple[int, float], list[Mapping[str, Any]]] = {}
    for p in pts:
        groups.setdefault((int(p["d"]), float(p["omega"])), []).append(p)
    for (d, w), ps in sorted(groups.items()):
        ac = at_omega(fields, w)["alpha_c"]
        ps = sorted(ps, key=lambda p: p["alpha"])
        half = next((float(p["alpha"]) for p in ps if float(p["semantic_fraction"]) >= 0.5), None)
        half_text = f"{half:g}" if half is not None else "none on the grid"
        if ac is None:
            out.append(f"- d = {d}, omega = {w:g}: alpha_c not found in the theory's range; first alpha with a "
                       f"semantic majority: {half_text}.")
            continue
        parts = []
        for side, sel in (("below", [p for p in ps if p["alpha"] < ac]), ("above", [p for p in ps if p["alpha"] > ac])):
            k, n, f, se = pooled(sel)
            parts.append(f"{side} alpha_c: {k}/{n} = {fraction_text(f, se)}" if n else f"{side} alpha_c: no grid point")
        out.append(f"- d = {d}, omega = {w:g}, alpha_c = {_f(ac)}: " + "; ".join(parts)
                   + f"; first alpha with a semantic majority: {half_text}.")
    out.append("")
    out.append(_img(figures, "basins_heatmap", f"(f) fraction of random starts ending semantic over (alpha, omega) "
                    f"at d = {bp.heat_d} (counts in the cells), with alpha_c(omega) and the spinodals of the "
                    "phase diagram's transitions"))
    out.append(_img(figures, "basins_fraction", f"(g) fraction ending semantic against alpha at omega = "
                    f"{bp.fraction_omega:g} for each d, binomial standard errors, alpha_c and the spinodals"))
    out.append(_img(figures, "basins_trajectories", f"(h) training trajectories of stored starts at d = "
                    f"{bp.trajectory_d}, alpha = {bp.trajectory_alpha:g}, omega = {bp.fraction_omega:g}, coloured "
                    "by the minimum they end in; horizontal lines: the theory's fixed points"))
    return out



def write_report(out_dir: Path, plan: Plan, theory: TheoryResults, sims: list[SimSet], sim_df: Any,
                 figures: Mapping[str, list[Path]], timings: Mapping[str, float], cache: TheoryCache,
                 wall: float, notes: Sequence[str], runs: Sequence[Mapping[str, Any]] = (),
                 basins: BasinsRun | None = None, fields: Sequence[Mapping[str, float | None]] = (),
                 store: Path | None = None) -> Path:
    from attnphase import __version__

    s = plan.setting
    tr = theory.transition
    lines: list[str] = []
    add = lines.append
    add(f"# attnphase reproduction ({plan.name})\n")
    add(f"Generated {_dt.datetime.now().isoformat(timespec='seconds')} by attnphase {__version__}; "
        f"wall time of this run {wall:.1f} s (theory results from the store: {cache.hits} reused, "
        f"{cache.misses} computed).\n")
    add("Model, conventions and names: the project's documentation (docs/), after Cui, Behrens, Krzakala, "
        "Zdeborova, NeurIPS 2024 (arXiv:2402.03902).\n")
    for n in notes:
        add(f"> **Note:** {n}\n")

    add("## Setting\n")
    add("| quantity | value |\n|---|---|")
    add(f"| sigma | {s.sigma:g} |\n| lambda | {s.lam:g} |\n| A | {[list(r) for r in s.A]} |")
    add(f"| L, r, r* | {s.L}, {s.r}, {s.r_star} |\n| omega (curves, simulations) | {s.omega:g} |")
    add(f"| theory precision (curves / phase diagram) | {plan.precision} / {plan.pd_precision} |")
    add(f"| alpha grid of the curves | {len(plan.curve_alphas)} values in "
        f"[{min(plan.curve_alphas):g}, {max(plan.curve_alphas):g}] |")
    add(f"| test_error_linear (linear positional baseline, d -> infinity) | {_f(theory.test_error_linear)} |\n")

    add(f"## Transition at omega = {s.omega:g}\n")
    add("| alpha_c | alpha_l | semantic branch appears | positional branch vanishes |\n|---|---|---|---|")
    add(f"| {_bracket_text(tr.alpha_c, tr.alpha_c_bracket)} "
        f"| {_bracket_text(tr.alpha_l, tr.alpha_l_bracket)} "
        f"| {_bracket_text(tr.alpha_sem_appears, tr.alpha_sem_appears_bracket)} "
        f"| {_bracket_text(tr.alpha_pos_vanishes, tr.alpha_pos_vanishes_bracket)} |\n")
    for k, v in tr.reasons.items():
        add(f"- {k}: {v}")
    add("")
    add(_img(figures, "test_error", f"(a) test error vs alpha at omega = {s.omega:g}: theory of both "
             "branches (band: +-2 integration standard errors), global minimum (thick grey), linear "
             f"baseline, simulations (d = {plan.sim_d}, mean +- standard error over seeds)"))
    add(_img(figures, "loss_difference", "(b) train_loss(semantic) - train_loss(positional): theory and "
             "simulation; alpha_c is where it crosses zero"))
    add(_img(figures, "overlaps", "(c) overlaps |m| / sigma^2 and |theta| / sigma^2 vs alpha"))

    add("## Phase diagram\n")
    add(f"omega in {[float(f'{w:.4g}') for w in plan.pd_omegas]}; transition on {plan.pd_n_grid} alphas "
        f"in [{plan.pd_alpha_min:g}, {plan.pd_alpha_max:g}] refined to a tolerance of {plan.pd_xtol:g}, "
        f"precision {plan.pd_precision}. Brackets [lo, hi] enclose each crossing; '-' means none in range "
        "(see note).\n")
    add("| omega | alpha_c [bracket] | alpha_l [bracket] | test_error_linear | semantic appears | "
        "positional vanishes | note |\n|---|---|---|---|---|---|---|")
    for t in theory.diagram:
        note = "; ".join(f"{k}: {v}" for k, v in t.reasons.items()).replace("|", "/")
        add(f"| {t.omega:g} | {_bracket_text(t.alpha_c, t.alpha_c_bracket)} | "
            f"{_bracket_text(t.alpha_l, t.alpha_l_bracket)} | {_f(t.test_error_linear)} | "
            f"{_bracket_text(t.alpha_sem_appears, t.alpha_sem_appears_bracket)} | "
            f"{_bracket_text(t.alpha_pos_vanishes, t.alpha_pos_vanishes_bracket)} | {note} |")
    add("")
    add(_img(figures, "phase_diagram", "(d) phase diagram: alpha_c(omega) separates the positional and "
             "semantic global minimum; hatched: attention beats the linear baseline (alpha > alpha_l)"))

    add("## Simulations\n")
    add(f"Finite-d training (the study's protocol, see the docs) at omega = {s.omega:g}, optimizer {plan.optimizer}, "
        f"inits {', '.join(plan.inits)}, seeds {list(plan.sim_seeds)}, n_test = {plan.n_test}; store "
        f"`{STORE_NAME}` (rerunning skips finished points).\n")
    add("| set | d | alphas | points | ran now | skipped (stored) | failed | wall time (s) |\n"
        "|---|---|---|---|---|---|---|---|")
    for ss in sims:
        sm = ss.summary
        add(f"| {ss.name} | {', '.join(str(v) for v in ss.d)} | {', '.join(f'{a:g}' for a in ss.alphas)} | "
            f"{sm.total} | {sm.ran} | {sm.skipped} | {sm.failed} | {ss.seconds:.1f} |")
    add("")
    if sim_df is not None and len(sim_df):
        n_nc = int((~sim_df["converged"].astype(bool)).sum()) if "converged" in sim_df.columns else 0
        secs = float(sim_df["seconds"].sum()) if "seconds" in sim_df.columns else float("nan")
        add(f"{len(sim_df)} stored runs of this plan, {n_nc} flagged not converged by the optimizer; "
            f"total training time {secs:.1f} s (CPU seconds summed over runs).\n")
    if any(ss.summary.failed for ss in sims):
        add("**Some simulations failed**; their errors are in the store's `failures` table and they are "
            "retried on the next run.\n")
    add(_img(figures, "finite_size", f"(e) finite-size check: simulated test error vs d at alpha = "
             f"{plan.fs_alpha:g}, omega = {s.omega:g}; horizontal lines: d -> infinity theory"))

    lines.extend(basins_section(plan, basins, fields, store if store is not None else out_dir / STORE_NAME,
                                figures))

    add("## Theory points flagged\n")
    problems, collapsed = _flagged(_all_points(theory))
    if problems:
        add(f"**{len(problems)} fixed point(s) did not converge** (not drawn in the figures):\n")
        lines.extend(f"- {p}" for p in problems)
        add("")
    else:
        add("All fixed points converged.\n")
    if collapsed:
        add("Points where a branch's iteration left the branch (expected beyond a spinodal: the branch does "
            "not exist there; not drawn): " + ", ".join(f"{b}: {n}" for b, n in sorted(collapsed.items()))
            + ".\n")

    add("## Timing\n")
    add("| stage | seconds |\n|---|---|")
    for k, v in timings.items():
        add(f"| {k} | {v:.1f} |")
    add(f"| total | {wall:.1f} |\n")
    if len(runs) > 1:
        total = sum(float(r.get("wall", 0.0)) for r in runs)
        add(f"This directory was produced by {len(runs)} runs (`{RUNS_NAME}`), {total:.1f} s of wall time "
            f"in all; the first took {float(runs[0].get('wall', 0.0)):.1f} s.\n")
    add(f"Rerun with `attnphase reproduce --out {out_dir}{' --quick' if plan.name == 'quick' else ''}`; "
        "stored theory results and simulations are reused.\n")
    path = out_dir / REPORT_NAME
    path.write_text("\n".join(lines))
    return path


