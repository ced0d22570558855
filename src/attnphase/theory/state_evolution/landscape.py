"""The replica-symmetric landscape along the teacher overlap: saddle points with theta held fixed.

The free fixed point (state_evolution.solve) is a stationary point of the free energy
Phi = prior_energy(overlaps, hats) - alpha E[Moreau envelope] in all overlaps and hats; its training loss is
E = -Phi.  Holding theta at a target value drops one stationarity condition, the channel's thetahat equation
(dPhi/dtheta = 0).  thetahat is then the Lagrange multiplier that makes the prior's closed form
theta = sigma^2 K thetahat rho (prior.update_overlaps) equal the target:

    thetahat = (lambda I + sigma^2 Vhat) theta rho^{-1} / sigma^2,

and q, V, m (and qhat, Vhat, mhat) iterate as usual.  E(theta) = -Phi at that constrained saddle is the
replica-symmetric prediction for the minimum of the training loss over all Q with sigma^2 Q^T Q* / d = theta
(and, on the semantic branch, m = 0): the landscape along theta, whose stationary points are the free fixed
points.  Its slope follows from the envelope theorem: every variable but theta is stationary, so
dE/dtheta = -dPhi/dtheta = thetahat_multiplier - thetahat_channel (the channel's thetahat is
-alpha dE[Moreau]/dtheta); tests hold it against finite differences of E.

Only the tied student (m = 0 on the semantic branch, m free on the free branch).  The rotation gauge is not
applied: with theta fixed the teacher rotation is fixed too (r = 1, theta = (t, 0, ...)).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnphase.errors import InputError, InputTypeError
from attnphase.setting import Setting, check_alpha
from attnphase.theory.model.channel import update_hatoverlaps
from attnphase.theory.model.observables import test_error as _test_error
from attnphase.theory.model.overlaps import Branch, HatOverlaps, Layout, Overlaps
from attnphase.theory.model.prior import thetahat_for, train_loss, update_overlaps
from attnphase.theory.solvers.fixed_point import Inadmissible, Status, anderson
from attnphase.theory.state_evolution.branch_map import BranchMap
from attnphase.theory.state_evolution.precision import Precision, get_precision, integration_points
from attnphase.theory.state_evolution.results import FixedPoint, check_theory_setting
from attnphase.theory.state_evolution.starts import default_start

CONSTRAINED_BRANCHES = ("semantic", "free")


@dataclass
class ConstrainedPoint:
    """A replica-symmetric saddle point with theta held at ``theta_target`` (means over scramblings).

    status           : :class:`Status`; only ``ok`` is a result (``valid``).
    overlaps         : q, m, V and theta (= the target) of the saddle.
    hats             : the hat overlaps; hats.thetahat is the Lagrange multiplier.
    thetahat_channel : the channel's thetahat at the saddle (equal to the multiplier at a free fixed point).
    slope            : dE/dtheta (r x r*) = multiplier - channel thetahat (envelope theorem).
    train_loss       : E = -Phi at the saddle (the training loss, as FixedPoint.train_loss).
    errors           : one-standard-error integration errors (spread over scramblings) of q, V, train_loss and
                       slope (its [0, 0] entry).
    """

    alpha: float
    branch: str
    theta_target: np.ndarray
    overlaps: Overlaps
    hats: HatOverlaps
    thetahat_channel: np.ndarray
    slope: np.ndarray
    train_loss: float
    test_error: float
    errors: dict[str, float]
    status: Status
    residual: float
    message: str
    iterations: int
    n_replicas: int
    seconds: float
    precision: str
    setting: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def valid(self) -> bool:
        return self.status == Status.ok

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record (arrays as nested lists)."""
        o, h = self.overlaps, self.hats
        return {
            "alpha": self.alpha, "branch": self.branch, "theta_target": self.theta_target.tolist(),
            "q": o.q.tolist(), "m": o.m.tolist(), "V": o.V.tolist(), "theta": o.theta.tolist(),
            "qhat": h.qhat.tolist(), "Vhat": h.Vhat.tolist(), "thetahat": h.thetahat.tolist(),
            "thetahat_channel": self.thetahat_channel.tolist(), "slope": self.slope.tolist(),
            "train_loss": self.train_loss, "test_error": self.test_error, "errors": dict(self.errors),
            "status": self.status.value, "residual": self.residual, "message": self.message,
            "iterations": self.iterations, "n_replicas": self.n_replicas, "seconds": self.seconds,
            "precision": self.precision, "setting": self.setting,
        }


def _check_target(setting: Setting, theta_target: float | np.ndarray) -> np.ndarray:
    r, rs = setting.r, setting.r_star
    if isinstance(theta_target, bool):
        raise InputTypeError("theta_target must be a number or an (r, r*) array")
    try:
        th = np.asarray(theta_target, dtype=float)
    except (TypeError, ValueError):
        raise InputTypeError("theta_target must be a number or an (r, r*) array") from None
    if th.ndim == 0:
        # A number t: theta = t in the first entry (for r = 1 any theta is (t, 0, ...) up to the teacher's
        # rotation symmetry).
        t = float(th)
        th = np.zeros((r, rs))
        th[0, 0] = t
    if th.shape != (r, rs):
        raise InputError(f"theta_target must have shape (r, r*) = {(r, rs)}, got {th.shape}")
    if not np.all(np.isfinite(th)):
        raise InputError("theta_target must be finite")
    if not np.any(th != 0):
        raise InputError("theta_target = 0 is the agnostic point: solve it with solve(..., 'agnostic')")
    return th


def multiplier(setting: Setting, hats: HatOverlaps, theta: np.ndarray) -> np.ndarray:
    """The thetahat for which the prior's closed form gives theta: (lambda I + sigma^2 Vhat) theta rho^{-1} /
    sigma^2 (prior.update_overlaps: theta = sigma^2 K thetahat rho, K = (lambda I + sigma^2 Vhat)^{-1})."""
    return thetahat_for(setting, hats, theta)


class ConstrainedMap:
    """The fixed-point map with theta held at ``theta`` on fixed integration points (the branch's flat
    coordinates; the theta coordinates are constant).  step(x) -> (image, (channel output, hats with the
    multiplier))."""

    def __init__(self, setting: Setting, alpha: float, branch: str, points: np.ndarray, theta: np.ndarray) -> None:
        self.setting, self.alpha, self.branch, self.theta = setting, float(alpha), Branch(branch), theta
        self.base = BranchMap(setting, alpha, self.branch, points)  # its layout and admissibility predicates
        self.layout: Layout = self.base.layout
        self.points = points

    def overlaps(self, x: np.ndarray) -> Overlaps:
        o = self.layout.unpack(x)
        return Overlaps(q=o.q, m=o.m, V=o.V, theta=self.theta)

    def step(self, x: np.ndarray) -> tuple[np.ndarray, tuple]:
        o = self.overlaps(x)
        out = update_hatoverlaps(self.setting, self.alpha, o, self.points, self.branch)
        h = out.hats
        hats = HatOverlaps(qhat=h.qhat, mhat=h.mhat, Vhat=h.Vhat, thetahat=multiplier(self.setting, h, self.theta))
        new = update_overlaps(self.setting, hats)  # raises Inadmissible where lambda + sigma^2 Vhat <= 0
        new = Overlaps(q=new.q, m=new.m, V=new.V, theta=self.theta)
        return self.layout.pack(new), (out, hats)


def constrained_fixed_point(setting: Setting, alpha: float, branch: str, theta_target: float | np.ndarray,
                            precision: str | Precision = "fast", seed: int = 0,
                            init: Overlaps | FixedPoint | ConstrainedPoint | None = None) -> ConstrainedPoint:
    """The replica-symmetric saddle point with theta held at theta_target (see the module docstring).

    branch: "semantic" (m = 0) or "free" (m iterates).  theta_target: an (r, r*) array, or a number t meaning
    theta = (t, 0, ...) in the first row.  init: starting overlaps (its theta is replaced by the target); default
    the branch's default start.  Each of the precision's scramblings is solved by Anderson iteration (the next
    starting from the previous one's solution); the numbers are means over scramblings, the errors their standard
    errors.  Never raises for a numerical failure: the status says (ok, not_converged, inadmissible, ...)."""
    check_theory_setting(setting)
    if setting.untied:
        raise InputError("constrained_fixed_point is implemented for the tied student only")
    alpha = check_alpha(alpha)
    if branch not in CONSTRAINED_BRANCHES:
        raise InputError(f"branch must be one of {', '.join(CONSTRAINED_BRANCHES)}; got {branch!r}")
    theta = _check_target(setting, theta_target)
    prec = get_precision(precision)
    t0 = time.perf_counter()
    if init is None:
        start = default_start(setting, branch)
    else:
        start = init.overlaps if isinstance(init, FixedPoint | ConstrainedPoint) else init
        if not isinstance(start, Overlaps):
            raise InputTypeError("init must be Overlaps, a FixedPoint or a ConstrainedPoint")
        if start.q.shape != (setting.r, setting.r):
            raise InputError(f"init has rank {start.q.shape[0]}, the setting r = {setting.r}")
    layout = Layout.for_setting(setting, branch)
    x = layout.pack(layout.project(Overlaps(q=start.q, m=start.m, V=start.V, theta=theta)))
    reps: list[dict[str, Any]] = []
    status, message, residual, iters = Status.ok, "", 0.0, 0
    for rep in range(prec.replicas):
        cm = ConstrainedMap(setting, alpha, branch, integration_points(setting, prec, rep, seed), theta)
        sol = anderson(cm.step, x, tol=prec.tol, max_iter=prec.max_iter, admissible=cm.base.admissible,
                       diverged=cm.base.diverged, accept=prec.accept, scale=layout.scale)
        iters += sol.nit
        residual = max(residual, sol.residual)
        if sol.status != Status.ok or sol.aux is None:
            status, message = sol.status, sol.message or "the constrained iteration did not converge"
            break
        x = sol.x.copy()
        out, hats = sol.aux
        o = cm.overlaps(x)
        try:
            energy = train_loss(setting, alpha, o, hats, out.moreau)
        except Inadmissible as exc:
            status, message = Status.inadmissible, str(exc)
            break
        reps.append({"o": o, "hats": hats, "ch": out.hats.thetahat, "E": energy})
    k = len(reps)
    if k == 0:
        nan_o = Overlaps(q=np.full((setting.r, setting.r), np.nan), m=np.full((setting.L, setting.r), np.nan),
                         V=np.full((setting.r, setting.r), np.nan), theta=theta)
        nan_h = HatOverlaps(qhat=nan_o.q, mhat=nan_o.m, Vhat=nan_o.V, thetahat=np.full_like(theta, np.nan))
        return ConstrainedPoint(alpha, branch, theta, nan_o, nan_h, np.full_like(theta, np.nan),
                                np.full_like(theta, np.nan), np.nan, np.nan, {}, status, float(residual), message,
                                iters, 0, time.perf_counter() - t0, prec.name, setting.to_dict())
    mean_o = Overlaps(**{f: np.mean([getattr(r["o"], f) for r in reps], axis=0) for f in ("q", "m", "V", "theta")})
    mean_h = HatOverlaps(**{f: np.mean([getattr(r["hats"], f) for r in reps], axis=0)
                            for f in ("qhat", "mhat", "Vhat", "thetahat")})
    ch = np.mean([r["ch"] for r in reps], axis=0)
    slopes = np.array([r["hats"].thetahat - r["ch"] for r in reps])
    E = np.array([r["E"] for r in reps])

    def sem(v: np.ndarray) -> float:
        return float(np.std(v, ddof=1) / np.sqrt(k)) if k > 1 else float("nan")

    errors = {"q": sem(np.array([r["o"].q[0, 0] for r in reps])), "V": sem(np.array([r["o"].V[0, 0] for r in reps])),
              "train_loss": sem(E), "slope": sem(slopes[:, 0, 0])}
    if status == Status.ok and E.mean() < 0:
        status, message = Status.diverged, f"negative training loss {E.mean():.3g}"
    return ConstrainedPoint(alpha=alpha, branch=branch, theta_target=theta, overlaps=mean_o, hats=mean_h,
                            thetahat_channel=ch, slope=slopes.mean(axis=0), train_loss=float(E.mean()),
                            test_error=float(_test_error(setting, mean_o)[0]), errors=errors, status=status,
                            residual=float(residual), message=message, iterations=iters, n_replicas=k,
                            seconds=time.perf_counter() - t0, precision=prec.name, setting=setting.to_dict())


def energy_curve(setting: Setting, alpha: float, thetas, branch: str = "semantic",
                 precision: str | Precision = "fast", seed: int = 0,
                 init: Overlaps | FixedPoint | None = None) -> list[ConstrainedPoint]:
    """E(theta) along theta = (t, 0, ...) for each t in thetas (in the given order), each solve starting from the
    previous valid one (the first from init).  Same integration points at every t (common random numbers), so
    differences of E between neighbouring t carry much less integration error than E itself."""
    out: list[ConstrainedPoint] = []
    prev: Any = init
    for t in thetas:
        cp = constrained_fixed_point(setting, alpha, branch, float(t), precision, seed, init=prev)
        out.append(cp)
        if cp.valid:
            prev = cp
    return out
