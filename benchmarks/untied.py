"""Benchmark: tied vs untied student against alpha (issue 10): test error and overlaps, both structured starts and
random starts, several seeds, each next to its own theory (tied rows: the tied fixed points; untied rows: the
untied student's fixed points, solve(Setting(student="untied"), ...)).

    python benchmarks/untied.py                                  # omega = 0.3, d = 500, alphas 0.5,1,1.5,2
    python benchmarks/untied.py --d 200 --seeds 0:1 --json out.json
    python benchmarks/untied.py --students untied --inits positional,semantic --alphas 1,1.5,2 --seeds 0:8

Each run is `simulate(..., optimizer="lbfgs")` (50 GD warm-up steps, then L-BFGS to g_rms <= 1e-9).  The table
has one row per (alpha, student, init): mean and standard error over seeds of test_error, train_loss, m and
theta (untied: geometric means of the Q and K overlaps), the class of the end point by the basins rule
(counts), and the theory's test error, train loss and overlaps of the matching branch.  The *_in columns
repeat test_error, train_loss, m and theta over the runs that ended in the start's branch (counted in in_branch;
positional: m > theta; semantic: theta > m): at d = 500 some semantic starts leave their branch.

--json writes {"setting", "d", "seeds", "rows", "theory", "runs"}: "theory" holds both branches of each student's
theory at each alpha ({"student", "branch", "alpha", "status", "test_error", "train_loss", "m", "theta"}), the
values the figure draws; --plot FILE draws the figure (FILE.png, FILE.pdf) with attnphase.plots.untied, the same
as `attnphase plot untied --records JSON --out FILE` (docs/img/untied.png:
    python benchmarks/untied.py --d 500 --alphas 0.5,1,1.5,2 --seeds 0:3 --json docs/img/untied.json \
        --plot docs/img/untied.png).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings

from attnphase import Setting
from attnphase.cli.common import check_output_file, format_table, parse_int_spec, parse_spec
from attnphase.experiments.simulation import simulate
from attnphase.experiments.simulation.basins import classify, theory_points
from attnphase.theory import solve


def _ms(v: list[float]) -> tuple[float, float]:
    k = len(v)
    m = sum(v) / k
    se = math.sqrt(sum((x - m) ** 2 for x in v) / (k - 1) / k) if k > 1 else float("nan")
    return m, se


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=500)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--alphas", default="0.5,1,1.5,2")
    ap.add_argument("--seeds", default="0:2")
    ap.add_argument("--inits", default="positional,semantic,random")
    ap.add_argument("--init-scale", type=float, default=1.0, help="scale of the random starts (default 1)")
    ap.add_argument("--n-test", type=int, default=2000)
    ap.add_argument("--students", default="tied,untied")
    ap.add_argument("--precision", default="fast", help="precision of the untied theory (default fast)")
    ap.add_argument("--json", default=None, help="also write the rows, the theory and every run's record to this file")
    ap.add_argument("--plot", default=None,
                    help="also draw the figure (FILE.png, FILE.pdf) with attnphase.plots.untied from the same records")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    setting = Setting(omega=args.omega)
    seeds = parse_int_spec(args.seeds, "--seeds")
    if args.plot:
        check_output_file(args.plot, "--plot", create_parents=True)  # fail now, not after the runs
    students = args.students.split(",")
    rows, records, theory = [], [], []
    t0 = time.perf_counter()
    for alpha in parse_spec(args.alphas, "--alphas"):
        points = theory_points(setting, alpha)
        untied_fp = {}
        # Both branches of each student's theory, whatever the inits: the figure draws them as lines.
        for student in students:
            for branch in ("positional", "semantic"):
                if student == "untied":
                    fp = untied_fp[branch] = solve(Setting(omega=args.omega, student="untied"), alpha, branch,
                                                   precision=args.precision)
                    summ = fp.summary()
                    t = {"status": "ok" if fp.valid else str(fp.status), "test_error": fp.test_error,
                         "train_loss": fp.train_loss, "m": summ["m"], "theta": summ["theta"]}
                else:
                    pt = points[branch]
                    t = {"status": "ok" if pt.exists else pt.status, "test_error": pt.test_error,
                         "train_loss": pt.train_loss, "m": pt.m, "theta": pt.theta}
                theory.append({"student": student, "branch": branch, "alpha": alpha,
                               **{k: (float(v) if k != "status" and math.isfinite(float(v)) else
                                      (v if k == "status" else None)) for k, v in t.items()}})
        for student in students:
            for init in args.inits.split(","):
                runs = []
                for s in seeds:
                    r = simulate(setting, args.d, alpha, init=init, optimizer="lbfgs", seed=s, n_test=args.n_test,
                                 student=student, init_scale=args.init_scale if init == "random" else None)
                    rec = r.to_dict()
                    rec["basin"] = classify(r.m, r.theta, points)
                    runs.append(rec)
                    records.append(rec)
                    print(f"  alpha={alpha:g} {student} {init} seed={s}: {rec['basin']} "
                          f"({r.seconds:.1f} s, {time.perf_counter() - t0:.0f} s total)", file=sys.stderr, flush=True)
                row = {"alpha": alpha, "student": student, "init": init, "seeds": len(runs),
                       "converged": sum(bool(x["converged"]) for x in runs)}
                for k in ("test_error", "train_loss", "m", "theta"):
                    row[k], row[f"{k}_se"] = _ms([float(x[k]) for x in runs])
                row["classes"] = "/".join(f"{sum(x['basin'] == c for x in runs)}{c[0]}"
                                          for c in ("positional", "semantic", "other"))
                branch = "semantic" if init == "semantic" else "positional"
                inside = [x for x in runs if (x["theta"] > x["m"]) == (branch == "semantic")]
                row["in_branch"] = len(inside)
                for k in ("test_error", "train_loss", "m", "theta"):
                    row[f"{k}_in"], row[f"{k}_in_se"] = _ms([float(x[k]) for x in inside]) if inside else (None, None)
                if student == "untied":
                    if branch not in untied_fp:
                        untied_fp[branch] = solve(Setting(omega=args.omega, student="untied"), alpha, branch,
                                                  precision=args.precision)
                    fp = untied_fp[branch]
                    ok = fp.valid
                    row["theory_branch"] = branch if ok else f"{branch} ({fp.status})"
                    row["theory_test_error"] = fp.test_error if ok else None
                    row["theory_train_loss"] = fp.train_loss if ok else None
                    row["theory_m"], row["theory_theta"] = (fp.summary()["m"], fp.summary()["theta"]) if ok else (None,
                                                                                                                None)
                else:
                    fp = points[branch]
                    row["theory_branch"] = branch if fp.exists else f"{branch} (absent)"
                    row["theory_test_error"] = fp.test_error if fp.exists else None
                    row["theory_train_loss"] = fp.train_loss if fp.exists else None
                    row["theory_m"], row["theory_theta"] = (fp.m, fp.theta) if fp.exists else (None, None)
                rows.append(row)
    print(f"d = {args.d}, omega = {args.omega}, seeds {seeds}, lbfgs; classes: positional/semantic/other counts")
    print(format_table(rows, list(rows[0])))
    out = {"setting": {"omega": args.omega}, "d": args.d, "seeds": seeds, "rows": rows, "theory": theory,
           "runs": records}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    if args.plot:
        from attnphase.plots.untied import plot_untied

        for path in plot_untied(out, args.plot, omega=args.omega, d=args.d):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
