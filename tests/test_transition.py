"""Critical points: bracketing and physics sanity (MODEL.md section 7)."""

from __future__ import annotations

import pytest

from attnphase import Setting
from attnphase.theory import solve, transition


@pytest.fixture(scope="module")
def study_transition():
    return transition(Setting(omega=0.3), alpha_min=0.6, alpha_max=2.0, n_grid=6, precision="fast", xtol=0.02)


def test_alpha_c_is_bracketed_by_a_sign_change(study_transition):
    r = study_transition
    assert r.alpha_c is not None, r.reasons
    lo, hi = r.alpha_c_bracket
    s = Setting(omega=0.3)

    def delta(a):
        return solve(s, a, "semantic", "fast").train_loss - solve(s, a, "positional", "fast").train_loss

    assert delta(lo - 0.05) > 0 > delta(hi + 0.05)
    # Study setting: alpha_c(0.3) lies between 1 and 1.6.
    assert 1.0 < r.alpha_c < 1.6
    assert r.alpha_l is None or r.alpha_l >= r.alpha_c - 0.02


@pytest.mark.slow
def test_alpha_c_increases_with_omega():
    rs = [transition(Setting(omega=w), alpha_min=0.3, alpha_max=2.0, n_grid=8, precision="fast") for w in (0.1, 0.3)]
    assert rs[0].alpha_c is not None and rs[1].alpha_c is not None
    assert rs[0].alpha_c < rs[1].alpha_c
    for r in rs:
        if r.alpha_l is not None:
            assert r.alpha_l >= r.alpha_c - 0.02


def test_cli_transition_and_phase_diagram(tmp_path, capsys):
    import json

    import pandas as pd

    from attnphase.cli import main

    args = ["--alpha-min", "1.0", "--n-grid", "3", "--xtol", "0.1", "--workers", "1", "--no-progress"]
    assert main(["transition", "--omega", "0.3", "--json", *args]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert {"omega", "alpha_c", "alpha_c_lo", "alpha_c_hi", "alpha_l", "test_error_linear", "alpha_sem_appears",
            "alpha_pos_vanishes", "note"} <= set(rec)
    assert rec["alpha_c"] is None or rec["alpha_c_lo"] <= rec["alpha_c"] <= rec["alpha_c_hi"]
    out = tmp_path / "pd"
    assert main(["phase-diagram", "--omegas", "0.3", "--out", str(out), *args]) == 0
    df = pd.read_csv(out / "phase_diagram.csv")
    assert list(df["omega"]) == [0.3]
    assert (out / "phase_diagram.png").stat().st_size > 1000
    assert main(["phase-diagram", "--omegas", "0.3", "--out", str(out), "--store", str(tmp_path / "nope.sqlite")]) == 2
    assert main(["transition", "--omega", "0.3", "--alpha-max", "-1"]) == 2
