"""Benchmark of the finite-d experiments: optimisers, whole processes, and the basins sweep's throughput.

    python benchmarks/simulation.py                       # all three parts at the issue's sizes
    python benchmarks/simulation.py --parts process --repeat 3
    python benchmarks/simulation.py --parts optimizers --d 200 --steps 1000

Parts:
* optimizers: in one process, the optimisation time of the study's 5000-step gradient descent and of L-BFGS on
  the same problem (sampling and test set identical, left out), the final rms gradient, losses, overlaps and the
  differences between the two end points.
* process: whole-process time of `attnphase simulate --d 1000 --alpha 2 --optimizer lbfgs` against the same
  command with `--optimizer gd` (5000 steps): start-up, imports, sampling, training, test set and linear
  baseline included.  Wall time and CPU time (user + sys of the child) are both printed: on a busy machine the
  CPU time is the stable figure.  Goal: gd / lbfgs >= 10.
* basins: starts per minute of `attnphase basins` at d = 500 with 2 worker processes (default training:
  1000 GD steps then L-BFGS; the theory's fixed points are solved once per worker and (alpha, omega)).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings

import torch

from attnphase import Setting
from attnphase.cli.common import format_table
from attnphase.experiments.simulation import simulate


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _run(cmd: list[str]) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(os.path.dirname(__file__), "..", "src"),
                                                       os.environ.get("PYTHONPATH", "")])}
    c0, t0 = _child_cpu(), time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0, _child_cpu() - c0


def part_optimizers(args: argparse.Namespace) -> None:
    setting = Setting(omega=args.omega)
    # one-time costs must not be billed to the first timed run
    simulate(setting, 8, 1.0, optimizer="lbfgs", n_test=1, device=args.device)
    rows, diffs = [], []
    for init in args.inits.split(","):
        res = {}
        for opt, extra in (("gd", {"steps": args.steps}), ("lbfgs", {})):
            r = simulate(setting, args.d, args.alpha, init=init, optimizer=opt, seed=args.seed,
                         n_test=args.n_test, device=args.device, **extra)
            res[opt] = r
            rows.append({"init": init, "optimizer": opt, "seconds": r.train_seconds, "steps": r.steps,
                         "evals": r.evaluations, "grad_rms": r.grad_rms, "converged": r.converged,
                         "train_loss": r.train_loss, "q": r.q, "m": r.m, "theta": r.theta,
                         "test_error": r.test_error})
            print(f"  done {init} {opt}: {r.train_seconds:.2f} s", file=sys.stderr, flush=True)
        gd, lb = res["gd"], res["lbfgs"]
        diffs.append({"init": init, "speedup": gd.train_seconds / lb.train_seconds,
                      "d_train_loss_rel": (gd.train_loss - lb.train_loss) / lb.train_loss,
                      "d_q": gd.q - lb.q, "d_m": gd.m - lb.m, "d_theta": gd.theta - lb.theta,
                      "d_test_error": gd.test_error - lb.test_error})
    print(f"\n[optimizers] d = {args.d}, alpha = {args.alpha}, omega = {args.omega}, seed = {args.seed}, "
          f"torch threads = {torch.get_num_threads()}")
    print(format_table(rows, list(rows[0])))
    print("gd - lbfgs (speedup = gd seconds / lbfgs seconds, optimisation only)")
    print(format_table(diffs, list(diffs[0])))


def part_process(args: argparse.Namespace) -> None:
    base = [sys.executable, "-m", "attnphase", "simulate", "--d", str(args.process_d), "--alpha",
            str(args.process_alpha), "--device", args.process_device, "--json"]
    rows = []
    for k in range(args.repeat):
        for opt in ("lbfgs", "gd"):
            wall, cpu = _run([*base, "--optimizer", opt])
            rows.append({"repeat": k, "optimizer": opt, "wall_s": wall, "cpu_s": cpu})
            print(f"  {opt}: {wall:.1f} s wall, {cpu:.1f} s cpu", file=sys.stderr, flush=True)
    wall_imp, cpu_imp = _run([sys.executable, "-c", "import attnphase.cli, attnphase.experiments.simulation"])

    def best(opt: str, key: str) -> float:
        return min(r[key] for r in rows if r["optimizer"] == opt)

    print(f"\n[process] attnphase simulate --d {args.process_d} --alpha {args.process_alpha} "
          f"--device {args.process_device} "
          f"(default n_test 10000); best of {args.repeat}; imports alone: {wall_imp:.1f} s wall, {cpu_imp:.1f} s cpu")
    print(format_table(rows, list(rows[0])))
    print(f"gd / lbfgs whole process: {best('gd', 'wall_s') / best('lbfgs', 'wall_s'):.1f}x wall, "
          f"{best('gd', 'cpu_s') / best('lbfgs', 'cpu_s'):.1f}x cpu")


def part_basins(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "b.sqlite")
        cmd = [sys.executable, "-m", "attnphase", "basins", "--store", store, "--d", str(args.basins_d),
               "--alphas", "1,2", "--omegas", "0.3", "--inits-per-point", str(args.basins_starts),
               "--init-scale", "1", "--workers", "2", "--no-progress", "--device", "cpu"]
        wall, cpu = _run(cmd)
    n = 2 * args.basins_starts
    print(f"\n[basins] d = {args.basins_d}, 2 workers, {n} starts (alphas 1, 2; omega 0.3; scale 1): "
          f"{wall:.1f} s wall, {cpu:.1f} s cpu -> {60 * n / wall:.1f} starts per minute (whole command)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="optimizers,process,basins")
    ap.add_argument("--d", type=int, default=1000)
    ap.add_argument("--alpha", type=float, default=2.0)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--steps", type=int, default=5000, help="gradient-descent steps (default 5000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-test", type=int, default=2000)
    ap.add_argument("--inits", default="positional,semantic")
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--process-d", type=int, default=1000)
    ap.add_argument("--process-alpha", type=float, default=2.0)
    ap.add_argument("--process-device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--basins-d", type=int, default=500)
    ap.add_argument("--basins-starts", type=int, default=4, help="starts per alpha (2 alphas)")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    if args.threads:
        torch.set_num_threads(args.threads)
    parts = args.parts.split(",")
    if "optimizers" in parts:
        part_optimizers(args)
    if "process" in parts:
        part_process(args)
    if "basins" in parts:
        part_basins(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
