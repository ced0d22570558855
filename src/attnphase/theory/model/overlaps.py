"""Overlaps as arrays, branches as constraints, and the flat layout the generic solver works on.

Shapes (L tokens, student rank r, teacher rank r*):
    m, mhat: L x r;   q, V, qhat, Vhat: r x r (symmetric);   theta, thetahat: r x r*.

This is the only module that knows how the overlaps are laid out in a flat vector.  A :class:`Layout`
(built for one setting and one branch) packs the branch's free coordinates:

    q (upper triangle) | m (coordinates in the range of the Gram matrix G) | V (upper triangle) | theta

- m always lies in the range of G (the prior side gives m = G mhat K), so it is stored by its coordinates c
  in a basis U of range(G) (m = U c); U's columns are scaled to max-abs entry 1 with a positive first
  non-zero entry, so for the study's antipodal G = [[1, -1], [-1, 1]] the single coordinate is m_1 itself.
- Branches: positional (theta = 0), semantic (m = 0), agnostic (both), free (neither).  The constrained
  blocks are not in the flat vector at all, so the constraints hold exactly.

Symmetries.  The loss depends on h only through the scores h_l . h_k, and the ridge penalty is rotation
invariant, so Q -> Q R with R orthogonal (r x r) maps fixed points to fixed points:
(q, m, V, theta) -> (R^T q R, m R, R^T V R, R^T theta).  For r = 1 this is the sign flip.  A rotation of the
teacher's rank index, theta -> theta R*, is exact too (the teacher's rows are iid, rho = sigma^2 I, and the
target depends on h* only through the scores h*_l . h*_k, for any omega: the omega A part does not involve h*).
:func:`canonical_gauge` picks one representative of each orbit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from attnphase.errors import InputError


def _as_matrix(name: str, value: Any, legacy_pair: bool = False) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        # Scalar (first-version records, study geometry): m is m_1 with m_2 = -m_1; others are 1 x 1.
        arr = np.array([[float(arr)], [-float(arr)]]) if legacy_pair else arr.reshape(1, 1)
    if arr.ndim != 2:
        raise InputError(f"{name} must be a matrix, got shape {arr.shape}")
    return arr


SCALE_FLOOR = 1e-3  # coordinates below this are resolved absolutely (Layout.scale)
COLLAPSE = 1e-2  # an order parameter below this fraction of its scale has decayed (order_threshold)


@dataclass(frozen=True, eq=False)
class Overlaps:
    """Order parameters: q, V (r x r), m (L x r), theta (r x r*).  Scalars are read as the study's case.

    untied: the untied student's overlaps at field rank r = 2r' (query fields first, then key fields); only the
    joint rotation of both blocks is a symmetry (:func:`canonical_gauge`), and :func:`results.summaries` reports
    the bilinear (query-key) overlaps."""

    q: np.ndarray
    m: np.ndarray
    V: np.ndarray
    theta: np.ndarray
    untied: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "q", _as_matrix("q", self.q))
        object.__setattr__(self, "m", _as_matrix("m", self.m, legacy_pair=True))
        object.__setattr__(self, "V", _as_matrix("V", self.V))
        object.__setattr__(self, "theta", _as_matrix("theta", self.theta))
        object.__setattr__(self, "untied", bool(self.untied))
        if self.untied and self.q.shape[0] % 2:
            raise InputError(f"untied overlaps need an even field rank (query and key blocks), got {self.q.shape[0]}")

    def as_untied(self, untied: bool = True) -> Overlaps:
        """The same arrays marked as the untied (or tied) student's."""
        return Overlaps(q=self.q, m=self.m, V=self.V, theta=self.theta, untied=untied)

    @property
    def dims(self) -> tuple[int, int, int]:
        """(L, r, r*)."""
        return self.m.shape[0], self.q.shape[0], self.theta.shape[1]

    def to_dict(self) -> dict[str, list]:
        return {k: getattr(self, k).tolist() for k in ("q", "m", "V", "theta")}


@dataclass(frozen=True, eq=False)
class HatOverlaps:
    """Conjugate order parameters: qhat, Vhat (r x r), mhat (L x r), thetahat (r x r*)."""

    qhat: np.ndarray
    mhat: np.ndarray
    Vhat: np.ndarray
    thetahat: np.ndarray

    def __post_init__(self) -> None:
        # A first-version scalar mhat was alpha E[f_1 - f_2]: per token mhat_1 = -mhat_2 = mhat / 2.
        mh = np.asarray(self.mhat, dtype=float)
        if mh.ndim == 0:
            mh = np.array([[0.5 * float(mh)], [-0.5 * float(mh)]])
        object.__setattr__(self, "qhat", _as_matrix("qhat", self.qhat))
        object.__setattr__(self, "mhat", _as_matrix("mhat", mh))
        object.__setattr__(self, "Vhat", _as_matrix("Vhat", self.Vhat))
        object.__setattr__(self, "thetahat", _as_matrix("thetahat", self.thetahat))

    def to_dict(self) -> dict[str, list]:
        return {k: getattr(self, k).tolist() for k in ("qhat", "mhat", "Vhat", "thetahat")}


class Branch(StrEnum):
    """A branch is a constraint on the overlaps (and, exactly, on their conjugates) and the order parameters its
    points have: positional m (theta = 0), semantic theta (m = 0), agnostic neither (m = theta = 0), mixed both
    (no constraint; a tied student of rank r >= 2 with one direction positional and another semantic), free no
    constraint and no requirement."""

    positional = "positional"  # theta = 0
    semantic = "semantic"  # m = 0
    agnostic = "agnostic"  # m = theta = 0
    mixed = "mixed"  # no constraint; m and theta both non-zero
    free = "free"  # no constraint

    @property
    def has_m(self) -> bool:
        return self in (Branch.positional, Branch.mixed, Branch.free)

    @property
    def has_theta(self) -> bool:
        return self in (Branch.semantic, Branch.mixed, Branch.free)

    @property
    def unconstrained(self) -> bool:
        """m and theta both free (the mixed and the free branch share one layout and one map)."""
        return self in (Branch.mixed, Branch.free)

    @property
    def order_parameters(self) -> tuple[str, ...]:
        """The overlaps that are zero off this branch (its points' order parameters): m, theta, both (mixed); none for
        the agnostic branch and the free solve, which requires none."""
        return {"positional": ("m",), "semantic": ("theta",), "mixed": ("m", "theta")}.get(self.value, ())


# The order parameter of each branch that has exactly one (positional: m, semantic: theta).
ORDER_NAME = {b.value: b.order_parameters[0] for b in Branch if len(b.order_parameters) == 1}


def as_branch(branch: str | Branch) -> Branch:
    try:
        return Branch(branch)
    except ValueError:
        raise InputError(f"branch must be one of {', '.join(b.value for b in Branch)}; got {branch!r}") from None


def range_basis(G: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    """Basis of range(G) (L x k): eigenvectors, each scaled to max-abs entry 1, first non-zero entry > 0."""
    G = np.asarray(G, dtype=float)
    vals, vecs = np.linalg.eigh(G)
    keep = vals > tol * max(1.0, float(np.abs(vals).max()))
    U = vecs[:, keep][:, ::-1]  # largest eigenvalue first
    U = U / np.abs(U).max(axis=0, keepdims=True)
    for j in range(U.shape[1]):
        nz = np.nonzero(np.abs(U[:, j]) > 1e-12)[0]
        if U[nz[0], j] < 0:
            U[:, j] = -U[:, j]
    U[np.abs(U) < 1e-15] = 0.0
    return U


def range_frame(G: np.ndarray) -> np.ndarray:
    """Orthonormal basis of range(G) (L x k): range_basis's columns normalised (the coordinates in which the
    positional order parameter's symmetries and linearised map are written)."""
    return np.linalg.qr(range_basis(G))[0]


def _triu(r: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(r)


def _sym_from_triu(v: np.ndarray, r: int) -> np.ndarray:
    M = np.zeros((r, r))
    iu = _triu(r)
    M[iu] = v
    return M + np.triu(M, 1).T


def linear_coefficients(family: Sequence[np.ndarray], X: np.ndarray) -> list[float]:
    """The coordinates of X's orthogonal projection onto span(family) (an orthogonal family of matrices of X's shape):
    <B, X> / <B, B> per matrix B (Layout.linear's pack; model.patterns.Pattern.holds)."""
    return [float(np.sum(B * X) / np.sum(B * B)) for B in family]


def linear_combination(coeffs: Sequence[float], family: Sequence[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """sum_i coeffs[i] family[i], a zero matrix of the given shape where the family is empty (Layout.linear's unpack;
    with linear_coefficients, the projection model.patterns.Pattern.holds tests against)."""
    return sum((c * B for c, B in zip(coeffs, family, strict=True)), np.zeros(shape))


@dataclass(frozen=True, eq=False)
class Layout:
    """Packing of one branch's free coordinates for L tokens, ranks r, r*, Gram matrix G."""

    L: int
    r: int
    r_star: int
    branch: Branch
    basis: np.ndarray  # L x k, m = basis @ c
    _pinv: np.ndarray = field(repr=False)
    sizes: tuple[int, int, int, int] = (0, 0, 0, 0)
    untied: bool = False  # r is the untied student's field rank 2r'; unpack marks the Overlaps so
    # (a linear subspace: q, m, V, theta each a combination of fixed matrices, one coordinate per matrix.  See linear.)
    lin: tuple[tuple[np.ndarray, ...], ...] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, L: int, r: int, r_star: int, G: np.ndarray, branch: str | Branch, untied: bool = False) -> Layout:
        b = as_branch(branch)
        U = range_basis(G)
        nt = r * (r + 1) // 2
        sizes = (nt, U.shape[1] * r if b.has_m else 0, nt, r * r_star if b.has_theta else 0)
        return cls(L=L, r=r, r_star=r_star, branch=b, basis=U, _pinv=np.linalg.pinv(U), sizes=sizes,
                   untied=bool(untied))

    @classmethod
    def for_setting(cls, setting: Any, branch: str | Branch) -> Layout:
        """The setting's layout at its field rank (r, or 2r for the untied student)."""
        untied = bool(getattr(setting, "untied", False))
        return cls.build(setting.L, setting.field_rank if untied else setting.r, setting.r_star, setting.gram, branch,
                         untied)

    def on_subspace(self, basis: np.ndarray) -> Layout:
        """This layout with m restricted to span(basis) (L x p): m = basis c, pack projects onto it (a token
        pattern's subspace, model.patterns)."""
        B = np.asarray(basis, dtype=float).reshape(self.L, -1)
        sizes = (self.sizes[0], B.shape[1] * self.r if self.branch.has_m else 0, self.sizes[2], self.sizes[3])
        return dataclasses.replace(self, basis=B, _pinv=np.linalg.pinv(B), sizes=sizes)

    def linear(self, q: Sequence[np.ndarray], m: Sequence[np.ndarray], V: Sequence[np.ndarray],
               theta: Sequence[np.ndarray] = ()) -> Layout:
        """This layout restricted to a linear subspace: q = sum_i a_i q[i], m = sum_j b_j m[j], V, theta likewise (r x r,
        L x r, r x r, r x r* matrices, each family orthogonal), one coordinate per matrix; pack the orthogonal
        projection onto them (model.patterns: the equivariant pattern m = kappa U, q = q0 I, V = v0 I, and the
        stabiliser pattern).  theta's family must be empty on a branch without theta."""
        fam = tuple(tuple(np.asarray(B, dtype=float) for B in f) for f in (q, m, V, theta))
        if fam[3] and not self.branch.has_theta:
            raise ValueError(f"the {self.branch.value} branch has no theta")
        return dataclasses.replace(self, lin=fam, sizes=tuple(len(f) for f in fam))

    @property
    def size(self) -> int:
        return int(sum(self.sizes))

    def _slices(self) -> list[slice]:
        out, start = [], 0
        for s in self.sizes:
            out.append(slice(start, start + s))
            start += s
        return out

    def block(self, name: str) -> slice:
        """The flat coordinates of one overlap: "q", "m", "V" or "theta" (an empty slice where the branch fixes it)."""
        return self._slices()[("q", "m", "V", "theta").index(name)]

    def names(self) -> list[str]:
        """Human names of the flat coordinates (for messages)."""
        if self.lin is not None:
            return [f"{k}~{i}" for k, f in zip(("q", "m", "V", "theta"), self.lin, strict=True) for i in range(len(f))]
        iu = _triu(self.r)
        out = [f"q[{i},{j}]" for i, j in zip(*iu, strict=True)]
        if self.branch.has_m:
            out += [f"m_coord[{a},{j}]" for a in range(self.basis.shape[1]) for j in range(self.r)]
        out += [f"V[{i},{j}]" for i, j in zip(*iu, strict=True)]
        if self.branch.has_theta:
            out += [f"theta[{i},{j}]" for i in range(self.r) for j in range(self.r_star)]
        return out

    def pack(self, o: Overlaps) -> np.ndarray:
        if self.lin is not None:
            return np.array([c for f, X in zip(self.lin, (o.q, o.m, o.V, o.theta), strict=True)
                             for c in linear_coefficients(f, X)])
        iu = _triu(self.r)
        q = 0.5 * (o.q + o.q.T)
        V = 0.5 * (o.V + o.V.T)
        parts = [q[iu]]
        if self.branch.has_m:
            parts.append((self._pinv @ o.m).reshape(-1))
        parts.append(V[iu])
        if self.branch.has_theta:
            parts.append(np.asarray(o.theta, dtype=float).reshape(-1))
        return np.concatenate(parts).astype(float)

    def unpack(self, x: np.ndarray) -> Overlaps:
        x = np.asarray(x, dtype=float)
        sq, sm, sV, st = self._slices()
        if self.lin is not None:
            shapes = ((self.r, self.r), (self.L, self.r), (self.r, self.r), (self.r, self.r_star))
            q, m, V, theta = (linear_combination(x[sl], f, shp)
                              for sl, f, shp in zip((sq, sm, sV, st), self.lin, shapes, strict=True))
            return Overlaps(q=q, m=m, V=V, theta=theta, untied=self.untied)
        q = _sym_from_triu(x[sq], self.r)
        V = _sym_from_triu(x[sV], self.r)
        m = self.basis @ x[sm].reshape(-1, self.r) if self.branch.has_m else np.zeros((self.L, self.r))
        theta = x[st].reshape(self.r, self.r_star) if self.branch.has_theta else np.zeros((self.r, self.r_star))
        return Overlaps(q=q, m=m, V=V, theta=theta, untied=self.untied)

    def project(self, o: Overlaps) -> Overlaps:
        """The branch's constraints and the symmetries of q, V imposed exactly."""
        return self.unpack(self.pack(o))

    def project_hats(self, h: HatOverlaps) -> HatOverlaps:
        """Conjugates consistent with the branch: mhat = 0 off the positional/free branches, thetahat = 0 off
        the semantic/free ones (round-off must not push the iteration off its branch); symmetric qhat, Vhat."""
        mhat = h.mhat if self.branch.has_m else np.zeros_like(h.mhat)
        thetahat = h.thetahat if self.branch.has_theta else np.zeros_like(h.thetahat)
        return HatOverlaps(qhat=0.5 * (h.qhat + h.qhat.T), mhat=mhat, Vhat=0.5 * (h.Vhat + h.Vhat.T),
                           thetahat=thetahat)

    def scale(self, x: np.ndarray) -> np.ndarray:
        """Per-coordinate size for relative residuals: max(|x|, SCALE_FLOOR); an off-diagonal entry of q or V is
        measured against its matrix's scale, sqrt(|M_aa M_bb|) (a small correlation must not set the tolerance)."""
        out = np.maximum(np.abs(x), SCALE_FLOOR)
        if self.r > 1 and self.lin is None:
            sq, _, sV, _ = self._slices()
            iu, ju = _triu(self.r)
            for sl in (sq, sV):
                block = np.asarray(x[sl])
                diag = {int(i): abs(block[k]) for k, (i, j) in enumerate(zip(iu, ju, strict=True)) if i == j}
                for k, (i, j) in enumerate(zip(iu, ju, strict=True)):
                    if i != j:
                        out[sl.start + k] = max(out[sl.start + k], float(np.sqrt(diag[int(i)] * diag[int(j)])))
        return out


def order_threshold(scale: float) -> float:
    """The size below which a branch's order parameter counts as zero (collapsed onto the agnostic point): 1% of its
    scale (sqrt of q's largest eigenvalue; times sqrt(rho) for theta), the scale never below SCALE_FLOOR, the size
    under which the solver resolves a coordinate absolutely (Layout.scale).  The floor matters only where the student
    itself shrinks to zero (Q -> 0, q below 1e-6), where the order parameter falls with sqrt(q) and its ratio to the
    scale says nothing (lambda 0.1, alpha 1: q 2e-14, m 2.5e-7 was reported a positional point: docs/numerics.md,
    "The trivial point")."""
    return COLLAPSE * max(float(scale), SCALE_FLOOR)


def canonical_rotation(o: Overlaps) -> tuple[np.ndarray, np.ndarray]:
    """Orthogonal (R, R*) (r x r, r* x r*) picking one representative of the orbit of o under the exact
    symmetries Q -> Q R (student rank index) and Q* -> Q* R* (teacher rank index; exact because the teacher's
    rows are iid and the target depends on h* only through the scores h*_l . h*_k, with rho = sigma^2 I).

    R*: right singular vectors of theta.  R: right singular vectors of [theta'^T; m] (theta' = theta R*), then,
    on their null space, the eigenvectors of q restricted to it (largest first).  Signs: each column of R makes
    the largest entry of [theta'^T; m] R in it positive (of q R where that column is zero), then each column of
    R* the largest entry of R^T theta R* positive.  Where singular values or eigenvalues are degenerate the
    choice jumps; there the orbit has extra symmetry and invariant quantities do not care.
    """
    r, rs = o.theta.shape
    _, _, Vt = np.linalg.svd(o.theta, full_matrices=True)
    Rs = Vt.T
    th = o.theta @ Rs
    Z = np.vstack([th.T, o.m])
    _, s, Wt = np.linalg.svd(Z, full_matrices=True)
    W = Wt.T
    tol = 1e-12 * max(1.0, float(np.abs(Z).max()))
    k = int(np.sum(s > tol))
    if k < r:
        N = W[:, k:]
        _, P = np.linalg.eigh(N.T @ o.q @ N)
        W = np.hstack([W[:, :k], N @ P[:, ::-1]])
    ZW = Z @ W
    qW = o.q @ W
    for j in range(r):
        col = ZW[:, j] if np.abs(ZW[:, j]).max() > tol else qW[:, j]
        if col[int(np.argmax(np.abs(col)))] < 0:
            W[:, j] = -W[:, j]
    th2 = W.T @ th
    for j in range(rs):
        col = th2[:, j]
        if np.abs(col).max() > 0 and col[int(np.argmax(np.abs(col)))] < 0:
            Rs[:, j] = -Rs[:, j]
    return W, Rs


def rotate(o: Overlaps, R: np.ndarray, R_star: np.ndarray | None = None) -> Overlaps:
    """The exact symmetries Q -> Q R, Q* -> Q* R*."""
    th = R.T @ o.theta
    if R_star is not None:
        th = th @ R_star
    return Overlaps(q=R.T @ o.q @ R, m=o.m @ R, V=R.T @ o.V @ R, theta=th, untied=o.untied)


def untied_rotation(o: Overlaps) -> tuple[np.ndarray, np.ndarray]:
    """Orthogonal (diag(R, R), R*) picking one representative of an untied orbit.  The untied scores
    h^Q_l . h^K_k are invariant only under the joint rotation (Q, K) -> (Q R, K R) (r' = 1: the joint sign flip),
    not under rotations mixing query and key fields; the teacher's rotation theta -> theta R* is exact too.

    R: eigenvectors (largest first) of M^T M + theta_Q theta_Q^T + theta_K theta_K^T with M = [m_Q; m_K] (both
    terms teacher-invariant), or of q_QQ + q_KK where that vanishes; signs: the largest entry of M R in each column
    positive (of (q_QQ + q_KK) R where that column of M R is zero).  R*: right singular vectors of diag(R, R)^T
    theta, each column's largest entry made positive.  With m = 0 the student flip only changes the sign of theta,
    which R* then fixes, so the representative is unique up to degenerate eigenvalues."""
    r = o.q.shape[0] // 2
    M = np.vstack([o.m[:, :r], o.m[:, r:]])
    tq, tk = o.theta[:r], o.theta[r:]
    A = M.T @ M + tq @ tq.T + tk @ tk.T
    qs = o.q[:r, :r] + o.q[r:, r:]
    tol = 1e-12 * max(1.0, float(np.abs(A).max()))
    _, W = np.linalg.eigh(A if np.abs(A).max() > tol else qs)
    W = W[:, ::-1]
    MW, qW = M @ W, qs @ W
    for j in range(r):
        col = MW[:, j] if np.abs(MW[:, j]).max() > tol else qW[:, j]
        if col[int(np.argmax(np.abs(col)))] < 0:
            W[:, j] = -W[:, j]
    Rf = np.zeros((2 * r, 2 * r))
    Rf[:r, :r] = W
    Rf[r:, r:] = W
    th = Rf.T @ o.theta
    _, _, Vt = np.linalg.svd(th, full_matrices=True)
    Rs = Vt.T
    th2 = th @ Rs
    for j in range(Rs.shape[1]):
        col = th2[:, j]
        if np.abs(col).max() > 0 and col[int(np.argmax(np.abs(col)))] < 0:
            Rs[:, j] = -Rs[:, j]
    return Rf, Rs


def gauge_rotation(o: Overlaps) -> tuple[np.ndarray, np.ndarray]:
    """(R, R*) taking o to canonical_gauge's representative: :func:`canonical_rotation`, or :func:`untied_rotation`
    for untied overlaps."""
    return untied_rotation(o) if o.untied else canonical_rotation(o)


def canonical_gauge(o: Overlaps, untied: bool | None = None) -> Overlaps:
    """The orbit's representative chosen by :func:`canonical_rotation` (r = r* = 1: the sign flip); for untied
    overlaps (o.untied, or untied=True) by :func:`untied_rotation` (the result is marked untied)."""
    if untied is None:
        untied = o.untied
    if untied:
        o = o.as_untied()
    return rotate(o, *gauge_rotation(o))


def rotate_hats(h: HatOverlaps, R: np.ndarray, R_star: np.ndarray | None = None) -> HatOverlaps:
    """The conjugates transformed as the overlaps are by :func:`rotate` (qhat, Vhat -> R^T . R, mhat -> mhat R,
    thetahat -> R^T thetahat R*), so that the prior side maps them to the rotated overlaps."""
    th = R.T @ h.thetahat
    if R_star is not None:
        th = th @ R_star
    return HatOverlaps(qhat=R.T @ h.qhat @ R, mhat=h.mhat @ R, Vhat=R.T @ h.Vhat @ R, thetahat=th)


def aligning_signs(o: Overlaps, ref: Overlaps, any_size: bool = False) -> np.ndarray:
    """The signs (one per field direction: the diagonal of an exact symmetry R) that make o point ref's way: each
    student direction flipped (Q's column j -> -Q's column j; untied: the query's and the key's column j together)
    where its order parameter ([theta^T; m] in that column, untied: both halves') points away from ref's.  For
    averaging several solutions of one orbit: canonical_gauge's sign rule (the largest entry positive) is
    ill-conditioned where two entries of opposite sign are nearly as large (L = 3 simplex: m sums to zero, and on the
    ring of positional points at omega 0.6 the scramblings' m came out with opposite signs, averaged to half their
    size).  Only directions that carry an order parameter in both (norm above COLLAPSE, 1%, of sqrt(q_jj): the
    collapse threshold without its floor, as a sign needs no absolute size); all ones where every such direction
    already points ref's way.  any_size: o's directions of any size (those that carry one in ref), for a step that
    must not cross to the other side."""
    if o.untied != ref.untied or o.q.shape != ref.q.shape:
        raise InputError("aligning_signs needs two representatives of the same shape (tied or untied alike)")

    def order(x: Overlaps) -> tuple[np.ndarray, np.ndarray]:
        Z, d = np.vstack([x.theta.T, x.m]), np.diag(x.q)
        if not x.untied:
            return Z, d
        r = x.q.shape[0] // 2
        return np.vstack([Z[:, :r], Z[:, r:]]), d[:r] + d[r:]

    (Z, d), (Zr, dr) = order(o), order(ref)
    carries = (any_size or np.linalg.norm(Z, axis=0) > COLLAPSE * np.sqrt(np.abs(d))) & (
        np.linalg.norm(Zr, axis=0) > COLLAPSE * np.sqrt(np.abs(dr)))
    s = np.where(carries & (np.einsum("ij,ij->j", Z, Zr) < 0), -1.0, 1.0)
    return np.concatenate([s, s]) if o.untied else s


def align_signs(o: Overlaps, ref: Overlaps) -> Overlaps:
    """o flipped by :func:`aligning_signs` to point ref's way (o itself where nothing is flipped)."""
    s = aligning_signs(o, ref)
    return o if np.all(s > 0) else rotate(o, np.diag(s))


def lift_to_untied(o: Overlaps, corr: float = 0.9) -> Overlaps:
    """Untied overlaps at field rank 2r from tied ones (Q = K): m = [m, m], theta = [theta; theta], V = diag(V, V),
    q = [[q, c q], [c q, q]] with c = corr < 1 (c = 1, the exact lift, has a singular q: the channel needs q
    positive definite).  A starting point in the tied fixed point's branch, not an untied fixed point."""
    if not 0.0 <= corr < 1.0:
        raise InputError(f"corr must lie in [0, 1), got {corr}")
    if o.untied:
        raise InputError("the overlaps are already untied")
    r = o.q.shape[0]
    q = np.block([[o.q, corr * o.q], [corr * o.q, o.q]])
    V = np.block([[o.V, np.zeros((r, r))], [np.zeros((r, r)), o.V]])
    return Overlaps(q=q, m=np.hstack([o.m, o.m]), V=V, theta=np.vstack([o.theta, o.theta]), untied=True)
