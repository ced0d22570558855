"""One-command reproduction: theory, a set of finite-d simulations, figures (a)-(e) and a markdown report.

``reproduce(out_dir)`` (``attnphase reproduce --out DIR``) computes the omega = 0.3 curves of both branches
and the transition there, the phase diagram (a transition at each omega), simulations at omega = 0.3 and a
finite-size set at alpha = 1.5, random starts classified by the minimum they reach (basins of attraction),
then writes the figures and ``DIR/report.md``.  Every result, theory and
simulation alike, goes to ``DIR/results.sqlite`` as soon as it is computed, so a rerun resumes.

Modules: ``plan`` (what is computed), ``records`` (JSON forms of theory results), ``pool`` (the process
pool), ``theory_jobs`` (theory, stored), ``simulations`` (the sweeps), ``basins`` (random starts, their
figures and numbers), ``figures``, ``markdown`` (the report), ``pipeline`` (``reproduce`` itself).
"""

from attnphase.reproduce.basins import FIGURES_BASINS
from attnphase.reproduce.figures import FIGURES
from attnphase.reproduce.markdown import REPORT_NAME, RUNS_NAME, STORE_NAME
from attnphase.reproduce.pipeline import reproduce
from attnphase.reproduce.plan import Plan, plan_for
from attnphase.reproduce.records import TransitionRecord, fixed_point_from_json, fixed_point_to_json
from attnphase.reproduce.simulations import rows_for_setting

__all__ = ["FIGURES", "FIGURES_BASINS", "REPORT_NAME", "RUNS_NAME", "STORE_NAME", "Plan", "TransitionRecord",
           "fixed_point_from_json", "fixed_point_to_json", "plan_for", "reproduce", "rows_for_setting"]
