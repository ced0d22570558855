"""The rank-2 teacher's semantic branch near its end: the training loss at fixed theta, theory against simulation.

    python benchmarks/rank2_teacher_landscape.py [--alphas 2,4] [--seeds 0,1,2,3] [--d 500] [--precision fast]
                                                 [--json out.json]

(L, r, r*) = (2, 1, 2), antipodal, omega = 0.3.  Theory: E(t) = the replica-symmetric training loss with
theta = (t, 0) held and m = 0 (theory.landscape.constrained_fixed_point, continued along t).  Simulation (whitened
teacher, tests/test_engine_vs_simulation.py whitened_problem; lbfgs): the training loss minimised over Q with
theta = (t, 0) and m = 0 held exactly (constrained_sim_record), i.e. the content loss the theory's energy is compared
with.  Per seed and t the lowest of three starts:
  cont    : continuation in t from the free simulation's minimum (semantic start; the teacher's frame rotated so
            that its theta is (t, 0)), downward and upward from its theta;
  teacher : Q along the teacher's first column only (u = 0);
  random  : u with iid entries (q ~ 0.18).
Printed: per alpha and t the theory's E, test error, q and slope dE/dt, and the simulation's lowest E (mean +- sem
over seeds), its excess over the theory, the paired difference E_sim(t) - E_sim(t_ref) against the theory's
(t_ref: the largest t), and the mean losses of each start.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

from attnphase.cli.common import format_table

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from test_engine_vs_simulation import constrained_sim_record, setting_of, whitened_problem  # noqa: E402

SHAPE = (2, 1, 2, "antipodal")
COLUMNS = ["t", "E theory", "E sim (best start)", "excess", "dE theory vs t_ref", "dE sim (paired)",
           "test th / sim", "q th / sim", "dE/dt th", "sim cont teacher random", "status"]
TS = (0.06, 0.10, 0.12, 0.14, 0.16, 0.18, 0.21)


def theory_curve(setting, alpha: float, ts, precision: str) -> dict[float, dict]:  # noqa: ANN001
    from attnphase.theory import solve
    from attnphase.theory.state_evolution.landscape import energy_curve

    fp = solve(setting, alpha, "semantic", precision)
    init = fp if fp.valid else None
    # continue outward from the free fixed point's theta (or downward from the largest t)
    t0 = float(fp.overlaps.theta[0, 0]) if fp.valid else max(ts)
    down = sorted([t for t in ts if t <= t0], reverse=True)
    up = sorted(t for t in ts if t > t0)
    pts = energy_curve(setting, alpha, down, "semantic", precision, init=init)
    pts += energy_curve(setting, alpha, up, "semantic", precision, init=init)
    out = {}
    for t, cp in zip(down + up, pts, strict=True):
        out[t] = {"E": cp.train_loss, "E_err": cp.errors.get("train_loss", np.nan), "test": cp.test_error,
                  "q": float(cp.overlaps.q[0, 0]), "slope": float(cp.slope[0, 0]), "status": cp.status.value}
    out["free"] = {"theta": float(fp.overlaps.theta[0, 0]), "E": fp.train_loss, "status": fp.status.value}
    return out


def free_minimum(setting, d: int, alpha: float, seed: int):  # noqa: ANN001, ANN201
    """The free simulation's minimum from the semantic start on the whitened problem, with the teacher's frame
    rotated (an exact symmetry: the labels depend on Q* only through Q* Q*^T) so that its theta is (|theta|, 0)."""
    import torch

    from attnphase.experiments.simulation.experiment import initial_Q
    from attnphase.experiments.simulation.measure import overlaps
    from attnphase.experiments.simulation.model import EmpiricalRisk
    from attnphase.experiments.simulation.training import train

    torch.set_num_threads(1)
    pb = whitened_problem(setting, d, alpha, seed)
    Q, _ = train(EmpiricalRisk(pb.train, pb.p, setting.lam), initial_Q("semantic", pb, seed)[0], "lbfgs")
    th = overlaps(Q, pb.Q_star, setting.sigma, pb.p).theta.ravel()
    n = float(np.linalg.norm(th))
    R = torch.as_tensor(np.array([[th[0], -th[1]], [th[1], th[0]]]) / n, dtype=pb.Q_star.dtype)
    pb.Q_star = pb.Q_star @ R
    return pb, Q.numpy(), n


def simulate_curve(setting, alpha: float, ts, seed: int, d: int) -> dict[float, dict]:  # noqa: ANN001
    pb, Qf, tf = free_minimum(setting, d, alpha, seed)
    out: dict[float, dict] = {t: {} for t in ts}
    for order in (sorted([t for t in ts if t <= tf], reverse=True), sorted(t for t in ts if t > tf)):
        prev = Qf
        for t in order:
            rec = constrained_sim_record(setting, t, seed, d=d, alpha=alpha, start=prev, problem=pb)
            prev = rec.pop("Q")
            out[t]["cont"] = rec
    for t in ts:
        for start in ("teacher", "random"):
            rec = constrained_sim_record(setting, t, seed, d=d, alpha=alpha, start=start, problem=pb)
            rec.pop("Q")
            out[t][start] = rec
    out["free_theta"] = tf
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alphas", default="2,4")
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--d", type=int, default=500)
    ap.add_argument("--precision", default="fast")
    ap.add_argument("--ts", default=",".join(str(t) for t in TS))
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    setting = setting_of(SHAPE)
    alphas = [float(a) for a in args.alphas.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    ts = [float(t) for t in args.ts.split(",")]
    record = {}
    for alpha in alphas:
        t0 = time.perf_counter()
        th = theory_curve(setting, alpha, ts, args.precision)
        sims = [simulate_curve(setting, alpha, ts, s, args.d) for s in seeds]
        rows = []
        tref = max(ts)
        best = {t: np.array([min(r[t][k]["train_loss"] for k in ("cont", "teacher", "random")) for r in sims])
                for t in ts}
        for t in ts:
            v = best[t]
            k = len(v)
            sem = float(v.std(ddof=1) / np.sqrt(k)) if k > 1 else float("nan")
            diff = v - best[tref]
            dsem = float(diff.std(ddof=1) / np.sqrt(k)) if k > 1 else float("nan")
            starts = {s: float(np.mean([r[t][s]["train_loss"] for r in sims])) for s in ("cont", "teacher", "random")}
            test = float(np.mean([min((r[t][s] for s in starts), key=lambda x: x["train_loss"])["test_error"]
                                  for r in sims]))
            q = float(np.mean([min((r[t][s] for s in starts), key=lambda x: x["train_loss"])["q"] for r in sims]))
            rows.append([f"{t:.2f}", f"{th[t]['E']:.6f}", f"{v.mean():.6f} +- {sem:.6f}",
                         f"{100 * (v.mean() / th[t]['E'] - 1):+.1f}%",
                         f"{th[t]['E'] - th[tref]['E']:+.6f}", f"{diff.mean():+.6f} +- {dsem:.6f}",
                         f"{th[t]['test']:.5f} / {test:.5f}", f"{th[t]['q']:.4f} / {q:.4f}", f"{th[t]['slope']:+.5f}",
                         " ".join(f"{starts[s]:.6f}" for s in ("cont", "teacher", "random")), th[t]["status"]])
        print(f"\nalpha = {alpha}: theory free fixed point theta {th['free']['theta']:.4f} ({th['free']['status']}), "
              f"E {th['free']['E']:.6f}; simulated free theta "
              f"{np.mean([r['free_theta'] for r in sims]):.4f} (d = {args.d}, seeds {args.seeds}; "
              f"{time.perf_counter() - t0:.0f} s)")
        print(format_table([dict(zip(COLUMNS, row, strict=True)) for row in rows], COLUMNS))
        record[str(alpha)] = {"theory": {str(k): v for k, v in th.items()},
                              "sims": [{str(k): v for k, v in r.items()} for r in sims]}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(record, indent=1, default=float))


if __name__ == "__main__":
    main()
