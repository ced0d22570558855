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
"equivariant" pattern: both directions positional, the point L-BFGS reaches at L = 3, r = 2 (docs/rank2.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from attnphase.setting import Setting
from attnphase.theory.model.overlaps import range_frame

_SYMMETRY_TOL = 1e-12  # entries of G and A compared with their permutation-symmetric forms
_LEVEL_TOL = 1e-6  # relative difference at which two entries of m are read as equal (one level set)


@dataclass(frozen=True, eq=False)
class Pattern:
    """One token pattern: its name, an orthonormal basis (L x p) of its subspace within range(G), and the direction
    (a unit vector in it) a start's m is turned to."""

    name: str
    basis: np.ndarray
    direction: np.ndarray
    isotropic: bool = False  # the equivariant pattern: m = kappa basis (L x r), q and V multiples of I


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
    return Pattern("equivariant", U, U[:, 0], isotropic=True)


def on_equivariant(setting: Setting, o: Any) -> bool:
    """Whether overlaps o lie on the equivariant pattern's subspace (m = kappa U with kappa > 0, q and V multiples of
    I, theta 0, to _LEVEL_TOL relative): a curve's previous point there continues that pattern."""
    eq = equivariant(setting)
    if eq is None:
        return False
    U = eq.basis
    m, q, V = (np.asarray(getattr(o, k), dtype=float) for k in ("m", "q", "V"))
    if m.shape != U.shape or not np.all(np.isfinite(m)):
        return False
    kappa = float(np.sum(U * m) / np.sum(U * U))
    eye = np.eye(U.shape[1])
    return bool(kappa > 0 and np.abs(m - kappa * U).max() <= _LEVEL_TOL * kappa
                and np.abs(q - q[0, 0] * eye).max() <= _LEVEL_TOL * abs(q[0, 0])
                and np.abs(V - V[0, 0] * eye).max() <= _LEVEL_TOL * abs(V[0, 0])
                and not np.any(np.asarray(o.theta)))


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
