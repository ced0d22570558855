"""GAMP at finite d for the block sign-retrieval channel, on data drawn from the model (attnphase.problem).

Pipeline (docs/bayes.md): ``Problem.sample`` (numpy) draws Q*, the training and the test sequences; the read-off
(:mod:`attnphase.theory.bayes.readoff`) turns each training sample (x, y) into the teacher's fields up to a sign;
the noisy variant adds N(0, delta sigma^2) to them (the same law as a teacher whose softmax sees noisy fields);
GAMP then runs on the normalised problem: design rows F_(mu, l) = x^mu_l / (sigma sqrt(d)) (M = n L rows), blocks
y_mu = fields / sigma, prior N(0, 1), channel P(y | w) = (1/2)[N(y; w, delta) + N(y; -w, delta)].

The iteration (Rangan's GAMP with scalar variances, the Onsager term on each row's own output):

    V = v,  omega = F a - V g_prev,  g = g_out(y, omega, V),  A = -sum_rows dg_out/domega_diag / d,
    B = F^T g + A a,  a = B / (1 + A),  v = 1 / (1 + A).

Cross terms between the L rows of a block are of order 1/sqrt(d) (independent tokens) and dropped.  The state
evolution of this iteration is attnphase.theory.bayes.state_evolution (q_t = a_t . Q* / d = |a_t|^2 / d).

Starts: from a = 0 exactly g_out = 0 and GAMP stays at zero by symmetry (the channel is even), so ``init`` is
"random" (a ~ N(0, eps^2 I), overlap O(eps / sqrt(d)); it has to grow out of the noise, in about
log(d) / log(alpha / alpha_weak) iterations) or "informative" (a = q0 Q* + sqrt(q0 (1 - q0)) z, v = 1 - q0: on the
Nishimori line with overlap q0, the start state evolution is given).

Test error per iteration (0..10, then every 10th, and the last): for each test sample the fields' GAMP
posterior is N(x a / (sigma sqrt d), v) (in units of sigma), T_hat = (1 - omega) E[softmax(h h^T)] + omega A
(Gauss-Hermite in L <= 4 dimensions, Sobol points beyond), and the error ||(T - T_hat) x||^2 / (2d) is averaged
over the test set: measured on the data, not the asymptotic formula.  The same measurement for the linear
baseline's predictor E[T] (``test_error_linear_measured``) has the same sampling noise: the ratio
test_error / test_error_linear_measured is the low-variance number to hold against theory (a test set of 1000
sequences gives the error to about 5%, and the teacher's norm |Q*|^2 / d varies by O(1/sqrt(d))).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from attnphase.errors import InputError, InputTypeError
from attnphase.notes import Note, NoteCode
from attnphase.problem import Problem, teacher_from_softmax, teacher_softmax
from attnphase.resources import USABLE_FRACTION, available_host_memory
from attnphase.setting import Setting, check_alpha, check_int, check_number
from attnphase.theory.bayes.channel import check_delta, dg_out_diag, g_out
from attnphase.theory.bayes.readoff import read_fields
from attnphase.theory.bayes.results import AmpResult, bayes_note
from attnphase.theory.model.quadrature import gauss_hermite_grid
from attnphase.theory.solvers.fixed_point import Status

INITS = ("random", "informative")
RANDOM_SCALE = 0.1  # eps of the random start
TOL = 1e-9  # stop when the mean squared change of a falls below it
V_MIN = 1e-12  # perfect recovery reached
TEST_EVERY = 10  # test error at iterations 0..10, then every 10th and the last (it costs more than an iteration)
GH_PER_DIM = {2: 16, 3: 9, 4: 6}
CHUNK = 4_000_000  # softmax entries evaluated at once by the test error
MAX_BYTES = 8 * 2**30  # refuse runs planning more than this (also bounded by the memory available)


def memory_bytes(d: int, alpha: float, L: int, n_test: int) -> int:
    """Peak bytes of one run: the training tokens and labels (2 n L d, the labels recomputed once for the read-off),
    the test tokens and labels (2 n_test L d), float64, plus the test error's chunks and the O(n L) messages."""
    n = max(1, round(alpha * d))
    return 8 * (2 * n * L * d + 2 * n_test * L * d + 4 * CHUNK + 8 * n * L) + 8 * 4 * d


def check_amp_args(setting: Setting, d: Any, alpha: Any, seed: Any, delta: Any, n_test: Any, max_iter: Any,
                   init: Any, q0: Any) -> tuple:
    """Every option of run_amp checked before any work (sizes bounded by the memory they need)."""
    if not isinstance(setting, Setting):
        raise InputTypeError("setting must be an attnphase.Setting")
    if setting.r_star != 1:
        raise InputError(f"GAMP implements a rank-1 teacher (r* = 1), got r* = {setting.r_star}")
    if setting.omega >= 1.0:
        raise InputError("omega = 1: the labels reveal nothing about the teacher; GAMP has nothing to run on "
                         "(the Bayes-optimal overlap is 0, see attnphase bayes)")
    d = check_int("d", d, 2)
    alpha = check_alpha(alpha)
    seed = check_int("seed", seed, 0)
    delta = check_delta(delta)
    n_test = check_int("n_test", n_test, 1)
    max_iter = check_int("max_iter", max_iter, 1)
    if init not in INITS:
        raise InputError(f"init must be one of {', '.join(INITS)}, got {init!r}")
    q0 = check_number("q0", q0)
    if not 0.0 < q0 < 1.0:
        raise InputError(f"q0 must lie in (0, 1), got {q0:g}")
    if d < setting.L:
        raise InputError(f"d = {d} must be >= L = {setting.L} (the read-off needs x of full rank)")
    n = round(alpha * d)
    if n < 1:
        raise InputError(f"alpha * d must round to at least one sample, got n = {n}")
    need = memory_bytes(d, alpha, setting.L, n_test)
    limit = min(MAX_BYTES, available_host_memory() * USABLE_FRACTION)
    if need > limit:
        raise InputError(f"d = {d}, alpha = {alpha:g}, L = {setting.L}, n_test = {n_test}: GAMP needs about "
                         f"{need / 2**30:.3g} GiB, more than the {limit / 2**30:.3g} GiB allowed here")
    return d, alpha, seed, delta, n_test, max_iter, q0


def _nodes(L: int) -> tuple[np.ndarray, np.ndarray]:
    """Integration nodes (L, m) and weights for E over N(0, I_L): Gauss-Hermite tensor rule for L <= 4, else 4096
    scrambled Sobol points (equal weights)."""
    if L in GH_PER_DIM:
        return gauss_hermite_grid(GH_PER_DIM[L], L)
    from attnphase.theory.model.quadrature import gaussian_sobol

    z = gaussian_sobol(12, L, 1900 + L)
    return z, np.full(z.shape[1], 1.0 / z.shape[1])


def _posterior_attention(setting: Setting, omega_t: np.ndarray, V: float, delta: float) -> np.ndarray:
    """E[T] under fields h = sigma w, w ~ N(omega_t, (V + delta) I): (n, L, L), in chunks of test samples."""
    L = setting.L
    z, wz = _nodes(L)
    s = math.sqrt(max(V + delta, 0.0))
    per = max(1, CHUNK // (z.shape[1] * L * L))
    out = np.empty((omega_t.shape[0], L, L))
    for i in range(0, omega_t.shape[0], per):
        h = setting.sigma * (omega_t[i:i + per, None, :] + s * z.T[None, :, :])
        out[i:i + per] = np.einsum("j,njlk->nlk", wz, teacher_softmax(h[..., None]))
    return teacher_from_softmax(out, setting.omega, setting.A_array)


def _test_error(T: np.ndarray, T_hat: np.ndarray, G: np.ndarray, d: int) -> float:
    D = T - T_hat
    return float(np.mean(np.einsum("nlk,nkj,nlj->n", D, G, D)) / (2.0 * d))


def run_amp(setting: Setting, d: int, alpha: float, seed: int = 0, delta: float = 0.0, n_test: int = 1000,
            max_iter: int = 500, init: str = "random", q0: float = 0.1) -> AmpResult:
    """GAMP on one sampled problem (module docstring); the record has the per-iteration history."""
    d, alpha, seed, delta, n_test, max_iter, q0 = check_amp_args(setting, d, alpha, seed, delta, n_test, max_iter,
                                                                  init, q0)
    t0 = time.perf_counter()
    problem = Problem(setting)
    data = problem.sample(d, round(alpha * d), n_test, seed)
    sigma, L = setting.sigma, setting.L
    # Extra randomness (field noise, starts) from a stream of its own, so the sampler's data stay the same.
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 19]))
    x = data.x
    h, resid, degenerate = read_fields(setting, x, data.y)
    warnings: list[Note] = []
    if np.max(resid) > 1e-8:
        warnings.append(bayes_note(NoteCode.readoff_residual))
    if np.any(degenerate):
        warnings.append(bayes_note(NoteCode.readoff_degenerate))
    qs = data.Q_star[:, 0]
    qn = float(qs @ qs)  # |Q*|^2 (-> d): overlaps are normalised by it, so that perfect recovery reads 1
    xt = data.x_test
    G_test = np.einsum("nld,nkd->nlk", xt, xt)
    T_test = data.T_test
    if delta > 0:
        h = h + sigma * math.sqrt(delta) * rng.standard_normal(h.shape)
        ht = (xt @ qs) / math.sqrt(d) + sigma * math.sqrt(delta) * rng.standard_normal((n_test, L))
        T_test = problem.teacher_attention(ht[:, :, None])
    n = x.shape[0]
    F = x.reshape(n * L, d)  # a view of the sampled tokens; scaled in place (the sample is not used after)
    F *= 1.0 / (sigma * math.sqrt(d))
    Y = h / sigma
    row2 = float(np.mean(np.sum(F * F, axis=1)))
    Xt = xt.reshape(n_test * L, d) / (sigma * math.sqrt(d))

    if init == "random":
        a = RANDOM_SCALE * rng.standard_normal(d)
        v = 1.0 - RANDOM_SCALE**2
    else:
        a = q0 * qs + math.sqrt(q0 * (1.0 - q0)) * rng.standard_normal(d)
        v = 1.0 - q0
    g_prev = np.zeros((n, L))
    hist_m, hist_q, hist_te, te_its = [], [], [], []

    def record(a: np.ndarray, v: float, t: int, last: bool = False) -> None:
        hist_m.append(abs(float(a @ qs)) / qn)
        hist_q.append(float(a @ a) / qn)
        if t <= TEST_EVERY or t % TEST_EVERY == 0 or last:
            om_t = (Xt @ a).reshape(n_test, L)
            hist_te.append(_test_error(T_test, _posterior_attention(setting, om_t, v, delta), G_test, d))
            te_its.append(t)

    record(a, v, 0)
    # The linear baseline's predictor E[T] on the same test set: the reference with the same sampling noise.
    T_lin = _posterior_attention(setting, np.zeros((1, L)), 1.0, delta)
    te_lin_measured = _test_error(T_test, np.broadcast_to(T_lin, T_test.shape), G_test, d)
    status = Status.not_converged
    it = 0
    for it in range(1, max_iter + 1):
        V = v * row2
        om = (F @ a).reshape(n, L) - V * g_prev
        g = g_out(Y, om, V, delta)
        A = float(-np.sum(dg_out_diag(Y, om, V, delta)) * row2 / d)
        if not math.isfinite(A) or A <= -1.0:
            status = Status.diverged
            break
        B = F.T @ g.reshape(-1) + A * a
        a_new = B / (1.0 + A)
        v_new = 1.0 / (1.0 + A)
        change = float(np.mean((a_new - a) ** 2))
        a, v, g_prev = a_new, v_new, g
        done = change < TOL or v < V_MIN
        record(a, v, it, last=done or it == max_iter)
        if done:
            status = Status.ok
            break
    if status == Status.not_converged:
        warnings.append(bayes_note(NoteCode.max_iterations))
    from attnphase.theory.model.baseline import linear_baseline

    return AmpResult(d=d, n=n, alpha=alpha, L=L, omega=setting.omega, delta=delta, seed=seed, init=init,
                     overlap=hist_m[-1], self_overlap=hist_q[-1], test_error=hist_te[-1],
                     test_error_linear=float(linear_baseline(setting).test_error_linear),
                     test_error_linear_measured=te_lin_measured, iterations=it,
                     status=status, warnings=tuple(warnings), history_overlap=tuple(hist_m),
                     history_self_overlap=tuple(hist_q), history_test_error=tuple(hist_te),
                     history_test_iterations=tuple(te_its),
                     seconds=time.perf_counter() - t0, readoff_residual=float(np.max(resid)))
