"""Result containers of the theory engine: :class:`FixedPoint` (built on the generic solver's status)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnphase.errors import InputError, InputTypeError
from attnphase.notes import Note, NoteCode, as_notes
from attnphase.setting import Setting
from attnphase.theory.model.overlaps import HatOverlaps, Overlaps
from attnphase.theory.solvers.fixed_point import Status

BRANCHES = ("positional", "semantic", "agnostic")
# The mixed fixed point of a student with r >= 2 (one column positional, another semantic): overlaps.Branch.mixed,
# the free layout and map from the mixed start, its points required to have m and theta.  For r = 1 it does not exist.
MIXED = "mixed"
ALL_BRANCHES = BRANCHES + (MIXED,)


def branches_for(setting: Setting) -> tuple[str, ...]:
    """Every kind of fixed point the setting can have, in the order `--branch all` lists them: positional,
    semantic, agnostic, and for a tied student of rank r >= 2 the mixed one.  (An untied student of rank r >= 2
    could have one too; its start is not built: docs/untied.md, Open.)"""
    return ALL_BRANCHES if (setting.r >= 2 and not setting.untied) else BRANCHES


@dataclass(frozen=True)
class StartRecord:
    """One start a result was chosen from: its name (``default``, ``scaled``, ``wide_m``, ``pattern``, ``mixed``,
    ``ladder``, ``continued`` ...), the status it reached and its training loss (NaN unless
    valid)."""

    name: str
    status: Status
    train_loss: float

    def to_dict(self) -> dict[str, Any]:
        tl = self.train_loss
        return {"name": self.name, "status": self.status.value, "train_loss": tl if math.isfinite(tl) else None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StartRecord:
        # (an older record's ``same_as``, the start whose coarse solve this one's reached, is ignored)
        tl = d.get("train_loss")
        return cls(str(d["name"]), Status(d["status"]), float("nan") if tl is None else float(tl))


def as_status(status: str | Status) -> Status:
    """A Status from a Status or its exact value (a code: free text such as 'collapsed to agnostic' is refused,
    never read by its prefix)."""
    try:
        return Status(status)
    except ValueError:
        raise InputError(f"unknown status {status!r}; one of {', '.join(s.value for s in Status)}") from None


def summaries(o: Overlaps) -> dict[str, float]:
    """Scalars for plots and tables.  Study geometry: q, |m| (= |m_1|), |theta|, V exactly as before.

    q, V: tr(.) / r;  m: root mean square over tokens of |m_l| (= |m_1| when m_2 = -m_1);
    theta: largest singular value (= |theta| for r = r* = 1).  Untied overlaps: see :func:`untied_summaries`."""
    if o.untied:
        return untied_summaries(o)
    r = o.q.shape[0]
    with np.errstate(invalid="ignore"):
        theta_sv = np.linalg.svd(o.theta, compute_uv=False) if np.all(np.isfinite(o.theta)) else [float("nan")]
        return {"q": float(np.trace(o.q) / r), "m": float(np.sqrt(np.sum(o.m**2) / o.m.shape[0])),
                "V": float(np.trace(o.V) / r), "theta": float(np.max(theta_sv))}


def untied_summaries(o: Overlaps) -> dict[str, float]:
    """The untied student's scalars, as the simulation records them (docs/untied.md), with r' = r / 2 and the
    blocks Q (first r' field columns) and K:

    q = tr(q_QK) / r' (the bilinear overlap sigma^2 Q^T K / d), m = sqrt(|tr(m_Q^T m_K)| / L) (= sqrt|m_Q m_K| for
    L = 2, r = 1, m_2 = -m_1), theta = sqrt(largest singular value of theta_Q^T theta_K) (= sqrt|theta_Q theta_K|
    for r' = r* = 1), V = tr(V) / r; per factor q_Q, q_K, q_QK (traces / r'), m_Q, m_K (root mean square over
    tokens of |m_l|), theta_Q, theta_K (largest singular values).  All invariant under the joint rotation."""
    r = o.q.shape[0] // 2
    L = o.m.shape[0]
    mq, mk, tq, tk = o.m[:, :r], o.m[:, r:], o.theta[:r], o.theta[r:]
    finite = bool(np.all(np.isfinite(o.theta)))

    def sv(a: np.ndarray) -> float:
        return float(np.max(np.linalg.svd(a, compute_uv=False))) if finite else float("nan")

    with np.errstate(invalid="ignore"):
        return {"q": float(np.trace(o.q[:r, r:]) / r), "m": float(np.sqrt(abs(np.sum(mq * mk)) / L)),
                "V": float(np.trace(o.V) / (2 * r)), "theta": float(np.sqrt(sv(tq.T @ tk))),
                "q_Q": float(np.trace(o.q[:r, :r]) / r), "q_K": float(np.trace(o.q[r:, r:]) / r),
                "q_QK": float(np.trace(o.q[:r, r:]) / r),
                "m_Q": float(np.sqrt(np.sum(mq**2) / L)), "m_K": float(np.sqrt(np.sum(mk**2) / L)),
                "theta_Q": sv(tq), "theta_K": sv(tk)}


@dataclass(frozen=True)
class SolverHints:
    """What a solve leaves for the next one along a curve (not serialised, not part of the result's value): the
    Newton matrix (I - J)^{-1} at this point, each scrambling's fixed point, this alpha and its predecessor's
    (alpha, scrambling-0 point), and whether the first scrambling converged from the given start.  replicas: each
    scrambling's fixed point as overlaps, in the gauge of their mean (what a quantity of the point that the mean's
    integration error moves is evaluated at, scrambling by scrambling: the positional saddle)."""

    first_scrambling_ok: bool = False
    newton_matrix: np.ndarray | None = None
    replica_x: tuple[np.ndarray, ...] = ()
    alpha: float | None = None
    predecessor: tuple[float, np.ndarray] | None = None
    replicas: tuple[Overlaps, ...] = ()


@dataclass(init=False, frozen=True)
class FixedPoint:
    """A solution of the self-consistent equations on one branch, with error estimates.

    status    : :class:`Status`; only ``ok`` is a result (``converged`` is True iff status is ok; ``valid`` is an
                alias).  Numbers of a non-ok point are kept for diagnosis only.
    warnings  : :class:`~attnphase.notes.Note` records (code + message) that do not invalidate the result (e.g.
                proximal points above the gradient tolerance).
    starts    : :class:`StartRecord` per start tried where the result is the best of several (name, status, train
                loss; empty where one start sufficed).  In to_dict as "starts" (omitted when empty).
    hints     : :class:`SolverHints` for a continuation from this point (never serialised: a point read back with
                :meth:`from_dict` has none, and a solve started from it takes the path of a cold start).
    errors    : one-standard-error integration-error estimates (spread over independent scramblings) of the
                scalar summaries (q, m, V, theta; see :func:`summaries`), train_loss and test_error.
    iterations: exact map evaluations spent (full or continued; the warm evaluations of a chord's speculative steps
                and of the general kernel's basin-held Jacobian are not counted).
    overlaps  : arrays q, V (r x r), m (L x r), theta (r x r*); accessors fp.q, fp.m, fp.V, fp.theta.  For the
                untied student (setting["student"] == "untied") r is the field rank 2r' and the summaries are
                :func:`untied_summaries`.
    """

    alpha: float
    omega: float
    branch: str
    overlaps: Overlaps
    hats: HatOverlaps
    train_loss: float
    test_error: float
    errors: dict[str, float]
    status: Status
    warnings: tuple[Note, ...]
    iterations: int
    residual: float
    message: str
    n_points: int
    n_replicas: int
    seconds: float
    precision: str
    setting: dict[str, Any]
    starts: tuple[StartRecord, ...] = ()
    hints: SolverHints = field(default=SolverHints(), repr=False, compare=False)

    def __init__(self, alpha: float, omega: float, branch: str, overlaps: Overlaps, hats: HatOverlaps,
                 train_loss: float, test_error: float, errors: dict[str, float] | None = None,
                 converged: bool | None = None, iterations: int = 0, residual: float = float("nan"),
                 status: str | Status = Status.ok, warnings: tuple[Note | str, ...] | list[Note | str] = (),
                 message: str = "", n_points: int = 0, n_replicas: int = 0, seconds: float = 0.0,
                 precision: str = "default", setting: dict[str, Any] | None = None,
                 hints: SolverHints | None = None, starts: Sequence[StartRecord] = ()) -> None:
        st = as_status(status)
        if converged is False and st == Status.ok:
            # First-version records: converged = False with an 'ok' text meant 'not converged'.
            st = Status.not_converged
        _set(self, "alpha", float(alpha))
        _set(self, "omega", float(omega))
        _set(self, "branch", str(branch))
        _set(self, "overlaps", overlaps if isinstance(overlaps, Overlaps) else Overlaps(**overlaps))
        if (setting or {}).get("student") == "untied" and not self.overlaps.untied:
            _set(self, "overlaps", self.overlaps.as_untied())  # the summaries are the untied student's
        _set(self, "hats", hats if isinstance(hats, HatOverlaps) else HatOverlaps(**hats))
        _set(self, "train_loss", float(train_loss) if train_loss is not None else float("nan"))
        _set(self, "test_error", float(test_error) if test_error is not None else float("nan"))
        _set(self, "errors", {k: (float("nan") if v is None else v) for k, v in dict(errors or {}).items()})
        _set(self, "status", st)
        _set(self, "warnings", as_notes(warnings))
        _set(self, "iterations", int(iterations))
        _set(self, "residual", float("nan") if residual is None else float(residual))
        _set(self, "message", str(message))
        _set(self, "n_points", int(n_points))
        _set(self, "n_replicas", int(n_replicas))
        _set(self, "seconds", float(seconds))
        _set(self, "precision", str(precision))
        _set(self, "setting", dict(setting or {}))
        _set(self, "starts", tuple(st if isinstance(st, StartRecord) else StartRecord.from_dict(st)
                                   for st in starts))
        _set(self, "hints", hints or SolverHints())

    # -- status
    @property
    def converged(self) -> bool:
        return self.status == Status.ok

    @property
    def valid(self) -> bool:
        """Alias of :attr:`converged`."""
        return self.converged

    # -- arrays
    @property
    def q(self) -> np.ndarray:
        return self.overlaps.q

    @property
    def m(self) -> np.ndarray:
        return self.overlaps.m

    @property
    def V(self) -> np.ndarray:
        return self.overlaps.V

    @property
    def theta(self) -> np.ndarray:
        return self.overlaps.theta

    # -- scalar summaries
    def summary(self) -> dict[str, float]:
        """Scalars q, m, V, theta for plots and tables (see :func:`summaries`)."""
        return summaries(self.overlaps)

    @property
    def m_norm(self) -> float:
        return self.summary()["m"]

    @property
    def theta_norm(self) -> float:
        return self.summary()["theta"]

    @property
    def theta_singular_values(self) -> np.ndarray:
        # A failed solve carries NaN overlaps; LAPACK raises on them, and to_dict must still serialise the row.
        if not np.all(np.isfinite(self.theta)):
            return np.full(min(self.theta.shape), np.nan)
        return np.linalg.svd(self.theta, compute_uv=False)

    @property
    def is_study_shape(self) -> bool:
        """L = 2, r = r* = 1: quantities are reported as plain numbers, as in the first version."""
        return self.overlaps.dims == (2, 1, 1)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready.  Study shape: today's keys as numbers (m = |m_1|, theta = |theta|, scalar hats with
        mhat = alpha E[f_1 - f_2]); otherwise nested lists plus the scalar summaries m_norm, theta_sv."""
        d: dict[str, Any] = {"alpha": self.alpha, "omega": self.omega, "branch": self.branch}
        s = self.summary()
        h = self.hats
        if self.is_study_shape:
            d.update({"q": s["q"], "m": s["m"], "theta": s["theta"], "V": s["V"]})
            hats = {"qhat": float(h.qhat[0, 0]), "mhat": float(abs(h.mhat[0, 0] - h.mhat[1, 0])),
                    "Vhat": float(h.Vhat[0, 0]), "thetahat": float(abs(h.thetahat[0, 0]))}
        else:
            d.update({k: getattr(self.overlaps, k).tolist() for k in ("q", "m", "theta", "V")})
            d.update({"m_norm": s["m"], "theta_sv": self.theta_singular_values.tolist(), "q_trace": float(np.trace(self.q)),
                      "V_trace": float(np.trace(self.V))})
            hats = h.to_dict()
        d.update({"train_loss": self.train_loss, "test_error": self.test_error, "converged": self.converged,
                  "iterations": self.iterations, "residual": self.residual, "status": self.status.value,
                  "warnings": [n.message for n in self.warnings], "warning_codes": [n.code.value for n in self.warnings],
                  "message": self.message})
        d.update(hats)
        for k, v in self.errors.items():
            d[f"{k}_err"] = v
        d.update({"n_points": self.n_points, "n_replicas": self.n_replicas, "seconds": self.seconds,
                  "precision": self.precision, "setting": self.setting})
        if not self.is_study_shape:
            d.update({"overlaps": self.overlaps.to_dict(), "hats": self.hats.to_dict()})
        if self.starts:
            d["starts"] = [st.to_dict() for st in self.starts]
        return _clean(d)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FixedPoint:
        """Inverse of :meth:`to_dict` (the full arrays are read from 'overlaps' and 'hats')."""
        errors = {k[:-4]: (float("nan") if v is None else v) for k, v in d.items() if k.endswith("_err")}
        if "overlaps" in d and isinstance(d["overlaps"], dict):
            o, h = Overlaps(**d["overlaps"]), HatOverlaps(**d["hats"])
        else:
            o = Overlaps(q=d["q"], m=d["m"], V=d["V"], theta=d["theta"])
            h = HatOverlaps(qhat=d.get("qhat", 0.0), mhat=d.get("mhat", 0.0), Vhat=d.get("Vhat", 0.0),
                            thetahat=d.get("thetahat", 0.0))
        return cls(alpha=d["alpha"], omega=d["omega"], branch=d["branch"], overlaps=o, hats=h,
                   train_loss=d.get("train_loss"), test_error=d.get("test_error"), errors=errors,
                   converged=d.get("converged"), iterations=d.get("iterations", 0), residual=d.get("residual"),
                   status=d.get("status", "ok"), warnings=_notes_from(d), message=d.get("message", ""),
                   n_points=d.get("n_points", 0), n_replicas=d.get("n_replicas", 0), seconds=d.get("seconds", 0.0),
                   precision=d.get("precision", "default"), setting=d.get("setting"),
                   starts=d.get("starts") or ())


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)  # (the record is frozen once built)


def _notes_from(d: dict[str, Any]) -> tuple[Note, ...]:
    msgs, codes = list(d.get("warnings", ())), list(d.get("warning_codes", ()))
    if len(codes) != len(msgs):
        return as_notes(msgs)
    return tuple(Note(NoteCode(c), m) for c, m in zip(codes, msgs, strict=True))


def _clean(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def check_branch(branch: str, allowed=BRANCHES) -> str:
    if branch not in allowed:
        raise InputError(f"branch must be one of {', '.join(allowed)}; got {branch!r}")
    return branch


def check_theory_setting(setting: Setting) -> Setting:
    if not isinstance(setting, Setting):
        raise InputTypeError("setting must be an attnphase.Setting")
    if setting.lam <= 0:
        raise InputError("the asymptotic theory needs lambda > 0 (at lambda = 0 the ridge limit is not implemented)")
    return setting


def lowest(points: Sequence[FixedPoint]) -> FixedPoint | None:
    """The global minimum among fixed points at one alpha: the valid point of lowest train_loss, the agnostic one
    included; None where none is valid.  The one definition every caller uses.  (The agnostic point is the global
    minimum where the other branches are only metastable: at L = 3, simplex positions, omega 0.3, the semantic
    branch is subcritical and its train loss lies above the agnostic one between its fold and their crossing.)"""
    ok = [p for p in points if p.valid and math.isfinite(p.train_loss)]
    return min(ok, key=lambda p: p.train_loss) if ok else None


# A branch whose point at a rough precision is valid and lies more than this above the lowest point found (relative
# train loss) cannot be the global minimum: the fast and default precisions' train losses differ by at most 8e-4
# relative where measured (L = 3, r = 2, omega 0.6, alpha 0.8: 0.0031104 vs 0.0031128; r = 2, alpha 1.5, every
# branch within 3e-4), so 1% keeps a 12-fold margin.
SCREEN_MARGIN = 1e-2


def still_to_solve(rough: Mapping[str, FixedPoint], fine: Mapping[str, FixedPoint]) -> list[str]:
    """The branches (of rough, each solved at a rough precision) to solve at the fine precision before the global
    minimum is known, the next one first: while no fine point is valid every branch not yet solved (lowest rough
    train loss first, then the ones without a valid rough point); then those whose rough point is not valid or lies
    within SCREEN_MARGIN of the lowest fine point.  Empty: the fine points hold the global minimum."""
    best = lowest(list(fine.values()))
    ranked = {b: p.train_loss for b, p in rough.items() if p.valid and math.isfinite(p.train_loss)}
    left = sorted((b for b in rough if b not in fine), key=lambda b: (b not in ranked, ranked.get(b, 0.0)))
    if best is None:
        return left
    bound = best.train_loss * (1.0 + SCREEN_MARGIN)
    return [b for b in left if b not in ranked or ranked[b] <= bound]


def global_minimum(points: dict[str, FixedPoint]) -> FixedPoint:
    """The valid branch with the lowest training loss (results.lowest), with a warning `unresolved` per branch that
    gave no verdict (neither a point nor `collapsed`): the minimum is then the lowest of the others only.  (L = 3,
    r = 2, omega 0.6, alpha 0.8, fast: the positional branch is not converged, its iterate at train loss 0.003345,
    while the semantic point, 0.003477, was reported as the global minimum without a word; simulations at d = 1000
    end at 0.0031-0.0032, on a positional point the free solve does not reach and the equivariant pattern now does:
    docs/rank2.md.)"""
    best = lowest(list(points.values()))
    if best is None:
        raise InputError("no branch converged to a valid fixed point")
    notes = []
    for name, p in points.items():
        if p.valid or p.status == Status.collapsed:
            continue
        where = (f"its last iterate's train loss {p.train_loss:.6g} lies "
                 f"{'below' if p.train_loss < best.train_loss else 'above'} this point's {best.train_loss:.6g}"
                 if math.isfinite(p.train_loss) else "its last iterate has no train loss")
        notes.append(Note(NoteCode.unresolved, f"the {name} branch gave no verdict ({p.status.value}): the global "
                          f"minimum is the lowest of the branches that did; {where}"))
    return dataclasses.replace(best, warnings=best.warnings + tuple(notes)) if notes else best


def global_minimum_curve(curves: Mapping[str, Sequence[FixedPoint]], rtol: float = 1e-9) -> list[FixedPoint]:
    """:func:`global_minimum` at each alpha of the curves where some point is valid, in ascending alpha (with its
    `unresolved` notes: a branch without a verdict there)."""
    by_alpha: dict[float, dict[str, FixedPoint]] = {}
    for name, pts in curves.items():
        for p in pts:
            key = next((k for k in by_alpha if math.isclose(k, p.alpha, rel_tol=rtol, abs_tol=1e-12)), p.alpha)
            by_alpha.setdefault(key, {})[name] = p
    return [global_minimum(by_alpha[a]) for a in sorted(by_alpha) if lowest(list(by_alpha[a].values())) is not None]
