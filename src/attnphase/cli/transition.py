"""`attnphase transition`: alpha_c, alpha_l and the branch ends per omega; options and checks shared with
`attnphase phase-diagram`."""

from __future__ import annotations

import argparse
import sys

from attnphase.cli.common import (
    add_allow_long,
    add_output_args,
    add_setting_args,
    emit,
    parse_spec,
    positive_float,
    positive_int,
    setting_from_args,
)
from attnphase.errors import InputError
from attnphase.setting import STUDENTS

MAX_N_GRID = 200  # alpha grid points per omega before refinement (each is a pair of fixed points)
OUTPUT_FILES = ("phase_diagram.csv", "phase_diagram.png", "phase_diagram.pdf")  # what phase-diagram writes in --out
COLUMNS = ["omega", "alpha_c", "alpha_c_lo", "alpha_c_hi", "alpha_c_kind", "alpha_c_search", "alpha_l", "alpha_l_lo",
           "alpha_l_hi", "alpha_l_search", "test_error_linear", "alpha_sem_appears", "alpha_sem_appears_lo",
           "alpha_sem_appears_hi", "alpha_sem_appears_kind", "alpha_sem_appears_search", "alpha_pos_vanishes",
           "alpha_pos_vanishes_kind", "alpha_pos_vanishes_search", "note"]
# The table's further columns, shown where a row has the record (JSON and CSV carry every field of every record).
EXTRA_COLUMNS = ["alpha_pos_appears", "alpha_pos_appears_kind", "semantic_pitchfork", "positional_pitchfork",
                 "alpha_mixed_appears", "alpha_mixed_appears_kind", "mixed_pitchfork", "positional_saddle"]


def check_transition_options(args: argparse.Namespace, omegas: list[float], announce: bool = True):
    """Every option checked before any work: one line and exit 2 on a bad one; with `announce`, the time estimate
    of a long job printed (a caller with more to check, e.g. paths, checks first with announce=False)."""
    from attnphase.parallel import check_workers
    from attnphase.theory.transition.driver import check_transition_args

    check_transition_args(args.alpha_min, args.alpha_max, args.n_grid, args.precision, args.xtol, 0)
    check_workers(args.workers)
    if args.n_grid > MAX_N_GRID:
        raise InputError(f"--n-grid must be at most {MAX_N_GRID}, got {args.n_grid}")
    if not omegas:
        raise InputError("no omega given")
    base = setting_from_args(args, omega=omegas[0]).replace(student=args.student)
    for w in omegas:
        base.replace(omega=w)
    from attnphase.theory.cost import check_theory_size

    # Each omega: both branches on the grid plus the refinement's solves (about 2 n_grid + 20 fixed points).
    note = check_theory_size(base, len(omegas) * (2 * args.n_grid + 20), args.precision, args.workers,
                             allow_long=args.allow_long)
    if note and announce and not args.quiet:
        print(f"attnphase {args.command}: note: {note}", file=sys.stderr)
    # Any setting: beyond L = 2, r = r* = 1, antipodal, tied, the branch ends come from the solver.
    return base


def run_transitions(args: argparse.Namespace, omegas: list[float]):
    from attnphase.theory import phase_diagram

    base = check_transition_options(args, omegas)
    return phase_diagram(base, omegas, alpha_max=args.alpha_max, precision=args.precision,
                         progress=not args.no_progress, workers=args.workers, alpha_min=args.alpha_min,
                         n_grid=args.n_grid, xtol=args.xtol)


def _transition(args: argparse.Namespace) -> int:
    results = run_transitions(args, parse_spec(args.omega, "--omega"))
    records = [r.to_dict() for r in results]
    extra = [c for c in EXTRA_COLUMNS if any(c in r for r in records)]
    emit(records, args, COLUMNS[:-1] + extra + COLUMNS[-1:] if not (args.json or args.csv) else None)
    return 0




def add_transition_options(p: argparse.ArgumentParser, n_grid: int = 12, xtol: float = 0.01) -> None:
    p.add_argument("--alpha-max", type=positive_float, default=2.0, help="upper end of the alpha range (default 2)")
    p.add_argument("--alpha-min", type=positive_float, default=0.05,
                   help="lower end of the alpha range (default 0.05)")
    p.add_argument("--n-grid", type=positive_int, default=n_grid,
                   help=f"alpha grid points before root refinement, 3 to {MAX_N_GRID} ({n_grid})")
    p.add_argument("--xtol", type=float, default=xtol, help=f"bracket half-width of the critical values ({xtol})")
    p.add_argument("--precision", default="fast", choices=["fast", "default", "high"],
                   help="integration points and scramblings (fast)")
    p.add_argument("--workers", type=positive_int, default=2, help="parallel processes over omega")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (see also --quiet)")
    add_allow_long(p)
    p.add_argument("--student", default="tied", choices=STUDENTS,
                   help="tied Q = K (default) or untied Q, K (branch ends from the solver; docs/untied.md)")


def register(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("transition", help="alpha_c, alpha_l and spinodals per omega")
    add_setting_args(t)
    add_transition_options(t)
    add_output_args(t)
    t.set_defaults(func=_transition)
