"""Token patterns: the lines of the positional order parameter that the model's token symmetry leaves invariant.

Where every permutation of the tokens leaves the positional Gram matrix and the teacher's A unchanged (the simplex
code, A = c I + e 1 1^T: L > 2's default), the d -> infinity map commutes with those permutations and with m -> -m.
Its positional fixed points then come in orbits, and the line each one lies on is fixed by a subgroup of that
symmetry (equivariant bifurcation theory: the branches leaving the agnostic point are those of the axial subgroups,
whose fixed space is a line).  For the permutations of L tokens acting on sum-zero vectors, with m -> -m, the lines
are, up to a permutation:
  "k:L-k"  k tokens at one value, the others at another (k = 1 .. L // 2), fixed by the permutations within each group;
  "k+k-"   k tokens at +x, k at -x, the rest 0 (k = 1 .. (L - 1) // 2), fixed by those within each group and the
           swap of the two groups with m -> -m (for 2k = L it is "k:L-k").
Restricted to such a line the map is exact (an invariant subspace) and no longer neutral along the ring (L = 3) or
sphere (L = 4) of near-fixed points that the symmetry makes; each line is one branch, a token pattern.
"""

from __future__ import annotations

import numpy as np

from attnphase.setting import Setting

_SYMMETRY_TOL = 1e-12  # entries of G and A compared with their permutation-symmetric forms
_ON_LINE_TOL = 1e-6  # relative distance of m from its pattern line at which a start is read as on it


def exchangeable(setting: Setting) -> bool:
    """Every token permutation leaves the setting unchanged and the positional order parameter is one sum-zero
    L-vector: G = g (I - 1 1^T / L), A = c I + e 1 1^T, a tied student of rank 1, L > 2 (at L = 2 the one line is the
    whole range of G)."""
    if setting.L < 3 or setting.untied or setting.field_rank != 1:
        return False
    L = setting.L
    P = np.eye(L) - np.ones((L, L)) / L
    G, A = setting.gram, np.asarray(setting.A, dtype=float)
    g = float(np.trace(G)) / (L - 1)
    c = float(A[0, 0] - A[0, 1])
    e = float(A[0, 1])
    scale = max(1.0, float(np.abs(G).max()))
    return bool(g > 0 and np.abs(G - g * P).max() <= _SYMMETRY_TOL * scale
                and np.abs(A - (c * np.eye(L) + e)).max() <= _SYMMETRY_TOL)


def token_patterns(setting: Setting) -> list[tuple[str, np.ndarray]]:
    """(name, unit vector) of one line per token pattern (module docstring), in the order k:L-k for k = 1 ..
    L // 2, then k+k- for k = 1 .. (L - 1) // 2; empty where the setting is not exchangeable."""
    if not exchangeable(setting):
        return []
    L = setting.L
    out = []
    for k in range(1, L // 2 + 1):
        v = np.full(L, -float(k))
        v[:k] = L - k
        out.append((f"{k}:{L - k}", v / np.linalg.norm(v)))
    for k in range(1, (L - 1) // 2 + 1):
        v = np.zeros(L)
        v[:k], v[k:2 * k] = 1.0, -1.0
        out.append((f"{k}+{k}-", v / np.linalg.norm(v)))
    return out


def pattern_line(setting: Setting, m: np.ndarray) -> np.ndarray | None:
    """The unit line through m where m (L x 1) lies on a token pattern's line, for some order of the tokens (its
    sorted entries those of a pattern, up to scale and sign, within _ON_LINE_TOL); else None."""
    patterns = token_patterns(setting)
    v = np.asarray(m, dtype=float).reshape(-1)
    size = float(np.linalg.norm(v))
    if not patterns or v.size != setting.L or size == 0.0:
        return None
    u = v / size
    for _, p in patterns:
        for s in (1.0, -1.0):
            if np.abs(np.sort(u) - np.sort(s * p)).max() <= _ON_LINE_TOL:
                return u
    return None
