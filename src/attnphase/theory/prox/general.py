"""Global solution of the general proximal problem at many integration points at once:

    hhat = argmin_{h in R^{L x r}} F(h),
    F(h) = sum_l (1/2)(h_l - w_l)^T Vinv (h_l - w_l) + (sigma2/2) sum_{l,k} (S_lk(h) - T_lk)^2,
    S = row-wise softmax of the scores h h^T.

F is not convex.  The loss depends on h only through the scores, so it is invariant under h -> h R (R orthogonal)
and, with the weak quadratic term of this problem (V ~ 10-30), has many near-degenerate basins.  A compiled
safeguarded Newton method (analytic Hessian, diagonal shift where it is indefinite, Armijo backtracking, plain
steps in the round-off regime) runs from several starts per point and keeps the lowest F:

- w itself;
- the least-squares zero of the loss (multidimensional scaling of the pairwise distances the target attention
  implies), rotated onto w by orthogonal Procrustes;
- its mirror (for r = 1: minus it; for r >= 2 the best rotation with the other determinant);
- the midpoint (w + zero) / 2 and, for r >= 2, twice the zero: at large |w| the global minimiser can sit in a
  basin between w and the zero that neither reaches;
- per token l with |w_l| >= 1, the midpoint with token l put back at w_l (mixed basins at large |w|: one token
  stays near its w_l while the others shrink); NaN (skipped) elsewhere, so they cost little;
- any starts the caller adds (e.g. the previous solution).
The set was chosen by measurement over many random channel-like settings against the best of many candidates and
random starts (benchmarks/prox.py --starts); candidates that never helped (-w, half the zero, single-token sign
flips of w or of the zero) were dropped.  Measured residual: for L = 2, r = 2 the set still misses the best known
minimum at about 1 point in 16 000 (by up to 7e-3 in F); none were seen for (3, 1) and (4, 1).  A start that comes
within 1e-4 of a minimiser already found for the same point is stopped (it can only reproduce it).

untied=True: the untied student's loss, scores h^Q h^K^T = h B h^T with h = (h^Q, h^K) and B = [[0, I], [0, 0]]
(the kernel's value_b / derivs_b / hess_b; the tied path is unchanged).  Its starts (own_starts_untied): w, the tied
zero lifted to (z, z) and its mirror, the SVD factorisation of the row-centred log T rotated onto w and its mirror,
and the midpoints of w with both zeros.  Measured (benchmarks/prox.py --untied --starts, 20 settings x 1024 points
per shape) against the best of these, six dropped candidates (-w, twice and half the zeros, midpoints with the
mirrors) and 32 random starts: no miss for (L, r) = (2, 1) and (3, 1) per factor, 3 points in 20 480 for (2, 2)
(by up to 1.4e-2 in F; half the SVD zero was the better start at one of them); in a second measurement with 24
random starts per point, 1 point in 20 480 (L = 2, r = 1) was missed, by 1.2e-2 in F.  Speed (L = 2, r = 1, 7
starts): about 45 000 points per CPU-second, against 71 000 for the tied kernel at the same field rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.errors import InputError, InputTypeError
from attnphase.problem import loss, softmax_rows
from attnphase.theory.prox._compile_notice import compile_notice
from attnphase.theory.prox._general_kernel import multistart
from attnphase.theory.prox._general_starts import n_own_starts, own_starts_untied, score_form
from attnphase.theory.prox._general_starts import own_starts as _own_starts
from attnphase.theory.prox.protocol import LocalMinima

_BLOCK = 64


@dataclass
class ProxResult:
    """Best minimiser found per point. value is F(h) there (the Moreau envelope); converged: max |grad F| < gtol."""

    h: np.ndarray  # (n, L, r)
    value: np.ndarray  # (n,)
    converged: np.ndarray  # (n,) bool
    grad_norm: np.ndarray  # (n,)
    winner: np.ndarray  # (n,) index of the start that gave h (own starts first, then the caller's)
    iterations: np.ndarray  # (n,) Newton iterations summed over starts
    minima: LocalMinima | None = None  # the distinct end points (prox's minima path continues them); see prox_general


def scores(h: np.ndarray, untied: bool = False) -> np.ndarray:
    """The scores of fields h (n, L, r): h h^T (tied) or h^Q h^K^T with h = (h^Q, h^K) split at r / 2 (untied)."""
    if not untied:
        return np.einsum("nla,nka->nlk", h, h)
    half = h.shape[2] // 2
    return np.einsum("nla,nka->nlk", h[:, :, :half], h[:, :, half:])


def objective(h: np.ndarray, w: np.ndarray, T: np.ndarray, Vinv: np.ndarray, sigma2: float, *,
              untied: bool = False) -> np.ndarray:
    """F(h) per point, plain numpy (the reference). h, w (n, L, r); T (n, L, L); returns (n,).  untied: the
    scores are h^Q h^K^T (h = (h^Q, h^K), r even)."""
    h = np.asarray(h, dtype=float)
    d = h - w
    quad = 0.5 * np.einsum("nla,ab,nlb->n", d, np.asarray(Vinv, dtype=float), d)
    with np.errstate(over="ignore", invalid="ignore"):
        Z = np.clip(scores(h, untied), -1e300, 1e300)
    return quad + loss(softmax_rows(Z), T, sigma2)


def own_starts(w: np.ndarray, T: np.ndarray, Vinv: np.ndarray, *, untied: bool = False) -> np.ndarray:
    """The solver's own starts, shape (n, S, L, r): w, the loss zero aligned with w, its mirror, the midpoint of w
    and the zero, for r >= 2 twice the zero, then L per-token starts (NaN where not used; S = 4 + L for r = 1,
    5 + L for r >= 2).  untied: _general_starts.own_starts_untied (S = 7)."""
    w = np.ascontiguousarray(w, dtype=float)
    n, L, r = w.shape
    if untied:
        return own_starts_untied(w, np.ascontiguousarray(T, dtype=float), np.ascontiguousarray(Vinv, dtype=float))
    out = _own_starts(w.reshape(n, L * r), np.ascontiguousarray(T, dtype=float), np.ascontiguousarray(Vinv, dtype=float))
    return out.reshape(n, n_own_starts(L, r), L, r)


def _check(w, T, Vinv, sigma2, starts, gtol, max_iter, untied=False):
    w = np.asarray(w)
    T = np.asarray(T)
    Vinv = np.asarray(Vinv)
    for name, arr in (("w", w), ("T", T), ("Vinv", Vinv)):
        if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
            raise InputTypeError(f"{name} must be a real array, got dtype {arr.dtype}")
    if w.ndim != 3:
        raise InputError(f"w must have shape (n, L, r), got {w.shape}")
    n, L, r = w.shape
    if L < 2 or r < 1:
        raise InputError(f"need L >= 2 tokens and rank r >= 1, got L={L}, r={r}")
    if not isinstance(untied, bool | np.bool_):
        raise InputTypeError(f"untied must be a bool, got {type(untied).__name__}")
    if untied and r % 2:
        raise InputError(f"the untied loss needs an even field rank (query and key halves), got r={r}")
    if T.shape != (n, L, L):
        raise InputError(f"T must have shape {(n, L, L)}, got {T.shape}")
    if Vinv.shape != (r, r):
        raise InputError(f"Vinv must have shape {(r, r)}, got {Vinv.shape}")
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(T)) and np.all(np.isfinite(Vinv))):
        raise InputError("w, T and Vinv must be finite")
    # Entries exactly 0 or 1 (an underflowed softmax) are harmless: the starts clip log T.
    if np.any(T < 0) or np.any(T > 1) or np.any(np.abs(T.sum(axis=2) - 1) > 1e-8):
        raise InputError("T must have entries in [0, 1] and rows summing to 1")
    if not np.allclose(Vinv, Vinv.T, rtol=1e-12, atol=0) or np.linalg.eigvalsh(0.5 * (Vinv + Vinv.T))[0] <= 0:
        raise InputError("Vinv must be symmetric positive definite")
    if isinstance(sigma2, bool) or not isinstance(sigma2, (int, float, np.integer, np.floating)):
        raise InputTypeError(f"sigma2 must be a number, got {type(sigma2).__name__}")
    if not (np.isfinite(sigma2) and sigma2 > 0):
        raise InputError(f"sigma2 must be finite and > 0, got {sigma2}")
    if not (isinstance(gtol, (int, float)) and gtol > 0):
        raise InputError(f"gtol must be > 0, got {gtol}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise InputError(f"max_iter must be an integer >= 1, got {max_iter}")
    if starts is not None:
        starts = np.asarray(starts)
        if starts.ndim != 4 or starts.shape[0] != n or starts.shape[2:] != (L, r):
            raise InputError(f"starts must have shape (n, S, L, r) = ({n}, S, {L}, {r}), got {starts.shape}")


def prox_general(w: np.ndarray, T: np.ndarray, Vinv: np.ndarray, sigma2: float, starts: np.ndarray | None = None, *,
                 gtol: float = 1e-9, max_iter: int = 100, own: bool = True, untied: bool = False) -> ProxResult:
    """Global minimiser of F at every point: the best of Newton runs from the own starts and the caller's.

    w (n, L, r); T (n, L, L) row-stochastic; Vinv (r, r) symmetric positive definite;
    sigma2 > 0; starts (n, S, L, r) optional extra starts (non-finite entries mark a start to skip).
    own=False runs only the caller's starts (for measurements).  untied: the scores are h^Q h^K^T with
    h = (h^Q, h^K) split at r / 2 (the untied student, docs/untied.md), i.e. h B h^T with B = [[0, I], [0, 0]].
    """
    _check(w, T, Vinv, sigma2, starts, gtol, max_iter, untied)
    w = np.ascontiguousarray(w, dtype=float)
    T = np.ascontiguousarray(T, dtype=float)
    Vinv = np.ascontiguousarray(Vinv, dtype=float)
    with compile_notice("the general proximal kernel", (multistart, _own_starts), "30 s"):
        return _prox_general(w, T, Vinv, sigma2, starts, gtol, max_iter, own, untied)


def _prox_general(w, T, Vinv, sigma2, starts, gtol, max_iter, own, untied):  # noqa: ANN001, ANN202
    n, L, r = w.shape
    parts = []
    if own:
        parts.append(own_starts(w, T, Vinv, untied=True) if untied
                     else _own_starts(w.reshape(n, L * r), T, Vinv).reshape(n, n_own_starts(L, r), L, r))
    if starts is not None:
        parts.append(np.asarray(starts, dtype=float))
    if not parts:
        raise InputError("no starts: pass starts or keep own=True")
    allst = np.ascontiguousarray(np.concatenate(parts, axis=1).reshape(n, -1, L * r))
    Bm = score_form(r // 2) if untied else np.zeros((r, r))
    h, val, gn, win, it, found, n_found = multistart(w.reshape(n, L * r), T, Vinv, float(sigma2), allst, float(gtol),
                                                     int(max_iter), _BLOCK, 1 if untied else 0, Bm)
    minima = None
    if own and n and np.all(n_found >= 1):
        # Recorded from full evaluations only (own starts): what a continued evaluation near here starts from.
        minima = LocalMinima(h=found.reshape(n, -1, L, r), count=n_found)
    return ProxResult(h=h.reshape(n, L, r), value=val, converged=gn < gtol, grad_norm=gn, winner=win, iterations=it,
                      minima=minima)
