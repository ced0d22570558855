"""`attnphase plot KIND`: one figure (reads the theory and simulations a store holds, computes what it lacks)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from attnphase.cli.common import (
    add_allow_long,
    add_setting_args,
    check_input_file,
    check_input_store,
    check_output_file,
    parse_spec,
    positive_float,
    positive_int,
    setting_from_args,
)
from attnphase.errors import InputError
from attnphase.progress import progress_bar

KINDS = ("test-error", "loss-difference", "overlaps", "phase-diagram", "finite-size", "rank2", "untied")
PRECISIONS = ("fast", "default", "high")
_DEFAULT_ALPHAS = "0.1:2.0:12"
_DEFAULT_OMEGAS = "0.05,0.1,0.2,0.3,0.4,0.45"
_DEFAULT_FS_ALPHA = "1.5"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "plot",
        help="draw one figure (PNG + PDF) from theory and, optionally, stored simulations",
        description="Draw one figure. test-error, loss-difference and overlaps: theory curves of both "
        "branches on --alphas at --omega, with alpha_c and alpha_l from the theory's transition (the values "
        "`attnphase transition` prints at the same --precision). phase-diagram: "
        "the transition at each of --omegas up to --alpha-max, optionally over a heat map of a sweep "
        "store. finite-size: simulated test error vs d at the single alpha in --alphas (needs --store). "
        "rank2: the rank-2 vs rank-1 student's test error from --records (JSON written by benchmarks/rank2.py). "
        "untied: tied vs untied student (test error, m, theta) from --records (JSON of benchmarks/untied.py). "
        "Simulation points come from --store at size --d (default: the largest stored).",
    )
    p.add_argument("kind", choices=KINDS, metavar="KIND", help="the figure: one of " + ", ".join(KINDS))
    p.add_argument("--alphas", default=None,
                   help=f"alpha values: number, comma list or start:stop:num (default {_DEFAULT_ALPHAS}; "
                   f"finite-size: the one alpha, default {_DEFAULT_FS_ALPHA})")
    p.add_argument("--omegas", default=_DEFAULT_OMEGAS,
                   help=f"phase-diagram omegas (default {_DEFAULT_OMEGAS})")
    p.add_argument("--alpha-max", type=positive_float, default=2.0, help="phase-diagram alpha range (default 2)")
    p.add_argument("--store", default=None, help="SQLite results store of `attnphase sweep` (optional)")
    p.add_argument("--records", default=None, help="rank2, untied: JSON records of benchmarks/rank2.py or "
                   "benchmarks/untied.py (required there)")
    p.add_argument("--d", type=positive_int, default=None, help="simulation size to draw (default: largest in store)")
    p.add_argument("--precision", choices=PRECISIONS, default="default",
                   help=f"theory precision: {', '.join(PRECISIONS)} (default: default)")
    add_setting_args(p)
    add_allow_long(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar (see also --quiet)")
    p.add_argument("--out", required=True, help="output file; FILE.png and FILE.pdf are written")
    p.set_defaults(func=_plot)


def _alphas(args: argparse.Namespace, default: str) -> list[float]:
    alphas = parse_spec(args.alphas if args.alphas is not None else default, "--alphas")
    from attnphase.setting import check_alpha

    for a in alphas:
        try:
            check_alpha(a)
        except ValueError as exc:
            raise InputError(f"--alphas: {exc}") from None
    return sorted(set(alphas))


def _simulations(args: argparse.Namespace, setting: Any) -> Any:
    if args.store is None:
        return None
    from attnphase.experiments.store import load_results
    from attnphase.reproduce.simulations import rows_for_setting

    df = rows_for_setting(load_results(args.store), setting)
    if df is None or len(df) == 0:
        if not args.quiet:
            print(f"attnphase plot: note: no results with this setting (sigma, lambda, A) in {args.store}",
                  file=sys.stderr)
        return None
    if args.d is not None and args.d not in set(df["d"].astype(int)):
        raise InputError(f"--d {args.d}: not in the store (sizes: {sorted(set(df['d'].astype(int)))})")
    return df


def _curves(setting: Any, alphas: list[float], precision: str, progress: bool) -> dict[str, list[Any]]:
    from attnphase.theory import solve_curve

    curves = {}
    bar = progress_bar(label="theory curves", total=2 * len(alphas), unit="point", enabled=progress)
    for branch in ("positional", "semantic"):
        curves[branch] = list(solve_curve(setting, alphas, branch, precision=precision,
                                          on_point=lambda _fp: bar.update(1)))
    bar.close()
    return curves


# The transition `plot` computes when the store has none (theory.transition's defaults).
_PLOT_TRANSITION_GRID = {"alpha_min": 0.05, "alpha_max": 2.0, "n_grid": 12, "xtol": 0.01}


def _stored_theory(path: str, setting: Any, alphas: list[float] | None, precision: str) -> tuple[Any, Any, Any]:
    """(alphas, curves, transition) from the theory table of a store written by `reproduce` (or None for each
    missing part): `plot` draws them instead of recomputing.  Curves: both branches along the same continuation
    path (the given --alphas, or the longest stored path); transition: the plot's own grid first, else any."""
    from attnphase.experiments.store import ResultStore
    from attnphase.reproduce.records import TransitionRecord, fixed_point_from_json

    sd = setting.to_dict()
    with ResultStore(path, create=False, readonly=True) as store:
        paths = {}
        for branch in ("positional", "semantic"):
            for params, value in store.find_theory("fixed_point", sd, precision, branch):
                path_ = tuple(params.get("continuation") or ())
                if path_:
                    paths.setdefault(path_, {}).setdefault(branch, {})[float(value["alpha"])] = value
        want = tuple(sorted(alphas)) if alphas is not None else None
        found = None
        for path_, by_branch in sorted(paths.items(), key=lambda kv: -len(kv[0])):
            if want is not None and (len(path_) != len(want)
                                     or not np.allclose(sorted(path_), want, rtol=0, atol=1e-9)):
                continue
            if all(len(by_branch.get(b, {})) == len(path_) for b in ("positional", "semantic")):
                found = path_
                break
        curves = None
        if found is not None:
            curves = {b: [fixed_point_from_json(paths[found][b][a]) for a in sorted(paths[found][b])]
                      for b in ("positional", "semantic")}
        rows = store.find_theory("transition", sd, precision)
        rows.sort(key=lambda pv: pv[0] != _PLOT_TRANSITION_GRID)
        tr = TransitionRecord.from_json(rows[0][1]) if rows else None
    return (list(found) if found is not None else None), curves, tr


def _plot(args: argparse.Namespace) -> int:
    from attnphase import plots

    # Validate everything before any theory runs: a typo should fail in a second, not after minutes.
    setting = setting_from_args(args)
    progress = not args.no_progress
    kind = args.kind
    check_output_file(args.out, "--out", create_parents=True)
    # The files written (FILE.png and FILE.pdf) are never an input of the command, nor an existing store.
    for path in figure_paths(args.out):
        check_output_file(str(path), "--out", create_parents=True,
                          inputs=[("--store", args.store), ("--records", args.records)])
    if kind == "rank2":
        return _plot_rank2(args)
    if kind == "untied":
        return _plot_untied(args)
    if args.store is not None:
        check_input_store(args.store)
    if kind == "finite-size" and args.store is None:
        raise InputError("finite-size needs --store (simulations at several d)")
    if kind == "phase-diagram":
        omegas = sorted(set(parse_spec(args.omegas, "--omegas")))
        for w in omegas:
            setting.replace(omega=w)  # range check with the setting's own message
    else:
        alphas = _alphas(args, _DEFAULT_FS_ALPHA if kind == "finite-size" else _DEFAULT_ALPHAS)
        if kind == "finite-size" and len(alphas) != 1:
            raise InputError(f"finite-size: --alphas must be a single alpha, got {len(alphas)} values")
    sim = _simulations(args, setting)
    out = Path(args.out)

    if kind == "phase-diagram":
        from attnphase.theory import phase_diagram

        transitions = phase_diagram(setting, omegas, alpha_max=args.alpha_max, precision=args.precision,
                                    progress=progress)
        paths = plots.plot_phase_diagram(transitions, out, alpha_max=args.alpha_max, simulation=sim, d=args.d)
    elif kind == "finite-size":
        if sim is None:
            raise InputError(f"finite-size: no simulations with this setting in {args.store}")
        at = sim[np.isclose(sim["alpha"].astype(float), alphas[0], rtol=0, atol=1e-9)
                 & np.isclose(sim["omega"].astype(float), setting.omega, rtol=0, atol=1e-9)]
        if len(at) == 0:
            raise InputError(f"finite-size: no simulations at alpha = {alphas[0]:g}, "
                             f"omega = {setting.omega:g} in {args.store}")
        from attnphase.theory import linear_baseline, solve

        theory = {b: solve(setting, alphas[0], branch=b, precision=args.precision)
                  for b in ("positional", "semantic")}
        paths = plots.plot_finite_size(sim, out, alpha=alphas[0], omega=setting.omega, theory=theory,
                                       test_error_linear=linear_baseline(setting).test_error_linear)
    else:
        import attnphase.theory as theory
        from attnphase.theory.state_evolution.results import global_minimum_curve

        stored_alphas = curves = tr = None
        if args.store is not None:
            # A store written by `reproduce` holds the theory too: read it instead of recomputing (106 s).
            stored_alphas, curves, tr = _stored_theory(args.store, setting, alphas if args.alphas is not None else None,
                                                       args.precision)
            if curves is not None:
                alphas = stored_alphas
            if not args.quiet:
                found = [w for w, v in (("curves", curves), ("transition", tr)) if v is not None]
                print(f"attnphase plot: theory from {args.store}: {', '.join(found) or 'none'} (precision "
                      f"{args.precision}); {'nothing' if len(found) == 2 else 'the rest'} computed", file=sys.stderr)
        if curves is None:
            _check_cost(setting, 2 * len(alphas) + (0 if tr is not None else 40), args)
            curves = _curves(setting, alphas, args.precision, progress)
        # alpha_c, alpha_l: the theory's values, exactly those `attnphase transition` prints for this setting
        # and precision (its defaults), never re-derived from the drawn curves.
        if tr is None:
            tr = theory.transition(setting, precision=args.precision)
        lin = float(tr.test_error_linear)
        common = {"simulation": sim, "omega": setting.omega, "d": args.d, "alpha_c": tr.alpha_c,
                  "alpha_c_bracket": tr.alpha_c_bracket}
        gm = global_minimum_curve(curves)
        if kind == "test-error":
            paths = plots.plot_test_error(curves, out, test_error_linear=lin, alpha_l=tr.alpha_l,
                                          alpha_l_bracket=tr.alpha_l_bracket, global_minimum=gm, **common)
        elif kind == "loss-difference":
            paths = plots.plot_loss_difference(curves, out, **common)
        else:
            common.pop("alpha_c_bracket")
            paths = plots.plot_overlaps(curves, out, sigma=setting.sigma, global_minimum=gm,
                                        unstable=tr.unstable, **common)
    for path in paths:
        print(path)
    return 0


def figure_paths(out: str) -> list[Path]:
    """The two files a figure is written to (plots.style.save_figure's rule): FILE.png and FILE.pdf."""
    p = Path(out)
    stem = p.with_suffix("") if p.suffix.lower() in (".png", ".pdf") else p
    return [stem.parent / (stem.name + ".png"), stem.parent / (stem.name + ".pdf")]


def _check_cost(setting: Any, n_points: int, args: argparse.Namespace) -> None:
    from attnphase.theory.cost import check_theory_size

    note = check_theory_size(setting, n_points, args.precision, 1, allow_long=getattr(args, "allow_long", False))
    if note and not args.quiet:
        print(f"attnphase plot: note: {note}", file=sys.stderr)


def _load_records(args: argparse.Namespace, script: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """The JSON records behind rank2 / untied, checked before any drawing."""
    import json

    if args.records is None:
        raise InputError(f"{args.kind} needs --records (the JSON written by {script})")
    check_input_file(args.records, "--records", what="records")
    try:
        records = json.loads(Path(args.records).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"--records: {args.records} is not JSON ({exc.msg})") from None
    except UnicodeDecodeError:  # a binary file (.npy, a store, a figure)
        raise InputError(f"--records: {args.records} is not JSON (not a text file)") from None
    if not isinstance(records, dict) or not (set(keys) & set(records)):
        raise InputError(f"--records: {args.records} has neither " + " nor ".join(f"'{k}'" for k in keys)
                         + " rows")
    return records


def _plot_rank2(args: argparse.Namespace) -> int:
    """Draw the rank comparison from computed records (no physics here: the records carry the numbers)."""
    from attnphase.plots.rank import plot_rank_test_error

    records = _load_records(args, "benchmarks/rank2.py", ("theory", "simulation"))
    omega = (records.get("setting") or {}).get("omega")
    paths = plot_rank_test_error(records, Path(args.out), omega=omega, d=args.d or records.get("d"),
                                 test_error_linear=records.get("test_error_linear"))
    for path in paths:
        print(path)
    return 0


def _plot_untied(args: argparse.Namespace) -> int:
    """Draw tied vs untied from computed records (no physics here: the records carry the theory values)."""
    from attnphase.plots.untied import plot_untied

    records = _load_records(args, "benchmarks/untied.py --json", ("theory", "runs"))
    omega = (records.get("setting") or {}).get("omega")
    paths = plot_untied(records, Path(args.out), omega=omega, d=args.d or records.get("d"))
    for path in paths:
        print(path)
    return 0


