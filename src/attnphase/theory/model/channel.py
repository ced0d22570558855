"""Channel side: overlaps -> hat overlaps, through the proximal map averaged over integration points.

Points: an array z of shape (L (r + r*), n) of standard Gaussians; rows l r + a hold xi_{l,a} (student noise,
l < L, a < r), rows L r + l r* + b hold eta_{l,b} (teacher noise).  For the study (L = 2, r = r* = 1) these
are (xi_1, xi_2, eta_1, eta_2).  The same points are reused across outer iterations, branches and alphas
(common random numbers), so integration errors are smooth in the parameters and cancel in differences.

With c = (rho - theta^T q^{-1} theta)^{1/2} (r* x r*):
    omega_l = m_l + q^{1/2} xi_l,   h*_l = theta^T q^{-1/2} xi_l + c eta_l,   T = T(h*),
    hhat = prox(omega, T, V^{-1}),   f_l = V^{-1} (hhat_l - omega_l),
    qhat = alpha E sum_l f_l f_l^T,   mhat_l = alpha E f_l,   thetahat = alpha E sum_l f_l eta_l^T c^{-1},
    Vhat = -alpha E sum_l f_l xi_l^T q^{-1/2} + thetahat theta^T q^{-1}.
Vhat is Stein's lemma applied to -alpha E sum_l d f_l / d omega_l (with h* fixed): the xi form keeps the
contribution of the jumps of the global minimiser between basins, which the pointwise Jacobian misses.

Untied student (setting.untied): r is the field rank 2r' (query fields, then key fields) and the prox's loss
has the scores h^Q h^K^T; nothing else changes (docs/untied.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from attnphase.errors import InputError
from attnphase.problem import teacher_attention
from attnphase.setting import Setting
from attnphase.theory.model.contractions import outer_sum, right_matmul
from attnphase.theory.model.overlaps import Branch, HatOverlaps, Layout, Overlaps, as_branch
from attnphase.theory.prox import LocalMinima, check_minima, choose_kernel, prox
from attnphase.theory.prox._compile_notice import compile_notice
from attnphase.theory.prox.two_token import GTOL, MAX_ITER, NO_GIVEN, STUDY_COMPILE, converged
from attnphase.theory.solvers.fixed_point import Inadmissible


@dataclass
class ChannelOutput:
    hats: HatOverlaps
    moreau: float  # E[min_h F], enters the free energy
    prox_failures: int  # points whose Newton did not reach the gradient tolerance
    n_points: int
    h: np.ndarray | None = None  # the minimisers (n, L, r): warm starts for a nearby evaluation
    minima: LocalMinima | None = None  # every local minimiser found (kernels that record them): see prox.prox


def points_dim(setting: Setting) -> int:
    """Dimension of the Gaussian integrals: L (r + r*) (untied: r is the field rank 2r)."""
    return setting.L * (setting.field_rank + setting.r_star)


def split_points(z: np.ndarray, L: int, r: int, r_star: int) -> tuple[np.ndarray, np.ndarray]:
    """(xi (n, L, r), eta (n, L, r*)) from points of shape (L (r + r*), n)."""
    n = z.shape[1]
    xi = z[: L * r].T.reshape(n, L, r)
    eta = z[L * r: L * (r + r_star)].T.reshape(n, L, r_star)
    return xi, eta


def _sqrt_sym(M: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """M^{1/2} and M^{-1/2} of a symmetric positive-definite matrix (Inadmissible otherwise)."""
    if M.shape == (1, 1):
        v = float(M[0, 0])
        if not v > 0:
            raise Inadmissible(f"{name} = {v:.3g} <= 0: the overlaps left the admissible set")
        s = np.sqrt(v)
        return np.array([[s]]), np.array([[1.0 / s]])
    vals, vecs = np.linalg.eigh(0.5 * (M + M.T))
    if not vals.min() > 1e-300:
        raise Inadmissible(f"{name} has eigenvalue {vals.min():.3g} <= 0: the overlaps left the admissible set")
    s = np.sqrt(vals)
    return (vecs * s) @ vecs.T, (vecs / s) @ vecs.T


def field_matrices(setting: Setting, o: Overlaps) -> dict:
    """q^{1/2}, q^{-1/2}, c = (rho - theta^T q^{-1} theta)^{1/2} and c^{-1} (keys qs, qis, c, cinv); Inadmissible
    where q or rho - theta^T q^{-1} theta is not positive definite."""
    qs, qis = _sqrt_sym(o.q, "q")
    resid = setting.rho_matrix - o.theta.T @ qis @ qis @ o.theta
    c, cinv = _sqrt_sym(resid, "rho - theta^T q^{-1} theta")
    return {"qs": qs, "qis": qis, "c": c, "cinv": cinv}


def fields(setting: Setting, o: Overlaps, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    """Student field means omega (n, L, r) and teacher fields h* (n, L, r*) at the points, plus the matrices."""
    L, r, rs = setting.L, setting.field_rank, setting.r_star
    xi, eta = split_points(z, L, r, rs)
    mats = field_matrices(setting, o)
    qs, qis, c = mats["qs"], mats["qis"], mats["c"]
    if r == 1 and rs == 1:
        # Scalar arithmetic in the study's order of operations (so the general path reproduces it to round-off).
        sq = qs[0, 0]
        w = xi * sq + o.m[None, :, :]
        hstar = (o.theta[0, 0] / sq) * xi + c[0, 0] * eta
    else:
        w = right_matmul(xi, qs) + o.m[None]
        hstar = right_matmul(xi, qis @ o.theta) + right_matmul(eta, c)
    return w, hstar, {"xi": xi, "eta": eta, **mats}


def _outer_mean(f: np.ndarray, g: np.ndarray) -> np.ndarray:
    """E sum_l f_l g_l^T over the points: (n, L, a), (n, L, b) -> (a, b).  Elementwise products and sums, not BLAS:
    on a machine shared by several processes a multithreaded BLAS call on these skinny shapes was measured
    100x slower (35 ms for one dot product of 65536 numbers)."""
    n = f.shape[0]
    if f.shape[2] == 1 and g.shape[2] == 1:
        return _scalar_mean(f * g)
    return outer_sum(f, g) / n


def _scalar_mean(prods: np.ndarray) -> np.ndarray:
    """_outer_mean for a = b = 1 from the products f_l g_l, shape (n, L, ...): a 1 x 1 matrix."""
    return np.array([[float(np.sum(prods))]]) / prods.shape[0]


def pointwise_f(setting: Setting, overlaps: Overlaps, points: np.ndarray, *, kernel: str = "auto",
                warm: np.ndarray | None = None, minima: LocalMinima | None = None) -> tuple[np.ndarray, Any, dict]:
    """The channel's integrand at each point: f_l = V^{-1} (hhat_l - omega_l), shape (n, L, r), with the
    proximal solution (h, value, converged) and the field matrices of :func:`fields` (xi, eta, q^{1/2}, ...).
    Every hat overlap is an average of f against the points (update_hatoverlaps); exposed for code that needs
    other averages of the same integrand (e.g. derivatives with respect to an overlap by a score identity).

    warm: minimisers (n, L, r) of an evaluation at nearby overlaps on the same points.  Then only Newton from
    them runs (prox's warm path): a cheap approximation that misses basin switches, for a solver's
    speculative steps (fixed_point.chord's `cheap`), never for a reported number.

    minima: the local minimisers of an evaluation at nearby overlaps on the same points (ChannelOutput.minima);
    every one is continued by Newton and the lowest kept (prox's minima path), instead of the own starts.

    At theta = 0 the teacher's fields are c eta and T depends on h* h*^T only, so on points that come with their
    eta-mirror images (symmetric.mirrored_points: the transition's semantic and mixed conditions, the stability
    check) an image's integrand is its original's, bitwise: the prox runs on the originals only (eta_images)."""
    rep = eta_images(setting, points) if not np.any(overlaps.theta) else None
    if rep is None:
        return _pointwise_f(setting, overlaps, points, kernel, warm, minima)
    own = np.flatnonzero(rep == np.arange(rep.size))
    if minima is not None:
        minima = LocalMinima(h=minima.h[own], count=minima.count[own])
    f, sol, mats = _pointwise_f(setting, overlaps, points[:, own], kernel, None if warm is None else warm[own], minima)
    at = np.searchsorted(own, rep)
    xi, eta = split_points(points, setting.L, setting.field_rank, setting.r_star)
    return f[at], _rows(sol, at), {**mats, "xi": xi, "eta": eta}


def _rows(sol: Any, at: np.ndarray) -> Any:
    """A prox result (per-point arrays, minima) at the rows `at`."""
    per_point = {k.name: getattr(sol, k.name)[at] for k in dataclasses.fields(sol)
                 if isinstance(getattr(sol, k.name), np.ndarray)}
    m = getattr(sol, "minima", None)
    if m is not None:
        per_point["minima"] = LocalMinima(h=m.h[at], count=m.count[at])
    return dataclasses.replace(sol, **per_point)


MIRROR_DEPTH = 3  # halvings searched for eta-mirrored blocks (mirrored_points': 1; the stability check's: 2)


def eta_images(setting: Setting, points: np.ndarray) -> np.ndarray | None:
    """For each point, the column of the point it is the eta-mirror image of (itself where none): found where a block
    of columns is followed by its image (mirrored_points' [X, eta X]), in the whole set or, down to MIRROR_DEPTH
    halvings, in its halves (the stability check's [X, eta X, xi X, xi eta X]); None where there is none."""
    e = setting.L * setting.field_rank  # (the first row of eta)
    rep = np.arange(points.shape[1])

    def mirrored(a: np.ndarray, b: np.ndarray) -> bool:
        return bool(np.array_equal(a[:e], b[:e]) and np.array_equal(a[e:], -b[e:]))

    def visit(lo: int, hi: int, depth: int) -> bool:  # (whether a mirrored block was found in lo..hi)
        k = (hi - lo) // 2
        if k == 0 or (hi - lo) % 2 or depth > MIRROR_DEPTH:
            return False
        a, b = points[:, lo:lo + k], points[:, lo + k:hi]
        if mirrored(a[:, :1], b[:, :1]) and mirrored(a, b):  # (the first column first: a cheap refusal)
            rep[lo + k:hi] = rep[lo:lo + k]
            return True
        return visit(lo, lo + k, depth + 1) | visit(lo + k, hi, depth + 1)

    return rep if visit(0, rep.size, 1) else None


def _pointwise_f(setting: Setting, overlaps: Overlaps, points: np.ndarray, kernel: str, warm: np.ndarray | None,
                 minima: LocalMinima | None) -> tuple[np.ndarray, Any, dict]:
    o = overlaps
    w, hstar, mats = fields(setting, o, points)
    T = teacher_attention(hstar, setting.omega, setting.A_array)
    V = 0.5 * (o.V + o.V.T)
    Vinv = np.array([[1.0 / V[0, 0]]]) if V.shape == (1, 1) else np.linalg.inv(V)
    sol = prox(w, T, Vinv, setting.sigma**2, kernel=kernel, untied=setting.untied, warm=warm, minima=minima)
    if V.shape == (1, 1):
        f = (sol.h - w) / V[0, 0]
    else:
        f = right_matmul(sol.h - w, Vinv)
    return f, sol, mats


def update_hatoverlaps(setting: Setting, alpha: float, overlaps: Overlaps, points: np.ndarray,
                       branch: str | Branch = Branch.free, *, kernel: str = "auto",
                       warm: np.ndarray | None = None, minima: LocalMinima | None = None) -> ChannelOutput:
    """Hat overlaps at the given overlaps, averaged over the points (shape (L (r + r*), n)); warm, minima: see
    :func:`pointwise_f`.  In the study's case (L = 2, r = r* = 1, tied; kernel auto or l2r1; no warm starts) one
    compiled loop computes the integrand (theory/_prox_kernel.channel_kernel): the pointwise path's numbers, bitwise, for
    1.5-3 ms less CPU per call (docs/numerics.md)."""
    b = as_branch(branch)
    if warm is None and _fused_applies(setting, kernel):
        return _update_fused(setting, alpha, overlaps, points, b, minima)
    return _update_pointwise(setting, alpha, overlaps, points, b, kernel=kernel, warm=warm, minima=minima)


def _fused_applies(setting: Setting, kernel: str) -> bool:
    return (setting.L == 2 and setting.field_rank == 1 and setting.r_star == 1
            and choose_kernel(2, 1, kernel, setting.untied) == "l2r1")


@lru_cache(maxsize=64)
def _layout(setting: Setting, b: Branch) -> Layout:
    # (building one takes eigh, svd and pinv: ~0.35 ms, 7% of a continued evaluation)
    return Layout.for_setting(setting, b)


def _hats(setting: Setting, b: Branch, alpha: float, o: Overlaps, mats: dict, ff: np.ndarray, f: np.ndarray,
          f_xi: np.ndarray, f_eta: Callable[[], np.ndarray]) -> HatOverlaps:
    """The hat overlaps from the averages E sum_l f_l f_l^T (ff), E f (f, (L, r)), E sum_l f_l xi_l^T (f_xi) and
    E sum_l f_l eta_l^T (f_eta: a callable, evaluated on branches with theta only), projected onto the branch."""
    qhat = alpha * ff
    mhat = alpha * f
    if b.has_theta:
        thetahat = alpha * f_eta() @ mats["cinv"]
    else:
        thetahat = np.zeros((setting.field_rank, setting.r_star))
    Vhat = -alpha * f_xi @ mats["qis"] + thetahat @ o.theta.T @ mats["qis"] @ mats["qis"]
    return _layout(setting, b).project_hats(HatOverlaps(qhat=qhat, mhat=mhat, Vhat=Vhat, thetahat=thetahat))


def reweighted_hats(setting: Setting, alpha: float, o: Overlaps, points: np.ndarray, b: Branch | str, f: np.ndarray,
                    o_new: Overlaps) -> HatOverlaps:
    """The hat overlaps at o_new from the integrand f (pointwise_f's at o on these points), with every point's fields
    (omega, h*) held where o put them and weighted by their law under o_new against their law under o (importance
    weights, normalised to mean 1).  Only for o_new with o's V: the prox at each point, and so f, is then unchanged,
    and this is the map's channel side at o_new, smooth in o_new.  Its derivative along q, m and theta is the
    likelihood-ratio (score-function) derivative of the hats: it counts the points whose global minimiser switches
    basin as the law moves (a difference of the map sees them as jumps, a basin-held one not at all: docs/numerics.md,
    "The Jacobian of the map")."""
    b = as_branch(b)
    if not np.array_equal(o_new.V, o.V):
        raise ValueError("reweighted_hats: o_new must have o's V (the prox depends on V)")
    w, hstar, mats = fields(setting, o, points)
    new = field_matrices(setting, o_new)
    xi2 = right_matmul(w - o_new.m[None], new["qis"])
    eta2 = right_matmul(hstar - right_matmul(xi2, new["qis"] @ o_new.theta), new["cinv"])

    def log_norm(m: dict) -> float:  # log det of the fields' map from the points, per token
        return float(np.linalg.slogdet(m["qs"])[1] + np.linalg.slogdet(m["c"])[1])

    sq = lambda a: np.sum(a * a, axis=(1, 2))  # noqa: E731
    log_ratio = (-0.5 * (sq(xi2) + sq(eta2) - sq(mats["xi"]) - sq(mats["eta"]))
                 + setting.L * (log_norm(mats) - log_norm(new)))
    weight = np.exp(log_ratio - log_ratio.max())
    fw = f * (weight / weight.mean())[:, None, None]
    return _hats(setting, b, alpha, o_new, new, _outer_mean(fw, f), fw.mean(axis=0), _outer_mean(fw, xi2),
                 lambda: _outer_mean(fw, eta2))


def _update_pointwise(setting: Setting, alpha: float, o: Overlaps, points: np.ndarray, b: Branch, *, kernel: str,
                      warm: np.ndarray | None, minima: LocalMinima | None) -> ChannelOutput:
    """update_hatoverlaps from :func:`pointwise_f` (any setting, any kernel; the reference of the fused path)."""
    f, sol, mats = pointwise_f(setting, o, points, kernel=kernel, warm=warm, minima=minima)
    n = f.shape[0]
    xi, eta = mats["xi"], mats["eta"]
    hats = _hats(setting, b, alpha, o, mats, _outer_mean(f, f), f.mean(axis=0), _outer_mean(f, xi),
                 lambda: _outer_mean(f, eta))
    return ChannelOutput(hats=hats, moreau=float(np.mean(sol.value)), prox_failures=int(np.sum(~sol.converged)),
                         n_points=n, h=sol.h, minima=getattr(sol, "minima", None))


def _update_fused(setting: Setting, alpha: float, o: Overlaps, points: np.ndarray, b: Branch,
                  minima: LocalMinima | None) -> ChannelOutput:
    """update_hatoverlaps for L = 2, r = r* = 1 by the compiled kernel (theory/_prox_kernel.channel_kernel)."""
    from attnphase.theory.prox._two_token_kernel import FETA, FF, FXI, channel_kernel

    points = np.asarray(points, dtype=float)
    if points.ndim != 2 or points.shape[0] != 4:
        raise InputError(f"points must have shape (4, n) for L = 2, r = r* = 1, got {points.shape}")
    n = points.shape[1]
    mats = field_matrices(setting, o)
    if minima is None:
        given, gcount = NO_GIVEN
    else:
        given = np.ascontiguousarray(check_minima(minima, (n, 2, 1))[:, :, :, 0])
        gcount = np.ascontiguousarray(minima.count, dtype=np.int64)
    sq = mats["qs"][0, 0]
    # As the pointwise path's arithmetic: V symmetrised, its prox at 1 / Vinv (round-off from V).
    V = (0.5 * (o.V + o.V.T))[0, 0]
    V_prox = 1.0 / float(1.0 / V)
    A = setting.A_array
    with compile_notice("the two-token channel kernel", (channel_kernel,), STUDY_COMPILE):
        h, mins, count, prods, f_sum, value, grad = channel_kernel(
            np.ascontiguousarray(points.T), float(sq), float(o.m[0, 0]), float(o.m[1, 0]), float(o.theta[0, 0] / sq),
            float(mats["c"][0, 0]), float(setting.omega), float(A[0, 0]), float(A[1, 1]), float(V), V_prox,
            float(setting.sigma**2), GTOL, MAX_ITER, given, gcount)
    hats = _hats(setting, b, alpha, o, mats, _scalar_mean(prods[FF]), f_sum[:, None] / n, _scalar_mean(prods[FXI]),
                 lambda: _scalar_mean(prods[FETA]))
    failures = int(n - np.count_nonzero(converged(grad)))
    return ChannelOutput(hats=hats, moreau=float(np.mean(value)), prox_failures=failures, n_points=n, h=h,
                         minima=LocalMinima(h=mins[:, :, :, None], count=count))
