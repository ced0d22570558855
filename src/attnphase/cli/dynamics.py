"""`attnphase dynamics`: online SGD's trajectory of q, m, theta and the errors, the d -> infinity ODE with finite-d
runs overlaid, or the dynamical phase diagram (--diagram)."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from attnphase.cli.common import (
    CLIError,
    add_output_args,
    add_setting_args,
    check_output_file,
    check_store_path,
    emit,
    nonnegative_int,
    parse_int_spec,
    parse_spec,
    positive_float,
    positive_int,
    setting_from_args,
)

COLUMNS = ["source", "d", "t", "q", "m", "theta", "test_error", "train_error"]
DIAGRAM_COLUMNS = ["omega", "init_scale", "lr", "mechanism", "escape_m", "escape_theta", "m", "theta", "test_error",
                   "status"]
TABLE_ROWS = 11  # time points shown in the default table (JSON and CSV carry all of them)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "dynamics",
        help="online SGD from a random start: the d -> infinity ODE of q, m, theta with finite-d runs overlaid",
        description="One-pass SGD (a fresh sample per step, Q <- Q - lr (grad l + (lambda/d) Q), time t = samples / "
        "d) from Q_ij iid N(0, s^2): the d -> infinity ODE of the overlaps from the typical start at dimension --d, "
        "and with --seeds finite-d runs at --d (their mean, and the ODE from each run's own start). --diagram: the "
        "mechanism reached at --t-max and its escape time over --omegas and --init-scales (or --lrs).",
    )
    p.add_argument("--lr", type=positive_float, default=1.0, help="learning rate eta (default 1)")
    p.add_argument("--init-scale", type=positive_float, default=0.1,
                   help="standard deviation s of the initial entries of Q (default 0.1)")
    p.add_argument("--t-max", type=positive_float, default=150.0,
                   help="last time, samples / d (default 150: the study setting at lr 1 has settled by then)")
    p.add_argument("--d", type=int, default=1000,
                   help="dimension of the simulations and of the random start the ODE begins at (default 1000)")
    p.add_argument("--seeds", default=None,
                   help="run finite-d online SGD for these seeds (e.g. 0:7); default: the ODE only")
    p.add_argument("--n-points", type=positive_int, default=200, help="recorded time points (default 200)")
    p.add_argument("--n-test", type=positive_int, default=1000,
                   help="held-out samples per seed for the simulations' test error (default 1000)")
    p.add_argument("--store", default=None, help="results store the simulations resume from and write to")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda")
    p.add_argument("--student", default="tied", choices=("tied", "untied"),
                   help="tied (default) or untied Q, K (simulations only: the ODE is the tied student's)")
    p.add_argument("--per-seed", action="store_true", help="with --json/--csv: also one record per seed and time")
    p.add_argument("--ode-seed", type=nonnegative_int, default=0,
                   help="seed of the ODE's random start where no typical start is defined (r or r* > 1)")
    p.add_argument("--out", default=None, metavar="FIG", help="figure (PNG, and a PDF beside it)")
    p.add_argument("--diagram", action="store_true", help="the dynamical phase diagram instead of one trajectory")
    p.add_argument("--omegas", default="0.1,0.2,0.3,0.4,0.5", help="--diagram: omegas (default 0.1:0.5 by 0.1)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--init-scales", default=None, help="--diagram: init scales (default 0.01,0.1,1)")
    g.add_argument("--lrs", default=None, help="--diagram: learning rates instead of init scales")
    p.add_argument("--static", action="store_true",
                   help="--diagram: also compute the static alpha_c(omega) (fast precision, minutes) for the figure")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (see also --quiet)")
    add_setting_args(p)
    add_output_args(p)
    p.set_defaults(func=_dynamics)


def _check(args: argparse.Namespace) -> tuple[Any, list[int] | None]:
    from attnphase.experiments.online.run import check_run, check_seeds

    if args.d < 2:
        raise CLIError(f"--d must be an integer >= 2, got {args.d}")
    if args.device not in ("auto", "cpu") and not str(args.device).startswith("cuda"):
        raise CLIError(f"--device must be auto, cpu or cuda, got {args.device!r}")
    if args.out is not None:
        check_output_file(args.out, "--out", inputs=[("--store", args.store)])
    if args.store is not None:
        check_store_path(args.store)
    if args.diagram:
        if args.seeds is not None:
            raise CLIError("--seeds: the diagram is computed from the ODE only")
        setting = setting_from_args(args, omega=parse_spec(args.omegas, "--omegas")[0])
        return setting, None
    if any(sep in args.omega for sep in (",", ":")):
        raise CLIError("--omega takes one value here (a grid of omegas: --diagram --omegas)")
    setting = setting_from_args(args)
    if args.student == "untied":
        setting = setting.replace(student="untied")
    check_run(setting, args.d, args.lr, args.init_scale, args.t_max, args.n_points, args.n_test)
    seeds = list(check_seeds(parse_int_spec(args.seeds, "--seeds"))) if args.seeds is not None else None
    if args.student == "untied" and seeds is None:
        raise CLIError("--student untied: the ODE is the tied student's; give --seeds to simulate the untied one")
    if seeds is not None:
        from attnphase.cli.common import require_extra

        require_extra("experiments", "--seeds (finite-d simulations)")
        from attnphase.experiments.online.run import _check_memory

        _check_memory(setting, args.d, len(seeds), args.n_test)
        if args.device != "auto":
            from attnphase.experiments.simulation.sampling import resolve_device

            resolve_device(args.device)
    return setting, seeds


def _ode_records(tr: Any, source: str, d: int | None = None) -> list[dict[str, Any]]:
    return [{"source": source, "d": d, "t": float(tr["t"][j]), "q": tr["q"][j], "m": tr["m"][j],
             "theta": tr["theta"][j], "test_error": tr["test_error"][j], "train_error": tr["train_error"][j]}
            for j in range(len(tr["t"]))]


def _curve(tr: Any) -> dict[str, Any]:
    return {"t": tr.t.tolist(), "q": tr.q_scalar.tolist(), "m": tr.m_abs.tolist(), "theta": tr.theta_abs.tolist(),
            "test_error": tr.test_error.tolist(), "train_error": tr.train_error.tolist()}


def _when(t: float) -> str:
    """An escape time for a person: nan means the fraction never crossed the threshold (or started above it)."""
    return "none" if t != t else f"t = {t:.3g}"


def _note(args: argparse.Namespace, text: str) -> None:
    if not args.quiet:
        print(f"attnphase dynamics: {text}", file=sys.stderr)


def _warn(text: str) -> None:
    print(f"attnphase dynamics: warning: {text}", file=sys.stderr)


def _dynamics(args: argparse.Namespace) -> int:
    setting, seeds = _check(args)
    if args.diagram:
        return _diagram(args, setting)
    import numpy as np

    from attnphase.experiments.online.diagram import typical_start
    from attnphase.theory.dynamics import integrate

    records: list[dict[str, Any]] = []
    ode_curve = None
    if not setting.untied:
        start = typical_start(setting, args.init_scale, args.d)
        if start is None:
            tr = integrate(setting, lr=args.lr, init_scale=args.init_scale, d=args.d, seed=args.ode_seed,
                           t_max=args.t_max, n_points=args.n_points)
        else:
            tr = integrate(setting, lr=args.lr, init=start, t_max=args.t_max, n_points=args.n_points)
        for w in tr.warnings:
            _warn(f"ODE: {w.message} [{w.code}]")
        _note(args, f"ODE {tr.status.value} in {tr.seconds:.1f} s, mechanism at t = {args.t_max:g}: "
                    f"{tr.mechanism().value} (escape of m {_when(tr.escape_time('m'))}, of theta "
                    f"{_when(tr.escape_time('theta'))})")
        ode_curve = {**_curve(tr), "label": "ODE, typical start"}
        records += _ode_records(ode_curve, "ode", args.d)
    sims, extra = [], []
    if seeds is not None:
        from attnphase.experiments.online import run_online

        res = run_online(setting, d=args.d, lr=args.lr, init_scale=args.init_scale, t_max=args.t_max, seeds=seeds,
                         n_points=args.n_points, n_test=args.n_test, device=args.device, store=args.store,
                         progress=not args.no_progress)
        for w in res.warnings:
            _warn(f"SGD: {w.message} [{w.code}]")
        _note(args, f"SGD at d = {args.d}: {len(seeds)} seeds ({res.reused} read back from the store), "
                    f"{float(res.seconds.sum()):.1f} s")
        records += res.records()
        if args.per_seed:
            records += res.records(per_seed=True)
        mu, s = res.mean(), res.summary
        sims.append({"label": f"SGD d = {args.d} ({len(seeds)} seeds)", **mu,
                     "seeds": [{"t": res.t, "q": s["q"][i], "m": s["m"][i], "theta": s["theta"][i],
                                "test_error": res.test_error[i]} for i in range(len(seeds))]})
        if not setting.untied:
            from attnphase.experiments.online.compare import compare_with_ode

            c = compare_with_ode(res)
            ode_s = {"t": res.t, **c.ode, "train_error": np.full(len(res.t), np.nan)}
            records += _ode_records(ode_s, "ode_seeds", args.d)
            extra.append({"label": "ODE from each seed's start (mean)", **ode_s})
            _note(args, "largest gap of the seeds' mean to the ODE from their starts: " + ", ".join(
                f"{k} {c.distance[k]:.3g} (sem {c.sem[k]:.2g})" for k in ("q", "m", "theta", "test_error")))
    if args.out is not None:
        from attnphase.plots.dynamics import plot_dynamics

        paths = plot_dynamics(ode_curve, args.out, sims=sims, extra_ode=extra,
                              title=f"online SGD, omega = {setting.omega:g}, lr = {args.lr:g}, s = {args.init_scale:g}")
        _note(args, "wrote " + ", ".join(str(p) for p in paths))
    if args.json or args.csv:
        emit(records, args, COLUMNS if args.csv else None)
    else:
        emit(_thin(records), args, COLUMNS)
    return 0


def _thin(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """About TABLE_ROWS time points per source for the terminal."""
    out = []
    for src in dict.fromkeys(r["source"] for r in records):
        rows = [r for r in records if r["source"] == src]
        step = max(1, math.ceil((len(rows) - 1) / (TABLE_ROWS - 1)))
        out += rows[::step] + ([rows[-1]] if (len(rows) - 1) % step else [])
    return out


def _diagram(args: argparse.Namespace, setting: Any) -> int:
    from attnphase.experiments.online.diagram import dynamical_diagram

    omegas = parse_spec(args.omegas, "--omegas")
    axis, values = ("lr", parse_spec(args.lrs, "--lrs")) if args.lrs else \
        ("init_scale", parse_spec(args.init_scales or "0.01,0.1,1", "--init-scales"))
    for w in omegas:
        setting.replace(omega=w)
    if any(v <= 0 for v in values):
        raise CLIError(f"--{'lrs' if axis == 'lr' else 'init-scales'} must be > 0")
    cells = dynamical_diagram(setting, omegas, values, axis=axis, lr=args.lr, init_scale=args.init_scale, d=args.d,
                              t_max=args.t_max, n_points=args.n_points, seed=args.ode_seed,
                              progress=not args.no_progress)
    records = [c.to_dict() for c in cells]
    alpha_c = None
    if args.static:
        from attnphase.theory import transition

        res = [transition(setting.replace(omega=w), precision="fast") for w in omegas]
        alpha_c = {"omega": omegas, "alpha_c": [r.alpha_c for r in res]}
        for rec in records:
            rec["alpha_c"] = alpha_c["alpha_c"][omegas.index(rec["omega"])]
    if args.out is not None:
        from attnphase.plots.dynamics import plot_dynamical_diagram

        paths = plot_dynamical_diagram(records, args.out, y=axis, alpha_c=alpha_c,
                                       title=f"online SGD from a random start at d = {args.d} (ODE), t_max = "
                                             f"{args.t_max:g}")
        _note(args, "wrote " + ", ".join(str(p) for p in paths))
    emit(records, args, DIAGRAM_COLUMNS + (["alpha_c"] if args.static else []))
    return 0
