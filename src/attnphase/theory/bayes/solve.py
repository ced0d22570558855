"""The Bayes-optimal curve of one setting: overlap, test error and free entropy per alpha (docs/bayes.md)."""

from __future__ import annotations

from collections.abc import Sequence

from attnphase.errors import InputError, InputTypeError
from attnphase.notes import Note, NoteCode
from attnphase.setting import Setting, check_alpha
from attnphase.theory.bayes.channel import check_delta
from attnphase.theory.bayes.observables import bayes_test_error
from attnphase.theory.bayes.results import BayesPoint, bayes_note
from attnphase.theory.bayes.state_evolution import best_fixed_point, fixed_points, se_map
from attnphase.theory.bayes.thresholds import NAMES, thresholds
from attnphase.theory.model.baseline import linear_baseline
from attnphase.theory.solvers.fixed_point import Status

RESIDUAL_TOL = 1e-9


def check_bayes_setting(setting: Setting) -> Setting:
    """The Bayes-optimal theory covers the study's teacher with r* = 1 (any L >= 2, A, sigma, omega)."""
    if not isinstance(setting, Setting):
        raise InputTypeError("setting must be an attnphase.Setting")
    if setting.r_star != 1:
        raise InputError(f"the Bayes-optimal theory implements a rank-1 teacher (r* = 1), got r* = {setting.r_star}")
    return setting


def _baseline(setting: Setting, delta: float) -> float:
    """The linear baseline of the model: the package's (noiseless); for the noisy variant the same predictor E[T]
    against the noisy teacher, i.e. the Bayes-optimal error at q = 0."""
    if delta == 0.0:
        return float(linear_baseline(setting).test_error_linear)
    return float(bayes_test_error(setting, 0.0, delta)[0])


def _phase(q: float) -> str:
    return "uninformative" if q == 0.0 else ("perfect" if q >= 1.0 else "partial")


def bayes_point(setting: Setting, alpha: float, delta: float = 0.0, test_error_linear: float | None = None,
                _thresholds=None) -> BayesPoint:
    """Bayes-optimal overlap (largest free entropy among the fixed points), the uninformative-start overlap, their
    test errors and the free entropy at one alpha."""
    setting, alpha, delta = check_bayes_setting(setting), check_alpha(alpha), check_delta(delta)
    L, omega = setting.L, setting.omega
    if test_error_linear is None:
        test_error_linear = _baseline(setting, delta)
    warnings: list[Note] = []
    if omega == 1.0:
        return BayesPoint(alpha, L, omega, delta, 0.0, 0.0, 0.0, 0.0, test_error_linear, float("nan"),
                          "uninformative", Status.ok, (bayes_note(NoteCode.uninformative_channel),), 0.0,
                          {"test_error": 0.0})
    fps = fixed_points(alpha, L, delta)
    best = best_fixed_point(fps)
    amp = 0.0 if fps[0].stable else next((p.q for p in fps[1:] if p.stable), fps[-1].q)
    q, residual = best.q, abs(se_map(best.q, alpha, L, delta) - best.q) if best.q < 1.0 else 0.0
    th = _thresholds or thresholds(L, omega, delta)
    for name in NAMES:
        c = th.critical[name]
        if c.found and abs(alpha - c.value) < 0.01 * c.value:
            warnings.append(bayes_note(NoteCode.near_threshold))
            break
    if amp < q - 1e-9:
        warnings.append(bayes_note(NoteCode.hard_phase))
    te, te_err = bayes_test_error(setting, q, delta)
    te_amp, _ = (te, te_err) if amp == q else bayes_test_error(setting, amp, delta)
    if te > 0 and te_err > 1e-6 * te:
        warnings.append(bayes_note(NoteCode.quadrature_error))
    status = Status.ok if residual < RESIDUAL_TOL and best.stable else Status.not_converged
    return BayesPoint(alpha, L, omega, delta, q, amp, te, te_amp, test_error_linear, best.free_entropy, _phase(q),
                      status, tuple(warnings), residual, {"test_error": te_err})


def bayes_curve(setting: Setting, alphas: Sequence[float], delta: float = 0.0) -> list[BayesPoint]:
    """bayes_point at each alpha (the linear baseline and the thresholds computed once)."""
    setting, delta = check_bayes_setting(setting), check_delta(delta)
    alphas = [check_alpha(a) for a in alphas]
    te_lin = _baseline(setting, delta)
    th = thresholds(setting.L, setting.omega, delta)
    return [bayes_point(setting, a, delta, te_lin, th) for a in alphas]
