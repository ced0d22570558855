"""`attnphase baseline`: the linear positional baseline (closed form)."""

from __future__ import annotations

import argparse

from attnphase.cli.common import (
    add_output_args,
    add_setting_args,
    emit,
    parse_spec,
    setting_from_args,
)
from attnphase.cli.simulate import STUDENTS


def _baseline(args: argparse.Namespace) -> int:
    from attnphase.theory import linear_baseline

    records = []
    for w in parse_spec(args.omega, "--omega"):
        b = linear_baseline(setting_from_args(args, omega=w).replace(student=args.student))
        records.append(b.to_dict())
    emit(records, args, ["omega", "test_error_linear", "test_error_linear_err"] if not args.json else None)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("baseline", help="asymptotic test error of the linear positional baseline")
    add_setting_args(b)
    b.add_argument("--student", default="tied", choices=STUDENTS,
                   help="tied or untied: the baseline does not depend on the student (accepted for symmetry)")
    add_output_args(b)
    b.set_defaults(func=_baseline)
