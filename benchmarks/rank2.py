"""The study's appendix case: a rank-2 student (L = 2, r = 2, r* = 1, antipodal codes) against the rank-1 student.

    python benchmarks/rank2.py [--alphas 0.25:2:8] [--omega 0.3] [--d 500] [--seeds 0,1,2] [--precision fast]
                               [--out results/rank2] [--no-sim]

Computes the records (theory: every branch of each rank along alpha by continuation, plus the global minimum
of each rank, i.e. the valid branch with the lowest training loss; rank 2 includes the "free" branch, the mixed
minimum with one direction positional and one semantic; simulation: lbfgs from the positional and the semantic
start, several seeds), writes OUT.json and draws OUT.png / OUT.pdf with attnphase.plots.rank (the same figure as
`attnphase plot rank2 --records OUT.json --out OUT`).  Prints a table of the global minima.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from attnphase import Setting
from attnphase.cli.common import format_table, parse_spec
from attnphase.plots.rank import plot_rank_test_error, simulation_points, theory_series

BRANCHES = {1: ("positional", "semantic"), 2: ("positional", "semantic", "free")}


def free_curve(setting: Setting, alphas: list[float], precision: str, rank1: dict) -> list:
    """Rank-2 free branch by continuation upward in alpha, each alpha retried from the mixed start."""
    from attnphase.theory import solve
    from attnphase.theory.state_evolution.starts import mixed_start_from

    out, prev = [], None
    for a in alphas:
        start = mixed_start_from(rank1[("semantic", a)], rank1[("positional", a)], setting)
        fp = solve(setting, a, "free", precision, init=prev if prev is not None else start)
        if not fp.valid and prev is not None:
            fp = solve(setting, a, "free", precision, init=start)
        out.append(fp)
        prev = fp if fp.valid else None
    return out


def theory_rows(setting: Setting, rank: int, alphas: list[float], precision: str,
                rank1: dict | None = None) -> list[dict]:
    from attnphase.theory import solve_curve

    s = setting.replace(r=rank)
    rows: list[dict] = []
    for branch in BRANCHES[rank]:
        t0 = time.perf_counter()
        curve = free_curve(s, alphas, precision, rank1) if branch == "free" else solve_curve(s, alphas, branch,
                                                                                              precision)
        if rank == 1 and rank1 is not None:
            rank1.update({(branch, fp.alpha): fp for fp in curve})
        for fp in curve:
            rows.append({"rank": rank, "branch": branch, "alpha": fp.alpha, "status": fp.status.value,
                         "train_loss": fp.train_loss, "test_error": fp.test_error,
                         "test_error_err": fp.errors.get("test_error"), "m": fp.summary()["m"],
                         "theta": fp.summary()["theta"], "seconds": fp.seconds})
        print(f"theory rank {rank} {branch}: {time.perf_counter() - t0:.0f} s", flush=True)
    for a in alphas:
        ok = [r for r in rows if r["alpha"] == a and r["status"] == "ok"]
        if ok:
            g = min(ok, key=lambda r: r["train_loss"])
            rows.append({**g, "branch": "global", "of": g["branch"]})
    return rows


def simulation_rows(setting: Setting, rank: int, alphas: list[float], d: int, seeds: list[int]) -> list[dict]:
    import torch

    from attnphase.experiments.simulation import simulate

    torch.set_num_threads(1)
    s = setting.replace(r=rank)
    rows = []
    for a in alphas:
        for init in ("positional", "semantic"):
            for seed in seeds:
                res = simulate(s, d=d, alpha=a, init=init, optimizer="lbfgs", seed=seed)
                rows.append({"rank": rank, "alpha": a, "init": init, "seed": seed, "d": d,
                             "train_loss": res.train_loss, "test_error": res.test_error,
                             "q": np.atleast_2d(res.q).tolist(), "m": np.asarray(res.m, float).tolist(),
                             "theta": np.atleast_2d(res.theta).tolist(), "converged": res.converged})
        print(f"simulations rank {rank} alpha {a:g} done", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alphas", default="0.25:2:8")
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--d", type=int, default=500)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--precision", default="fast")
    ap.add_argument("--out", default="results/rank2")
    ap.add_argument("--no-sim", action="store_true", help="theory only")
    args = ap.parse_args()
    alphas = sorted(set(parse_spec(args.alphas, "--alphas")))
    seeds = [int(s) for s in args.seeds.split(",")]
    setting = Setting(L=2, r_star=1, positions="antipodal", omega=args.omega)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    records: dict = {"setting": setting.to_dict(), "d": args.d, "precision": args.precision,
                     "theory": [], "simulation": []}
    rank1: dict = {}
    for rank in (1, 2):
        records["theory"] += theory_rows(setting, rank, alphas, args.precision, rank1)
        json.dump(records, open(out.with_suffix(".json"), "w"), indent=1)
    if not args.no_sim:
        for rank in (1, 2):
            records["simulation"] += simulation_rows(setting, rank, alphas, args.d, seeds)
            json.dump(records, open(out.with_suffix(".json"), "w"), indent=1)
    from attnphase.theory import linear_baseline

    lin = float(linear_baseline(setting).test_error_linear)
    records["test_error_linear"] = lin
    json.dump(records, open(out.with_suffix(".json"), "w"), indent=1)
    paths = plot_rank_test_error(records, out, omega=args.omega, d=args.d, test_error_linear=lin)
    table = []
    for rank in (1, 2):
        ta, tt = theory_series(records["theory"], rank, "global")
        sa, sm, se = simulation_points(records["simulation"], rank, args.d)
        of = {r["alpha"]: r["of"] for r in records["theory"] if r["rank"] == rank and r["branch"] == "global"}
        for a, t in zip(ta, tt, strict=True):
            i = np.flatnonzero(np.isclose(sa, a))
            table.append({"rank": rank, "alpha": a, "theory branch": of.get(a, "-"), "theory test error": t,
                          "sim test error": sm[i[0]] if len(i) else float("nan"),
                          "sim sem": se[i[0]] if len(i) else float("nan")})
    print(format_table(table, ["rank", "alpha", "theory branch", "theory test error", "sim test error", "sim sem"]))
    print(f"linear baseline test error {lin:.6g}")
    for p in paths:
        print(p)


if __name__ == "__main__":
    main()
