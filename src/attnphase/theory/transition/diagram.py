"""The phase diagram: transition() across omega, and the omega above which the positional minimum stays global.

phase_diagram runs one transition per omega (in parallel processes with workers > 1); positional_limit
root-finds in omega where alpha_c(omega) reaches alpha_max.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attnphase.errors import InputError
from attnphase.setting import Setting, check_number
from attnphase.theory.transition.driver import check_transition_args, transition
from attnphase.theory.transition.records import Critical, Search, TransitionResult


def _transition_task(args: tuple) -> TransitionResult:
    setting, kwargs = args
    return transition(setting, **kwargs)


def phase_diagram(setting: Setting, omegas: Sequence[float], alpha_max: float = 2.0, precision: str = "fast",
                  progress: bool = True, workers: int = 1, **kwargs: Any) -> list[TransitionResult]:
    """transition() for each omega, in parallel processes (attnphase.parallel) with workers > 1.  All options
    are validated before any work starts."""
    from attnphase.parallel import check_workers, map_tasks

    check_workers(workers)
    settings = [setting.replace(omega=float(w)) for w in omegas]
    if not settings:
        raise InputError("phase_diagram: no omegas given")
    kw = dict(alpha_max=alpha_max, precision=precision, **kwargs)
    check_transition_args(kw.get("alpha_min", 0.05), alpha_max, kw.get("n_grid", 12), precision,
                          kw.get("xtol", 0.01), kw.get("seed", 0))
    if len(settings) == 1:
        # One omega: in this process, whose compiled kernel already uses every core (measured on 2 cores:
        # 8.1 s, against 12.2 s with the positional branch in a second process, workers=2 inside).
        return [transition(settings[0], **kw)]
    return map_tasks(_transition_task, [(s, kw) for s in settings], workers=workers, progress=progress,
                     desc="phase diagram", unit="omega")


def positional_limit(setting: Setting, omega_lo: float, omega_hi: float, alpha_max: float = 2.0,
                     precision: str = "fast", tol: float = 0.005, **kwargs: Any) -> Critical:
    """The omega above which the positional minimum is global for every alpha <= alpha_max: the root in omega
    of alpha_c(omega) = alpha_max, between omega_lo (alpha_c found below alpha_max) and omega_hi (alpha_c above
    range).  Regula falsi on alpha_c(omega) - alpha_max where alpha_c is found, bisection where it is not; the
    interval is the final omega bracket (widened by alpha_c's own interval through the local slope)."""
    lo, hi = check_number("omega_lo", omega_lo), check_number("omega_hi", omega_hi)
    if not 0 <= lo < hi <= 1:
        raise InputError(f"need 0 <= omega_lo < omega_hi <= 1, got {lo:g}, {hi:g}")
    tol = check_number("tol", tol)
    if tol <= 0:
        raise InputError(f"tol must be > 0, got {tol:g}")

    def alpha_c(w: float) -> Critical:
        return transition(setting.replace(omega=w), alpha_max=alpha_max, precision=precision, **kwargs).critical[
            "alpha_c"]

    c_lo, c_hi = alpha_c(lo), alpha_c(hi)
    if not (c_lo.found and c_lo.value < alpha_max):
        return Critical.missing("omega_positional", "not in range", f"alpha_c(omega = {lo:g}) not below {alpha_max:g}")
    if c_hi.search != Search.above_range:
        return Critical.missing("omega_positional", "not in range", f"alpha_c(omega = {hi:g}) is not above range")
    f_lo = c_lo.value - alpha_max
    half_lo = (c_lo.hi - c_lo.lo) / 2
    for _ in range(12):
        if hi - lo < tol:
            break
        # alpha_c grows faster than linearly toward the limit: never step closer than a quarter to either end.
        w = lo + (hi - lo) * 0.5
        if f_lo < 0 and c_hi.found:
            w = lo + (hi - lo) * min(max(-f_lo / (c_hi.value - alpha_max - f_lo), 0.25), 0.75)
        c = alpha_c(w)
        if c.found and c.value < alpha_max:
            lo, c_lo, f_lo, half_lo = w, c, c.value - alpha_max, (c.hi - c.lo) / 2
        else:
            hi, c_hi = w, c
    mid = 0.5 * (lo + hi)
    return Critical("omega_positional", mid, lo, hi, "crossing",
                    f"bisection on omega of alpha_c(omega) = {alpha_max:g} to {tol:g} (last alpha_c below: "
                    f"{c_lo.value:.4g} +- {half_lo:.2g})")
