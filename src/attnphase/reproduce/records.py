"""JSON forms of theory results (fixed points, transitions), so that stored and fresh results are
interchangeable for the figures and the report."""

from __future__ import annotations

import dataclasses
import enum
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnphase.theory.model.overlaps import HatOverlaps, Overlaps
from attnphase.theory.state_evolution.results import FixedPoint


def _jsonable(v: Any) -> Any:
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    return v


def fixed_point_to_json(fp: FixedPoint) -> dict[str, Any]:
    return _jsonable(dataclasses.asdict(fp))


def _restore(cls: type, values: Mapping[str, Any]) -> Any:
    """Rebuild a result dataclass from JSON: enums from their values, arrays from lists."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kw: dict[str, Any] = {}
    for name, value in values.items():
        if name not in names:
            continue
        hint = hints.get(name)
        if isinstance(hint, type) and issubclass(hint, enum.Enum) and not isinstance(value, hint):
            value = hint(value)
        elif isinstance(value, list) and "ndarray" in str(hint):
            value = np.asarray(value, dtype=float)
        kw[name] = value
    return cls(**kw)


def fixed_point_from_json(d: Mapping[str, Any]) -> FixedPoint:
    kw = dict(d)
    kw["overlaps"] = _restore(Overlaps, kw["overlaps"])
    kw["hats"] = _restore(HatOverlaps, kw["hats"])
    return _restore(FixedPoint, kw)


def _opt_float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _opt_pair(v: Any) -> tuple[float, float] | None:
    if v is None:
        return None
    try:
        a, b = (float(x) for x in v)
    except (TypeError, ValueError):
        return None
    return (a, b) if math.isfinite(a) and math.isfinite(b) else None


@dataclass
class TransitionRecord:
    """A JSON-serialisable copy of a ``TransitionResult`` with the same attributes, so that cached and
    freshly computed transitions are interchangeable for the figures and the report."""

    omega: float
    alpha_c: float | None
    alpha_c_bracket: tuple[float, float] | None
    alpha_l: float | None
    alpha_l_bracket: tuple[float, float] | None
    test_error_linear: float | None
    alpha_sem_appears: float | None
    alpha_pos_vanishes: float | None
    reasons: dict[str, str]
    curves: dict[str, list[FixedPoint]]
    alpha_sem_appears_bracket: tuple[float, float] | None = None
    alpha_pos_vanishes_bracket: tuple[float, float] | None = None
    # The theory's records (value, interval, kind, method, reason) and unstable branch parts, kept whole so
    # that figures and report show the kinds the theory assigned ("pitchfork", "at spinodal", ...).
    critical: dict[str, Any] = dataclasses.field(default_factory=dict)
    unstable: dict[str, list[dict[str, float]]] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_result(cls, tr: Any) -> TransitionRecord:
        from attnphase.theory.transition.records import Critical

        crit = {str(k): (c if isinstance(c, Critical) else Critical.from_dict(c))
                for k, c in (getattr(tr, "critical", None) or {}).items()}
        return cls(
            omega=float(tr.omega),
            alpha_c=_opt_float(tr.alpha_c),
            alpha_c_bracket=_opt_pair(getattr(tr, "alpha_c_bracket", None)),
            alpha_l=_opt_float(tr.alpha_l),
            alpha_l_bracket=_opt_pair(getattr(tr, "alpha_l_bracket", None)),
            test_error_linear=_opt_float(getattr(tr, "test_error_linear", None)),
            alpha_sem_appears=_opt_float(getattr(tr, "alpha_sem_appears", None)),
            alpha_pos_vanishes=_opt_float(getattr(tr, "alpha_pos_vanishes", None)),
            reasons={str(k): str(v) for k, v in (getattr(tr, "reasons", None) or {}).items()},
            curves={str(b): list(pts) for b, pts in (getattr(tr, "curves", None) or {}).items()},
            alpha_sem_appears_bracket=_opt_pair(getattr(tr, "alpha_sem_appears_bracket", None)),
            alpha_pos_vanishes_bracket=_opt_pair(getattr(tr, "alpha_pos_vanishes_bracket", None)),
            critical=crit,
            unstable={str(k): [dict(r) for r in rows] for k, rows in (getattr(tr, "unstable", None) or {}).items()},
        )

    def to_json(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("curves", "critical")}
        d["critical"] = {k: _jsonable(dataclasses.asdict(c)) for k, c in self.critical.items()}
        d["curves"] = {b: [fixed_point_to_json(p) for p in pts] for b, pts in self.curves.items()}
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TransitionRecord:
        kw = dict(d)
        for name in ("alpha_c", "alpha_l", "alpha_sem_appears", "alpha_pos_vanishes"):
            kw[f"{name}_bracket"] = _opt_pair(kw.get(f"{name}_bracket"))
        kw["curves"] = {b: [fixed_point_from_json(p) for p in pts] for b, pts in kw.get("curves", {}).items()}
        from attnphase.theory.transition.records import Critical

        kw["critical"] = {k: Critical.from_dict(c) for k, c in (kw.get("critical") or {}).items()}
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        """The flat row of ``TransitionResult.to_dict()``."""
        c, l_ = self.alpha_c_bracket or (None, None), self.alpha_l_bracket or (None, None)
        return {
            "omega": self.omega, "alpha_c": self.alpha_c, "alpha_c_lo": c[0], "alpha_c_hi": c[1],
            "alpha_l": self.alpha_l, "alpha_l_lo": l_[0], "alpha_l_hi": l_[1],
            "test_error_linear": self.test_error_linear, "alpha_sem_appears": self.alpha_sem_appears,
            "alpha_pos_vanishes": self.alpha_pos_vanishes,
            "note": "; ".join(f"{k}: {v}" for k, v in self.reasons.items()),
        }


