"""Curves solved in pieces (theory.curves.curve_pieces): which branches are cut, and that the pieces cover the grid."""

from __future__ import annotations

import numpy as np

from attnphase import Setting
from attnphase.theory.state_evolution.curves import AGNOSTIC_PIECE, curve_pieces, solve_curves


def test_only_the_agnostic_curve_is_cut_and_the_pieces_cover_the_sorted_grid():
    alphas = list(np.linspace(2.0, 0.1, 20))  # descending on purpose
    for b in ("positional", "semantic"):
        assert curve_pieces(alphas, b) == [sorted(alphas)]
    pieces = curve_pieces(alphas, "agnostic")
    assert len(pieces) == 5 and all(len(p) <= AGNOSTIC_PIECE for p in pieces)
    assert [a for p in pieces for a in p] == sorted(alphas)
    assert curve_pieces([1.0, 0.5, 1.5], "agnostic") == [[0.5, 1.0, 1.5]]


def test_solve_curves_reassembles_the_pieces_in_ascending_alpha():
    alphas = [1.4, 0.6, 1.0, 0.8, 1.2]
    out = solve_curves(Setting(), alphas, branches=("agnostic",), precision="fast")
    got = out["agnostic"]
    assert [p.alpha for p in got] == sorted(alphas)
    assert all(p.valid and p.branch == "agnostic" for p in got)
