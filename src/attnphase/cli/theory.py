"""`attnphase theory`: fixed points of the asymptotic equations, one point or curves, any setting."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from attnphase.cli.common import (
    add_allow_long,
    add_output_args,
    add_setting_args,
    emit,
    nonnegative_int,
    parse_spec,
    positive_int,
    setting_from_args,
)
from attnphase.cli.simulate import STUDENTS
from attnphase.errors import InputError

THEORY_COLUMNS = ["alpha", "omega", "branch", "q", "m", "theta", "V", "train_loss", "train_loss_err", "test_error",
                  "test_error_err", "converged", "iterations", "status", "warnings"]


def _table_row(fp) -> dict:
    """Scalars for the table: for L = 2, r = r* = 1 today's q, |m|, |theta|, V; in general tr(q)/r, the root mean
    square over tokens of |m_l|, the largest singular value of theta, tr(V)/r (the JSON has the matrices)."""
    d = fp.to_dict()
    d.update(fp.summary())
    d["warnings"] = len(fp.warnings)
    return d


def _flat_row(d: dict) -> dict:
    """CSV: nested quantities as JSON strings, the setting and full arrays left to --json."""
    import json

    out = {k: v for k, v in d.items() if k not in ("setting", "overlaps", "hats")}
    for k, v in out.items():
        if isinstance(v, list | dict):
            out[k] = json.dumps(v)
    return out


def _curve(task: tuple) -> list:
    """One branch's curve (module level: picklable for the process pool); `ticks`, a queue, gets one item per
    solved point (the parent's per-point progress)."""
    from attnphase import theory

    setting, alphas, branch, precision, seed, multistart, pattern, ticks = task
    on_point = (lambda _fp: ticks.put(1)) if ticks is not None else None
    return theory.solve_curve(setting, alphas, branch, precision, seed=seed, multistart=multistart,
                              on_point=on_point, pattern=pattern)


def _screened(task: tuple) -> dict:
    """The branches that can be the global minimum at one alpha (theory's solve_screened; module level: picklable)."""
    from attnphase.theory.state_evolution.solve import solve_screened

    setting, alpha, precision, seed, multistart = task
    return solve_screened(setting, alpha, precision, seed, multistart=multistart)


BRANCH_CHOICES = ("positional", "semantic", "agnostic", "mixed", "free", "global", "all")


def parse_branches(text: str, setting) -> tuple[list[str], bool]:  # noqa: ANN001 - a Setting
    """--branch: one name or a comma list (e.g. positional,semantic); 'all' is every branch the setting has
    (theory.branches_for: positional, semantic, agnostic, and mixed for a tied student of rank >= 2), 'global' their
    lowest train_loss (alone).  Returns the branches to solve and whether to keep the global minimum only."""
    from attnphase.theory import branches_for

    BRANCHES = tuple(branches_for(setting))
    names = [b.strip() for b in str(text).split(",") if b.strip()]
    if not names:
        raise InputError("--branch: empty list")
    bad = [b for b in names if b not in BRANCH_CHOICES]
    if bad:
        raise InputError(f"--branch: unknown branch {bad[0]!r} (choose from {', '.join(BRANCH_CHOICES)}, or a comma "
                         "list of them)")
    if "global" in names and len(names) > 1:
        raise InputError("--branch global is the lower of all branches: give it alone")
    if "mixed" in names and "mixed" not in BRANCHES:
        raise InputError("--branch mixed needs a tied student of rank r >= 2 (--rank 2)")
    if names == ["global"]:
        return list(BRANCHES), True
    out: list[str] = []
    for b in names:
        for x in (BRANCHES if b == "all" else (b,)):
            if x not in out:
                out.append(x)
    return out, False


def _run_curves(tasks: list[tuple], workers: int, progress: bool) -> list:
    """Every curve, with a progress bar that counts fixed points (not whole curves)."""
    from attnphase.progress import progress_bar

    total = sum(len(t[1]) for t in tasks)
    bar = progress_bar(label="theory (fixed points)", total=total, unit="point", enabled=progress)
    try:
        if workers == 1 or len(tasks) == 1:
            class _Tick:
                @staticmethod
                def put(_item: object) -> None:
                    bar.update(1)

            out, done = [], 0
            for t in tasks:
                out.append(_curve((*t, _Tick)))
                done += len(t[1])
                if bar.n < done:  # a curve that reported fewer points than it solved
                    bar.update(done - bar.n)
            return out
        if not progress:
            # (no bar to tick: no manager process for its queue; the study curve 12.5 -> 12.2 s, best of 3)
            from attnphase.parallel import map_tasks

            return map_tasks(_curve, [(*t, None) for t in tasks], workers=workers)
        import queue
        import threading

        from attnphase.parallel import manager as start_manager
        from attnphase.parallel import run_shared

        with start_manager() as manager:
            ticks = manager.Queue()
            stop = threading.Event()

            def drain() -> None:  # (the points solved, in this process and in the workers)
                while not stop.is_set():
                    try:
                        ticks.get(timeout=0.25)
                        bar.update(1)
                    except queue.Empty:
                        pass

            drainer = threading.Thread(target=drain, daemon=True, name="attnphase-progress")
            drainer.start()
            try:
                results = run_shared(_curve, [(*t, ticks) for t in tasks], min(workers, len(tasks)))
            finally:
                stop.set()
                drainer.join()
            if bar.n < total:
                bar.update(total - bar.n)
            return results
    finally:
        bar.close()


def _theory(args: argparse.Namespace) -> int:
    from attnphase.notes import NoteCode, Status
    from attnphase.parallel import check_workers
    from attnphase.theory import global_minimum
    from attnphase.theory.cost import check_theory_size
    from attnphase.theory.state_evolution.curves import curve_pieces
    from attnphase.theory.state_evolution.precision import get_precision
    from attnphase.theory.state_evolution.results import check_theory_setting

    get_precision(args.precision)
    alphas = parse_spec(args.alpha, "--alpha")
    omegas = parse_spec(args.omega, "--omega")
    from attnphase.setting import check_alpha

    for a in alphas:
        try:
            check_alpha(a)  # the solver's own rule (> 0, at most ALPHA_MAX), before any process starts
        except ValueError as exc:
            raise InputError(f"--alpha: {exc}") from None
    settings = [check_theory_setting(setting_from_args(args, omega=w).replace(student=args.student))
                for w in omegas]  # all checked before work
    branches, global_only = parse_branches(args.branch, settings[0])
    if args.pattern is not None:
        if branches != ["positional"]:
            raise InputError("--pattern: a token pattern is solved on the positional branch only (--branch positional)")
        from attnphase.theory.state_evolution.solve import check_pattern

        for setting in settings:
            try:
                check_pattern(setting, "positional", args.pattern)
            except InputError as exc:
                raise InputError(f"--pattern: {exc}") from None
    multistart = False if args.single_start else None
    check_workers(args.workers)
    # Memory refused and long runs announced before the first fixed point (one line each).
    note = check_theory_size(settings[0], len(alphas) * len(omegas) * len(branches), args.precision, args.workers,
                             allow_long=args.allow_long)
    if note and not args.quiet:
        print(f"attnphase theory: note: {note}", file=sys.stderr)
    table = not (args.json or args.csv)
    # One continuation per (omega, branch, piece of the alpha grid: theory.curve_pieces), one process each (the
    # package's pool).
    pieces = {b: curve_pieces(alphas, b) for b in branches}
    screened = global_only and len(alphas) == 1
    if screened:
        # One point: only the branches that can be the minimum are solved at the precision asked (solve_screened).
        from attnphase.parallel import map_tasks

        found = map_tasks(_screened, [(setting, alphas[0], args.precision, args.seed, multistart)
                                      for setting in settings], workers=args.workers,
                          progress=not args.no_progress, desc="theory (global points)", unit="point")
    else:
        tasks = [(setting, piece, b, args.precision, args.seed, multistart, args.pattern) for setting in settings
                 for b in branches for piece in pieces[b]]
        done = iter(_run_curves(tasks, args.workers, progress=not args.no_progress))
    records = []
    shown = []  # the fixed points the rows are made of
    for k in range(len(settings)):
        curves = ({b: [fp] for b, fp in found[k].items()} if screened
                  else {b: [fp for _ in pieces[b] for fp in next(done)] for b in branches})
        for i in range(len(alphas)):
            if global_only:
                pts = {b: c[i] for b, c in curves.items()}
                try:
                    fp = global_minimum(pts)
                except ValueError as exc:
                    # No valid branch here: still one row, marked not converged, from the first branch tried.
                    fp = next(iter(pts.values()))
                    print(f"warning: alpha={fp.alpha:g}: {exc}", file=sys.stderr)
                for note in fp.warnings:
                    if note.code == NoteCode.unresolved:
                        print(f"warning: alpha={fp.alpha:g}: {note.message}", file=sys.stderr)
                shown.append(fp)
                d = _table_row(fp) if table else fp.to_dict()
                d["branch"] = f"global ({fp.branch})" if table else fp.branch
                d["global"] = True
                records.append(d)
            else:
                shown.extend(curves[b][i] for b in branches)
                records.extend(_table_row(curves[b][i]) if table else curves[b][i].to_dict() for b in branches)
    if args.csv:
        records = [_flat_row(r) for r in records]
    emit(records, args, THEORY_COLUMNS if table else None)
    bad = Counter(str(r["status"]) for r in records if not r["converged"])
    if bad:
        # By status: a collapsed point is a verdict (no distinct fixed point of its branch there), not a failure.
        what = ", ".join(f"{n} {s}" + (" (no distinct fixed point of the branch there)" if s == Status.collapsed else "")
                         for s, n in bad.items())
        print(f"warning: {sum(bad.values())} fixed point(s) are not valid: {what} (see 'status')", file=sys.stderr)
    saddles = sorted({(fp.omega, fp.alpha) for fp in shown if any(n.code == NoteCode.unstable_theta
                                                                   for n in fp.warnings)})
    if saddles:
        where = ", ".join(f"{a:g}" if len(settings) == 1 else f"{a:g} (omega {w:g})" for w, a in saddles)
        print(f"warning: positional point(s) unstable along theta at alpha = {where}: saddles, a branch with semantic "
              "content has left them (warning code unstable_theta)", file=sys.stderr)
    return 0




def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("theory", help="fixed points of the asymptotic equations (any L, ranks r and r*, positions)",
                       description="Solve the self-consistent equations; SPEC = number, comma list or start:stop:num. "
                                   "Table columns q, m, theta, V are scalar summaries (tr(q)/r, rms over tokens of "
                                   "|m_l|, largest singular value of theta, tr(V)/r; for L = 2, r = r* = 1 the "
                                   "study's q, |m|, |theta|, V); --json gives the matrices.")
    add_setting_args(p)
    p.add_argument("--alpha", default="1.5", help="sample complexity alpha = n/d: SPEC (default 1.5)")
    p.add_argument("--branch", default="all",
                   help="which fixed point(s): one of positional, semantic, agnostic, mixed, free, global, all, or a "
                        "comma list (e.g. positional,semantic); all: every branch the setting has (positional, semantic, "
                        "agnostic, and for --rank >= 2 mixed: one student direction positional, another semantic); "
                        "global: the one with the lowest train_loss among them; free: m and theta both free from the "
                        "default start (default all)")
    p.add_argument("--multistart", action="store_true",
                   help="kept for old scripts: the set of starts each branch needs is now always tried (see "
                        "--single-start)")
    p.add_argument("--single-start", action="store_true",
                   help="cheaper: solve each branch from its default start only (no structured starts, no internal "
                        "continuation); may miss fixed points the full set finds")
    p.add_argument("--pattern", default=None,
                   help="with --branch positional, where every token permutation leaves the setting unchanged (L > 2, "
                        "simplex or orthogonal codes): the branch on this token pattern only, e.g. 1+1- (m = x (1, -1, "
                        "0)) or 1:2 at L = 3; default: every pattern, the lowest kept (docs/numerics.md: token patterns)")
    p.add_argument("--precision", default="default", help="fast | default | high (integration points, tolerance)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the Sobol scramblings")
    add_allow_long(p)
    p.add_argument("--workers", type=positive_int, default=2,
                   help="processes over the curves (one per omega and branch; default 2, 1: in-process)")
    p.add_argument("--student", default="tied", choices=STUDENTS,
                   help="tied Q = K (default) or untied Q, K: the equations at field rank 2r with the bilinear scores; "
                        "q, m, theta are then the query-key overlaps (docs/untied.md)")
    add_output_args(p)
    p.set_defaults(func=_theory)
