"""Token patterns: the subspaces of the positional order parameter that the model's token symmetry leaves invariant.

Where every permutation of the tokens leaves the positional Gram matrix and the teacher's A unchanged (G = g0 I +
g1 1 1^T: the simplex and orthogonal codes; A = c I + e 1 1^T: L > 2's default), the d -> infinity map commutes with
those permutations and with m -> -m.  Its positional fixed points then come in orbits, and each lies in the subspace
its own symmetries (its stabiliser) fix, an exact invariant subspace of the map.  The branches leaving the agnostic
point lie in the fixed subspaces of the symmetries' subgroups (equivariant bifurcation theory); for the permutations
of L tokens with m -> -m these are, up to a permutation of the tokens:
  "k:L-k"   k tokens at one value, the others at another (k = 1 .. L // 2): a line where range(G) is the sum-zero
            vectors (the simplex code), the plane of the two groups' indicators where it holds 1 (orthogonal);
  "k+k-"    k tokens at +x, k at -x, the rest 0 (k = 1 .. L // 2; with the simplex code and 2k = L it is "k:k");
  "uniform" every token at one value (only where range(G) holds 1).
Restricted to such a subspace the map is no longer neutral along the ring (L = 3) or sphere (L = 4) of near-fixed
points that the symmetry makes; each subspace is one branch, a token pattern.

A tied student of rank r = L - 1 with the simplex code (range(G) the sum-zero vectors, where the permutations act
irreducibly) has one more: the permutations acting on the student's directions too, by R_P = U^T P U (U an
orthonormal basis of range(G)).  Their fixed space is m = kappa U, q = q0 I, V = v0 I (Schur's lemma), the
"equivariant" pattern: both directions positional, the point L-BFGS reaches at L = 3, r = 2 (docs/rank2.md).  The
permutations that fix one token fix more (the "stabiliser" pattern of the mixed branch: r - 1 directions positional
and one that may carry the teacher's content), the point L-BFGS reaches at L = 4, r = 3.  A token pattern's
subspace holds every column of a rank-r student's m too (the mixed branch, L = 4, r = 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnphase.setting import Setting
from attnphase.theory.model.overlaps import Overlaps, linear_coefficients, linear_combination, range_frame

_SYMMETRY_TOL = 1e-12  # entries of G and A compared with their permutation-symmetric forms
_LEVEL_TOL = 1e-6  # relative difference at which two entries of m are read as equal (one level set)


@dataclass(frozen=True, eq=False)
class Pattern:
    """One token pattern: its name, an orthonormal basis (L x p) of its subspace within range(G), and the direction
    (a unit vector in it) a start's m is turned to.  A pattern of the student's directions too (equivariant,
    stabiliser) has ``linear``: q, m, V, theta each a combination of those matrices (overlaps.Layout.linear), and
    ``place``, which puts a start on it."""

    name: str
    basis: np.ndarray
    direction: np.ndarray
    linear: tuple[tuple[np.ndarray, ...], ...] | None = None
    place: Callable[[Overlaps], Overlaps] | None = None

    def holds(self, o: Any) -> bool:
        """Whether overlaps o lie on this pattern's linear subspace (each of q, m, V, theta its projection to
        _LEVEL_TOL of its size), m not zero: a curve's previous point there continues the pattern."""
        if self.linear is None:
            return False
        mats = [np.asarray(getattr(o, k), dtype=float) for k in ("q", "m", "V", "theta")]
        if any(X.shape != f[0].shape for X, f in zip(mats, self.linear, strict=True) if f) or not all(
                np.all(np.isfinite(X)) for X in mats):
            return False
        for X, f in zip(mats, self.linear, strict=True):
            P = linear_combination(linear_coefficients(f, X), f, X.shape)
            if np.abs(X - P).max() > _LEVEL_TOL * np.abs(X).max():
                return False
        return bool(np.abs(mats[1]).max() > 0)


def exchangeable(setting: Setting) -> bool:
    """Every token permutation leaves the setting unchanged and the positional order parameter is one L-vector:
    G = g0 I + g1 1 1^T with g0 > 0, A = c I + e 1 1^T, a tied student of rank 1, L > 2 (at L = 2 the one pattern's
    subspace is the whole range of G)."""
    return setting.field_rank == 1 and _symmetric(setting)


def equivariant(setting: Setting) -> Pattern | None:
    """The equivariant pattern (module docstring) where the setting has it: a tied student of rank r = L - 1, the
    simplex code (range(G) the L - 1 sum-zero vectors), G and A permutation symmetric; else None."""
    if not _symmetric(setting) or setting.r != setting.L - 1 or _holds_uniform(setting):
        return None
    U = range_frame(setting.gram)
    if U.shape[1] != setting.r:
        return None
    eye = np.eye(setting.r)

    def place(o: Overlaps) -> Overlaps:  # m = kappa U from any start, its size kept (rms over the directions)
        return Overlaps(q=o.q, m=np.linalg.norm(o.m) / np.linalg.norm(U) * U, V=o.V, theta=np.zeros_like(o.theta))

    return Pattern("equivariant", U, U[:, 0], linear=((eye,), (U,), (eye,), ()), place=place)


def stabiliser(setting: Setting) -> Pattern | None:
    """The stabiliser pattern of the mixed branch where the setting has the equivariant one and a teacher of rank 1:
    the permutations that fix token 0, each with its rotation R_P = U^T P U of the student's directions, where U =
    [W, u0] is an orthonormal basis of range(G) adapted to them (W: the sum-zero vectors that vanish at token 0, on
    which they act irreducibly; u0 ~ (L - 1, -1, ..., -1), which they fix).  By Schur their fixed space is
    m = [kappa W, mu u0], theta = t e_{r-1}, q = diag(q0 I, q1), V = diag(v0 I, v1): r - 1 directions positional and
    one that may carry the teacher's content, 7 coordinates.  L = 4, r = 3, omega 0.6, alpha 0.8: L-BFGS at d = 1000
    ends there (two directions positional, theta 0.05-0.09), below the equivariant point (docs/rank2.md).  None
    where the setting has no such pattern."""
    eq = equivariant(setting)
    if eq is None or setting.r_star != 1:
        return None
    L, r = setting.L, setting.r
    u0 = np.full(L, -1.0)
    u0[0] = L - 1.0
    u0 /= np.linalg.norm(u0)
    Z = np.eye(L)[:, 1:] - 1.0 / (L - 1)  # sum-zero over tokens 1 .. L-1, zero at token 0
    Z[0] = 0.0
    W = np.linalg.svd(Z, full_matrices=False)[0][:, : L - 2]
    U = np.column_stack([W, u0])
    P0, P1 = np.diag([1.0] * (r - 1) + [0.0]), np.diag([0.0] * (r - 1) + [1.0])
    M0, M1 = np.column_stack([W, np.zeros(L)]), np.column_stack([np.zeros((L, r - 1)), u0])
    T = np.zeros((r, 1))
    T[-1, 0] = 1.0

    def place(o: Overlaps) -> Overlaps:
        """A start on the pattern: its most semantic direction (largest row of theta) the last one, its m spread over
        the others (each as large as the start's whole m), mu 0."""
        k = int(np.argmax(np.linalg.norm(o.theta, axis=1)))
        rest = [j for j in range(r) if j != k]
        q0, v0 = float(np.mean(np.diag(o.q)[rest])), float(np.mean(np.diag(o.V)[rest]))
        return Overlaps(q=q0 * P0 + o.q[k, k] * P1, m=np.linalg.norm(o.m) * M0, V=v0 * P0 + o.V[k, k] * P1,
                        theta=np.linalg.norm(o.theta) * T)

    return Pattern("stabiliser", U, W[:, 0], linear=((P0, P1), (M0, M1), (P0, P1), (T,)), place=place)


def _symmetric(setting: Setting) -> bool:
    """L > 2, a tied student, G = g0 I + g1 1 1^T with g0 > 0 and A = c I + e 1 1^T."""
    if setting.L < 3 or setting.untied:
        return False
    G, A = setting.gram, np.asarray(setting.A, dtype=float)
    scale = max(1.0, float(np.abs(G).max()))
    return bool(_equicorrelated(G, _SYMMETRY_TOL * scale) and G[0, 0] - G[0, 1] > _SYMMETRY_TOL * scale
                and _equicorrelated(A, _SYMMETRY_TOL))


def token_patterns(setting: Setting) -> list[Pattern]:
    """The token patterns of an exchangeable setting (module docstring), one per orbit: "uniform" (where range(G)
    holds 1), then "k:L-k" and "k+k-" for k = 1 .. L // 2, with the first tokens in the first group; empty where the
    setting is not exchangeable."""
    if not exchangeable(setting):
        return []
    L = setting.L
    full = _holds_uniform(setting)
    U = range_frame(setting.gram)
    out = [Pattern("uniform", np.ones((L, 1)) / np.sqrt(L), np.ones(L) / np.sqrt(L))] if full else []
    for k in range(1, L // 2 + 1):
        a = np.zeros(L)
        a[:k] = 1.0
        basis = _within_range(U, np.column_stack([a, 1.0 - a]))
        contrast = (L - k) * a - k * (1.0 - a)  # (sum zero: in range(G) for either code)
        # (where the plane holds 1, a start with a uniform part too: on the contrast alone it would be k+k-'s at 2k = L)
        d = a if full else contrast
        out.append(Pattern(f"{k}:{L - k}", basis, d / np.linalg.norm(d)))
    for k in range(1, L // 2 + 1):
        if 2 * k == L and not full:
            continue
        v = np.zeros(L)
        v[:k], v[k:2 * k] = 1.0, -1.0
        v /= np.linalg.norm(v)
        out.append(Pattern(f"{k}+{k}-", v[:, None], v))
    return out


def pattern_subspace(setting: Setting, m: np.ndarray) -> np.ndarray | None:
    """Orthonormal basis (L x p) of the subspace within range(G) that the symmetries of m fix: vectors constant on
    each level set of m and, where m's values are symmetric under negation (level sets pairing up x <-> -x in equal
    numbers), opposite on opposite ones and 0 on the level set 0.  None where that is all of range(G) (no symmetry
    restricts m), where m is zero or not finite, or the setting is not exchangeable."""
    if not exchangeable(setting):
        return None
    v = np.asarray(m, dtype=float).reshape(-1)
    if v.size != setting.L or not np.all(np.isfinite(v)) or not np.abs(v).max() > 0:
        return None
    u = v / np.abs(v).max()
    levels: list[float] = []
    label = np.empty(u.size, dtype=int)
    for i, x in enumerate(u):
        j = next((j for j, y in enumerate(levels) if abs(x - y) <= _LEVEL_TOL), len(levels))
        if j == len(levels):
            levels.append(float(x))
        label[i] = j
    count = np.bincount(label)
    partner = [next((k for k, y in enumerate(levels) if abs(x + y) <= _LEVEL_TOL and count[k] == count[j]), None)
               for j, x in enumerate(levels)]
    signed = all(k is not None for k in partner)
    cols = []
    for j in range(len(levels)):
        ind = (label == j).astype(float)
        if signed:
            k = partner[j]
            if k <= j:
                continue  # (each pair once; the level set 0 is its own partner: 0 there)
            ind = ind - (label == k)
        cols.append(ind)
    U = range_frame(setting.gram)
    basis = _within_range(U, np.column_stack(cols))
    if basis.shape[1] == 0 or basis.shape[1] >= U.shape[1]:
        return None
    return basis


def _equicorrelated(M: np.ndarray, tol: float) -> bool:
    """M = a I + b 1 1^T: every diagonal entry equal, every off-diagonal one equal."""
    off = M[~np.eye(M.shape[0], dtype=bool)]
    return bool(np.ptp(np.diag(M)) <= tol and np.ptp(off) <= tol)


def _holds_uniform(setting: Setting) -> bool:
    """range(G) holds the vector 1 (the orthogonal code; the simplex code has G 1 = 0)."""
    G = setting.gram
    return bool(np.abs(G.sum(axis=1)).max() > 1e-9 * max(1.0, float(np.abs(G).max())))


def _within_range(U: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Orthonormal basis of span(B) intersected with range(G) (orthonormal basis U)."""
    off = B - U @ (U.T @ B)  # the part of each column outside range(G)
    _, s, vt = np.linalg.svd(off)
    rank = int(np.sum(s > 1e-10))
    S = B @ vt[rank:].T  # combinations of B's columns inside range(G)
    if S.shape[1] == 0:
        return S
    Q, R = np.linalg.qr(S)
    return Q[:, np.abs(np.diag(R)) > 1e-10]
