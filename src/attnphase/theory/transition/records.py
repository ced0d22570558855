"""The records of the transition: one Critical record per critical value (value, interval, kind, method, reason) and
the TransitionResult that holds them.  Figures and reports draw and print the records they are given, and never
re-derive them from curves."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
from scipy.special import stdtrit

from attnphase.theory.state_evolution.order import welch_count
from attnphase.theory.state_evolution.results import FixedPoint


# What a critical value is: crossing: root of a difference; pitchfork / fold: a branch end; at spinodal: alpha_c
# where the semantic branch appears below the positional one (no crossing); unknown: a branch end located where the
# solver stops finding the branch, not classified.
class CriticalKind(StrEnum):
    crossing = "crossing"
    pitchfork = "pitchfork"
    fold = "fold"
    at_spinodal = "at spinodal"
    unknown = "unknown"


# How its search ended: found (a value and its interval); above range: alpha_c beyond alpha_max (positional lower
# wherever both exist); not in range: no such value in the searched range; failed: the search broke down.  The
# reason says why, in words, beside the code.
class Search(StrEnum):
    found = "found"
    above_range = "above range"
    not_in_range = "not in range"
    failed = "failed"


KINDS = tuple(k.value for k in CriticalKind)
SEARCHES = tuple(s.value for s in Search)


@dataclass(frozen=True)
class Critical:
    """One critical value with its interval.

    value: the estimate (None when not found); (lo, hi): an interval meant to contain the exact value (integration
    error and root-finding tolerance included); kind: what the value is (one of KINDS; None when there is no
    value); search: how its search ended (one of SEARCHES: "found" exactly when there is a value); method: how it
    was computed; reason: why there is no value, or a note."""

    name: str
    value: float | None
    lo: float | None
    hi: float | None
    kind: CriticalKind | None
    method: str
    reason: str = ""
    search: Search = Search.found

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS} or None, got {self.kind!r}")
        if self.search not in SEARCHES:
            raise ValueError(f"search must be one of {SEARCHES}, got {self.search!r}")
        # plain strings are taken and stored as the enums
        object.__setattr__(self, "kind", None if self.kind is None else CriticalKind(self.kind))
        object.__setattr__(self, "search", Search(self.search))
        if (self.value is not None) != (self.search == Search.found):
            raise ValueError(f"{self.name}: search {self.search.value!r} with value {self.value}: a value is "
                             "reported exactly when the search found it")
        if (self.value is not None) != (self.kind is not None):
            raise ValueError(f"{self.name}: kind {self.kind} with value {self.value}: a found value says what it "
                             "is, a missing one has no kind")
        if self.value is not None and not (self.lo <= self.value <= self.hi):
            raise ValueError(f"{self.name}: value {self.value} outside its interval [{self.lo}, {self.hi}]")

    @property
    def found(self) -> bool:
        return self.value is not None

    @property
    def interval(self) -> tuple[float, float] | None:
        return None if self.value is None else (float(self.lo), float(self.hi))

    @property
    def width(self) -> float | None:
        return None if self.value is None else float(self.hi - self.lo)

    def overlaps(self, other: Critical) -> bool:
        if not (self.found and other.found):
            return False
        return self.lo <= other.hi and other.lo <= self.hi

    @classmethod
    def missing(cls, name: str, search: Search | str, reason: str, method: str = "") -> Critical:
        """No value: ``search`` says how the search ended (not "found"), ``reason`` why in words."""
        return cls(name, None, None, None, None, method, reason, search)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Critical:
        """The record back from :func:`dataclasses.asdict` (JSON); records written before ``search`` existed
        kept the search outcome in ``kind`` and are read as such."""
        kw = dict(d)
        if "search" not in kw:
            kind = kw.get("kind")
            if kind in SEARCHES:
                kw["kind"], kw["search"] = None, kind
            else:
                kw["search"] = Search.found if kw.get("value") is not None else Search.failed
        return cls(**kw)

    def to_dict(self, prefix: str | None = None) -> dict[str, Any]:
        p = prefix or self.name
        return {p: self.value, f"{p}_lo": self.lo, f"{p}_hi": self.hi,
                f"{p}_kind": None if self.kind is None else self.kind.value, f"{p}_search": self.search.value,
                f"{p}_method": self.method, f"{p}_reason": self.reason}


def spread_halfwidth(values: Sequence[float], confidence: float = 0.99,
                     also: tuple[float, int] | None = None) -> float:
    """Half-width of a two-sided Student-t confidence interval of the mean of independent replicas.  also: a second,
    independent error of that mean (its standard error, from its own count of scramblings), added in quadrature, the
    quantile's count then Welch-Satterthwaite's (order.welch_count)."""
    k = len(values)
    if k < 2:
        return float("inf")
    sem = float(np.std(values, ddof=1)) / math.sqrt(k)
    count: float = k
    if also is not None:
        count = welch_count([(sem, k), also])
        sem = float(np.hypot(sem, also[0]))
    # (scipy.special's quantile, the one scipy.stats.t.ppf calls: the same bits without importing scipy.stats, 0.45 s)
    return float(stdtrit(count - 1, 0.5 + confidence / 2)) * sem


def joined(*reasons: str) -> str:
    """A critical value's reasons in one field: the non-empty ones, in order, separated by "; "."""
    return "; ".join(r for r in reasons if r)


NAMES = ("alpha_c", "alpha_l", "alpha_sem_appears", "alpha_pos_vanishes")
# The other records, where the setting has them: the pitchfork conditions the branch ends were held against, the
# positional branch's appearance, and for a tied student of rank >= 2 the mixed branch's (where alpha_c can come from).
EXTRA_NAMES = ("alpha_pos_appears", "semantic_pitchfork", "positional_pitchfork", "alpha_mixed_appears",
               "mixed_pitchfork", "positional_saddle")


@dataclass
class TransitionResult:
    """The critical values of one setting (records in ``critical``, keyed by NAMES plus the pitchforks
    ``semantic_pitchfork`` and ``positional_pitchfork``, and for a tied student of rank >= 2 ``alpha_mixed_appears``
    and ``mixed_pitchfork``, otherwise for a tied student ``positional_saddle``: where the positional point turns
    unstable along theta), the branch curves solved on the way (not checked along theta: solve's stability=False;
    solve_curve gives the checked points), and the unstable parts of the branches (rows alpha, q, V, m, theta) for
    dashed curves."""

    omega: float
    critical: dict[str, Critical]
    test_error_linear: float
    alpha_range: tuple[float, float]
    curves: dict[str, list[FixedPoint]] = field(default_factory=dict)
    unstable: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    solves: int = 0  # fixed points solved (each: all scramblings)
    map_evaluations: int = 0  # evaluations of the map spent on the branch ends
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # this process's CPU time: comparable across loads of a shared machine

    # The flat attributes of the first version (figures and the report read these).
    def _value(self, name: str) -> float | None:
        return self.critical[name].value

    def _interval(self, name: str) -> tuple[float, float] | None:
        return self.critical[name].interval

    alpha_c = property(lambda self: self._value("alpha_c"))
    alpha_l = property(lambda self: self._value("alpha_l"))
    alpha_sem_appears = property(lambda self: self._value("alpha_sem_appears"))
    alpha_pos_vanishes = property(lambda self: self._value("alpha_pos_vanishes"))
    alpha_c_bracket = property(lambda self: self._interval("alpha_c"))
    alpha_l_bracket = property(lambda self: self._interval("alpha_l"))
    alpha_sem_appears_bracket = property(lambda self: self._interval("alpha_sem_appears"))
    alpha_pos_vanishes_bracket = property(lambda self: self._interval("alpha_pos_vanishes"))

    @property
    def reasons(self) -> dict[str, str]:
        return {k: c.reason for k, c in self.critical.items() if k in NAMES and c.reason}

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"omega": self.omega}
        for name in NAMES:
            d.update(self.critical[name].to_dict(name))
        for name in EXTRA_NAMES:
            if name in self.critical:
                d.update(self.critical[name].to_dict(name))
        d["test_error_linear"] = self.test_error_linear
        d["note"] = "; ".join(f"{k}: {v}" for k, v in self.reasons.items())
        return d
