"""Result contract, layout, symmetries and the generic solver of the general engine."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from scipy.stats import ortho_group

from attnphase import Setting
from attnphase.theory import FixedPoint, Overlaps, branch_map, global_minimum, global_minimum_curve, solve
from attnphase.theory.model.overlaps import Branch, HatOverlaps, Layout, align_signs, canonical_gauge, rotate, rotate_hats
from attnphase.theory.model.quadrature import gaussian_sobol
from attnphase.theory.solvers.fixed_point import Inadmissible, Status, anderson

# ------------------------------------------------------------------ generic solver on toy maps


def test_anderson_converges_on_a_contraction():
    res = anderson(lambda x: (np.cos(x), None), np.array([0.3, 1.0]), tol=1e-10, max_iter=100)
    assert res.status == Status.ok and res.converged
    np.testing.assert_allclose(res.x, 0.7390851332151607, rtol=1e-9)


def test_anderson_statuses():
    grow = anderson(lambda x: (1e7 * (1.0 + x**2), None), np.array([1.0]), tol=1e-8, max_iter=200,
                    diverged=lambda x: bool(np.abs(x).max() > 1e6))
    assert grow.status == Status.diverged and not grow.converged
    slow = anderson(lambda x: (np.cos(x), None), np.array([0.3]), tol=1e-14, max_iter=2)
    assert slow.status == Status.not_converged

    def bad(x):
        raise Inadmissible("no")

    assert anderson(bad, np.array([1.0]), tol=1e-8, max_iter=5).status == Status.inadmissible
    col = anderson(lambda x: (0.5 * x + 1e-3, None), np.array([1.0]), tol=0.0, max_iter=100,
                   collapsed=lambda x: bool(abs(x[0]) < 1e-2))
    assert col.status == Status.collapsed


def test_anderson_with_keeps_never_evaluates_across_the_symmetry():
    """x -> x + 0.3 (x - x^3) is odd: fixed points -1, 0, 1, the plain iteration from 0.3 goes to 1.  Anderson's
    extrapolation (a secant step in one dimension) jumps from 0.3 to -0.69, across the symmetry; with keeps (the
    sign of x[0] kept) no point on the other side is evaluated."""

    def run(keeps):
        seen = []

        def G(x):
            seen.append(x[0])
            return np.array([x[0] + 0.3 * (x[0] - x[0] ** 3), 0.5 * x[1] + 0.1 * x[0] ** 2]), None

        anderson(G, np.array([0.3, 0.0]), tol=1e-10, max_iter=100, far_steps=0, keeps=keeps)
        return np.array(seen)

    assert run(None).min() < -0.5
    assert run(lambda x, cand: bool(np.sign(cand[0]) == np.sign(x[0]))).min() >= 0.0


def test_anderson_with_an_approximate_map_returns_the_exact_maps_fixed_point():
    """An approximation only steers: its own fixed point (cos x + 1e-3 = x) is not returned, the exact one is, and
    every verdict comes from an exact evaluation."""
    exact_calls = []

    def exact(x):
        exact_calls.append(x.copy())
        return np.cos(x), "exact"

    def approx(x):
        return np.cos(x) + 1e-3, "approx"

    res = anderson(exact, np.array([0.3, 1.0]), tol=1e-10, max_iter=100, approx=approx)
    assert res.status == Status.ok and res.aux == "exact"
    np.testing.assert_allclose(res.x, 0.7390851332151607, rtol=1e-9)
    assert res.nit == len(exact_calls) and res.extra["approx"] > 0
    # the returned point's residual, on the exact map
    assert np.max(np.abs(np.cos(res.x) - res.x) / res.x) < 1e-9
    # a collapse is decided on an exact evaluation: here the approximation alone would reach it
    col = anderson(lambda x: (0.5 * x + 1e-3, "exact"), np.array([1.0]), tol=0.0, max_iter=100,
                   collapsed=lambda x: bool(abs(x[0]) < 1e-2), approx=lambda x: (0.5 * x, "approx"))
    assert col.status == Status.collapsed and col.aux == "exact"
    # an approximation that diverges is checked on the exact map, which does not
    calm = anderson(lambda x: (np.cos(x), "exact"), np.array([0.3]), tol=1e-10, max_iter=100,
                    diverged=lambda x: bool(np.abs(x).max() > 1e6), approx=lambda x: (1e7 + 0 * x, "approx"))
    assert calm.status == Status.ok
    np.testing.assert_allclose(calm.x, 0.7390851332151607, rtol=1e-9)


# ------------------------------------------------------------------ layout and symmetries


@pytest.mark.parametrize("L,r,rs,pos", [(2, 1, 1, "antipodal"), (3, 2, 1, "simplex"), (4, 1, 2, "orthogonal")])
@pytest.mark.parametrize("branch", list(Branch))
def test_pack_unpack_round_trip_and_constraints(L, r, rs, pos, branch):
    s = Setting(L=L, r=r, r_star=rs, positions=pos)
    lay = Layout.for_setting(s, branch)
    rng = np.random.default_rng(1)
    x = rng.normal(size=lay.size)
    o = lay.unpack(x)
    np.testing.assert_allclose(lay.pack(o), x, atol=1e-12)
    assert np.allclose(o.q, o.q.T) and np.allclose(o.V, o.V.T)
    assert np.all(o.m == 0) == (not branch.has_m)
    assert np.all(o.theta == 0) == (not branch.has_theta)
    # m lies in the range of G: G's null space is orthogonal to every column.
    vals, vecs = np.linalg.eigh(s.gram)
    null = vecs[:, vals < 1e-10]
    assert np.allclose(null.T @ o.m, 0)


def test_canonical_gauge_picks_one_orbit_representative():
    rng = np.random.default_rng(2)
    o = Overlaps(q=[[0.3, 0.05], [0.05, 0.1]], m=rng.normal(size=(3, 2)), V=[[10.0, 1.0], [1.0, 12.0]],
                 theta=rng.normal(size=(2, 2)))
    c = canonical_gauge(o)
    for seed in range(5):
        R = ortho_group.rvs(2, random_state=seed)
        Rs = ortho_group.rvs(2, random_state=seed + 10)
        c2 = canonical_gauge(rotate(o, R, Rs))
        for k in ("q", "m", "V", "theta"):
            np.testing.assert_allclose(getattr(c2, k), getattr(c, k), atol=1e-12)


def test_align_signs_makes_near_tied_representatives_comparable():
    """L = 3 simplex (m sums to zero): two scramblings' positional points a few percent apart whose largest entries
    of m are nearly tied with opposite signs.  canonical_gauge picks opposite signs for them (their mean would be
    half their size); align_signs flips the second to the first's way, by the exact symmetry Q -> -Q (every
    invariant unchanged), and leaves a representative that already points that way, and an untied one, as it is."""
    a = Overlaps(q=0.055, m=np.array([[0.2277], [0.0519], [-0.2796]]), V=22.7, theta=0.0)
    b = Overlaps(q=0.0554, m=np.array([[0.2581], [-0.0012], [-0.2569]]), V=22.7, theta=0.0)
    ca, cb = canonical_gauge(a), canonical_gauge(b)
    assert float(ca.m[:, 0] @ cb.m[:, 0]) < 0  # the sign rule's choice differs
    fixed = align_signs(cb, ca)
    assert float(ca.m[:, 0] @ fixed.m[:, 0]) > 0
    np.testing.assert_array_equal(fixed.m, -cb.m)
    for k in ("q", "V", "theta"):
        np.testing.assert_array_equal(np.abs(getattr(fixed, k)), np.abs(getattr(cb, k)))
    mean = 0.5 * (ca.m + fixed.m)
    assert np.sqrt(np.mean(mean**2)) > 0.95 * np.sqrt(np.mean(ca.m**2))  # not averaged away
    assert align_signs(ca, ca) is ca
    # r = 2: only the column that points away is flipped.
    o = Overlaps(q=[[0.3, 0.05], [0.05, 0.1]], m=[[0.2, 0.1], [-0.2, 0.3]], V=[[10.0, 1.0], [1.0, 12.0]],
                 theta=[[0.4], [0.05]])
    flipped = rotate(o, np.diag([1.0, -1.0]))
    back = align_signs(flipped, o)
    for k in ("q", "m", "V", "theta"):
        np.testing.assert_allclose(getattr(back, k), getattr(o, k), atol=1e-15)
    # Untied: the query's and the key's column flip together (the joint flip, the untied student's symmetry).
    u = Overlaps(q=[[0.1, 0.05], [0.05, 0.12]], m=[[0.3, 0.2], [-0.3, -0.1], [0.0, -0.1]], V=np.eye(2),
                 theta=np.zeros((2, 1)), untied=True)
    back = align_signs(rotate(u, -np.eye(2)), u)
    for k in ("q", "m", "V", "theta"):
        np.testing.assert_allclose(getattr(back, k), getattr(u, k), atol=1e-15)
    assert back.untied and align_signs(u, u) is u
    with pytest.raises(ValueError, match="same shape"):
        align_signs(u, o)


def test_rotated_conjugates_map_to_the_rotated_overlaps():
    """The prior side is equivariant: update_overlaps(rotate_hats(h, R, R*)) = rotate(update_overlaps(h), R, R*) for
    exact symmetries R, R* (r = 2, r* = 2; random conjugates), so the reported hats stay the reported overlaps'."""
    from attnphase.theory.model.prior import update_overlaps

    s = Setting(L=3, r=2, r_star=2)
    rng = np.random.default_rng(5)
    a = rng.normal(size=(2, 2))
    h = HatOverlaps(qhat=0.05 * (a @ a.T), mhat=rng.normal(size=(3, 2)), Vhat=np.diag([0.3, 0.2]) + 0.01 * (a + a.T),
                    thetahat=rng.normal(size=(2, 2)))
    for seed in range(3):
        R, Rs = ortho_group.rvs(2, random_state=seed), ortho_group.rvs(2, random_state=seed + 7)
        want = rotate(update_overlaps(s, h), R, Rs)
        got = update_overlaps(s, rotate_hats(h, R, Rs))
        for k in ("q", "m", "V", "theta"):
            np.testing.assert_allclose(getattr(got, k), getattr(want, k), atol=1e-12)


def test_map_is_equivariant_under_student_rotations():
    """Q -> Q R is an exact symmetry: the map of rotated overlaps is the rotated map (r = 2, before gauge fixing).
    Pointwise only with the student noise rotated alike (xi_l -> xi_l R, same Gaussian law)."""
    from attnphase.theory.model.channel import update_hatoverlaps
    from attnphase.theory.model.prior import update_overlaps

    s = Setting(L=2, r=2, r_star=1)
    z = gaussian_sobol(10, 6, 3)
    o = Overlaps(q=[[0.15, 0.02], [0.02, 0.05]], m=[[0.1, 0.03], [-0.1, -0.03]], V=[[12.0, 1.0], [1.0, 18.0]],
                 theta=[[0.16], [0.02]])
    R = ortho_group.rvs(2, random_state=4)
    zr = np.array(z)
    for l in range(2):
        zr[2 * l: 2 * l + 2] = R.T @ z[2 * l: 2 * l + 2]
    a = update_overlaps(s, update_hatoverlaps(s, 1.2, o, z, "free").hats)
    b = update_overlaps(s, update_hatoverlaps(s, 1.2, rotate(o, R), zr, "free").hats)
    ra = rotate(a, R)
    for k in ("q", "m", "V", "theta"):
        np.testing.assert_allclose(getattr(b, k), getattr(ra, k), rtol=1e-6, atol=1e-9)


def test_the_gauged_image_keeps_the_inputs_signs():
    """In the rotation gauge the map's image keeps each student direction's sign from its input: the same channel
    output seen from an input with one direction flipped (an exact symmetry) gives the image with that direction
    flipped, q's and V's off-diagonal entries and that column of m included.  L = 3 simplex, r = 2, positional, at a
    point whose m columns sum to zero over the tokens (where the canonical sign rule alone is ill-conditioned)."""
    s = Setting(L=3, r=2, omega=0.3)
    bm = branch_map(s, 1.0, "positional", gaussian_sobol(10, 9, 2))
    o = bm.unpack(bm.pack(Overlaps(q=[[0.045, 0.004], [0.004, 0.053]], m=[[0.15, 0.05], [-0.02, -0.08], [-0.13, 0.03]],
                                   V=[[29.0, 1.5], [1.5, 31.7]], theta=np.zeros((2, 1)))))
    x = bm.pack(o)
    out = bm.step(x)[1]
    plain = bm.unpack(bm.image(out))  # (no input: the canonical representative)
    for flip in (np.diag([-1.0, 1.0]), np.diag([1.0, -1.0]), -np.eye(2)):
        xf = bm.pack(rotate(o, flip))
        got, want = bm.unpack(bm.image(out, xf)), rotate(bm.unpack(bm.image(out, x)), flip)
        for k in ("q", "m", "V"):
            np.testing.assert_allclose(getattr(got, k), getattr(want, k), rtol=1e-12, atol=1e-15)
        # each direction points its input's way (a positive overlap of its m column with the input's)
        assert np.all(np.einsum("lj,lj->j", got.m, rotate(o, flip).m) > 0)
    for k in ("q", "m", "V"):  # and the image itself is the canonical one up to those signs
        np.testing.assert_allclose(np.abs(getattr(bm.unpack(bm.image(out, x)), k)), np.abs(getattr(plain, k)),
                                   rtol=1e-12, atol=1e-15)


def test_branch_map_api():
    s = Setting(L=3)
    z = gaussian_sobol(10, 6, 0)
    bm = branch_map(s, 1.0, "semantic", z)
    assert bm.layout.names() == ["q[0,0]", "V[0,0]", "theta[0,0]"]
    x = bm.pack(Overlaps(q=0.1, m=np.zeros((3, 1)), V=12.0, theta=0.1))
    gx = bm(x)
    assert gx.shape == x.shape and np.all(np.isfinite(gx))
    with pytest.raises(ValueError, match="rows"):
        branch_map(s, 1.0, "semantic", gaussian_sobol(10, 4, 0))


# ------------------------------------------------------------------ result contract


def _fp(status="ok", warnings=(), train_loss=0.1, branch="semantic"):
    return FixedPoint(alpha=1.0, omega=0.3, branch=branch, overlaps=Overlaps(q=0.1, m=0.0, V=10.0, theta=0.1),
                      hats=dict(qhat=0.0, mhat=0.0, Vhat=0.0, thetahat=0.0), train_loss=train_loss, test_error=0.01,
                      errors={"train_loss": 1e-6}, status=status, warnings=warnings)


def test_status_and_warnings():
    ok = _fp(warnings=("12 proximal points above gradient tolerance",))
    assert ok.converged and ok.valid and ok.status == Status.ok
    for st in ("not_converged", "collapsed", "diverged", "inadmissible"):
        p = _fp(status=st)
        assert not p.converged and not p.valid and p.status == Status(st)
    # A warning never invalidates: the point with a warning is the global minimum.
    assert global_minimum({"semantic": ok, "positional": _fp("collapsed", train_loss=0.0, branch="positional")}) is ok
    # A status is a code: its exact value is read, free text is refused (never parsed by its prefix).
    assert _fp("collapsed").status == Status.collapsed
    for text in ("collapsed to agnostic", "ok (3 proximal points above gradient tolerance)", "OK"):
        with pytest.raises(ValueError, match="unknown status"):
            _fp(text)


def test_global_names_the_branches_that_gave_no_verdict():
    """global_minimum is the lowest of the branches that converged; a branch without a verdict (not converged, run
    away, out of the map's domain) is named in an `unresolved` warning with its last iterate's train loss, so that a
    lower point it may stand for is never dropped without a word; a collapsed branch is a verdict (no warning)."""
    from attnphase.notes import NoteCode

    best = _fp(train_loss=0.2, branch="agnostic")
    pts = {"agnostic": best, "semantic": _fp("collapsed", train_loss=0.05),
           "positional": _fp("not_converged", train_loss=0.1, branch="positional"),
           "mixed": _fp("inadmissible", train_loss=0.3, branch="mixed")}
    g = global_minimum(pts)
    assert g.branch == "agnostic" and g.valid and g.train_loss == 0.2
    notes = [n for n in g.warnings if n.code == NoteCode.unresolved]
    assert len(notes) == 2
    assert "positional" in notes[0].message and "below" in notes[0].message
    assert "mixed" in notes[1].message and "above" in notes[1].message
    assert NoteCode.unresolved in json.loads(json.dumps(g.to_dict()))["warning_codes"]
    ran = global_minimum({"agnostic": best, "mixed": _fp("diverged", train_loss=float("nan"), branch="mixed")})
    assert [n.code for n in ran.warnings] == [NoteCode.unresolved] and "no train loss" in ran.warnings[0].message
    # every branch with a verdict: the point itself, unchanged
    assert global_minimum({"agnostic": best, "semantic": _fp("collapsed", train_loss=0.05)}) is best
    # The curve (the figures' and phase diagrams' global minimum) says the same at each alpha; an alpha where no
    # branch is valid has no point.
    at2 = {b: dataclasses.replace(p, alpha=2.0) for b, p in pts.items()}
    none3 = {b: dataclasses.replace(p, alpha=3.0, status=Status.not_converged) for b, p in pts.items()}
    gc = global_minimum_curve({b: [none3[b], at2[b], pts[b]] for b in pts})
    assert [p.alpha for p in gc] == [1.0, 2.0]
    for p in gc:
        assert p.branch == "agnostic" and [n.code for n in p.warnings] == [NoteCode.unresolved] * 2
    assert global_minimum_curve({"agnostic": [best], "semantic": [_fp("collapsed", train_loss=0.05)]}) == [best]


def test_the_screen_solves_every_branch_that_can_be_the_minimum():
    """still_to_solve (global's branch and bound): while no fine point is valid, every branch left, lowest rough train
    loss first and those without a valid rough point last; then only those within SCREEN_MARGIN of the lowest fine
    point, or without a valid rough point."""
    from attnphase.theory.state_evolution.results import SCREEN_MARGIN, still_to_solve

    rough = {"positional": _fp(train_loss=0.0030, branch="positional"), "semantic": _fp(train_loss=0.0020),
             "agnostic": _fp(train_loss=0.0020 * (1 + 2 * SCREEN_MARGIN), branch="agnostic"),
             "mixed": _fp("not_converged", train_loss=0.5, branch="mixed")}
    assert still_to_solve(rough, {}) == ["semantic", "agnostic", "positional", "mixed"]
    fine = {"semantic": _fp(train_loss=0.0020)}
    assert still_to_solve(rough, fine) == ["mixed"]  # agnostic 2 margins above, positional 50%
    near = {**rough, "agnostic": _fp(train_loss=0.0020 * (1 + 0.5 * SCREEN_MARGIN), branch="agnostic")}
    assert still_to_solve(near, fine) == ["agnostic", "mixed"]
    # the lowest rough point not valid at the fine precision: every branch left is solved
    assert still_to_solve(rough, {"semantic": _fp("collapsed", train_loss=0.0020)}) == ["agnostic", "positional",
                                                                                          "mixed"]
    assert still_to_solve(rough, {b: _fp(branch=b) for b in rough}) == []


def test_to_dict_round_trip_study_and_general():
    fp = solve(Setting(), 1.5, "semantic", "fast")
    d = json.loads(json.dumps(fp.to_dict()))
    assert isinstance(d["q"], float) and isinstance(d["theta"], float) and d["status"] == "ok"
    back = FixedPoint.from_dict(d)
    assert back.converged and back.theta_norm == pytest.approx(fp.theta_norm) and back.train_loss == fp.train_loss
    g = FixedPoint(alpha=1.0, omega=0.3, branch="positional",
                   overlaps=Overlaps(q=np.eye(2) * 0.1, m=np.ones((3, 2)), V=np.eye(2), theta=np.zeros((2, 1))),
                   hats=dict(qhat=np.eye(2), mhat=np.ones((3, 2)), Vhat=np.eye(2), thetahat=np.zeros((2, 1))),
                   train_loss=0.1, test_error=0.2, status="diverged", warnings=("w",))
    d = json.loads(json.dumps(g.to_dict()))
    assert d["m"] == [[1.0, 1.0]] * 3 and d["status"] == "diverged" and d["converged"] is False
    back = FixedPoint.from_dict(d)
    assert back.status == Status.diverged and back.m.shape == (3, 2) and [n.message for n in back.warnings] == ["w"]
    assert d["warning_codes"] == ["legacy"] and back.warnings == g.warnings


def test_lambda_zero_is_refused():
    with pytest.raises(ValueError, match="lambda > 0"):
        solve(Setting(lam=0.0), 1.0, "semantic", "fast")


def test_cli_every_alpha_is_a_row(capsys):
    from attnphase.cli import main

    assert main(["theory", "--alpha", "2,5,20", "--precision", "fast", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert len(rec) == 9 and sorted({r["alpha"] for r in rec}) == [2.0, 5.0, 20.0]
    for r in rec:
        assert r["status"] in {s.value for s in Status}
        assert r["converged"] == (r["status"] == "ok")
    assert main(["theory", "--lam", "0"]) == 2
    assert main(["theory", "--positions", "nonsense"]) == 2
    assert main(["theory", "--L", "3", "--positions", "antipodal"]) == 2


def test_cli_general_setting_flags(tmp_path, capsys):
    from attnphase.cli import main

    G = tmp_path / "gram.csv"
    np.savetxt(G, np.eye(3), delimiter=",")
    assert main(["theory", "--L", "3", "--positions", str(G), "--alpha", "1.5", "--branch", "semantic",
                 "--precision", "fast", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert rec["setting"]["L"] == 3 and rec["setting"]["positions"] == np.eye(3).tolist()
    assert np.shape(rec["m"]) == (3, 1) and np.shape(rec["theta"]) == (1, 1)
    assert rec["converged"] == (rec["status"] == "ok")
    assert main(["theory", "--rank", "0"]) == 2
    assert main(["baseline", "--L", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)[0]
    assert np.allclose(np.sum(out["mean_attention"], axis=1), 1.0)


def test_to_dict_of_a_failed_general_point_with_nan_overlaps():
    # A failed solve of a general shape carries NaN arrays; serialising it must not raise (LAPACK's SVD does on NaN).
    nan = np.nan
    g = FixedPoint(alpha=1.5, omega=0.3, branch="agnostic",
                   overlaps=Overlaps(q=np.full((1, 1), nan), m=np.full((2, 1), nan), V=np.full((1, 1), nan),
                                     theta=np.full((1, 2), nan)),
                   hats=dict(qhat=np.full((1, 1), nan), mhat=np.full((2, 1), nan), Vhat=np.full((1, 1), nan),
                             thetahat=np.full((1, 2), nan)),
                   train_loss=nan, test_error=nan, status="not_converged")
    d = json.loads(json.dumps(g.to_dict()))
    assert d["status"] == "not_converged" and d["theta_sv"] == [None]


def test_agnostic_default_start_is_inside_the_domain_where_a_narrower_V_is_not() -> None:
    """r* = 2, agnostic, alpha 1.5: from V = 0.6 sigma^2 / lambda (15) one step of the map leaves its domain
    (lambda + sigma^2 Vhat <= 0); the default start (V = 1.2 sigma^2 / lambda = 30) stays inside, so the solve needs
    no retry, and lands on the fixed point that another start inside the domain (V = 25) reaches."""
    from attnphase.theory.state_evolution.branch_map import BranchMap
    from attnphase.theory.state_evolution.precision import integration_points
    from attnphase.theory.state_evolution.starts import default_start

    s = Setting(L=2, r=1, r_star=2, omega=0.3)
    bm = BranchMap(s, 1.5, Branch.agnostic, integration_points(s, "fast", 0, 0))
    d0 = default_start(s, "agnostic")
    assert d0.V[0, 0] == pytest.approx(1.2 * s.sigma**2 / s.lam)
    bm(bm.pack(d0))  # inside: no Inadmissible
    with pytest.raises(Inadmissible):
        bm(bm.pack(Overlaps(q=d0.q, m=d0.m, V=0.5 * d0.V, theta=d0.theta)))
    fp = solve(s, 1.5, "agnostic", "fast")
    assert fp.converged and not fp.starts, fp.message  # the default start sufficed
    inside = solve(s, 1.5, "agnostic", "fast", init=Overlaps(q=np.array([[0.05]]), m=np.zeros((2, 1)),
                                                              V=np.array([[25.0]]), theta=np.zeros((1, 2))))
    assert inside.converged
    for key in ("q", "V"):
        a, b = fp.summary()[key], inside.summary()[key]
        assert abs(a - b) <= 3 * (fp.errors[key] + inside.errors[key]) + 1e-3 * abs(b), key
    assert abs(fp.train_loss - inside.train_loss) <= 3 * (fp.errors["train_loss"] + inside.errors["train_loss"]) \
        + 1e-3 * inside.train_loss
