"""The Bayes-optimal limit of the study's teacher (issue 19; docs/bayes.md).

Layout, one idea per module: readoff (what (x, y) reveals: the teacher's fields up to a global sign), channel
(the block sign-retrieval channel: Z_out, g_out and their state-evolution averages), state_evolution (the overlap's
fixed points, alpha(q), the free entropy), observables (the Bayes-optimal test error as a function of the overlap),
thresholds (weak recovery, information-theoretic, algorithmic: Critical records), solve (the curve of a setting),
amp (GAMP at finite d on the package's sampled data), results (frozen records).  The figures and the
reproduction's section live above the physics (plots/bayes.py, reproduce/bayes_section.py).
"""

from attnphase.theory.bayes.results import WARNINGS, AmpResult, BayesPoint
from attnphase.theory.bayes.solve import bayes_curve, bayes_point
from attnphase.theory.bayes.state_evolution import (
    alpha_curve,
    alpha_of_q,
    amp_overlap,
    bayes_overlap,
    fixed_points,
    free_entropy,
    iterate,
    se_map,
)
from attnphase.theory.bayes.thresholds import BayesThresholds, thresholds

__all__ = ["WARNINGS", "AmpResult", "BayesPoint", "BayesThresholds", "alpha_curve", "alpha_of_q", "amp_overlap",
           "bayes_curve", "bayes_overlap", "bayes_point", "fixed_points", "free_entropy", "iterate", "se_map",
           "thresholds"]
