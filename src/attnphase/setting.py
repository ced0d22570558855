"""The problem: a validated, immutable description of the attention model (docs/model.md).

Every number attnphase prints is computed for a :class:`Setting`.  The defaults are the study's
(sigma = 0.5, lambda = 0.01, A = [[0.6, 0.4], [0.4, 0.6]], omega = 0.3, L = 2, r = r* = 1, antipodal
positional encodings p_1 = -p_2 = (1, ..., 1)/sqrt(d)).

General settings: L >= 2 tokens, student rank r, teacher rank r*, any row-stochastic L x L matrix A, and
positional encodings given by their Gram matrix G_lk = p_l . p_k (presets ``antipodal`` (L = 2 only),
``orthogonal`` (G = I), ``simplex`` (unit norms, zero mean), or a user-given positive semi-definite matrix).

Numbers must be numbers: a string or a bool where a number is expected is a TypeError (one rule for the
whole API); values out of range are a ValueError naming the parameter.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnphase.errors import InputError, InputTypeError

STUDY_A = ((0.6, 0.4), (0.4, 0.6))
APPENDIX_A = ((0.3, 0.7), (0.8, 0.2))
POSITION_PRESETS = ("antipodal", "orthogonal", "simplex")
STUDENTS = ("tied", "untied")
# A = (1 - a) I + (a / L) 1 1^T with a = 0.8 gives the study's A at L = 2: the default family for L > 2.
DEFAULT_MIX = 0.8
# Rows of A must sum to 1 within this (e.g. A written to 6 digits); within it they are renormalised exactly.
A_ROW_TOL = 1e-6
# Largest sigma and lambda accepted: far beyond any study, well inside double precision (sigma^4 / lambda^2 appear).
SIGMA_MAX = 1e3
LAM_MAX = 1e6
# Largest alpha accepted (alpha d samples; the equations' hats grow like alpha).
ALPHA_MAX = 1e6
# Largest Gram-matrix entry of the positional encodings accepted (the study's are 1).
GRAM_MAX = 1e12
# Most tokens accepted: A and the Gram matrix are L x L (built, checked and stored as tables: ~1 s at L = 1000), and
# a fixed point holds (n, L, L) arrays (61 GiB at L = 1000).  Far beyond the study's L = 2 (the histogram task's 10).
L_MAX = 1000
# Most student or teacher rank directions accepted: the equations carry L (r + r*) dimensional integrals (the study's
# rank is 1; rank 1000 was estimated at months of solving).
RANK_MAX = 1000


def check_L(L: Any) -> int:
    """A number of tokens: an integer in [2, L_MAX], checked before any L x L array is built."""
    L = check_int("L", L, 2)
    if L > L_MAX:
        raise InputError(f"L must be at most {L_MAX} (A and the positional Gram matrix are L x L tables, a fixed point "
                         f"holds (n, L, L) arrays), got {L}")
    return L


def check_number(name: str, value: Any) -> float:
    """A finite real number (int, float or numpy scalar; not bool, not str), as a float."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise InputTypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise InputError(f"{name} must be finite, got {value!r}")
    return x


def check_positive(name: str, value: Any) -> float:
    """A finite real number > 0, as a float (check_number, then the sign)."""
    x = check_number(name, value)
    if x <= 0:
        raise InputError(f"{name} must be > 0, got {x:g}")
    return x


def check_int(name: str, value: Any, minimum: int | None = None) -> int:
    """An integer (int or numpy integer; not bool, not float, not str), optionally >= minimum."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise InputTypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    v = int(value)
    if minimum is not None and v < minimum:
        raise InputError(f"{name} must be >= {minimum}, got {v}")
    return v


# Kept for callers of the first version.
_finite = check_number


def check_alpha(alpha: Any) -> float:
    """Validate a sample complexity alpha = n/d (finite, > 0)."""
    a = check_number("alpha", alpha)
    if a <= 0:
        raise InputError(f"alpha must be > 0, got {a:g}")
    if a > ALPHA_MAX:
        raise InputError(f"alpha must be at most {ALPHA_MAX:g}, got {a:g}")
    return a


def parse_matrix(text: str, name: str = "A") -> tuple[tuple[float, ...], ...]:
    """Parse "a11,a12;a21,a22" into a tuple of rows (no validation of the values here)."""
    rows = [r for r in str(text).strip().split(";")]
    try:
        out = tuple(tuple(float(v) for v in row.split(",")) for row in rows)
    except ValueError:
        raise InputError(f"{name} must look like 'a11,a12;a21,a22', got {text!r}") from None
    return out


def mixing_A(L: int, a: float = DEFAULT_MIX) -> tuple[tuple[float, ...], ...]:
    """A = (1 - a) I + (a / L) 1 1^T: row-stochastic; a = 0.8 gives the study's A at L = 2."""
    L = check_L(L)
    a = check_number("a", a)
    if not 0.0 <= a <= 1.0:
        raise InputError(f"a must lie in [0, 1], got {a:g}")
    M = (1.0 - a) * np.eye(L) + (a / L) * np.ones((L, L))
    return tuple(tuple(float(v) for v in row) for row in M)


def gram_preset(name: str, L: int) -> np.ndarray:
    """Gram matrix of a named positional code for L tokens."""
    if name == "antipodal":
        if L != 2:
            raise InputError(f"positions 'antipodal' exist for L = 2 only (got L = {L}); use 'simplex' or 'orthogonal'")
        return np.array([[1.0, -1.0], [-1.0, 1.0]])
    if name == "orthogonal":
        return np.eye(L)
    if name == "simplex":
        # Unit norms, p_1 + ... + p_L = 0 (the regular simplex); equals 'antipodal' at L = 2.
        return (L / (L - 1.0)) * (np.eye(L) - np.ones((L, L)) / L)
    raise InputError(f"positions must be one of {', '.join(POSITION_PRESETS)} or an L x L matrix, got {name!r}")


def _as_matrix(name: str, value: Any) -> np.ndarray:
    if isinstance(value, str):
        value = parse_matrix(value, name)
    if isinstance(value, np.ndarray):
        arr = value
    else:
        try:
            rows = [list(r) for r in value]
        except TypeError:
            raise InputTypeError(f"{name} must be a matrix (rows of numbers), got {value!r}") from None
        for row in rows:
            for v in row:
                check_number(name, v)
        try:
            arr = np.array(rows, dtype=float)
        except ValueError:
            raise InputError(f"{name} must be a square matrix with rows of equal length, got {value!r}") from None
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise InputTypeError(f"{name} must hold numbers, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise InputTypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    arr = np.array(arr, dtype=float)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise InputError(f"{name} must be a square matrix, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{name} must contain only finite numbers")
    return arr


def _frozen(arr: np.ndarray) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(float(v) for v in row) for row in arr)


@dataclass(frozen=True)
class Setting:
    """The model's parameters.  Immutable; build variants with :meth:`replace`.

    omega     : weight of the positional part of the target attention, in [0, 1].
    sigma     : token standard deviation (x_l ~ N(0, sigma^2 I_d)), > 0.
    lam       : ridge penalty lambda >= 0 on Q (the risk is a sum over samples).
    A         : fixed row-stochastic L x L positional attention matrix (default: the study's for L = 2,
                ``mixing_A(L)`` otherwise).
    r, r_star : ranks of the student Q (d x r) and of the teacher Q* (d x r*).
    positions : Gram matrix of the positional encodings: 'antipodal' (L = 2), 'orthogonal', 'simplex', or
                an L x L positive semi-definite matrix (nested lists, array or "g11,g12;g21,g22").
                Default: 'antipodal' for L = 2, 'simplex' otherwise.
    L         : number of tokens; optional when A is given (then it must agree with A).
    student   : "tied" (Q = K, the study's) or "untied" (separate Q and K, docs/untied.md).  The theory solves the
                untied student as the tied engine at field rank 2r with the scores h^Q h^K^T (:attr:`field_rank`).
    """

    omega: float = 0.3
    sigma: float = 0.5
    lam: float = 0.01
    A: Any = None
    r: int = 1
    r_star: int = 1
    positions: Any = None
    L: Any = None
    student: str = "tied"
    _A_array: np.ndarray = field(init=False, repr=False, compare=False, hash=False)
    _G_array: np.ndarray = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        omega = check_number("omega", self.omega)
        if not 0.0 <= omega <= 1.0:
            raise InputError(f"omega must lie in [0, 1], got {omega:g}")
        sigma = check_number("sigma", self.sigma)
        if sigma <= 0:
            raise InputError(f"sigma must be > 0, got {sigma:g}")
        if sigma > SIGMA_MAX:
            raise InputError(f"sigma must be at most {SIGMA_MAX:g} (sigma^4 enters the equations; the study's is 0.5), "
                             f"got {sigma:g}")
        lam = check_number("lam", self.lam)
        if lam < 0:
            raise InputError(f"lambda must be >= 0, got {lam:g}")
        if lam > LAM_MAX:
            raise InputError(f"lambda must be at most {LAM_MAX:g} (the study's is 0.01), got {lam:g}")
        r = check_int("r", self.r, 1)
        r_star = check_int("r_star", self.r_star, 1)
        for name, value in (("r", r), ("r_star", r_star)):
            if value > RANK_MAX:
                raise InputError(f"{name} must be at most {RANK_MAX} (the equations integrate in L (r + r*) "
                                 f"dimensions; the study's rank is 1), got {value}")
        L = None if self.L is None else check_L(self.L)
        if not isinstance(self.student, str):
            raise InputTypeError(f"student must be a string, got {type(self.student).__name__} {self.student!r}")
        if self.student not in STUDENTS:
            raise InputError(f"student must be one of {', '.join(STUDENTS)}, got {self.student!r}")
        if self.A is None:
            arr = np.array(STUDY_A if L in (None, 2) else mixing_A(L))
        else:
            arr = _as_matrix("A", self.A)
        if arr.shape[0] < 2:
            raise InputError(f"A must be a square L x L matrix with L >= 2, got shape {arr.shape}")
        if arr.shape[0] > L_MAX:
            raise InputError(f"A is {arr.shape[0]} x {arr.shape[0]}: L must be at most {L_MAX}")
        if L is not None and arr.shape[0] != L:
            raise InputError(f"A is {arr.shape[0]} x {arr.shape[0]} but L = {L}")
        L = arr.shape[0]
        if np.any(arr < 0):
            raise InputError("A must have non-negative entries")
        sums = arr.sum(axis=1)
        if np.max(np.abs(sums - 1.0)) > A_ROW_TOL:
            raise InputError(f"A must be row-stochastic (rows sum to 1 within {A_ROW_TOL:g}), row sums are "
                             f"{sums.tolist()}")
        # The one tolerance, applied once, here: rows within A_ROW_TOL of 1 are renormalised, so that everything
        # downstream (the proximal kernels check T's rows to 1e-8) sees an exactly row-stochastic matrix.
        off = np.abs(sums - 1.0) > 1e-12
        if np.any(off):
            arr = arr.copy()
            arr[off] = arr[off] / sums[off, None]
        pos = self.positions
        if pos is None:
            pos = "antipodal" if L == 2 else "simplex"
        if isinstance(pos, str) and not any(c.isdigit() for c in pos):
            G = gram_preset(pos.strip().lower(), L)
            pos = pos.strip().lower()
        else:
            G = _as_matrix("positions", pos)
            big = float(np.abs(G).max())
            if big > GRAM_MAX:
                raise InputError(f"positions (Gram matrix) entries must be at most {GRAM_MAX:g} in size (the fields "
                                 f"p_l . Q would overflow the softmax), got {big:g}")
            if G.shape[0] != L:
                raise InputError(f"positions (Gram matrix) is {G.shape[0]} x {G.shape[0]} but L = {L}")
            if not np.allclose(G, G.T, atol=1e-10):
                raise InputError("positions (Gram matrix) must be symmetric")
            if np.linalg.eigvalsh(G).min() < -1e-10 * max(1.0, float(np.abs(G).max())):
                raise InputError("positions (Gram matrix) must be positive semi-definite")
            pos = _frozen(G)
        object.__setattr__(self, "omega", omega)
        object.__setattr__(self, "sigma", sigma)
        object.__setattr__(self, "lam", lam)
        object.__setattr__(self, "r", r)
        object.__setattr__(self, "r_star", r_star)
        object.__setattr__(self, "L", L)
        object.__setattr__(self, "A", _frozen(arr))
        object.__setattr__(self, "positions", pos)
        arr = np.array(arr, dtype=float)
        arr.setflags(write=False)
        G = np.array(G, dtype=float)
        G.setflags(write=False)
        object.__setattr__(self, "_A_array", arr)
        object.__setattr__(self, "_G_array", G)

    @property
    def A_array(self) -> np.ndarray:
        return self._A_array

    @property
    def gram(self) -> np.ndarray:
        """Gram matrix G_lk = p_l . p_k of the positional encodings (L x L, read-only)."""
        return self._G_array

    @property
    def untied(self) -> bool:
        """The untied student (separate query and key matrices)."""
        return self.student == "untied"

    @property
    def field_rank(self) -> int:
        """Columns of the student field matrix the theory carries: r (tied), 2r (untied: query and key fields)."""
        return 2 * self.r if self.untied else self.r

    @property
    def rho(self) -> float:
        """Teacher self-overlap per rank direction: rho = sigma^2 Q*^T Q* / d -> sigma^2 I_{r*}."""
        return self.sigma**2

    @property
    def rho_matrix(self) -> np.ndarray:
        """rho as the r* x r* matrix sigma^2 I."""
        return self.sigma**2 * np.eye(self.r_star)

    @property
    def is_study_geometry(self) -> bool:
        """L = 2, r = r* = 1 and antipodal positions: the case with the compiled two-dimensional fast path."""
        return self.L == 2 and self.r == 1 and self.r_star == 1 and np.allclose(self.gram, gram_preset("antipodal", 2))

    @property
    def positions_label(self) -> str:
        """The preset's name, or 'custom' for a user-given Gram matrix."""
        return self.positions if isinstance(self.positions, str) else "custom"

    def replace(self, **changes: Any) -> Setting:
        if "A" in changes and "L" not in changes:
            changes["L"] = None
        if "L" in changes and "A" not in changes:
            changes["A"] = None if changes["L"] != self.L else self.A
        if ("L" in changes or "A" in changes) and "positions" not in changes and isinstance(self.positions, tuple):
            changes["positions"] = None
        if ("L" in changes or "A" in changes) and "positions" not in changes and self.positions == "antipodal":
            changes["positions"] = None
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description; the study's setting keeps its first-version keys, plus L and positions (and
        student, only for the untied student)."""
        d = {
            "omega": self.omega,
            "sigma": self.sigma,
            "lam": self.lam,
            "A": [list(r) for r in self.A],
            "r": self.r,
            "r_star": self.r_star,
            "L": self.L,
            "positions": self.positions if isinstance(self.positions, str) else [list(r) for r in self.positions],
        }
        if self.untied:
            d["student"] = self.student
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Setting:
        """Inverse of :meth:`to_dict` (keys missing from first-version records take the study's values)."""
        pos = d.get("positions")
        if isinstance(pos, list):
            pos = tuple(tuple(r) for r in pos)
        A = d.get("A")
        if isinstance(A, list):
            A = tuple(tuple(r) for r in A)
        return cls(omega=d.get("omega", 0.3), sigma=d.get("sigma", 0.5), lam=d.get("lam", 0.01), A=A,
                   r=d.get("r", 1), r_star=d.get("r_star", 1), positions=pos, L=d.get("L"),
                   student=d.get("student", "tied"))

    def require_study_geometry(self) -> None:
        """For code paths that exist only for L = 2, r = r* = 1, antipodal positions (and the tied student)."""
        if self.untied:
            raise InputError("this path implements the tied student only; got student='untied'")
        if not self.is_study_geometry:
            raise InputError(
                f"this path implements L = 2, r = r* = 1, antipodal positions; got L = {self.L}, r = {self.r}, "
                f"r* = {self.r_star}, positions {self.positions_label}"
            )


STUDY = Setting()
