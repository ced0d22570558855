"""Size of a theory job before it runs: the memory one fixed point needs and a rough time, from the sizes alone.

A fixed point integrates over n = 2^log2_points Gaussian points (the precision's) in L (r + r*) dimensions; the
general proximal step holds several (n, L, L) arrays at once (targets, attention, their derivatives: measured, one
of them was the 61 GiB allocation of L = 1000).  Its time grows with n and faster than linearly in L (a Newton step
in L r dimensions per point, softmaxes over L tokens).  The constants are measured on this project's 2-core machine
(docs/numerics.md, "What a fixed point costs"); the estimates are meant to tell a minute from a day, not to the second.
"""

from __future__ import annotations

from attnphase.errors import InputError
from attnphase.resources import USABLE_FRACTION, available_host_memory
from attnphase.setting import Setting
from attnphase.theory.state_evolution.precision import get_precision

# (n, L, L) float64 arrays alive at once in the general proximal step, and (n, L (r + r*)) point arrays.
_LL_ARRAYS = 8
_POINT_ARRAYS = 6
_BASE_BYTES = 300 * 2**20  # the interpreter, numpy, numba's compiled kernels
# Seconds per fixed point, one process: the study's geometry (compiled two-token path) by precision, and the general
# path's c n L^1.6 ((r + r*) / 2)^2.  Measured per point (mean over a curve, all branches, `theory --json`'s seconds):
# study fast 0.07-0.1, default 0.2, high 5.6; general fast L = 3: 0.93, L = 4: 2.0, L = 8: 4.2, L = 20: 33, r = 2:
# 1.07, default L = 3: 3.5, which c = 2.5e-5 meets within a factor 1.5.  (Before: 1 / 4 / 40 s and 3e-4 n L, measured
# on older code, 5-20x above these: a note of "roughly 2 min" for the study's 13 s curve.)
_STUDY_SECONDS = {"fast": 0.1, "default": 0.3, "high": 6.0}
_GENERAL_SECONDS = 2.5e-5
_GENERAL_L_POWER = 1.6
# A job estimated above this many seconds gets a note with the estimate before it starts.
NOTE_SECONDS = 60.0
# A job estimated above this is refused unless asked for (allow_long; the CLI's --allow-long): a typo such as
# --rank 1000 (estimated at months) must not start, and a user who means it can say so.
REFUSE_SECONDS = 86400.0


def fixed_point_bytes(setting: Setting, precision: str = "default") -> int:
    """Peak bytes of one fixed point's solve (one process)."""
    prec = get_precision(precision)
    n = 2 ** prec.log2_points
    L, dim = setting.L, setting.L * (setting.field_rank + setting.r_star)
    if setting.is_study_geometry and not setting.untied:
        return _BASE_BYTES + n * 8 * 4 * _POINT_ARRAYS
    return _BASE_BYTES + n * 8 * (_LL_ARRAYS * L * L + _POINT_ARRAYS * dim)


def fixed_point_seconds(setting: Setting, precision: str = "default") -> float:
    """A rough time for one fixed point in one process."""
    prec = get_precision(precision)
    if setting.is_study_geometry and not setting.untied:
        return _STUDY_SECONDS.get(prec.name, 0.3)
    n = 2 ** prec.log2_points
    width = (setting.field_rank + setting.r_star) / 2.0
    return max(_STUDY_SECONDS.get(prec.name, 0.3), _GENERAL_SECONDS * n * setting.L**_GENERAL_L_POWER * width**2)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def check_theory_size(setting: Setting, n_points: int, precision: str = "default", workers: int = 1,
                      available: int | None = None, allow_long: bool = False) -> str | None:
    """Refuse (InputError, one line) a job whose fixed points do not fit in memory `workers` at a time, or (unless
    `allow_long`) whose estimated time exceeds REFUSE_SECONDS; return a note with the estimated time when it is
    long (None otherwise)."""
    per = fixed_point_bytes(setting, precision)
    # Suggest only what the user has not already asked for.
    hint = "a smaller L" if get_precision(precision).name == "fast" else "a smaller L or precision 'fast'"
    at_once = max(1, min(int(workers), int(n_points)))
    avail = (available_host_memory() if available is None else available) * USABLE_FRACTION
    if per * at_once > avail:
        raise InputError(
            f"L = {setting.L}, r = {setting.r}, r* = {setting.r_star}, precision {precision}: one fixed point needs "
            f"about {per / 2**30:.3g} GiB{f' ({at_once} at once)' if at_once > 1 else ''}, more than the "
            f"{avail / 2**30:.3g} GiB usable here (use {hint})")
    seconds = fixed_point_seconds(setting, precision) * n_points / at_once
    if seconds > REFUSE_SECONDS and not allow_long:
        raise InputError(
            f"{n_points} fixed point(s) at L = {setting.L}, r = {setting.r}, r* = {setting.r_star}, precision "
            f"{precision}: roughly {_duration(seconds)} on {at_once} process(es), more than the "
            f"{_duration(REFUSE_SECONDS)} accepted without --allow-long (Python: allow_long=True)")
    if seconds > NOTE_SECONDS:
        return (f"{n_points} fixed point(s) at L = {setting.L}, precision {precision}: roughly {_duration(seconds)} "
                f"on {at_once} process(es) (a rough estimate; progress counts points)")
    return None
