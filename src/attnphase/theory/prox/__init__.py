"""The proximal map, one protocol over all integration points at once.

At each point i find the global minimiser over h in R^{L x r} of

    F(h) = sum_l (1/2) (h_l - w_l)^T Vinv (h_l - w_l) + (sigma2/2) sum_{l,k} (S_lk(h) - T_lk)^2,

S the row-wise softmax of the scores h_l . h_k, T the target attention (rows sum to 1).  With untied=True (the
untied student, docs/untied.md) r is even, h_l = (h^Q_l, h^K_l) and the scores are h^Q_l . h^K_k = h_l^T B h_k,
B = [[0, I], [0, 0]]; only ``general`` and ``reference`` implement it.  Every implementation has the signature

    kernel(w: (n, L, r), T: (n, L, L), Vinv: (r, r), sigma2: float, starts: (n, S, L, r) | None) -> ProxOutput

and returns an object with ``h`` (n, L, r), ``value`` (n,) = min_h F (the Moreau envelope), ``converged`` (n,)
bool (gradient below tolerance) and ``grad_norm`` (n,).  Implementations:

- ``l2r1``: the compiled two-dimensional Newton kernel (L = 2, r = 1; for two tokens the loss depends on T
  only through its diagonal and V is a scalar);
- ``general``: the compiled batched kernel for any L, r (module ``general``);
- ``reference``: scipy from many starts, slow and obviously correct (tests only).

``prox(..., kernel="auto")`` picks ``l2r1`` where it applies and ``general`` otherwise.
"""

from __future__ import annotations

import numpy as np

from attnphase.errors import InputError
from attnphase.theory.prox.general import prox_general
from attnphase.theory.prox.l2r1 import prox_l2r1, prox_l2r1_continue, prox_l2r1_warm
from attnphase.theory.prox.protocol import (
    KERNELS,
    LocalMinima,
    ProxOutput,
    check_inputs,
    check_minima,
    choose_kernel,
)
from attnphase.theory.prox.reference import prox_reference
from attnphase.theory.prox.two_token import GTOL

__all__ = ["KERNELS", "LocalMinima", "ProxOutput", "check_inputs", "check_minima", "choose_kernel", "prox"]


def prox(w: np.ndarray, T: np.ndarray, Vinv: np.ndarray, sigma2: float, starts: np.ndarray | None = None,
         *, kernel: str = "auto", gtol: float = GTOL, untied: bool = False, warm: np.ndarray | None = None,
         minima: LocalMinima | None = None) -> ProxOutput:
    """Global minimiser of F at every point with the chosen implementation (see the module docstring).

    warm (n, L, r): minimisers of an evaluation at nearby (w, T, Vinv); then the compiled kernels run Newton from
    them only (no own starts): a local minimiser, ~4x cheaper, blind to basin switches, for a solver's
    speculative steps and never for a reported number.  The reference kernel adds them to its own starts.

    minima (LocalMinima, from an evaluation at nearby parameters on the same points): Newton from every local
    minimiser that evaluation found, the lowest end point kept, instead of the own starts.  Unlike warm it follows
    each basin, so a point whose global minimiser switches basin is still right; it misses only a basin that
    no start reached at the nearby evaluation but one reaches here.  Measured on the study's map
    (benchmarks/continued_evaluations.py): the own starts' result at all but one point in 1.6 million for moves
    of the overlaps up to 3e-3, at 4x less CPU; callers keep the moves that small (state_evolution.BranchMap)."""
    w, T, Vinv = check_inputs(w, T, Vinv)
    name = choose_kernel(w.shape[1], w.shape[2], kernel, untied)
    if minima is not None:
        if warm is not None:
            raise InputError("prox: pass warm or minima, not both")
        mh = check_minima(minima, w.shape)
        if name == "l2r1":
            return prox_l2r1_continue(w, T, Vinv, float(sigma2), minima, gtol=gtol)
        # NaN rows (beyond count) are starts the other kernels skip.
        if name == "general":
            return prox_general(w, T, Vinv, float(sigma2), mh, gtol=gtol, own=False, untied=untied)
        starts = mh if starts is None else np.concatenate([starts, mh], axis=1)
    if warm is not None:
        warm = np.asarray(warm, dtype=float)
        if warm.shape != w.shape:
            raise InputError(f"prox: warm has shape {warm.shape}, w {w.shape}")
        if name == "l2r1":
            return prox_l2r1_warm(w, T, Vinv, float(sigma2), warm, gtol=gtol)
        if name == "general":
            return prox_general(w, T, Vinv, float(sigma2), warm[:, None], gtol=gtol, own=False, untied=untied)
        starts = warm[:, None] if starts is None else np.concatenate([starts, warm[:, None]], axis=1)
    if name == "l2r1":
        return prox_l2r1(w, T, Vinv, float(sigma2), starts, gtol=gtol)
    if name == "general":
        return prox_general(w, T, Vinv, float(sigma2), starts, gtol=gtol, untied=untied)
    return prox_reference(w, T, Vinv, float(sigma2), starts, gtol=gtol, untied=untied)
