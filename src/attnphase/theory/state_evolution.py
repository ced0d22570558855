"""The outer iteration: overlaps -> (channel) hat overlaps -> (prior) overlaps, to a fixed point.

Integration error is measured, not assumed: the fixed point is solved independently for R scramblings
of the Sobol points (the first by damped + Anderson iteration, the others by a frozen-Jacobian Newton
from the first one's solution), every reported number is the mean over
the R solutions and its error estimate the standard error of that mean.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from attnphase.setting import Setting, check_alpha
from attnphase.theory.channel import channel
from attnphase.theory.observables import FINE, test_error_rule
from attnphase.theory.observables import test_error as _test_error
from attnphase.theory.prior import prior, prior_energy
from attnphase.theory.quadrature import gaussian_sobol
from attnphase.theory.results import BRANCHES, FixedPoint, HatOverlaps, Overlaps


@dataclass(frozen=True)
class Precision:
    """Integration and iteration accuracy.  log2_points: Sobol points per scrambling.

    tol is the relative fixed-point residual.  It sits a few times below the integration error and above
    the map's graininess: with n points the map jumps by ~1/n whenever a point's global minimiser switches
    basin, so a tighter tol only makes the iteration wander (measured: fast with tol 1e-4 stalled at
    3e-4 at omega = 0.05, alpha = 0.69)."""

    name: str
    log2_points: int
    replicas: int
    tol: float
    max_iter: int = 200
    accept: float = 0.0  # residual accepted when the iteration stagnates at the map's resolution
    target: float = 0.0  # add scramblings (up to max_replicas) until the relative errors reach this
    max_replicas: int = 0


PRECISIONS = {
    "fast": Precision("fast", 13, 4, 3e-4, max_iter=80, accept=3e-3),
    "default": Precision("default", 15, 6, 3e-5, max_iter=100, accept=1e-3, target=1e-3, max_replicas=12),
    "high": Precision("high", 19, 8, 1e-5, max_iter=100, accept=3e-4, target=1e-4, max_replicas=32),
}

# Study's starting points (MODEL.md section 3).
STARTS = {
    "positional": Overlaps(q=0.02, m=0.2, V=15.0, theta=0.0),
    "semantic": Overlaps(q=0.9, m=0.0, V=15.0, theta=0.35),
    "agnostic": Overlaps(q=0.05, m=0.0, V=15.0, theta=0.0),
}


def get_precision(precision: str | Precision) -> Precision:
    if isinstance(precision, Precision):
        return precision
    try:
        return PRECISIONS[precision]
    except KeyError:
        raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}") from None


def check_branch(branch: str, allowed=BRANCHES) -> str:
    if branch not in allowed:
        raise ValueError(f"branch must be one of {', '.join(allowed)}; got {branch!r}")
    return branch


def _free_coordinates(branch: str) -> list[int]:
    # (q, m, V, theta): positional keeps theta = 0, semantic keeps m = 0, agnostic both.
    return {"positional": [0, 1, 2], "semantic": [0, 2, 3], "agnostic": [0, 2]}[branch]


def _step(z, alpha, x, setting: Setting, branch: str):
    q, m, V, theta = x
    out = channel(z, alpha, q, m, V, theta, omega=setting.omega, A=setting.A_array, sigma2=setting.sigma**2,
                  rho=setting.rho, branch=branch)
    hats = HatOverlaps(qhat=out.qhat, mhat=out.mhat, Vhat=out.Vhat, thetahat=out.thetahat)
    new = prior(hats, setting.sigma**2, setting.lam, setting.rho)
    return np.array([new.q, new.m, new.V, new.theta]), hats, out


@dataclass
class _Solve:
    x: np.ndarray
    hats: HatOverlaps
    moreau: float
    iterations: int
    residual: float
    converged: bool
    prox_failures: int
    message: str = ""


def _relative_residual(x: np.ndarray, gx: np.ndarray, free: list[int]) -> tuple[np.ndarray, float]:
    """G(x) - x and its size |G(x) - x| / max(|x|, 1e-3), max norm over the free coordinates."""
    r = gx - x
    scale = np.maximum(np.abs(x), 1e-3)
    return r, float(np.max(np.abs(r[free]) / scale[free]))


def iterate(z, alpha: float, x0: np.ndarray, setting: Setting, branch: str, tol: float, max_iter: int,
            depth: int = 5, mixing: float = 0.5, far: float = 0.03, far_mixing: float = 0.3, far_steps: int = 10,
            accept: float = 0.0, stagnation: int = 12) -> _Solve:
    """Anderson-accelerated fixed-point iteration on the free coordinates, with damping as fallback.

    The residual is _relative_residual's.
    """
    free = _free_coordinates(branch)
    x = np.array(x0, dtype=float)
    if branch != "positional":
        x[1] = 0.0
    if branch != "semantic":
        x[3] = 0.0
    X_hist: list[np.ndarray] = []
    R_hist: list[np.ndarray] = []
    res = np.inf
    gx = hats = out = None
    damping = mixing
    best: tuple = (np.inf, 0, None, None, None)
    # Every evaluation runs the full multi-start global search of the proximal problem.  (Warm-starting
    # Newton from the previous iteration's minimisers was measured: it misses basin switches and makes
    # the map inconsistent enough that Anderson stalls, e.g. positional at alpha = 2.)
    for it in range(1, max_iter + 1):
        try:
            gx, hats, out = _step(z, alpha, x, setting, branch)
        except ValueError as exc:
            # The accelerated step left the admissible set: fall back to a damped step from the last
            # good point.
            if X_hist:
                x = X_hist[-1].copy()
                X_hist.clear()
                R_hist.clear()
                damping *= 0.5
                continue
            return _Solve(x, hats, np.nan, it, np.inf, False, 0, str(exc))
        r, res = _relative_residual(x, gx, free)
        if res < tol:
            x = gx
            return _Solve(x, hats, out.moreau, it, res, True, out.prox_failures)
        if res < best[0]:
            best = (res, it, gx, hats, out)
        elif accept > 0 and it - best[1] >= stagnation and best[0] <= accept:
            # The map is piecewise constant at the scale of one integration point switching basin (on
            # the positional branch one switch moves mhat by ~0.3% with 2^13 points), so below that
            # scale the residual only jitters.  Accept the best iterate; its residual is reported.
            res_b, it_b, gx_b, hats_b, out_b = best
            return _Solve(gx_b, hats_b, out_b.moreau, it, res_b, True, out_b.prox_failures, "map resolution")
        X_hist.append(x.copy())
        R_hist.append(r.copy())
        if len(X_hist) > depth + 1:
            X_hist.pop(0)
            R_hist.pop(0)
        xf = x[free]
        rf = r[free]
        q_, m_, V_, th_ = x
        if (branch == "semantic" and abs(th_) < 1e-2 * np.sqrt(q_ * setting.rho)) or (
                branch == "positional" and abs(m_) < 1e-2 * np.sqrt(q_)):
            # The branch's order parameter has decayed to ~0: the iteration is flowing to the agnostic
            # fixed point (slowly, geometrically); stop and let the caller report the collapse.
            return _Solve(gx, hats, out.moreau, it, res, True, out.prox_failures, "collapsed")
        if res > far and it <= far_steps:
            # Far from the fixed point Anderson extrapolates wildly and can throw the iteration into
            # the basin of another branch (e.g. semantic -> agnostic): take a few damped steps first.  Not
            # more: the map can have strongly negative eigenvalues (the plain iteration oscillates with
            # period 2, e.g. positional at alpha = 2), which only Anderson handles well.
            X_hist.clear()
            R_hist.clear()
            x = x.copy()
            x[free] = xf + far_mixing * rf
            continue
        if len(X_hist) >= 2:
            dX = np.array([X_hist[i + 1][free] - X_hist[i][free] for i in range(len(X_hist) - 1)]).T
            dR = np.array([R_hist[i + 1][free] - R_hist[i][free] for i in range(len(R_hist) - 1)]).T
            # Scale by |x| so that small and large order parameters weigh alike.
            s = np.maximum(np.abs(xf), 1e-3)
            gamma, *_ = np.linalg.lstsq(dR / s[:, None], rf / s, rcond=None)
            new = xf + damping * rf - (dX + damping * dR) @ gamma
        else:
            new = xf + damping * rf
        # Keep q, V positive; if Anderson jumps outside, take a damped step instead.
        cand = x.copy()
        cand[free] = new
        if cand[0] <= 0 or cand[2] <= 0 or (branch == "semantic" and cand[3] ** 2 >= cand[0] * setting.rho):
            cand = x.copy()
            cand[free] = xf + 0.2 * rf
            X_hist.clear()
            R_hist.clear()
        x = cand
    return _Solve(gx if gx is not None else x, hats, out.moreau if out else np.nan, max_iter, res, False,
                  out.prox_failures if out else 0, "maximum number of iterations reached")


def fixed_point_jacobian(z, alpha: float, x: np.ndarray, setting: Setting, branch: str,
                         rel_step: float = 1e-3) -> tuple[np.ndarray, int]:
    """Forward-difference Jacobian of the map G on the free coordinates, with common random points."""
    free = _free_coordinates(branch)
    g0 = _step(z, alpha, x, setting, branch)[0]
    J = np.empty((len(free), len(free)))
    for j, c in enumerate(free):
        xp = x.copy()
        h = rel_step * max(abs(x[c]), 1e-3)
        xp[c] += h
        J[:, j] = (_step(z, alpha, xp, setting, branch)[0][free] - g0[free]) / h
    return J, len(free) + 1


def chord_iterate(z, alpha: float, x0: np.ndarray, setting: Setting, branch: str, tol: float,
                  newton_matrix: np.ndarray, max_iter: int = 8) -> _Solve | None:
    """Newton on G(x) - x with a frozen Jacobian (from a nearby problem: another scrambling of the same
    fixed point).  Converges in 2-3 steps from a close start; returns None if the residual stops falling,
    and the caller falls back to Anderson."""
    free = _free_coordinates(branch)
    x = np.array(x0, dtype=float)
    prev = np.inf
    for it in range(1, max_iter + 1):
        try:
            gx, hats, out = _step(z, alpha, x, setting, branch)
        except ValueError:
            return None
        r, res = _relative_residual(x, gx, free)
        if res < tol:
            return _Solve(gx, hats, out.moreau, it, res, True, out.prox_failures)
        if res > 0.5 * prev:
            return None
        prev = res
        x = x.copy()
        x[free] = x[free] + newton_matrix @ r[free]
        if x[0] <= 0 or x[2] <= 0:
            return None
    return None


def _target_met(xs: list[np.ndarray], energies: list[float], target: float) -> bool:
    """Relative standard errors of q, m, theta (where non-zero) and train_loss all <= target."""
    k = len(xs)
    if target <= 0 or k < 2:
        return True
    X = np.array(xs)
    mean = np.abs(X.mean(axis=0))
    se = X.std(axis=0, ddof=1) / np.sqrt(k)
    rel = [se[i] / mean[i] for i in (0, 1, 3) if mean[i] > 0]
    E = np.array(energies)
    rel.append(E.std(ddof=1) / np.sqrt(k) / abs(E.mean()))
    return max(rel) <= target


def _collapse_status(branch: str, x: np.ndarray, x_err: np.ndarray, rho: float) -> str:
    q, m, V, theta = x
    if branch == "positional" and abs(m) < max(1e-2 * np.sqrt(q), 3 * x_err[1]):
        return "collapsed to agnostic"
    if branch == "semantic" and abs(theta) < max(1e-2 * np.sqrt(q * rho), 3 * x_err[3]):
        return "collapsed to agnostic"
    return "ok"


def solve(setting: Setting, alpha: float, branch: str = "positional", precision: str | Precision = "default",
          init: Overlaps | FixedPoint | None = None, seed: int = 0) -> FixedPoint:
    """Fixed point of the self-consistent equations on one branch (or "global": the lowest train_loss)."""
    if not isinstance(setting, Setting):
        raise ValueError("setting must be an attnphase.Setting")
    setting.require_study_geometry()
    alpha = check_alpha(alpha)
    check_branch(branch, BRANCHES + ("global",))
    if branch == "global":
        return global_minimum(solve_all(setting, alpha, precision=precision, seed=seed))
    prec = get_precision(precision)
    t0 = time.perf_counter()
    start = init if init is not None else STARTS[branch]
    if isinstance(start, FixedPoint):
        start = start.overlaps
    x = np.array([start.q, abs(start.m), start.V, abs(start.theta)], dtype=float)
    if branch == "positional" and x[1] == 0:
        x[1] = STARTS["positional"].m
    if branch == "semantic" and x[3] == 0:
        x[3] = STARTS["semantic"].theta
    xs, hs, energies, iters = [], [], [], 0
    converged = True
    residual = 0.0
    message = ""
    failures = 0
    collapsed = False
    sigma2 = setting.sigma**2
    # Continuation: the previous alpha's Jacobian is close enough for chord steps here too.
    newton_matrix = getattr(init, "_newton_matrix", None) if isinstance(init, FixedPoint) and init.branch == branch \
        else None
    rep = -1
    while True:
        rep += 1
        if rep >= max(prec.replicas, prec.max_replicas) or (
                rep >= prec.replicas and _target_met(xs, energies, prec.target)):
            break
        z = gaussian_sobol(prec.log2_points, 4, 1000 * seed + rep)
        sol = None
        if newton_matrix is not None:
            sol = chord_iterate(z, alpha, x, setting, branch, prec.tol, newton_matrix)
        if sol is None:
            sol = iterate(z, alpha, x, setting, branch, prec.tol, prec.max_iter, accept=prec.accept)
        iters += sol.iterations
        if (rep == 0 and prec.replicas > 1 and sol.converged and sol.message != "collapsed"
                and (newton_matrix is None or sol.iterations > 4)):
            # The other scramblings' fixed points lie within the integration error of this one:
            # a frozen-Jacobian Newton (chord) method reaches them in 2-3 evaluations.
            J, n_eval = fixed_point_jacobian(z, alpha, sol.x, setting, branch)
            iters += n_eval
            try:
                newton_matrix = np.linalg.inv(np.eye(len(J)) - J)
            except np.linalg.LinAlgError:
                newton_matrix = None
        residual = max(residual, sol.residual)
        failures += sol.prox_failures
        if not sol.converged:
            converged = False
            message = message or sol.message
        if sol.message == "collapsed":
            collapsed = True
            if rep == 0:
                # No distinct fixed point of this branch here: more scramblings would only repeat that.
                converged = True
        if sol.hats is None or not np.all(np.isfinite(sol.x)):
            converged = False
            break
        x = sol.x.copy()
        o = Overlaps(*(float(v) for v in sol.x))
        xs.append(sol.x)
        hs.append([sol.hats.qhat, sol.hats.mhat, sol.hats.Vhat, sol.hats.thetahat])
        phi = prior_energy(o, sol.hats, sigma2, setting.lam, setting.rho) - alpha * sol.moreau
        energies.append(-phi)
        if collapsed or not converged:
            # Already not a valid point: the other scramblings would cost iterations and change nothing.
            break
    if not xs:
        nan = float("nan")
        return FixedPoint(alpha, setting.omega, branch, Overlaps(nan, nan, nan, nan), HatOverlaps(nan, nan, nan, nan),
                          nan, nan, {}, False, iters, float(residual), f"not converged: {message}",
                          2**prec.log2_points, prec.replicas, time.perf_counter() - t0, prec.name, setting.to_dict())
    X = np.array(xs)
    Hh = np.array(hs)
    E = np.array(energies)
    k = len(xs)
    sem = (lambda a: np.std(a, axis=0, ddof=1) / np.sqrt(k)) if k > 1 else (lambda a: np.full(np.shape(a)[1:], np.nan))
    xm = X.mean(axis=0)
    xe = sem(X)
    hm = Hh.mean(axis=0)
    q, m, V, theta = (float(v) for v in xm)
    m, theta = abs(m), abs(theta)
    te, te_quad = _test_error(q, m, theta, omega=setting.omega, A=setting.A_array, sigma2=sigma2, rho=setting.rho)
    # Test error's integration error is dominated by the propagated error of the overlaps: estimate it
    # from the per-replica overlaps.
    te_reps = [
        test_error_rule(FINE, float(xx[0]), abs(float(xx[1])), abs(float(xx[3])), omega=setting.omega,
                        A=setting.A_array, sigma2=sigma2, rho=setting.rho)
        for xx in X
    ] if k > 1 else [te]
    te_err = float(np.sqrt((np.std(te_reps, ddof=1) / np.sqrt(k)) ** 2 + te_quad**2)) if k > 1 else float("nan")
    errors = {"q": float(xe[0]), "m": float(xe[1]), "V": float(xe[2]), "theta": float(xe[3]),
              "train_loss": float(sem(E[:, None])[0]), "test_error": te_err}
    status = "ok" if converged else f"not converged: {message}"
    if converged and branch in ("positional", "semantic"):
        status = _collapse_status(branch, np.array([q, m, V, theta]), xe, setting.rho)
    if collapsed:
        status = "collapsed to agnostic"
    elif failures and status == "ok":
        status = f"ok ({failures} proximal points above gradient tolerance)"
    fp = FixedPoint(
        alpha=alpha, omega=setting.omega, branch=branch, overlaps=Overlaps(q, m, V, theta),
        hats=HatOverlaps(*(float(v) for v in hm)), train_loss=float(E.mean()), test_error=te, errors=errors,
        converged=converged, iterations=iters, residual=float(residual), status=status,
        n_points=2**prec.log2_points * k, n_replicas=k,
        seconds=time.perf_counter() - t0, precision=prec.name, setting=setting.to_dict(),
    )
    if newton_matrix is not None and converged and status == "ok":
        fp._newton_matrix = newton_matrix  # not a dataclass field: kept out of serialisation
    return fp


def solve_all(setting: Setting, alpha: float, precision: str | Precision = "default", seed: int = 0,
              inits: dict | None = None) -> dict[str, FixedPoint]:
    inits = inits or {}
    return {b: solve(setting, alpha, b, precision, init=inits.get(b), seed=seed) for b in BRANCHES}


def global_minimum(points: dict[str, FixedPoint]) -> FixedPoint:
    """The valid branch with the lowest training loss (agnostic only if nothing else is valid)."""
    cands = [p for b, p in points.items() if b != "agnostic" and p.valid]
    if not cands:
        cands = [p for p in points.values() if p.valid]
    if not cands:
        raise ValueError("no branch converged to a valid fixed point")
    best = min(cands, key=lambda p: p.train_loss)
    return best


def solve_curve(setting: Setting, alphas, branch: str, precision: str | Precision = "default",
                seed: int = 0) -> list[FixedPoint]:
    """Follow one branch along alpha by continuation: each solve starts from the last.

    Returned in ascending alpha.  The semantic branch is followed downward from the largest alpha (it
    exists at large alpha and ends at a spinodal), the others upward."""
    check_branch(branch)
    alphas = sorted(check_alpha(a) for a in alphas)
    out: list[FixedPoint] = []
    prev: FixedPoint | None = None
    order = alphas[::-1] if branch == "semantic" else alphas
    for a in order:
        init = prev if (prev is not None and prev.valid) else None
        fp = solve(setting, a, branch, precision, init=init, seed=seed)
        if not fp.valid and init is not None:
            # Continuation can fail where the previous point was far; retry from the study's start.
            retry = solve(setting, a, branch, precision, init=None, seed=seed)
            if retry.valid:
                fp = retry
        out.append(fp)
        prev = fp
    return out[::-1] if branch == "semantic" else out
