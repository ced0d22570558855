"""GAMP at finite d against the Bayes-optimal state evolution (issue 19; the numbers quoted in docs/bayes.md).

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/bayes.py --d 3000 --seeds 0:3 --alphas 0.12,0.3,0.8 --json out.json

For each alpha and start (informative q0 = 0.2, random) it runs GAMP on the package's sampled data for every seed
and prints the mean and standard error of the final overlap and test error next to the state evolution's fixed
point from the same start (and the per-iteration comparison of the first iterations).  --omegas checks that the
overlap does not depend on omega < 1 (the same seed gives the same fields, so the same overlap to round-off).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from attnphase import Setting
from attnphase.cli.common import parse_int_spec, parse_spec
from attnphase.theory.bayes import iterate
from attnphase.theory.bayes.amp import run_amp
from attnphase.theory.bayes.observables import bayes_test_error


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=3000)
    p.add_argument("--L", type=int, default=2)
    p.add_argument("--alphas", default="0.12,0.3,0.8")
    p.add_argument("--omegas", default="0.3")
    p.add_argument("--seeds", default="0:3")
    p.add_argument("--inits", default="informative,random")
    p.add_argument("--q0", type=float, default=0.2)
    p.add_argument("--delta", type=float, default=0.0)
    p.add_argument("--n-test", type=int, default=1000)
    p.add_argument("--json", default=None, help="write the rows here")
    p.add_argument("--figures", default=None, metavar="DIR",
                   help="instead: the comparison figure and the phase diagram (ERM at precision fast over --diagram-omegas, "
                        "GAMP at --d over --seeds) into DIR, records in DIR/bayes.json")
    p.add_argument("--diagram-omegas", default="0,0.1,0.2,0.3,0.4")
    args = p.parse_args()
    if args.figures:
        return figures(args)
    rows = []
    for omega in parse_spec(args.omegas):
        setting = Setting(omega=omega, L=args.L)
        for alpha in parse_spec(args.alphas):
            for init in args.inits.split(","):
                runs = [run_amp(setting, args.d, alpha, seed=s, delta=args.delta, n_test=args.n_test, init=init,
                                q0=args.q0) for s in parse_int_spec(args.seeds)]
                m = np.array([r.overlap for r in runs])
                te = np.array([r.test_error for r in runs])
                k = len(runs)
                se = iterate(alpha, args.q0 if init == "informative" else 1e-4, 2000, args.L, args.delta)
                q_se = float(se[-1])
                early = [float(np.mean([r.history_overlap[min(t, len(r.history_overlap) - 1)] for r in runs]))
                         for t in (1, 2, 5, 10)]
                row = {"omega": omega, "alpha": alpha, "init": init, "d": args.d, "L": args.L, "seeds": k,
                       "overlap_mean": float(m.mean()), "overlap_sem": float(m.std(ddof=1) / np.sqrt(k)) if k > 1 else None,
                       "overlap_se": q_se, "test_error_mean": float(te.mean()),
                       "test_error_sem": float(te.std(ddof=1) / np.sqrt(k)) if k > 1 else None,
                       "test_error_se": bayes_test_error(setting, q_se, args.delta)[0],
                       "iterations": [r.iterations for r in runs], "converged": [r.converged for r in runs],
                       "seconds_per_run": float(np.mean([r.seconds for r in runs])),
                       "overlaps": m.tolist()}
                if init == "informative":
                    row["early_amp"] = early
                    row["early_se"] = [float(se[min(t, len(se) - 1)]) for t in (1, 2, 5, 10)]
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


def figures(args: argparse.Namespace) -> None:
    from pathlib import Path

    from attnphase.reproduce.bayes_section import bayes_section
    from attnphase.theory.transition.diagram import phase_diagram

    omega = parse_spec(args.omegas)[0]
    setting = Setting(omega=omega, L=args.L)
    omegas = sorted(set(parse_spec(args.diagram_omegas)) | {omega})
    t0 = time.perf_counter()
    diagram = phase_diagram(setting, omegas, precision="fast", progress=False, workers=1)
    t_erm = time.perf_counter() - t0
    tr = next(t for t in diagram if abs(t.omega - omega) < 1e-12)
    from attnphase.theory.state_evolution.curves import solve_curves

    t1 = time.perf_counter()
    erm_alphas = [float(a) for a in np.linspace(0.1, 2.0, 20)]
    curves = solve_curves(setting, erm_alphas, ("positional", "semantic"), precision="fast")
    t_erm += time.perf_counter() - t1
    alphas = [float(a) for a in np.linspace(0.01, 2.0, 200)]
    records, paths = bayes_section(setting, alphas, args.figures, quick=False, delta=args.delta, transition_result=tr,
                                   diagram=diagram, curves=curves, amp_d=args.d, amp_seeds=parse_int_spec(args.seeds),
                                   amp_alphas=parse_spec(args.alphas))
    records.append({"kind": "erm_transitions", "rows": [t.to_dict() for t in diagram], "seconds": t_erm})
    records.append({"kind": "erm_curves", "omega": omega,
                    "rows": [{"branch": b, "alpha": p.alpha, "test_error": p.test_error, "train_loss": p.train_loss,
                              "status": str(p.status.value)} for b, pts in curves.items() for p in pts]})
    Path(args.figures, "bayes.json").write_text(json.dumps(records, indent=1, default=float))
    print("wrote", ", ".join(str(p) for p in paths), f"(ERM {t_erm:.0f} s)")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"# {time.perf_counter() - t0:.1f} s")
