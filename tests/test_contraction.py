"""The positional collapse certificate (theory/state_evolution/contraction.py): the linearised m block at the agnostic
point against finite differences of the map, the verdict's three conditions, and the claim itself (a certified
iterate, iterated on without the certificate on finer points, does flow to the agnostic point); the certified solve
against the uncertified one (Precision.certificate off: the same verdict) and where a positional branch exists
(unchanged)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attnphase import Setting
from attnphase.theory.model.channel import update_hatoverlaps
from attnphase.theory.model.overlaps import Branch, Overlaps
from attnphase.theory.model.prior import update_overlaps
from attnphase.theory.solvers.fixed_point import Status, anderson
from attnphase.theory.state_evolution.branch_map import BranchMap
from attnphase.theory.state_evolution.contraction import CONTRACTION_MAX, NEAR_AGNOSTIC, OrderContraction
from attnphase.theory.state_evolution.precision import get_precision, integration_points
from attnphase.theory.state_evolution.results import summaries
from attnphase.theory.state_evolution.solve import solve
from attnphase.theory.state_evolution.starts import default_start, named_starts
from attnphase.theory.state_evolution.symmetric import agnostic_point, mirrored_points, order_jacobian

L3 = Setting(L=3, positions="simplex", omega=0.3)


@pytest.mark.slow
def test_positional_block_against_finite_differences_at_three_tokens() -> None:
    """The score identity's m block (2 x 2 in an orthonormal basis of range(G)) against central differences of the raw
    map at the agnostic point, probe 10% of sqrt(q), 2^17 points (on 2^15 points, or with 2-5% probes, the
    difference quotient is the basin switches' noise: off-diagonal entries 0.06-0.13 where J has 0.01)."""
    alpha = 0.4
    pts = mirrored_points(L3, "positional", 0, 0, log2_n=16)
    sym = agnostic_point(L3, alpha, pts)
    J = order_jacobian(L3, alpha, "positional", pts, sym)
    cert = OrderContraction.at(L3, alpha)
    assert cert is not None and J.shape == (2, 2)
    U = cert.U
    eps = 0.1 * float(np.sqrt(sym.q[0, 0]))

    def c_new(c: np.ndarray) -> np.ndarray:
        o = Overlaps(q=sym.q, m=(U @ c).reshape(3, 1), V=sym.V, theta=sym.theta)
        return U.T @ update_overlaps(L3, update_hatoverlaps(L3, alpha, o, pts, Branch.positional).hats).m[:, 0]

    fd = np.column_stack([(c_new(eps * e) - c_new(-eps * e)) / (2 * eps) for e in np.eye(2)])
    assert np.linalg.norm(J - fd) <= 0.02 * np.linalg.norm(J), (J, fd)
    # the certificate's own J (2^13 points) is the same matrix within its integration error
    assert np.linalg.norm(cert.J - J) <= 0.03 * np.linalg.norm(J)
    assert 0.75 < cert.norm < 0.9  # (docs/numerics.md: leading eigenvalue 0.83 near alpha 0.4; far from 1 and 0)


def _cert(norm: float) -> OrderContraction:
    U = np.linalg.qr(np.array([[1.0, 0.0], [-0.5, 1.0], [-0.5, -1.0]]))[0]
    sym = Overlaps(q=np.array([[0.04]]), m=np.zeros((3, 1)), V=np.array([[30.0]]), theta=np.zeros((1, 1)))
    return OrderContraction(norm * np.eye(2), U, sym, norm)


def test_verdict_needs_all_three_conditions() -> None:
    cert = _cert(0.8)
    c = np.array([0.03, -0.01])

    def at(q: float, V: float, c_img: np.ndarray) -> tuple[Overlaps, Overlaps]:
        o = Overlaps(q=np.array([[q]]), m=(cert.U @ c).reshape(3, 1), V=np.array([[V]]), theta=np.zeros((1, 1)))
        img = Overlaps(q=o.q, m=(cert.U @ c_img).reshape(3, 1), V=o.V, theta=o.theta)
        return o, img

    assert cert.verdict(*at(0.041, 30.5, 0.8 * c)) is not None  # exactly linear, near the agnostic point
    assert cert.deviation(*at(0.041, 30.5, 0.8 * c)) == pytest.approx(0.0, abs=1e-12)
    # the image off J c by 0.2 |c|: 0.8 + 0.2 > CONTRACTION_MAX
    off = 0.8 * c + 0.2 * np.linalg.norm(c) * np.array([0.0, 1.0])
    assert cert.deviation(*at(0.041, 30.5, off)) == pytest.approx(0.2, rel=1e-9)
    assert cert.verdict(*at(0.041, 30.5, off)) is None
    # q or V beyond NEAR_AGNOSTIC of the agnostic point's
    assert cert.verdict(*at(0.04 * (1 + 1.5 * NEAR_AGNOSTIC), 30.5, 0.8 * c)) is None
    assert cert.verdict(*at(0.041, 30 * (1 - 1.5 * NEAR_AGNOSTIC), 0.8 * c)) is None
    # J itself at or above the margin: never certified, however linear the image
    strong = _cert(CONTRACTION_MAX + 0.01)
    assert strong.verdict(*at(0.041, 30.5, (CONTRACTION_MAX + 0.01) * c)) is None


UNCERTIFIED = dataclasses.replace(get_precision("fast"), name="fast-uncertified", certificate=False)


@pytest.mark.slow
def test_a_certified_iterate_flows_to_the_agnostic_point() -> None:
    """The claim behind the certificate: from the iterate where it fired (2^13 points, m still 10x the collapse
    threshold or more), the uncertified solve on 4x more points (default precision, every scrambling) reports the
    collapse, and the plain iteration on one scrambling carries m down by 10x or more, to the points' graininess: on
    2^15 points scramblings 1 and 3 hold a fixed point with m 1-2x the threshold (0.0022, 0.0037 against 0.0020),
    which the solve's error test reads as zero, and the other four collapse.  (A collapsed solve reports the iterate
    it stopped at.)"""
    alpha = 0.4045
    fp = solve(L3, alpha, "positional", "fast", init=default_start(L3, Branch.positional))
    o = fp.overlaps
    assert fp.status == Status.collapsed and fp.iterations <= 15, fp
    assert summaries(o)["m"] > 10 * 1e-2 * np.sqrt(o.q[0, 0])  # decided well before m decayed
    uncertified = dataclasses.replace(get_precision("default"), name="uncertified", certificate=False)
    assert solve(L3, alpha, "positional", uncertified, init=o).status == Status.collapsed
    fine = BranchMap(L3, alpha, "positional", integration_points(L3, get_precision("default"), 3, 0))
    plain = anderson(fine.step, fine.pack(o), tol=1e-5, max_iter=120, admissible=fine.admissible,
                     collapsed=fine.collapsed, diverged=fine.diverged, scale=fine.layout.scale)
    assert plain.status in (Status.collapsed, Status.ok), plain
    assert summaries(fine.unpack(plain.x))["m"] < 0.1 * summaries(o)["m"]


@pytest.mark.slow
def test_certified_solve_gives_the_uncertified_verdict() -> None:
    """L = 3 simplex, omega 0.3, fast, alpha 0.4: every start collapses with the certificate (no positional branch
    there); without it the solve's verdict is the same, each start collapsing or running out of iterations on the
    way (benchmarks/certificate.py: 39 against 201 evaluations)."""
    with_cert = solve(L3, 0.4045, "positional", "fast")
    without = solve(L3, 0.4045, "positional", UNCERTIFIED)
    assert with_cert.status == without.status == Status.collapsed
    assert all(r.status == Status.collapsed for r in with_cert.starts), with_cert.starts
    assert len(without.starts) == len(with_cert.starts)
    assert all(r.status in (Status.collapsed, Status.not_converged) for r in without.starts), without.starts


@pytest.mark.slow
def test_where_a_positional_branch_exists_the_certificate_changes_nothing() -> None:
    """L = 3 simplex, omega 0.6, alpha 0.5 (positional is the minimum there; docs/rank2.md holds it against d = 1000
    simulation): the scaled start's point is the same with and without the certificate."""
    s = Setting(L=3, positions="simplex", omega=0.6)
    scaled = dict(named_starts(s, "positional", 0.5))["scaled"]
    with_cert = solve(s, 0.5, "positional", "fast", init=scaled)
    without = solve(s, 0.5, "positional", UNCERTIFIED, init=scaled)
    assert with_cert.status == without.status == Status.ok
    assert with_cert.train_loss == without.train_loss and summaries(with_cert.overlaps)["m"] > 0.1


def test_semantic_block_norm_crosses_one_at_the_pitchfork() -> None:
    """The semantic form of the certificate (theta's entries): at L = 3 simplex its ||J|| is below 1 below the
    pitchfork that `transition --L 3` locates (0.248 [0.221, 0.276]) and above 1 above it."""
    below, above = OrderContraction.at(L3, 0.15, branch="semantic"), OrderContraction.at(L3, 0.4, branch="semantic")
    assert below is not None and above is not None and below.J.shape == (1, 1)
    assert below.norm < 0.95 < 1.0 < above.norm
    with pytest.raises(ValueError):
        OrderContraction.at(L3, 0.4, branch="agnostic")
