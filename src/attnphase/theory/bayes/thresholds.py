"""Critical sample complexities of the Bayes-optimal problem, as :class:`~attnphase.theory.curves.Critical` records.

All of them are properties of one function, alpha(q) = q / ((1 - q) E||g_out||^2(q)) (state_evolution):

- ``alpha_weak``: the uninformative fixed point q = 0 turns unstable.  Linearising the map at q = 0,
  q_hat = alpha L (L + 1) q / (1 + delta)^2 + O(q^2), so alpha_weak = (1 + delta)^2 / (L (L + 1)) (kind pitchfork:
  the overlap's sign symmetry breaks).  L = 1: 1/2, noiseless phase retrieval's value.
- ``alpha_it``: where the Bayes-optimal overlap reaches the branch of perfect recovery (delta = 0) or jumps between
  two stable branches (delta > 0).  Noiseless: phi(q) ~ (1 - alpha L)/2 log(1 - q) as q -> 1, so q = 1 is the
  global maximum of the free entropy iff alpha > 1/L exactly (kind crossing: of free entropies; the reason says
  whether the overlap jumps there (first order) or reaches 1 continuously).  Noisy: the alpha where the free
  entropies of two stable fixed points are equal, if alpha(q) is not monotone ('not in range' otherwise).
- ``alpha_alg``: where state evolution from q -> 0+ (GAMP from an uninformative start) reaches the Bayes-optimal
  overlap: sup of alpha(q) over the lower branch, a fold where it is an interior maximum (a hard phase between
  alpha_it and alpha_alg); equal to alpha_it when alpha(q) is monotone (no hard phase).
- ``alpha_spinodal``: the lowest alpha where the informative fixed point exists (delta = 0: 1/L, q = 1 turns
  stable; delta > 0: an interior minimum of alpha(q), or 'not in range').

None of them depends on omega < 1, A or sigma: the channel does not (docs/bayes.md).  omega = 1: the labels reveal
nothing, every record is 'not in range'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from attnphase.errors import InputError
from attnphase.theory.bayes.channel import check_block, check_delta
from attnphase.theory.bayes.state_evolution import XTOL, alpha_curve, alpha_of_q, alpha_weak_value, free_entropy
from attnphase.theory.transition.records import Critical

NAMES = ("alpha_weak", "alpha_it", "alpha_alg", "alpha_spinodal")
# Relative accuracy of alpha(q) (the quadrature's error estimate is ~1e-12; this leaves room) and the interval it
# gives a threshold, plus the root finder's tolerance.
RTOL = 1e-9


def _exact(name: str, value: float, method: str, reason: str = "", kind: str = "crossing") -> Critical:
    half = RTOL * abs(value) + XTOL
    return Critical(name, float(value), float(value - half), float(value + half), kind, method, reason)


def _extremum(L: int, delta: float, i: int, sign: float) -> tuple[float, float]:
    """Refine a local maximum (sign = 1) or minimum (sign = -1) of alpha(q) around grid index i."""
    qs, _ = alpha_curve(L, delta)
    lo, hi = qs[max(i - 1, 0)], qs[min(i + 1, len(qs) - 1)]
    res = minimize_scalar(lambda q: -sign * alpha_of_q(q, L, delta), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-10})
    return float(res.x), float(alpha_of_q(float(res.x), L, delta))


@dataclass(frozen=True)
class BayesThresholds:
    """The thresholds of one (L, delta) (records keyed by NAMES); omega only says whether anything is revealed."""

    L: int
    omega: float
    delta: float
    critical: dict[str, Critical]

    def __getitem__(self, name: str) -> Critical:
        return self.critical[name]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"L": self.L, "omega": self.omega, "delta": self.delta}
        for name in NAMES:
            d.update(self.critical[name].to_dict(name))
        return d


def thresholds(L: int = 2, omega: float = 0.3, delta: float = 0.0) -> BayesThresholds:
    """The Bayes-optimal and algorithmic thresholds of the block sign-retrieval channel (module docstring)."""
    from attnphase.setting import check_number

    L, delta = check_block(L), check_delta(delta)
    omega = check_number("omega", omega)
    if not 0.0 <= omega <= 1.0:
        raise InputError(f"omega must lie in [0, 1], got {omega:g}")
    if omega == 1.0:
        why = "omega = 1: T = A, the labels reveal nothing about the teacher (overlap 0 at every alpha)"
        return BayesThresholds(L, omega, delta, {n: Critical.missing(n, "not in range", why, "channel") for n in NAMES})
    out: dict[str, Critical] = {}
    aw = alpha_weak_value(L, delta)
    out["alpha_weak"] = _exact("alpha_weak", aw, "linearised state evolution at q = 0: alpha = (1 + delta)^2 / "
                               "(L (L + 1))", kind="pitchfork")
    qs, a = alpha_curve(L, delta)
    da = np.diff(a)
    maxima = [i for i in range(1, len(a) - 1) if da[i - 1] > 0 >= da[i]]
    minima = [i for i in range(1, len(a) - 1) if da[i - 1] < 0 <= da[i]]
    if delta == 0.0:
        a_it = 1.0 / L
        if maxima:
            q_f, a_f = _extremum(L, delta, maxima[0], 1.0)
            q_jump = min(brentq(lambda q: alpha_of_q(q, L, delta) - a_it, qs[0], q_f, xtol=XTOL), q_f)
            note = f"first order: the overlap jumps from {q_jump:.4g} to 1"
            out["alpha_alg"] = _exact("alpha_alg", a_f, "fold of the lower branch: maximum of alpha(q) "
                                      f"(at q = {q_f:.6g})", kind="fold")
        else:
            note = "continuous: the overlap reaches 1 as alpha -> 1/L"
            out["alpha_alg"] = _exact("alpha_alg", a_it, "alpha(q) increases on (0, 1): no hard phase, state evolution "
                                      "from q -> 0+ reaches q = 1 at alpha_it", "equal to alpha_it")
        out["alpha_it"] = _exact("alpha_it", a_it, "free entropy: phi(q) ~ (1 - alpha L)/2 log(1 - q) as q -> 1, "
                                 "perfect recovery is its global maximum iff alpha > 1/L", note)
        out["alpha_spinodal"] = _exact("alpha_spinodal", a_it, "q = 1 is a stable fixed point iff alpha > 1/L "
                                       "(E||g_out||^2 = L / (1 - q) + O(1))", kind="fold")
        return BayesThresholds(L, omega, delta, out)
    if not maxima:
        none = "alpha(q) increases on (0, 1): the overlap grows continuously, no first-order transition"
        out["alpha_it"] = Critical.missing("alpha_it", "not in range", none, "alpha(q) on a grid")
        out["alpha_alg"] = Critical.missing("alpha_alg", "not in range", none, "alpha(q) on a grid")
        out["alpha_spinodal"] = Critical.missing("alpha_spinodal", "not in range", none, "alpha(q) on a grid")
        return BayesThresholds(L, omega, delta, out)
    q_f, a_f = _extremum(L, delta, maxima[0], 1.0)
    later = [i for i in minima if qs[i] > q_f]
    q_s, a_s = _extremum(L, delta, later[0], -1.0)
    out["alpha_alg"] = _exact("alpha_alg", a_f, f"fold of the lower branch: maximum of alpha(q) (q = {q_f:.6g})",
                              kind="fold")
    out["alpha_spinodal"] = _exact("alpha_spinodal", a_s, f"fold of the upper branch: minimum of alpha(q) "
                                   f"(q = {q_s:.6g})", kind="fold")

    def gap(alpha: float) -> float:
        lo = brentq(lambda q: alpha_of_q(q, L, delta) - alpha, qs[0], q_f, xtol=XTOL)
        hi = brentq(lambda q: alpha_of_q(q, L, delta) - alpha, q_s, qs[-1], xtol=XTOL)
        return free_entropy(hi, alpha, L, delta) - free_entropy(lo, alpha, L, delta)

    eps = 1e-9 * a_f
    root = brentq(gap, a_s + eps, a_f - eps, xtol=XTOL)
    out["alpha_it"] = _exact("alpha_it", root, "equal free entropies of the two stable fixed points (brentq)",
                             "first order")
    return BayesThresholds(L, omega, delta, out)
